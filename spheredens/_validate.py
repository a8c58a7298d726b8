"""Small validators for values read from TOML tables: each names the offending key.

Used by :mod:`spheredens.config` and by the registered families (initial densities, schemes)
that validate their own parameters.
"""

from __future__ import annotations

import errno
import math
import numbers
import os
import stat
from typing import Any, Iterable, Mapping

import numpy as np

from .exceptions import ConfigError, shown


def check_keys(table: Mapping[str, Any], allowed: Iterable[str], prefix: str) -> None:
    """Refuse keys of ``table`` that are not in ``allowed``."""
    allowed = list(allowed)
    for key in table:
        if key not in allowed:
            hint = ", ".join(repr(a) for a in allowed) if allowed else "none"
            name = f"{prefix}.{key}" if prefix else key
            raise ConfigError(
                name, f"unknown {'key' if prefix else 'section'}; allowed here: {hint}"
            )


def as_table(value: Any, key: str) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise ConfigError(key, f"must be a table ([{key}]), got {type(value).__name__}")
    return dict(value)


def _of_type(value: Any, key: str, kind: type, what: str) -> Any:
    """``value`` when it is a ``kind``; a ConfigError saying it must be ``what`` otherwise."""
    if not isinstance(value, kind):
        raise ConfigError(key, f"must be {what}, got {shown(value)}")
    return value


def as_str(value: Any, key: str) -> str:
    return _of_type(value, key, str, "a string")


def as_float(
    value: Any,
    key: str,
    *,
    minimum: float | None = None,
    strict: bool = False,
    maximum: float | None = None,
    allow_inf: bool = False,
    what: str = "",
) -> float:
    """A real number, optionally bounded (``strict`` makes the minimum exclusive)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise ConfigError(key, f"must be a number{what}, got {shown(value)}")
    try:
        x = float(value)
    except OverflowError:  # an integer beyond float64 (1.8e308)
        raise ConfigError(
            key, f"= {shown(value)} is beyond float64 (1.8e308): must be a finite number{what}"
        ) from None
    if math.isnan(x) or (math.isinf(x) and not allow_inf):
        raise ConfigError(key, f"must be a finite number{what}, got {shown(value)}")
    if minimum is not None and (x < minimum or (strict and x == minimum)):
        op = ">" if strict else ">="
        raise ConfigError(key, f"= {shown(value)} is not allowed: must be {op} {minimum:g}{what}")
    if maximum is not None and x > maximum:
        raise ConfigError(key, f"= {shown(value)} is not allowed: must be <= {maximum:g}{what}")
    return x


def as_int(
    value: Any, key: str, *, minimum: int | None = None, maximum: int | None = None, what: str = ""
) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise ConfigError(key, f"must be an integer{what}, got {shown(value)}")
    if minimum is not None and value < minimum:
        raise ConfigError(key, f"= {shown(value)} is too small: must be >= {minimum}{what}")
    if maximum is not None and value > maximum:
        raise ConfigError(key, f"= {shown(value)} is too large: must be <= {maximum}{what}")
    return int(value)


def as_bool(value: Any, key: str) -> bool:
    return _of_type(value, key, bool, "true or false")


def as_float_list(
    value: Any, key: str, *, length: int | None = None, **bounds: Any
) -> tuple[float, ...]:
    """A non-empty list of real numbers (of ``length`` entries when given), each checked by
    :func:`as_float` with ``bounds`` (``minimum``, ``strict``, ...)."""
    if not isinstance(value, (list, tuple)) or len(value) == 0:
        raise ConfigError(key, f"must be a non-empty list of numbers, got {shown(value)}")
    if length is not None and len(value) != length:
        raise ConfigError(key, f"must have {length} entries, got {len(value)}")
    return tuple(as_float(v, f"{key}[{i}]", **bounds) for i, v in enumerate(value))


def as_matrix(value: Any, key: str, d: int) -> tuple[tuple[float, ...], ...]:
    """A d x d real matrix given as a list of rows."""
    shape_msg = f"must be a {d} x {d} matrix (a list of {d} rows of {d} numbers)"
    if not isinstance(value, (list, tuple)) or not all(isinstance(r, (list, tuple)) for r in value):
        raise ConfigError(key, f"{shape_msg}, got {shown(value)}")
    rows = [len(r) for r in value]
    if len(value) != d or any(n != d for n in rows):
        raise ConfigError(key, f"{shape_msg}; got {len(value)} rows of lengths {rows}")
    return tuple(
        tuple(as_float(v, f"{key}[{i}][{j}]") for j, v in enumerate(r)) for i, r in enumerate(value)
    )


def as_unit_vectors(value: Any, key: str, d: int) -> tuple[tuple[float, ...], ...]:
    """A non-empty list of vectors of R^d, each normalized (refused if far from unit length)."""
    if not isinstance(value, (list, tuple)) or len(value) == 0:
        raise ConfigError(
            key, f"must be a non-empty list of unit vectors of R^{d}, got {shown(value)}"
        )
    out = []
    for i, v in enumerate(value):
        if not isinstance(v, (list, tuple)) or len(v) != d:
            raise ConfigError(f"{key}[{i}]", f"must be a vector of {d} numbers, got {shown(v)}")
        vec = np.array([as_float(c, f"{key}[{i}]") for c in v])
        norm = float(np.linalg.norm(vec))
        if abs(norm - 1.0) > 1e-6:
            raise ConfigError(
                f"{key}[{i}]", f"= {shown(v)} has length {norm:.6g}; give a unit vector"
            )
        out.append(tuple(float(c) for c in vec / norm))
    return tuple(out)


#: the first bytes of a netCDF-3 (classic, 64-bit offset, CDF-5) and a netCDF-4 (HDF5) file
NETCDF_SIGNATURES = (b"CDF\x01", b"CDF\x02", b"CDF\x05", b"\x89HDF\r\n\x1a\n")


def netcdf_read_problem(path: Any, exc: BaseException | None = None) -> str:
    """Why the file at ``path`` cannot be read as netCDF, in one line ("" when it looks like
    netCDF and no reader error ``exc`` is given).

    A file without a netCDF signature is named as such (the readers' own message lists every
    backend and links to their docs); otherwise the first line of ``exc``.
    """
    try:
        with open(path, "rb") as fh:
            head = fh.read(2056)
    except OSError as err:
        return f"cannot open it: {err.strerror or err}"
    # HDF5 may start after a user block of 512, 1024, 2048 bytes
    if not (
        head[:4] in NETCDF_SIGNATURES
        or any(head[k : k + 8] == NETCDF_SIGNATURES[-1] for k in (0, 512, 1024, 2048))
    ):
        what = "the file is empty" if not head else f"it starts with {head[:12]!r}"
        return f"not a netCDF-3 or netCDF-4 (HDF5) file ({what})"
    if exc is None:
        return ""
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


#: the longest name of one file or folder most file systems allow (NAME_MAX)
NAME_MAX = 255


def _too_long(path: Any) -> str:
    """Why a path that the system refused as too long (ENAMETOOLONG) is so."""
    longest = max((p for p in str(path).split(os.sep) if p), key=len, default="")
    if len(longest) > NAME_MAX:
        return (
            f"has a name of {len(longest)} characters, more than the file system allows "
            f"({NAME_MAX}); use a shorter name"
        )
    return f"is {len(str(path))} characters long, more than the system allows; use a shorter path"


def os_error_problem(err: OSError, path: Any) -> str:
    """What is wrong with ``path``, from the OSError of ``os.stat`` on it (a name too long, a
    loop of symbolic links, ...), as a predicate: "is ...", "has ..."."""
    if err.errno == errno.ENAMETOOLONG:
        return _too_long(path)
    if err.errno == errno.ELOOP:
        return (
            "is a loop of symbolic links (a link that leads back to itself); fix or remove the link"
        )
    if err.errno == errno.EACCES:
        return "cannot be looked at (permission denied); check the permissions of its folders"
    return f"cannot be looked at ({err.strerror or err})"


def input_file_problem(path: Any, what: str = "a TOML file") -> str:
    """Why ``path`` cannot be read as an input file, as a predicate ("does not exist", "is a
    directory, ...") to follow its name in a message; "" when it is a regular file.

    Refused: a missing file, a dangling symbolic link or a loop of them, a directory, a device
    (such as /dev/null) or another special file, a name too long for the file system.
    """
    try:
        info = os.stat(path)
    except OSError as err:
        if err.errno == errno.ENOENT:
            if os.path.islink(path):
                return (
                    f"is a symbolic link to {shown(os.readlink(path))}, which does not exist; "
                    "fix or remove the link"
                )
            return "does not exist"
        return os_error_problem(err, path)
    except ValueError:  # an embedded NUL character
        return "holds a NUL character; give a file name"
    if stat.S_ISDIR(info.st_mode):
        return f"is a directory, not {what}; give the path of a file"
    if not stat.S_ISREG(info.st_mode):
        kind = (
            "a character device"
            if stat.S_ISCHR(info.st_mode)
            else "a block device"
            if stat.S_ISBLK(info.st_mode)
            else "a pipe"
            if stat.S_ISFIFO(info.st_mode)
            else "a socket"
            if stat.S_ISSOCK(info.st_mode)
            else "a special file"
        )
        return f"is {kind}, not a regular file ({what}); give the path of a file"
    return ""


#: characters the files written beside an output add to its name: ``.NAME.tmp-PID`` (the
#: atomic write), ``.NAME.flock`` and ``NAME.lock`` (the output lock)
SIDE_FILE_EXTRA = 16


def output_file_problem(path: Any) -> str:
    """Why no file can be written at ``path`` as far as its name tells, as a predicate ("" when
    nothing is wrong with it): a name too long for the file system (with the side files
    written beside it, :data:`SIDE_FILE_EXTRA`), or a loop of symbolic links (the name
    itself, or its folder)."""
    name = os.path.basename(str(path))
    if len(name) > NAME_MAX - SIDE_FILE_EXTRA:
        return (
            f"has a name of {len(name)} characters; with the files written beside it "
            f"(.NAME.tmp-PID, .NAME.flock) the file system allows "
            f"{NAME_MAX - SIDE_FILE_EXTRA}: use a shorter name"
        )
    folder = os.path.dirname(os.path.abspath(path)) or os.sep
    for probe in (folder, path):
        try:
            os.stat(probe)
        except OSError as err:
            if err.errno == errno.ENAMETOOLONG:
                return _too_long(probe)
            if err.errno == errno.ELOOP:
                return ("is" if probe is path else "is in a folder that is") + (
                    " a loop of symbolic links (a link that leads back to itself); "
                    "fix or remove the link"
                )
        except ValueError:
            return "holds a NUL character; give a file name"
    return ""


#: the deepest nesting of tables and arrays a configuration may have (a run needs 4:
#: section, key, row, entry; a sweep a few more)
MAX_DEPTH = 16


def check_depth(data: Any, *, limit: int = MAX_DEPTH) -> None:
    """Refuse tables and arrays nested more than ``limit`` levels deep, naming the first such
    key (walked without recursion, so any depth is refused in one line)."""
    stack = [(data, "", 0)]
    while stack:
        value, key, depth = stack.pop()
        if depth > limit:
            raise ConfigError(
                key,
                f"tables and arrays are nested more than {limit} levels deep here; "
                "a configuration needs a few levels (section, key, matrix row, entry)",
            )
        if isinstance(value, Mapping):
            stack.extend((v, f"{key}.{k}" if key else str(k), depth + 1) for k, v in value.items())
        elif isinstance(value, (list, tuple)):
            stack.extend((v, f"{key}[{i}]", depth + 1) for i, v in enumerate(value))
