"""Error and warning classes of spheredens.

Every error a user can provoke with a bad configuration, a bad file or a failed run is a
subclass of :class:`SpheredensError`; the command line turns them into one-line messages.
"""

from __future__ import annotations

import re
import reprlib
from typing import Any

__all__ = [
    "shown",
    "SpheredensError",
    "ConfigError",
    "SchemaError",
    "ModelMismatchError",
    "SimulationError",
    "OutputError",
    "OutputLocked",
    "SpheredensWarning",
]


#: the most characters of a value a message echoes (:func:`shown`)
SHOWN_LIMIT = 80
#: the most characters of a path a message echoes, and of any quoted word in a message
#: (paths are kept whole up to this length: the user needs them to find the file)
PATH_LIMIT = 400
#: the most characters of a ConfigError or SchemaError message; longer ones keep their start and end
MESSAGE_LIMIT = 1000

_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxlist, _REPR.maxtuple, _REPR.maxdict = 4, 12, 12, 8
_REPR.maxstring = _REPR.maxother = _REPR.maxlong = SHOWN_LIMIT + 2


def shown(value: Any, limit: int = SHOWN_LIMIT) -> str:
    """``repr(value)`` as an error message echoes it: at most ``limit`` characters, a longer
    one cut with an ellipsis and its length said (a 10 MB string from a file is not printed
    back), built without ever forming the whole repr of a huge or deeply nested value.

    Examples
    --------
    >>> shown([[1.0, 0.0], [0.0]])
    '[[1.0, 0.0], [0.0]]'
    >>> shown("x" * 10**7, limit=8)
    "'xxxxxxxx...' (10000000 characters)"
    >>> shown(10**400)
    'an integer of 401 digits'
    """
    if isinstance(value, (str, bytes)):
        if len(value) <= limit:
            return repr(value)
        head = repr(value[:limit])
        return f"{head[:-1]}...{head[-1]} ({len(value)} characters)"
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 3.3 * limit:
        digits = len(str(abs(value))) if value.bit_length() < 14000 else "more than 4000"
        return f"{'a negative' if value < 0 else 'an'} integer of {digits} digits"
    try:
        text = _REPR.repr(value)
    except Exception:  # a value whose repr fails: its type
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


#: a quoted word longer than PATH_LIMIT (a string value or a path echoed whole)
_LONG_QUOTED = re.compile(r"'([^'\s]{%d,})'" % (PATH_LIMIT + 1))


def _bounded(text: str, limit: int = MESSAGE_LIMIT) -> str:
    """``text`` with each quoted word longer than :data:`PATH_LIMIT` cut as :func:`shown`
    cuts values; then, when still above ``limit`` characters, its start and end around a note
    of what was left out (the key comes first and what to do last: both are kept)."""
    text = _LONG_QUOTED.sub(lambda m: shown(m[1]), text)
    if len(text) <= limit:
        return text
    keep = (limit - 40) // 2
    return f"{text[:keep]} ... ({len(text) - 2 * keep} characters left out) ... {text[-keep:]}"


class SpheredensError(Exception):
    """Base class of every error raised on purpose by spheredens."""


class ConfigError(SpheredensError, ValueError):
    """A run configuration is invalid.

    Parameters
    ----------
    key : str
        Dotted name of the offending key, e.g. ``"model.beta"``.
    message : str
        What is wrong, what is allowed and how to fix it.
    """

    def __init__(self, key: str, message: str) -> None:
        # keys come from user files: show odd ones (newlines, control characters) quoted
        key = _bounded(key if key.isprintable() else repr(key), SHOWN_LIMIT)
        message = _bounded(message if message.isprintable() else repr(message)[1:-1])
        self.key = key
        self.message = message
        super().__init__(f"{key}: {message}" if key else message)


class SchemaError(SpheredensError, ValueError):
    """A file does not follow the spheredens dataset layout (docs/dataset.md).

    The message is one line; long values in it are cut (:func:`shown`).
    """

    def __init__(self, message: str = "", *args: Any) -> None:
        super().__init__(_bounded(str(message)), *args)


class ModelMismatchError(SchemaError):
    """Files used together (a density and its particle runs) come from different models.

    Parameters
    ----------
    message : str
        Which files and the first difference, e.g. "particles p.nc do not belong to density
        d.nc: beta is 30 in p.nc but 5 in d.nc".
    hint : str, optional
        How to go on anyway (appended after "; "); empty when nothing can be compared.
    """

    def __init__(self, message: str, *, hint: str = "") -> None:
        self.message = message
        self.hint = hint
        super().__init__(f"{message}; {hint}" if hint else message)


class SimulationError(SpheredensError, RuntimeError):
    """A simulation could not continue (NaN, negative density, step-size collapse)."""

    def __init__(self, message: str, *, time: float | None = None, step: int | None = None) -> None:
        self.time = time
        self.step = step
        where = []
        if time is not None:
            where.append(f"t = {time:.6g}")
        if step is not None:
            where.append(f"step {step}")
        prefix = f"at {', '.join(where)}: " if where else ""
        super().__init__(prefix + message)


class OutputError(SpheredensError, OSError):
    """A result file could not be written (disk full, permissions); earlier files are intact."""


class OutputLocked(SpheredensError):
    """The output file is being written by another process (it holds the file's lock).

    Parameters
    ----------
    message : str
        One line naming the file and the holder (host, pid, start time).
    path : path, optional
        The output file.
    holder : dict, optional
        The holder's record (``host``, ``pid``, ``started``, ``command``), when readable.
    """

    def __init__(self, message: str, *, path: object = None, holder: dict | None = None) -> None:
        self.path = path
        self.holder = holder
        super().__init__(message)


class SpheredensWarning(UserWarning):
    """Accuracy or usage warning issued by spheredens."""
