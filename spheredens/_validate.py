"""Small validators for values read from TOML tables: each names the offending key.

Used by :mod:`spheredens.config` and by the registered families (initial densities, schemes)
that validate their own parameters.
"""
from __future__ import annotations

import math
import numbers
from typing import Any, Iterable, Mapping

import numpy as np

from .exceptions import ConfigError


def check_keys(table: Mapping[str, Any], allowed: Iterable[str], prefix: str) -> None:
    """Refuse keys of ``table`` that are not in ``allowed``."""
    allowed = list(allowed)
    for key in table:
        if key not in allowed:
            hint = ", ".join(repr(a) for a in allowed) if allowed else "none"
            name = f"{prefix}.{key}" if prefix else key
            raise ConfigError(name, f"unknown {'key' if prefix else 'section'}; allowed here: {hint}")


def as_table(value: Any, key: str) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise ConfigError(key, f"must be a table ([{key}]), got {type(value).__name__}")
    return dict(value)


def _of_type(value: Any, key: str, kind: type, what: str) -> Any:
    """``value`` when it is a ``kind``; a ConfigError saying it must be ``what`` otherwise."""
    if not isinstance(value, kind):
        raise ConfigError(key, f"must be {what}, got {value!r}")
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
        raise ConfigError(key, f"must be a number{what}, got {value!r}")
    x = float(value)
    if math.isnan(x) or (math.isinf(x) and not allow_inf):
        raise ConfigError(key, f"must be a finite number{what}, got {value!r}")
    if minimum is not None and (x < minimum or (strict and x == minimum)):
        op = ">" if strict else ">="
        raise ConfigError(key, f"= {value!r} is not allowed: must be {op} {minimum:g}{what}")
    if maximum is not None and x > maximum:
        raise ConfigError(key, f"= {value!r} is not allowed: must be <= {maximum:g}{what}")
    return x


def as_int(value: Any, key: str, *, minimum: int | None = None, maximum: int | None = None,
           what: str = "") -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise ConfigError(key, f"must be an integer{what}, got {value!r}")
    if minimum is not None and value < minimum:
        raise ConfigError(key, f"= {value} is too small: must be >= {minimum}{what}")
    if maximum is not None and value > maximum:
        raise ConfigError(key, f"= {value} is too large: must be <= {maximum}{what}")
    return int(value)


def as_bool(value: Any, key: str) -> bool:
    return _of_type(value, key, bool, "true or false")


def as_float_list(value: Any, key: str, *, length: int | None = None, minimum: float | None = None,
                  strict: bool = False) -> tuple[float, ...]:
    if not isinstance(value, (list, tuple)) or len(value) == 0:
        raise ConfigError(key, f"must be a non-empty list of numbers, got {value!r}")
    if length is not None and len(value) != length:
        raise ConfigError(key, f"must have {length} entries, got {len(value)}")
    return tuple(as_float(v, f"{key}[{i}]", minimum=minimum, strict=strict)
                 for i, v in enumerate(value))


def as_matrix(value: Any, key: str, d: int) -> tuple[tuple[float, ...], ...]:
    """A d x d real matrix given as a list of rows."""
    shape_msg = f"must be a {d} x {d} matrix (a list of {d} rows of {d} numbers)"
    if not isinstance(value, (list, tuple)) or not all(isinstance(r, (list, tuple)) for r in value):
        raise ConfigError(key, f"{shape_msg}, got {value!r}")
    rows = [len(r) for r in value]
    if len(value) != d or any(n != d for n in rows):
        raise ConfigError(key, f"{shape_msg}; got {len(value)} rows of lengths {rows}")
    return tuple(tuple(as_float(v, f"{key}[{i}][{j}]") for j, v in enumerate(r))
                 for i, r in enumerate(value))


def as_unit_vectors(value: Any, key: str, d: int) -> tuple[tuple[float, ...], ...]:
    """A non-empty list of vectors of R^d, each normalized (refused if far from unit length)."""
    if not isinstance(value, (list, tuple)) or len(value) == 0:
        raise ConfigError(key, f"must be a non-empty list of unit vectors of R^{d}, got {value!r}")
    out = []
    for i, v in enumerate(value):
        if not isinstance(v, (list, tuple)) or len(v) != d:
            raise ConfigError(f"{key}[{i}]", f"must be a vector of {d} numbers, got {v!r}")
        vec = np.array([as_float(c, f"{key}[{i}]") for c in v])
        norm = float(np.linalg.norm(vec))
        if abs(norm - 1.0) > 1e-6:
            raise ConfigError(f"{key}[{i}]", f"= {v!r} has length {norm:.6g}; give a unit vector")
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
    if not (head[:4] in NETCDF_SIGNATURES or any(head[k:k + 8] == NETCDF_SIGNATURES[-1]
                                                 for k in (0, 512, 1024, 2048))):
        what = "the file is empty" if not head else f"it starts with {head[:12]!r}"
        return f"not a netCDF-3 or netCDF-4 (HDF5) file ({what})"
    if exc is None:
        return ""
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__
