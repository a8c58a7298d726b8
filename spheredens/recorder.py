"""Snapshots -> xarray.Dataset in schema ``spheredens-1`` (docs/dataset.md; the layout itself is
built by :func:`spheredens.schema.density_dataset`)."""

from __future__ import annotations

import hashlib
import json
import logging
import math
import time as _time
from typing import Any

import numpy as np
from scipy.special import logsumexp

from . import slices
from ._types import Array
from .config import RunConfig
from .diagnostics import (
    TerminalDistance,
    energy_defined,
    interaction_energy,
    interaction_energy_spectral,
    mass,
    projection_distance,
)
from .exceptions import SchemaError
from .geometry import get_domain
from .problem import Problem
from .schema import (
    CENTROID_VARIABLES,
    SCHEMA,
    SLICE_VARIABLES,
    UNFAITHFUL_ATTRS,
    UNIT_TOLERANCE,
    density_dataset,
    file_centroids,
)
from .simulate import Observer

logger = logging.getLogger(__name__)

__all__ = [
    "Recorder",
    "SCHEMA",
    "SLICE_VARIABLES",
    "UNDERSHOOT",
    "checkpoint_digest",
    "checkpoint_problem",
    "positive_alternatives",
]

#: a scheme that does not keep rho >= 0 (``fourier``, ``sh_spectral``) is no longer faithful to
#: the equation from the first step with min rho < -UNDERSHOOT max rho: its density then rings
#: (Gibbs oscillations of structure finer than the grid resolves), and what follows is not the
#: solution (the run warns once and records ``unfaithful_from_t``)
UNDERSHOOT = 1e-3


#: how far the mass of a stored snapshot or of a checkpoint may lie from 1 before a resume is
#: refused: the bound a run keeps at every step (README, "Every step is checked"). Every scheme
#: conserves the mass to round-off (~n eps per step: below 1e-10 after 1e6 steps of n = 1e4),
#: so a file beyond it was changed or broken.
MASS_TOLERANCE = 1e-6

#: the checkpoint attributes a resume reads, covered by the checksum ``checkpoint_sha256``
CHECKPOINT_ATTRS = (
    "checkpoint_time",
    "checkpoint_steps",
    "checkpoint_shape",
    "checkpoint_complex",
    "checkpoint_controller",
)


def _attr_text(value: Any) -> str:
    """An attribute as the same text before writing and after reading (numpy scalars, floats
    as repr: exact)."""
    value = value.item() if isinstance(value, np.generic) else value
    return repr(float(value)) if isinstance(value, float) else str(value)


def checkpoint_digest(ds: Any) -> str:
    """The checksum of what a resume takes from a run or particle file (attribute
    ``checkpoint_sha256``): sha256, in hex, of the checkpoint attributes
    (:data:`CHECKPOINT_ATTRS`), the checkpoint (``checkpoint_state`` or
    ``checkpoint_position``) and every variable along ``time`` (the snapshots and their
    diagnostics), in name order, each as little-endian float64 bytes in C order with NaN made
    canonical. The same before writing and after reading the file back (netCDF keeps float64
    exactly); any change of those values changes it."""
    digest = hashlib.sha256()
    for name in CHECKPOINT_ATTRS:
        if name in ds.attrs:
            digest.update(f"{name}={_attr_text(ds.attrs[name])};".encode())
    names = sorted(
        str(n)
        for n, v in ds.variables.items()
        if str(n).startswith("checkpoint_") or "time" in v.dims
    )
    for name in names:
        values = np.asarray(ds.variables[name].values)
        if values.dtype.kind not in "fiub":
            continue
        values = np.ascontiguousarray(values, dtype="<f8")
        values = np.where(np.isnan(values), np.nan, values).astype("<f8")
        digest.update(f"{name}{values.shape};".encode())
        digest.update(values.tobytes())
    return digest.hexdigest()


def positive_alternatives(domain: str) -> str:
    """The schemes registered on ``domain`` that keep rho >= 0, in words, the general one first:
    ``"fv (or log_sl at low temperature)"``, ``"fv"``; "" when there is none."""
    schemes = get_domain(domain).schemes
    classes = [
        schemes.get(n) for n in schemes.names() if getattr(schemes.get(n), "positive", False)
    ]
    general = [c.name for c in classes if not getattr(c, "suited_to", "")]
    regimes: dict[str, list[str]] = {}  # the special schemes, grouped by what they suit
    for c in classes:
        if getattr(c, "suited_to", ""):
            regimes.setdefault(c.suited_to, []).append(c.name)
    special = [f"{' or '.join(names)} {regime}" for regime, names in regimes.items()]
    if not general:
        general, special = special[:1], special[1:]
    text = " or ".join(general)
    return f"{text} (or {' or '.join(special)})" if special else text


def unfaithful_message(scheme: Any, t: float, low: float, high: float) -> str:
    """The one line a run prints when the density of ``scheme`` (not positive) first has
    min rho = ``low`` < -:data:`UNDERSHOOT` max rho (``high``) at time ``t``."""
    resolution = scheme.resolution.key if hasattr(scheme, "resolution") else ""
    value = scheme.attributes().get(resolution) if resolution else None
    grid = f" ({resolution} = {value})" if value is not None else ""
    finer = f"a larger discretization.{resolution}" if resolution else "a finer grid"
    alternatives = positive_alternatives(scheme.domain)
    instead = (
        f"use scheme {alternatives}, which keeps rho >= 0, or {finer}"
        if alternatives
        else f"use {finer}"
    )
    return (
        f"{scheme.name} is no longer faithful from t = {t:.6g}: min rho = {low:.3g} < "
        f"-{UNDERSHOOT:g} max rho (max rho = {high:.4g}); the density rings below the grid's "
        f"resolution{grid}, and what follows is not the solution (the file records "
        f"unfaithful_from_t); {instead}"
    )


def _first_bad_time(ds: Any, name: str, bad: Any) -> str:
    """ " at t = ..." for the first snapshot where the boolean array ``bad`` (the shape of
    ``ds[name]``) holds, "" when ``name`` has no time axis."""
    dims = ds[name].dims
    if "time" not in dims or "time" not in ds:
        return ""
    per_time = np.any(
        np.moveaxis(np.asarray(bad), dims.index("time"), 0).reshape(ds.sizes["time"], -1), axis=1
    )
    return f" at t = {float(ds['time'].values[np.argmax(per_time)]):g}"


def checkpoint_problem(ds: Any) -> str:
    """What makes the checkpoint and snapshots of a run or particle file unfit to resume from,
    in a few words; "" when nothing does.

    Checked, before any step: the checksum ``checkpoint_sha256`` when the file has one
    (:func:`checkpoint_digest`; files of older versions have none); a checkpoint
    (``checkpoint_state`` or ``checkpoint_position``) and its attributes; finite values of the
    checkpoint and of ``rho`` / ``position``; snapshot times increasing, and none after
    ``checkpoint_time``; the mass of every snapshot, stored (``mass``) and summed from ``rho``
    and ``weight``, 1 to :data:`MASS_TOLERANCE`; particle positions at the checkpoint unit
    vectors. The checks that need the solver (the state's shape, the checkpoint's mass) are
    :meth:`Recorder.restore`'s.
    """
    stored = ds.attrs.get("checkpoint_sha256")
    if stored is not None and str(stored) != checkpoint_digest(ds):
        return (
            "its checksum (checkpoint_sha256) does not match its checkpoint and snapshots: the "
            "file was changed after spheredens wrote it"
        )
    state = next((n for n in ("checkpoint_state", "checkpoint_position") if n in ds), None)
    if state is None:
        return "it has no checkpoint to resume from"
    missing = [n for n in ("checkpoint_time", "checkpoint_steps") if n not in ds.attrs]
    if missing:
        return f"its checkpoint lacks the attribute {missing[0]}"
    try:
        t_c, steps = float(ds.attrs["checkpoint_time"]), float(ds.attrs["checkpoint_steps"])
    except (TypeError, ValueError):
        return "its checkpoint_time or checkpoint_steps is not a number"
    if not (np.isfinite(t_c) and t_c >= 0):
        return f"its checkpoint_time = {t_c!r} is not a finite time >= 0"
    if not (np.isfinite(steps) and steps >= 0 and steps == int(steps)):
        return f"its checkpoint_steps = {steps!r} is not a whole number >= 0"
    for name in (state, "rho", "position", "time"):
        if name in ds.variables:
            values = np.asarray(ds.variables[name].values, dtype=float)
            finite = np.isfinite(values)
            if not finite.all():
                where = _first_bad_time(ds, name, ~finite)
                return f"{name} holds non-finite values (NaN or inf){where}"
    times = np.asarray(ds["time"].values, dtype=float) if "time" in ds.variables else np.zeros(0)
    if np.any(np.diff(times) <= 0):
        return "its snapshot times are not increasing"
    if times.size and times[-1] > t_c:
        return f"its checkpoint_time = {t_c:g} lies before its last snapshot (t = {times[-1]:g})"
    masses = []
    if "mass" in ds.variables:
        masses.append(("mass", np.asarray(ds["mass"].values, dtype=float)))
    if "rho" in ds.variables and "weight" in ds.variables:
        rho, weight = ds["rho"], ds["weight"]
        total = (rho * weight).sum(weight.dims)
        if "xi" in total.dims and "xi_weight" in ds.variables:
            total = (total * ds["xi_weight"]).sum("xi")
        masses.append(("the mass of rho", np.asarray(total.values, dtype=float).reshape(-1)))
    for what, m in masses:
        bad = ~(np.abs(m - 1.0) <= MASS_TOLERANCE)
        if bad.any():
            k = int(np.argmax(bad))
            at = f" at t = {times[k]:g}" if k < times.size else ""
            return f"{what}{at} is {m[k]:.15g}, not 1 (to {MASS_TOLERANCE:g})"
    if state == "checkpoint_position":
        norms = np.linalg.norm(np.asarray(ds[state].values, dtype=float), axis=-1)
        deviation = np.abs(norms - 1.0).reshape(-1)
        if deviation.size and not deviation.max() <= UNIT_TOLERANCE:
            return (
                "checkpoint_position holds a row of norm "
                f"{norms.reshape(-1)[np.argmax(deviation)]:.15g}, not unit vectors"
            )
    return ""


def run_status(result: Any) -> dict[str, Any]:
    """The status attributes of a finished run (:class:`~spheredens.simulate.SimulationResult`):
    ``run_status`` (complete or partial), ``stop_reason``, ``stop_message``, ``n_steps`` and
    ``wall_time_seconds``."""
    return {
        "run_status": "complete" if result.completed else "partial",
        "stop_reason": result.stop_reason,
        "stop_message": result.message,
        "n_steps": int(result.n_steps),
        "wall_time_seconds": float(result.wall_time),
    }


class Recorder(Observer):
    """Observer collecting the density and its diagnostics at every snapshot time.

    ``dataset()`` builds the Dataset at any moment (with the snapshots so far), so a file
    written midway is complete in itself.

    For a scheme that does not keep rho >= 0 it also checks the state at the start and after
    every step: the first time min rho < -:data:`UNDERSHOOT` max rho it logs one warning
    (:func:`unfaithful_message`) and keeps (t, min rho, max rho) in :attr:`unfaithful`, which
    the file records (``unfaithful_from_t``, ...) and a resume takes back, so it is told once
    per run. The loop's own check of the step has just synthesized that state (``sh_spectral``
    keeps it): the check is a minimum and a maximum over the grid.
    """

    def __init__(self, problem: Problem, scheme: Any, config: RunConfig) -> None:
        self.problem = problem
        self.scheme = scheme
        self.config = config
        self.grid = scheme.grid
        self.times: list[float] = []
        self.rho: list[Array] = []
        self.diagnostics: dict[str, list[float]] = {
            "mass": [],
            "min_rho": [],
            "energy": [],
            "w2_projection": [],
            "w2_terminal": [],
        }
        for name in scheme.diagnostics:  # e.g. filter_effect
            self.diagnostics[name] = []
        self._stepper: Any = None  # the loop's Stepper (retried steps), from start()
        self.status: dict[str, Any] = {
            "run_status": "partial",
            "stop_reason": "running",
            "stop_message": "",
            "n_steps": 0,
            "wall_time_seconds": 0.0,
        }
        self._energy_reason = energy_defined(problem.model)
        self._centroids = bool(scheme.carries_centroids)
        #: a particle scheme: W2 from its particles (``scheme.atoms``), not from the grid
        self._particles = bool(getattr(scheme, "carries_particles", False))
        self._terminal = TerminalDistance(
            problem.model, self.grid, centroids=self._centroids, particles=self._particles
        )
        #: per snapshot, the marginal's cell centroids and log density (schemes that carry them)
        self.centroids: list[Array] = []
        self.log_rho: list[Array] = []
        self._points = self.grid.points
        self._w2 = None
        self._w2_reason = ""
        self.checkpoint: tuple[float, Array, int] | None = None
        #: the scheme's step control at the checkpoint (:meth:`Scheme.controller_state`)
        self.checkpoint_controller: dict[str, float] = {}
        #: wall-clock seconds spent before this process (a resumed run's earlier segments), the
        #: clock of this segment, and the total at the checkpoint (attr checkpoint_wall_seconds)
        self._wall_before = 0.0
        self._clock: float | None = None
        self._checkpoint_wall = 0.0
        #: per-snapshot arrays of the slice diagnostics (usa_av), name -> list of arrays
        self.slice_diagnostics: dict[str, list[Array]] = (
            {name: [] for name in SLICE_VARIABLES} if problem.has_auxiliary else {}
        )
        #: (t, min rho, max rho) at the first step where a scheme that is not positive had
        #: min rho < -UNDERSHOOT max rho; None before (and for positive schemes)
        self.unfaithful: tuple[float, float, float] | None = None
        self._check_faithful = not getattr(scheme, "positive", False) and hasattr(
            scheme, "extremes"
        )

    def set_checkpoint(self, t: float, state: Array, steps: int) -> None:
        """Remember the full solver state at a step boundary; written with the next file."""
        self.checkpoint = (float(t), np.array(state), int(steps))
        self.checkpoint_controller = dict(self.scheme.controller_state())
        self._checkpoint_wall = self._wall_before + (
            _time.perf_counter() - self._clock if self._clock is not None else 0.0
        )

    def restore(self, ds: Any) -> tuple[float, Array, int]:
        """Take over the snapshots of a partial run file and return its checkpoint
        (t, state, steps) to continue from."""
        if "checkpoint_state" not in ds:
            raise SchemaError("the file has no checkpoint to resume from")
        rho = np.asarray(ds["rho"].values)
        if not self.problem.has_auxiliary:
            rho = rho[:, None]
        self.times = [float(t) for t in ds["time"].values]
        self.rho = [r for r in rho]
        for name in self.diagnostics:
            self.diagnostics[name] = [float(v) for v in ds[name].values]
        if self._centroids and any(n in ds for n in CENTROID_VARIABLES):
            self.centroids = [file_centroids(ds, i) for i in range(ds.sizes["time"])]
        if self.scheme.carries_log_density and "log_rho" in ds:
            self.log_rho = [np.asarray(v, dtype=float) for v in ds["log_rho"].values]
        for name in self.slice_diagnostics:
            self.slice_diagnostics[name] = [np.asarray(v) for v in ds[name].values]
        state = self._checkpoint_state(ds)
        self.checkpoint = (
            float(ds.attrs["checkpoint_time"]),
            state,
            int(ds.attrs["checkpoint_steps"]),
        )
        self.checkpoint_controller = json.loads(str(ds.attrs.get("checkpoint_controller", "{}")))
        self.scheme.restore_controller(self.checkpoint_controller)
        # files written before this attribute existed count from 0
        self._wall_before = self._checkpoint_wall = float(
            ds.attrs.get("checkpoint_wall_seconds", 0.0)
        )
        self.unfaithful = self._recorded_unfaithful(ds)
        return self.checkpoint

    def _recorded_unfaithful(self, ds: Any) -> tuple[float, float, float] | None:
        """(t, min rho, max rho) of ``unfaithful_from_t`` and its companions in ``ds`` when it
        holds a finite time no later than the checkpoint (the run warned then); else None."""
        try:
            values = tuple(float(ds.attrs.get(name, math.nan)) for name in UNFAITHFUL_ATTRS)
        except (TypeError, ValueError):
            return None
        if not (
            math.isfinite(values[0])
            and self.checkpoint is not None
            and values[0] <= self.checkpoint[0]
        ):
            return None
        return values  # type: ignore[return-value]

    def _check_faithfulness(self, t: float, state: Array) -> None:
        """Warn once, and remember, when the state at ``t`` has min rho < -UNDERSHOOT max rho."""
        top, low = self.scheme.extremes(state)  # max |rho|: the same test as with max rho
        if not low < -UNDERSHOOT * top:
            return
        rho = np.asarray(self.scheme.density(state), dtype=float)
        self.unfaithful = (float(t), float(rho.min()), float(rho.max()))
        logger.warning("%s", unfaithful_message(self.scheme, *self.unfaithful))

    def step(self, t: float, dt: float, state: Array | None = None) -> None:
        if self._check_faithful and self.unfaithful is None and state is not None:
            self._check_faithfulness(t, state)

    def _checkpoint_state(self, ds: Any) -> Array:
        """The solver state stored in ``ds``, checked against this scheme: the shape and kind
        (real or complex) of its own state, and a mass of 1 (to :data:`MASS_TOLERANCE`)."""
        expected = np.asarray(self.scheme.initial_state())
        kind = "complex" if np.iscomplexobj(expected) else "real"
        try:
            shape = tuple(int(v) for v in str(ds.attrs["checkpoint_shape"]).split(","))
            complex_ = bool(int(ds.attrs["checkpoint_complex"]))
        except (KeyError, TypeError, ValueError):
            raise SchemaError(
                "its checkpoint_shape or checkpoint_complex attribute is missing or not a number"
            ) from None
        raw = np.asarray(ds["checkpoint_state"].values)
        shape_ok = getattr(self.scheme, "checkpoint_shape_ok", None)
        if (
            not (shape_ok(shape, expected.shape) if shape_ok else shape == expected.shape)
            or complex_ != (kind == "complex")
            or raw.shape != (1 + complex_, int(np.prod(shape)))
        ):
            raise SchemaError(
                f"its checkpoint holds a {'complex' if complex_ else 'real'} state of shape "
                f"{shape} ({raw.shape[0]} x {raw.shape[-1]} values), this scheme's is {kind} "
                f"of shape {expected.shape}"
            )
        state = ((raw[0] + 1j * raw[1]) if complex_ else raw[0]).reshape(shape)
        m = mass(
            np.asarray(self.scheme.density(state), dtype=float),
            self.grid.weight,
            self.problem.xi_weight,
        )
        if not abs(m - 1.0) <= MASS_TOLERANCE:
            raise SchemaError(
                f"the mass of its checkpoint (t = {float(ds.attrs['checkpoint_time']):g}) is "
                f"{m:.15g}, not 1 (to {MASS_TOLERANCE:g})"
            )
        return state

    def start(self, info: dict[str, Any]) -> None:
        self._stepper = info.get("stepper")
        self._clock = _time.perf_counter()
        # the target of w2_projection always comes from rho_0 (also when resuming)
        rho0 = self.scheme.density(self.scheme.initial_state())
        # the projection target is built from rho_0 (marginal over slices)
        marginal0 = slices.marginal(rho0, self.problem.xi_weight)
        self._w2, self._w2_reason = projection_distance(
            self.problem.model,
            self.grid,
            marginal0,
            self.problem.initial,
            centroids=self._centroids,
            particles=self._particles,
        )
        if self._check_faithful and self.unfaithful is None:
            self._check_faithfulness(float(info["t_start"]), info["initial_state"])

    def observe(self, t: float, state: Array) -> None:
        rho = np.array(self.scheme.density(state), dtype=float)
        xi_w = self.problem.xi_weight
        marginal = slices.marginal(rho, xi_w)
        self.times.append(float(t))
        self.rho.append(rho)
        d = self.diagnostics
        d["mass"].append(mass(rho, self.grid.weight, xi_w))
        d["min_rho"].append(float(rho.min()))
        beta = self.problem.model.beta
        if self.slice_diagnostics:
            flat = rho.reshape(len(rho), -1)
            d["energy"].append(self.scheme.interaction.energy(flat))
            self._observe_slices(flat, marginal.reshape(-1))
        elif self._energy_reason:
            d["energy"].append(np.nan)
        elif self.scheme.evaluator_inputs == "coefficients":  # exact for the band-limited density
            d["energy"].append(interaction_energy_spectral(marginal, self.grid, beta))
        else:
            d["energy"].append(
                interaction_energy(marginal, self.grid.points, self.grid.weight, beta)
            )
        for name in self.scheme.diagnostics:
            d[name].append(self.scheme.diagnostic(name, state))
        centroid = None
        if self._centroids:  # the marginal's centroid in each cell: mass-weighted over slices
            c = np.asarray(self.scheme.centroids(state), dtype=float)
            if c.ndim > rho.ndim:  # unit vectors (the sphere): the slices' mean, on the sphere
                total = slices.marginal(rho[..., None] * c, xi_w)
                norm = np.linalg.norm(total, axis=-1, keepdims=True)
                centroid = np.where(norm > 0.0, total / np.where(norm > 0.0, norm, 1.0), c[0])
            else:  # offsets (the circle)
                with np.errstate(invalid="ignore", divide="ignore"):
                    centroid = np.nan_to_num(slices.marginal(rho * c, xi_w) / marginal)
            self.centroids.append(centroid)
        if self.scheme.carries_log_density:  # log of the marginal sum_k r_k rho_k, from the logs
            self.log_rho.append(
                logsumexp(
                    np.asarray(self.scheme.log_density(state), dtype=float),
                    axis=0,
                    b=np.reshape(xi_w, (-1,) + (1,) * (rho.ndim - 1)),
                )
            )
        if self._particles:  # each particle's mass at its own position
            points, weights = self.scheme.atoms(state)
            d["w2_projection"].append(
                np.nan if self._w2 is None else self._w2.of_atoms(points, weights)
            )
            d["w2_terminal"].append(self._terminal.of_atoms(points, weights))
        else:
            d["w2_projection"].append(np.nan if self._w2 is None else self._w2(marginal, centroid))
            d["w2_terminal"].append(self._terminal(marginal, centroid))

    def _observe_slices(self, rho: Array, marginal: Array) -> None:
        pts = self._points.reshape(-1, self._points.shape[-1])
        w = self.grid.weight.reshape(-1)
        kernel = self.problem.model.auxiliary
        modes = slices.slice_modes(rho, pts, w)
        z, dist = slices.fit_orbit(modes, kernel.gauges, kernel.weight)
        gauge = kernel.uniform_coupling
        # in the grid's shape, as restore() reads it back from a file (resume)
        out = {
            "rho_marginal": marginal.reshape(self.grid.shape),
            "slice_mode": modes,
            "slice_spread": slices.slice_spread(rho, pts, w, modes),
            "marginal_mean_norm": np.array(slices.mean_norm(marginal, pts, w)),
            "marginal_w2_dirac": np.array(slices.w2_to_nearest_dirac(marginal, pts, w)),
            "orbit_z": z if gauge else np.full(len(z), np.nan),
            "orbit_distance": (
                np.array(float(np.sqrt(np.sum(kernel.weight * dist**2))))
                if gauge
                else np.array(np.nan)
            ),
        }
        for name, value in out.items():
            self.slice_diagnostics[name].append(np.asarray(value, dtype=float))

    def finish(self, result: Any) -> None:
        self._drop_partial_snapshot()
        self.status = {
            **run_status(result),
            "wall_time_total_seconds": self._wall_before + float(result.wall_time),
        }

    def _drop_partial_snapshot(self) -> None:
        """After an exception inside :meth:`observe` (a run ended by ``error``), the snapshot
        it was recording is in some lists only: drop it, so that the file holds the snapshots
        recorded whole (a resume records it again)."""
        lists = [self.times, self.rho, *self.diagnostics.values(), *self.slice_diagnostics.values()]
        if self._centroids:
            lists.append(self.centroids)
        if self.scheme.carries_log_density:
            lists.append(self.log_rho)
        whole = min(len(values) for values in lists)
        for values in lists:
            del values[whole:]

    def dataset(self) -> Any:
        """The Dataset of the snapshots recorded so far
        (:func:`spheredens.schema.density_dataset`)."""
        comments = {
            "w2_projection": (
                self._w2.comment() if self._w2 is not None else f"not defined: {self._w2_reason}"
            ),
            "w2_terminal": self._terminal.comment(),
        }
        if self._energy_reason:
            comments["energy"] = f"not defined: {self._energy_reason}"
        scheme_attrs = self.scheme.attributes()
        if self.scheme.positive:  # steps refused for a negative density and retried with dt / 2
            scheme_attrs["retried_steps"] = (
                self._stepper.retried_steps if self._stepper is not None else 0
            )
        ds = density_dataset(
            self.problem,
            self.grid,
            self.config,
            times=self.times,
            rho=self.rho,
            diagnostics=self.diagnostics,
            comments=comments,
            slice_values=self.slice_diagnostics,
            scheme_attrs=scheme_attrs,
            status=self.status,
            checkpoint=self.checkpoint,
            centroids=self.centroids if self._centroids else None,
            log_rho=self.log_rho if self.scheme.carries_log_density else None,
            unfaithful=self.unfaithful,
        )
        if self.checkpoint is not None and self.checkpoint_controller:  # floats as repr: exact
            ds.attrs["checkpoint_controller"] = json.dumps(self.checkpoint_controller)
        if self.checkpoint is not None:
            ds.attrs["checkpoint_wall_seconds"] = self._checkpoint_wall
            ds.attrs["checkpoint_sha256"] = checkpoint_digest(ds)  # checked before a resume
        return ds
