"""A sweep on Dask: :func:`run_sweep` runs the cases not done yet and writes the combined file.

The cases run as tasks (:func:`~spheredens.sweep._worker._run_case`) on a local cluster or an
existing scheduler, under the sweep's lock; SIGINT and SIGTERM set a stop request that the
loop polls, so the cluster is shut down from a known place.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
from typing import Any, Iterator, Mapping

from .._lazy import dask, distributed
from ..exceptions import ConfigError, OutputLocked, SpheredensError
from ..io import write_dataset
from ..locking import describe_holder, lock_holder, output_lock, remove_stale_record
from ..simulate import signal_handler
from ._combine import combine
from ._define import (
    DEFAULT_DASHBOARD_ADDRESS,
    Sweep,
    case_status,
    check_dashboard_address,
    check_sweep_output,
)
from ._report import SweepReporter
from ._worker import _run_case, mark_client

logger = logging.getLogger("spheredens.sweep")


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
    mark_client()
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


#: the environment of the local cluster's worker processes, set by their nannies before they
#: start (Dask's ``distributed.nanny.pre-spawn-environ``, replaced): one BLAS/OpenMP thread (and
#: one for spheredens' own particle sums, ``SPHEREDENS_THREADS``) per
#: worker (a worker runs one case on one core), and *not* Dask's default
#: ``MALLOC_TRIM_THRESHOLD_ = 65536`` (None: unset). Setting that variable turns off glibc's
#: dynamic mmap threshold, so every numpy array above 128 KiB is a fresh mmap whose pages
#: fault in zeroed: a circle case (fv, n = 256, direct quadrature) took 4.7 times the page
#: faults and 3.5 s of system time instead of 0.9 s per 5 s of computation
#: (benchmarks/bench_sweep.py). A value the user's environment gives still applies.
WORKER_ENVIRON = {
    "SPHEREDENS_THREADS": 1,
    "OMP_NUM_THREADS": 1,
    "OPENBLAS_NUM_THREADS": 1,
    "MKL_NUM_THREADS": 1,
    "VECLIB_MAXIMUM_THREADS": 1,
    "NUMEXPR_NUM_THREADS": 1,
    "MALLOC_TRIM_THRESHOLD_": None,
}
#: the Dask configuration of the local cluster: the workers' environment; no statistical
#: profiler on the workers (it samples the running case's stack every 10 ms, taking the GIL:
#: 0.5-1 s of CPU per 10 s case, and its report on the dashboard is not used by sweeps); and
#: slower housekeeping (the nannies' memory checks every 1 s instead of 100 ms, the system
#: monitor every 2 s instead of 0.5 s, the event loops' tick every 0.5 s instead of 20 ms): a
#: cluster of one idle worker then takes 0.3 s of CPU per 20 s instead of 1.5 s, time the cases
#: of a loaded machine lose (benchmarks/README.md, bench_sweep.py)
LOCAL_CLUSTER_CONFIG = {
    "distributed.nanny.pre-spawn-environ": WORKER_ENVIRON,
    "distributed.worker.profile.enabled": False,
    "distributed.worker.memory.monitor-interval": "1s",
    "distributed.admin.system-monitor.interval": "2s",
    "distributed.admin.tick.interval": "500ms",
}


def _local_cluster(n_workers: int, dashboard_address: str = DEFAULT_DASHBOARD_ADDRESS) -> Any:
    """A local Dask cluster of ``n_workers`` processes, one thread each, its scheduler and
    workers listening on 127.0.0.1 only, its dashboard at ``dashboard_address`` (default
    127.0.0.1, a free port), the workers without dashboards, with the environment
    :data:`WORKER_ENVIRON` and without the workers' profiler (:data:`LOCAL_CLUSTER_CONFIG`).
    Its processes ignore Ctrl-C (they inherit SIGINT ignored): the sweep process handles it and
    shuts them down."""
    # imported before the configuration is set: distributed adds its defaults to Dask's
    # configuration on import, and leaving dask.config.set would drop them again
    local_cluster = distributed.LocalCluster
    with signal_handler(signal.SIG_IGN), dask.config.set(LOCAL_CLUSTER_CONFIG):
        return local_cluster(
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
