"""Sweeps: a base configuration and lists of values, every case a task on Dask distributed.

A sweep file (TOML)::

    base = "config.toml"              # the base run configuration (relative to this file)
    output_dir = "cases"              # one netCDF file per case, and the combined dataset
    [vary]
    "model.beta" = [10.0, 30.0, 100.0]
    "discretization.n" = [256, 512]

Every combination of the listed values is a case (here 6). Cases run as tasks on a local Dask
cluster by default, or on an existing scheduler (``--scheduler tcp://host:port``). Each case
runs :func:`spheredens.run` with ``resume=True``: a finished case file (same configuration) is
never recomputed or rewritten, a partial one (a worker lost mid-case) continues from its
checkpoint. A failed case is reported and does not stop the others. Ctrl-C (or SIGTERM) stops
the sweep: the workers are shut down, a running case keeps the checkpoint its file last got, no
lock file is left behind, and the same command continues. The combined dataset
(``combined.nc``) holds the diagnostics of every case with one dimension per varied key (named
by its last component: ``beta``, ``n``, ...), and ``rho`` when all cases share one grid. It is
written from the cases that finished: a failed case's values are NaN there, and the file's
attribute ``failed_cases`` names it. A key whose values are not numbers or strings (a matrix
such as ``model.V``, a list) has a label per value as its coordinate (the value as written,
``"[[1.0, 0.0], [0.0, 0.5]]"``) and the values themselves in ``<dim>_value`` (``V_value``:
dims ``V``, ``row``, ``col``).

Refused before any case runs, in one line: values repeated (also when equal as numbers but
written differently: ``2`` and ``2.0``, ``0.0`` and ``-0.0``), cases with other snapshot times,
a dimension named like a part of the combined dataset, and ``output.*`` keys (set by the sweep).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import math
import os
import re
import signal
import sys
import threading
import time
import traceback
import urllib.error
import urllib.request
import uuid
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping

import numpy as np

from ._lazy import dask, distributed
from ._lazy import xarray as xr
from ._validate import as_str, as_table, check_keys
from .config import RunConfig, config_from_dict, load_config, read_toml
from .exceptions import ConfigError, OutputLocked, SpheredensError, SpheredensWarning
from .io import check_output_location, open_run, write_dataset
from .locking import describe_holder, lock_holder, output_lock, remove_stale_record
from .runner import run, same_run
from .schema import combined_grid
from .simulate import progress_listener, signal_handler

logger = logging.getLogger(__name__)

COMBINED_VARIABLES = ("mass", "min_rho", "energy", "w2_projection", "w2_terminal")

#: names the combined dataset uses itself: no varied key's dimension may take one
RESERVED_NAMES = ("time", "row", "col", "rho", "weight", *COMBINED_VARIABLES)

#: where the local cluster's dashboard listens unless the user names an address
DEFAULT_DASHBOARD_ADDRESS = "127.0.0.1:0"

#: how many characters of a value the messages show
SHOWN_VALUE_CHARS = 60


@dataclass(frozen=True)
class SweepCase:
    """One case: its name, the values of the varied keys, its validated configuration."""

    name: str
    values: tuple[tuple[str, Any], ...]
    config: RunConfig

    @property
    def path(self) -> Path:
        path = self.config.output_path()
        assert path is not None
        return path


@dataclass(frozen=True)
class Sweep:
    """A validated sweep: the cases and where their files go."""

    cases: tuple[SweepCase, ...]
    keys: tuple[str, ...]
    levels: tuple[tuple[Any, ...], ...]
    output_dir: Path
    combined_path: Path


def _dim_name(key: str) -> str:
    return key.rsplit(".", 1)[-1]


def _case_name(values: tuple[tuple[str, Any], ...]) -> str:
    parts = [f"{_dim_name(k)}-{v}" for k, v in values]
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", "_".join(parts)) or "case"


def _normal(value: Any) -> Any:
    """A hashable form of a sweep value in which values equal as numbers are equal: ``2`` and
    ``2.0``, ``0.0`` and ``-0.0`` (Python's numeric equality and hash); lists become tuples,
    tables sorted tuples; booleans stay apart from the numbers 0 and 1."""
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, (list, tuple)):
        return ("list", tuple(_normal(v) for v in value))
    if isinstance(value, Mapping):
        return ("table", tuple(sorted((str(k), _normal(v)) for k, v in value.items())))
    return value


def _is_scalar(value: Any) -> bool:
    return isinstance(value, (bool, int, float, str))


def _label(value: Any) -> str:
    """A value as written in the sweep file (TOML arrays and numbers read as JSON does):
    ``[[1.0, 0.0], [0.0, 0.5]]``, ``2``, ``2.0``, ``-0.0``."""
    try:
        return json.dumps(value, sort_keys=True, default=str)
    except (TypeError, ValueError):
        return str(value)


def _shown(value: Any) -> str:
    """:func:`_label`, cut to :data:`SHOWN_VALUE_CHARS` characters for a message."""
    text = _label(value)
    return text if len(text) <= SHOWN_VALUE_CHARS else text[: SHOWN_VALUE_CHARS - 3] + "..."


def _value_array(values: tuple[Any, ...]) -> Any:
    """The values of a non-scalar key as one float64 array (value, ...), or None when they are
    not numbers of one common shape."""
    try:
        arrays = [np.asarray(v, dtype=np.float64) for v in values]
    except (TypeError, ValueError):
        return None
    if any(isinstance(x, bool) for v in values for x in np.ravel(np.asarray(v, dtype=object))):
        return None
    if len({a.shape for a in arrays}) != 1 or arrays[0].ndim == 0:
        return None
    return np.stack(arrays)


def _value_dims(key: str, ndim: int) -> tuple[str, ...]:
    """The dims of one value in ``<dim>_value``: ``row``, ``col`` for the model's matrices (as in
    run files), else ``<dim>_axis0``, ``<dim>_axis1``, ..."""
    if key in ("model.Q", "model.K", "model.V") and ndim == 2:
        return ("row", "col")
    return tuple(f"{_dim_name(key)}_axis{k}" for k in range(ndim))


def load_sweep(path: str | Path) -> Sweep:
    """Read and validate a sweep file (the argument of ``spheredens sweep SWEEP``).

    A sweep file names a base configuration and the values to vary (``[vary]`` with dotted
    keys, e.g. ``"model.beta" = [10.0, 30.0]``); every combination is a case, and every case
    configuration is validated here, before any work.

    Parameters
    ----------
    path : path
        The sweep file (TOML); ``base`` and ``output_dir`` are relative to its folder.

    Returns
    -------
    Sweep
        ``cases`` (each with ``name``, ``values`` and its ``config``), ``keys``, ``levels``,
        ``output_dir`` and ``combined_path``.

    Example
    -------
    >>> import spheredens as sd
    >>> sweep = sd.load_sweep("runs/concentration/sweep_circle_n1024.toml")
    >>> names = [case.name for case in sweep.cases]          # beta-10.0, beta-30.0, ...
    """
    path = Path(path)
    return sweep_from_dict(read_toml(path, "sweep file"), base_dir=path.resolve().parent)


#: the most cases of one sweep (the product of the numbers of values varied)
MAX_SWEEP_CASES = 10000


def sweep_from_dict(data: Mapping[str, Any], *, base_dir: str | Path = ".") -> Sweep:
    base_dir = Path(base_dir)
    check_keys(data, ["base", "output_dir", "combined", "vary"], "sweep")
    if "base" not in data:
        raise ConfigError("sweep.base", "is required: the base configuration file, or a table")
    if isinstance(data["base"], str):
        base_path = (
            Path(data["base"]) if Path(data["base"]).is_absolute() else base_dir / data["base"]
        )
        load_config(base_path)  # validated as it is, then varied from its own tables
        base = read_toml(base_path, "base configuration")
        base_cfg_dir = base_path.resolve().parent
    else:
        base = as_table(data["base"], "sweep.base")
        base_cfg_dir = base_dir
    output_dir = base_dir / as_str(data.get("output_dir", "cases"), "sweep.output_dir")
    combined = output_dir / as_str(data.get("combined", "combined.nc"), "sweep.combined")
    if combined.suffix != ".nc":
        raise ConfigError(
            "sweep.combined", f"= {combined.name!r} must end in '.nc' (a netCDF file)"
        )
    vary = as_table(data.get("vary", {}), "sweep.vary")
    if not vary:
        raise ConfigError(
            "sweep.vary", 'give at least one key to vary, e.g. "model.beta" = [10.0, 30.0]'
        )
    keys, levels = [], []
    for key, values in vary.items():
        if "." not in key:
            raise ConfigError(
                f"sweep.vary.{key}", "use a dotted key 'section.key', e.g. \"model.beta\""
            )
        if not isinstance(values, list) or not values:
            raise ConfigError(
                f"sweep.vary.{key}", f"must be a non-empty list of values, got {_shown(values)}"
            )
        if key.partition(".")[0] == "output":
            raise ConfigError(
                f"sweep.vary.{key}",
                "is set by the sweep itself (each case writes "
                "output_dir/<case>.nc, without a figure): vary other keys",
            )
        seen: dict[Any, Any] = {}
        for value in values:
            normal = _normal(value)
            try:
                earlier = seen.get(normal, seen)
            except TypeError:  # not hashable (cannot happen for TOML values): compare by text
                normal = _label(value)
                earlier = seen.get(normal, seen)
            if earlier is not seen:
                same = (
                    "the same value twice"
                    if _label(earlier) == _label(value)
                    else "equal as numbers"
                )
                raise ConfigError(
                    f"sweep.vary.{key}",
                    f"repeats a value: {_shown(earlier)} and "
                    f"{_shown(value)} are {same}; list each value once",
                )
            seen[normal] = value
        dim = _dim_name(key)
        if dim in RESERVED_NAMES:
            raise ConfigError(
                f"sweep.vary.{key}",
                f"would name a dimension {dim!r} of the combined "
                f"dataset, which has a {dim!r} of its own; run one sweep per value of it",
            )
        keys.append(key)
        levels.append(tuple(values))
    if len({_dim_name(k) for k in keys}) != len(keys):
        raise ConfigError(
            "sweep.vary",
            "two varied keys end in the same name; the combined dataset "
            "names its dimensions after the last component of each key",
        )
    count = math.prod(len(v) for v in levels)
    if count > MAX_SWEEP_CASES:  # each case is a run and a file, validated before any runs
        raise ConfigError(
            "sweep.vary",
            f"{count} cases ({' x '.join(str(len(v)) for v in levels)}), more "
            f"than {MAX_SWEEP_CASES} (each a run and its file); vary fewer values, or split the sweep",
        )
    cases = []
    for combo in itertools.product(*levels):
        values = tuple(zip(keys, combo))
        name = _case_name(values)
        table = {s: dict(t) for s, t in base.items()}
        for key, value in values:
            section, _, item = key.partition(".")
            table.setdefault(section, {})[item] = value
        table.setdefault("output", {})["path"] = str((output_dir / f"{name}.nc").resolve())
        table["output"]["figure"] = False
        try:
            cfg = config_from_dict(table, base_dir=base_cfg_dir)
        except ConfigError as exc:
            raise ConfigError(f"sweep case {name}", str(exc)) from None
        cfg.check_resolution(
            key=f"sweep case {name}",
            warn=False,
            fix="refine the grid or set discretization.allow_underresolved = true in the base",
        )
        cases.append(SweepCase(name, values, cfg))
    _check_combinable(cases, keys)
    owner: dict[Path, Any] = {combined.resolve(): "the combined file"}
    for case in cases:  # two cases (or a case and the combined file) on one file: refused now
        other = owner.setdefault(case.path, case)
        if other is not case:
            other = other if isinstance(other, str) else f"case {other.name} ({dict(other.values)})"
            raise ConfigError(
                f"sweep case {case.name}",
                f"writes {str(case.path)!r}, as {other} "
                "does (their names coincide once made file names); vary other values "
                "or rename the combined file",
            )
    return Sweep(tuple(cases), tuple(keys), tuple(levels), output_dir, combined)


def _differing_key(a: SweepCase, b: SweepCase, keys: list[str], prefer: str = "") -> str:
    """The first varied key whose values differ between two cases (one starting with
    ``prefer`` first)."""
    differ = [k for (k, va), (_, vb) in zip(a.values, b.values) if _normal(va) != _normal(vb)]
    return next((k for k in differ if k.startswith(prefer)), differ[0] if differ else keys[0])


def _check_combinable(cases: list[SweepCase], keys: list[str]) -> None:
    """Refuse, before any case runs, what the combined dataset could not hold: cases with
    other snapshot times, two cases of one configuration (values equal once validated)."""
    times = cases[0].config.time.snapshot_times()
    for case in cases[1:]:
        other = case.config.time.snapshot_times()
        if other != times:
            key = _differing_key(cases[0], case, keys, prefer="time.")
            raise ConfigError(
                f"sweep.vary.{key}",
                f"changes the snapshot times (case {cases[0].name}: "
                f"{len(times)} to t = {times[-1]:g}; case {case.name}: {len(other)} to "
                f"t = {other[-1]:g}); combined.nc needs the same times in every case: "
                "run one sweep per value of it",
            )
    seen: dict[str, SweepCase] = {}
    for case in cases:
        table = case.config.to_dict()
        table.pop("output", None)
        text = json.dumps(table, sort_keys=True, default=str)
        if text in seen:
            first = seen[text]
            key = _differing_key(first, case, keys)
            va, vb = dict(first.values)[key], dict(case.values)[key]
            raise ConfigError(
                f"sweep.vary.{key}",
                f"{_shown(va)} and {_shown(vb)} give the same run "
                f"(cases {first.name} and {case.name} have one configuration once "
                "validated); list each value once",
            )
        seen[text] = case


def case_status(case: SweepCase) -> str:
    """``"done"`` (a complete file of this configuration), ``"partial"`` or ``"todo"``."""
    if not case.path.exists():
        return "todo"
    try:
        ds = open_run(case.path)
    except SpheredensError:
        return "partial"
    if not same_run(ds.attrs.get("config", ""), case.config):
        raise ConfigError(
            f"sweep case {case.name}",
            f"{str(case.path)!r} holds a different run; move it away or choose another output_dir",
        )
    return "done" if ds.attrs.get("run_status") == "complete" else "partial"


#: the case each thread of a worker runs (the warnings it prints name it)
_RUNNING = threading.local()
#: the process that runs the sweep (its messages are formatted by the command line)
_CLIENT_PID: int | None = None
_WORKER_SETUP = threading.Lock()
_worker_ready = False


def _case_prefix() -> str:
    name = getattr(_RUNNING, "case", "")
    return f"sweep case {name}: " if name else ""


class _WorkerLines(logging.Handler):
    """On a Dask worker, where no command line formats them: spheredens log records as one line
    each on the worker's stderr, ``spheredens: warning: sweep case NAME: ...``."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = " ".join(record.getMessage().split())
            sys.stderr.write(f"spheredens: {record.levelname.lower()}: {_case_prefix()}{text}\n")
            sys.stderr.flush()
        except Exception:
            self.handleError(record)


def _worker_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    line: str | None = None,
) -> str:
    """``warnings.formatwarning`` on a worker: one line ``spheredens: warning: sweep case NAME:
    ...``, as the command line prints its own warnings (others named by their category)."""
    text = " ".join(str(message).split())
    if not issubclass(category, SpheredensWarning):
        text = f"{text} ({category.__name__})"
    return f"spheredens: warning: {_case_prefix()}{text}\n"


def _one_line_messages_on_worker() -> None:
    """Once per worker process: its warnings and spheredens log records print as one line
    ``spheredens: warning: sweep case NAME: ...`` (a stale lock taken over, an under-resolved
    grid run anyway), each time (a worker runs many cases). Nothing changes in the process
    that runs the sweep (in-process workers)."""
    global _worker_ready
    if os.getpid() == _CLIENT_PID:
        return
    with _WORKER_SETUP:
        if _worker_ready:
            return
        log = logging.getLogger("spheredens")
        log.addHandler(_WorkerLines(logging.WARNING))
        log.propagate = False
        warnings.formatwarning = _worker_warning
        # each time, not once per worker (a worker runs many cases); after the user's filters
        # (PYTHONWARNINGS=ignore still silences them)
        warnings.filterwarnings("always", category=SpheredensWarning, append=True)
        _worker_ready = True


def _run_case(
    config_dict: dict,
    base_dir: str,
    name: str = "",
    topic: str | None = None,
    interval: float = 5.0,
) -> dict:
    """Task body (runs on a worker): run or resume one case; never raises. With a ``topic``
    the run's progress goes to the client as Dask events (:func:`_publisher`); ``wall`` is the
    task's wall time in seconds. Its warnings print as one line each, naming the case
    (:func:`_one_line_messages_on_worker`)."""
    clock = time.perf_counter()
    _one_line_messages_on_worker()
    _RUNNING.case = name
    try:
        cfg = config_from_dict(config_dict, base_dir=base_dir)
        with (
            progress_listener(_publisher(topic, name), interval=interval)
            if topic
            else contextlib.nullcontext()
        ):
            ds = run(cfg, progress=False, resume=True)
        return {
            "ok": True,
            "n_steps": int(ds.attrs.get("n_steps", 0)),
            "wall": time.perf_counter() - clock,
        }
    except SpheredensError as exc:
        return {"ok": False, "error": str(exc), "wall": time.perf_counter() - clock}
    except Exception as exc:  # a bug: report it with its traceback's last line, keep going
        return {
            "ok": False,
            "error": f"{type(exc).__name__}: {exc} "
            f"({traceback.format_exc().strip().splitlines()[-2].strip()})",
            "wall": time.perf_counter() - clock,
        }
    finally:
        _RUNNING.case = ""


def _publisher(topic: str, case: str) -> Any:
    """The progress listener of a case on a Dask worker: each event of its run
    (:func:`spheredens.simulate.progress_listener`) is published with
    ``distributed.Worker.log_event`` under ``topic``, to which the client subscribed
    (:class:`SweepReporter`)."""
    worker = distributed.get_worker()
    address = str(worker.address)

    def publish(event: dict[str, Any]) -> None:
        worker.log_event(topic, {**event, "case": case, "worker": address})

    return publish


def _dashboard_missing(link: str | None, timeout: float = 3.0) -> str | None:
    """None when the dashboard at ``link`` answers; else why there is none. A scheduler reports
    its HTTP server as the dashboard even when it serves no dashboard pages (started with
    --no-dashboard, or without bokeh): the page is asked for once."""
    if not link:
        return "the scheduler serves none; it needs bokeh"
    try:
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # straight to it
        with opener.open(link, timeout=timeout) as answer:
            answer.read(1)
        return None
    except urllib.error.HTTPError as exc:
        return f"{link} answers HTTP {exc.code}: the scheduler was started with --no-dashboard or without bokeh"
    except (OSError, ValueError) as exc:  # not reachable from here (a tunnel may still reach it)
        return f"{link} does not answer from here: {exc}"


def _duration(seconds: float) -> str:
    """Wall time as a person reads it: 4.2 s, 3 min 12 s, 1 h 36 min."""
    if not seconds == seconds or seconds < 0:
        return "?"
    if seconds < 60:
        return f"{seconds:.1f} s"
    if seconds < 3600:
        return f"{int(seconds // 60)} min {int(seconds % 60):02d} s"
    return f"{int(seconds // 3600)} h {int(seconds % 3600 // 60):02d} min"


class SweepReporter:
    """What a sweep says as it goes, one line per event on ``stream`` (default: stderr).

    At the start the address of the Dask dashboard and how many cases run on how many worker
    threads; while a case runs, its model time t against t_end, the wall time it has taken and
    an estimate of the time left (the case's and the sweep's), at most once every ``interval``
    seconds per case (its workers publish that often); when a case ends, its outcome and wall
    time; at the end the sweep's wall time.

    The cases report through Dask's structured events: each worker publishes with
    ``distributed.Worker.log_event`` under one topic per sweep, and the client receives them
    with ``distributed.Client.subscribe_topic`` (:meth:`attach`) -- no polling of files.

    The estimate of the time left: a running case needs (t_end - t) / r more, r its model time
    per wall second since its first progress event (the steps before it, which include the
    set-up, are not extrapolated); a case not started takes the mean wall time of the finished and projected
    cases; the work left is shared by the worker threads (never less than the longest running
    case still needs).
    """

    def __init__(self, n_cases: int, *, stream: Any = None, interval: float = 5.0) -> None:
        self.n_cases, self.interval = n_cases, float(interval)
        self.stream = stream
        self.topic = f"spheredens-progress-{uuid.uuid4().hex}"
        self.slots = 1
        self._lock = threading.Lock()
        self._running: dict[str, dict[str, Any]] = {}  # case -> its last event, client clock
        self._walls: list[float] = []  # wall times of the cases that ran to the end
        self._done: set[str] = set()
        self._clock = time.monotonic()

    def line(self, text: str) -> None:
        """Write one line (from any thread) and flush it."""
        with self._lock:
            stream = self.stream if self.stream is not None else sys.stderr
            stream.write(text + "\n")
            stream.flush()

    def attach(self, client: Any, done_earlier: int = 0) -> None:
        """Subscribe to the cases' events on ``client`` and write the start lines: the dashboard
        address (``client.dashboard_link``), the cases and the worker threads."""
        self._clock = time.monotonic()
        try:
            link = client.dashboard_link
        except Exception:  # the scheduler serves no dashboard (no "dashboard" service)
            link = None
        try:
            self.slots = max(1, sum(client.nthreads().values()))
        except Exception as exc:
            logger.info("counting the worker threads: %s", exc)
        client.subscribe_topic(self.topic, self.event)
        why = _dashboard_missing(link)
        self.line(
            f"sweep: Dask dashboard at {link}"
            if why is None
            else f"sweep: no Dask dashboard ({why})"
        )
        earlier = f" ({done_earlier} done earlier)" if done_earlier else ""
        self.line(f"sweep: {self.n_cases} case(s) to run on {self.slots} worker thread(s){earlier}")

    def detach(self, client: Any) -> None:
        """Stop receiving the cases' events."""
        try:
            client.unsubscribe_topic(self.topic)
        except Exception as exc:  # the client is already closing: nothing more to receive
            logger.info("unsubscribing %s: %s", self.topic, exc)

    def event(self, event: Any) -> None:
        """Handler of ``Client.subscribe_topic``: ``event`` is (scheduler timestamp, message), the
        message a dict of :func:`spheredens.simulate.progress_listener` with ``case`` and
        ``worker``. Runs on the client's event loop: it only writes a line."""
        try:
            msg = event[1]
            case = str(msg["case"])
            if case in self._done or msg["event"] == "finish":
                return  # the outcome line says how it ended
            msg = {**msg, "received": time.monotonic(), "left": float("nan")}
            with self._lock:
                previous = self._running.get(case)
                if msg["event"] == "step":
                    # the rate since the case's first step event: the steps before it include
                    # the set-up (imports, plans), which is not extrapolated
                    first = previous.get("first") if previous is not None else None
                    msg["first"] = first if first is not None else (msg["t"], msg["wall"])
                    dt, dw = msg["t"] - msg["first"][0], msg["wall"] - msg["first"][1]
                    if dt > 0 and dw > 0:
                        msg["left"] = (msg["t_end"] - msg["t"]) * dw / dt
                self._running[case] = msg
            if msg["event"] == "start":
                where = f" on {msg['worker']}" if msg.get("worker") else ""
                resume = f", resuming at t = {msg['t_start']:.4g}" if msg["t_start"] > 0 else ""
                self.line(f"  {case}: started{where}{resume} (t_end = {msg['t_end']:.4g})")
                return
            self.line(
                f"  {case}: t = {msg['t']:.4g} / {msg['t_end']:.4g} "
                f"({100.0 * (msg['t'] / msg['t_end'] if msg['t_end'] > 0 else 1.0):.0f}%), "
                f"{_duration(msg['wall'])}"
                + (f", ~{_duration(msg['left'])} left" if msg["left"] == msg["left"] else "")
                + self._left()
            )
        except Exception as exc:  # a malformed event: never break the client's loop
            logger.info("sweep progress event %r: %s", event, exc)

    def finished(self, k: int, case: str, outcome: str, wall: float | None) -> None:
        """Case number ``k`` ended with ``outcome`` after ``wall`` seconds (None: unknown, e.g.
        a lost worker; then the time since its start event)."""
        with self._lock:
            self._done.add(case)
            last = self._running.pop(case, None)
            if wall is None and last is not None:
                wall = last["wall"] + time.monotonic() - last["received"]
            if outcome == "ran" and wall is not None:
                self._walls.append(wall)
        took = f" in {_duration(wall)}" if wall is not None else ""
        self.line(f"  [{k}/{self.n_cases}] {case}: {outcome}{took}{self._left()}")

    def close(self) -> None:
        """The end line: the sweep's wall time."""
        self.line(
            f"sweep: {len(self._done)} of {self.n_cases} case(s) ended in "
            f"{_duration(time.monotonic() - self._clock)}"
        )

    def time_left(self) -> float | None:
        """Estimated wall seconds until the last case ends (None: nothing to go on yet)."""
        now = time.monotonic()
        with self._lock:
            running = list(self._running.values())
            totals, lefts = list(self._walls), []
            for msg in running:
                since = now - msg["received"]
                if msg["left"] == msg["left"]:  # a rate is known
                    lefts.append(max(msg["left"] - since, 0.0))
                    totals.append(msg["wall"] + since + lefts[-1])
                else:
                    lefts.append(None)
            queued = self.n_cases - len(self._done) - len(running)
        if not totals:
            return None
        mean = sum(totals) / len(totals)
        lefts = [mean if v is None else v for v in lefts]
        work = sum(lefts) + max(queued, 0) * mean
        return max(work / self.slots, max(lefts, default=0.0))

    def _left(self) -> str:
        left = self.time_left()
        if left is None or len(self._done) == self.n_cases:
            return ""
        return f"; sweep ~{_duration(left)} left"


def check_sweep_output(
    sweep: Sweep, *, mkdir: bool = False, mkdir_hint: str = "mkdir=True"
) -> None:
    """Check, before any work, that the sweep can write its files.

    The sweep writes into its own folder ``output_dir``, which it creates when missing; the
    folder holding it must exist (or ``mkdir`` creates the missing parents) and be writable
    (:func:`~spheredens.io.check_output_location` on the combined file).

    Raises
    ------
    ConfigError
        Key ``sweep.output_dir``: the folder cannot be created or written (one line).
    """
    out = sweep.output_dir
    own = not out.exists() and out.parent.is_dir()  # the sweep's own folder, one level
    check_output_location(
        sweep.combined_path, mkdir=mkdir or own, key="sweep.output_dir", mkdir_hint=mkdir_hint
    )


def run_sweep(
    sweep: Sweep,
    *,
    scheduler: str | None = None,
    n_workers: int | None = None,
    progress: bool = True,
    mkdir: bool = False,
    stream: Any = None,
    progress_interval: float = 5.0,
    dashboard_address: str | None = None,
) -> tuple[Any, dict[str, str]]:
    """Run the cases of a sweep on Dask: ``spheredens sweep SWEEP``.

    Each case not done yet runs :func:`spheredens.run` with ``resume=True`` as a Dask task (a
    finished case file is never recomputed, a partial one continues); a failed case is reported
    and the others go on. The combined dataset has one dimension per varied key; it is written
    from the cases that finished: when a case failed, its values are NaN, the file's attribute
    ``failed_cases`` names it and a warning says so (None, and no file, when no case finished).
    Ctrl-C or SIGTERM raises KeyboardInterrupt (its attribute ``signal`` the signal number) after
    the cluster is shut down, leaving no lock file behind.

    Parameters
    ----------
    sweep : Sweep
        From :func:`load_sweep`.
    scheduler : str, optional
        Address of a running Dask scheduler (``tcp://host:port``); default: a local cluster of
        ``n_workers`` processes, one thread each, closed afterwards. The local cluster's
        scheduler and workers listen on 127.0.0.1 only.
    n_workers : int, optional
        Worker processes of the local cluster (>= 1; default min(2, cases to run)).
    dashboard_address : str, optional
        ``host:port`` where the local cluster's dashboard listens (default
        ``127.0.0.1:0``: this machine only, a free port; ``:8787`` serves every interface).
    progress : bool
        Report as the sweep goes (:class:`SweepReporter`): the Dask dashboard's address at the
        start, each running case's model time against t_end, its wall time when it ends and
        the time left; False: nothing.
    mkdir : bool
        Create the missing parents of ``output_dir`` (:func:`check_sweep_output`, checked
        before any work; ``output_dir`` itself is always created).
    stream : file, optional
        Where the progress lines go (default: sys.stderr).
    progress_interval : float
        Wall seconds between two progress lines of one case (> 0).

    Returns
    -------
    (xarray.Dataset or None, dict)
        The combined dataset (also written to ``sweep.combined_path``; ``w2_projection``
        (beta, ..., time) and the other diagnostics), and each case's outcome by name.

    Example
    -------
    >>> import spheredens as sd
    >>> sweep = sd.load_sweep("runs/concentration/sweep_circle_n1024.toml")
    >>> combined, outcome = sd.run_sweep(sweep, n_workers=2, progress=False)
    """
    check_sweep_output(sweep, mkdir=mkdir)
    if not (isinstance(progress_interval, (int, float)) and progress_interval > 0):
        raise ConfigError(
            "progress_interval", f"must be a number of seconds > 0, got {progress_interval!r}"
        )
    if n_workers is not None and not (isinstance(n_workers, int) and n_workers >= 1):
        raise ConfigError("n_workers", f"must be an integer >= 1, got {n_workers!r}")
    if dashboard_address is not None:
        if scheduler is not None:
            raise ConfigError(
                "dashboard_address",
                "applies to the local cluster only: the "
                f"scheduler at {scheduler!r} serves its own dashboard",
            )
        check_dashboard_address(dashboard_address)
    # SIGINT and SIGTERM stop the sweep from here on, however far it got: the lock is released
    # and the cluster shut down on every path
    with _stop_request() as stop:
        # one sweep per output folder: its lock is that of the combined file, held to the end;
        # a case file another process is writing refuses the sweep at once (each case's run()
        # then takes the lock of its own file on the worker)
        with output_lock(sweep.combined_path):
            for case in sweep.cases:
                holder = lock_holder(case.path)
                if holder is not None:
                    raise OutputLocked(
                        f"sweep case {case.name}: {str(case.path)!r} is being written by "
                        f"another process: {describe_holder(holder)}; wait for it to "
                        "end, or choose another output_dir",
                        path=case.path,
                        holder=holder,
                    )
            return _run_cases(
                sweep,
                stop,
                scheduler=scheduler,
                n_workers=n_workers,
                progress=progress,
                stream=stream,
                progress_interval=float(progress_interval),
                dashboard_address=dashboard_address or DEFAULT_DASHBOARD_ADDRESS,
            )


def check_dashboard_address(address: Any, key: str = "dashboard_address") -> str:
    """``address`` when it is ``host:port`` (host may be empty: every interface; port 0..65535,
    0 a free one), else ConfigError naming ``key``."""
    host, sep, port = str(address).rpartition(":") if isinstance(address, str) else ("", "", "")
    if not sep or not port.isdigit() or int(port) > 65535 or any(c.isspace() for c in host):
        raise ConfigError(
            key,
            f"= {_shown(address)} is not host:port, e.g. 127.0.0.1:8787 (this "
            "machine only) or :8787 (every interface)",
        )
    return address


def _interrupted(stop: "_Stop", unfinished: list[str]) -> KeyboardInterrupt:
    exc = KeyboardInterrupt(
        f"sweep interrupted with {len(unfinished)} case(s) unfinished ({', '.join(unfinished)}); "
        "finished cases are kept and a running case keeps its last checkpoint: run the "
        "same command again to continue"
    )
    exc.signal = stop.signum if stop.signum is not None else signal.SIGINT  # type: ignore[attr-defined]
    return exc


def _run_cases(
    sweep: Sweep,
    stop: "_Stop",
    *,
    scheduler: str | None,
    n_workers: int | None,
    progress: bool,
    stream: Any = None,
    progress_interval: float = 5.0,
    dashboard_address: str = DEFAULT_DASHBOARD_ADDRESS,
) -> tuple[Any, dict[str, str]]:
    """The body of :func:`run_sweep`, under the sweep's lock, ``stop`` set by SIGINT or SIGTERM."""
    global _CLIENT_PID
    _CLIENT_PID = os.getpid()
    _quiet_dask()

    outcome: dict[str, str] = {}
    pending = []
    for case in sweep.cases:
        status = case_status(case)
        if status == "done":
            outcome[case.name] = "done earlier"
        else:
            pending.append(case)
    if stop.is_set():
        raise _interrupted(stop, [c.name for c in pending])
    if pending:
        cluster = client = reporter = None
        interrupted = False
        try:
            if scheduler is None:
                cluster = _local_cluster(
                    n_workers or min(2, len(pending)), dashboard_address=dashboard_address
                )
                client = distributed.Client(cluster)
            else:
                try:
                    client = distributed.Client(scheduler, timeout=30)
                except (OSError, TimeoutError) as exc:
                    raise SpheredensError(
                        f"cannot reach the Dask scheduler at {scheduler!r}: {exc}"
                    ) from None
            if (
                progress and not stop.is_set()
            ):  # before the first task: its start event is not missed
                reporter = SweepReporter(len(pending), stream=stream, interval=progress_interval)
                reporter.attach(client, done_earlier=len(sweep.cases) - len(pending))
            futures = (
                {}
                if stop.is_set()
                else {
                    client.submit(
                        _run_case,
                        c.config.to_dict(),
                        str(c.config.base_dir),
                        c.name,
                        reporter.topic if reporter else None,
                        progress_interval,
                        pure=False,
                        key=f"spheredens-{c.name}-{id(c)}",
                    ): c
                    for c in pending
                }
            )
            remaining, k = list(futures), 0
            while remaining and not stop.is_set():  # polled: a signal never lands inside Dask
                finished = [f for f in remaining if f.done()]
                if not finished:
                    stop.wait(0.2)
                    continue
                for fut in finished:
                    remaining.remove(fut)
                    case, k = futures[fut], k + 1
                    try:
                        result = fut.result()
                    except Exception as exc:  # the worker died: the case stays partial or todo
                        result = {"ok": False, "error": f"worker lost: {exc}"}
                    outcome[case.name] = "ran" if result["ok"] else f"failed: {result['error']}"
                    if reporter is not None:
                        reporter.finished(k, case.name, outcome[case.name], result.get("wall"))
            interrupted = stop.is_set()
        except KeyboardInterrupt:  # a Ctrl-C outside the main thread's handler (not installed)
            interrupted = True
        finally:
            if reporter is not None:
                reporter.detach(client)
                reporter.close()
            _shut_down(client, cluster)
            # a case whose worker was terminated mid-run leaves its lock's record: the worker is
            # gone, the record is removed (its checkpoint stays for the next invocation)
            for case in pending:
                remove_stale_record(case.path, wait=5.0 if cluster is not None else 0.0)
        if interrupted:
            raise _interrupted(stop, [c.name for c in pending if c.name not in outcome])
    combined = combine(sweep, partial=True)
    failed = [c.name for c in sweep.cases if outcome.get(c.name, "").startswith("failed")]
    if combined is not None:
        if combined.attrs.get("failed_cases"):
            missing = combined.attrs["failed_cases"].split(", ")
            logger.warning(
                "%s holds %d of %d case(s): the failed case(s) %s have NaN values there "
                "(attribute failed_cases); their files are kept, and the same command "
                "runs them again",
                sweep.combined_path,
                len(sweep.cases) - len(missing),
                len(sweep.cases),
                ", ".join(missing),
            )
        write_dataset(combined, sweep.combined_path)
    elif failed:
        logger.warning("no case finished: %s not written", sweep.combined_path)
    return combined, outcome


def outcome_summary(outcome: Mapping[str, str]) -> dict[str, Any]:
    """Count the outcome of :func:`run_sweep` (case name -> ``"ran"``, ``"done earlier"`` or
    ``"failed: <why>"``).

    Returns
    -------
    dict
        ``ran`` and ``done_earlier``: how many cases ran now and were finished before;
        ``failed``: case name -> why, for the cases that failed.
    """
    failed = {k: v for k, v in outcome.items() if v.startswith("failed")}
    done = sum(1 for v in outcome.values() if v == "done earlier")
    return {"ran": len(outcome) - len(failed) - done, "done_earlier": done, "failed": failed}


class _Stop(threading.Event):
    """A stop request: set by SIGINT or SIGTERM, ``signum`` the signal."""

    signum: int | None = None


@contextlib.contextmanager
def _stop_request() -> Iterator[_Stop]:
    """While active, SIGINT and SIGTERM set the event instead of raising: the sweep polls it
    and shuts the cluster down from a known place."""
    event = _Stop()

    def handler(signum: int, frame: Any) -> None:
        event.signum = signum
        event.set()

    with signal_handler(handler, (signal.SIGINT, signal.SIGTERM)):
        yield event


def _local_cluster(n_workers: int, dashboard_address: str = DEFAULT_DASHBOARD_ADDRESS) -> Any:
    """A local Dask cluster of ``n_workers`` processes, one thread each, its scheduler and
    workers listening on 127.0.0.1 only, its dashboard at ``dashboard_address`` (default
    127.0.0.1, a free port), the workers without dashboards. Its processes ignore Ctrl-C (they
    inherit SIGINT ignored): the sweep process handles it and shuts them down."""
    with signal_handler(signal.SIG_IGN):
        return distributed.LocalCluster(
            n_workers=n_workers,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            protocol="tcp://",
            dashboard_address=dashboard_address,
            worker_dashboard_address=None,
        )


def _shut_down(client: Any, cluster: Any) -> None:
    """Close the client and the local cluster (its workers are terminated: a case they were
    running keeps the checkpoint its file last got), ignoring further Ctrl-C meanwhile."""
    with signal_handler(signal.SIG_IGN):
        for closer in (client, cluster):
            if closer is None:
                continue
            try:
                closer.close(timeout=10)
            except Exception as exc:  # shutting down after an interruption: report, keep going
                logger.warning("closing %s: %s", type(closer).__name__, exc)


def _quiet_dask() -> None:
    """Dask logs every connection at INFO level, on this process and on the workers it starts:
    keep warnings and errors only (set before the workers are spawned, they inherit it)."""
    os.environ.setdefault("DASK_LOGGING__DISTRIBUTED", "error")  # before dask is imported
    dask.config.set({"logging.distributed": "error"})
    for name in list(logging.root.manager.loggerDict):
        if name == "distributed" or name.startswith("distributed."):
            logging.getLogger(name).setLevel(logging.ERROR)


def _coordinate(key: str, levels: tuple[Any, ...]) -> Any:
    """The coordinate of a varied key: its values when they are all numbers, all strings or all
    booleans; else a label per value (:func:`_label`, the value as written)."""
    kinds = {
        bool
        if isinstance(v, bool)
        else (int, float)
        if isinstance(v, (int, float))
        else str
        if isinstance(v, str)
        else object
        for v in levels
    }
    if len(kinds) == 1 and object not in kinds:
        return np.array(levels)
    return np.array([_label(v) for v in levels])


def combine(sweep: Sweep, *, partial: bool = False) -> Any:
    """The combined dataset of the cases: diagnostics with one dimension per varied key,
    ``rho`` too when every case has the same grid.

    A key whose values are not all numbers, strings or booleans (a matrix, a list) has a label
    per value as its coordinate (the value as written) and, when the values are numbers of one
    shape, the values in ``<dim>_value`` (``V_value``: dims ``V``, ``row``, ``col``); a matrix
    Q, K or V that is the same in every case is stored as ``Q`` (row, col), as in run files.

    Parameters
    ----------
    sweep : Sweep
    partial : bool
        False: None unless every case has a complete file. True: from the cases that finished
        (None when none did); the values of the others are NaN and the attribute
        ``failed_cases`` names them.
    """
    datasets, missing = {}, []
    for case in sweep.cases:
        if case_status(case) == "done":
            datasets[case.name] = open_run(case.path)
        elif partial:
            missing.append(case.name)
        else:
            return None
    if not datasets:
        return None
    first = next(iter(datasets.values()))
    times = first["time"].values
    for name, ds in datasets.items():
        if not np.array_equal(ds["time"].values, times):
            raise SpheredensError(
                f"case {name} has other snapshot times; the combined dataset "
                "needs the same times in every case"
            )
    shape = tuple(len(lv) for lv in sweep.levels)
    dims = tuple(_dim_name(k) for k in sweep.keys)
    normal_levels = [[_normal(v) for v in lv] for lv in sweep.levels]
    where = {
        case.name: tuple(nl.index(_normal(v)) for nl, (_, v) in zip(normal_levels, case.values))
        for case in sweep.cases
    }
    space = [d for d in first["rho"].dims if d != "time"]
    same_grid = (
        all(ds["rho"].shape == first["rho"].shape for ds in datasets.values())
        and all(
            all(np.array_equal(ds[c].values, first[c].values) for c in space)
            for ds in datasets.values()
        )
        and not set(dims) & (set(space) | set(first.coords))
    )
    names = [v for v in COMBINED_VARIABLES if v in first] + (["rho"] if same_grid else [])
    data = {}
    for var in names:
        dtype = np.result_type(first[var].dtype, np.float64) if missing else first[var].dtype
        arr = np.full(shape + first[var].shape, np.nan if dtype.kind in "fc" else 0, dtype=dtype)
        for name, ds in datasets.items():
            arr[where[name]] = ds[var].values
        data[var] = (dims + first[var].dims, arr, dict(first[var].attrs))
    coords = {d: (d, _coordinate(k, lv)) for d, k, lv in zip(dims, sweep.keys, sweep.levels)}
    coords["time"] = ("time", times, dict(first["time"].attrs))
    if same_grid:
        for c in space:
            if c in first.coords:
                coords[c] = (c, first[c].values, dict(first[c].attrs))
        if "weight" in first:
            data["weight"] = (
                first["weight"].dims,
                first["weight"].values,
                dict(first["weight"].attrs),
            )
    labelled = [
        (d, k, lv)
        for d, k, lv in zip(dims, sweep.keys, sweep.levels)
        if coords[d][1].dtype.kind == "U" and not all(isinstance(v, str) for v in lv)
    ]
    for dim, key, levels in labelled:  # the values themselves, along the key's dimension
        values = _value_array(levels)
        if values is not None:
            label = f"value of {key}"
            data[f"{dim}_value"] = (
                (dim,) + _value_dims(key, values.ndim - 1),
                values,
                {
                    "long_name": label if len(label) <= 40 else f"value of {dim}",
                    "units": "1",
                    "comment": f"the value of {key} in each case "
                    f"(the coordinate {dim} labels it as written in the sweep file)",
                },
            )
    for name in ("Q", "K", "V"):  # the matrices, when no case changes them
        if name not in dims and all(
            np.array_equal(ds[name].values, first[name].values) for ds in datasets.values()
        ):
            data[name] = (("row", "col"), first[name].values, dict(first[name].attrs))
    attrs = {
        "Conventions": "CF-1.10",
        "spheredens_schema": "spheredens-sweep-1",
        "varied_keys": ", ".join(sweep.keys),
        "domain": first.attrs["domain"],
        "model": first.attrs["model"],
        "cases": "\n".join(str(c.path) for c in sweep.cases),
        "rho_included": int(same_grid),
    }
    if missing:
        attrs["failed_cases"] = ", ".join(missing)
    combined = combined_grid(first, xr.Dataset(data, coords=coords, attrs=attrs), sweep.keys)
    for dim, key, _ in labelled:
        combined[dim].attrs["comment"] = (
            f"value of {key} in each case, as written in the sweep file"
            + (f" (the values: {dim}_value)" if f"{dim}_value" in combined else "")
        )
    return combined
