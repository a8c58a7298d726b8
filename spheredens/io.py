"""Files: atomic netCDF writing, opening runs with a schema check."""
from __future__ import annotations

import logging
import os
import time as _time
from pathlib import Path
from typing import Any

from .exceptions import ConfigError, OutputError, SchemaError
from .recorder import SCHEMA
from .simulate import Observer

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


def check_output_path(path: str | Path, *, overwrite: bool, key: str | None = None,
                      resumable: bool = False, option: str | None = None) -> Path:
    """The output rule: an existing file is never replaced unless ``overwrite`` is set.

    Parameters
    ----------
    path : path
        The file about to be written.
    overwrite : bool
        Replace an existing file (``--overwrite``); then nothing is checked.
    key : str, optional
        The configuration key the path comes from (``"output.path"``, ``"particles.path"``):
        the error is then a :class:`ConfigError` naming it, otherwise a :class:`SchemaError`.
    resumable : bool
        The file may be a partial run that ``--resume`` continues: the message says so.
    option : str, optional
        The command line option that chooses the name (``"--output"``), shown in the message.

    Returns
    -------
    Path
        ``path`` as a :class:`~pathlib.Path`, when it may be written.

    Raises
    ------
    ConfigError
        ``path`` exists, ``overwrite`` is not set and ``key`` is given.
    SchemaError
        ``path`` exists, ``overwrite`` is not set and no ``key`` is given.
    """
    path = Path(path)
    if overwrite or not path.exists():
        return path
    if resumable:
        advice = "pass --resume to continue it, --overwrite to replace it, or choose another path"
    else:
        advice = f"choose another name{f' ({option})' if option else ''} or pass --overwrite"
    message = f"{str(path)!r} exists; {advice}"
    if key is not None:
        raise ConfigError(key, message)
    raise SchemaError(message)


class FileWriter(Observer):
    """Observer that rewrites the output file atomically as the run goes, with a checkpoint.

    The file is rewritten after a snapshot unless the previous write was less than
    ``5 x (its own duration)`` ago (writing stays below ~20% of the run time), after any step
    when ``checkpoint_seconds`` of wall time have passed since the last write, and at the end,
    also when the run stopped early or was interrupted. Each file holds the snapshots so far and
    the full solver state at its last step boundary (``checkpoint_state``), from which
    ``--resume`` continues bit for bit. A failed write (disk full, ...) leaves the previous
    file intact; it is retried at the next occasion and, if the last one fails, reported by
    :meth:`finish` raising :class:`OutputError`.
    """

    def __init__(self, recorder: Any, path: str | Path, *, checkpoint_seconds: float = 60.0) -> None:
        self.recorder = recorder
        self.path = Path(path)
        self.checkpoint_seconds = float(checkpoint_seconds)
        self._last_end = -float("inf")
        self._last_cost = 0.0
        self._steps = 0
        self.error: OSError | None = None

    def _write(self) -> None:
        t0 = _time.perf_counter()
        try:
            write_dataset(self.recorder.dataset(), self.path)
        except OSError as exc:
            self.error = exc
            logger.error("could not write %s: %s (the previous file is kept)", self.path, exc)
            self._last_end = _time.perf_counter()
            return
        self.error = None
        self._last_end = _time.perf_counter()
        self._last_cost = self._last_end - t0

    def start(self, info: dict[str, Any]) -> None:
        self._steps = int(info.get("steps_done", 0))

    def observe(self, t: float, state: Any) -> None:
        if hasattr(self.recorder, "set_checkpoint"):
            self.recorder.set_checkpoint(t, state, self._steps)
        if _time.perf_counter() - self._last_end >= 5.0 * self._last_cost:
            self._write()

    def step(self, t: float, dt: float, state: Any = None) -> None:
        self._steps += 1
        if state is not None and _time.perf_counter() - self._last_end >= self.checkpoint_seconds:
            if hasattr(self.recorder, "set_checkpoint"):
                self.recorder.set_checkpoint(t, state, self._steps)
            self._write()

    def finish(self, result: Any) -> None:
        if hasattr(self.recorder, "set_checkpoint"):
            self.recorder.set_checkpoint(result.t, result.state, result.n_steps)
        self._write()
        if self.error is not None:
            raise OutputError(f"could not write {str(self.path)!r}: {self.error}; the file there "
                              "(if any) holds the last snapshots written before the failure")


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
    return _open_checked(path, validate_schema)


def _open_checked(path: str | Path, validate: Any) -> Any:
    """Open a netCDF file, run ``validate(ds)`` on it, and return it loaded in memory."""
    with _open_netcdf(path) as ds:
        validate(ds)
        return ds.load()


def _open_netcdf(path: str | Path) -> Any:
    """Open a netCDF file lazily; a missing or unreadable file raises a one-line SchemaError."""
    import xarray as xr

    path = Path(path)
    if not path.is_file():
        raise SchemaError(f"{str(path)!r} does not exist")
    try:
        return xr.open_dataset(path)
    except Exception as exc:  # reader failures become one line
        raise SchemaError(f"cannot read {str(path)!r} as netCDF: {exc}") from None


def read_netcdf(path: str | Path) -> Any:
    """Open any netCDF file with xarray and load it in memory, without a layout check.

    Parameters
    ----------
    path : path
        The file.

    Returns
    -------
    xarray.Dataset
        The whole file, loaded (the file is closed).

    Raises
    ------
    SchemaError
        The file does not exist or cannot be read as netCDF (one line, no traceback).
    """
    path = Path(path)
    ds = _open_netcdf(path)
    try:
        with ds:
            return ds.load()
    except Exception as exc:  # reader failures become one line
        raise SchemaError(f"cannot read {str(path)!r} as netCDF: {exc}") from None


PARTICLE_SCHEMA = "spheredens-particles-1"
#: positions may deviate from unit length by this much (files from other codes, float32)
UNIT_TOLERANCE = 1e-6


def validate_particles(ds: Any, *, name: str = "particle file") -> None:
    """Raise :class:`SchemaError` unless ``ds`` follows spheredens-particles-1 with sane values:
    ``position`` (time, particle, component) finite unit vectors with 2 or 3 components matching
    ``domain``, ``particle_weight`` (particle) non-negative summing to 1, increasing ``time``."""
    import numpy as np

    if "position" not in ds:
        raise SchemaError(f"{name}: variable 'position' (time, particle, component) missing")
    pos = ds["position"]
    if pos.dims != ("time", "particle", "component"):
        raise SchemaError(f"{name}: 'position' has dims {pos.dims}, expected ('time', 'particle', 'component')")
    if "time" not in ds.coords and "time" not in ds:
        raise SchemaError(f"{name}: coordinate 'time' missing")
    d = pos.shape[-1]
    domain = ds.attrs.get("domain")
    expected = {"circle": 2, "sphere": 3}.get(domain)
    if d not in (2, 3) or (expected is not None and d != expected):
        raise SchemaError(f"{name}: positions have {d} components; the {domain or 'circle/sphere'} "
                          f"needs {expected or '2 or 3'}")
    x = np.asarray(pos.values, dtype=float)
    if x.shape[0] == 0 or x.shape[1] == 0:
        raise SchemaError(f"{name}: no snapshots or no particles (position has shape {x.shape})")
    if not np.all(np.isfinite(x)):
        raise SchemaError(f"{name}: 'position' holds NaN or infinite values")
    with np.errstate(all="ignore"):
        dev = float(np.abs(np.linalg.norm(x, axis=-1) - 1.0).max())
    if dev > UNIT_TOLERANCE:
        raise SchemaError(f"{name}: positions are not unit vectors (| |x| - 1 | up to {dev:.3g}, "
                          f"tolerance {UNIT_TOLERANCE:g})")
    t = np.asarray(ds["time"].values, dtype=float)
    if t.ndim != 1 or not np.all(np.isfinite(t)) or np.any(np.diff(t) <= 0):
        raise SchemaError(f"{name}: 'time' must be finite and strictly increasing")
    if "particle_weight" in ds:
        w = np.asarray(ds["particle_weight"].values, dtype=float)
        if w.shape != (pos.shape[1],) or not np.all(np.isfinite(w)) or np.any(w < 0) \
                or abs(float(w.sum()) - 1.0) > 1e-9:
            raise SchemaError(f"{name}: 'particle_weight' must be {pos.shape[1]} non-negative numbers "
                              "summing to 1")


def open_particles(path: str | Path) -> Any:
    """Open and validate a particle file (schema spheredens-particles-1); uniform weights are
    added when ``particle_weight`` is absent."""
    import numpy as np

    ds = _open_checked(path, lambda d: validate_particles(d, name=str(path)))
    if "particle_weight" not in ds:
        n = ds.sizes["particle"]
        ds["particle_weight"] = ("particle", np.full(n, 1.0 / n))
    return ds


def convert_particles(source: str | Path, *, domain: str, times: Any = None, dt: float | None = None,
                      angles: bool | None = None, attrs: dict[str, Any] | None = None) -> Any:
    """Read a particle run from a common array format and return a spheredens-particles-1 Dataset.

    Accepted: ``.npy`` holding positions (time, n, d) or angles (time, n) on the circle;
    ``.npz`` with one of the keys ``position``/``positions``/``x``/``X`` (time, n, d) or
    ``theta``/``angles`` (time, n), optionally ``time``/``t`` and ``weight``/``weights``/
    ``particle_weight``. Times come from the file, from ``times`` or from ``dt`` (t_k = k dt).

    Raises
    ------
    SchemaError
        Wrong shapes, NaN, non-unit vectors, a dimension that does not match ``domain``, or
        times of the wrong length.
    """
    import numpy as np
    import xarray as xr

    source = Path(source)
    if domain not in ("circle", "sphere"):
        raise SchemaError(f"domain must be 'circle' or 'sphere', not {domain!r}")
    if not source.is_file():
        raise SchemaError(f"{str(source)!r} does not exist")
    weight = file_times = None
    try:
        if source.suffix == ".npy":
            arr = np.load(source, allow_pickle=False)
        elif source.suffix == ".npz":
            with np.load(source, allow_pickle=False) as data:
                keys = set(data.files)
                pos_key = next((k for k in ("position", "positions", "x", "X", "theta", "angles")
                                if k in keys), None)
                if pos_key is None:
                    raise SchemaError(f"{str(source)!r} has none of the keys position, positions, x, X, "
                                      f"theta, angles (it has {', '.join(sorted(keys))})")
                arr = data[pos_key]
                if pos_key in ("theta", "angles"):
                    angles = True
                t_key = next((k for k in ("time", "t") if k in keys), None)
                file_times = data[t_key] if t_key else None
                w_key = next((k for k in ("particle_weight", "weight", "weights") if k in keys), None)
                weight = data[w_key] if w_key else None
        else:
            raise SchemaError(f"{str(source)!r}: expected a .npy or .npz file")
    except SchemaError:
        raise
    except Exception as exc:  # unreadable arrays become one line
        raise SchemaError(f"cannot read {str(source)!r}: {exc}") from None
    arr = np.asarray(arr, dtype=float)
    if angles is None:
        angles = domain == "circle" and arr.ndim == 2
    if angles:
        if domain != "circle" or arr.ndim != 2:
            raise SchemaError(f"angles must be an array (time, n) and the domain the circle; got shape "
                              f"{arr.shape} on the {domain}")
        arr = np.stack([np.cos(arr), np.sin(arr)], axis=-1)
    if arr.ndim != 3:
        raise SchemaError(f"positions must have shape (time, n, d) (or angles (time, n) on the "
                          f"circle), got {arr.shape}")
    d = {"circle": 2, "sphere": 3}[domain]
    if arr.shape[-1] != d:
        raise SchemaError(f"positions have d = {arr.shape[-1]} components, the {domain} needs {d}")
    n_t, n = arr.shape[:2]
    if file_times is not None:
        t = np.asarray(file_times, dtype=float).reshape(-1)
    elif times is not None:
        t = np.asarray(times, dtype=float).reshape(-1)
    elif dt is not None:
        t = dt * np.arange(n_t)
    else:
        raise SchemaError("no times: the file has none; give times or dt")
    if t.size != n_t:
        raise SchemaError(f"{t.size} times for {n_t} snapshots")
    w = np.full(n, 1.0 / n) if weight is None else np.asarray(weight, dtype=float).reshape(-1)
    ds = xr.Dataset({"position": (("time", "particle", "component"), arr,
                                  {"long_name": "particle position (unit vector)", "units": "1"}),
                     "particle_weight": ("particle", w, {"long_name": "particle weight", "units": "1"})},
                    coords={"time": ("time", t, {"long_name": "model time", "units": "1"})},
                    attrs={"Conventions": "CF-1.10", "spheredens_schema": PARTICLE_SCHEMA,
                           "domain": domain, "source": str(source), **(attrs or {})})
    validate_particles(ds, name=str(source))
    return ds
