"""Command line: ``spheredens run | info | plot | animate | particles | compare |
convert-particles | sweep | analyze-beta | convergence | verify``.

The commands parse their arguments, call the library (file names, the output rule, opening
files and the numbers reported are library functions, the same for a Python user) and print.
Errors in configurations and files are printed as one line (``spheredens: error: ...``) with
exit code 2; a run stopped by a numerical failure exits with 1, an interrupted run with 130.

This module is the entry point (:func:`main`: signals, warnings and errors as one line each);
the parser and the help texts are in :mod:`spheredens.cli._parser`, the commands (one
function ``_cmd_<name>`` each) in :mod:`spheredens.cli._commands`, the handling of SIGINT and
SIGTERM in :mod:`spheredens.cli._signals`.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import signal
import sys
import warnings
from typing import Iterator, Sequence

from .._oneline import record_line, warning_line
from .._validate import os_error_problem
from ..exceptions import (
    PATH_LIMIT,
    OutputError,
    SimulationError,
    SpheredensError,
    shown,
)
from ..simulate import signal_handler
from ._commands import MAX_SEEDS, parse_seeds
from ._parser import DESCRIPTION, build_parser, number
from ._signals import (
    _PENDING_SIGNAL,
    _RUN_STARTED,
    _end_command,
    _Signalled,
)

__all__ = [
    "DESCRIPTION",
    "MAX_SEEDS",
    "build_parser",
    "format_warning",
    "main",
    "number",
    "parse_seeds",
]


def format_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    line: str | None = None,
) -> str:
    """A warning as the command line prints it: one line ``spheredens: warning: ...``, without
    Python's source location (spheredens' own warnings, :class:`SpheredensWarning`, say what
    to change; others are named by their category): :func:`~spheredens._oneline.warning_line`.
    """
    return warning_line(message, category)


@contextlib.contextmanager
def _one_line_warnings() -> Iterator[None]:
    """While a command runs, warnings print as :func:`format_warning` (restored afterwards)."""
    previous = warnings.formatwarning
    warnings.formatwarning = format_warning
    try:
        yield
    finally:
        warnings.formatwarning = previous


class _OneLineFormatter(logging.Formatter):
    """Log records as one line each: ``spheredens: warning: ...``, ``spheredens: error: ...``."""

    def format(self, record: logging.LogRecord) -> str:
        return record_line(record)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``spheredens`` command (``spheredens.__main__.main`` calls it).

    From its start SIGINT (Ctrl-C) and SIGTERM end the command at once, in one line with exit
    130 / 143 (a run being set up too, with nothing of it written); while a run integrates
    they stop it after the current step, with its file and a checkpoint
    (:func:`_stop_on_signals`). Running out of memory is one line too: exit 2 before a run
    starts, 1 once it has (its file keeps the snapshots before)."""
    _RUN_STARTED["started"] = False
    _PENDING_SIGNAL["exc"] = None
    try:
        with signal_handler(_end_command, (signal.SIGINT, signal.SIGTERM)):
            return _command(argv)
    except _Signalled as exc:
        print(f"spheredens: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:  # raised where the handler is not ours (another thread's code)
        print("spheredens: interrupted (SIGINT, Ctrl-C)", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader of stdout went away (spheredens info | head): as a shell's 141; nothing
        # more reaches it, not even the flush at exit
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except MemoryError as exc:
        what = " ".join(str(exc).split())[:200]
        what = f" ({what})" if what else ""
        if _RUN_STARTED["started"]:
            print(
                f"spheredens: run stopped: out of memory{what}; the file keeps the snapshots "
                "before it; use a coarser grid (discretization), fewer slices (auxiliary) or "
                "fewer snapshots (time)",
                file=sys.stderr,
            )
            return 1
        print(
            f"spheredens: error: out of memory{what}: this machine cannot hold what the command "
            "needs; use a coarser grid (discretization), fewer slices (auxiliary), fewer "
            "snapshots (time) or fewer particles",
            file=sys.stderr,
        )
        return 2
    except Exception:  # the interruption, turned into another error where it landed
        signalled = _PENDING_SIGNAL["exc"]
        if signalled is None:
            raise
        print(f"spheredens: {signalled}", file=sys.stderr)
        return signalled.exit_code


def _command(argv: Sequence[str] | None) -> int:
    """Parse ``argv`` and run the command (:func:`main`), its errors as one line each."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    handler = logging.StreamHandler()
    handler.setFormatter(_OneLineFormatter())
    logging.basicConfig(level=logging.WARNING, handlers=[handler])
    try:
        with _one_line_warnings():
            return int(args.func(args))
    except SimulationError as exc:
        print(f"spheredens: run stopped: {exc}", file=sys.stderr)
        return 1
    except OutputError as exc:  # the computation ran; its last write failed (disk full, ...)
        print(f"spheredens: error: {exc}", file=sys.stderr)
        return 1
    except SpheredensError as exc:
        print(f"spheredens: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # a path the commands did not check first: a name too long, a link loop
        if exc.errno not in (errno.ENAMETOOLONG, errno.ELOOP) or exc.filename is None:
            raise
        print(
            f"spheredens: error: {shown(str(exc.filename), PATH_LIMIT)} "
            f"{os_error_problem(exc, exc.filename)}",
            file=sys.stderr,
        )
        return 2
