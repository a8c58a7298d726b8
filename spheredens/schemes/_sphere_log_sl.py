"""Conservative semi-Lagrangian remap of log masses with centroids on S^2 (``log_sl``).

The sphere's scheme for low temperature, built from the circle's (:mod:`._circle_log_sl`):
it stores the logarithm of each cell's mass and the cell's centroid, never forms rho where it
is small, and takes steps that follow the dynamics, not a CFL number.

* **Grid.** :class:`~spheredens.grids.LatLonCells`: nlat x 2 nlat cells of equal angular size
  h = pi / nlat in colatitude theta and longitude phi. Every ring is a periodic line in phi, and
  the meridians phi_j and phi_j + pi together are a great circle through both poles: a periodic
  line in theta. In these coordinates the continuity equation is
  d_t q + d_theta(q theta') + d_phi(q phi') = 0 for the coordinate density q = rho sin(theta),
  theta' = <e_theta, X>, phi' = <e_phi, X> / sin(theta).
* **State.** Per cell: ell = log(m / h^2) (m the cell's mass) and the centroid's offsets
  (a, b) from the coordinate centre, in cell widths along theta and phi; shape (n_xi, 3, nlat,
  2 nlat). rho = m / |cell|.
* **Step.** Strang splitting into one-dimensional remaps along the lines (:func:`._line_remap.
  remap_lines`): half a step along the rings (phi), a step along the great circles (theta,
  through the poles), half a step along the rings. A one-dimensional remap moves each cell's
  log-linear profile (its slope set by the centroid) along the exact characteristics of the
  velocity given at the cells' centroids and linear between them, cut at the old faces, each
  piece with its centroid carried forward; the offset across the line is carried with the
  mass. Every line keeps its mass to round-off, so the sphere does; every piece is a positive
  integral formed from logarithms, so rho > 0 and every cell keeps its relative accuracy however
  small (down to :data:`LOG_FLOOR`). The velocity is evaluated where the centroids are at each
  sweep, so a mass narrower than a cell moves with the velocity at its own position.
* **Time.** The predictor sweeps with the velocity of rho^n (ring, circle, ring); the
  corrector with the average of the velocities of rho^n and of the prediction, in the other
  order (circle, ring, circle). Their difference over the cells that can matter (within
  2 beta sigma_max(B) + 50 of the largest ell) measures the error of the frozen velocity and
  of the splitting; a step above ``tolerance`` is refused and retried, the next one is sized
  dt (tolerance / error)^(1/2) (safety 0.9, growth between 0.2 and 2).
* **Poles.** No cell is thinner than its neighbours in a way that limits the step: the steps
  follow the error control, and the characteristics are exact for any step, so the fast
  rotation of phi near a pole costs nothing. The polar cells are wedges; the great circles
  carry mass across the poles.

The velocity is the certified pruned log-sum-exp quadrature over the cells' masses at their
centroids (:func:`~spheredens.interaction._pruned.log_mass_velocity`), the zero-temperature
field for that model.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, Mapping

import numpy as np
from scipy.special import logsumexp

from .._types import Array
from .._validate import as_unit_vectors
from ..grids import LatLonCells
from ..grids._sphere_cells import colat_lon_frame, colat_lon_points
from ..interaction import Layout
from ..interaction._pruned import log_mass_velocity
from ._base import Scheme, Tendency, register_scheme
from ._circle_log_sl import (
    _EDGE,
    DEFAULT_TOLERANCE,
    LOG_FLOOR,
    ErrorControlledSteps,
    SemiLagrangianStep,
    tolerance_option,
)
from ._line_remap import LineField, remap_lines
from ._sphere_fv import SphereFiniteVolumeScheme

#: the step control follows every cell within e^-RELATIVE_RANGE of the largest (and those a
#: softmax can see)
RELATIVE_RANGE = 1550.0

#: velocity evaluations kept (:meth:`SphereLogSemiLagrangianScheme._velocity`): one per slice is
#: asked for again, up to three times per step
RECENT_VELOCITIES = 8

#: a mixture component narrower than this fraction of a cell is put whole in the cell of its
#: mean, at its mean (its exact centroid to O(1 / kappa)): quadrature would miss its peak
NARROW_FRACTION = 1.0 / 8.0


class _Sources:
    """The cell centres as sources of an evaluator."""

    def __init__(self, grid: LatLonCells) -> None:
        self.points = grid.points
        self.weight = grid.weight
        self.tangents = grid.to_world(
            colat_lon_frame(grid.colat[:, None], grid.phi[None, :])[1]
        ).reshape(-1, 3)


def default_pole(model: Any) -> Array:
    """The grid's pole for ``pole = "auto"``: a real eigenvector of A = V B^T, the one of the
    smallest eigenvalue (the zero-temperature field P_x A x / |B^T x| vanishes at every real
    eigenvector and is linear about it and about its antipode, so neither pole sees a flow
    across it in that limit); e_3 when no eigenvector is real to 1e-9."""
    A = np.asarray(model.V, dtype=float) @ np.asarray(model.kernel.B, dtype=float).T
    values, vectors = np.linalg.eig(A)
    real = np.abs(values.imag) <= 1e-9 * max(1.0, float(np.abs(values).max()))
    if not real.any() or not np.all(np.isfinite(values)):
        return np.array([0.0, 0.0, 1.0])
    k = np.flatnonzero(real)[np.argmin(values.real[real])]
    v = vectors[:, k].real
    return v / np.linalg.norm(v)


@register_scheme
class SphereLogSemiLagrangianScheme(ErrorControlledSteps, Scheme):
    """Conservative semi-Lagrangian remap of log rho with cell centroids on S^2 (module docstring).

    The state is (ell, a, b) per cell, shape (n_xi, 3, nlat, 2 nlat): ell = log(m / h^2) for the
    cell's mass m, and the centroid's offsets from the cell's coordinate centre in cell widths
    along colatitude and longitude; ``density`` is m / |cell|. Mass is conserved to round-off,
    rho > 0 always, and rho keeps its relative accuracy down to e^-1e6: the scheme for low
    temperature, where the departure from the metastable plateau is decided by tails far below
    the smallest float64 number, and where clusters become narrower than any cell (they move with
    the velocity at their centroid). Steps follow an error control, not a CFL number.

    Second order in space where log rho is smooth (log-linear profiles with the cells'
    centroids) and in time (predictor-corrector, Strang splitting). Worse than ``fv`` where rho
    has zeros (log rho is floored), where the dynamics is fast everywhere (six sweeps and six
    velocity evaluations per step), and where rho is smooth and the time window short
    (``sh_spectral`` is spectrally accurate there).

    Options (``[discretization]``)
    ------------------------------
    nlat : int (default 64): rings of cells of pi / nlat (2 nlat^2 cells)
    tolerance : float
        Error allowed in one step, in log rho and in centroid offsets (default 1e-3).
    interaction : ``"auto"`` (``direct_pruned`` on the log masses at the centroids;
        ``zero_temperature`` for that model)
    """

    name = "log_sl"
    domain = "sphere"
    options = ("nlat", "tolerance", "pole", "interaction", "allow_underresolved")
    #: 3 cells of pi / nlat across the kernel width, as ``fv``
    resolution = replace(
        SphereFiniteVolumeScheme.resolution,
        default=64,
        what=" (rings of cells of pi / nlat: 2 nlat^2 cells)",
        cost="2 nlat^2 cells, each velocity evaluation a pruned sum over them all",
    )
    default_integrator = "semi_lagrangian"
    evaluator_inputs = "log_moments"
    positive = True
    growth_slack = 3.0
    #: the weak form of the zero-temperature contract (nlat = 16, 32, 64, pole ``auto``): 2.05, 2.05
    zero_temperature_order = 2.0
    carries_log_density = True
    carries_centroids = True
    centroid_fields = 3
    suited_to = "at low temperature"

    work_bytes_per_point = 2000.0
    grid_bytes_per_point = 400.0

    @classmethod
    def validate_own_options(cls, table: Mapping[str, Any], prefix: str) -> dict[str, Any]:
        pole = table.get("pole", "auto")
        if pole != "auto":
            pole = list(as_unit_vectors([pole], f"{prefix}.pole", 3)[0])
        return {
            "tolerance": tolerance_option(table, prefix),
            "pole": pole,
        }

    @classmethod
    def grid_spacing(cls, options: Mapping[str, Any]) -> float:
        return math.pi / cls.resolution.of(options)

    @classmethod
    def memory_sizes(cls, options: Mapping[str, Any]) -> tuple[int, int, float]:
        cells = 2 * cls.resolution.of(options) ** 2
        return cells, cells, 3 * 8.0 * cells

    def __init__(
        self,
        problem: Any,
        *,
        nlat: int = 64,
        tolerance: float = DEFAULT_TOLERANCE,
        pole: Any = "auto",
        **common: Any,
    ) -> None:
        pole_vector = default_pole(problem.model) if pole == "auto" else np.asarray(pole)
        super().__init__(problem, LatLonCells(nlat, pole_vector), **common)
        self.pole_option = pole
        self.tolerance = float(tolerance)
        model = problem.model
        self.model = model
        #: the step control looks at the cells within this many e-folds of the largest: those a
        #: softmax can weigh by more than e^-50 of it, and at least those within e^-1500 (the
        #: relative accuracy promised; below that, cells near the floor would drive the steps)
        self.window = max(
            2.0 * model.beta * model.kernel.sigma_max + 50.0 if model.kind.interacting else 0.0,
            RELATIVE_RANGE,
        )
        self.log_area = 2.0 * math.log(self.grid.h)  # m = exp(ell) h^2
        self.init_step_control()
        self._emptied = False
        self._cache: tuple[Any, float, Array] | None = None
        self._recent: list[tuple[Array, Array, Array]] = []
        #: the metric along a great circle through the poles: |sin s| at the ends of each cell
        ends = np.abs(np.sin(np.arange(2 * nlat + 1) * self.grid.h))
        ends[[0, nlat, 2 * nlat]] = 0.0
        self._circle_weight = (
            np.broadcast_to(ends[:-1], (nlat, 2 * nlat)),
            np.broadcast_to(ends[1:], (nlat, 2 * nlat)),
        )

    def layout(self) -> Layout:
        return Layout(
            "sphere", "log_moments", _Sources(self.grid), self.grid.points, scheme=self.name
        )

    def make_integrator(self, name: str) -> Any:
        return SemiLagrangianStep(self)

    # -- state -------------------------------------------------------------------------------
    def sample(self, f: Any) -> Array:
        return self.grid.cell_averages(f)

    def _log_moments(self, log_f: Any, order: int = 6) -> tuple[Array, Array, Array]:
        """(log mass, offset in theta, offset in phi) of every cell for a density given by its
        logarithm, by a Gauss product rule in the log domain."""
        g = self.grid
        ot, op, log_w = g.cell_quadrature(order)
        theta = g.colat[:, None, None] + ot[None, None, :] * g.h
        phi = g.phi[None, :, None] + op[None, None, :] * g.h
        values = (
            np.asarray(log_f(g.to_world(colat_lon_points(theta, phi))), dtype=float)
            + log_w[:, None, :]
        )
        top = values.max(axis=-1)
        safe = np.where(np.isfinite(top), top, 0.0)
        with np.errstate(under="ignore"):
            w = np.exp(values - safe[..., None])
        total = w.sum(axis=-1)
        with np.errstate(divide="ignore", invalid="ignore"):
            log_m = np.where(total > 0.0, safe + np.log(total), -np.inf)
            a = np.where(total > 0.0, (w @ ot) / total, 0.0)
            b = np.where(total > 0.0, (w @ op) / total, 0.0)
        return log_m, a, b

    def _atom(self, mean: Array) -> tuple[Array, Array, Array]:
        """A unit mass at ``mean``: in its cell, at its position."""
        g = self.grid
        mean = g.to_grid(mean)
        theta = math.acos(float(np.clip(mean[2], -1.0, 1.0)))
        phi = math.atan2(float(mean[1]), float(mean[0])) % (2.0 * math.pi)
        i = min(int(theta / g.h), g.nlat - 1)
        j = min(int(phi / g.h), g.nlon - 1)
        log_m = np.full(g.cells_shape, -np.inf)
        a, b = np.zeros(g.cells_shape), np.zeros(g.cells_shape)
        log_m[i, j] = 0.0
        a[i, j] = theta / g.h - i - 0.5
        b[i, j] = phi / g.h - j - 0.5
        return log_m, a, b

    def _slice_moments(self, f: Any) -> tuple[Array, Array, Array]:
        """(log mass, a, b) of the initial density ``f`` of one slice, mass 1."""
        parts = []
        components = f.components() if hasattr(f, "components") and hasattr(f, "means") else None
        if components is not None:
            for (weight, log_f, width), mean in zip(components, f.means):
                if weight <= 0.0:
                    continue
                if width < NARROW_FRACTION * self.grid.h:
                    log_m, a, b = self._atom(np.asarray(mean, dtype=float))
                else:
                    log_m, a, b = self._log_moments(log_f)
                    log_m = log_m - _log_total(log_m)
                parts.append((log_m + math.log(weight), a, b))
        else:
            with np.errstate(divide="ignore"):
                parts.append(
                    self._log_moments(
                        lambda x: np.log(np.maximum(np.asarray(f(x), dtype=float), 0.0))
                    )
                )
        top = np.max([p[0] for p in parts], axis=0)
        safe = np.where(np.isfinite(top), top, 0.0)
        with np.errstate(under="ignore"):
            w = [np.exp(p[0] - safe) for p in parts]
        total = np.sum(w, axis=0)
        with np.errstate(divide="ignore", invalid="ignore"):
            log_m = np.where(total > 0.0, safe + np.log(total), -np.inf)
            a = np.where(total > 0.0, sum(wk * p[1] for wk, p in zip(w, parts)) / total, 0.0)
            b = np.where(total > 0.0, sum(wk * p[2] for wk, p in zip(w, parts)) / total, 0.0)
        return log_m - _log_total(log_m), a, b

    def initial_state(self) -> Array:
        """(ell, a, b) of each slice's initial density, mass 1, shape (n_xi, 3, nlat, 2 nlat)."""
        out = []
        for f in self.problem.slice_initials():
            log_m, a, b = self._slice_moments(f)
            ell = np.maximum(log_m - self.log_area, LOG_FLOOR)
            out.append(
                np.stack(
                    [
                        ell,
                        np.clip(a, -0.5 * _EDGE, 0.5 * _EDGE),
                        np.clip(b, -0.5 * _EDGE, 0.5 * _EDGE),
                    ]
                )
            )
        return np.stack(out)

    def log_density(self, state: Array) -> Array:
        """log rho = ell + log(h^2 / |cell|) on the cells, shape (n_xi, n_cells)."""
        return state[:, 0].reshape(len(state), -1) + self.log_area - np.log(self.grid.weight)

    def density(self, state: Array) -> Array:
        with np.errstate(under="ignore"):
            return np.exp(self.log_density(state))

    def masses(self, state: Array) -> Array:
        return np.array([math.exp(_log_total(s[0] + self.log_area)) for s in state])

    def centroid_points(self, state: Array) -> Array:
        """The cells' centroids as points of S^2, shape (n_xi, n_cells, 3)."""
        local = self.grid.centroid_points(state[:, 1], state[:, 2])
        return self.grid.to_world(local).reshape(len(state), -1, 3)

    centroids = centroid_points

    # -- velocity ----------------------------------------------------------------------------
    def _velocity(self, sources: Array, points: Array) -> Array:
        """X[rho] at ``points`` (nlat, nlon, 3, in the grid's frame) for the slice ``sources``
        (its state (3, nlat, nlon)), as vectors in the grid's frame. The last few evaluations
        are kept: the step size, the predictor's first sweep and the corrector's first sweep all
        ask for the velocity of rho^n at its own centroids."""
        for known_sources, known_points, known in self._recent:
            if np.array_equal(known_sources, sources) and np.array_equal(known_points, points):
                return known
        g = self.grid
        src = g.to_world(g.centroid_points(sources[1], sources[2])).reshape(-1, 3)
        vel = log_mass_velocity(
            self.model,
            g.to_world(points.reshape(-1, 3)),
            src,
            sources[0].reshape(-1) + self.log_area,
        )
        vel = g.to_grid(vel).reshape(points.shape)
        self._recent = (self._recent + [(sources, points, vel)])[-RECENT_VELOCITIES:]
        return vel

    def rhs(self, state: Array, t: float) -> Tendency:
        """For the step size: the speeds at the centroids (the step is the remap; rate 0)."""
        if self._cache is None or self._cache[0] is not state or self._cache[1] != t:
            vel = np.stack(
                [self._velocity(s, self.grid.centroid_points(s[1], s[2])) for s in state]
            )
            self._cache = (state, t, vel)
        vel = self._cache[2]
        speed = float(np.sqrt(np.max(np.sum(vel * vel, axis=-1))))
        return Tendency(np.zeros_like(state), speed, max_compression=math.nan)

    # -- one step ----------------------------------------------------------------------------
    def _sweep_rings(self, s: Array, velocity: Any, dt: float) -> Array:
        """Remap along the rings (phi) over dt; ``velocity(points)`` gives X at points."""
        g = self.grid
        theta, phi = g.centroid_angles(s[1], s[2])
        vel = velocity(colat_lon_points(theta, phi))
        _, e_phi = colat_lon_frame(theta, phi)
        speed = np.sum(vel * e_phi, axis=-1) / np.sin(theta)
        field = LineField((np.arange(g.nlon)[None, :] + 0.5 + s[2]) * g.h, speed, g.h)
        ell, b, a, empty = remap_lines(s[0], s[2], s[1], field, dt, LOG_FLOOR)
        self._note_emptied(empty, s[0])
        return np.stack([ell, a, b])

    def _sweep_circles(self, s: Array, velocity: Any, dt: float) -> Array:
        """Remap along the great circles through the poles (theta) over dt."""
        g = self.grid
        n = g.nlat
        theta, phi = g.centroid_angles(s[1], s[2])
        vel = velocity(colat_lon_points(theta, phi))
        e_theta, _ = colat_lon_frame(theta, phi)
        v = np.sum(vel * e_theta, axis=-1)

        def lines(f: Array, sign: float = 1.0) -> Array:  # (nlat, nlon) -> (nlat lines, 2 nlat)
            return np.concatenate((f[:, :n].T, sign * f[::-1, n:].T), axis=1)

        offset = lines(s[1], -1.0)
        field = LineField((np.arange(2 * n)[None, :] + 0.5 + offset) * g.h, lines(v, -1.0), g.h)
        ell, a_line, b_line, empty = remap_lines(
            lines(s[0]), offset, lines(s[2]), field, dt, LOG_FLOOR, self._circle_weight
        )

        def back(f: Array, sign: float = 1.0) -> Array:
            out = np.empty(g.cells_shape)
            out[:, :n] = f[:, :n].T
            out[::-1, n:] = sign * f[:, n:].T
            return out

        self._note_emptied(back(empty.astype(float)) > 0, s[0])
        return np.stack([back(ell), back(a_line, -1.0), back(b_line)])

    def _note_emptied(self, empty: Array, ell: Array) -> None:
        self._emptied |= bool(np.any(empty & (ell >= ell.max() - self.window)))

    def _split_step(self, s: Array, velocity: Any, dt: float, rings_first: bool) -> Array:
        if rings_first:
            s = self._sweep_rings(s, velocity, 0.5 * dt)
            s = self._sweep_circles(s, velocity, dt)
            return self._sweep_rings(s, velocity, 0.5 * dt)
        s = self._sweep_circles(s, velocity, 0.5 * dt)
        s = self._sweep_rings(s, velocity, dt)
        return self._sweep_circles(s, velocity, 0.5 * dt)

    def advance(self, state: Array, t: float, dt: float) -> Array:
        """One predictor-corrector step (module docstring); records the error estimate."""
        self._emptied = False
        predicted = np.stack(
            [self._split_step(s, lambda p, s=s: self._velocity(s, p), dt, True) for s in state]
        )
        if not np.all(np.isfinite(predicted[:, 1:])) or np.any(np.isnan(predicted)):
            self._last_error, self._last_dt = math.inf, dt
            return np.array(state)
        new = np.stack(
            [
                self._split_step(
                    s,
                    lambda p, s=s, q=q: 0.5 * (self._velocity(s, p) + self._velocity(q, p)),
                    dt,
                    False,
                )
                for s, q in zip(state, predicted)
            ]
        )
        ell = new[:, 0]
        relevant = ell >= ell.reshape(len(ell), -1).max(axis=1)[:, None, None] - self.window
        change = np.maximum(
            np.abs(ell - predicted[:, 0]),
            np.maximum(np.abs(new[:, 1] - predicted[:, 1]), np.abs(new[:, 2] - predicted[:, 2])),
        )
        self.record_error(change, relevant, dt)
        return new

    def attributes(self) -> dict[str, Any]:
        return {
            "nlat": self.grid.nlat,
            "n_cells": self.grid.n_cells,
            "mesh": "equiangular latitude-longitude cells about the pole",
            "pole": self.grid.pole.tolist(),
            "tolerance": self.tolerance,
            "interaction": self.interaction.name,
            "integrator": "semi_lagrangian",
        }


def _log_total(log_m: Array) -> float:
    """log sum exp(log_m) over all entries (-inf when every entry is)."""
    with np.errstate(divide="ignore"):
        return float(logsumexp(log_m))
