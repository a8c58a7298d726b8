"""Run configuration: TOML -> validated frozen dataclasses (CONFIG.md is the contract).

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

import json
import math
import os
import sys
import tomllib
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping

try:
    import resource  # the address-space limit (ulimit -v) of machine_memory
except ImportError:  # not on Windows
    resource = None  # type: ignore[assignment]

import numpy as np

from ._validate import (
    MAX_DEPTH,
    as_bool,
    as_float,
    as_int,
    as_matrix,
    as_str,
    as_table,
    check_depth,
    check_keys,
    input_file_problem,
)
from .auxiliary import auxiliary_from_params
from .exceptions import PATH_LIMIT, ConfigError, SpheredensWarning, shown
from .geometry import DOMAINS, Domain, get_domain
from .initial import INITIAL_DENSITIES
from .integrators import INTEGRATORS
from .kernel import AttentionKernel
from .models import MODELS, Model

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

Matrix = tuple[tuple[float, ...], ...]

#: the most steps a run may take: a configuration that needs more is refused, and a run whose
#: step falls below t_end / MAX_STEPS stops (``dt_collapse``)
MAX_STEPS = 1e9
MAX_STEPS_TEXT = f"{MAX_STEPS:.0e}".replace("e+0", "e").replace("e+", "e")  # "1e9", for messages


@dataclass(frozen=True)
class ModelConfig:
    """``[model]``: name, inverse temperature beta and the attention matrices Q, K, V."""

    name: str
    beta: float
    Q: Matrix
    K: Matrix
    V: Matrix
    auxiliary: Any = None  # AuxiliaryKernel of usa_av (the [auxiliary] table)

    def build(self) -> Model:
        """The :class:`~spheredens.models.Model` these parameters describe."""
        return Model(
            self.name,
            self.beta,
            np.array(self.Q),
            np.array(self.K),
            np.array(self.V),
            self.auxiliary,
        )


@dataclass(frozen=True)
class DomainConfig:
    """``[domain]``: ``circle`` (S^1) or ``sphere`` (S^2)."""

    name: str

    @property
    def domain(self) -> Domain:
        """The :class:`~spheredens.geometry.Domain` of this name."""
        return get_domain(self.name)

    @property
    def d(self) -> int:
        return self.domain.d


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
        return _config_to_dict(self)

    def to_toml(self) -> str:
        """The configuration as TOML text; loading it again gives an equal configuration."""
        return config_to_toml(self)

    def replace(self, **changes: Any) -> "RunConfig":
        """A validated copy with dotted keys changed, e.g. ``cfg.replace(**{"model.beta": 100.0})``."""
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


#: the largest TOML file read (a configuration or sweep is a few kB of text)
MAX_TOML_BYTES = 64 * 2**20


def read_toml(path: str | Path, what: str) -> dict[str, Any]:
    """The tables of a TOML file; a one-line ConfigError when it is missing, not a regular file
    (a directory, /dev/null, a symbolic link loop, a name too long), too large, not UTF-8 text,
    not TOML, or nested too deeply (:func:`~spheredens._validate.check_depth`)."""
    path = Path(path)
    name = shown(str(path), PATH_LIMIT)
    problem = input_file_problem(path)
    if problem:
        raise ConfigError("", f"{what} {name} {problem}")
    size = path.stat().st_size
    if size > MAX_TOML_BYTES:
        raise ConfigError(
            "",
            f"{what} {name} is {size / 2**20:.0f} MiB, more than a TOML file of "
            f"spheredens can be ({MAX_TOML_BYTES // 2**20} MiB); give the configuration file",
        )
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(
            "",
            f"{name} is not valid TOML: it is not UTF-8 text (byte "
            f"0x{exc.object[exc.start : exc.start + 1].hex()} at position {exc.start})",
        ) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError("", f"{name} is not valid TOML: {exc}") from None
    except RecursionError:
        raise ConfigError(
            "",
            f"{name} is not a configuration: its arrays or tables are nested "
            f"hundreds of levels deep (a configuration needs a few; at most {MAX_DEPTH})",
        ) from None
    except ValueError:  # an integer of more than 4300 digits (sys.get_int_max_str_digits)
        raise ConfigError(
            "",
            f"{name} is not a configuration: it holds an integer of more than "
            f"{sys.get_int_max_str_digits()} digits",
        ) from None
    except MemoryError:
        raise ConfigError(
            "", f"{what} {name} ({size / 2**20:.0f} MiB) is too large to read into memory"
        ) from None
    except OSError as exc:
        raise ConfigError("", f"cannot read {what} {name} ({exc.strerror or exc})") from None
    check_depth(data)
    return data


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
    model = _model(tables["model"], domain.d)
    model = _with_auxiliary(model, tables["auxiliary"], "auxiliary" in data, domain.d)
    initial = _initial(tables["initial"], domain.d, base)
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
            disc.options, model, n_xi=n_xi, snapshots=snapshots, particles=particles
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
            f"steps, more than {MAX_STEPS_TEXT}; use particles.dt >= {cfg.time.t_end / MAX_STEPS:.3g}",
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
    check_keys(t, ["name"], "domain")
    name = as_str(t.get("name", "circle"), "domain.name")
    if name not in DOMAINS:
        raise ConfigError(
            "domain.name",
            f"{shown(name)} is not a domain; choose {' or '.join(map(repr, DOMAINS))}",
        )
    return DomainConfig(name)


def _model(t: dict[str, Any], d: int) -> ModelConfig:
    check_keys(t, ["name", "beta", "Q", "K", "V"], "model")
    name = as_str(t.get("name", "sa"), "model.name")
    MODELS.get(name, "model.name")
    eye = tuple(tuple(float(i == j) for j in range(d)) for i in range(d))
    mats = {m: as_matrix(t[m], f"model.{m}", d) if m in t else eye for m in ("Q", "K", "V")}
    _check_matrix_scale(mats)
    if name == "sa_zero_temperature":
        if "beta" in t:
            beta = as_float(t["beta"], "model.beta", allow_inf=True)
            if beta != math.inf:
                raise ConfigError(
                    "model.beta",
                    f"= {shown(t['beta'])}: the zero-temperature model has "
                    "beta = inf; remove the key or write beta = inf",
                )
        beta = math.inf
        kernel = AttentionKernel(beta, np.array(mats["Q"]).T @ np.array(mats["K"]))
        if kernel.is_singular(1e-12):
            raise ConfigError(
                "model.K",
                "B = Q^T K is singular (smallest singular value "
                f"{kernel.singular_values[-1]:.3g}); sa_zero_temperature needs B invertible",
            )
    else:
        beta = as_float(
            t.get("beta", 1.0),
            "model.beta",
            minimum=0.0,
            what=" (inverse temperature; inf only for sa_zero_temperature)",
        )
        if beta > 1e4:
            raise ConfigError(
                "model.beta",
                f"= {beta:g} is too large: must be <= 1e4 "
                "(use sa_zero_temperature for the beta -> inf limit)",
            )
        if 0.0 < beta < MIN_SCALE:
            raise ConfigError(
                "model.beta",
                f"= {beta!r} is below {MIN_SCALE:g}, where float64 loses its "
                "precision (1 / beta overflows): write beta = 0, the same kernel to round-off",
            )
        if name == "usa_av":
            for m in ("Q", "K", "V"):
                if mats[m] != eye:
                    raise ConfigError(
                        f"model.{m}",
                        "usa_av follows MODELS.md section 5, where "
                        "Q = K = V = I (the gauges G(xi) carry the geometry); remove the key",
                    )
            if beta == 0.0:
                raise ConfigError("model.beta", "usa_av needs beta > 0 (its energy has 1/(2 beta))")
        growth = beta * AttentionKernel(beta, np.array(mats["Q"]).T @ np.array(mats["K"])).sigma_max
        if name in ("usa", "usa_av") and growth > 700.0:
            raise ConfigError(
                "model.beta",
                f"= {beta:g}: unnormalized attention grows like "
                f"exp(beta ||Q^T K||) = exp({growth:.4g}), beyond float64 (exp(709)); "
                "use beta ||Q^T K|| <= 700",
            )
    return ModelConfig(name, beta, mats["Q"], mats["K"], mats["V"])


#: the largest |entry| of Q, K and V: the kernel depends on beta Q^T K and the velocity is
#: linear in V, so a larger scale is a larger beta or a shorter time scale, and products of
#: entries beyond it approach the end of float64 (1.8e308)
MAX_MATRIX_ENTRY = 1e6
#: the smallest non-zero beta and norm of Q^T K: below them products underflow (1e-300 ** 2 is 0)
MIN_SCALE = 1e-300
MIN_B_NORM = 1e-100


def _check_matrix_scale(mats: Mapping[str, Matrix]) -> None:
    """Refuse entries of Q, K, V beyond :data:`MAX_MATRIX_ENTRY` and a non-zero B = Q^T K of
    norm below :data:`MIN_B_NORM` (one line naming the entry, or model.K)."""
    hints = {
        "Q": "the kernel depends on beta Q^T K only: put the scale in model.beta",
        "K": "the kernel depends on beta Q^T K only: put the scale in model.beta",
        "V": "the velocity is linear in V, so a larger V is the same run on a shorter time "
        "scale: scale time.t_end instead",
    }
    for m, rows in mats.items():
        for i, row in enumerate(rows):
            for j, v in enumerate(row):
                if abs(v) > MAX_MATRIX_ENTRY:
                    raise ConfigError(
                        f"model.{m}[{i}][{j}]",
                        f"= {v:g} is too large: the entries of Q, K "
                        f"and V must be at most {MAX_MATRIX_ENTRY:g} in absolute value; {hints[m]}",
                    )
    B = np.array(mats["Q"]).T @ np.array(mats["K"])
    norm = float(np.abs(B).max())
    if 0.0 < norm < MIN_B_NORM:
        raise ConfigError(
            "model.K",
            f"B = Q^T K has entries of at most {norm:.3g}, below {MIN_B_NORM:g}: "
            "the kernel is flat to round-off and its products underflow; write K = 0 "
            "(or beta = 0) for a flat kernel, or put the scale in model.beta",
        )


def _with_auxiliary(model: ModelConfig, table: dict[str, Any], given: bool, d: int) -> ModelConfig:
    """Attach the [auxiliary] table (slices, kernel) to usa_av; refuse it for other models."""

    if model.name != "usa_av":
        if given:
            raise ConfigError(
                "auxiliary",
                f"the [auxiliary] table is for model 'usa_av', not "
                f'{model.name!r}; remove it or set model.name = "usa_av"',
            )
        return model
    return replace(model, auxiliary=auxiliary_from_params(table, d))


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


def _config_to_dict(cfg: RunConfig) -> dict[str, Any]:
    m = cfg.model
    model: dict[str, Any] = {
        "name": m.name,
        "beta": m.beta,
        "Q": [list(r) for r in m.Q],
        "K": [list(r) for r in m.K],
        "V": [list(r) for r in m.V],
    }
    time: dict[str, Any] = {"t_end": cfg.time.t_end, "cfl": cfg.time.cfl}
    if cfg.time.max_dt is not None:
        time["max_dt"] = cfg.time.max_dt
    if cfg.time.times is not None:
        time["times"] = list(cfg.time.times)
    else:
        time["snapshots"] = cfg.time.snapshots
    output: dict[str, Any] = {"figure": cfg.output.figure}
    if cfg.output.path is not None:
        output["path"] = cfg.output.path
    out = {
        "model": model,
        "domain": {"name": cfg.domain.name},
        "initial": {"name": cfg.initial.name, **cfg.initial.density.to_params()},
        "discretization": {"scheme": cfg.discretization.scheme, **dict(cfg.discretization.options)},
        "time": time,
        "output": output,
    }
    if cfg.model.auxiliary is not None:
        out["auxiliary"] = cfg.model.auxiliary.to_params()
    if cfg.particles is not None:
        p = cfg.particles
        out["particles"] = {
            "n": p.n,
            "seed": p.seed,
            "initialization": p.initialization,
            "dt": p.dt,
            "integrator": p.integrator,
            **({"path": p.path} if p.path else {}),
            **(
                {"stop_after_departure": p.stop_after_departure}
                if p.stop_after_departure is not None
                else {}
            ),
        }
    return out


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise TypeError(f"cannot write {type(v).__name__} as TOML")


def config_to_toml(cfg: RunConfig) -> str:
    """TOML text of a configuration (every default written out)."""
    lines = [
        f"# spheredens run configuration; relative paths are relative to {str(cfg.base_dir)!r}"
    ]
    for section, table in _config_to_dict(cfg).items():
        lines.append(f"\n[{section}]")
        lines.extend(f"{k} = {_toml_value(v)}" for k, v in table.items())
    return "\n".join(lines) + "\n"
