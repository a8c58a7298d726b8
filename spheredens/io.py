"""Files: atomic netCDF writing, opening runs with a schema check."""
from __future__ import annotations

import logging
import os
import time as _time
from pathlib import Path
from typing import Any

from .exceptions import SchemaError
from .recorder import SCHEMA, Recorder

logger = logging.getLogger(__name__)

REQUIRED_ATTRS = ("Conventions", "spheredens_schema", "spheredens_version", "model", "domain",
                  "scheme", "beta", "config", "history", "title")
REQUIRED_VARS = ("rho", "weight", "Q", "K", "V", "mass", "energy", "w2_projection")


def write_dataset(ds: Any, path: str | Path, *, engine: str = "netcdf4") -> Path:
    """Write ``ds`` to ``path`` atomically: a temporary file in the same folder, then rename.

    A reader never sees a half-written file, and a crash during the write leaves the previous
    file intact.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        ds.to_netcdf(tmp, engine=engine)
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return path


class FileWriter:
    """Observer that rewrites the output file (atomically) as snapshots arrive.

    The file is rewritten after a snapshot unless the previous write was less than
    ``5 x (its own duration)`` ago, which keeps writing below ~20% of the run time; it is
    always written at the end, also when the run stopped early or was interrupted.
    """

    def __init__(self, recorder: Recorder, path: str | Path) -> None:
        self.recorder = recorder
        self.path = Path(path)
        self._last_end = -float("inf")
        self._last_cost = 0.0

    def _write(self) -> None:
        t0 = _time.perf_counter()
        write_dataset(self.recorder.dataset(), self.path)
        self._last_end = _time.perf_counter()
        self._last_cost = self._last_end - t0

    def start(self, info: dict[str, Any]) -> None:
        pass

    def observe(self, t: float, state: Any) -> None:
        if _time.perf_counter() - self._last_end >= 5.0 * self._last_cost:
            self._write()

    def finish(self, result: Any) -> None:
        self._write()


def validate_schema(ds: Any) -> None:
    """Raise :class:`SchemaError` listing what ``ds`` lacks of schema ``spheredens-1``."""
    problems = [f"attribute {a!r} missing" for a in REQUIRED_ATTRS if a not in ds.attrs]
    problems += [f"variable {v!r} missing" for v in REQUIRED_VARS if v not in ds.variables]
    if ds.attrs.get("spheredens_schema", SCHEMA) != SCHEMA:
        problems.append(f"spheredens_schema is {ds.attrs['spheredens_schema']!r}, expected {SCHEMA!r}")
    if "time" not in ds.coords:
        problems.append("coordinate 'time' missing")
    if ds.attrs.get("domain") == "circle" and "theta" not in ds.coords:
        problems.append("coordinate 'theta' missing (domain is circle)")
    if problems:
        raise SchemaError("not a spheredens-1 file: " + "; ".join(problems))


def open_run(path: str | Path) -> Any:
    """Open a run file with xarray, check it follows schema ``spheredens-1``, load it.

    Raises
    ------
    SchemaError
        When the file cannot be read or lacks part of the layout.
    """
    import xarray as xr

    path = Path(path)
    if not path.is_file():
        raise SchemaError(f"{str(path)!r} does not exist")
    try:
        ds = xr.open_dataset(path)
    except Exception as exc:  # reader failures become one line
        raise SchemaError(f"cannot read {str(path)!r} as netCDF: {exc}") from None
    with ds:
        validate_schema(ds)
        return ds.load()
