"""Files: atomic netCDF writing, opening runs with a schema check.

The layouts themselves (schema names, required parts, validators, builders) live in
:mod:`spheredens.schema`; their names stay importable from here.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import shutil
import stat
import tempfile
import time as _time
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from ._lazy import xarray as xr
from ._validate import input_file_problem, netcdf_read_problem, output_file_problem
from .accessor import register_accessor
from .config import RunConfig, load_config
from .exceptions import ConfigError, OutputError, SchemaError
from .geometry import DOMAINS, get_domain
from .models import MODELS
from .problem import Problem
from .schema import (
    ANALYSIS_SCHEMA,
    COMPARE_SCHEMA,
    CONVERTED_WEIGHT_LONG_NAME,
    PARTICLE_SCHEMA,
    PARTICLE_VARIABLES,
    REQUIRED_ATTRS,
    REQUIRED_VARS,
    SCHEMA,
    UNIT_TOLERANCE,
    VALUE_KINDS,
    particle_dataset,
    validate_particles,
    validate_schema,
)
from .simulate import Observer

__all__ = [
    "FileWriter",
    "PARTICLE_SCHEMA",
    "REQUIRED_ATTRS",
    "REQUIRED_VARS",
    "SCHEMA",
    "UNIT_TOLERANCE",
    "convert_particles",
    "open_particles",
    "open_run",
    "validate_particles",
    "validate_schema",
    "write_dataset",
    "check_output_path",
    "check_output_location",
    "check_not_input",
    "read_netcdf",
]

logger = logging.getLogger(__name__)


#: files up to this size (bytes in memory) are first rendered in memory, then written with
#: plain file I/O: a full disk is then a clean ``OSError`` and nothing is left open. The netCDF
#: library writing to disk itself leaks the handle of a file it fails to close (netCDF4 raises
#: ``RuntimeError: NetCDF: HDF error``), whose space then stays taken until the process ends.
IN_MEMORY_WRITE_BYTES = 1 << 30


def write_dataset(ds: Any, path: str | Path, *, engine: str = "netcdf4") -> Path:
    """Write ``ds`` to ``path`` atomically: a temporary file in the same folder, then rename.

    A reader never sees a half-written file, and a crash during the write leaves the previous
    file intact. A file that is replaced keeps its permission bits (a mode-600 file stays 600);
    a new one gets the usual ``0o666 & ~umask``. The folder must exist: no folder is created
    (:func:`check_output_location` checks it, and creates it on request, before a run).
    Datasets up to :data:`IN_MEMORY_WRITE_BYTES` are rendered in memory first (see there).

    Raises
    ------
    OutputError
        The write failed, whatever the netCDF library raised (``OSError``, netCDF4's
        ``RuntimeError: NetCDF: HDF error`` on a full disk, ...): one line with the cause and
        the free space left, in ``reason``; the previous file at ``path`` is untouched.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    failure: Exception | None = None
    try:
        data = None
        if int(getattr(ds, "nbytes", 0)) <= IN_MEMORY_WRITE_BYTES:
            try:
                data = ds.to_netcdf(engine=engine)
            except (ValueError, NotImplementedError):  # an xarray that cannot do it (< 2025)
                data = None
        if data is not None:
            _write_bytes(tmp, data)
        else:
            ds.to_netcdf(tmp, engine=engine)
            with open(tmp, "rb") as fh:
                os.fsync(fh.fileno())
        _keep_mode(path, tmp)
        os.replace(tmp, path)
    except Exception as exc:  # the backends raise OSError, RuntimeError, ValueError, ...
        failure = exc
    finally:
        try:
            if tmp.exists():
                tmp.unlink()
        except OSError:
            pass
    if failure is not None:  # after the clean-up: the free space counts without the temporary
        reason = write_failure(path, failure)
        error = OutputError(f"could not write {str(path)!r} ({reason})")
        error.reason = reason
        raise error from failure
    with contextlib.suppress(OSError):  # the rename itself reaches the disk
        fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    return path


def _keep_mode(path: Path, tmp: Path) -> None:
    """Give ``tmp`` the permission bits of the file ``path`` it is about to replace (nothing
    when ``path`` does not exist)."""
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        return
    os.chmod(tmp, mode)


def _hdf5_end(view: memoryview) -> int:
    """The length of the netCDF-4 (HDF5) file image ``view``: its end-of-file address. The
    image netCDF4 renders in memory is padded to 64 KiB steps; the bytes after that address
    are not part of the file. The whole length for anything else (netCDF-3, unknown)."""
    head = bytes(view[:64])
    if len(head) < 64 or head[:8] != b"\x89HDF\r\n\x1a\n":
        return len(view)
    version = head[8]
    if version in (0, 1):  # superblock 0/1: the addresses after 24 (28) bytes
        size, at = head[13], 24 + (4 if version == 1 else 0) + 2 * head[13]
    elif version in (2, 3):  # base address, extension address, end-of-file address
        size, at = head[9], 12 + 2 * head[9]
    else:
        return len(view)
    if size not in (4, 8):
        return len(view)
    end = int.from_bytes(head[at : at + size], "little")
    return end if 64 <= end <= len(view) else len(view)


def _write_bytes(path: Path, data: Any) -> None:
    """Write ``data`` (bytes or a memoryview) to a new file ``path`` and fsync it."""
    view = memoryview(data).cast("B")
    view = view[: _hdf5_end(view)]
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
    try:
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


def write_failure(path: str | Path, exc: BaseException) -> str:
    """Why writing ``path`` failed, in a few words: the library's message (with its type
    when it is not an ``OSError``) and the free space of the file system."""
    if isinstance(exc, OSError) and exc.strerror:
        what = exc.strerror
    else:
        text = " ".join(str(exc).split())
        what = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    try:
        free = shutil.disk_usage(Path(path).parent).free
    except OSError:
        return what
    size = next(
        (
            f"{free / 2.0**e:.0f} {u}"
            for e, u in ((30, "GiB"), (20, "MiB"), (10, "KiB"))
            if free >= 2.0**e
        ),
        f"{free} bytes",
    )
    return f"{what}; {size} free on its file system"


#: what each output suffix holds, for the messages of :func:`check_output_location`
OUTPUT_KINDS = {".nc": "a netCDF file", ".png": "a PNG figure"}


def check_output_location(
    path: str | Path,
    *,
    suffix: str = ".nc",
    mkdir: bool = False,
    key: str | None = None,
    option: str | None = None,
    mkdir_hint: str = "mkdir=True",
) -> Path:
    """Check, before any work, that a file can be written at ``path``.

    The name ends in ``suffix`` and is not a directory; the folder holding it exists (or is
    created, with its parents, when ``mkdir`` is set: no folder is ever created otherwise) and
    is writable, which is tested by creating and removing a temporary file there, so that
    permissions, read-only mounts and a file in place of a folder are all caught. A file
    already at ``path`` must be writable (:func:`os.access`): a read-only or immutable
    (``chattr +i``) output is refused here, not after the run when its rename would fail.

    Parameters
    ----------
    path : path
        The file about to be written.
    suffix : str
        The suffix the name must have (``".nc"``, ``".png"``).
    mkdir : bool
        Create the missing folders (``--mkdir``).
    key, option : str, optional
        The configuration key (``"output.path"``) or command line option (``"--output"``) the
        path comes from, named first in the message (``key`` wins).
    mkdir_hint : str
        How the user asks for the folder to be created, for the message (``"--mkdir"`` on the
        command line).

    Returns
    -------
    Path
        ``path`` as a :class:`~pathlib.Path`.

    Raises
    ------
    ConfigError
        One line saying what is wrong with the path and how to fix it.
    """
    path = Path(path)
    name = key if key is not None else (option or "")

    def refuse(message: str) -> ConfigError:
        return ConfigError(name, message)

    if path.suffix != suffix:
        raise refuse(
            f"{str(path)!r} must end in {suffix!r} ({OUTPUT_KINDS.get(suffix, 'the output file')})"
        )
    problem = output_file_problem(path)
    if problem:  # a name too long for the file system, a loop of symbolic links
        raise refuse(f"cannot write {str(path)!r}: it {problem}")
    if path.is_dir():
        raise refuse(f"{str(path)!r} is a directory; give a file name ending in {suffix!r}")
    parent = path.parent
    if not parent.is_dir():
        blocking = next(
            (p for p in (parent, *parent.parents) if p.exists() and not p.is_dir()), None
        )
        if blocking is not None:
            raise refuse(
                f"cannot write {str(path)!r}: {str(blocking)!r} is a file, not a directory"
            )
        if not mkdir:
            raise refuse(
                f"the directory {str(parent)!r} does not exist; create it or pass {mkdir_hint}"
            )
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise refuse(
                f"cannot create the directory {str(parent)!r} ({exc.strerror or exc}); "
                "choose a writable folder"
            ) from None
    try:
        fd, probe = tempfile.mkstemp(
            prefix=f".{path.name[:200]}.probe-", dir=parent
        )  # <= 255 characters
    except OSError as exc:
        raise refuse(
            f"cannot write in the directory {str(parent)!r} ({exc.strerror or exc}); "
            "choose a writable folder"
        ) from None
    os.close(fd)
    os.unlink(probe)
    if path.is_file() and not os.access(path, os.W_OK):  # read-only, or immutable (chattr +i)
        raise refuse(
            f"{str(path)!r} exists and cannot be replaced: it is read-only or immutable; "
            "make it writable (chmod u+w; chattr -i) or choose another path"
        )
    return path


def check_not_input(
    path: str | Path, inputs: Any, *, key: str | None = None, option: str | None = None
) -> Path:
    """Refuse, before any work, an output that is one of the command's own inputs.

    Parameters
    ----------
    path : path
        A file the command is about to write.
    inputs : iterable of (str, path)
        What each input is, for the message (``"the density file"``), and its path.
    key, option : str, optional
        The configuration key or command line option the output comes from, named first in the
        message (``key`` wins).

    Returns
    -------
    Path
        ``path`` as a :class:`~pathlib.Path`.

    Raises
    ------
    ConfigError
        ``path`` is the same file as an input: the same name once resolved, or, when both
        exist, the same file through a link (:func:`os.path.samefile`); also with
        ``--overwrite``.
    """
    path = Path(path)
    for what, source in inputs:
        if source is None:
            continue
        source = Path(source)
        try:
            same = path.resolve() == source.resolve() or (
                path.exists() and source.exists() and os.path.samefile(path, source)
            )
        except (OSError, RuntimeError):  # a symlink loop: not a file that can be read either
            same = False
        if same:
            raise ConfigError(
                key if key is not None else (option or ""),
                f"{str(path)!r} is {what}, an input of this command: a command never "
                "writes over its own input; choose another output path",
            )
    return path


def check_output_path(
    path: str | Path,
    *,
    overwrite: bool,
    key: str | None = None,
    resumable: bool = False,
    option: str | None = None,
    suffix: str | None = None,
    mkdir: bool = False,
    mkdir_hint: str = "mkdir=True",
) -> Path:
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
    suffix : str, optional
        When given, first check the location with :func:`check_output_location` (the name
        ends in ``suffix``, its folder exists or ``mkdir`` creates it, and is writable), also
        with ``overwrite``.
    mkdir, mkdir_hint
        Passed to :func:`check_output_location`.

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
    if suffix is not None:
        check_output_location(
            path, suffix=suffix, mkdir=mkdir, key=key, option=option, mkdir_hint=mkdir_hint
        )
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
    ``--resume`` continues bit for bit. A failed write (disk full, whatever the netCDF library
    raises: :func:`write_dataset`) leaves the previous file intact and is reported at once in
    one warning line; the run goes on, keeping everything in memory, and the next occasion
    tries again. If the last write fails, :meth:`finish` raises :class:`OutputError`, one line
    saying what the file there holds.
    """

    def __init__(
        self, recorder: Any, path: str | Path, *, checkpoint_seconds: float = 60.0
    ) -> None:
        self.recorder = recorder
        self.path = Path(path)
        self.checkpoint_seconds = float(checkpoint_seconds)
        self._last_end = -float("inf")
        self._last_cost = 0.0
        self._steps = 0
        self.error: OutputError | None = None
        self.failed_writes = 0
        self._first_reason = ""  # of the current run of failed writes
        #: (snapshots, checkpoint time) of the last file written by this run, None before
        self.last_written: tuple[int, float] | None = None

    def _write(self) -> None:
        t0 = _time.perf_counter()
        ds = self.recorder.dataset()
        try:
            write_dataset(ds, self.path)
        except OutputError as exc:
            if self.error is None:  # once per run of failures: the run goes on
                self._first_reason = str(getattr(exc, "reason", exc))
                logger.warning(
                    "could not write %s (%s); the run goes on and will try "
                    "again at the next snapshot",
                    self.path,
                    self._first_reason,
                )
            self.error = exc
            self.failed_writes += 1
            self._last_end = _time.perf_counter()
            return
        if self.error is not None:
            logger.warning(
                "wrote %s again, after %d failed attempt(s)", self.path, self.failed_writes
            )
        self.error, self.failed_writes = None, 0
        first = self.last_written is None
        checkpoint = getattr(self.recorder, "checkpoint", None)
        self.last_written = (
            len(getattr(self.recorder, "times", ())),
            float(checkpoint[0]) if checkpoint is not None else float("nan"),
        )
        self._last_end = _time.perf_counter()
        # the first write carries the netCDF library's start-up: it does not set the pace
        self._last_cost = 0.0 if first else self._last_end - t0

    def start(self, info: dict[str, Any]) -> None:
        self._steps = int(info.get("steps_done", 0))

    def observe(self, t: float, state: Any) -> None:
        self.recorder.set_checkpoint(t, state, self._steps)
        if _time.perf_counter() - self._last_end >= 5.0 * self._last_cost:
            self._write()

    def step(self, t: float, dt: float, state: Any = None) -> None:
        self._steps += 1
        if state is not None and _time.perf_counter() - self._last_end >= self.checkpoint_seconds:
            self.recorder.set_checkpoint(t, state, self._steps)
            self._write()

    def finish(self, result: Any) -> None:
        self.recorder.set_checkpoint(result.t, result.state, result.n_steps)
        self._write()
        if self.error is not None:
            if self.last_written is not None:
                n, t = self.last_written
                kept = (
                    f"the file there holds the last good write ({n} snapshot(s), checkpoint at "
                    f"t = {t:g}): fix the cause (disk space, permissions) and continue it "
                    "with --resume"
                )
            else:
                kept = "this run wrote no file there (a file from before, if any, is untouched)"
            reason = str(getattr(self.error, "reason", self.error))
            first = self._first_reason or reason
            if first.split(";")[0] != reason.split(";")[0]:  # later failures can be consequences
                reason += f"; first failure: {first.split(';')[0]}"
            raise OutputError(f"could not write {str(self.path)!r} ({reason}); {kept}")


#: each kind of spheredens file (by its ``spheredens_schema``): what it is, and what opens it
FILE_OPENERS = {
    SCHEMA: ("a density file", "spheredens.open_run"),
    PARTICLE_SCHEMA: ("a particle file", "spheredens.open_particles"),
    COMPARE_SCHEMA: ("a comparison file of spheredens compare", "spheredens.io.read_netcdf"),
    "spheredens-sweep-1": ("a sweep's combined file", "spheredens.analysis.open_combined"),
    ANALYSIS_SCHEMA: ("an analysis file of analyze-beta", "spheredens.io.read_netcdf"),
}


def _check_kind(ds: Any, path: str | Path, expected: str) -> None:
    """Refuse, in one line naming the function that opens it, a spheredens file of another kind
    than ``expected`` (a particle file given to :func:`open_run`, a run to :func:`open_particles`,
    a comparison, sweep or analysis file to either), instead of listing what it lacks."""
    schema = label = str(ds.attrs.get("spheredens_schema", ""))
    if not schema:  # files without the attribute (older, converted by hand): by their variables
        schema = (
            PARTICLE_SCHEMA
            if "position" in ds.variables and "rho" not in ds.variables
            else SCHEMA
            if "rho" in ds.variables and "position" not in ds.variables
            else ""
        )
        label = "no spheredens_schema attribute"
    if schema == expected or schema not in FILE_OPENERS:
        return
    what, opener = FILE_OPENERS[schema]
    wanted = FILE_OPENERS[expected][0]
    raise SchemaError(
        f"{str(path)!r} is {what} ({label}), not {wanted} ({expected}); open it with {opener}"
    )


def open_run(path: str | Path) -> Any:
    """Open a run file with xarray, check it follows schema ``spheredens-1``, load it.

    Raises
    ------
    SchemaError
        When the file cannot be read or lacks part of the layout; a file of another kind (a
        particle file, a comparison, sweep or analysis file) is named as such, with the
        function that opens it (:data:`FILE_OPENERS`).
    """
    return _open_checked(path, lambda ds: (_check_kind(ds, path, SCHEMA), validate_schema(ds)))


def _open_checked(path: str | Path, validate: Any) -> Any:
    """Open a netCDF file, run ``validate(ds)`` on it, and return it loaded in memory."""
    with _open_netcdf(path) as ds:
        validate(ds)
        return ds.load()


def _open_netcdf(path: str | Path) -> Any:
    """Open a netCDF file lazily; a missing or unreadable file raises a one-line SchemaError."""

    register_accessor()
    path = Path(path)
    problem = input_file_problem(path, "a netCDF file")
    if problem:  # missing, a directory or device, a link loop, a name too long
        raise SchemaError(f"{str(path)!r} {problem}")
    problem = netcdf_read_problem(path)
    if problem:
        raise SchemaError(f"cannot read {str(path)!r} as netCDF: {problem}")
    try:
        return xr.open_dataset(path)
    except Exception as exc:  # reader failures become one line
        raise SchemaError(
            f"cannot read {str(path)!r} as netCDF: {netcdf_read_problem(path, exc)}"
        ) from None


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
        raise SchemaError(
            f"cannot read {str(path)!r} as netCDF: {netcdf_read_problem(path, exc)}"
        ) from None


def open_particles(path: str | Path) -> Any:
    """Open and validate a particle file (schema spheredens-particles-1); uniform weights are
    added when ``particle_weight`` is absent. A file of another kind (a density run, a
    comparison, sweep or analysis file) is refused in one line naming its opener."""
    ds = _open_checked(
        path,
        lambda d: (_check_kind(d, path, PARTICLE_SCHEMA), validate_particles(d, name=str(path))),
    )
    if "particle_weight" not in ds:
        n = ds.sizes["particle"]
        ds["particle_weight"] = ("particle", np.full(n, 1.0 / n))
    return ds


#: the axes of the arrays :func:`convert_particles` reads, in the order spheredens stores them
POSITION_AXES = ("time", "n", "d")
ANGLE_AXES = ("time", "n")
#: how far angles may lie outside [-pi, pi] or [0, 2 pi] (a float32 pi is 8.7e-8 above pi)
ANGLE_SLACK = UNIT_TOLERANCE
#: how the messages of :func:`convert_particles` name its options (the command line passes its own)
CONVERT_OPTIONS = {
    "times": "times=[...]",
    "dt": "dt=...",
    "degrees": "degrees=True",
    "axes": "axes",
    "angles": "angles=True",
    "model": "attrs['model']",
}
#: times t_k = k dt up to the configuration's t_end (1 + this) are within it (as compare's TIME_TOLERANCE)
SPAN_TOLERANCE = 1e-9


def _real(values: Any, what: str) -> Any:
    """``values`` as a float64 array; a one-line SchemaError unless they are real numbers."""
    arr = np.asarray(values)
    if arr.dtype.kind not in "iuf":
        raise SchemaError(
            f"{what} holds {VALUE_KINDS.get(arr.dtype.kind, 'non-numbers')} (dtype {arr.dtype}), "
            "not real numbers"
        )
    return arr.astype(float)


def _parse_axes(axes: Any, option: str) -> tuple[str, ...] | None:
    """``axes`` ("n,time,d" or a sequence of names) as a tuple, checked: a permutation of
    :data:`POSITION_AXES` (positions) or :data:`ANGLE_AXES` (angles)."""
    if axes is None:
        return None
    names = (
        tuple(a.strip() for a in axes.split(","))
        if isinstance(axes, str)
        else tuple(map(str, axes))
    )
    if sorted(names) not in (sorted(POSITION_AXES), sorted(ANGLE_AXES)):
        shown = axes if isinstance(axes, str) else ",".join(names)
        raise ConfigError(
            option,
            f"{shown[:100]!r} must name each axis of the array once, in the array's "
            "order: time, n and d for positions (e.g. n,time,d), time and n for angles (e.g. n,time)",
        )
    return names


def _layout(order: tuple[str, ...], sizes: Mapping[str, int]) -> str:
    """The shape that ``order`` expects, e.g. "(41, n, 2)": the ``sizes`` known, names otherwise."""
    return "(" + ", ".join(str(sizes[a]) if a in sizes else a for a in order) + ")"


def _axes_hint(
    shape: tuple[int, ...],
    order: tuple[str, ...],
    sizes: Mapping[str, int],
    option: str,
    at_most: Mapping[str, int] | None = None,
) -> str:
    """ "; if the array is (n, time, d), give --axes n,time,d" for the first other order of the
    axes under which ``shape`` has the ``sizes`` (and axes no longer than ``at_most``), or ""
    when there is none."""
    for other in itertools.permutations(sorted(order, key=POSITION_AXES.index)):
        if (
            other != order
            and all(shape[other.index(a)] == size for a, size in sizes.items())
            and all(shape[other.index(a)] <= most for a, most in (at_most or {}).items())
        ):
            return f"; if the array is ({', '.join(other)}), give {option} {','.join(other)}"
    return ""


def convert_particles(
    source: str | Path,
    *,
    domain: str | None = None,
    times: Any = None,
    dt: float | None = None,
    angles: bool | None = None,
    degrees: bool = False,
    axes: str | Any = None,
    attrs: dict[str, Any] | None = None,
    config: Any = None,
    options: Mapping[str, str] | None = None,
    notify: Callable[[str, str], None] | None = None,
) -> Any:
    """Read particles computed by another code: ``spheredens convert-particles IN OUT``.

    Accepted: ``.npy`` holding positions (time, n, d) or angles (time, n) on the circle;
    ``.npz`` with one of the keys ``position``/``positions``/``x``/``X`` (time, n, d) or
    ``theta``/``angles`` (time, n), optionally ``time``/``t`` and ``weight``/``weights``/
    ``particle_weight``. Times come from the file, from ``times`` or from ``dt`` (t_k = k dt).

    What is given is checked, each in one line: real numbers; angles in [-pi, pi] or [0, 2 pi]
    (radians; ``degrees`` converts degrees); positions unit vectors to ``UNIT_TOLERANCE``
    (1e-6; the message names the worst row); the length of the time axis equal to the number
    of times given (file, ``times``), and of the particle axis to the number of weights (the
    message names the shape read, the shape expected and the ``axes`` that would fit); at least
    one snapshot and one particle; a registered model name in ``attrs``. With ``dt`` alone (no
    times, no weights, no ``axes``) nothing counts the axes, and no layout is guessed from the
    shape: with ``config`` the times k dt must end by its ``time.t_end``, and a time axis longer
    than the particle axis is told to ``notify``. The file records how it was read (attribute
    ``source_layout``, e.g. "shape (1000, 41, 3) read as (time, n, d)").

    Parameters
    ----------
    source : path
        The ``.npy`` or ``.npz`` file.
    domain : str, optional
        ``"circle"`` or ``"sphere"``; required unless ``config`` gives it.
    times : sequence of float, optional
        The snapshot times, when the file has none (their number is checked against the time
        axis).
    dt : float, optional
        Instead of ``times``: t_k = k dt. With ``dt`` alone the number of times is the length of
        the time axis: it is checked against ``config``'s ``time.t_end`` (t_k <= t_end, else
        refused naming the ``axes`` that fits; ``axes`` stating the layout lifts the check), and
        without ``config`` only told (``notify``) when the time axis is longer than the particle
        axis. State ``axes`` unless the array is (time, n, d).
    angles : bool, optional
        The array holds angles on the circle (inferred for a 2-d array on the circle and for
        the keys ``theta``/``angles``).
    degrees : bool
        The angles are in degrees ([-180, 180] or [0, 360]; implies ``angles``).
    axes : str or sequence of str, optional
        The order of the array's axes (default ``"time,n,d"``, for angles ``"time,n"``), e.g.
        ``"n,time,d"`` for an array (particle, time, component), ``"n,time"`` for angles.
    config : RunConfig or path of a TOML run configuration, optional
        The model the particles were run with: the file then records it as a particle run of
        spheredens does (attributes ``model``, ``beta``, ``config``; ``Q``, ``K``, ``V``; usa_av:
        ``slice_xi``, ``slice_weight``), and :func:`spheredens.compare` checks it against the
        density. Without it the file carries no model and compare says it was not checked.
        Its ``[particles]`` table is not used: its ``n`` and ``dt`` (the integrator's step)
        describe the runs of ``spheredens particles``, not another code's snapshots.
    attrs : dict, optional
        Attributes to record (e.g. ``{"model": "sa", "beta": 30.0}``); ``model`` must be a
        registered model name.
    options : mapping, optional
        How the messages name the options ``times``, ``dt``, ``degrees``, ``axes``, ``angles``
        and ``model`` (default :data:`CONVERT_OPTIONS`, the keyword arguments; the command line
        passes ``--times``, ...).
    notify : callable, optional
        ``notify(kind, message)``, told ``("layout", message)`` when nothing counts the axes
        (``dt`` alone, no weights, no ``axes``) and the time axis is longer than the particle
        axis: how the array was read, and that ``axes`` reads another layout (the command line
        prints it as a ``spheredens: note:`` line). Without it the message is logged (INFO).

    Returns
    -------
    xarray.Dataset
        Schema spheredens-particles-1, ready for :func:`spheredens.compare` (write it with
        :func:`spheredens.write_dataset`).

    Raises
    ------
    SchemaError
        Not real numbers, angles out of range, non-unit vectors, NaN, wrong shapes or axes, a
        dimension that does not match ``domain``, times or weights of the wrong length, times
        k dt past ``config``'s t_end, no snapshot or no particle.
    ConfigError
        An invalid ``config`` or ``axes``, an unknown model, or a configuration whose domain or
        model disagrees with ``domain`` or the ``model``/``beta`` of ``attrs``.

    Example
    -------
    >>> import numpy as np, spheredens as sd
    >>> theta = np.linspace(0, 2 * np.pi, 100, endpoint=False)
    >>> np.save("tokens.npy", np.stack([theta, (theta + 0.1) % (2 * np.pi)]))   # 2 times
    >>> p = sd.convert_particles("tokens.npy", domain="circle", dt=0.5)
    >>> path = sd.write_dataset(p, "tokens.nc")
    """
    source = Path(source)
    say = {**CONVERT_OPTIONS, **(options or {})}
    attrs = dict(attrs or {})
    if "model" in attrs:  # a name of MODELS, as in a run configuration
        MODELS.get(attrs["model"], say["model"])
    layout = _parse_axes(axes, say["axes"])
    if times is not None and dt is not None:
        raise ConfigError(
            say["dt"],
            f"give the snapshot times ({say['times']}) or their spacing ({say['dt']}), not both",
        )
    if dt is not None:
        if (
            isinstance(dt, bool)
            or not isinstance(dt, (int, float, np.integer, np.floating))
            or not np.isfinite(dt)
            or dt <= 0
        ):
            raise ConfigError(say["dt"], f"must be a finite number > 0, got {dt!r:.100}")
        dt = float(dt)
    stamp = _model_stamp(config, domain, attrs) if config is not None else None
    if stamp is not None:
        domain = stamp["domain"]
    if domain is None:
        raise SchemaError(
            "give the domain ('circle' or 'sphere') or the run configuration of the particles"
        )
    if domain not in DOMAINS:
        raise SchemaError(f"domain must be {' or '.join(map(repr, DOMAINS))}, not {domain!r}")
    space = get_domain(domain)
    d, from_angles = space.d, space.points_of_angles  # the circle: angles -> (cos, sin)
    problem = input_file_problem(source, "a .npy or .npz file")
    if problem:
        raise SchemaError(f"{str(source)!r} {problem}")
    src = repr(str(source))
    weight = file_times = None
    what, t_what, w_what = src, "", ""
    try:
        if source.suffix == ".npy":
            arr = np.load(source, allow_pickle=False)
        elif source.suffix == ".npz":
            with np.load(source, allow_pickle=False) as data:
                keys = set(data.files)
                pos_key = next(
                    (
                        k
                        for k in ("position", "positions", "x", "X", "theta", "angles")
                        if k in keys
                    ),
                    None,
                )
                if pos_key is None:
                    raise SchemaError(
                        f"{src} has none of the keys position, positions, x, X, "
                        f"theta, angles (it has {', '.join(sorted(keys))})"
                    )
                arr = data[pos_key]
                what = f"{pos_key!r} of {src}"
                if pos_key in ("theta", "angles"):
                    angles = True
                t_key = next((k for k in ("time", "t") if k in keys), None)
                file_times = data[t_key] if t_key else None
                t_what = f"{t_key!r} of {src}"
                w_key = next(
                    (k for k in ("particle_weight", "weight", "weights") if k in keys), None
                )
                weight = data[w_key] if w_key else None
                w_what = f"{w_key!r} of {src}"
        else:
            raise SchemaError(f"{src}: expected a .npy or .npz file")
    except SchemaError:
        raise
    except Exception as exc:  # unreadable arrays become one line
        raise SchemaError(f"cannot read {src}: {exc}") from None
    arr = _real(arr, what)
    if layout is not None and len(layout) != arr.ndim:
        raise ConfigError(
            say["axes"],
            f"{','.join(layout)} names {len(layout)} axes; {what} has {arr.ndim} "
            f"(shape {arr.shape})",
        )
    if degrees:
        if angles is False or (angles is None and arr.ndim != 2):
            raise SchemaError(
                f"{what} holds positions (shape {arr.shape}); {say['degrees']} is for angles "
                "(time, n) on the circle"
            )
        angles = True
    if angles is None:
        angles = from_angles is not None and arr.ndim == 2
    if angles:
        if from_angles is None or arr.ndim != 2:
            raise SchemaError(
                f"angles must be an array (time, n) and the domain the circle; got shape "
                f"{arr.shape} on the {domain}"
            )
    elif arr.ndim != 3:
        raise SchemaError(
            f"positions must have shape (time, n, d) (or angles (time, n) on the "
            f"circle), got {arr.shape}"
        )
    expected = ANGLE_AXES if angles else POSITION_AXES
    order = layout or expected
    shape = arr.shape  # as read, in the order ``order``
    arr = np.transpose(arr, [order.index(a) for a in expected])  # now (time, n[, d])
    read = f"{what} of shape {shape} is read as ({', '.join(order)})"
    if not angles and arr.shape[-1] != d:
        raise SchemaError(
            f"positions have d = {arr.shape[-1]} components, the {domain} needs {d}: "
            f"{read}, expected {_layout(order, {'d': d})}"
            f"{_axes_hint(shape, order, {'d': d}, say['axes'])}"
        )
    n_t, n = arr.shape[:2]
    if n_t == 0 or n == 0:
        raise SchemaError(f"no snapshots or no particles: {read}: {n_t} times, {n} particles")
    sizes = {} if angles else {"d": d}
    if file_times is not None:
        if times is not None or dt is not None:
            raise ConfigError(
                say["times"] if times is not None else say["dt"],
                f"{src} holds its own times ({t_what}); give no {say['times']} or {say['dt']}",
            )
        t, given = _real(file_times, t_what).reshape(-1), t_what
    elif times is not None:
        t, given = _real(times, "the times").reshape(-1), say["times"]
    elif dt is not None:
        t, given = dt * np.arange(n_t), None  # as many times as the time axis has: nothing to check
    else:
        raise SchemaError(
            f"no times: {src} has none (keys 'time', 't'); give the snapshot times with "
            f"{say['times']} or their spacing with {say['dt']}"
        )
    if given is not None and t.size != n_t:
        sizes["time"] = t.size
        raise SchemaError(
            f"{t.size} times for {n_t} snapshots: {read}; with {t.size} times ({given}) "
            f"expected {_layout(order, sizes)}{_axes_hint(shape, order, sizes, say['axes'])}"
        )
    w = np.full(n, 1.0 / n) if weight is None else _real(weight, w_what).reshape(-1)
    if w.size != n:
        sizes.update({"n": w.size})
        raise SchemaError(
            f"{w.size} weights ({w_what}) for {n} particles: {read}; with {w.size} weights "
            f"expected {_layout(order, sizes)}{_axes_hint(shape, order, sizes, say['axes'])}"
        )
    if given is None and weight is None and layout is None:  # nothing counts the axes: --dt alone
        _check_unconfirmed_layout(t, dt, n, shape, order, sizes, read, stamp, say, notify)
    if angles:
        if degrees:
            arr = np.deg2rad(arr)
        _check_angles(arr, what, degrees=degrees, option=say["degrees"])
        arr = from_angles(arr)
    _check_unit_rows(arr, what, order, angles=angles)
    extra = {k: v for k, v in attrs.items() if stamp is None or k not in ("model", "beta")}
    if stamp is not None:
        extra["model_source"] = stamp["source"]
    extra["source_layout"] = f"shape {shape} read as ({', '.join(order)})"
    ds = particle_dataset(
        t,
        arr,
        w,
        domain=domain,
        attrs={"source": str(source), **extra},
        weight_long_name=CONVERTED_WEIGHT_LONG_NAME,
        model=None if stamp is None else stamp["model"],
        config=None if stamp is None else stamp["config"],
    )
    if (
        stamp is not None and stamp["slices"] is not None
    ):  # usa_av: the labels and masses of the slices
        xi, xi_weight = stamp["slices"]
        ds["slice_xi"] = PARTICLE_VARIABLES["slice_xi"].entry(np.asarray(xi, dtype=float))
        ds["slice_weight"] = PARTICLE_VARIABLES["slice_weight"].entry(
            np.asarray(xi_weight, dtype=float)
        )
    validate_particles(ds, name=str(source))
    return ds


def converted_summary(ds: Any) -> str:
    """What :func:`convert_particles` read, in words for its "wrote" line: "41 times, t = 0 .. 40,
    dt 1; 1000 particles; d = 3; shape (41, 1000, 3) read as (time, n, d)" (the spacing when the
    times are evenly spaced, to 1e-9 relative)."""
    t = np.asarray(ds["time"].values, dtype=float)
    span = f"t = {t[0]:g}" if t.size == 1 else f"t = {t[0]:g} .. {t[-1]:g}"
    steps = np.diff(t)
    if steps.size and np.all(np.abs(steps - steps[0]) <= 1e-9 * max(abs(steps[0]), abs(t[-1]))):
        span += f", dt {steps[0]:g}"
    n = ds.sizes["particle"]
    words = [
        f"{t.size} time{'s' if t.size != 1 else ''}, {span}",
        f"{n} particle{'s' if n != 1 else ''}",
        f"d = {ds.sizes['component']}",
    ]
    if "source_layout" in ds.attrs:
        words.append(str(ds.attrs["source_layout"]))
    return "; ".join(words)


def _check_unconfirmed_layout(
    t: Any,
    dt: float,
    n: int,
    shape: tuple[int, ...],
    order: tuple[str, ...],
    sizes: Mapping[str, int],
    read: str,
    stamp: dict[str, Any] | None,
    say: Mapping[str, str],
    notify: Callable[[str, str], None] | None,
) -> None:
    """The checks of an array whose axes nothing counts (times t_k = k dt from ``dt`` alone, no
    weights, no ``axes``): no guess from the shape alone.

    With a configuration (``stamp``), the times must end by its ``time.t_end`` (to
    :data:`SPAN_TOLERANCE`): a time axis longer than t_end / dt + 1 is refused in one line naming
    the shape read, the shape expected and the ``axes`` that fits (an (n, time, d) array read
    as (time, n, d) has n times); ``axes`` stating the layout lifts the check. Otherwise, when
    the time axis is longer than the particle axis, ``notify("layout", ...)`` says how the array
    was read and that ``axes`` reads another layout (the module's logger when ``notify`` is
    None)."""
    n_t = t.size
    if stamp is not None:
        t_end = stamp["t_end"]
        limit = t_end + SPAN_TOLERANCE * max(1.0, t_end)
        if t[-1] > limit:
            most = int(np.floor(limit / dt)) + 1
            hint = _axes_hint(shape, order, sizes, say["axes"], at_most={"time": most})
            raise SchemaError(
                f"{n_t} times of spacing {dt:g} ({say['dt']}) end at t = {t[-1]:g}, after t_end = "
                f"{t_end:g} of {stamp['named']}: {read}; up to t_end fit at most "
                f"{most} times, expected {_layout(order, {**sizes, 'time': f'<= {most}'})}{hint} "
                f"({say['axes']} {','.join(order)} keeps this reading)"
            )
    if n_t > n:
        other = ",".join("n" if a == "time" else "time" if a == "n" else a for a in order)
        message = (
            f"{read}: {n_t} times x {n} particles, more times than particles ({say['dt']} gives no "
            f"count of times to check); give {say['axes']} if the array is another layout, e.g. "
            f"{say['axes']} {other}"
        )
        if notify is None:
            logger.info(message)
        else:
            notify("layout", message)


def _check_angles(theta: Any, what: str, *, degrees: bool, option: str) -> None:
    """Refuse angles (radians) not all in [-pi, pi] and not all in [0, 2 pi], to
    :data:`ANGLE_SLACK`: degrees read as radians, or unwrapped angles. NaN is left to the
    position check."""
    finite = theta[np.isfinite(theta)]
    if finite.size == 0:
        return
    lo, hi = float(finite.min()), float(finite.max())
    if (lo >= -np.pi - ANGLE_SLACK and hi <= np.pi + ANGLE_SLACK) or (
        lo >= -ANGLE_SLACK and hi <= 2 * np.pi + ANGLE_SLACK
    ):
        return
    if degrees:
        raise SchemaError(
            f"{what}: angles range over [{np.rad2deg(lo):.6g}, {np.rad2deg(hi):.6g}] degrees, "
            "outside [-180, 180] and [0, 360]; wrap them into [0, 360) first"
        )
    raise SchemaError(
        f"{what}: angles range over [{lo:.6g}, {hi:.6g}], outside [-pi, pi] and [0, 2 pi]: "
        f"angles in degrees need {option}; unwrapped radians must be wrapped into [0, 2 pi) "
        "first (theta % (2 pi))"
    )


def _check_unit_rows(x: Any, what: str, order: tuple[str, ...], *, angles: bool) -> None:
    """Refuse positions ``x`` (time, n, d) that are not finite unit vectors to
    :data:`UNIT_TOLERANCE`, naming the worst row by its index in the array as read (``order``)."""

    def row(k: int, i: int) -> str:
        index = {"time": k, "n": i}
        return f"[{', '.join(str(index[a]) for a in order if a != 'd')}] (time {k}, particle {i})"

    bad = ~np.all(np.isfinite(x), axis=-1)
    if bad.any():
        k, i = np.argwhere(bad)[0]
        raise SchemaError(
            f"{what}: {'angles' if angles else 'positions'} hold NaN or infinite values "
            f"(the first at {row(k, i)})"
        )
    with np.errstate(all="ignore"):
        norm = np.linalg.norm(x, axis=-1)
    dev = np.abs(norm - 1.0)
    k, i = np.unravel_index(int(np.argmax(dev)), dev.shape)
    if dev[k, i] > UNIT_TOLERANCE:
        raise SchemaError(
            f"{what}: positions are not unit vectors to {UNIT_TOLERANCE:g}: the worst row "
            f"is {row(k, i)}, of norm {norm[k, i]:.9g}"
        )


def _model_stamp(config: Any, domain: str | None, attrs: dict[str, Any]) -> dict[str, Any]:
    """The model of ``config`` (a RunConfig or a TOML path) for :func:`convert_particles`:
    ``model``, ``config`` (TOML text), ``domain``, ``slices`` ((xi, xi_weight) or None) and
    ``source`` (where it came from), checked against ``domain`` and ``attrs``' model and beta."""
    source = "the given configuration"
    if not isinstance(config, RunConfig):
        source = str(config)
        config = load_config(config)
    model = Problem.from_config(config).model
    where = "--config" if source == "the given configuration" else source
    if domain is not None and domain != config.domain.name:
        raise ConfigError(
            "domain",
            f"{domain!r} disagrees with the configuration {where}, which is on the "
            f"{config.domain.name}",
        )
    if "model" in attrs and str(attrs["model"]) != model.name:
        raise ConfigError(
            "model",
            f"{attrs['model']!r} disagrees with the configuration {where} "
            f"(model {model.name!r}); give one of them",
        )
    if "beta" in attrs and abs(float(attrs["beta"]) - float(model.beta)) > 1e-12 * abs(
        float(model.beta)
    ):
        raise ConfigError(
            "beta",
            f"{float(attrs['beta']):g} disagrees with the configuration {where} "
            f"(beta = {float(model.beta):g}); give one of them",
        )
    aux = model.auxiliary
    return {
        "model": model,
        "config": config.to_toml(),
        "domain": config.domain.name,
        "slices": None if aux is None else (aux.xi, aux.weight),
        "source": f"stamped from {source} by convert-particles",
        "named": source if source == "the given configuration" else f"the configuration {source}",
        "t_end": float(config.time.t_end),
    }
