"""Run configuration: TOML -> validated frozen dataclasses (docs/config.md is the contract).

Everything is checked before any work starts; each problem raises
:class:`~spheredens.exceptions.ConfigError` naming the key, what is allowed and how to fix it.

Examples
--------
>>> from spheredens.config import config_from_dict
>>> cfg = config_from_dict({"model": {"name": "sa", "beta": 10.0},
...                         "discretization": {"scheme": "fv", "n": 64},
...                         "time": {"t_end": 1.0, "snapshots": 3}})
>>> cfg.model.beta, cfg.discretization.n, cfg.time.snapshot_times()
(10.0, 64, (0.0, 0.5, 1.0))
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

try:
    import resource  # the address-space limit (ulimit -v) of machine_memory
except ImportError:  # not on Windows
    resource = None  # type: ignore[assignment]

import numpy as np

from ._validate import (
    as_bool,
    as_float,
    as_int,
    as_str,
    as_table,
    as_unit_vectors,
    check_keys,
)
from .config_toml import config_to_dict, config_to_toml, read_toml
from .exceptions import ConfigError, SpheredensWarning, shown
from .geometry import DOMAINS, ZONAL_MAX_DIMENSION, Domain, get_domain
from .initial import INITIAL_DENSITIES
from .integrators import INTEGRATORS
from .model_rules import ModelConfig, model_config_on, with_auxiliary
from .models import Model
from .zonal import ZonalInitial

__all__ = [
    "RunConfig",
    "ModelConfig",
    "DomainConfig",
    "InitialConfig",
    "DiscretizationConfig",
    "TimeConfig",
    "OutputConfig",
    "load_config",
    "config_from_dict",
    "config_to_toml",
]


#: the most steps a run may take: a configuration that needs more is refused, and a run whose
#: step falls below t_end / MAX_STEPS stops (``dt_collapse``)
MAX_STEPS = 1e9
MAX_STEPS_TEXT = f"{MAX_STEPS:.0e}".replace("e+0", "e").replace("e+", "e")  # "1e9", for messages


@dataclass(frozen=True)
class DomainConfig:
    """``[domain]``: ``circle`` (S^1), ``sphere`` (S^2), or ``zonal`` (a density on S^{d-1}
    symmetric about ``axis``, with its dimension ``dimension`` = d)."""

    name: str
    #: zonal: d, the dimension of R^d (2 <= d <= 1024); None for the other domains
    dimension: int | None = None
    #: zonal: the unit vector e of R^d the density and the model are symmetric about
    axis: tuple[float, ...] | None = None

    @property
    def domain(self) -> Domain:
        """The :class:`~spheredens.geometry.Domain` of this name."""
        return get_domain(self.name)

    @property
    def d(self) -> int:
        """The dimension of the domain's points (2 for the zonal domain's meridian plane)."""
        return self.domain.d

    @property
    def sphere_dimension(self) -> int:
        """d of the sphere S^{d-1} the densities live on (``domain.d`` of the zonal domain)."""
        return self.dimension if self.dimension is not None else self.domain.d

    def parameters(self) -> dict[str, Any]:
        """The domain's own keys beyond ``name`` (the zonal domain's ``d`` and ``axis``)."""
        if self.dimension is None:
            return {}
        return {"d": self.dimension, "axis": list(self.axis or ())}


@dataclass(frozen=True)
class InitialConfig:
    """``[initial]``: a named initial density with its parameters (already validated)."""

    name: str
    density: Any  # an instance of a class registered in spheredens.initial.INITIAL_DENSITIES


@dataclass(frozen=True)
class DiscretizationConfig:
    """``[discretization]``: scheme name and its options, resolution included (``n`` on the
    circle, ``lmax`` for the spectral scheme on the sphere, ``nlat`` for its finite volumes),
    with defaults filled in."""

    scheme: str
    options: Mapping[str, Any] = field(default_factory=dict)
    domain: str = "circle"

    @property
    def scheme_class(self) -> Any:
        """The registered scheme class (:class:`~spheredens.schemes.Scheme`) of this name."""
        return get_domain(self.domain).scheme_class(self.scheme)

    @property
    def n(self) -> int | None:
        """Number of cells / nodes (circle schemes)."""
        return self.options.get("n")

    @property
    def lmax(self) -> int | None:
        """Spherical-harmonic truncation degree (sphere spectral scheme)."""
        return self.options.get("lmax")

    @property
    def nlat(self) -> int | None:
        """Number of latitude rings (sphere finite volumes)."""
        return self.options.get("nlat")

    @property
    def resolution_key(self) -> str:
        """The configuration key that sets the resolution of this discretization."""
        return f"discretization.{self.scheme_class.resolution.key}"


@dataclass(frozen=True)
class TimeConfig:
    """``[time]``: end time, snapshot times and CFL number."""

    t_end: float
    times: tuple[float, ...] | None
    snapshots: int | None
    cfl: float
    max_dt: float | None = None

    def snapshot_times(self) -> tuple[float, ...]:
        """The model times at which the density is written, increasing, exactly as requested."""
        if self.times is not None:
            return self.times
        assert self.snapshots is not None
        return tuple(float(t) for t in np.linspace(0.0, self.t_end, self.snapshots))


@dataclass(frozen=True)
class OutputConfig:
    """``[output]``: where the netCDF file goes and whether a figure is drawn next to it."""

    path: str | None
    figure: bool


@dataclass(frozen=True)
class ParticlesConfig:
    """``[particles]``: the n-particle system of the same model (``spheredens particles``)."""

    n: int
    seed: int
    initialization: str
    dt: float
    integrator: str
    path: str | None
    #: end the run this long after its departure from Pi_# of the initial particles (None: at t_end)
    stop_after_departure: float | None = None


@dataclass(frozen=True)
class RunConfig:
    """A complete, validated run configuration.

    Build it with :func:`load_config` (from a TOML file) or :func:`config_from_dict`.
    ``base_dir`` is the folder relative paths are resolved against (the config file's folder).
    """

    model: ModelConfig
    domain: DomainConfig
    initial: InitialConfig
    discretization: DiscretizationConfig
    time: TimeConfig
    output: OutputConfig
    base_dir: Path = Path(".")
    particles: ParticlesConfig | None = None

    def to_dict(self) -> dict[str, Any]:
        """The configuration as a TOML-ready nested dict (defaults filled in)."""
        return config_to_dict(self)

    def to_toml(self) -> str:
        """The configuration as TOML text; loading it again gives an equal configuration."""
        return config_to_toml(self)

    def replace(self, **changes: Any) -> "RunConfig":
        """A validated copy with dotted keys changed, e.g.
        ``cfg.replace(**{"model.beta": 100.0})``."""
        data = self.to_dict()
        for dotted, value in changes.items():
            section, _, key = dotted.partition(".")
            if not key:
                raise ConfigError(dotted, "use a dotted key 'section.key', e.g. 'model.beta'")
            data.setdefault(section, {})[key] = value
        return config_from_dict(data, base_dir=self.base_dir)

    def resolution_problem(self) -> str:
        """Why the grid does not resolve the attention kernel, or "" when it does (the rule of
        the scheme: :meth:`~spheredens.schemes.Resolution.problem`)."""
        disc = self.discretization
        return disc.scheme_class.resolution.problem(self.model.build(), disc.options)

    def check_resolution(
        self,
        *,
        key: str | None = None,
        fix: str = "refine the grid, or set "
        "discretization.allow_underresolved = true to run anyway",
        warn: bool = True,
    ) -> None:
        """Refuse a grid that does not resolve the kernel (ConfigError naming ``key``, default
        the resolution key, and saying ``fix``) unless ``discretization.allow_underresolved``;
        then warn (when ``warn``) and go on."""
        problem = self.resolution_problem()
        if not problem:
            return
        key = key or self.discretization.resolution_key
        if not self.discretization.options.get("allow_underresolved", False):
            raise ConfigError(key, f"{problem}; {fix}")
        if warn:
            warnings.warn(
                f"{key}: {problem} (running anyway: allow_underresolved)",
                SpheredensWarning,
                stacklevel=3,
            )

    def output_path(self) -> Path | None:
        """``output.path`` resolved against ``base_dir`` (None when unset)."""
        if self.output.path is None:
            return None
        p = Path(self.output.path)
        return p if p.is_absolute() else self.base_dir / p


def load_config(path: str | Path) -> RunConfig:
    """Read and validate a TOML run configuration.

    Parameters
    ----------
    path : str or Path
        The TOML file. Relative paths inside it are resolved against its folder.

    Raises
    ------
    ConfigError
        When the file is missing or unreadable, or any key is unknown, mistyped or out of range.
    """
    path = Path(path)
    return config_from_dict(read_toml(path, "configuration file"), base_dir=path.resolve().parent)


SECTIONS = (
    "model",
    "domain",
    "initial",
    "discretization",
    "time",
    "output",
    "particles",
    "auxiliary",
)


def config_from_dict(data: Mapping[str, Any], *, base_dir: str | Path = ".") -> RunConfig:
    """Validate a nested dict (the parsed TOML) into a :class:`RunConfig`.

    Missing sections and keys take their defaults: model ``sa`` with beta = 1 and identity
    matrices, domain ``circle``, initial ``uniform``, scheme ``fv`` with n = 256, t_end = 1
    with 11 snapshots, cfl = 0.4, no output file.
    """
    data = as_table(data, "configuration")
    check_keys(data, SECTIONS, "")
    base = Path(base_dir)
    tables = {s: as_table(data.get(s, {}), s) for s in SECTIONS}
    domain = _domain(tables["domain"])
    model = model_config_on(tables["model"], domain)
    model = with_auxiliary(model, tables["auxiliary"], "auxiliary" in data, domain.d)
    check = DOMAIN_INITIAL_CHECKS.get(domain.name)
    if check is not None:
        check(domain, tables["initial"])
    initial = _initial(tables["initial"], _initial_dimension(domain, tables["initial"]), base)
    if domain.domain.meridian:  # its checks of a zonal file (theta within [0, pi])
        ZonalInitial(initial.density, domain.sphere_dimension, domain.axis)
    discretization = _discretization(tables["discretization"], domain, model)
    time = _time(tables["time"])
    _check_steps(discretization, time, model.build())
    output = _output(tables["output"])
    particles = _particles(tables["particles"], domain) if "particles" in data else None
    cfg = RunConfig(model, domain, initial, discretization, time, output, base, particles)
    check_costs(cfg)
    return cfg


def estimated_memory(cfg: RunConfig) -> dict[str, float]:
    """Estimated peak memory of a run in bytes, by what holds it
    (:meth:`~spheredens.schemes.Scheme.memory_parts`): the snapshots, the solver's state and
    work arrays, the interaction evaluator and the diagnostics, for every slice of ``usa_av``
    (the state's leading axis); with a ``[particles]`` table also ``"particles"``, what
    ``spheredens particles`` needs (a run of either command needs its own parts only)."""
    disc = cfg.discretization
    model = cfg.model.build()
    n_xi = model.auxiliary.n_slices if model.auxiliary is not None else 1
    snapshots = len(cfg.time.snapshot_times())
    particles = cfg.particles.n if cfg.particles is not None else None
    return dict(
        disc.scheme_class.memory_parts(
            disc.options,
            model,
            n_xi=n_xi,
            snapshots=snapshots,
            particles=particles,
            particle_dimension=cfg.domain.dimension,
        )
    )


def machine_memory() -> float | None:
    """Bytes of memory a run may use here: the physical memory, or less where a control group
    (cgroup v2 ``memory.max``, v1 ``memory.limit_in_bytes``) or the address-space limit
    (``ulimit -v``) says so; None when unknown."""
    limits = []
    try:
        limits.append(float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")))
    except (ValueError, OSError, AttributeError):
        pass
    for name in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            text = Path(name).read_text().strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < 1 << 60:
            limits.append(float(text))
    if resource is not None:
        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
        if soft != resource.RLIM_INFINITY and soft > 0:
            limits.append(float(soft))
    return min(limits) if limits else None


def check_costs(cfg: RunConfig) -> None:
    """Refuse, in one line naming the key, a configuration whose cost has no bound elsewhere:
    the particle run's steps (t_end / particles.dt, at most :data:`MAX_STEPS`) and the memory
    (:func:`check_memory`)."""
    p = cfg.particles
    if p is not None and cfg.time.t_end / p.dt > MAX_STEPS:
        raise ConfigError(
            "particles.dt",
            f"= {p.dt:g} would take t_end / dt = {cfg.time.t_end / p.dt:.3g} "
            f"steps, more than {MAX_STEPS_TEXT}; use particles.dt >= "
            f"{cfg.time.t_end / MAX_STEPS:.3g}",
        )
    check_memory(cfg)


def check_memory(cfg: RunConfig, *, fraction: float = 0.8) -> None:
    """Refuse a configuration whose estimated memory (:func:`estimated_memory`) exceeds
    ``fraction`` of :func:`machine_memory`: one line naming the key to reduce, the estimate
    and what holds most of it."""
    total = machine_memory()
    if total is None:
        return
    parts = estimated_memory(cfg)
    particles = parts.pop("particles", 0.0)
    need = sum(parts.values())
    if max(need, particles) <= fraction * total:
        return
    machine = f"more than {fraction:.0%} of the {total / 2**30:.1f} GiB this machine allows"
    if particles > need:
        raise ConfigError(
            "particles.n",
            f"= {cfg.particles.n}: the particle run would need about "
            f"{particles / 2**30:.1f} GiB of memory (positions and pairwise sums), "
            f"{machine}; use fewer particles",
        )
    worst = max(parts, key=parts.get)
    disc = cfg.discretization
    key, fix = disc.resolution_key, f"a smaller {disc.resolution_key}"
    aux = cfg.model.auxiliary
    if worst == "snapshots":
        key = "time.times" if cfg.time.times is not None else "time.snapshots"
        fix = "fewer snapshots"
    elif aux is not None and aux.n_slices > 1:
        one = sum(
            disc.scheme_class.memory_parts(
                disc.options, cfg.model.build(), n_xi=1, snapshots=len(cfg.time.snapshot_times())
            ).values()
        )
        each = (need - one) / (aux.n_slices - 1)
        if each * aux.n_slices > 0.5 * need:  # most of it grows with the slices
            key = "auxiliary.slices"
            fix = (
                f"fewer slices ({aux.n_slices} now, about {each / 2**20:.0f} MiB each; "
                f"auxiliary.slices or auxiliary.xi) or {fix}"
            )
    elif worst == "interaction" and disc.options.get("interaction", "auto") != "auto":
        fix = f"{fix} or another discretization.interaction"
    raise ConfigError(
        key,
        f"the run would need about {need / 2**30:.1f} GiB of memory (mostly "
        f"{worst}: {parts[worst] / 2**30:.1f} GiB), {machine}; use {fix}",
    )


def _domain(t: dict[str, Any]) -> DomainConfig:
    name = as_str(t.get("name", "circle"), "domain.name")
    if name not in DOMAINS:
        raise ConfigError(
            "domain.name",
            f"{shown(name)} is not a domain; choose {' or '.join(map(repr, DOMAINS))}",
        )
    own = DOMAIN_TABLES.get(name)
    if own is not None:
        return own(t)
    check_keys(t, ["name"], "domain")
    return DomainConfig(name)


def _zonal_domain(t: dict[str, Any]) -> DomainConfig:
    """``[domain]`` of the zonal domain: ``d`` (required, 2..1024) and ``axis`` (a unit vector
    of R^d, default e_1)."""
    check_keys(t, ["name", "d", "axis"], "domain")
    if "d" not in t:
        raise ConfigError(
            "domain.d",
            f"is required for the zonal domain: the dimension d of R^d, 2 <= d <= "
            f"{ZONAL_MAX_DIMENSION} (the density lives on S^(d-1)), e.g. d = 64",
        )
    d = as_int(t["d"], "domain.d", minimum=2, maximum=ZONAL_MAX_DIMENSION)
    if "axis" not in t:
        return DomainConfig("zonal", d, tuple(float(i == 0) for i in range(d)))
    raw = t["axis"]
    if not isinstance(raw, (list, tuple)) or len(raw) != d:
        raise ConfigError(
            "domain.axis",
            f"must be a unit vector of {d} numbers (domain.d = {d}), got {shown(raw)}",
        )
    axis = np.array([as_float(v, f"domain.axis[{i}]") for i, v in enumerate(raw)])
    norm = float(np.linalg.norm(axis))
    if abs(norm - 1.0) > 1e-6:
        raise ConfigError("domain.axis", f"has length {norm:.6g}; give a unit vector")
    return DomainConfig("zonal", d, tuple(float(v) for v in axis / norm))


#: domain name -> the reader of its ``[domain]`` table, where it has keys beyond ``name``
DOMAIN_TABLES = {"zonal": _zonal_domain}

#: the initial densities the zonal domain takes (functions of the polar angle alone; ``file``:
#: the law g of theta of a zonal run's file, read as the circle reads its files, on [0, pi])
ZONAL_INITIAL = ("uniform", "von_mises_fisher", "file")
#: the initial densities given as the law g of the polar angle on the meridian plane's points
#: (cos theta, sin theta), not as rho on S^{d-1}
ZONAL_LAWS = ("file",)


def _initial_dimension(domain: DomainConfig, t: dict[str, Any]) -> int:
    """The dimension the ``[initial]`` table is read in: that of S^{d-1} (``domain.d`` on the
    zonal domain), except for a law of the polar angle (a zonal file), read on the meridian
    plane (2)."""
    if domain.domain.meridian and t.get("name") in ZONAL_LAWS:
        return domain.d
    return domain.sphere_dimension


def _check_zonal_initial(domain: DomainConfig, t: dict[str, Any]) -> None:
    """Refuse, before it is built, an ``[initial]`` table ``t`` that is not symmetric about the
    axis: only ``uniform`` and von Mises-Fisher mixtures with means +axis or -axis."""
    name = as_str(t.get("name", "uniform"), "initial.name")
    if name not in ZONAL_INITIAL:
        raise ConfigError(
            "initial.name",
            f"{shown(name)} is not available on the zonal domain; choose "
            f"{' or '.join(map(repr, ZONAL_INITIAL))}",
        )
    if "means" not in t:
        return
    axis = np.array(domain.axis)
    for i, mean in enumerate(as_unit_vectors(t["means"], "initial.means", len(axis))):
        along = float(np.dot(mean, axis))
        if abs(along) < 1.0 - 1e-9:
            raise ConfigError(
                f"initial.means[{i}]",
                f"is not along domain.axis (<mean, axis> = {along:.6g}): a zonal density needs "
                "means equal to the axis or to its opposite",
            )


#: domain name -> the check of the initial density against the domain, where it has one
DOMAIN_INITIAL_CHECKS = {"zonal": _check_zonal_initial}


def _initial(t: dict[str, Any], d: int, base_dir: Path) -> InitialConfig:
    name = as_str(t.get("name", "uniform"), "initial.name")
    cls = INITIAL_DENSITIES.get(name, "initial.name")
    params = {k: v for k, v in t.items() if k != "name"}
    return InitialConfig(name, cls.from_params(params, d, base_dir, "initial"))


def _discretization(
    t: dict[str, Any], domain: DomainConfig, model: ModelConfig
) -> DiscretizationConfig:
    name = as_str(t.get("scheme", domain.domain.default_scheme), "discretization.scheme")
    spec = domain.domain.scheme_class(name)  # the registry, filled by spheredens.schemes
    check_keys(t, ["scheme", *spec.options], "discretization")
    options = spec.validate_options(
        {k: v for k, v in t.items() if k != "scheme"}, "discretization", model.build()
    )
    return DiscretizationConfig(name, options, domain.name)


#: the most snapshots a run keeps (``time.snapshots``, the length of ``time.times``)
MAX_SNAPSHOTS = 100000


def _time(t: dict[str, Any]) -> TimeConfig:
    check_keys(t, ["t_end", "times", "snapshots", "cfl", "max_dt"], "time")
    t_end = as_float(
        t.get("t_end", 1.0),
        "time.t_end",
        minimum=0.0,
        strict=True,
        what=" (the model time to integrate to)",
    )
    cfl = as_float(t.get("cfl", 0.4), "time.cfl", minimum=0.0, strict=True, maximum=1.0)
    if "times" in t and "snapshots" in t:
        raise ConfigError("time.times", "give either time.times or time.snapshots, not both")
    times = snapshots = None
    if "times" in t:
        raw = t["times"]
        if not isinstance(raw, list) or not raw:
            raise ConfigError("time.times", f"must be a non-empty list of times, got {shown(raw)}")
        if len(raw) > MAX_SNAPSHOTS:  # every snapshot is kept and written: as time.snapshots
            raise ConfigError(
                "time.times",
                f"{len(raw)} times, more than {MAX_SNAPSHOTS} (the most "
                "snapshots a run keeps); give fewer times",
            )
        times = tuple(as_float(v, f"time.times[{i}]") for i, v in enumerate(raw))
        for i, v in enumerate(times):
            if not 0.0 <= v <= t_end:
                raise ConfigError(
                    f"time.times[{i}]", f"= {v:g} is outside [0, t_end] = [0, {t_end:g}]"
                )
        if any(b <= a for a, b in zip(times, times[1:])):
            raise ConfigError("time.times", "must be strictly increasing")
    else:
        snapshots = as_int(
            t.get("snapshots", 11), "time.snapshots", minimum=2, maximum=MAX_SNAPSHOTS
        )
    max_dt = (
        as_float(
            t["max_dt"],
            "time.max_dt",
            minimum=0.0,
            strict=True,
            what=" (largest step allowed, in model time)",
        )
        if "max_dt" in t
        else None
    )
    return TimeConfig(t_end, times, snapshots, cfl, max_dt)


def _check_steps(disc: DiscretizationConfig, time: TimeConfig, model: Model) -> None:
    """Refuse a step rule that cannot work: an integrator that is unstable for the scheme at
    this cfl (:meth:`~spheredens.schemes.Scheme.stability_problem`), or a horizon that needs
    more than :data:`MAX_STEPS` steps of the largest step ``max_dt`` or the CFL rule allows."""
    spec = disc.scheme_class
    if "integrator" in disc.options:
        problem = spec.stability_problem(disc.options["integrator"], time.cfl)
        if problem is not None:
            raise ConfigError(*problem)
    if time.max_dt is not None and time.t_end / time.max_dt > MAX_STEPS:
        raise ConfigError(
            "time.max_dt",
            f"= {time.max_dt:g} would take at least t_end / max_dt = "
            f"{time.t_end / time.max_dt:.3g} steps, more than {MAX_STEPS_TEXT}; use max_dt >= "
            f"{time.t_end / MAX_STEPS:.3g} (t_end / {MAX_STEPS_TEXT})",
        )
    largest = spec.largest_step(disc.options, model, time.cfl)
    if time.t_end / largest > MAX_STEPS:
        raise ConfigError(
            "time.t_end",
            f"= {time.t_end:g} would take at least {time.t_end / largest:.3g} steps "
            f"(each at most cfl h / (0.1 ||V||) = {largest:.3g}), more than {MAX_STEPS_TEXT}; use "
            f"time.t_end <= {MAX_STEPS * largest:.3g}, or a coarser grid",
        )


def _output(t: dict[str, Any]) -> OutputConfig:
    check_keys(t, ["path", "figure"], "output")
    path = as_str(t["path"], "output.path") if "path" in t else None
    if path is not None and not path.endswith(".nc"):
        raise ConfigError("output.path", f"= {shown(path)} must end in '.nc' (a netCDF file)")
    return OutputConfig(path, as_bool(t.get("figure", True), "output.figure"))


#: the most particles of a run: the pairwise sums cost n^2 per right-hand side (about 1 s at
#: n = 4000 on the sphere, measured on one core: about 10 min at the bound)
MAX_PARTICLES = 100_000


def _particles(t: dict[str, Any], domain: DomainConfig) -> ParticlesConfig:

    check_keys(
        t,
        ["n", "seed", "initialization", "dt", "integrator", "path", "stop_after_departure"],
        "particles",
    )
    if isinstance(t.get("n"), int) and not isinstance(t.get("n"), bool) and t["n"] > MAX_PARTICLES:
        raise ConfigError(
            "particles.n",
            f"= {t['n']} is too large: must be <= {MAX_PARTICLES}; the pairwise "
            "sums cost n^2 per right-hand side (about 1 s at n = 4000 on the sphere, measured "
            "on one core: about 10 min at the bound)",
        )
    n = as_int(t.get("n", 1000), "particles.n", minimum=1, maximum=MAX_PARTICLES)
    seed = as_int(t.get("seed", 0), "particles.seed", minimum=0)
    allowed = domain.domain.particle_initializations
    init = as_str(t.get("initialization", "iid"), "particles.initialization")
    if init not in allowed:
        raise ConfigError(
            "particles.initialization",
            f"{shown(init)} is not available on the "
            f"{domain.name}; choose one of {', '.join(map(repr, allowed))}",
        )
    dt = as_float(
        t.get("dt", 0.01),
        "particles.dt",
        minimum=0.0,
        strict=True,
        maximum=1.0,
        what=" (time step of the particle integrator)",
    )
    integrator = as_str(t.get("integrator", "rk4"), "particles.integrator")
    INTEGRATORS.get(integrator, "particles.integrator")
    path = as_str(t["path"], "particles.path") if "path" in t else None
    if path is not None and not path.endswith(".nc"):
        raise ConfigError("particles.path", f"= {shown(path)} must end in '.nc' (a netCDF file)")
    stop = (
        as_float(
            t["stop_after_departure"],
            "particles.stop_after_departure",
            minimum=0.0,
            what=" (time units to go on after the run departs from Pi_# of its initial particles)",
        )
        if "stop_after_departure" in t
        else None
    )
    return ParticlesConfig(n, seed, init, dt, integrator, path, stop)
