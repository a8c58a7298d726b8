"""Error and warning classes of spheredens.

Every error a user can provoke with a bad configuration, a bad file or a failed run is a
subclass of :class:`SpheredensError`; the command line turns them into one-line messages.
"""
from __future__ import annotations

__all__ = [
    "SpheredensError",
    "ConfigError",
    "SchemaError",
    "ModelMismatchError",
    "SimulationError",
    "OutputError",
    "OutputLocked",
    "SpheredensWarning",
]


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
        key = key if key.isprintable() else repr(key)
        message = message if message.isprintable() else repr(message)[1:-1]
        self.key = key
        self.message = message
        super().__init__(f"{key}: {message}" if key else message)


class SchemaError(SpheredensError, ValueError):
    """A file does not follow the spheredens dataset layout (DATASET.md)."""


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
