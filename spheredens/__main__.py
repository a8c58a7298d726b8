"""``python -m spheredens`` and the console script ``spheredens`` (:func:`main`)."""

import signal

from . import _STARTING_INTERRUPTS, _exit_interrupted_while_starting, _started_as_command

try:  # after spheredens/__init__.py, which guards its own imports the same way
    from .cli import main as _cli_main
except KeyboardInterrupt:
    _exit_interrupted_while_starting()


def main(argv: list[str] | None = None) -> int:
    """The ``spheredens`` command: :func:`spheredens.cli.main` (which Python callers may call
    as well); a Ctrl-C before it holds the signals (while the command starts, also one a
    library swallowed) ends the process in one line with exit 130 instead of a traceback."""
    if _STARTING_INTERRUPTS:
        _exit_interrupted_while_starting()
    try:
        code = _cli_main(argv)
    except KeyboardInterrupt:
        _exit_interrupted_while_starting()
        return 130
    if _started_as_command():  # the command is over: a Ctrl-C as the process ends changes nothing
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
