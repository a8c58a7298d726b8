"""``run(config)``: configuration -> problem -> scheme -> simulate -> Dataset (and file)."""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Mapping

from .config import RunConfig, config_from_dict, load_config
from .exceptions import SimulationError
from .io import FileWriter
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
        progress: bool | None = None) -> Any:
    """Run a configuration and return its ``xarray.Dataset`` (schema ``spheredens-1``).

    Parameters
    ----------
    config : RunConfig, dict or path
        The run configuration (see CONFIG.md).
    output : path, optional
        Where to write the netCDF file; overrides ``output.path``. Without either, nothing is
        written. The file is rewritten atomically as snapshots arrive, so an interrupted or
        failed run leaves a readable file with the snapshots done so far
        (attribute ``run_status = "partial"``).
    progress : bool, optional
        Show a progress bar on stderr (default: only when stderr is a terminal).

    Raises
    ------
    ConfigError
        For an invalid configuration (nothing is computed).
    SimulationError
        When the integration stops early (non-finite values, step-size collapse); the file
        then holds the snapshots computed before.
    KeyboardInterrupt
        Re-raised after the snapshots so far have been written.
    """
    cfg = as_config(config)
    if output is not None:
        cfg = cfg.replace(**{"output.path": str(Path(output).resolve())})
    path = cfg.output_path()
    problem = Problem.from_config(cfg)
    scheme = make_scheme(problem, cfg.discretization)
    recorder = Recorder(problem, scheme, cfg)
    observers: list[Any] = [recorder, Progress(enabled=progress)]
    if path is not None:
        observers.append(FileWriter(recorder, path))
    result = simulate(scheme, cfg.time, observers)
    ds = recorder.dataset()
    if result.stop_reason == "interrupted":
        raise KeyboardInterrupt(result.message)
    if not result.completed:
        where = f"; the snapshots before it are in {str(path)!r}" if path is not None else ""
        raise SimulationError(result.message + where, time=result.t, step=result.n_steps)
    return ds
