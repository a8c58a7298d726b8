"""Files: atomic netCDF writing, the checks of output paths, and opening a file of any kind with
the check of its kind (:func:`open_file`; :func:`open_run`, :func:`open_particles`).

The layouts themselves (schema names, required parts, validators, builders) live in
:mod:`spheredens.schema` (their names stay importable from here); the reading of other codes'
particle arrays is :mod:`spheredens.convert`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import stat
import tempfile
import time as _time
from pathlib import Path
from typing import Any

import numpy as np

from . import accessor  # noqa: F401 (ds.sd of every Dataset, registered with xarray's import)
from ._lazy import xarray as xr
from ._validate import input_file_problem, netcdf_read_problem, output_file_problem
from .exceptions import ConfigError, OutputError, SchemaError
from .result_schema import validate_comparison
from .schema import (
    FILE_KINDS,
    PARTICLE_SCHEMA,
    REQUIRED_ATTRS,
    REQUIRED_VARS,
    SCHEMA,
    UNIT_TOLERANCE,
    file_kind,
    file_schema,
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
    "open_file",
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

    Returns ``path`` as a :class:`~pathlib.Path`, and raises :class:`ConfigError` when
    ``path`` is the same file as an input: the same name once resolved, or, when both exist,
    the same file through a link (:func:`os.path.samefile`); also with ``--overwrite``.
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


#: each kind of spheredens file (:func:`spheredens.schema.file_kind`): what it is, and what
#: opens it
FILE_OPENERS = {
    "density": ("a density file", "spheredens.open_run"),
    "particles": ("a particle file", "spheredens.open_particles"),
    "comparison": ("a comparison file of spheredens compare", "spheredens.io.read_netcdf"),
    "sweep": ("a sweep's combined file", "spheredens.analysis.open_combined"),
    "analysis": ("an analysis file of analyze-beta", "spheredens.io.read_netcdf"),
}
#: the schema of each kind of file
KIND_SCHEMAS = {kind: schema for schema, kind in FILE_KINDS.items()}

#: the check of each kind of file, ``(ds, path) -> None`` (raises SchemaError)
VALIDATORS = {
    "density": lambda ds, path: validate_schema(ds),
    "particles": lambda ds, path: validate_particles(ds, name=str(path)),
    "comparison": lambda ds, path: validate_comparison(ds, str(path)),
}


def _check_kind(ds: Any, path: str | Path, kind: str, expected: str) -> None:
    """Refuse, in one line naming the function that opens it, a spheredens file of another kind
    than ``expected`` (a particle file given to :func:`open_run`, a run to :func:`open_particles`,
    a comparison, sweep or analysis file to either), instead of listing what it lacks."""
    if kind == expected or kind not in FILE_OPENERS:
        return
    what, opener = FILE_OPENERS[kind]
    raise SchemaError(
        f"{str(path)!r} is {what} ({file_schema(ds)}), not {FILE_OPENERS[expected][0]} "
        f"({KIND_SCHEMAS[expected]}); open it with {opener}"
    )


def with_particle_weights(ds: Any) -> Any:
    """``ds`` with uniform ``particle_weight`` (1 / n each) added when a particle file has none."""
    if "particle_weight" not in ds:
        n = ds.sizes["particle"]
        ds["particle_weight"] = ("particle", np.full(n, 1.0 / n))
    return ds


def open_file(path: str | Path, expected: str | None = None) -> tuple[str, Any]:
    """Open a spheredens file of any kind, check it by its kind and load it in memory.

    Parameters
    ----------
    path : path
        The netCDF file.
    expected : str, optional
        The kind wanted (``"density"``, ``"particles"``, ...): a file of another known kind is
        refused in one line naming the function that opens it (:data:`FILE_OPENERS`), and the
        file is checked as one of this kind.

    Returns
    -------
    (str, xarray.Dataset)
        The kind of the file (:func:`spheredens.schema.file_kind`) and its Dataset: a density
        file checked by :func:`~spheredens.schema.validate_schema`, a particle file by
        :func:`~spheredens.schema.validate_particles` (uniform ``particle_weight`` added when
        absent), a comparison file for its W2 variables; the other kinds as they are.

    Raises
    ------
    SchemaError
        The file is missing or unreadable, of another kind than ``expected``, or lacks part of
        its layout (one line).
    """
    with _open_netcdf(path) as ds:
        kind = file_kind(ds)
        if expected is not None:
            _check_kind(ds, path, kind, expected)
        check = VALIDATORS.get(expected or kind)
        if check is not None:
            check(ds, path)
        ds = ds.load()
    if (expected or kind) == "particles":
        ds = with_particle_weights(ds)
    return kind, ds


def open_run(path: str | Path) -> Any:
    """Open a run file with xarray, check it follows schema ``spheredens-1``, load it.

    Raises
    ------
    SchemaError
        When the file cannot be read or lacks part of the layout; a file of another kind (a
        particle file, a comparison, sweep or analysis file) is named as such, with the
        function that opens it (:data:`FILE_OPENERS`).
    """
    return open_file(path, "density")[1]


def _open_netcdf(path: str | Path) -> Any:
    """Open a netCDF file lazily; a missing or unreadable file raises a one-line SchemaError."""
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
    return open_file(path, "particles")[1]
