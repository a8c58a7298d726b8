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
* **State.** Per cell: ell = log(m / h^2) (m the cell's mass), the centroid's offsets (a, b)
  from the coordinate centre in cell widths along theta and phi, and the variances (va, vb) of
  the cell's mass along them in cell widths squared; shape (n_xi, 5, nlat, 2 nlat).
  rho = m / |cell|. A cell narrower than its log-linear profile is remapped with the profile
  shrunk about its centroid (:func:`._line_remap.remap_lines`); one narrower by
  :data:`NARROW_RATIO` in both directions is an *atom* for the step: it is moved whole, unsplit,
  along the characteristic of the step's velocity (an ODE in R^3, no pole) and merged into the
  cell where it lands, so a cluster narrower than a cell follows its characteristic.
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
from scipy.integrate import solve_ivp
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
from ._line_remap import LineField, Profiles, remap_lines
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

#: a cell is an atom when its mass is narrower than its log-linear profile by this ratio of
#: standard deviations in both directions: it is moved whole along its characteristic
NARROW_RATIO = 0.25

#: the relative and absolute tolerance of the atoms' characteristics (DOP853)
ATOM_RTOL = 1e-10

#: the offset, in cell widths, of the two points beside each atom whose paths give the flow's
#: Jacobian (the stretch of the atom's variances)
ATOM_PROBE = 1e-4

#: the variance of a uniform mass on a cell, in cell widths squared
UNIFORM_VARIANCE = 1.0 / 12.0


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

    The state is (ell, a, b, va, vb) per cell, shape (n_xi, 5, nlat, 2 nlat): ell = log(m / h^2)
    for the cell's mass m, the centroid's offsets from the cell's coordinate centre in cell
    widths along colatitude and longitude, and the variances of the mass along them;
    ``density`` is m / |cell|. Mass is conserved to round-off,
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
    #: the weak form of the zero-temperature contract (nlat = 16, 32, 64, pole ``auto``): 2.00, 2.00
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

    def _log_moments(self, log_f: Any, order: int = 6) -> tuple[Array, ...]:
        """(log mass, offsets in theta and phi, variances in theta and phi) of every cell for a
        density given by its logarithm, by a Gauss product rule in the log domain; offsets in
        cell widths, variances in cell widths squared."""
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
            va = np.where(total > 0.0, (w @ ot**2) / total - a**2, UNIFORM_VARIANCE)
            vb = np.where(total > 0.0, (w @ op**2) / total - b**2, UNIFORM_VARIANCE)
        return log_m, a, b, np.maximum(va, 0.0), np.maximum(vb, 0.0)

    def _atom(self, mean: Array) -> tuple[Array, ...]:
        """A unit mass at ``mean``: in its cell, at its position, of no width."""
        g = self.grid
        mean = g.to_grid(mean)
        theta = math.acos(float(np.clip(mean[2], -1.0, 1.0)))
        phi = math.atan2(float(mean[1]), float(mean[0])) % (2.0 * math.pi)
        i = min(int(theta / g.h), g.nlat - 1)
        j = min(int(phi / g.h), g.nlon - 1)
        log_m = np.full(g.cells_shape, -np.inf)
        a, b = np.zeros(g.cells_shape), np.zeros(g.cells_shape)
        va, vb = np.full(g.cells_shape, UNIFORM_VARIANCE), np.full(g.cells_shape, UNIFORM_VARIANCE)
        log_m[i, j] = 0.0
        a[i, j] = theta / g.h - i - 0.5
        b[i, j] = phi / g.h - j - 0.5
        va[i, j] = vb[i, j] = 0.0
        return log_m, a, b, va, vb

    def _slice_moments(self, f: Any) -> tuple[Array, ...]:
        """(log mass, a, b, variance in a, variance in b) of the initial density ``f`` of one
        slice, mass 1."""
        parts = []
        components = f.components() if hasattr(f, "components") and hasattr(f, "means") else None
        if components is not None:
            for (weight, log_f, width), mean in zip(components, f.means):
                if weight <= 0.0:
                    continue
                if width < NARROW_FRACTION * self.grid.h:
                    log_m, *moments = self._atom(np.asarray(mean, dtype=float))
                else:
                    log_m, *moments = self._log_moments(log_f)
                    log_m = log_m - _log_total(log_m)
                parts.append((log_m + math.log(weight), *moments))
        else:
            with np.errstate(divide="ignore"):
                parts.append(
                    self._log_moments(
                        lambda x: np.log(np.maximum(np.asarray(f(x), dtype=float), 0.0))
                    )
                )
        log_m, a, b, va, vb = merge_moments(parts)
        return log_m - _log_total(log_m), a, b, va, vb

    def initial_state(self) -> Array:
        """(ell, a, b, va, vb) of each slice's initial density, mass 1, shape
        (n_xi, 5, nlat, 2 nlat)."""
        out = []
        for f in self.problem.slice_initials():
            log_m, a, b, va, vb = self._slice_moments(f)
            ell = np.maximum(log_m - self.log_area, LOG_FLOOR)
            out.append(
                np.stack(
                    [
                        ell,
                        np.clip(a, -0.5 * _EDGE, 0.5 * _EDGE),
                        np.clip(b, -0.5 * _EDGE, 0.5 * _EDGE),
                        va,
                        vb,
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

    def cell_masses(self, state: Array) -> Array:
        """The cells' masses m = exp(ell) h^2, shape (n_xi, n_cells)."""
        with np.errstate(under="ignore"):
            return np.exp(state[:, 0].reshape(len(state), -1) + self.log_area)

    def velocity_at_centroids(self, state: Array) -> Array:
        """X[rho] of each slice at its cells' centroids, world frame, (n_xi, n_cells, 3): the
        velocity the remap follows (certified log-sum-exp over the cells' masses at their
        centroids)."""
        g = self.grid
        out = [
            g.to_world(self._velocity_at(s, g.centroid_points(s[1], s[2]))).reshape(-1, 3)
            for s in state
        ]
        return np.stack(out)

    # -- velocity ----------------------------------------------------------------------------
    def _velocity(self, sources: Array, points: Array, cached: bool = True) -> Array:
        """X[rho] at ``points`` (nlat, nlon, 3, in the grid's frame) for the slice ``sources``
        (its state (3, nlat, nlon)), as vectors in the grid's frame. The last few evaluations
        are kept: the step size, the predictor's first sweep and the corrector's first sweep all
        ask for the velocity of rho^n at its own centroids."""
        if not cached:
            return self._velocity_at(sources, points)
        for known_sources, known_points, known in self._recent:
            if np.array_equal(known_sources, sources) and np.array_equal(known_points, points):
                return known
        vel = self._velocity_at(sources, points)
        self._recent = (self._recent + [(sources, points, vel)])[-RECENT_VELOCITIES:]
        return vel

    def _velocity_at(self, sources: Array, points: Array) -> Array:
        """X[rho] at ``points`` (..., 3, grid frame) for the slice ``sources``, uncached."""
        g = self.grid
        src = g.to_world(g.centroid_points(sources[1], sources[2])).reshape(-1, 3)
        vel = log_mass_velocity(
            self.model,
            g.to_world(points.reshape(-1, 3)),
            src,
            sources[0].reshape(-1) + self.log_area,
        )
        return g.to_grid(vel).reshape(points.shape)

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
        ell, b, a, empty, (vb, va) = remap_lines(
            s[0], s[2], s[1], field, dt, LOG_FLOOR, spread=(s[4], s[3])
        )
        self._note_emptied(empty, s[0])
        return np.stack([ell, a, b, va, vb])

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
        ell, a_line, b_line, empty, (va, vb) = remap_lines(
            lines(s[0]),
            offset,
            lines(s[2]),
            field,
            dt,
            LOG_FLOOR,
            self._circle_weight,
            spread=(lines(s[3]), lines(s[4])),
        )

        def back(f: Array, sign: float = 1.0) -> Array:
            out = np.empty(g.cells_shape)
            out[:, :n] = f[:, :n].T
            out[::-1, n:] = sign * f[:, n:].T
            return out

        self._note_emptied(back(empty.astype(float)) > 0, s[0])
        return np.stack([back(ell), back(a_line, -1.0), back(b_line), back(va), back(vb)])

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

    def narrow_cells(self, s: Array) -> Array:
        """The cells of one slice's state ``s`` whose mass is narrower than its own log-linear
        profile by :data:`NARROW_RATIO` in both directions (standard deviations): clusters
        that the profiles cannot hold, moved as atoms."""
        ratio = []
        for offset, var in ((s[1], s[3]), (s[2], s[4])):
            profile = Profiles(offset, 1.0)
            _, _, full = profile.log_moments(slice(None), np.full(offset.shape, -0.5), 0.5)
            ratio.append(var < NARROW_RATIO**2 * full)
        return ratio[0] & ratio[1] & (s[0] > LOG_FLOOR + 1.0)

    def _move_atoms(self, s: Array, narrow: Array, velocity: Any, dt: float) -> tuple[Array, ...]:
        """The atoms (the ``narrow`` cells of ``s``) moved over dt along the characteristics of
        ``velocity`` (unsplit, DOP853 to :data:`ATOM_RTOL`), with their variances stretched by
        the flow's Jacobian in (theta, phi): (log mass, points (N, 3), a, b, va, vb) where a, b
        are the angles (theta, phi) of the points."""
        g = self.grid
        theta, phi = g.centroid_angles(s[1], s[2])
        theta, phi = theta[narrow], phi[narrow]
        eps = ATOM_PROBE * g.h
        start = np.concatenate(
            (
                colat_lon_points(theta, phi),
                colat_lon_points(theta + eps, phi),
                colat_lon_points(theta, phi + eps),
            )
        )

        def rate(_t: float, y: Array) -> Array:
            x = y.reshape(-1, 3)
            x = x / np.linalg.norm(x, axis=1, keepdims=True)
            return velocity(x).reshape(-1)

        sol = solve_ivp(
            rate, (0.0, dt), start.reshape(-1), method="DOP853", rtol=ATOM_RTOL, atol=ATOM_RTOL
        )
        end = sol.y[:, -1].reshape(-1, 3)
        end = end / np.linalg.norm(end, axis=1, keepdims=True)
        t1 = np.arccos(np.clip(end[:, 2], -1.0, 1.0))
        p1 = np.arctan2(end[:, 1], end[:, 0]) % (2.0 * math.pi)
        N = theta.size
        t0, tt, tp = t1[:N], t1[N : 2 * N], t1[2 * N :]
        f0, ft, fp = p1[:N], p1[N : 2 * N], p1[2 * N :]

        def turn(d: Array) -> Array:
            return (d + math.pi) % (2.0 * math.pi) - math.pi

        j00, j01 = (tt - t0) / eps, (tp - t0) / eps
        j10, j11 = turn(ft - f0) / eps, turn(fp - f0) / eps
        va, vb = s[3][narrow], s[4][narrow]
        return (
            s[0][narrow],
            end[:N],
            t0,
            f0,
            j00**2 * va + j01**2 * vb,
            j10**2 * va + j11**2 * vb,
        )

    def _deposit(self, s: Array, atoms: tuple[Array, ...]) -> Array:
        """``s`` with the moved atoms added to the cells they are in (moments merged)."""
        g = self.grid
        ell, _, theta, phi, va, vb = atoms
        i = np.minimum((theta / g.h).astype(np.int64), g.nlat - 1)
        j = np.minimum((phi / g.h).astype(np.int64), g.nlon - 1)
        flat = i * g.nlon + j
        top = np.full(g.n_cells, -np.inf)
        np.maximum.at(top, flat, ell)
        w = np.exp(ell - top[flat])
        a, b = theta / g.h - i - 0.5, phi / g.h - j - 0.5
        sums = np.zeros((5, g.n_cells))
        for row, values in enumerate((w, w * a, w * b, w * (va + a * a), w * (vb + b * b))):
            np.add.at(sums[row], flat, values)
        live = sums[0] > 0.0
        norm = np.where(live, sums[0], 1.0)
        ma, mb = sums[1] / norm, sums[2] / norm
        with np.errstate(divide="ignore"):
            atom_part = (
                np.where(live, top + np.log(norm), -np.inf).reshape(g.cells_shape),
                ma.reshape(g.cells_shape),
                mb.reshape(g.cells_shape),
                np.maximum(sums[3] / norm - ma**2, 0.0).reshape(g.cells_shape),
                np.maximum(sums[4] / norm - mb**2, 0.0).reshape(g.cells_shape),
            )
        merged = merge_moments([tuple(s), atom_part])
        out = np.stack(merged)
        out[0] = np.maximum(out[0], LOG_FLOOR)
        out[1:3] = np.clip(out[1:3], -0.5 * _EDGE, 0.5 * _EDGE)
        return out

    def _full_step(
        self, s: Array, narrow: Array, velocity: Any, dt: float, rings_first: bool
    ) -> tuple[Array, Array, Array]:
        """One split step of the cells that are not narrow and the atoms' move: (the state
        with the atoms deposited, the split part alone, the atoms' end points).
        ``velocity(points, cached)`` gives X at points (the atoms' many points uncached)."""
        wide = np.array(s)
        wide[0][narrow] = -np.inf
        moved = self._split_step(wide, lambda p: velocity(p, True), dt, rings_first)
        if not narrow.any():
            return moved, moved, np.zeros((0, 3))
        atoms = self._move_atoms(s, narrow, lambda p: velocity(p, False), dt)
        return self._deposit(moved, atoms), moved, atoms[1]

    def advance(self, state: Array, t: float, dt: float) -> Array:
        """One predictor-corrector step (module docstring); records the error estimate."""
        self._emptied = False
        narrow = [self.narrow_cells(s) for s in state]
        first = [
            self._full_step(s, m, lambda p, c, s=s: self._velocity(s, p, c), dt, True)
            for s, m in zip(state, narrow)
        ]
        predicted = np.stack([f[0] for f in first])
        if not np.all(np.isfinite(predicted[:, 1:])) or np.any(np.isnan(predicted)):
            self._last_error, self._last_dt = math.inf, dt
            return np.array(state)
        second = [
            self._full_step(
                s,
                m,
                lambda p, c, s=s, q=q: 0.5 * (self._velocity(s, p, c) + self._velocity(q, p, c)),
                dt,
                False,
            )
            for s, q, m in zip(state, predicted, narrow)
        ]
        new = np.stack([f[0] for f in second])
        wide_new = np.stack([f[1] for f in second])
        wide_predicted = np.stack([f[1] for f in first])
        ell = wide_new[:, 0]
        relevant = ell >= new[:, 0].reshape(len(ell), -1).max(axis=1)[:, None, None] - self.window
        change = np.maximum(
            np.abs(ell - wide_predicted[:, 0]),
            np.maximum(
                np.abs(wide_new[:, 1] - wide_predicted[:, 1]),
                np.abs(wide_new[:, 2] - wide_predicted[:, 2]),
            ),
        )
        with np.errstate(invalid="ignore"):
            change = np.where(np.isfinite(ell) | np.isfinite(wide_predicted[:, 0]), change, 0.0)
        atom_change = max(
            (
                float(np.max(np.arccos(np.clip(np.sum(f[2] * g[2], axis=1), -1.0, 1.0))))
                / self.grid.h
                for f, g in zip(first, second)
                if f[2].size
            ),
            default=0.0,
        )
        self.record_error(np.maximum(change, atom_change), relevant, dt)
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


def merge_moments(parts: list[tuple[Array, ...]]) -> tuple[Array, ...]:
    """The (log mass, offset a, offset b, variance a, variance b) of the union of the masses
    ``parts`` (each such a tuple, elementwise over cells): masses add in the log domain,
    offsets average by mass, variances combine with the spread of the offsets."""
    top = np.max([p[0] for p in parts], axis=0)
    safe = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(under="ignore", invalid="ignore"):
        w = [np.where(np.isfinite(p[0]), np.exp(p[0] - safe), 0.0) for p in parts]
    total = np.sum(w, axis=0)
    live = total > 0.0
    norm = np.where(live, total, 1.0)
    a = sum(wk * p[1] for wk, p in zip(w, parts)) / norm
    b = sum(wk * p[2] for wk, p in zip(w, parts)) / norm
    va = sum(wk * (p[3] + p[1] ** 2) for wk, p in zip(w, parts)) / norm - a**2
    vb = sum(wk * (p[4] + p[2] ** 2) for wk, p in zip(w, parts)) / norm - b**2
    with np.errstate(divide="ignore"):
        log_m = np.where(live, safe + np.log(norm), -np.inf)
    return (
        log_m,
        np.where(live, a, 0.0),
        np.where(live, b, 0.0),
        np.where(live, np.maximum(va, 0.0), UNIFORM_VARIANCE),
        np.where(live, np.maximum(vb, 0.0), UNIFORM_VARIANCE),
    )


def _log_total(log_m: Array) -> float:
    """log sum exp(log_m) over all entries (-inf when every entry is)."""
    with np.errstate(divide="ignore"):
        return float(logsumexp(log_m))
