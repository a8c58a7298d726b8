"""Log-mass Lagrangian particles with split and merge on S^2 (``log_lagrangian``).

The sphere's scheme for low temperature. An Eulerian cell whose log-linear profile spans tens
of e-folds cannot follow a density that contracts inside it (the sphere's ``log_sl`` stalls at
beta = 300 whatever its poles: docs/numerics.md); here the cells move with the flow.

* **State.** Particles, each standing for a small cell of S^2: the logarithm l of its mass, its
  centroid x (a unit vector of R^3: no coordinate pole) and its shape, two tangent vectors
  f = (f1, f2) spanning the parallelogram it covers (made orthogonal after every step:
  :func:`~._particle_remesh.orthogonal_shapes`, so that a needle keeps its area); its mean
  log density is l - log |f1 x f2|. It also carries the log density lambda at its centroid,
  as the constant c = lambda + log |f1 x f2| (along a characteristic d lambda / dt = -div X,
  and the area of the linearized shape grows as exp(int div X)): lambda is exact between
  remeshings, to the tolerance of the shapes. The state is an array (n_xi, 11, n_particles):
  rows l, x (3), f (6, row by row of the 3 x 2 matrix), c; the number of particles changes
  from step to step.
* **Start.** One particle per cell of the n x n equiangular cubed sphere
  (:class:`~spheredens.grids.CubedSphereCells`: 6 n^2 cells of pi / (2 n)): log mass by a
  Gauss rule in the log domain, centroid, the cell's edges as shape. A von Mises-Fisher
  component narrower than an eighth of a cell is one particle at its mean (its centroid to
  O(1 / kappa)), of area 2 pi / kappa (so that m / area is its peak density). A run that
  continues another's snapshot on a mesh of cells (``fv``'s file as ``initial.name = "file"``)
  takes each cell with positive mass as one particle: its mass exactly, its centre, its cell
  (``file_cells = "coarsened"``: those outside the look caps merged by the n x n cells).
* **Flow.** A particle's mass never changes; its centroid and shape follow
  dx/dt = X[rho](x), df/dt = DX f - x <X, f> (tangent vectors kept tangent): an ODE in R^3
  for all particles at once. X and DX are softmax averages over the particles, summed in the
  log domain with certified pruning and between tight groups with certified Taylor
  expansions (:class:`~spheredens.interaction.LogParticleSums`); ``sa_zero_temperature`` has
  its closed-form field and Jacobian.
* **Time.** Bogacki-Shampine 3(2): each step's embedded error, on the positions (radians) and
  on the shapes (relative, :data:`SHAPE_TOLERANCE_FACTOR` times looser) of the particles within
  2 beta sigma_max(B) + 50 e-folds of the heaviest (those a softmax can see), must be within
  ``tolerance``. With ``multirate`` (the default) the particles a step fails for, and those
  their first error moved too far, take sub-steps of their own over it, and the next step is
  sized by the 95th percentile of the errors (:mod:`._particle_steps`); without, the next
  step is dt (tolerance / error)^(1/3) of the largest (safety 0.9, growth between 0.2 and 5).
  Steps grow where nothing moves: no CFL number.
* **Remeshing** after every step (:mod:`._particle_remesh`): a particle stretched beyond
  1.05 times the longest initial cell is cut in two across its long axis, the masses following
  the log-linear profile fitted to its neighbours; particles closer than ``merge`` /
  (beta sigma_max(B)) (the same cell of a fine cubed sphere) are merged: the kernel's logit
  varies by about ``merge`` across such a cell, and the merge errs by its square.
* **Conserved.** Total mass to round-off (every split and merge adds log masses exactly), every
  mass positive, and each mass keeps its relative accuracy however small (it is a logarithm).

The file's ``rho``, ``log_rho`` and ``rho_centroid_xyz`` are the particles binned on a
latitude-longitude mesh of 2 n rings (each cell's mass, its log in the log domain, and the
mass-weighted mean position), the record's view; the diagnostics ``w2_projection`` and
``w2_terminal`` put each particle's mass at its own position.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np
from scipy.special import logsumexp

from .._types import Array
from ..geometry import tangent_frames
from ..grids import CubedSphereCells, LatLonCells
from ..interaction import Layout
from ._base import Scheme, Tendency, register_scheme
from ._circle_log_sl import LOG_FLOOR, ErrorControlledSteps
from ._lagrangian_options import (
    DEFAULT_FILE_CELLS,
    DEFAULT_FOLLOW_DEPTH,
    DEFAULT_MERGE,
    DEFAULT_MERGE_SHAPE,
    DEFAULT_MERGE_TAIL,
    DEFAULT_MERGE_TAIL_WIDTH,
    DEFAULT_QUADRATURE,
    DEFAULT_REFINE_LOOK,
    DEFAULT_REMESH_TAIL,
    DEFAULT_SPLIT_SLOPE,
    DEFAULT_VORONOI_SHAPES,
    QUADRATURES,  # noqa: F401 (the choices of ``quadrature``, as study scripts import them)
    validate_lagrangian_options,
)
from ._particle_remesh import (
    TailRemesh,
    cells_within,
    coarsen_outside,
    crosses,
    log_area,
    look_lengths,
    merge,
    merge_tail,
    orthogonal_shapes,
    split,
    tail_cells,
    tangent_shapes,
    voronoi_shapes,
)
from ._particle_steps import (
    COUPLING_ROUNDS,
    MAX_REFINED,
    ParticleStep,
    Step,
    bs3,
    coupling_error,
    hermite,
    sizing_error,
    substeps,
)
from ._resolution import Resolution

#: the shapes' relative error per step may be this many times the positions' tolerance
SHAPE_TOLERANCE_FACTOR = 100.0

#: a particle longer than this factor times the longest initial cell is split
SPLIT_LENGTH = 1.05

#: a mixture component narrower than this fraction of a cell starts as one particle
NARROW_FRACTION = 1.0 / 8.0

#: the finest merge cells: cubed-sphere cells per face edge (cells of about 1e-7 rad)
FINEST_MERGE = 1 << 24

#: rows of the state: log mass, position (3), shape (6), log point mass
ROWS = 11

#: the recording mesh has this many rings per cubed-sphere cell edge n
RINGS_PER_N = 2


class _Recording:
    """The recording mesh as the sources of the layout (only the evaluator's name needs it)."""

    def __init__(self, grid: LatLonCells) -> None:
        self.points = grid.points
        self.weight = grid.weight


def pack(log_m: Array, x: Array, shape: Array, log_point: Array) -> Array:
    """One slice of the state, (11, n), from log masses (n,), positions (n, 3), shapes
    (n, 3, 2) and log point masses (n,)."""
    return np.concatenate([log_m[None], x.T, shape.reshape(len(x), 6).T, log_point[None]])


def unpack(s: Array) -> tuple[Array, Array, Array, Array]:
    """(log masses, positions, shapes, log point masses) of one slice of the state
    (:func:`pack`)."""
    shape = np.ascontiguousarray(s[4:10].T).reshape(-1, 3, 2)
    return s[0], np.ascontiguousarray(s[1:4].T), shape, s[10]


@register_scheme
class SphereLagrangianScheme(ErrorControlledSteps, Scheme):
    """Log-mass Lagrangian particles with split and merge on S^2 (module docstring).

    Second order in space where log rho is smooth (each particle's mass at its centroid, split
    along the fitted log-linear profile) and third order in time (BS3 with error control), and
    exact transport of every mass between remeshings: the scheme for low temperature on the
    sphere, where clusters become narrower than any fixed cell and the departure from the
    plateau is decided in tails far below float64's range. Worse than ``fv`` and
    ``sh_spectral`` where the density spreads (the count grows with the stretching) and for
    models with slices or unnormalized attention, which it does not run.

    Options (``[discretization]``)
    ------------------------------
    n : int (default 16): initial particles on the n x n cubed sphere (6 n^2)
    tolerance : float (default 1e-3): error of the positions allowed in one step, radians
    merge : float (default 0.3): particles closer than merge / (beta sigma_max(B)) are merged
    quadrature : ``"points"`` (default) or ``"cells"``: the sums take each source particle's
        mass at its centroid, or integrate the kernel over its parallelogram
    multirate : bool (default true): the particles a step fails for (and those they move) take
        sub-steps of their own over it (:mod:`._particle_steps`); false: one step for all
    refine_look : bool (default false): split the particles where the heavy mass looks down to
        half the kernel's width (:func:`._particle_remesh.look_lengths`)
    merge_shape : ``"area"`` (default) or ``"moments"``: a merged particle takes the heaviest
        member's shape scaled to the members' total area, or the shape of the second moment of
        its members with 1e-3 of its mass at least (:func:`._particle_remesh.merge`)
    split_slope : ``"fitted"`` (default) or ``"limited"``: a split divides a particle's mass by
        the log-linear profile fitted to its neighbours, or by that profile limited to their
        range (a cluster's particle is cut in equal halves: :func:`._particle_remesh.limited_tilt`)
    remesh_tail : float (default 0: never): every this many units of time, put the deep tail
        (log densities more than 20 below the densest) back on the n x n cubed sphere's cells,
        one particle per cell, mass exact (:func:`._particle_remesh.remesh_tail`)
    merge_tail : float (default 0: never): every this many units of time, merge the deep tail
        (mean log densities more than 20 below the densest) outside the look caps by the cells
        of a cubed sphere at most ``merge_tail_width`` kernel widths wide, masses and first
        moments exact (:func:`._particle_remesh.merge_tail`)
    merge_tail_width : float (default 0.4): the width of those cells in kernel widths
        (beta sigma_max(B))^(-1/2) (a power of 2 per cube edge, at least n)
    voronoi_shapes : float (default 0: never): every this many units of time, the deep tail's
        shapes become those of its particles' spherical Voronoi cells, which the splits then
        fill (:func:`._particle_remesh.voronoi_shapes`)
    follow_depth : float (default 0: 2 beta sigma_max(B) + 50): the error control follows the
        particles whose log mass lies within this many e-folds of the heaviest's; the others
        move by the step their neighbours set
    file_cells : ``"kept"`` (default) or ``"coarsened"``: a mesh file's cells (``initial.name =
        "file"``) each one particle, or those outside the look caps merged by the n x n cells
        (:func:`._particle_remesh.coarsen_outside`)
    interaction : ``"auto"`` (``particle_sums``)
    """

    name = "log_lagrangian"
    domain = "sphere"
    options = (
        "n",
        "tolerance",
        "merge",
        "quadrature",
        "multirate",
        "refine_look",
        "merge_shape",
        "split_slope",
        "remesh_tail",
        "merge_tail",
        "merge_tail_width",
        "voronoi_shapes",
        "follow_depth",
        "file_cells",
        "interaction",
        "allow_underresolved",
    )
    resolution = Resolution(
        key="n",
        default=16,
        minimum=2,
        maximum=256,
        rule=(1.0, 1.0),
        message=(
            "n = {value} initial cells per cube edge (of pi / (2 n) rad) are wider than pi / 2 "
            "times the attention kernel width (beta sigma_max(B))^(-1/2) = {width:.3g} rad: "
            "needs n >= {need}"
        ),
        what=" (initial cubed-sphere cells per face edge: 6 n^2 particles)",
        cost="6 n^2 = 393 216 initial particles, each right-hand side a sum over all pairs",
    )
    default_integrator = "bs3_particles"
    evaluator_inputs = "log_particles"
    positive = True
    growth_slack = 3.0
    #: the weak form of the zero-temperature contract (n = 4, 8, 16): 2.04, 2.00
    zero_temperature_order = 2.0
    carries_log_density = True
    carries_centroids = True
    centroid_fields = 3
    carries_particles = True
    diagnostics = ("n_particles",)
    suited_to = "at low temperature"
    error_exponent = 1.0 / 3.0
    max_growth = 5.0

    work_bytes_per_point = 4000.0
    grid_bytes_per_point = 400.0

    @classmethod
    def validate_own_options(cls, table: Mapping[str, Any], prefix: str) -> dict[str, Any]:
        return validate_lagrangian_options(table, prefix)

    @classmethod
    def grid_spacing(cls, options: Mapping[str, Any]) -> float:
        return math.pi / (2 * cls.resolution.of(options))

    @classmethod
    def memory_sizes(cls, options: Mapping[str, Any]) -> tuple[int, int, float]:
        n = cls.resolution.of(options)
        particles = 6 * n * n * 8  # the count grows by splitting: 8 times, as measured
        return 2 * (RINGS_PER_N * n) ** 2, particles, 8.0 * ROWS * particles

    def __init__(
        self,
        problem: Any,
        *,
        n: int = 16,
        tolerance: float = 1e-3,
        merge: float = DEFAULT_MERGE,
        quadrature: str = DEFAULT_QUADRATURE,
        multirate: bool = True,
        refine_look: bool = DEFAULT_REFINE_LOOK,
        merge_shape: str = DEFAULT_MERGE_SHAPE,
        split_slope: str = DEFAULT_SPLIT_SLOPE,
        remesh_tail: float = DEFAULT_REMESH_TAIL,
        file_cells: str = DEFAULT_FILE_CELLS,
        merge_tail: float = DEFAULT_MERGE_TAIL,
        merge_tail_width: float = DEFAULT_MERGE_TAIL_WIDTH,
        follow_depth: float = DEFAULT_FOLLOW_DEPTH,
        voronoi_shapes: float = DEFAULT_VORONOI_SHAPES,
        **common: Any,
    ) -> None:
        self.cells = CubedSphereCells(n)
        super().__init__(problem, LatLonCells(RINGS_PER_N * n), **common)
        self.tolerance = float(tolerance)
        self.merge_option = float(merge)
        self.quadrature = quadrature
        self.multirate = bool(multirate)
        self.refine_look = bool(refine_look)
        self.merge_moments = merge_shape == "moments"
        self.split_limited = split_slope == "limited"
        self.remesh_interval = float(remesh_tail)
        self.file_cells = file_cells
        self._tail_remesh = TailRemesh(self.cells) if self.remesh_interval > 0.0 else None
        model = problem.model
        interacting = model.kind.interacting and model.beta > 0.0
        beta_sigma = model.beta * model.kernel.sigma_max if interacting else 0.0
        #: the particles the error control follows: those a softmax can see (or follow_depth)
        self.window = (follow_depth or 2.0 * beta_sigma + 50.0) if interacting else math.inf
        width = self.merge_option / beta_sigma if beta_sigma > 0.0 else 0.0
        self.n_fine = max(cells_within(width, FINEST_MERGE), 4 * self.cells.n)
        self.merge_tail_interval = float(merge_tail)
        self.merge_tail_width = float(merge_tail_width)
        self.voronoi_interval = float(voronoi_shapes)
        #: the cells per cube edge ``merge_tail`` merges by
        self.n_tail = tail_cells(self.cells.n, beta_sigma, self.merge_tail_width)
        self.s_max = math.inf
        self.init_step_control()
        self._emptied = False
        self._cache: tuple[Array, list[tuple[Array, Array]]] | None = None
        #: the interpolant's triangles of each slice of the state of ``_cache`` (or None each)
        self._reconstructions: list[Any] = []
        self._binned_cache: tuple[Array, tuple[Array, Array]] | None = None
        #: splits and merges so far
        self.splits = self.merges = 0
        #: steps with local sub-steps, the particles and the sub-steps they took
        self.refined_steps = self.refined_particles = self.substeps = 0
        #: the tail's remeshings and the particles they replaced; its merges, the particles
        #: they removed
        self.tail_remeshes = self.tail_remeshed = 0
        self.tail_merges = self.tail_merged = 0
        #: the tessellations of the deep tail (``voronoi_shapes``) and the shapes they replaced
        self.tessellations = self.tessellated = 0

    def layout(self) -> Layout:
        return Layout("sphere", "log_particles", _Recording(self.grid), self.grid.points)

    def make_integrator(self, name: str) -> Any:
        return ParticleStep(self)

    # -- state -------------------------------------------------------------------------------
    def _slice_particles(self, f: Any) -> tuple[Array, Array, Array, Array]:
        """(log masses, positions, shapes, log point masses) of the initial density ``f`` of one
        slice, mass 1. A mesh file's cells (``initial.name = "file"``) are taken as they are,
        each cell one particle with its mass exactly (``file_cells = "coarsened"``: outside
        the look caps merged by the n x n cells)."""
        cells = f.cells() if hasattr(f, "cells") else None
        if cells is not None:
            m, x, shape = cells
            live = m > 0.0
            log_m, x, shape = np.log(m[live]), x[live], shape[live]
            log_point = log_m
            if self.file_cells == "coarsened":
                log_m, x, shape, log_point = coarsen_outside(
                    log_m,
                    x,
                    shape,
                    log_m,
                    self._query(),
                    self.s_max,
                    self.cells.n,
                    self.merge_moments,
                )
            total = logsumexp(log_m)
            return log_m - total, x, shape, log_point - total
        components = f.components() if hasattr(f, "components") and hasattr(f, "means") else None
        narrow, wide = [], []
        if components is None:
            wide.append(lambda x: np.log(np.maximum(np.asarray(f(x), dtype=float), 0.0)))
        else:
            for (weight, log_f, width), mean in zip(components, f.means):
                if weight <= 0.0:
                    continue
                if width < NARROW_FRACTION * self.cells.h:
                    narrow.append((math.log(weight), np.asarray(mean, dtype=float), width))
                else:
                    wide.append(lambda x, w=weight, g=log_f: math.log(w) + g(x))
        parts = []
        if wide:

            def log_f(p: Array) -> Array:
                return logsumexp([g(p) for g in wide], axis=0)

            log_m, x, shape = self.cells.log_moments(log_f)
            live = np.isfinite(log_m)
            log_m, x, shape = log_m[live], x[live], tangent_shapes(x[live], shape[live])
            with np.errstate(divide="ignore"):
                parts.append((log_m, x, shape, log_f(x) + log_area(shape)))
        for log_w, mean, width in narrow:
            side = math.sqrt(2.0 * math.pi) * width  # area 2 pi / kappa
            shape = side * tangent_frames(mean[None])[0]
            parts.append((np.array([log_w]), mean[None], shape[None], np.array([log_w])))
        log_m, x, shape, log_point = (np.concatenate(p) for p in zip(*parts))
        total = logsumexp(log_m)
        return log_m - total, x, shape, log_point - total

    def initial_state(self) -> Array:
        """The particles of each slice's initial density, mass 1, shape (n_xi, 10, n)."""
        if self.s_max == math.inf:  # the longest cell of the cubed sphere
            _, _, cells = self.cells.log_moments(lambda p: np.zeros(len(p)), order=1)
            self.s_max = SPLIT_LENGTH * float(np.linalg.svd(cells, compute_uv=False)[:, 0].max())
        slices = [self._slice_particles(f) for f in self.problem.slice_initials()]
        return np.stack([pack(*merge(*p, self.n_fine, self.merge_moments)[:4]) for p in slices])

    def _query(self) -> Any:
        """q = beta B^T x of positions x (the look caps' directions), None without
        interaction."""
        return self.problem.model.kernel.query if self.window < math.inf else None

    def checkpoint_shape_ok(self, shape: tuple[int, ...], expected: tuple[int, ...]) -> bool:
        """Any number of particles: (n_xi, 10, n)."""
        return len(shape) == 3 and shape[:2] == expected[:2]

    def atoms(self, state: Array) -> tuple[Array, Array]:
        """(positions (n, 3), masses (n,)) of the particles of the marginal (one slice)."""
        log_m, x, _, _ = unpack(state[0])
        return x, np.exp(log_m - logsumexp(log_m))

    def point_log_density(self, state: Array) -> list[Array]:
        """lambda, the log density at each particle's centroid, of each slice (module
        docstring): c - log |f1 x f2|."""
        return [s[10] - log_area(unpack(s)[2]) for s in state]

    def _binned(self, state: Array) -> tuple[Array, Array]:
        """(log of each recording cell's mass, mass-weighted mean position), per slice; those of
        the last state asked for are kept (a snapshot asks for rho, log rho and centroids)."""
        if self._binned_cache is not None and self._binned_cache[0] is state:
            return self._binned_cache[1]
        n_cells = self.grid.n_cells
        logs, means = [], []
        for s in state:
            log_m, x, _, _ = unpack(s)
            cell = self.grid.cell_of(x)
            top = np.full(n_cells, -np.inf)
            np.maximum.at(top, cell, log_m)
            w = np.exp(log_m - top[cell])
            total = np.bincount(cell, weights=w, minlength=n_cells)
            mean = np.stack(
                [np.bincount(cell, weights=w * x[:, k], minlength=n_cells) for k in range(3)], 1
            )
            live = total > 0.0
            with np.errstate(divide="ignore"):
                logs.append(np.where(live, top + np.log(np.where(live, total, 1.0)), -np.inf))
            norm = np.linalg.norm(mean, axis=1, keepdims=True)
            means.append(
                np.where(live[:, None], mean / np.where(norm > 0, norm, 1.0), self.grid.points)
            )
        binned = (np.stack(logs), np.stack(means))
        self._binned_cache = (state, binned)
        return binned

    def log_density(self, state: Array) -> Array:
        """log rho of the recording cells: log (binned mass / area), :data:`LOG_FLOOR` where no
        particle is; shape (n_xi, n_cells)."""
        log_m, _ = self._binned(state)
        return np.maximum(log_m - np.log(self.grid.weight), LOG_FLOOR)

    def density(self, state: Array) -> Array:
        log_m, _ = self._binned(state)
        with np.errstate(under="ignore"):
            return np.exp(log_m) / self.grid.weight

    def centroids(self, state: Array) -> Array:
        """The mass-weighted mean position of the particles in each recording cell (the cell's
        centre where none is), (n_xi, n_cells, 3)."""
        return self._binned(state)[1]

    def masses(self, state: Array) -> Array:
        return np.array([math.exp(logsumexp(s[0])) for s in state])

    def extremes(self, state: Array) -> tuple[float, float]:
        rho = self.density(state)
        return float(np.max(rho)), float(np.min(rho))

    def diagnostic(self, name: str, state: Array) -> float:
        """``n_particles``: the number of particles."""
        return float(state.shape[-1])

    # -- stepping ------------------------------------------------------------------------------
    def _flows(self, state: Array) -> list[tuple[Array, Array]]:
        """(dx/dt, d shape/dt) of each slice's particles; those of the last state asked for are
        kept (the loop asks for the rate at the start of a step, and the step again)."""
        if self._cache is not None and self._cache[0] is state:
            return self._cache[1]
        flows, reconstructions = [], []
        for s in state:
            log_m, x, shape, _ = unpack(s)
            reconstructions.append(
                self.interaction.reconstruction(x, log_m)
                if self.quadrature == "interpolant"
                else None
            )
            flows.append(self._flow(x, log_m, shape, None, reconstructions[-1]))
        self._cache = (state, flows)
        self._reconstructions = reconstructions
        return flows

    def _flow(
        self,
        x: Array,
        log_m: Array,
        shape: Array,
        rows: Array | None = None,
        reconstruction: Any = None,
    ) -> tuple[Array, Array]:
        """(dx/dt, d shape/dt) of one slice's particles (of those ``rows`` only, all being
        sources), the sources as ``quadrature`` says; with ``interpolant``, the triangles of
        ``reconstruction``, fixed at the start of the step (:meth:`_flows`)."""
        return self.interaction.flow(x, log_m, shape, self.quadrature, rows, reconstruction)

    def rhs(self, state: Array, t: float) -> Tendency:
        flows = self._flows(state)
        rate = np.stack([pack(np.zeros(len(v)), v, ds, np.zeros(len(v))) for v, ds in flows])
        speed = max(float(np.max(np.linalg.norm(v, axis=1), initial=0.0)) for v, _ in flows)
        return Tendency(rate, speed)

    def stable_dt(self, cfl: float, tendency: Tendency) -> float:
        """The step the error control asks for; the first one cfl h / max|X|, h = pi / (2 n)."""
        if self.dt_next is not None:
            dt = self.dt_next
        else:
            dt = cfl * self.cells.h / tendency.max_speed
        self._proposed, self._rejected = dt, False
        return dt

    def _step(
        self, s: Array, k1: tuple[Array, Array], dt: float, reconstruction: Any = None
    ) -> tuple[Array, Array, float, float, tuple[int, int]]:
        """One step of one slice's particles from the rates ``k1`` at its start (BS3, and
        local sub-steps of those it fails for: :mod:`._particle_steps`): (positions, shapes,
        the largest error of a relevant particle's accepted move, the error that sizes the next
        step, (particles that took sub-steps, sub-steps))."""
        log_m, x, shape, _ = unpack(s)

        def whole(xs: Array, fs: Array, t: float) -> tuple[Array, Array]:
            return self._flow(xs, log_m, fs, None, reconstruction)

        step = bs3(whole, x, shape, k1, 0.0, dt, SHAPE_TOLERANCE_FACTOR)
        relevant = log_m >= log_m.max() - self.window
        worst = float(np.max(step.error, where=relevant, initial=0.0))
        if not self.multirate:
            return step.x, step.shape, worst, worst, (0, 0)
        sizing = sizing_error(step.error, relevant)
        moving = relevant & (step.error > self.tolerance)
        for _ in range(COUPLING_ROUNDS):
            if not moving.any():
                return step.x, step.shape, worst, sizing, (0, 0)
            if moving.sum() > MAX_REFINED * len(moving):
                break
            rows = np.flatnonzero(moving)
            moved = self._substeps(
                log_m, x, shape, k1, step, rows, relevant[rows], dt, reconstruction
            )
            if moved is None:
                break
            x_new, shape_new, worst_moved, count = moved
            late = step.error + coupling_error(
                step, whole(x_new, shape_new, dt), dt, SHAPE_TOLERANCE_FACTOR
            )
            settled = relevant & ~moving
            if not np.any(late > self.tolerance, where=settled):
                worst = max(worst_moved, float(np.max(late, where=settled, initial=0.0)))
                return x_new, shape_new, worst, sizing, (len(rows), count)
            moving |= settled & (late > self.tolerance)
        return step.x, step.shape, worst, worst, (0, 0)  # refused: the single step's error

    def _substeps(
        self,
        log_m: Array,
        x: Array,
        shape: Array,
        k1: tuple[Array, Array],
        step: Step,
        rows: Array,
        relevant: Array,
        dt: float,
        reconstruction: Any = None,
    ) -> tuple[Array, Array, float, int] | None:
        """Move the particles ``rows`` again over [0, dt] in sub-steps, the others on the
        Hermite curves of their ``step`` (:mod:`._particle_steps`): (all positions, all shapes,
        the sub-steps' largest error (over the ``relevant`` of ``rows``), their number), or
        None when they are too many."""
        (v_end, rate_end), (v0, rate0) = step.rate, k1

        def rate(xr: Array, fr: Array, t: float) -> tuple[Array, Array]:
            xs = hermite(x, v0, step.x, v_end, dt, t / dt)
            fs = hermite(shape, rate0, step.shape, rate_end, dt, t / dt)
            xs[rows], fs[rows] = xr, fr
            return self._flow(xs, log_m, fs, rows, reconstruction)

        first = float(np.max(step.error[rows]))
        out = substeps(
            rate,
            x[rows],
            shape[rows],
            (v0[rows], rate0[rows]),
            dt,
            first,
            self.tolerance,
            relevant,
            SHAPE_TOLERANCE_FACTOR,
        )
        if out is None:
            return None
        x_new, shape_new = step.x.copy(), step.shape.copy()
        x_new[rows], shape_new[rows], worst, count = out
        return x_new, shape_new, worst, count

    def advance(self, state: Array, t: float, dt: float) -> Array:
        """One step of every slice (:meth:`_step`), then split and merge (module docstring);
        records the error estimate for the step control."""
        self._emptied = False
        out, worst, sizing = [], 0.0, 0.0
        refined = []
        flows = self._flows(state)
        remesh = self._tail_remesh is not None and crosses(t, dt, self.remesh_interval)
        merge_deep = self.merge_tail_interval > 0.0 and crosses(t, dt, self.merge_tail_interval)
        voronoi = self.voronoi_interval > 0.0 and crosses(t, dt, self.voronoi_interval)
        replaced = removed = reshaped = 0
        for s, k1, rebuilt in zip(state, flows, self._reconstructions):
            x, shape, error, size_by, moved = self._step(s, k1, dt, rebuilt)
            refined.append(moved)
            shape = orthogonal_shapes(tangent_shapes(x, shape))
            if voronoi:
                shape, count = voronoi_shapes(s[0], x, shape, self.s_max)
                reshaped += count
            worst, sizing = max(worst, error), max(sizing, size_by)
            lengths = self.s_max
            if self.refine_look and self.problem.model.kind.interacting:
                lengths = look_lengths(s[0], x, self.problem.model.kernel.query, self.s_max)
            log_m, x, shape, log_point, depths = split(
                s[0], x, shape, s[10], lengths, self.split_limited
            )
            if remesh:
                log_m, x, shape, log_point, count = self._tail_remesh(log_m, x, shape, log_point)
                replaced += count
            if merge_deep:
                log_m, x, shape, log_point, count = merge_tail(
                    log_m,
                    x,
                    shape,
                    log_point,
                    self._query(),
                    self.s_max,
                    self.n_tail,
                    self.merge_moments,
                )
                removed += count
            log_m, x, shape, log_point, merged = merge(
                log_m, x, shape, log_point, self.n_fine, self.merge_moments
            )
            out.append((pack(log_m, x, shape, log_point), len(depths), merged))
        self.record_error(np.array([worst]), np.array([True]), dt, sizing=sizing)
        if worst <= self.tolerance:
            self.splits += sum(o[1] for o in out)
            self.merges += sum(o[2] for o in out)
            self.refined_steps += sum(1 for r in refined if r[0])
            self.refined_particles += sum(r[0] for r in refined)
            self.substeps += sum(r[1] for r in refined)
            self.tail_remeshes += int(remesh)
            self.tail_remeshed += replaced
            self.tail_merges += int(merge_deep)
            self.tail_merged += removed
            self.tessellations += int(voronoi)
            self.tessellated += reshaped
        return np.stack([o[0] for o in out])

    def attributes(self) -> dict[str, Any]:
        return {
            "n": self.cells.n,
            "n_initial_particles": self.cells.n_cells,
            "mesh": "particles from the equiangular cubed sphere, split and merged",
            "recording_nlat": self.grid.nlat,
            "tolerance": self.tolerance,
            "merge": self.merge_option,
            "quadrature": self.quadrature,
            "merge_cells_per_face_edge": self.n_fine,
            "split_length": self.s_max,
            "splits": self.splits,
            "merges": self.merges,
            "multirate": int(self.multirate),
            "refine_look": int(self.refine_look),
            "merge_shape": "moments" if self.merge_moments else "area",
            "split_slope": "limited" if self.split_limited else "fitted",
            "remesh_tail": self.remesh_interval,
            "file_cells": self.file_cells,
            "tail_remeshes": self.tail_remeshes,
            "tail_remeshed_particles": self.tail_remeshed,
            "merge_tail": self.merge_tail_interval,
            "merge_tail_width": self.merge_tail_width,
            "merge_tail_cells_per_face_edge": self.n_tail,
            "follow_depth": self.window,
            "voronoi_shapes": self.voronoi_interval,
            "tail_tessellations": self.tessellations,
            "tail_tessellated_particles": self.tessellated,
            "tail_merges": self.tail_merges,
            "tail_merged_particles": self.tail_merged,
            "refined_steps": self.refined_steps,
            "refined_particles": self.refined_particles,
            "substeps": self.substeps,
            "interaction": self.interaction.name,
            "integrator": "bs3_particles",
        }
