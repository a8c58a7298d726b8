"""``log_sl`` on the zonal domain: the circle's log-domain semi-Lagrangian scheme run on the
even extension of the law of the polar angle."""

from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np

from .._types import Array
from ..exceptions import ConfigError
from ..grids import CircleGrid, ZonalGrid
from ._base import Scheme, register_scheme
from ._circle_log_sl import _EDGE, DEFAULT_TOLERANCE, LOG_FLOOR, LogSemiLagrangianScheme
from ._zonal_fv import ZonalFiniteVolumeScheme

LOG2 = math.log(2.0)


@register_scheme
class ZonalLogSemiLagrangianScheme(LogSemiLagrangianScheme):
    """The circle's ``log_sl`` (log g and centroids, exact characteristics of the piecewise
    linear face velocity, error-controlled steps: :class:`LogSemiLagrangianScheme`) on the
    interval [0, pi] with its two zero-flux ends.

    The interval is run as the circle of 2n cells of h = pi / n that carries the even extension
    g(|psi|) / 2: the cells j and 2n - 1 - j are mirror images (the same log value, opposite
    centroid offsets), and the face velocity is odd (v(2 pi - theta) = -v(theta), 0 at the
    poles, which are faces), so the remap keeps the symmetry and no mass crosses a pole. The
    velocity comes from the upper half: the zonal sums from log g at the cells' centroids
    (:class:`~spheredens.interaction.ZonalLogSums`), or the zero-temperature field. The file
    holds the upper half: g = 2 exp(ell), its log and its centroids.
    """

    domain = "zonal"
    resolution = ZonalFiniteVolumeScheme.resolution
    #: per cell of [0, pi]: the even extension's two cells, each with its remap's pieces
    work_bytes_per_point = 1600.0
    grid_spacing = ZonalFiniteVolumeScheme.grid_spacing

    @classmethod
    def memory_sizes(cls, options: Mapping[str, Any]) -> tuple[int, int, float]:
        """n cells (2n in the state: the even extension, with centroids), n + 1 faces."""
        n = cls.resolution.of(options)
        return n, n + 1, 8.0 * 4 * n

    def __init__(
        self, problem: Any, *, n: int = 256, tolerance: float = DEFAULT_TOLERANCE, **common: Any
    ) -> None:
        circle = CircleGrid(2 * n, offset=0.5)
        self.faces = self.velocity_grid = circle.shifted(0.5)  # face j at (j + 1) h
        Scheme.__init__(self, problem, ZonalGrid(n, int(problem.domain_parameters["d"])), **common)
        self.setup_steps(tolerance)

    #: log g and centroids on the cells of [0, pi] (its ``evaluator_inputs``); the velocity at
    #: the n + 1 faces, as for ``fv``
    layout = ZonalFiniteVolumeScheme.layout

    def attributes(self) -> dict[str, Any]:
        return {**super().attributes(), "zonal_dimension": self.grid.dimension}

    # -- state: the even extension -----------------------------------------------------------
    def initial_state(self) -> Array:
        """(ell, offsets) on the 2n cells of the even extension, shape (n_xi, 2, 2n): the log
        cell averages of g_0 / 2 (8-point Gauss in logs, normalized to unit mass) and their
        centroid offsets, mirrored."""
        nodes, wts = np.polynomial.legendre.leggauss(8)
        h = self.grid.h
        theta = self.grid.theta[:, None] + 0.5 * h * nodes[None, :]
        out = []
        for f in self.problem.slice_initials():
            logs = np.asarray(f.log_polar_law(theta), dtype=float) + np.log(0.5 * wts)
            top = logs.max(axis=1)
            if not np.isfinite(top.max()):
                raise ConfigError(
                    "initial",
                    "the initial density sampled on this grid has no finite positive mass, so "
                    "no initial state can be formed (nothing was written); make it wider",
                )
            finite = np.isfinite(top)
            w = np.exp(logs - np.where(finite, top, 0.0)[:, None])
            ell = np.full(self.grid.n, -np.inf)
            ell[finite] = top[finite] + np.log(w[finite].sum(axis=1))
            offset = np.zeros(self.grid.n)
            offset[finite] = 0.5 * (w[finite] @ nodes) / w[finite].sum(axis=1)
            mass_top = ell.max()
            ell -= mass_top + math.log(np.sum(np.exp(ell - mass_top)) * h)
            ell = np.maximum(ell - LOG2, LOG_FLOOR)  # the even extension carries g / 2
            offset = np.clip(offset, -0.5 * _EDGE, 0.5 * _EDGE)
            out.append(
                np.stack(
                    [np.concatenate([ell, ell[::-1]]), np.concatenate([offset, -offset[::-1]])]
                )
            )
        return np.stack(out)

    def density(self, state: Array) -> Array:
        """g = 2 exp(ell) on the upper half."""
        with np.errstate(under="ignore"):
            return 2.0 * np.exp(state[:, 0, : self.grid.n])

    def log_density(self, state: Array) -> Array:
        """log g on the upper half."""
        return state[:, 0, : self.grid.n] + LOG2

    def centroids(self, state: Array) -> Array:
        """The centroid offsets of the upper half's cells (cell widths)."""
        return state[:, 1, : self.grid.n]

    def advance(self, state: Array, t: float, dt: float) -> Array:
        """The circle's step (:meth:`LogSemiLagrangianScheme.advance`), then the two halves made
        mirror images again by averaging each cell with its mirror (:meth:`symmetrized`)."""
        return self.symmetrized(super().advance(state, t, dt))

    @staticmethod
    def symmetrized(state: Array) -> Array:
        """Each cell and its mirror image replaced by their mean: log of the mean of the two
        cell averages, and the mass-weighted mean of the offset and the mirror's negated one.
        The remap moves the two halves by mirror-image feet, but not to the last bit: where a
        ring has collapsed far below a cell (width e^-(l2 r t)), the log-linear reconstruction
        turns the round-off of the positions into relative changes of 1e-9 per step; averaging
        keeps the total mass, and so each half's, to round-off."""
        ell, offset = state[:, 0], state[:, 1]
        mirror_ell, mirror_offset = ell[:, ::-1], -offset[:, ::-1]
        mean = np.logaddexp(ell, mirror_ell) - LOG2
        with np.errstate(invalid="ignore", over="ignore"):
            weight = np.where(np.isfinite(ell - mean), np.exp(np.minimum(ell - mean, 700.0)), 0.0)
            other = np.where(
                np.isfinite(mirror_ell - mean), np.exp(np.minimum(mirror_ell - mean, 700.0)), 0.0
            )
        total = weight + other
        mixed = np.where(
            total > 0.0,
            (weight * offset + other * mirror_offset) / np.where(total > 0.0, total, 1.0),
            0.0,
        )
        return np.stack([np.maximum(mean, LOG_FLOOR), mixed], axis=1)

    # -- velocity ----------------------------------------------------------------------------
    def tangential_velocity(self, state: Array) -> Array:
        """The face velocity of the even extension, shape (n_xi, 2n) (face j at (j + 1) h): the
        zonal velocity at the faces of [0, pi], and its odd mirror image below."""
        n = self.grid.n
        upper = np.stack([state[:, 0, :n] + LOG2, state[:, 1, :n]], axis=1)
        v = self.interaction.velocity(upper)[:, 0]  # (n_xi, n + 1): faces 0, h, ..., pi
        return np.concatenate([v[:, 1:], -v[:, n - 1 :: -1]], axis=1)
