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
import threading
import traceback
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
from .simulate import signal_handler

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


def _run_case(config_dict: dict, base_dir: str) -> dict:
    """Task body (runs on a worker): run or resume one case; never raises."""
    try:
        cfg = config_from_dict(config_dict, base_dir=base_dir)
        ds = run(cfg, progress=False, resume=True)
        return {"ok": True, "n_steps": int(ds.attrs.get("n_steps", 0))}
    except SpheredensError as exc:
        return {"ok": False, "error": str(exc)}
    except Exception as exc:  # a bug: report it with its traceback's last line, keep going
        return {"ok": False, "error": f"{type(exc).__name__}: {exc} "
                                      f"({traceback.format_exc().strip().splitlines()[-2].strip()})"}


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
              progress: bool = True, mkdir: bool = False) -> tuple[Any, dict[str, str]]:
    """Run the cases not done yet on Dask; return the combined dataset and each case's outcome.

    Parameters
    ----------
    sweep : Sweep
    scheduler : str, optional
        Address of a running Dask scheduler; default: a local cluster of ``n_workers``
        processes (default min(2, cases to run)), one thread each, closed afterwards.
    n_workers : int, optional
        Worker processes of the local cluster (>= 1).
    mkdir : bool
        Create the missing parents of ``output_dir`` (:func:`check_sweep_output`, checked
        before any work; ``output_dir`` itself is always created).
    """
    check_sweep_output(sweep, mkdir=mkdir)
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
        return _run_cases(sweep, scheduler=scheduler, n_workers=n_workers, progress=progress)


def _run_cases(sweep: Sweep, *, scheduler: str | None, n_workers: int | None,
               progress: bool) -> tuple[Any, dict[str, str]]:
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
        try:
            with _stop_request() as stop:
                futures = {client.submit(_run_case, c.config.to_dict(), str(c.config.base_dir),
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
                        if progress:
                            print(f"  [{k}/{len(pending)}] {case.name}: {outcome[case.name]}", flush=True)
                interrupted = stop.is_set()
        except KeyboardInterrupt:  # a Ctrl-C outside the main thread's handler (not installed)
            interrupted = True
        finally:
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
