"""SIGINT and SIGTERM in the ``spheredens`` command.

From :func:`spheredens.cli.main` on, either signal ends the command at once in one line, exit
130 / 143 (:class:`_Signalled`); while a run integrates (:func:`_stop_on_signals`) it stops the
run after the current step instead, with its file and a checkpoint.
"""

from __future__ import annotations

import contextlib
import math
import signal
from typing import Any, Iterator

from ..simulate import progress_listener, request_stop, signal_handler


class _Signalled(BaseException):
    """SIGINT or SIGTERM ended a command outside a run's time loop (:func:`main`: one line, exit
    130 / 143). A BaseException, as KeyboardInterrupt: no ``except Exception`` of the set-up
    swallows it, and the ``with`` blocks it leaves (output locks, atomic writes) clean up."""

    def __init__(self, signum: int, during: str = "") -> None:
        super().__init__(signum, during)
        self.signum, self.during = signum, during

    @property
    def exit_code(self) -> int:
        return _signal_exit_code(self.signum)

    def __str__(self) -> str:
        name = "SIGTERM" if self.signum == signal.SIGTERM else "SIGINT, Ctrl-C"
        return f"interrupted ({name}){self.during}"


#: the interruption a signal handler raised, if any: where it lands in code that turns it into
#: another error (an extension module's import: "ImportError: initialization failed"), the
#: command still reports the interruption (:func:`main`)
_PENDING_SIGNAL: dict[str, Any] = {"exc": None}


def _raise_signalled(signum: int, during: str = "") -> None:
    exc = _Signalled(signum, during)
    _PENDING_SIGNAL["exc"] = exc
    raise exc


def _end_command(signum: int, frame: Any) -> None:
    """The command's handler of SIGINT and SIGTERM (from :func:`main` on): end it at once."""
    _raise_signalled(signum)


#: whether a run's time loop has started in this command (:func:`_stop_on_signals`)
_RUN_STARTED = {"started": False}


@contextlib.contextmanager
def _stop_on_signals() -> Iterator[dict]:
    """SIGINT and SIGTERM while a run is set up (the problem, scheme and evaluator, rho_0: before
    its observers start) end the command at once, with nothing of the run written
    (:class:`_Signalled`: exit 130 / 143); once its time loop has started (its
    :class:`~spheredens.simulate.Progress` observer reports ``"start"``,
    :func:`~spheredens.simulate.progress_listener`) they stop it after the current step, with
    the file and a checkpoint (:func:`~spheredens.simulate.request_stop`)."""
    received: dict = {}
    looping = {"on": False}

    def listen(event: dict[str, Any]) -> None:
        if event.get("event") == "start":
            looping["on"] = _RUN_STARTED["started"] = True
        elif event.get("event") == "finish":
            looping["on"] = False

    def handler(signum, frame):
        received["signal"] = signum
        if not looping["on"]:
            _raise_signalled(
                signum,
                " during the set-up of the run, before its first step: nothing of it was written",
            )
        request_stop("terminated" if signum == signal.SIGTERM else "interrupted")

    with (
        progress_listener(listen, interval=math.inf),
        signal_handler(handler, (signal.SIGINT, signal.SIGTERM)),
    ):
        yield received


def _interrupted_exit_code(received: dict) -> int:
    """143 after SIGTERM, 130 after SIGINT (Ctrl-C), as a shell reports a process they killed."""
    return _signal_exit_code(received.get("signal"))


def _signal_exit_code(signum: int | None) -> int:
    """143 after SIGTERM, 130 after SIGINT (or none recorded): what a shell reports."""
    return 143 if signum == signal.SIGTERM else 130
