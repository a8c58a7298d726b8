"""The n-particle system of a model, integrated accurately; files in schema spheredens-particles-1.

    dx_i/dt = P_{x_i} sum_j w_j exp(beta <B^T x_i, x_j>) V x_j / sum_j w_j exp(beta <B^T x_i, x_j>)

(``sa``; ``usa`` without the denominator; ``sa_zero_temperature``: X_inf(x_i)), i.e. the
continuity equation of docs/models.md for the empirical measure sum_j w_j delta_{x_j}. For
``usa_av`` every particle carries a slice index k(i) (label xi_{k(i)}, frozen) and

    dx_i/dt = P_{x_i} sum_j w_j b_{k(i)k(j)} exp(beta <G_{k(i)} x_i, G_{k(j)} x_j>)
                                              G_{k(i)}^T G_{k(j)} x_j,

the velocity X_k of docs/models.md section 5 for the empirical slice measures (slice k has mass
r_k = sum_{k(j) = k} w_j), summed as e^beta sum_j ... exp(beta (<., .> - 1)). Softmax in
log-sum-exp form, float64, O(n^2) pairs vectorized in row blocks; RK4 (default) with the
positions renormalized to |x| = 1 after every step, fixed step ``particles.dt`` shortened to
land exactly on the snapshot times.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Callable

import numpy as np
from numpy.typing import NDArray

from ._types import Array
from .analysis import curve_summary
from .config import RunConfig
from .diagnostics import particle_projection_distance
from .exceptions import ConfigError, SchemaError, SimulationError
from .geometry import circle_points, domain_of_dimension, get_domain, sphere_area, tangent_project
from .integrators import INTEGRATORS
from .interaction import (
    circle_order,
    clustered_logsumexp_sums,
    logsumexp_sums,
    pruned_logsumexp_sums,
    sphere_order,
)
from .io import FileWriter, check_not_input, check_output_location, open_particles
from .locking import output_lock
from .models import Model
from .problem import Problem
from .recorder import checkpoint_digest, run_status
from .runner import Notify, input_files, resume_point, run_difference
from .schema import particle_dataset
from .schemes import Scheme, Tendency
from .simulate import Observer, Progress, simulate

#: kernel entries formed at once by the labelled-particle sums (row blocks)
_CHUNK_ENTRIES = 1 << 22
#: most runs of equal slice indices summed one product each (beyond: gathered couplings)
_MAX_RUNS = 32


# -- initial particles ----------------------------------------------------------------------
def sample_iid(rho0: Callable[[Array], Array], d: int, n: int, rng: np.random.Generator) -> Array:
    """n independent samples of rho_0 by rejection from the uniform measure.

    The envelope is 1.25 x the maximum of rho_0 on the domain's quasi-uniform set of
    ``envelope_points`` points (:meth:`spheredens.geometry.Domain.quasi_uniform`); a sample
    where rho_0 exceeds the envelope raises (the density is too peaked for this sampler).
    """
    domain = domain_of_dimension(d)
    probe = domain.quasi_uniform(domain.envelope_points)
    bound = 1.25 * float(rho0(probe).max())
    out: list[Array] = []
    count = 0
    while count < n:
        batch = max(1024, 2 * (n - count) * int(math.ceil(bound * sphere_area(d))))
        g = rng.standard_normal((batch, d))
        x = g / np.linalg.norm(g, axis=1, keepdims=True)
        values = rho0(x)
        if values.max() > bound:
            raise ValueError("rho_0 exceeds the rejection envelope: too peaked for iid sampling")
        keep = x[rng.random(batch) * bound < values]
        out.append(keep)
        count += len(keep)
    return np.concatenate(out)[:n]


def quantile_circle(rho0: Callable[[Array], Array], n: int, *, fine: int = 1 << 16) -> Array:
    """theta_i = F^{-1}((i - 1/2) / n), F the CDF of rho_0 from theta = 0 (midpoint rule on
    ``fine`` cells, inverse by linear interpolation)."""
    h = 2 * np.pi / fine
    centres = (np.arange(fine) + 0.5) * h
    cdf = np.concatenate([[0.0], np.cumsum(rho0(circle_points(centres)) * h)])
    cdf /= cdf[-1]
    theta = np.interp((np.arange(n) + 0.5) / n, cdf, np.arange(fine + 1) * h)
    return circle_points(theta)


def _initial_points(
    rho0: Callable[[Array], Array],
    d: int,
    n: int,
    initialization: str,
    rng: Callable[[], np.random.Generator],
) -> tuple[Array, Array]:
    """n points of one (unnormalized) density and their weights summing to 1; ``rng()`` gives
    the generator of ``iid`` (only called for it)."""
    if initialization == "iid":
        return sample_iid(rho0, d, n, rng()), np.full(n, 1.0 / n)
    if initialization == "quantile":
        return quantile_circle(rho0, n), np.full(n, 1.0 / n)
    if initialization == "quasi_uniform":
        x = domain_of_dimension(d).quasi_uniform(n)
        w = np.clip(rho0(x), 0.0, None)
        if not w.sum() > 0.0:
            raise ConfigError(
                "particles.initialization", "rho_0 vanishes at every quasi-uniform point"
            )
        return x, w / w.sum()
    raise ValueError(f"unknown initialization {initialization!r}")


def initial_particles(
    problem: Problem, n: int, initialization: str, seed: int
) -> tuple[Array, Array]:
    """Positions (n, d) and weights (n,) (summing to 1) of the initial particles.

    ``iid``: independent samples of rho_0 (``numpy.random.default_rng(seed)``), weights 1/n;
    ``quantile`` (circle): the n quantiles of rho_0, weights 1/n; ``quasi_uniform``: the
    domain's quasi-uniform points (the Fibonacci lattice on the sphere,
    :meth:`spheredens.geometry.Domain.quasi_uniform`) with weights proportional to rho_0 (times
    the nearly equal cell areas).
    Models with slices (``usa_av``): the positions and weights of :func:`initial_slice_particles`;
    a domain with its own part ``"particles"`` (zonal: vectors of R^d) draws them itself.
    """
    if problem.has_auxiliary:
        x, w, _ = initial_slice_particles(problem, n, initialization, seed)
        return x, w
    own = get_domain(problem.domain).parts.get("particles")  # zonal: vectors of R^d
    if own is not None:
        return own.initial(problem, n, initialization, seed)
    return _initial_points(
        problem.initial, problem.d, n, initialization, lambda: np.random.default_rng(seed)
    )


def slice_counts(r: Array, n: int) -> NDArray[np.int64]:
    """Particles per slice: n r_k rounded by largest remainders (sum n; ties to the lower k).

    Raises
    ------
    ConfigError
        A slice with r_k > 0 would get no particle (n too small for the slice weights).
    """

    r = np.asarray(r, dtype=float)
    share = n * r / r.sum()
    counts = np.floor(share).astype(np.int64)
    rest = n - int(counts.sum())
    if rest > 0:
        counts[np.argsort(-(share - counts), kind="stable")[:rest]] += 1
    empty = np.flatnonzero((counts == 0) & (r > 0))
    if len(empty):
        need = int(math.ceil(1.0 / float(r[r > 0].min() / r.sum())))
        raise ConfigError(
            "particles.n",
            f"= {n} leaves slice {int(empty[0])} (weight "
            f"{r[empty[0]] / r.sum():.3g}) without particles; use n >= {need}",
        )
    return counts


def initial_slice_particles(
    problem: Problem, n: int, initialization: str, seed: int
) -> tuple[Array, Array, NDArray[np.int64]]:
    """Positions (n, d), weights (n,) and slice indices (n,) of labelled particles (``usa_av``).

    Slice k gets c_k = :func:`slice_counts` (n r_k rounded) particles, consecutive in the
    arrays (indices sorted); they start from that slice's initial density
    ``problem.slice_initials()[k]`` by ``initialization`` (``iid``: one generator
    ``numpy.random.default_rng(seed)`` drawing the slices in order) and their weights sum to
    r_k, so the slice masses of the particles are exactly those of the model (``iid`` and
    ``quantile`` with n r_k integer: every weight is 1/n).
    """
    counts = slice_counts(problem.xi_weight, n)
    rng = np.random.default_rng(seed)
    xs, ws = [], []
    for k, (f, c) in enumerate(zip(problem.slice_initials(), counts)):
        if c == 0:
            continue
        x, w = _initial_points(f, problem.d, int(c), initialization, lambda: rng)
        xs.append(x)
        ws.append(w * problem.xi_weight[k])
    w = np.concatenate(ws)
    return np.concatenate(xs), w / w.sum(), np.repeat(np.arange(len(counts)), counts)


# -- the particle system as a scheme ----------------------------------------------------------
#: from this many particles on, the sums skip the blocks certified below 2^-60 of each row's sum:
#: on the circle with expansions between tight clusters
#: (:func:`spheredens.interaction.clustered_logsumexp_sums`), on the sphere over the particles
#: in latitude bands (:func:`spheredens.interaction.sphere_order`,
#: :func:`spheredens.interaction.pruned_logsumexp_sums`): the same velocities to round-off, at
#: a cost that falls with the kernel's width (tests/test_particles.py)
PRUNE_FROM = 2000


def particle_sums(model: Model, x: Array, log_w: Array) -> tuple[Array, Array, Array]:
    """(Z e^-M, N e^-M, M) of the attention sums at the particles: direct log-sum-exp, or from
    :data:`PRUNE_FROM` particles on the same sums with certified pruning (on the circle also
    expansions between tight clusters): equal to round-off."""
    q, vy = model.kernel.query(x), x @ model.V.T
    if len(x) < PRUNE_FROM:
        return logsumexp_sums(q, x, log_w, vy)
    if x.shape[1] == 2:
        order = circle_order(x)
        z, num, m, _ = clustered_logsumexp_sums(
            q[order], x[order], log_w[order], vy[order], model.kernel.beta * model.kernel.sigma_max
        )
    else:
        order = sphere_order(x)
        z, num, m, _ = pruned_logsumexp_sums(q[order], x[order], log_w[order], vy[order])
    back = np.empty_like(order)
    back[order] = np.arange(len(order))
    return z[back], num[back], m[back]


def particle_velocity(model: Model, x: Array, weight: Array) -> Array:
    """Tangent velocities (n, d) of particles x (n, d) with weights (n,) under ``model``."""
    if not model.kind.interacting:
        return model.zero_temperature_velocity(x)
    with np.errstate(divide="ignore"):
        log_w = np.log(weight)
    z, num, m = particle_sums(model, x, log_w)
    if model.kind.normalized:
        avg = num / z[:, None]
    else:
        avg = num * np.exp(m)[:, None]
    return tangent_project(x, avg)


def _gauge_frames(model: Model, x: Array, slices: NDArray[np.int64]) -> tuple[Array, Array]:
    """(G_{k(i)} per particle (n, d, d), z_i = G_{k(i)} x_i (n, d))."""
    gauges = model.auxiliary.gauges[slices]
    return gauges, np.einsum("nij,nj->ni", gauges, x)


def _slice_runs(slices: NDArray[np.int64]) -> list[tuple[int, int, int]]:
    """(k, start, stop) for each run of equal consecutive slice indices."""
    edges = np.flatnonzero(np.diff(slices)) + 1
    starts = np.concatenate([[0], edges])
    stops = np.concatenate([edges, [len(slices)]])
    return [(int(slices[a]), int(a), int(b)) for a, b in zip(starts, stops)]


def _coupled_sums(
    model: Model,
    z: Array,
    weight: Array,
    slices: NDArray[np.int64],
    values: Callable[[Array, slice], Array],
) -> Array:
    """sum_j w_j b_{k(i)k(j)} exp(beta (<z_i, z_j> - 1)) values(j) for every i, stacked.

    ``values(E, cols)`` contracts the block E (rows, len(cols)) of weighted kernel entries with
    the quantity of the columns ``cols``; row blocks of ~2^22 entries. When b is not identically
    1: one product per run of equal slice indices, or, for more than ``_MAX_RUNS`` runs, the
    entries multiplied by the gathered b_{k(i)k(j)}.
    """
    aux = model.auxiliary
    beta = float(model.beta)
    uniform = aux.uniform_coupling
    runs = None if uniform else _slice_runs(slices)
    gather = runs is not None and len(runs) > _MAX_RUNS
    n = len(z)
    step = max(1, _CHUNK_ENTRIES // max(n, 1))
    out = []
    for start in range(0, n, step):
        rows = slice(start, start + step)
        e = z[rows] @ z.T
        e -= 1.0
        e *= beta
        np.exp(e, out=e)  # <= 1: no overflow whatever beta
        e *= weight[None, :]
        if gather:
            e *= aux.coupling[slices[rows, None], slices[None, :]]
        if uniform or gather:
            out.append(values(e, slice(0, n)))
            continue
        b_rows = aux.coupling[slices[rows]]  # (rows, M)
        acc = 0.0
        for k, a, c in runs:
            part = values(e[:, a:c], slice(a, c))
            acc = acc + b_rows[:, k].reshape((-1,) + (1,) * (part.ndim - 1)) * part
        out.append(acc)
    return np.concatenate(out)


def auxiliary_particle_velocity(
    model: Model, x: Array, weight: Array, slices: NDArray[np.int64]
) -> Array:
    """Tangent velocities (n, d) of labelled particles (``usa_av``):

        v_i = P_{x_i} sum_j w_j b_{k(i)k(j)} exp(beta <G_{k(i)} x_i, G_{k(j)} x_j>)
                                                G_{k(i)}^T G_{k(j)} x_j,

    G, b = ``model.auxiliary.gauges``, ``.coupling``; formed as e^beta G_{k(i)}^T (sum_j w_j b
    exp(beta (<z_i, z_j> - 1)) z_j) with z = G x, so no intermediate sum overflows.
    """
    slices = np.asarray(slices)
    order = None
    if np.any(np.diff(slices) < 0):  # group the slices (one product per run)
        order = np.argsort(slices, kind="stable")
        x, weight, slices = x[order], weight[order], slices[order]
    gauges, z = _gauge_frames(model, x, slices)
    u = _coupled_sums(model, z, weight, slices, lambda e, cols: e @ z[cols])
    with np.errstate(over="ignore"):
        v = tangent_project(x, np.einsum("nji,nj->ni", gauges, u) * math.exp(model.beta))
    if order is not None:
        v = v[np.argsort(order)]
    return v


def auxiliary_particle_energy(
    model: Model, x: Array, weight: Array, slices: NDArray[np.int64]
) -> float:
    """E_h = 1/(2 beta) sum_ij w_i w_j b_{k(i)k(j)} exp(beta <G_{k(i)} x_i, G_{k(j)} x_j>), the
    energy of docs/models.md section 5 for the empirical slice measures (non-decreasing in time)."""
    slices = np.asarray(slices)
    order = np.argsort(slices, kind="stable")
    x, weight, slices = x[order], weight[order], slices[order]
    _, z = _gauge_frames(model, x, slices)
    s = _coupled_sums(model, z, weight, slices, lambda e, cols: e.sum(axis=1))
    return float(np.dot(weight, s)) * math.exp(model.beta) / (2.0 * model.beta)


class ParticleSystem(Scheme):
    """The n-particle system with the scheme contract, so :func:`spheredens.simulate` drives it.

    The state is the array of positions, shape (1, n, d); steps are ``dt`` (the CFL number is
    not used), renormalized to the sphere after each step (``post_step``). Models with slices
    (``usa_av``) need ``slices``: the slice index k(i) of every particle (frozen).
    """

    def __init__(
        self,
        problem: Problem,
        x0: Array,
        weight: Array,
        dt: float,
        integrator: str = "rk4",
        slices: Any = None,
    ) -> None:

        self.problem = problem
        self.x0 = np.asarray(x0, dtype=float)
        self.weight = np.asarray(weight, dtype=float)
        self.dt = float(dt)
        self.integrator = INTEGRATORS.get(integrator)
        self.speed_floor = 0.0
        self.speed_bound = problem.model.V_norm if problem.model.kind.normalized else float("inf")
        self.slices: NDArray[np.int64] | None = None
        if problem.has_auxiliary:
            if slices is None:
                raise ConfigError(
                    "auxiliary", "usa_av particles need the slice index of every particle"
                )
            self.slices = np.asarray(slices, dtype=np.int64)
            if (
                self.slices.shape != (len(self.x0),)
                or self.slices.min() < 0
                or self.slices.max() >= problem.n_xi
            ):
                raise ConfigError(
                    "auxiliary",
                    f"slice indices must be {len(self.x0)} integers in 0..{problem.n_xi - 1}",
                )

    def initial_state(self) -> Array:
        return self.x0[None].copy()

    def velocity(self, x: Array) -> Array:
        """Tangent velocities (n, d) at positions x (n, d)."""
        if self.slices is not None:
            return auxiliary_particle_velocity(self.problem.model, x, self.weight, self.slices)
        return particle_velocity(self.problem.model, x, self.weight)

    def energy(self, x: Array) -> float:
        """E_h of :func:`auxiliary_particle_energy` (``usa_av`` only)."""
        if self.slices is None:
            raise ValueError("the particle energy is defined for usa_av")
        return auxiliary_particle_energy(self.problem.model, x, self.weight, self.slices)

    def rhs(self, state: Array, t: float) -> Tendency:
        v = self.velocity(state[0])
        return Tendency(v[None], float(np.sqrt(np.max(np.sum(v * v, axis=-1)))))

    def stable_dt(self, cfl: float, tendency: Tendency) -> float:
        return self.dt

    def post_step(self, state: Array, dt: float) -> Array:
        return state / np.linalg.norm(state, axis=-1, keepdims=True)


class ParticleRecorder(Observer):
    """Observer collecting positions at the snapshot times; ``dataset()`` in schema
    spheredens-particles-1."""

    def __init__(
        self, system: ParticleSystem, config: RunConfig, *, initialization: str, seed: int
    ):
        self.system = system
        self.config = config
        self.initialization = initialization
        self.seed = seed
        self.times: list[float] = []
        self.positions: list[Array] = []
        self.status: dict[str, Any] = {
            "run_status": "partial",
            "stop_reason": "running",
            "n_steps": 0,
        }
        self.checkpoint: tuple[float, Array, int] | None = None
        #: W2 of the particles to Pi_# rho_0 at every snapshot (NaN, with the reason, where
        #: undefined)
        self.w2_projection: list[float] = []
        self._w2, self._w2_reason = particle_projection_distance(
            system.problem.model, system.x0, system.weight
        )

    def set_checkpoint(self, t: float, state: Array, steps: int) -> None:
        self.checkpoint = (float(t), np.array(state), int(steps))

    def restore(self, ds: Any) -> tuple[float, Array, int]:
        """Take over the snapshots of a partial particle file; return its checkpoint."""
        if "checkpoint_position" not in ds:
            raise SchemaError("the particle file has no checkpoint to resume from")
        slices = self.system.slices
        if slices is not None and (
            "slice" not in ds or not np.array_equal(ds["slice"].values, slices)
        ):
            raise SchemaError("the particle file's slice indices differ from this configuration's")
        self.times = [float(t) for t in ds["time"].values]
        self.positions = [np.array(x) for x in ds["position"].values]
        self.w2_projection = (
            [float(v) for v in ds["w2_projection"].values]
            if "w2_projection" in ds
            else [self._projection(x) for x in self.positions]
        )
        position = np.asarray(ds["checkpoint_position"].values)
        if position.shape != self.system.x0.shape:
            raise SchemaError(
                f"its checkpoint holds positions of shape {position.shape}, this "
                f"configuration's particles have {self.system.x0.shape}"
            )
        self.checkpoint = (
            float(ds.attrs["checkpoint_time"]),
            position[None],
            int(ds.attrs["checkpoint_steps"]),
        )
        return self.checkpoint

    def start(self, info: dict[str, Any]) -> None:
        pass

    def observe(self, t: float, state: Array) -> None:
        self.times.append(float(t))
        self.positions.append(np.array(state[0]))
        self.w2_projection.append(self._projection(state[0]))

    def stop_requested(self) -> str:
        """With ``particles.stop_after_departure``: end the run that long after its departure
        from Pi_# of its initial particles (the rule of ``analyze-beta`` on the snapshots so
        far)."""
        after = self.config.particles.stop_after_departure if self.config.particles else None
        if after is None or len(self.times) < 3:
            return ""
        t_dep = curve_summary(np.array(self.times), np.array(self.w2_projection))["departure_time"]
        if np.isfinite(t_dep) and self.times[-1] >= t_dep + after - 1e-9 * max(1.0, abs(t_dep)):
            return (
                f"departed from Pi_# of the initial particles at t = {t_dep:g}; stopped {after:g} "
                "later (particles.stop_after_departure)"
            )
        return ""

    def _projection(self, x: Array) -> float:
        return float("nan") if self._w2 is None else self._w2(x, self.system.weight)

    def finish(self, result: Any) -> None:
        self.status = run_status(result)

    def dataset(self) -> Any:
        """The Dataset of the snapshots so far (:func:`spheredens.schema.particle_dataset`)."""
        system, problem = self.system, self.system.problem
        n = len(system.weight)
        labels = None if system.slices is None else (system.slices, problem.xi, problem.xi_weight)
        run = {"domain": problem.domain, "model": problem.model, "config": self.config.to_toml()}
        ds = particle_dataset(
            self.times,
            self.positions,
            system.weight,
            **run,
            attrs={
                "initialization": self.initialization,
                "seed": int(self.seed),
                "n_particles": int(n),
                "dt": system.dt,
                "integrator": system.integrator.name,
            },
            title=f"spheredens particles: {problem.model.name} on the {problem.domain}, n = {n}, "
            f"{self.initialization}",
            status=self.status,
            labels=labels,
            checkpoint=self.checkpoint,
            w2_projection=(
                self.w2_projection,
                self._w2.comment() if self._w2 is not None else f"not defined: {self._w2_reason}",
            ),
        )
        if self.checkpoint is not None:
            ds.attrs["checkpoint_sha256"] = checkpoint_digest(ds)  # checked before a resume
        return ds


def require_particles(cfg: RunConfig, config_path: str | Path | None = None) -> None:
    """Check that ``cfg`` has a ``[particles]`` table.

    Parameters
    ----------
    cfg : RunConfig
        The configuration.
    config_path : path, optional
        The file ``cfg`` was read from, named in the message.

    Raises
    ------
    ConfigError
        Key ``particles``: the configuration has no ``[particles]`` table.
    """
    if cfg.particles is None:
        where = "the configuration" if config_path is None else str(config_path)
        raise ConfigError(
            "particles",
            f"{where} has no [particles] table (e.g. [particles] n = 1000, "
            "initialization = 'iid', dt = 0.01)",
        )


def particles_output_path(
    cfg: RunConfig,
    seed: int,
    *,
    several: bool,
    config_path: str | Path | None = None,
    output: str | Path | None = None,
) -> Path | None:
    """The particle file of one seed, as ``spheredens particles`` names it.

    Parameters
    ----------
    cfg : RunConfig
        The configuration (with a ``[particles]`` table).
    seed : int
        The seed of this run.
    several : bool
        One run of an ensemble of seeds: the name gets the suffix ``_seed<k>``.
    config_path : path, optional
        The configuration file: the fallback name ``<config>_particles.nc`` beside it when
        neither ``particles.path`` nor ``output.path`` is set.
    output : path, optional
        An explicit file (``--output``); it wins over the configuration, and is taken as it is
        (not against ``cfg.base_dir``).

    Returns
    -------
    Path or None
        ``output``, else ``particles.path``, else ``output.path`` with suffix ``_particles``
        (both against ``cfg.base_dir``), else ``config_path`` with suffix ``_particles.nc``,
        each with ``_seed<k>`` before ``.nc`` when ``several``; None when there is none of them.

    Raises
    ------
    ConfigError
        ``cfg`` has no ``[particles]`` table.
    """
    require_particles(cfg, config_path)
    if output:
        base = Path(output)
    elif cfg.particles.path is not None:
        base = cfg.base_dir / cfg.particles.path  # an absolute path stays as it is
    elif cfg.output.path is not None:
        base = cfg.base_dir / cfg.output.path
        base = base.with_name(base.stem + "_particles.nc")
    elif config_path is not None:
        base = Path(config_path).with_name(Path(config_path).stem + "_particles.nc")
    else:
        return None
    return base.with_name(f"{base.stem}_seed{seed}.nc") if several else base


def run_particles(
    config: RunConfig,
    *,
    seed: int | None = None,
    output: str | Path | None = None,
    progress: bool | None = None,
    resume: bool = False,
    overwrite: bool = False,
    mkdir: bool = False,
    notify: Notify | None = None,
) -> Any:
    """Integrate the n-particle system of a configuration: ``spheredens particles CONFIG``.

    The particles x_1..x_n (weights 1/n; usa_av: labelled by slice,
    :func:`initial_slice_particles`, with ``xi`` and ``slice`` (particle) in the file) follow
    dx_i/dt = X[mu_t](x_i) for the empirical measure mu_t = sum_i w_i delta_{x_i}: the same model
    as the density, softmax in log-sum-exp form, float64, RK4 renormalized to the sphere.

    As for :func:`spheredens.run`, the file carries a checkpoint (the positions at a step
    boundary): ``resume=True`` continues a partial file bit for bit, an existing file is only
    replaced with ``overwrite=True``. The folder of ``output`` must exist and be writable, or
    ``mkdir=True`` creates it (:func:`~spheredens.io.check_output_location`, before any work); it
    may not be an input of the run (``initial.path``).

    Parameters
    ----------
    config : RunConfig
        With a ``[particles]`` table: ``n``, ``initialization`` (``iid`` samples of rho_0,
        ``quantile`` on the circle, ``quasi_uniform`` on the sphere), ``seed``, ``dt``,
        ``integrator``. The snapshot times are those of ``[time]``.
    seed : int, optional
        Overrides ``particles.seed`` (one i.i.d. run of an ensemble per seed).
    output : path, optional
        The netCDF file to write (schema spheredens-particles-1).
    progress, resume, overwrite, mkdir :
        As for :func:`spheredens.run`.
    notify : callable, optional
        Told when a resume finds no file or the complete run
        (:data:`spheredens.runner.Notify`).

    Returns
    -------
    xarray.Dataset
        Schema spheredens-particles-1: ``position`` (time, particle, component),
        ``particle_weight``, ``w2_projection`` (the particles against Pi_# of their own start).

    Example
    -------
    >>> import spheredens as sd
    >>> cfg = sd.load_config("runs/circle_example_c/config.toml")
    >>> cfg = cfg.replace(**{"particles.n": 500, "particles.seed": 0})   # adds [particles]
    >>> p = sd.run_particles(cfg, output="example_c_particles.nc")
    >>> x = p["position"].values                 # (time, particle, 2), unit vectors
    """
    require_particles(config)
    if output is not None:
        check_output_location(output, mkdir=mkdir)
        check_not_input(output, input_files(config), key="particles.path")
    p = config.particles
    seed = p.seed if seed is None else int(seed)
    with output_lock(output):  # one writer per file, from before any work to the end
        problem = Problem.from_config(config)
        slices = None
        if problem.has_auxiliary:
            x0, w, slices = initial_slice_particles(problem, p.n, p.initialization, seed)
        else:
            x0, w = initial_particles(problem, p.n, p.initialization, seed)
        own = get_domain(problem.domain).parts.get("particles")  # zonal: its own system, file
        system = (own.system if own else ParticleSystem)(
            problem, x0, w, p.dt, p.integrator, slices=slices
        )
        recorder = (own.recorder if own else ParticleRecorder)(
            system, config, initialization=p.initialization, seed=seed
        )
        start = resume_point(
            None if output is None else Path(output),
            recorder,
            open_particles,
            lambda ds: (
                run_difference(ds.attrs.get("config", ""), config)
                or (
                    f"seed is {ds.attrs.get('seed', 'not set')} in the file, {seed} in this run"
                    if int(ds.attrs.get("seed", -1)) != seed
                    else ""
                )
            ),
            resume=resume,
            overwrite=overwrite,
            key="particles.path",
            notify=notify,
        )
        if start.get("complete") is not None:
            return start["complete"]
        observers: list[Any] = [recorder, Progress(enabled=progress)]
        if output is not None:
            observers.append(FileWriter(recorder, output))
        result = simulate(system, config.time, observers, **start)
        if result.stop_reason in ("interrupted", "terminated"):
            raise KeyboardInterrupt(result.message)
        if not result.completed:
            raise SimulationError(result.message, time=result.t, step=result.n_steps)
        return recorder.dataset()
