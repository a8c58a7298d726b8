"""What runs on a Dask worker: one case of a sweep (:func:`_run_case`), its messages and progress.

A case's warnings and log records print as one line each naming the case
(``spheredens: warning: sweep case NAME: ...``), and its progress is published as Dask events
for the client's :class:`~spheredens.sweep._report.SweepReporter`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
import time
import traceback
import warnings
from typing import Any

from .._lazy import distributed
from .._oneline import record_line, warning_line
from ..config import config_from_dict
from ..exceptions import SpheredensError, SpheredensWarning
from ..runner import run
from ..simulate import progress_listener

#: the case each thread of a worker runs (the warnings it prints name it)
_RUNNING = threading.local()
#: the process that runs the sweep (its messages are formatted by the command line)
_CLIENT_PID: int | None = None
_WORKER_SETUP = threading.Lock()
_worker_ready = False


def mark_client() -> None:
    """Record this process as the one that runs the sweep: its own warnings keep the command
    line's format (:func:`_one_line_messages_on_worker` does nothing here)."""
    global _CLIENT_PID
    _CLIENT_PID = os.getpid()


def _case_prefix() -> str:
    name = getattr(_RUNNING, "case", "")
    return f"sweep case {name}: " if name else ""


class _WorkerLines(logging.Handler):
    """On a Dask worker, where no command line formats them: spheredens log records as one line
    each on the worker's stderr, ``spheredens: warning: sweep case NAME: ...``."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(record_line(record, _case_prefix()) + "\n")
            sys.stderr.flush()
        except Exception:
            self.handleError(record)


def _worker_warning(message: Warning | str, category: type[Warning], *where: Any) -> str:
    """``warnings.formatwarning`` on a worker: one line ``spheredens: warning: sweep case NAME:
    ...``, as the command line prints its own warnings (others named by their category); where
    it was raised (file, line) is not shown."""
    return warning_line(message, category, _case_prefix())


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
