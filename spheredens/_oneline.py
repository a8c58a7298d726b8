"""Warnings and log records as spheredens prints them: one line each.

``spheredens: warning: ...`` without Python's source location, on the command line
(:func:`spheredens.cli.format_warning`) and on the workers of a sweep, where each names its
case (``spheredens: warning: sweep case NAME: ...``).
"""

from __future__ import annotations

import logging

from .exceptions import SpheredensWarning


def warning_line(message: Warning | str, category: type[Warning], prefix: str = "") -> str:
    """The line ``spheredens: warning: <prefix><message>`` (white space collapsed), ending in a
    newline. spheredens' own warnings (:class:`SpheredensWarning`) say what to change; others
    are named by their category, ``(RuntimeWarning)``."""
    text = " ".join(str(message).split())
    if not issubclass(category, SpheredensWarning):
        text = f"{text} ({category.__name__})"
    return f"spheredens: warning: {prefix}{text}\n"


def record_line(record: logging.LogRecord, prefix: str = "") -> str:
    """A log record as one line ``spheredens: <level>: <prefix><message>`` (no newline)."""
    text = " ".join(record.getMessage().split())
    return f"spheredens: {record.levelname.lower()}: {prefix}{text}"
