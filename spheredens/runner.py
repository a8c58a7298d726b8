"""``run(config)``: configuration -> problem -> scheme -> simulate -> Dataset (and file)."""

from __future__ import annotations

import logging
import tomllib
import warnings
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from .config import RunConfig, config_from_dict, load_config
from .exceptions import ConfigError, SchemaError, SimulationError
from .io import FileWriter, check_not_input, check_output_location, check_output_path, open_run
from .locking import output_lock
from .problem import Problem
from .recorder import Recorder, checkpoint_problem
from .schemes import make_scheme
from .simulate import Observer, Progress, simulate

logger = logging.getLogger(__name__)


def as_config(config: RunConfig | Mapping[str, Any] | str | Path) -> RunConfig:
    """A :class:`RunConfig` from a RunConfig, a nested dict, or the path of a TOML file."""
    if isinstance(config, RunConfig):
        return config
    if isinstance(config, Mapping):
        return config_from_dict(config)
    return load_config(config)


#: ``notify(kind, message)``, told by :func:`run` what a resume found when there is nothing to
#: continue: kind ``"missing"`` (no file: the run starts from scratch) or ``"complete"`` (the
#: finished run of this configuration: nothing is run, its file is returned as it is)
Notify = Callable[[str, str], None]


def run(
    config: RunConfig | Mapping[str, Any] | str | Path,
    *,
    output: str | Path | None = None,
    progress: bool | None = None,
    resume: bool = False,
    overwrite: bool = False,
    checkpoint_seconds: float = 60.0,
    mkdir: bool = False,
    notify: Notify | None = None,
    observers: Sequence[Observer] = (),
) -> Any:
    """Integrate a run configuration: the Python form of ``spheredens run CONFIG``.

    The density rho_t is advanced from rho_0 by the scheme of ``[discretization]`` and recorded
    at the snapshot times of ``[time]``, with its mass, minimum, energy and the distances
    ``w2_projection`` = W2(rho_t, Pi_# rho_0) and ``w2_terminal``.

    Parameters
    ----------
    config : RunConfig, dict or path
        A validated configuration (:func:`~spheredens.config.load_config`,
        :func:`~spheredens.config.config_from_dict`), the nested dict of a TOML file, or the path
        of one (every key: docs/config.md).
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
        it is; a missing file starts a new run (both are told to ``notify``). The checkpoint
        and the snapshots are checked first (:func:`~spheredens.recorder.checkpoint_problem`:
        their checksum, finite values, mass 1): a damaged file is refused and left as it is.
        The horizon may change on resume
        (``time.t_end``, ``snapshots`` or ``times``; see :func:`same_run`): a run is extended
        past its old ``t_end``, or ended earlier, with the result of a run made with the new
        horizon from the start.
    overwrite : bool
        Replace an existing output file. Without ``resume`` or ``overwrite`` an existing file
        is never touched.
    checkpoint_seconds : float
        Wall-clock seconds between checkpoints written between snapshots (> 0, default 60).
    mkdir : bool
        Create the folder of the output file (and its parents) when missing; otherwise a
        missing or unwritable folder is refused before any work.
    notify : callable, optional
        ``notify(kind, message)`` (:data:`Notify`) when ``resume`` finds nothing to continue:
        ``"missing"`` (no file) or ``"complete"`` (nothing was run); the command line prints
        the message as a ``spheredens: note:`` line.
    observers : sequence of :class:`~spheredens.simulate.Observer`
        More observers of the integration, told of its start, of every accepted step (the new
        time, the step size and the solver's state), of every snapshot and of its end, after
        the recorder: e.g. a diagnostic that needs the solver's own state. A resumed run
        tells them from the checkpoint on (its snapshots before it are not shown again).

    Returns
    -------
    xarray.Dataset
        Schema spheredens-1 (docs/dataset.md): ``rho`` (time, space), ``weight``, ``mass``,
        ``min_rho``, ``w2_projection``, ... and the configuration in ``attrs["config"]``.

    Raises
    ------
    ConfigError
        For an invalid configuration, an output file that exists, an output path that cannot
        be written (no ``.nc`` suffix, missing or read-only folder, a read-only or immutable
        file: :func:`~spheredens.io.check_output_location`), or one that is an input of the
        run (``initial.path``: :func:`~spheredens.io.check_not_input`); nothing is computed.
    SchemaError
        When the file to resume from is not a run of this configuration (the message names
        the first difference: :func:`run_difference`), or its checkpoint or snapshots are
        damaged; the file is left as it is.
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

    Example
    -------
    >>> import spheredens as sd
    >>> ds = sd.run("runs/circle_example_c/config.toml", output="example_c.nc")
    >>> w2 = ds["w2_projection"].values          # W2(rho_t, Pi_# rho_0) at each snapshot
    >>> cfg = sd.config_from_dict({"model": {"beta": 30.0, "V": [[1.0, 0.0], [0.0, 0.5]]},
    ...                            "initial": {"name": "random_smooth", "seed": 1},
    ...                            "time": {"t_end": 5.0, "snapshots": 11}})
    >>> ds = sd.run(cfg.replace(**{"model.beta": 100.0}))      # nothing written
    """
    cfg = as_config(config)
    if output is not None:
        cfg = cfg.replace(**{"output.path": str(Path(output).resolve())})
    cfg.check_resolution()
    path = cfg.output_path()
    if path is not None:
        check_output_location(path, mkdir=mkdir, key="output.path")
        check_not_input(path, input_files(cfg), key="output.path")
    for obs in observers:
        if not isinstance(obs, Observer):
            raise TypeError(
                f"observers: {obs!r} is not a spheredens.simulate.Observer; subclass it and "
                "override the methods you need (start, step, observe, finish)"
            )
    if not checkpoint_seconds > 0:
        raise ConfigError(
            "checkpoint_seconds", f"must be a number of seconds > 0, got {checkpoint_seconds!r}"
        )
    # one writer per output file, from before any work until the end (every exit path)
    with output_lock(path):
        # the file is read and checked before the set-up: a refused resume costs nothing
        plan = resume_plan(
            path,
            open_run,
            lambda ds: run_difference(ds.attrs.get("config", ""), cfg, ds),
            resume=resume,
            overwrite=overwrite,
            key="output.path",
            snapshot_times=cfg.time.snapshot_times(),
            notify=notify,
        )
        if plan.get("complete") is not None:
            return plan["complete"]
        problem = Problem.from_config(cfg)
        scheme = make_scheme(problem, cfg.discretization)
        recorder = Recorder(problem, scheme, cfg)
        start = resume_from(plan, recorder, path)
        told: list[Any] = [recorder, *observers, Progress(enabled=progress)]
        if path is not None:
            told.append(FileWriter(recorder, path, checkpoint_seconds=checkpoint_seconds))
        result = simulate(scheme, cfg.time, told, **start)
        ds = recorder.dataset()
        if result.stop_reason in ("interrupted", "terminated"):
            raise KeyboardInterrupt(result.message)
        if not result.completed:
            where = f"; the snapshots before it are in {str(path)!r}" if path is not None else ""
            raise SimulationError(result.message + where, time=result.t, step=result.n_steps)
        return ds


def run_output(
    cfg: RunConfig, config_path: str | Path | None = None, output: str | Path | None = None
) -> Path | None:
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


def input_files(cfg: RunConfig) -> list[tuple[str, Path]]:
    """The files a run of ``cfg`` reads, as (what, path) for
    :func:`~spheredens.io.check_not_input`: the density files of ``initial`` (name ``"file"``,
    key ``path``, resolved against the configuration's folder), wherever they sit in it."""
    found: list[tuple[str, Path]] = []

    def walk(value: Any, key: str) -> None:
        if isinstance(value, Mapping):
            if value.get("name") == "file" and isinstance(value.get("path"), str):
                file = Path(value["path"])
                found.append(
                    (
                        f"the initial density file ({key}.path)",
                        file if file.is_absolute() else cfg.base_dir / file,
                    )
                )
            for name, item in value.items():
                walk(item, f"{key}.{name}")
        elif isinstance(value, (list, tuple)):
            for i, item in enumerate(value):
                walk(item, f"{key}[{i}]")

    walk(cfg.to_dict().get("initial", {}), "initial")
    return found


def _difference_text(difference: Any) -> str:
    """What a ``same``/``differ`` function of :func:`resume_plan` returned, as the difference
    named in the message: "" for the same run (True or ""), a generic phrase for False."""
    if difference is True or difference is None:
        return ""
    if difference is False:
        return "the file's configuration or run differs from this one"
    return str(difference)


def _note(notify: Notify | None, kind: str, message: str) -> None:
    """Log ``message`` (INFO) and tell it to ``notify`` as ``kind`` (:data:`Notify`)."""
    logger.info("%s", message)
    if notify is not None:
        notify(kind, message)


def resume_plan(
    path: Path | None,
    opener: Any,
    differ: Any,
    *,
    resume: bool,
    overwrite: bool,
    key: str,
    snapshot_times: tuple[float, ...] | None = None,
    notify: Notify | None = None,
) -> dict[str, Any]:
    """What an existing output file means for a run about to start, decided before any set-up.

    Returns ``{}`` (start from the beginning: no file, or ``overwrite``), ``{"complete": ds}``
    (the file holds the finished run: all of ``snapshot_times`` when given; a complete run of
    a shorter horizon is continued from its final checkpoint instead) or ``{"previous": ds}``
    (continue it: :func:`resume_from`).

    Parameters
    ----------
    differ : callable
        ``differ(ds)``: the first difference between the run in the file and this one, in
        words (:func:`run_difference`), "" when they are the same run (True/False are accepted
        too).
    notify : callable, optional
        Told (:data:`Notify`) when ``resume`` finds no file (``"missing"``) or the complete run
        (``"complete"``).

    Raises
    ------
    ConfigError, SchemaError
        The file exists and neither ``resume`` nor ``overwrite`` is set
        (:func:`~spheredens.io.check_output_path`); or ``resume`` and the file holds another
        run (the message names the first difference), or a damaged checkpoint or snapshots
        (:func:`~spheredens.recorder.checkpoint_problem`). The file is never changed.
    """
    if path is None:
        return {}
    if not Path(path).exists():
        if resume:
            nothing = "so there is nothing to resume; starting from scratch"
            _note(notify, "missing", f"{str(path)!r} does not exist, {nothing}")
        return {}
    if not resume:
        check_output_path(path, overwrite=overwrite, key=key, resumable=True)
        return {}
    previous = opener(path)
    difference = _difference_text(differ(previous))
    if difference:
        raise SchemaError(
            f"{str(path)!r} was written by a different configuration: {difference}; resume "
            "needs the same one (only the horizon, time.t_end, time.snapshots or "
            "time.times, may change, keeping the snapshots already written and ending "
            "after the checkpoint): choose another output path, or start again with "
            "--overwrite"
        )
    recorded = tuple(float(t) for t in previous["time"].values) if "time" in previous else ()
    complete = previous.attrs.get("run_status") == "complete" and (
        snapshot_times is None or recorded == tuple(snapshot_times)
    )
    has_checkpoint = any(name in previous for name in ("checkpoint_state", "checkpoint_position"))
    problem = checkpoint_problem(previous) if has_checkpoint or not complete else ""
    if problem:
        raise SchemaError(
            f"cannot resume {str(path)!r}: {problem}; the file is left as it is: start "
            "again with --overwrite, or choose another output path"
        )
    if complete:
        t_last = f"t = {recorded[-1]:g}, " if recorded else ""
        steps = int(previous.attrs.get("n_steps", 0))
        message = (
            f"{str(path)!r} is already complete ({t_last}{steps} steps): nothing was run; "
            "pass --overwrite to run it again"
        )
        _note(notify, "complete", message)
        return {"complete": previous}
    return {"previous": previous}


def resume_from(plan: dict[str, Any], recorder: Any, path: Path | None) -> dict[str, Any]:
    """Keyword arguments for :func:`~spheredens.simulate.simulate` from a plan of
    :func:`resume_plan`: empty (from the beginning), or the checkpoint of ``plan["previous"]``
    taken over by ``recorder`` (``recorder.restore``, which checks it against the solver: the
    state's shape and mass). A refusal names ``path``; the file is left as it is."""
    previous = plan.get("previous")
    if previous is None:
        return {}
    try:
        t0, state, steps = recorder.restore(previous)
    except SchemaError as exc:
        raise SchemaError(
            f"cannot resume {str(path)!r}: {exc}; the file is left as it is: start again "
            "with --overwrite, or choose another output path"
        ) from None
    # a checkpoint taken on a snapshot time just before its snapshot was recorded
    return {
        "state": state,
        "t_start": t0,
        "steps_done": steps,
        "observe_start": t0 not in recorder.times,
    }


def resume_point(
    path: Path | None, recorder: Any, opener: Any, same: Any, **options: Any
) -> dict[str, Any]:
    """How a run starts given an existing output file: keyword arguments for
    :func:`~spheredens.simulate.simulate` (empty: from the beginning), or ``{"complete": ds}``
    when the file already holds the finished run: :func:`resume_plan` then
    :func:`resume_from`, for a ``recorder`` built beforehand. ``same(ds)`` returns the first
    difference in words ("" for the same run; a bool is accepted); ``options`` are the
    keywords of :func:`resume_plan` (``resume``, ``overwrite``, ``key``, ``snapshot_times``,
    ``notify``)."""
    plan = resume_plan(path, opener, same, **options)
    if plan.get("complete") is not None:
        return plan
    return resume_from(plan, recorder, path)


def resolution_problem(cfg: RunConfig) -> str:
    """Why the grid of ``cfg`` does not resolve the attention kernel, or "" when it does
    (:meth:`RunConfig.resolution_problem`)."""
    return cfg.resolution_problem()


#: keys of ``[time]`` that set only the horizon: they may change on resume (:func:`same_run`)
HORIZON_KEYS = ("t_end", "snapshots", "times")


def same_run(config_text: str, cfg: RunConfig, ds: Any = None) -> bool:
    """Whether the configuration stored in a file describes the same run as ``cfg`` (all
    sections but ``[output]``): :func:`run_difference` finds no difference.

    With the file's dataset ``ds``, a change of horizon only (``time.t_end``, ``snapshots``,
    ``times``) also counts as the same run when continuing the file gives exactly the run of
    ``cfg``: the file's checkpoint lies before the new ``t_end``, and the snapshot times of
    ``cfg`` up to the checkpoint are the ones the file holds (the steps land on the same
    times, so they are the same steps). Equally spaced snapshots keep their times when
    ``t_end`` and ``snapshots`` change together (``snapshots = t_end / spacing + 1``)."""
    return not run_difference(config_text, cfg, ds)


#: how many characters of a value :func:`run_difference` shows
SHOWN_VALUE_CHARS = 60

_UNSET = object()


def _as_read_now(stored: dict[str, Any], cfg: RunConfig) -> dict[str, Any]:
    """The configuration stored in a file as this version reads it: validated again, so that
    an option added since the file was written counts with its default (the behaviour the
    file's run had), as it does in ``cfg``; the stored table itself where it no longer
    validates (its difference then names what changed)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return config_from_dict(stored, base_dir=cfg.base_dir).to_dict()
    except (ConfigError, OSError, ValueError, TypeError):
        return stored


def _flat(table: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """A nested table as dotted keys, in its order ({} sections kept as values)."""
    out: dict[str, Any] = {}
    for name, value in table.items():
        if isinstance(value, Mapping) and value:
            out.update(_flat(value, f"{prefix}{name}."))
        else:
            out[f"{prefix}{name}"] = value
    return out


def _shown(value: Any) -> str:
    """A configuration value as in TOML, cut to :data:`SHOWN_VALUE_CHARS` characters."""
    if value is _UNSET:
        return "not set"
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, str):
        text = '"' + value + '"'
    else:
        text = str(value)
    return text if len(text) <= SHOWN_VALUE_CHARS else text[: SHOWN_VALUE_CHARS - 3] + "..."


def run_difference(config_text: str, cfg: RunConfig, ds: Any = None) -> str:
    """The first difference between the run stored in a file and the run of ``cfg``, in words
    ("model.beta is 30.0 in the file, 31.0 in the configuration"), or "" when they are the same
    run (:func:`same_run` has the rule, horizon changes included). Keys are compared in the
    order of the configuration (then those only the file has), all sections but ``[output]``;
    a horizon change that is not allowed says why (it moves a snapshot already written, or
    ends before the checkpoint)."""
    try:
        stored = _flat(_as_read_now(tomllib.loads(config_text), cfg))
    except tomllib.TOMLDecodeError:
        return "the configuration stored in the file (attribute config) is not valid TOML"
    current = _flat(cfg.to_dict())
    keys = [
        k
        for k in dict.fromkeys([*current, *stored])
        if k != "output" and not k.startswith("output.")
    ]
    diffs = [
        (k, stored.get(k, _UNSET), current.get(k, _UNSET))
        for k in keys
        if stored.get(k, _UNSET) != current.get(k, _UNSET)
    ]
    if not diffs:
        return ""

    def said(key: str, theirs: Any, mine: Any) -> str:
        return f"{key} is {_shown(theirs)} in the file, {_shown(mine)} in the configuration"

    horizon = {f"time.{k}" for k in HORIZON_KEYS}
    other = next((d for d in diffs if d[0] not in horizon), None)
    if other is not None:
        return said(*other)
    first = said(*diffs[0])
    if ds is None or "checkpoint_time" not in ds.attrs:
        return first
    t_c = float(ds.attrs["checkpoint_time"])
    if not t_c < cfg.time.t_end:
        return (
            f"{first}, and the file's checkpoint at t = {t_c:g} is not before the new "
            f"t_end = {cfg.time.t_end:g}"
        )
    recorded = [float(t) for t in ds["time"].values]
    wanted = [t for t in cfg.time.snapshot_times() if t <= t_c]
    # a checkpoint taken on a snapshot time can precede the recording of that snapshot
    if recorded == wanted or (recorded == wanted[:-1] and wanted[-1] == t_c):
        return ""
    k = next(
        (i for i, (a, b) in enumerate(zip(recorded, wanted)) if a != b),
        min(len(recorded), len(wanted)),
    )
    if k < len(recorded) and k < len(wanted):
        where = (
            f"snapshot {k} is at t = {recorded[k]:g} in the file, "
            f"t = {wanted[k]:g} in the configuration"
        )
    elif k < len(recorded):
        where = f"the file has a snapshot at t = {recorded[k]:g} that the configuration does not"
    else:
        where = (
            f"the configuration has a snapshot at t = {wanted[k]:g}, before the file's checkpoint "
            f"at t = {t_c:g}, that the file lacks"
        )
    return f"{first}, which moves the snapshots already written ({where})"
