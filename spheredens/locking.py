"""Locks on output files: one writer per path, the holder named, stale locks taken over.

A run, a particle run, a comparison or a sweep takes the lock of its output file before it
computes anything and keeps it until it ends, on every exit path (normal end, exception,
Ctrl-C or SIGTERM). Two files sit beside the output ``out.nc``:

* ``.out.nc.flock``: the lock itself, an operating-system lock (``flock``) taken with the
  `filelock <https://py-filelock.readthedocs.io>`_ library. The kernel releases it when the
  holder ends, however it ends (also SIGKILL), so a lock can never outlive its process; the
  empty file stays, as filelock leaves it.
* ``out.nc.lock``: who holds it, while it is held: host, pid, start time and command (JSON).
  It is removed on release; it survives only a holder killed outright (SIGKILL, power loss).
  A sweep removes the records its own workers leave when it terminates them (an interrupted
  sweep leaves no ``*.lock`` file, :func:`remove_stale_record`).

A second writer on a locked path refuses at once with :class:`~spheredens.exceptions.OutputLocked`
naming the holder. A writer that gets the lock and finds the record of a holder no longer
running (its pid gone from this host, or the lock free on a shared file system) takes it over
with a one-line notice, and removes the temporary file the dead holder was writing, if any.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import sys
import time as _time
from pathlib import Path
from typing import Any, Iterator

import filelock

from .exceptions import OutputError, OutputLocked

__all__ = [
    "OutputLock",
    "output_lock",
    "lock_holder",
    "describe_holder",
    "lock_files",
    "remove_stale_record",
]

logger = logging.getLogger(__name__)

#: how long a contender waits for the record of a lock just taken (written right after it)
RECORD_WAIT_SECONDS = 2.0


def lock_files(path: str | Path) -> tuple[Path, Path]:
    """The lock file and the holder record of the output ``path``: ``.NAME.flock`` and
    ``NAME.lock`` in the same folder."""
    path = Path(path)
    return path.with_name(f".{path.name}.flock"), path.with_name(f"{path.name}.lock")


def _process_start(pid: int) -> str | None:
    """When process ``pid`` started, in clock ticks since boot (Linux), to tell a reused pid
    from the holder itself; None where /proc is not available."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            return fh.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _alive(pid: int) -> bool:
    """Whether a process ``pid`` runs on this host (a zombie counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    except OSError:
        return False
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def _holder_record() -> dict[str, Any]:
    command = (
        " ".join([Path(sys.argv[0]).name if sys.argv and sys.argv[0] else "python", *sys.argv[1:]])
        if sys.argv
        else "python"
    )
    return {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "started": _time.strftime("%Y-%m-%d %H:%M:%S UTC", _time.gmtime()),
        "process_start": _process_start(os.getpid()),
        "command": command if len(command) <= 120 else command[:117] + "...",
    }


def _read_record(record: Path) -> dict[str, Any] | None:
    """The holder record at ``record``: a dict, ``{}`` when unreadable, None when absent."""
    try:
        data = json.loads(record.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _wait_for_record(record: Path, seconds: float = RECORD_WAIT_SECONDS) -> dict[str, Any] | None:
    """The record of a lock just found held: its holder writes it right after taking the lock,
    so a contender arriving in between (no record yet, or the stale one of a killed holder it
    is taking over) waits for it a moment."""
    deadline = _time.monotonic() + seconds
    while True:
        holder = _read_record(record)
        settled = holder and (holder.get("host") != socket.gethostname() or _running_here(holder))
        if settled or _time.monotonic() > deadline:
            return holder
        _time.sleep(0.02)


def describe_holder(holder: dict[str, Any] | None) -> str:
    """``pid 1234 on host h, started 2026-01-01 10:00:00 UTC, command: spheredens run a.toml``."""
    if not holder:
        return "its holder could not be identified (no readable record)"
    text = (
        f"pid {holder.get('pid', '?')} on host {holder.get('host', '?')}, "
        f"started {holder.get('started', '?')}"
    )
    return text + (f", command: {holder['command']}" if holder.get("command") else "")


def _running_here(holder: dict[str, Any]) -> bool:
    """Whether the process of ``holder`` still runs on this host (same pid, same start)."""
    if holder.get("host") != socket.gethostname() or not isinstance(holder.get("pid"), int):
        return False
    pid = holder["pid"]
    if pid != os.getpid() and not _alive(pid):
        return False
    started = holder.get("process_start")
    return started is None or started == _process_start(pid)


class OutputLock:
    """The lock of one output file (see the module documentation).

    Parameters
    ----------
    path : path
        The output file (``out.nc``); the lock files sit beside it (:func:`lock_files`).

    Use it as a context manager, or :func:`output_lock`. :meth:`acquire` never waits: a held
    lock raises :class:`~spheredens.exceptions.OutputLocked` at once.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.lock_path, self.record_path = lock_files(self.path)
        self._lock: Any = None
        self.took_over: dict[str, Any] | None = None

    def _refuse(self, holder: dict[str, Any] | None) -> OutputLocked:
        advice = "wait for it to end, or choose another output path"
        if holder and holder.get("host") == socket.gethostname() and not _running_here(holder):
            # the lock outlived the process named: a child of it holds it (it inherited the
            # lock file), or the file system has no working system locks
            advice = (
                f"that process has ended, yet the lock is held (by a process it started, "
                f"or the file system has no working locks): end that process, or remove "
                f"{str(self.lock_path)!r} when nothing writes the file"
            )
        return OutputLocked(
            f"{str(self.path)!r} is being written by another process: "
            f"{describe_holder(holder)}; {advice}",
            path=self.path,
            holder=holder,
        )

    def acquire(self) -> "OutputLock":
        """Take the lock now or raise :class:`~spheredens.exceptions.OutputLocked`."""
        if self._lock is not None:
            return self
        lock = filelock.FileLock(str(self.lock_path))
        try:
            lock.acquire(timeout=0)
        except filelock.Timeout:
            raise self._refuse(_wait_for_record(self.record_path)) from None
        except OSError as exc:  # no folder (none is created here), read-only, full
            raise OutputError(
                f"cannot lock {str(self.path)!r}: cannot create "
                f"{str(self.lock_path)!r} ({exc.strerror or exc})"
            ) from None
        previous = _read_record(self.record_path)
        if previous and previous.get("pid") != os.getpid() and _running_here(previous):
            # the system lock was free, yet its holder runs: a file system without working
            # locks (filelock fell back, or a foreign mount); trust the record
            lock.release()
            raise self._refuse(previous)
        self._lock = lock
        if previous is not None:
            self.took_over = previous
            self._clean_up_after(previous)
            logger.warning(
                "took over the stale lock of %s (its holder is no longer running: %s)",
                self.path,
                describe_holder(previous),
            )
        self._write_record()
        return self

    def _clean_up_after(self, previous: dict[str, Any]) -> None:
        """Remove the temporary file a killed holder was writing (``.NAME.tmp-PID``)."""
        pid = previous.get("pid")
        if isinstance(pid, int) and previous.get("host") == socket.gethostname():
            with contextlib.suppress(OSError):
                self.path.with_name(f".{self.path.name}.tmp-{pid}").unlink()

    def _write_record(self) -> None:
        """Write the holder record atomically; on a full disk the lock is kept without it."""
        tmp = self.record_path.with_name(f".{self.record_path.name}.tmp-{os.getpid()}")
        try:
            tmp.write_text(json.dumps(_holder_record()) + "\n", encoding="utf-8")
            os.replace(tmp, self.record_path)
        except OSError as exc:
            with contextlib.suppress(OSError):
                tmp.unlink()
            with contextlib.suppress(OSError):  # a stale record must not name another holder
                self.record_path.unlink()
            logger.debug("could not write the lock record %s: %s", self.record_path, exc)

    def release(self) -> None:
        """Remove the holder record and release the lock (nothing when not held)."""
        lock, self._lock = self._lock, None
        if lock is None:
            return
        try:
            with contextlib.suppress(FileNotFoundError):
                self.record_path.unlink()
        finally:
            lock.release()

    @property
    def held(self) -> bool:
        """Whether this object holds the lock."""
        return self._lock is not None

    def __enter__(self) -> "OutputLock":
        return self.acquire()

    def __exit__(self, *exc: Any) -> None:
        self.release()


@contextlib.contextmanager
def output_lock(path: str | Path | None) -> Iterator[OutputLock | None]:
    """Hold the lock of the output ``path`` while the block runs (nothing when ``path`` is
    None); released on every exit path.

    Raises
    ------
    OutputLocked
        Another process holds it: one line naming it (host, pid, start time).
    """
    if path is None:
        yield None
        return
    lock = OutputLock(path).acquire()
    try:
        yield lock
    finally:
        lock.release()


@contextlib.contextmanager
def _lock_if_free(lock_path: Path) -> Iterator[bool | None]:
    """Take the lock ``lock_path`` without waiting, to read its record while nobody writes it:
    yields True (taken, and released on leaving), False (another process holds it) or None (it
    cannot be opened)."""
    lock = filelock.FileLock(str(lock_path))
    taken: bool | None = True
    try:
        lock.acquire(timeout=0)
    except filelock.Timeout:
        taken = False
    except OSError:
        taken = None
    try:
        yield taken
    finally:
        if taken:
            lock.release()


def lock_holder(path: str | Path) -> dict[str, Any] | None:
    """Who holds the lock of the output ``path`` now: its record (``{}`` when unreadable), or
    None when the lock is free. Nothing is changed (a stale record stays for the next writer
    to take over)."""
    lock_path, record_path = lock_files(path)
    if not lock_path.exists():
        return None
    with _lock_if_free(lock_path) as free:
        if free is None:
            return None
        if not free:
            return _wait_for_record(record_path) or {}
        record = _read_record(record_path)
        return record if record and _running_here(record) else None


def remove_stale_record(path: str | Path, *, wait: float = 0.0) -> bool:
    """Remove the holder record of the output ``path`` that a holder of this host left when it
    was killed (a sweep's worker terminated mid-case), and the temporary file it was writing.

    Only a record of this host whose process no longer runs is removed, and only while the lock
    is free: a live holder (here or on another host) is never touched. ``wait``: seconds to
    wait for the holder to end (a worker being terminated). Returns whether a record was
    removed; nothing is logged (the record was this program's own)."""
    lock_path, record_path = lock_files(path)
    deadline = _time.monotonic() + max(float(wait), 0.0)
    while True:
        if not record_path.exists():
            return False
        with _lock_if_free(lock_path) as free:  # held (False): its holder still runs
            if free is None:
                return False
            record = _read_record(record_path) if free else None
            if record and record.get("host") == socket.gethostname() and not _running_here(record):
                with contextlib.suppress(FileNotFoundError):
                    record_path.unlink()
                pid = record.get("pid")
                if isinstance(pid, int):
                    with contextlib.suppress(OSError):
                        Path(path).with_name(f".{Path(path).name}.tmp-{pid}").unlink()
                return True
        if _time.monotonic() >= deadline:
            return False
        _time.sleep(0.05)
