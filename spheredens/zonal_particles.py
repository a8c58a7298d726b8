"""Particles in R^d for the zonal domain: unit vectors x_i of R^d, any d <= 1024, under the full
d-dimensional model whose zonal density the domain ``zonal`` solves for (docs/models.md
section 6, docs/high_dimension.md).

The model is B = Q^T K = a e e^T + b P and V = l1 e e^T + l2 P (P = I - e e^T, e the axis).
No d x d matrix is formed: with s = <x, e>,

    beta B^T x = beta (b x + (a - b) s e),        V y = l2 y + (l1 - l2) <y, e> e,

O(n d) each, and the attention sums are the particles' generic log-sum-exp sums
(:func:`~spheredens.interaction.logsumexp_sums`: the n x n Gram matrix <beta B^T x_i, x_j> in
row blocks of 2^22 entries, one BLAS product each, then one product with the values V x_j), in
float64; from :data:`~spheredens.particles.PRUNE_FROM` particles on, with the certified pruning
of :func:`~spheredens.interaction.pruned_logsumexp_sums` (particles ordered in tight groups by
:func:`cluster_order`) where two sampled blocks of rows show that it skips enough of the
sources (:data:`PRUNE_PAYS_BELOW`). The velocity is projected on
the tangent space, P_x N / Z (``sa``), P_x N (``usa``), P_x V B^T x / |B^T x|
(``sa_zero_temperature``), and the integrator is that of every particle run (RK4,
renormalized to |x| = 1 after each step).

Files (schema spheredens-particles-1 on the domain ``zonal``): ``position`` holds what the
domain's points are, the meridian-plane images (cos theta_i, sin theta_i) of the particles,
theta_i = arccos <x_i, e> in [0, pi], so that every reader of particle files sees the
theta-marginal that compare needs; ``polar_angle`` (time, particle) is theta_i; the vectors of
R^d themselves are ``sphere_position`` (sphere_time, particle, sphere_component), at every
snapshot when they take at most :data:`FULL_POSITION_BYTES`, else at the first and the last
snapshot; ``checkpoint_position`` (particle, sphere_component) is the full state for a resume.

``spheredens compare`` of a zonal density with such particles computes the exact 1-D W2 of the
theta-laws with cost |theta - theta'|^2 (:func:`w2_theta`, :func:`marginal_parts`): the W2 on
S^{d-1} when the particles' law is zonal, and a lower bound on it otherwise (|theta(x) -
theta(y)| <= d(x, y)); the comparison file says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ._types import Array
from .accessor import config_tables
from .config import RunConfig
from .diagnostics import grid_atoms, particle_projection_distance
from .exceptions import SchemaError
from .geometry import ZONAL, Domain, tangent_project
from .interaction import logsumexp_sums, pruned_logsumexp_sums
from .interaction._pruned import PRUNE_FRACTION, SOURCE_BLOCK, TARGET_BLOCK, SourceBlocks
from .interaction._zonal import zonal_scalars
from .models import Model
from .particles import PRUNE_FROM, ParticleRecorder, ParticleSystem
from .problem import Problem
from .recorder import checkpoint_digest
from .schema import particle_dataset
from .schemes._memory import FULL_POSITION_BYTES, QUANTILE_CELLS, ZONAL_EVAL_CHUNK
from .transport import GridAtoms

#: pruning is used when the sampled target blocks keep at most this fraction of the sources
#: (measured at n = 4000, d = 16 and 128: pruned 0.6 x the direct time at a kept fraction of
#: 0.5, equal near 0.55-0.65)
PRUNE_PAYS_BELOW = 0.6
#: what the W2 of the theta-laws is, in the comparison file
LOWER_BOUND = (
    "W2 of the polar-angle laws: the exact 1-D W2 with cost |theta - theta'|^2 between g_t and "
    "the particles' theta_i = arccos <x_i, e>; this is a lower bound on the W2 on S^{d-1} "
    "between the particles in R^d and the zonal density (|theta(x) - theta(y)| <= d(x, y)), "
    "equal to it when the particles' law is zonal (invariant under rotations about e)"
)


# -- the model's structure --------------------------------------------------------------------
@dataclass(frozen=True)
class ZonalFrame:
    """The axis e of R^d and the scalars of a zonal model: B = a e e^T + b P, V = l1 e e^T +
    l2 P (P = I - e e^T), with the maps of the module docstring, each O(n d)."""

    axis: Array
    a: float
    b: float
    l1: float
    l2: float
    beta: float

    @classmethod
    def of(cls, problem: Problem) -> "ZonalFrame":
        """The frame of a zonal problem (``domain.axis`` and the model's 2 x 2 reductions)."""
        a, b, l1, l2 = zonal_scalars(problem.model)
        axis = np.asarray(problem.domain_parameters["axis"], dtype=float)
        return cls(axis, a, b, l1, l2, float(problem.model.beta))

    @property
    def d(self) -> int:
        return len(self.axis)

    def along(self, x: Array) -> Array:
        """s = <x, e> of every row of x."""
        return x @ self.axis

    def query(self, x: Array, s: Array) -> Array:
        """beta B^T x = beta (b x + (a - b) s e)."""
        return self.beta * (self.b * x + np.outer((self.a - self.b) * s, self.axis))

    def values(self, x: Array, s: Array) -> Array:
        """V x = l2 x + (l1 - l2) s e."""
        return self.l2 * x + np.outer((self.l1 - self.l2) * s, self.axis)

    def polar_angle(self, x: Array) -> Array:
        """theta = arccos <x, e> in [0, pi], as atan2(|x - s e|, s) (accurate at the poles)."""
        s = self.along(x)
        return np.arctan2(np.linalg.norm(x - np.outer(s, self.axis), axis=-1), s)

    def meridian(self, x: Array) -> Array:
        """(cos theta, sin theta) of every row of x: its point in the meridian half-plane."""
        theta = self.polar_angle(x)
        return np.stack([np.cos(theta), np.sin(theta)], axis=-1)

    def zero_temperature_velocity(self, x: Array) -> Array:
        """P_x V B^T x / |B^T x| (``sa_zero_temperature``)."""
        s = self.along(x)
        bx = self.b * x + np.outer((self.a - self.b) * s, self.axis)
        u = bx / np.linalg.norm(bx, axis=-1, keepdims=True)
        return tangent_project(x, self.values(u, self.along(u)))


def cluster_order(x: Array, leaf: int = SOURCE_BLOCK) -> Array:
    """An order of points of R^d in which each run of ``leaf`` consecutive points is a tight
    group: recursive halving along the leading principal direction (three power iterations)
    of each group, split at a multiple of ``leaf`` (so the blocks of
    :class:`~spheredens.interaction._pruned.SourceBlocks` are the leaves), depth first.
    O(n d log(n / leaf)); for the certified pruning of :func:`zonal_particle_sums`, where
    ordering by theta alone mixes points of one latitude that are far apart in omega."""
    out: list[Array] = []
    stack = [np.arange(len(x))]
    while stack:
        idx = stack.pop()
        if len(idx) <= leaf:
            out.append(idx)
            continue
        y = x[idx] - x[idx].mean(axis=0)
        v = y[int(np.argmax(np.einsum("ij,ij->i", y, y)))]
        for _ in range(3):
            v = y.T @ (y @ v)
            size = float(np.linalg.norm(v))
            if size == 0.0:
                break
            v = v / size
        half = idx[np.argsort(y @ v, kind="stable")]
        mid = min(len(idx) - 1, -(-len(idx) // (2 * leaf)) * leaf)
        stack.append(half[mid:])
        stack.append(half[:mid])
    return np.concatenate(out)


def _may_prune(q: Array, x: Array, log_w: Array, rows: int = 64) -> bool:
    """Whether the pruning could pay before the particles are ordered: on ``rows`` rows spread
    over the particles, the fraction of sources whose logit is within the pruning's window of
    the row's largest one (such sources are summed whatever the blocks) is at most
    :data:`PRUNE_PAYS_BELOW` (for a uniform state in high d nearly every source is)."""
    n = len(x)
    pick = np.linspace(0, n - 1, min(rows, n)).astype(np.int64)
    g = q[pick] @ x.T + log_w[None, :]
    window = math.log(math.ceil(n / SOURCE_BLOCK)) - math.log(PRUNE_FRACTION)
    return float(np.mean(g >= g.max(axis=1, keepdims=True) - window)) <= PRUNE_PAYS_BELOW


def _pruning_pays(q: Array, x: Array, log_w: Array) -> bool:
    """Whether the certified pruning keeps at most :data:`PRUNE_PAYS_BELOW` of the sources on
    two blocks of :data:`~spheredens.interaction._pruned.TARGET_BLOCK` rows (those holding the
    rows n / 4 and 3 n / 4), with the union of their rows' kept blocks, as the pruned sums
    gather them. A cost decision only: the sums are the same to 2^-60 of each row's either
    way."""
    blocks = SourceBlocks(x)
    n = len(x)
    kept = []
    for at in (n // 4, (3 * n) // 4):
        start = (at // TARGET_BLOCK) * TARGET_BLOCK  # the blocks of rows the pruned sums use
        rows = slice(start, start + TARGET_BLOCK)
        upper, lower = blocks.bounds(q[rows], np.linalg.norm(q[rows], axis=1), x, log_w)
        kept.append(float(np.mean((upper >= lower[:, None] + blocks.log_cut).any(axis=0))))
    return max(kept) <= PRUNE_PAYS_BELOW


def zonal_particle_sums(
    frame: ZonalFrame, x: Array, log_w: Array, *, prune: bool | None = None
) -> tuple[Array, Array, Array]:
    """(Z e^-M, N e^-M, M) at the particles x (n, d) with log weights ``log_w``: the attention
    sums with logits <beta B^T x_i, x_j> + log w_j and values V x_j, blocked BLAS log-sum-exp;
    from :data:`~spheredens.particles.PRUNE_FROM` particles on, pruned (certified) where it
    pays (``prune``: True or False forces it on or off)."""
    s = frame.along(x)
    q, vy = frame.query(x, s), frame.values(x, s)
    if prune is False or (prune is None and len(x) < PRUNE_FROM):
        return logsumexp_sums(q, x, log_w, vy)
    if prune is None and not _may_prune(q, x, log_w):
        return logsumexp_sums(q, x, log_w, vy)
    order = cluster_order(x)
    q, xo, lw, vy = q[order], x[order], log_w[order], vy[order]
    if prune is None and not _pruning_pays(q, xo, lw):
        return _unordered(logsumexp_sums(q, xo, lw, vy), order)
    z, num, m, _ = pruned_logsumexp_sums(q, xo, lw, vy)
    return _unordered((z, num, m), order)


def _unordered(sums: tuple[Array, Array, Array], order: Array) -> tuple[Array, Array, Array]:
    back = np.empty_like(order)
    back[order] = np.arange(len(order))
    return tuple(a[back] for a in sums)  # type: ignore[return-value]


def zonal_particle_velocity(
    model: Model, frame: ZonalFrame, x: Array, weight: Array, *, prune: bool | None = None
) -> Array:
    """Tangent velocities (n, d) of particles x (n, d) in R^d with weights (n,) under the zonal
    ``model`` (its 2 x 2 reductions) about ``frame.axis``."""
    if not model.kind.interacting:
        return frame.zero_temperature_velocity(x)
    with np.errstate(divide="ignore"):
        log_w = np.log(weight)
    z, num, m = zonal_particle_sums(frame, x, log_w, prune=prune)
    if model.kind.normalized:
        avg = num / z[:, None]
    else:
        avg = num * np.exp(m)[:, None]
    return tangent_project(x, avg)


# -- initial particles --------------------------------------------------------------------------
def initial_cdf(problem: Problem, cells: int = QUANTILE_CELLS) -> tuple[Array, Array]:
    """(edges, cdf): the CDF of the initial polar law g_0 at the edges k pi / cells of a fine
    midpoint rule (g_0 in logs, so any d; the law is this piecewise-constant density, whose
    quantile function is the linear interpolation of the CDF)."""
    h = math.pi / cells
    centres = (np.arange(cells) + 0.5) * h
    d = int(problem.domain_parameters["d"])
    step = max(1, ZONAL_EVAL_CHUNK // d)
    log_g = np.concatenate(
        [problem.initial.log_polar_law(centres[k : k + step]) for k in range(0, cells, step)]
    )
    g = np.exp(log_g - np.max(log_g))
    cdf = np.concatenate([[0.0], np.cumsum(g)])
    return np.arange(cells + 1) * h, cdf / cdf[-1]


def uniform_directions(axis: Array, n: int, rng: np.random.Generator) -> Array:
    """n independent uniform unit vectors omega of e^perp (S^{d-2}; d = 2: +-e_perp)."""
    g = rng.standard_normal((n, len(axis)))
    g -= np.outer(g @ axis, axis)
    return g / np.linalg.norm(g, axis=1, keepdims=True)


def initial_zonal_particles(
    problem: Problem, n: int, initialization: str, seed: int
) -> tuple[Array, Array]:
    """Positions (n, d) in R^d and weights 1/n of the initial particles of a zonal problem:
    x_i = cos(theta_i) e + sin(theta_i) omega_i with theta_i = F^{-1}(u_i), F the CDF of g_0
    (:func:`initial_cdf`), and omega_i uniform on S^{d-2} in e^perp, all drawn from
    ``numpy.random.default_rng(seed)``: ``iid`` with u_i uniform on [0, 1) (i.i.d. samples of
    rho_0: for ``uniform``, i.i.d. uniform on S^{d-1}), ``quantile`` with u_i = (i - 1/2) / n
    (theta at the quantiles of g_0, omega still random)."""
    rng = np.random.default_rng(seed)
    if initialization == "iid":
        u = rng.random(n)
    elif initialization == "quantile":
        u = (np.arange(n) + 0.5) / n
    else:
        raise ValueError(f"unknown initialization {initialization!r} on the zonal domain")
    edges, cdf = initial_cdf(problem)
    theta = np.interp(u, cdf, edges)
    axis = np.asarray(problem.domain_parameters["axis"], dtype=float)
    omega = uniform_directions(axis, n, rng)
    x = np.cos(theta)[:, None] * axis + np.sin(theta)[:, None] * omega
    return x / np.linalg.norm(x, axis=1, keepdims=True), np.full(n, 1.0 / n)


# -- W2 of laws of theta ------------------------------------------------------------------------
def _quantile_pieces(left: Array, right: Array, mass: Array) -> tuple[Array, Array, Array]:
    """(u, left, right): a law on [0, pi] made of uniform pieces [left_k, right_k] (atoms:
    left = right) of masses mass_k, disjoint, as its quantile function: linear from left_k at
    u_k to right_k at u_{k+1}."""
    left, right = np.asarray(left, dtype=float), np.asarray(right, dtype=float)
    mass = np.clip(np.asarray(mass, dtype=float), 0.0, None)
    keep = mass > 0.0
    left, right, mass = left[keep], right[keep], mass[keep]
    order = np.argsort(left + right, kind="stable")
    u = np.concatenate([[0.0], np.cumsum(mass[order])])
    seen = np.diff(u) > 0.0  # pieces too light to move the cumulative sum have no quantiles
    u = np.concatenate([[0.0], u[1:][seen]])
    return u / u[-1], left[order][seen], right[order][seen]


def w2_theta(law_a: tuple[Array, Array, Array], law_b: tuple[Array, Array, Array]) -> float:
    """Exact W2 (radians) with cost |theta - theta'|^2 between two laws on [0, pi], each given
    as (left, right, mass) of disjoint uniform pieces (atoms: left = right; masses
    renormalized): the L2 distance of the quantile functions, piecewise linear in u, summed in
    closed form on the merged breakpoints (int of a linear e^2 over [u0, u1] = (u1 - u0)
    (e0^2 + e0 e1 + e1^2) / 3)."""
    ua, la, ra = _quantile_pieces(*law_a)
    ub, lb, rb = _quantile_pieces(*law_b)
    u = np.union1d(ua, ub)
    u0, u1 = u[:-1], u[1:]
    mid = 0.5 * (u0 + u1)

    def quantile(at: Array, uk: Array, left: Array, right: Array) -> Array:
        k = np.clip(np.searchsorted(uk, mid, side="right") - 1, 0, len(left) - 1)
        frac = np.clip((at - uk[k]) / (uk[k + 1] - uk[k]), 0.0, 1.0)
        return left[k] + frac * (right[k] - left[k])

    e0 = quantile(u0, ua, la, ra) - quantile(u0, ub, lb, rb)
    e1 = quantile(u1, ua, la, ra) - quantile(u1, ub, lb, rb)
    cost = float(np.sum((u1 - u0) * (e0 * e0 + e0 * e1 + e1 * e1)) / 3.0)
    return math.sqrt(max(cost, 0.0))


def atoms_law(theta: Array, weight: Array) -> tuple[Array, Array, Array]:
    """The law sum_i w_i delta_{theta_i} as pieces for :func:`w2_theta`."""
    theta = np.asarray(theta, dtype=float)
    return theta, theta, np.asarray(weight, dtype=float)


def initial_representation_error(problem: Problem, theta: Array, weight: Array) -> float:
    """W2 between the theta-law of particles and the initial polar law g_0 (the piecewise-
    constant law of :func:`initial_cdf`), exact in 1-D: for ``quantile`` starts the error of
    representing g_0 by n atoms, for ``iid`` the sampling error of that draw."""
    edges, cdf = initial_cdf(problem)
    return w2_theta(atoms_law(theta, weight), (edges[:-1], edges[1:], np.diff(cdf)))


def particle_theta(x: Array, axis: Array | None = None) -> Array:
    """Polar angles theta in [0, pi] of particle positions: meridian points (n, 2) of a zonal
    particle file (theta = |atan2(x_2, x_1)|, folded: an even extension's points count as
    theirs), or vectors of R^d (n, d), d > 2, about ``axis``. Two components are always read
    as meridian points (at d = 2 they are the vectors of R^2 when the axis is e_1)."""
    x = np.asarray(x, dtype=float)
    if x.shape[-1] == ZONAL.d:  # the domain's own points: the meridian plane's
        return np.abs(np.arctan2(x[..., 1], x[..., 0]))
    if axis is None or x.shape[-1] != len(axis):
        raise SchemaError(
            f"particles with {x.shape[-1]} components cannot be read as polar angles about an "
            f"axis of R^{0 if axis is None else len(axis)}"
        )
    frame = ZonalFrame(np.asarray(axis, dtype=float), 1.0, 1.0, 1.0, 1.0, 0.0)
    return frame.polar_angle(x)


def _cell_pieces(grid: Any, rho: Array, n_points: Any = None, centroid: Array | None = None):
    """g_t of a zonal file as pieces: the piecewise-constant density on the cells [theta_j -+
    w_j / 2] (exact: no sub-atoms), or with centroids (``log_sl``) each cell's mass at
    theta_j + c_j w_j. Returns ((left, right), masses, bound 0)."""
    theta, w = np.asarray(grid.theta, dtype=float), np.asarray(grid.weight, dtype=float)
    mass = np.clip(np.asarray(rho, dtype=float), 0.0, None) * w
    if centroid is not None:
        at = theta + np.asarray(centroid, dtype=float) * w
        return np.stack([at, at]), mass / mass.sum(), 0.0
    left = np.clip(theta - 0.5 * w, 0.0, math.pi)
    return np.stack([left, np.clip(theta + 0.5 * w, 0.0, math.pi)]), mass / mass.sum(), 0.0


def _cell_describe(grid: Any, n_points: Any = None, centroids: bool = False) -> str:
    if centroids:
        return "g_t as the mass of each cell at its centroid theta_j + c_j w_j (rho_centroid)"
    return "g_t as the piecewise-constant density on the cells [theta_j -+ w_j / 2] (exact)"


def _cell_resolution(grid: Any, rho: Array, bound: float) -> float:
    """W2 between the piecewise-constant g_t and its cell-centre atoms (h / sqrt(12))."""
    m = np.clip(np.asarray(rho, dtype=float), 0.0, None) * grid.weight
    return float(np.sqrt(np.sum(m * np.asarray(grid.weight) ** 2) / np.sum(m) / 12.0))


def density_dimension(density: Any) -> tuple[int, Array]:
    """(d, axis) of a zonal density file, from its configuration."""
    table = config_tables(density).get("domain", {})
    if "d" not in table:
        raise SchemaError("the zonal density file records no domain.d in its configuration")
    d = int(table["d"])
    axis = np.asarray(table.get("axis", [float(i == 0) for i in range(d)]), dtype=float)
    return d, axis


def marginal_parts(domain: Domain, density: Any, runs: Any = ()) -> tuple[Callable, Any]:
    """(distance, representation) that ``compare`` uses for a density file on ``domain``: the
    domain's own (:meth:`~spheredens.geometry.Domain.w2`,
    :func:`~spheredens.diagnostics.grid_atoms`), except on the zonal domain, where the
    particles of R^d are compared by their theta-marginal: :func:`w2_theta` against the exact
    piecewise-constant g_t, the method saying that this is a lower bound on the full W2
    (:data:`LOWER_BOUND`).

    Raises
    ------
    SchemaError
        A zonal particle run of another dimension d than the density's.
    """
    if not domain.meridian:
        return domain.w2, grid_atoms(domain)
    d, axis = density_dimension(density)
    for k, p in enumerate(runs):
        theirs = int(p.attrs.get("sphere_dimension", d))
        if theirs != d:
            raise SchemaError(
                f"particle run {k} lives in R^{theirs}, the density on S^{d - 1} (domain.d = "
                f"{d}); compare particles of the density's dimension"
            )

    def distance(pieces: Array, masses: Array, x: Array, w: Array) -> float:
        return w2_theta((pieces[0], pieces[1], masses), atoms_law(particle_theta(x, axis), w))

    return distance, THETA_CELLS


#: the representation of a zonal density in :func:`marginal_parts`
THETA_CELLS = GridAtoms(_cell_pieces, _cell_describe, _cell_resolution, LOWER_BOUND)


# -- the particle system and its file -------------------------------------------------------
class ZonalParticleSystem(ParticleSystem):
    """The n-particle system in R^d of a zonal problem: state (1, n, d), velocity
    :func:`zonal_particle_velocity`, the integrator and renormalization of
    :class:`~spheredens.particles.ParticleSystem`."""

    def __init__(
        self,
        problem: Problem,
        x0: Array,
        weight: Array,
        dt: float,
        integrator: str = "rk4",
        slices: Any = None,
    ) -> None:
        super().__init__(problem, x0, weight, dt, integrator)
        self.frame = ZonalFrame.of(problem)
        if self.x0.ndim != 2 or self.x0.shape[1] != self.frame.d:
            raise ValueError(
                f"zonal particles are vectors of R^{self.frame.d}, got shape {self.x0.shape}"
            )

    def velocity(self, x: Array) -> Array:
        """Tangent velocities (n, d) at positions x (n, d)."""
        return zonal_particle_velocity(self.problem.model, self.frame, x, self.weight)


class ZonalParticleRecorder(ParticleRecorder):
    """The snapshots of zonal particles: ``position`` as meridian points (cos theta_i,
    sin theta_i), ``polar_angle``, and the vectors of R^d as ``sphere_position`` (every snapshot
    within :data:`FULL_POSITION_BYTES`, else the first and the last); the module docstring."""

    def __init__(
        self, system: ZonalParticleSystem, config: RunConfig, *, initialization: str, seed: int
    ) -> None:
        self.system = system
        self.frame = system.frame
        self.config = config
        self.initialization = initialization
        self.seed = seed
        self.times: list[float] = []
        self.positions: list[Array] = []
        self.full: dict[int, Array] = {}
        self.status: dict[str, Any] = {
            "run_status": "partial",
            "stop_reason": "running",
            "n_steps": 0,
        }
        self.checkpoint: tuple[float, Array, int] | None = None
        self.w2_projection: list[float] = []
        n, d = system.x0.shape
        snapshots = len(config.time.snapshot_times())
        self.every = 8.0 * n * d * snapshots <= FULL_POSITION_BYTES
        self._w2, self._w2_reason = particle_projection_distance(
            system.problem.model, self.frame.meridian(system.x0), system.weight
        )
        self.initial_w2 = initial_representation_error(
            system.problem, self.frame.polar_angle(system.x0), system.weight
        )

    def _keep(self, index: int, x: Array) -> None:
        self.full[index] = np.array(x)
        if not self.every:  # the first and the latest snapshot
            for k in [k for k in self.full if 0 < k < index]:
                del self.full[k]

    def observe(self, t: float, state: Array) -> None:
        x = state[0]
        meridian = self.frame.meridian(x)
        self.times.append(float(t))
        self.positions.append(meridian)
        self.w2_projection.append(self._projection(meridian))
        self._keep(len(self.times) - 1, x)

    def restore(self, ds: Any) -> tuple[float, Array, int]:
        """Take over the snapshots of a partial zonal particle file; return its checkpoint."""
        if "checkpoint_position" not in ds or "sphere_position" not in ds:
            raise SchemaError("the particle file has no checkpoint in R^d to resume from")
        position = np.asarray(ds["checkpoint_position"].values)
        if position.shape != self.system.x0.shape:
            raise SchemaError(
                f"its checkpoint holds positions of shape {position.shape}, this "
                f"configuration's particles have {self.system.x0.shape}"
            )
        self.times = [float(t) for t in ds["time"].values]
        self.positions = [np.array(x) for x in ds["position"].values]
        self.w2_projection = [float(v) for v in ds["w2_projection"].values]
        index = {float(t): k for k, t in enumerate(self.times)}
        full = ds["sphere_position"].values
        self.full = {index[float(t)]: np.array(x) for t, x in zip(ds["sphere_time"].values, full)}
        self.checkpoint = (
            float(ds.attrs["checkpoint_time"]),
            position[None],
            int(ds.attrs["checkpoint_steps"]),
        )
        return self.checkpoint

    def dataset(self) -> Any:
        """The Dataset of the snapshots so far (schema spheredens-particles-1, domain zonal)."""
        system, problem = self.system, self.system.problem
        n, d = system.x0.shape
        ds = particle_dataset(
            self.times,
            self.positions,
            system.weight,
            domain=problem.domain,
            model=problem.model,
            config=self.config.to_toml(),
            attrs={
                "initialization": self.initialization,
                "seed": int(self.seed),
                "n_particles": int(n),
                "dt": system.dt,
                "integrator": system.integrator.name,
                "sphere_dimension": int(d),
                "initial_theta_w2": self.initial_w2,
                "positions_in_r_d": "every snapshot" if self.every else "first and last snapshot",
            },
            title=f"spheredens particles: {problem.model.name} in R^{d} (zonal), n = {n}, "
            f"{self.initialization}",
            status=self.status,
            w2_projection=(
                self.w2_projection,
                self._w2.comment() if self._w2 is not None else f"not defined: {self._w2_reason}",
            ),
        )
        ds["position"].attrs["comment"] = (
            "(cos theta, sin theta) in the meridian plane (e, omega), theta = arccos <x, e> the "
            "polar angle of the particle x in R^d; x itself: sphere_position"
        )
        ds.attrs["initial_theta_w2_comment"] = (
            "exact 1-D W2 between the initial particles' theta-law and the initial polar law "
            "g_0 (quantile: the representation error of n atoms; iid: this draw's sampling error)"
        )
        ds["polar_angle"] = (
            ("time", "particle"),
            np.arctan2(ds["position"].values[..., 1], ds["position"].values[..., 0]),
            {"long_name": "polar angle theta", "units": "radian", "comment": "arccos <x, e>"},
        )
        kept = sorted(self.full)
        ds = ds.assign_coords(
            sphere_time=(
                ("sphere_time",),
                np.array([self.times[k] for k in kept], dtype=float),
                {"long_name": "time of sphere_position", "units": "1"},
            )
        )
        ds["sphere_position"] = (
            ("sphere_time", "particle", "sphere_component"),
            np.array([self.full[k] for k in kept]).reshape(len(kept), n, d),
            {"long_name": "particle position in R^d", "units": "1", "comment": "unit vectors"},
        )
        ds["axis"] = (
            ("sphere_component",),
            np.asarray(self.frame.axis),
            {"long_name": "axis e", "units": "1"},
        )
        if self.checkpoint is not None:
            ds["checkpoint_position"] = (
                ("particle", "sphere_component"),
                np.asarray(self.checkpoint[1][0]),
                {"long_name": "checkpoint positions in R^d", "comment": "for --resume"},
            )
            ds.attrs.update(
                {"checkpoint_time": self.checkpoint[0], "checkpoint_steps": self.checkpoint[2]}
            )
            ds.attrs["checkpoint_sha256"] = checkpoint_digest(ds)  # checked before a resume
        return ds


@dataclass(frozen=True)
class ParticleParts:
    """What ``spheredens particles`` takes from a domain that has its own particles (the part
    ``"particles"`` of :class:`~spheredens.geometry.Domain`): the initial particles, the system
    and its recorder."""

    initial: Callable[..., tuple[Array, Array]]
    system: Any
    recorder: Any


ZONAL.provides("particles")(
    ParticleParts(initial_zonal_particles, ZonalParticleSystem, ZonalParticleRecorder)
)
