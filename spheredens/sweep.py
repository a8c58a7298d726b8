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
the sweep: the workers are shut down, a running case keeps the checkpoint its file last got, and
the same command continues. The combined dataset
(``combined.nc``) holds the diagnostics of every case with one dimension per varied key (named
by its last component: ``beta``, ``n``, ...), and ``rho`` when all cases share one grid.
"""
from __future__ import annotations

import contextlib
import itertools
import logging
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping

import numpy as np

from ._lazy import dask, distributed, xarray as xr
from ._validate import as_str, as_table, check_keys
from .config import RunConfig, config_from_dict, load_config, read_toml
from .exceptions import ConfigError, OutputLocked, SpheredensError
from .io import check_output_location, open_run, write_dataset
from .locking import describe_holder, lock_holder, output_lock
from .runner import run, same_run
from .schema import combined_grid
from .simulate import progress_listener, signal_handler

logger = logging.getLogger(__name__)

COMBINED_VARIABLES = ("mass", "min_rho", "energy", "w2_projection", "w2_terminal")


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


def load_sweep(path: str | Path) -> Sweep:
    """Read and validate a sweep file; every case configuration is validated before any work."""
    path = Path(path)
    return sweep_from_dict(read_toml(path, "sweep file"), base_dir=path.resolve().parent)


def sweep_from_dict(data: Mapping[str, Any], *, base_dir: str | Path = ".") -> Sweep:
    base_dir = Path(base_dir)
    check_keys(data, ["base", "output_dir", "combined", "vary"], "sweep")
    if "base" not in data:
        raise ConfigError("sweep.base", "is required: the base configuration file, or a table")
    if isinstance(data["base"], str):
        base_path = Path(data["base"]) if Path(data["base"]).is_absolute() else base_dir / data["base"]
        load_config(base_path)  # validated as it is, then varied from its own tables
        base = read_toml(base_path, "base configuration")
        base_cfg_dir = base_path.resolve().parent
    else:
        base = as_table(data["base"], "sweep.base")
        base_cfg_dir = base_dir
    output_dir = base_dir / as_str(data.get("output_dir", "cases"), "sweep.output_dir")
    combined = output_dir / as_str(data.get("combined", "combined.nc"), "sweep.combined")
    if combined.suffix != ".nc":
        raise ConfigError("sweep.combined", f"= {combined.name!r} must end in '.nc' (a netCDF file)")
    vary = as_table(data.get("vary", {}), "sweep.vary")
    if not vary:
        raise ConfigError("sweep.vary", "give at least one key to vary, e.g. \"model.beta\" = [10.0, 30.0]")
    keys, levels = [], []
    for key, values in vary.items():
        if "." not in key:
            raise ConfigError(f"sweep.vary.{key}", "use a dotted key 'section.key', e.g. \"model.beta\"")
        if not isinstance(values, list) or not values:
            raise ConfigError(f"sweep.vary.{key}", f"must be a non-empty list of values, got {values!r}")
        if len({repr(v) for v in values}) != len(values):
            raise ConfigError(f"sweep.vary.{key}", "has repeated values")
        keys.append(key)
        levels.append(tuple(values))
    if len({_dim_name(k) for k in keys}) != len(keys):
        raise ConfigError("sweep.vary", "two varied keys end in the same name; the combined dataset "
                          "names its dimensions after the last component of each key")
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
        cfg.check_resolution(key=f"sweep case {name}", warn=False, fix="refine the grid or set "
                             "discretization.allow_underresolved = true in the base")
        cases.append(SweepCase(name, values, cfg))
    owner: dict[Path, Any] = {combined.resolve(): "the combined file"}
    for case in cases:  # two cases (or a case and the combined file) on one file: refused now
        other = owner.setdefault(case.path, case)
        if other is not case:
            other = other if isinstance(other, str) else f"case {other.name} ({dict(other.values)})"
            raise ConfigError(f"sweep case {case.name}", f"writes {str(case.path)!r}, as {other} "
                              "does (their names coincide once made file names); vary other values "
                              "or rename the combined file")
    return Sweep(tuple(cases), tuple(keys), tuple(levels), output_dir, combined)


def case_status(case: SweepCase) -> str:
    """``"done"`` (a complete file of this configuration), ``"partial"`` or ``"todo"``."""
    if not case.path.exists():
        return "todo"
    try:
        ds = open_run(case.path)
    except SpheredensError:
        return "partial"
    if not same_run(ds.attrs.get("config", ""), case.config):
        raise ConfigError(f"sweep case {case.name}", f"{str(case.path)!r} holds a different run; "
                          "move it away or choose another output_dir")
    return "done" if ds.attrs.get("run_status") == "complete" else "partial"


def _run_case(config_dict: dict, base_dir: str, name: str = "", topic: str | None = None,
              interval: float = 5.0) -> dict:
    """Task body (runs on a worker): run or resume one case; never raises. With a ``topic``
    the run's progress goes to the client as Dask events (:func:`_publisher`); ``wall`` is the
    task's wall time in seconds."""
    clock = time.perf_counter()
    try:
        cfg = config_from_dict(config_dict, base_dir=base_dir)
        with progress_listener(_publisher(topic, name), interval=interval) if topic else contextlib.nullcontext():
            ds = run(cfg, progress=False, resume=True)
        return {"ok": True, "n_steps": int(ds.attrs.get("n_steps", 0)), "wall": time.perf_counter() - clock}
    except SpheredensError as exc:
        return {"ok": False, "error": str(exc), "wall": time.perf_counter() - clock}
    except Exception as exc:  # a bug: report it with its traceback's last line, keep going
        return {"ok": False, "error": f"{type(exc).__name__}: {exc} "
                                      f"({traceback.format_exc().strip().splitlines()[-2].strip()})",
                "wall": time.perf_counter() - clock}


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
        self.line(f"sweep: Dask dashboard at {link}" if why is None else f"sweep: no Dask dashboard ({why})")
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
            self.line(f"  {case}: t = {msg['t']:.4g} / {msg['t_end']:.4g} "
                      f"({100.0 * (msg['t'] / msg['t_end'] if msg['t_end'] > 0 else 1.0):.0f}%), "
                      f"{_duration(msg['wall'])}"
                      + (f", ~{_duration(msg['left'])} left" if msg["left"] == msg["left"] else "")
                      + self._left())
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
        self.line(f"sweep: {len(self._done)} of {self.n_cases} case(s) ended in "
                  f"{_duration(time.monotonic() - self._clock)}")

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


def check_sweep_output(sweep: Sweep, *, mkdir: bool = False, mkdir_hint: str = "mkdir=True") -> None:
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
    check_output_location(sweep.combined_path, mkdir=mkdir or own, key="sweep.output_dir",
                          mkdir_hint=mkdir_hint)


def run_sweep(sweep: Sweep, *, scheduler: str | None = None, n_workers: int | None = None,
              progress: bool = True, mkdir: bool = False, stream: Any = None,
              progress_interval: float = 5.0) -> tuple[Any, dict[str, str]]:
    """Run the cases not done yet on Dask; return the combined dataset and each case's outcome.

    Parameters
    ----------
    sweep : Sweep
    scheduler : str, optional
        Address of a running Dask scheduler; default: a local cluster of ``n_workers``
        processes (default min(2, cases to run)), one thread each, closed afterwards.
    n_workers : int, optional
        Worker processes of the local cluster (>= 1).
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
    """
    check_sweep_output(sweep, mkdir=mkdir)
    if not (isinstance(progress_interval, (int, float)) and progress_interval > 0):
        raise ConfigError("progress_interval", f"must be a number of seconds > 0, got {progress_interval!r}")
    if n_workers is not None and not (isinstance(n_workers, int) and n_workers >= 1):
        raise ConfigError("n_workers", f"must be an integer >= 1, got {n_workers!r}")
    # one sweep per output folder: its lock is that of the combined file, held to the end; a
    # case file another process is writing refuses the sweep at once (each case's run() then
    # takes the lock of its own file on the worker)
    with output_lock(sweep.combined_path):
        for case in sweep.cases:
            holder = lock_holder(case.path)
            if holder is not None:
                raise OutputLocked(f"sweep case {case.name}: {str(case.path)!r} is being written by "
                                   f"another process: {describe_holder(holder)}; wait for it to "
                                   "end, or choose another output_dir", path=case.path, holder=holder)
        return _run_cases(sweep, scheduler=scheduler, n_workers=n_workers, progress=progress,
                          stream=stream, progress_interval=float(progress_interval))


def _run_cases(sweep: Sweep, *, scheduler: str | None, n_workers: int | None,
               progress: bool, stream: Any = None,
               progress_interval: float = 5.0) -> tuple[Any, dict[str, str]]:
    """The body of :func:`run_sweep`, under the sweep's lock."""
    _quiet_dask()

    outcome: dict[str, str] = {}
    pending = []
    for case in sweep.cases:
        status = case_status(case)
        if status == "done":
            outcome[case.name] = "done earlier"
        else:
            pending.append(case)
    if pending:
        cluster = None
        if scheduler is None:
            cluster = _local_cluster(n_workers or min(2, len(pending)))
            client = distributed.Client(cluster)
        else:
            try:
                client = distributed.Client(scheduler, timeout=30)
            except (OSError, TimeoutError) as exc:
                raise SpheredensError(f"cannot reach the Dask scheduler at {scheduler!r}: {exc}") from None
        interrupted = False
        reporter = SweepReporter(len(pending), stream=stream, interval=progress_interval) if progress else None
        try:
            if reporter is not None:  # before the first task: its start event is not missed
                reporter.attach(client, done_earlier=len(sweep.cases) - len(pending))
            with _stop_request() as stop:
                futures = {client.submit(_run_case, c.config.to_dict(), str(c.config.base_dir), c.name,
                                         reporter.topic if reporter else None, progress_interval,
                                         pure=False, key=f"spheredens-{c.name}-{id(c)}"): c
                           for c in pending}
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
        if interrupted:
            unfinished = [c.name for c in pending if c.name not in outcome]
            raise KeyboardInterrupt(
                f"sweep interrupted with {len(unfinished)} case(s) unfinished ({', '.join(unfinished)}); "
                "finished cases are kept and a running case keeps its last checkpoint: run the "
                "same command again to continue")
    combined = combine(sweep)
    if combined is not None:

        write_dataset(combined, sweep.combined_path)
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


@contextlib.contextmanager
def _stop_request() -> Iterator[threading.Event]:
    """While active, SIGINT and SIGTERM set the event instead of raising: the sweep loop polls
    it and shuts the cluster down from a known place."""
    event = threading.Event()
    with signal_handler(lambda signum, frame: event.set(), (signal.SIGINT, signal.SIGTERM)):
        yield event


def _local_cluster(n_workers: int) -> Any:
    """A local Dask cluster of ``n_workers`` processes, one thread each. Its processes ignore
    Ctrl-C (they inherit SIGINT ignored): the sweep process handles it and shuts them down."""

    with signal_handler(signal.SIG_IGN):
        return distributed.LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                            dashboard_address=":0")


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


def combine(sweep: Sweep) -> Any:
    """The combined dataset of the finished cases (None when a case is missing): diagnostics
    with one dimension per varied key, ``rho`` too when every case has the same grid."""


    datasets = {}
    for case in sweep.cases:
        if case_status(case) != "done":
            return None
        datasets[case.name] = open_run(case.path)
    first = next(iter(datasets.values()))
    times = first["time"].values
    for name, ds in datasets.items():
        if not np.array_equal(ds["time"].values, times):
            raise SpheredensError(f"case {name} has other snapshot times; the combined dataset "
                                  "needs the same times in every case")
    shape = tuple(len(lv) for lv in sweep.levels)
    dims = tuple(_dim_name(k) for k in sweep.keys)
    same_grid = all(ds["rho"].shape == first["rho"].shape for ds in datasets.values()) and all(
        all(np.array_equal(ds[c].values, first[c].values) for c in first["rho"].dims if c != "time")
        for ds in datasets.values())
    names = [v for v in COMBINED_VARIABLES if v in first] + (["rho"] if same_grid else [])
    data = {}
    for var in names:
        arr = np.empty(shape + first[var].shape, dtype=first[var].dtype)
        for case in sweep.cases:
            idx = tuple(lv.index(v) for lv, (_, v) in zip(sweep.levels, case.values))
            arr[idx] = datasets[case.name][var].values
        data[var] = (dims + first[var].dims, arr, dict(first[var].attrs))
    coords = {d: (d, np.array(lv)) for d, lv in zip(dims, sweep.levels)}
    coords["time"] = ("time", times, dict(first["time"].attrs))
    if same_grid:
        for c in first["rho"].dims:
            if c != "time" and c in first.coords:
                coords[c] = (c, first[c].values, dict(first[c].attrs))
        if "weight" in first:
            data["weight"] = (first["weight"].dims, first["weight"].values, dict(first["weight"].attrs))
    for name in ("Q", "K", "V"):  # the matrices, when no case changes them
        if all(np.array_equal(ds[name].values, first[name].values) for ds in datasets.values()):
            data[name] = (("row", "col"), first[name].values, dict(first[name].attrs))
    attrs = {"Conventions": "CF-1.10", "spheredens_schema": "spheredens-sweep-1",
             "varied_keys": ", ".join(sweep.keys), "domain": first.attrs["domain"],
             "model": first.attrs["model"], "cases": "\n".join(str(c.path) for c in sweep.cases),
             "rho_included": int(same_grid)}
    return combined_grid(first, xr.Dataset(data, coords=coords, attrs=attrs), sweep.keys)
