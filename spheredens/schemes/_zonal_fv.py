"""Finite volumes for the law of the polar angle of a zonal density: the circle's scheme on
the interval [0, pi] with two zero-flux ends."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, Mapping

import numpy as np

from .._types import Array
from ..exceptions import ConfigError
from ..geometry import circle_points, circle_tangents
from ..grids import ZonalGrid
from ..interaction import Layout
from ._base import Scheme, Tendency, register_scheme
from ._circle_fv import LIMITERS, FiniteVolumeScheme, limited_slopes, upwind_flux


@register_scheme
class ZonalFiniteVolumeScheme(Scheme):
    """Finite volumes for d g / dt + d/dtheta (g v) = 0 on [0, pi], v(0) = v(pi) = 0.

    The circle's finite volumes (:class:`~spheredens.schemes.FiniteVolumeScheme`: the same
    limited slopes and upwind fluxes) on n cells of h = pi / n, with the fluxes through the
    two ends set to zero and one mirror ghost cell at each end for the slopes (g is even
    about each pole as a function on the great circle through the axis). The face velocity
    is the polar velocity of the zonal sums (:class:`~spheredens.interaction.ZonalSums`).
    The fluxes telescope, so sum_j g_j h is conserved to round-off; with SSP Runge-Kutta and
    ``time.cfl`` <= 0.5 the cell averages stay non-negative. For d = 2 and a density even
    about the axis this is, step for step, the circle's scheme on 2n cells.

    Options (``[discretization]``): ``n`` (default 256), ``limiter``, ``interaction``
    (``auto`` = ``zonal_sums``), ``integrator``.
    """

    name = "fv"
    domain = "zonal"
    options = ("n", "limiter", "interaction", "integrator", "allow_underresolved")
    evaluator_inputs = "polar_law"
    positive = True
    zero_temperature_order = 2.0
    #: 3 cells across the kernel width on [0, pi]: n >= 3 pi sqrt(beta sigma_max)
    resolution = replace(
        FiniteVolumeScheme.resolution,
        rule=(3.0 * math.pi, 1.0),
        cost="the zonal sums take n^2 kernel entries per right-hand side",
    )
    validate_own_options = FiniteVolumeScheme.validate_own_options

    @classmethod
    def grid_spacing(cls, options: Mapping[str, Any]) -> float:
        return math.pi / cls.resolution.of(options)

    @classmethod
    def memory_sizes(cls, options: Mapping[str, Any]) -> tuple[int, int, float]:
        """n cells, the velocity at n + 1 faces, n values per slice."""
        n = cls.resolution.of(options)
        return n, n + 1, 8.0 * n

    def __init__(self, problem: Any, *, n: int = 256, limiter: str = "mc", **common: Any) -> None:
        d = int(problem.domain_parameters["d"])
        super().__init__(problem, ZonalGrid(n, d), **common)
        self.limiter = limiter
        self._theta = LIMITERS[limiter]

    def layout(self) -> Layout:
        """The polar law on the cells; the velocity at the n + 1 faces (points of the meridian
        plane), along e_theta."""
        return Layout(
            "zonal",
            self.evaluator_inputs,
            self.grid,
            circle_points(self.grid.faces),
            frame=circle_tangents(self.grid.faces)[None],
            scheme=self.name,
        )

    def attributes(self) -> dict[str, Any]:
        return {
            "n": self.grid.n,
            "limiter": self.limiter,
            "interaction": self.interaction.name,
            "integrator": self.integrator.name,
            "zonal_dimension": self.grid.dimension,
        }

    # -- the initial polar law, in logs -----------------------------------------------------
    def initial_state(self) -> Array:
        """The cell averages of g_0 of each slice (the problem's
        :class:`~spheredens.initial.ZonalInitial`), formed in logs and normalized to
        sum_j g_j h = 1 (the weight sin^{d-2} underflows near the poles for large d: the law
        is then 0 there, as it is to round-off)."""
        out = []
        for f in self.problem.slice_initials():
            log_avg = self.grid.cell_log_averages(f.log_polar_law)
            top = float(np.max(log_avg))
            if not math.isfinite(top):
                raise ConfigError(
                    "initial",
                    "the initial density sampled on this grid has no finite positive mass, so "
                    "no initial state can be formed (nothing was written); make it wider or "
                    "refine the grid",
                )
            g = np.exp(log_avg - top)
            out.append(g / np.sum(g * self.grid.weight))
        return np.stack(out)

    # -- stepping -----------------------------------------------------------------------------
    def face_velocity(self, state: Array) -> Array:
        """The polar velocity at the n + 1 faces, shape (n_xi, n + 1) (0 at both ends)."""
        return self.interaction.velocity(state)[:, 0]

    def rhs(self, state: Array, t: float) -> Tendency:
        v = self.face_velocity(state)
        ghost = np.concatenate([state[..., :1], state, state[..., -1:]], axis=-1)
        slope = limited_slopes(ghost, self._theta)[..., 1:-1]
        east, west = state + 0.5 * slope, state - 0.5 * slope
        flux = np.zeros_like(v)
        flux[..., 1:-1] = upwind_flux(v[..., 1:-1], east[..., :-1], west[..., 1:])
        compression = max(0.0, float(np.max(v[..., :-1] - v[..., 1:]))) / self.grid.h
        return Tendency(
            -(flux[..., 1:] - flux[..., :-1]) / self.grid.h,
            float(np.abs(v).max()),
            max_compression=compression,
        )
