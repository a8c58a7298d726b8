"""``run(config)``: configuration -> problem -> scheme -> simulate -> Dataset (and file)."""
from __future__ import annotations

import logging
import tomllib
from pathlib import Path
from typing import Any, Mapping

from .config import RunConfig, config_from_dict, load_config
from .exceptions import ConfigError, SchemaError, SimulationError
from .io import FileWriter, check_output_location, check_output_path, open_run
from .locking import output_lock
from .problem import Problem
from .recorder import Recorder
from .schemes import make_scheme
from .simulate import Progress, simulate

logger = logging.getLogger(__name__)


def as_config(config: RunConfig | Mapping[str, Any] | str | Path) -> RunConfig:
    """A :class:`RunConfig` from a RunConfig, a nested dict, or the path of a TOML file."""
    if isinstance(config, RunConfig):
        return config
    if isinstance(config, Mapping):
        return config_from_dict(config)
    return load_config(config)


def run(config: RunConfig | Mapping[str, Any] | str | Path, *, output: str | Path | None = None,
        progress: bool | None = None, resume: bool = False, overwrite: bool = False,
        checkpoint_seconds: float = 60.0, mkdir: bool = False) -> Any:
    """Run a configuration and return its ``xarray.Dataset`` (schema ``spheredens-1``).

    Parameters
    ----------
    config : RunConfig, dict or path
        The run configuration (see CONFIG.md).
    output : path, optional
        Where to write the netCDF file; overrides ``output.path``. Without either, nothing is
        written. The file is rewritten atomically as the run goes, with the snapshots so far and
        a checkpoint of the full solver state, so an interrupted or failed run leaves a readable
        file (attribute ``run_status = "partial"``) that ``resume=True`` continues.
    progress : bool, optional
        Show a progress bar on stderr (default: only when stderr is a terminal).
    resume : bool
        Continue the partial run in the output file (same configuration) from its checkpoint;
        the result is bit for bit that of an uninterrupted run. A complete file is returned as
        it is; a missing file starts a new run. The horizon may change on resume
        (``time.t_end``, ``snapshots`` or ``times``; see :func:`same_run`): a run is extended
        past its old ``t_end``, or ended earlier, with the result of a run made with the new
        horizon from the start.
    overwrite : bool
        Replace an existing output file. Without ``resume`` or ``overwrite`` an existing file
        is never touched.
    checkpoint_seconds : float
        Wall-clock interval between checkpoints written between snapshots (> 0).
    mkdir : bool
        Create the folder of the output file (and its parents) when missing; otherwise a
        missing folder is refused before any work.

    Raises
    ------
    ConfigError
        For an invalid configuration, an output file that exists, or an output path that
        cannot be written (no ``.nc`` suffix, missing or read-only folder:
        :func:`~spheredens.io.check_output_location`); nothing is computed.
    SchemaError
        When the file to resume from is not a run of this configuration.
    OutputLocked
        Another process is writing the output file (it holds its lock,
        :mod:`spheredens.locking`): one line naming it; nothing is computed.
    OutputError
        When the last write of the file failed (disk full, ...); earlier failures were warnings
        and the run went on. The file there is the last good write, and resumable.
    SimulationError
        When the integration stops early (non-finite values, step-size collapse); the file
        then holds the snapshots computed before.
    KeyboardInterrupt
        After an interruption (KeyboardInterrupt or :func:`spheredens.simulate.request_stop`),
        once the snapshots so far and a checkpoint have been written.
    """
    cfg = as_config(config)
    if output is not None:
        cfg = cfg.replace(**{"output.path": str(Path(output).resolve())})
    cfg.check_resolution()
    path = cfg.output_path()
    if path is not None:
        check_output_location(path, mkdir=mkdir, key="output.path")
    if not checkpoint_seconds > 0:
        raise ConfigError("checkpoint_seconds", f"must be a number of seconds > 0, got {checkpoint_seconds!r}")
    # one writer per output file, from before any work until the end (every exit path)
    with output_lock(path):
        problem = Problem.from_config(cfg)
        scheme = make_scheme(problem, cfg.discretization)
        recorder = Recorder(problem, scheme, cfg)
        start = resume_point(path, recorder, open_run, lambda ds: same_run(ds.attrs["config"], cfg, ds),
                             resume=resume, overwrite=overwrite, key="output.path",
                             snapshot_times=cfg.time.snapshot_times())
        if start.get("complete") is not None:
            return start["complete"]
        observers: list[Any] = [recorder, Progress(enabled=progress)]
        if path is not None:
            observers.append(FileWriter(recorder, path, checkpoint_seconds=checkpoint_seconds))
        result = simulate(scheme, cfg.time, observers, **start)
        ds = recorder.dataset()
        if result.stop_reason in ("interrupted", "terminated"):
            raise KeyboardInterrupt(result.message)
        if not result.completed:
            where = f"; the snapshots before it are in {str(path)!r}" if path is not None else ""
            raise SimulationError(result.message + where, time=result.t, step=result.n_steps)
        return ds


def run_output(cfg: RunConfig, config_path: str | Path | None = None,
               output: str | Path | None = None) -> Path | None:
    """The ``output`` argument of :func:`run` for which the run is written where
    ``spheredens run CONFIG [--output OUTPUT]`` writes it.

    Parameters
    ----------
    cfg : RunConfig
        The configuration read from ``config_path``.
    config_path : path, optional
        The configuration file: without ``output`` and ``output.path`` the run goes to this
        path with suffix ``.nc``.
    output : path, optional
        An explicit output file; it wins over everything.

    Returns
    -------
    Path or None
        ``output`` when given; None when ``cfg`` sets ``output.path`` (:func:`run` writes
        there, :meth:`RunConfig.output_path`) or there is no ``config_path`` either (nothing is
        written); else ``config_path`` with suffix ``.nc``. The file written is this path when
        not None, else ``cfg.output_path()``.
    """
    if output is not None:
        return Path(output)
    if cfg.output_path() is not None or config_path is None:
        return None
    return Path(config_path).with_suffix(".nc")


def resume_point(path: Path | None, recorder: Any, opener: Any, same: Any, *, resume: bool,
                 overwrite: bool, key: str,
                 snapshot_times: tuple[float, ...] | None = None) -> dict[str, Any]:
    """How a run starts given an existing output file: keyword arguments for
    :func:`~spheredens.simulate.simulate` (empty: from the beginning), or ``{"complete": ds}``
    when the file already holds the finished run (all of ``snapshot_times``, when given: a
    complete run of a shorter horizon is continued from its final checkpoint). Refuses to
    touch an existing file without ``resume`` or ``overwrite``
    (:func:`~spheredens.io.check_output_path`), and to resume a file that ``same(ds)`` does
    not recognize."""
    if path is None or not Path(path).exists():
        return {}
    if not resume:
        check_output_path(path, overwrite=overwrite, key=key, resumable=True)
        return {}
    previous = opener(path)
    if not same(previous):
        raise SchemaError(f"{str(path)!r} was written by a different configuration; resume needs "
                          "the same one, except for the horizon (time.t_end, time.snapshots, "
                          "time.times), which may change when the snapshot times already written "
                          "stay the same and the checkpoint lies before the new t_end (or "
                          "choose another output path)")
    recorded = tuple(float(t) for t in previous["time"].values) if "time" in previous else ()
    if previous.attrs.get("run_status") == "complete" and (
            snapshot_times is None or recorded == tuple(snapshot_times)):
        logger.info("%s is already complete", path)
        return {"complete": previous}
    t0, state, steps = recorder.restore(previous)
    # a checkpoint taken on a snapshot time just before its snapshot was recorded
    return {"state": state, "t_start": t0, "steps_done": steps,
            "observe_start": t0 not in recorder.times}


def resolution_problem(cfg: RunConfig) -> str:
    """Why the grid of ``cfg`` does not resolve the attention kernel, or "" when it does
    (:meth:`RunConfig.resolution_problem`)."""
    return cfg.resolution_problem()


#: keys of ``[time]`` that set only the horizon: they may change on resume (:func:`same_run`)
HORIZON_KEYS = ("t_end", "snapshots", "times")


def same_run(config_text: str, cfg: RunConfig, ds: Any = None) -> bool:
    """Whether the configuration stored in a file describes the same run as ``cfg`` (all
    sections but ``[output]``).

    With the file's dataset ``ds``, a change of horizon only (``time.t_end``, ``snapshots``,
    ``times``) also counts as the same run when continuing the file gives exactly the run of
    ``cfg``: the file's checkpoint lies before the new ``t_end``, and the snapshot times of
    ``cfg`` up to the checkpoint are the ones the file holds (the steps land on the same
    times, so they are the same steps). Equally spaced snapshots keep their times when
    ``t_end`` and ``snapshots`` change together (``snapshots = t_end / spacing + 1``)."""
    try:
        stored = tomllib.loads(config_text)
    except tomllib.TOMLDecodeError:
        return False
    current = cfg.to_dict()
    keys = (set(stored) | set(current)) - {"output"}
    if all(stored.get(k) == current.get(k) for k in keys):
        return True
    if ds is None or "checkpoint_time" not in ds.attrs:
        return False
    other = {k: v for k, v in stored.get("time", {}).items() if k not in HORIZON_KEYS}
    mine = {k: v for k, v in current.get("time", {}).items() if k not in HORIZON_KEYS}
    if other != mine or any(stored.get(k) != current.get(k) for k in keys - {"time"}):
        return False
    t_c = float(ds.attrs["checkpoint_time"])
    recorded = [float(t) for t in ds["time"].values]
    wanted = [t for t in cfg.time.snapshot_times() if t <= t_c]
    # a checkpoint taken on a snapshot time can precede the recording of that snapshot
    return t_c < cfg.time.t_end and (recorded == wanted or (recorded == wanted[:-1] and wanted[-1] == t_c))
