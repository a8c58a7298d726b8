"""spheredens: Eulerian solvers for the mean-field continuity equations of self-attention.

    d/dt rho + div_S( rho X[rho] ) = 0  on S^1 (circle) and S^2 (sphere).

Typical use::

    import spheredens as sd
    cfg = sd.load_config("runs/circle_example_c/config.toml")
    ds = sd.run(cfg)                     # an xarray.Dataset (schema spheredens-1)

Every command of the ``spheredens`` program has a function here, with the same defaults:

=====================  ===========================================================
``spheredens run``     :func:`run`
``particles``          :func:`run_particles`
``compare``            :func:`compare` (files opened with :func:`open_run`, :func:`open_particles`);
                       :func:`compare_runs`: runs of any kinds against a reference
``convert-particles``  :func:`convert_particles`
``sweep``              :func:`load_sweep`, :func:`run_sweep`
``analyze-beta``       :func:`analyze_beta` (and :func:`beta_table`, the lines it prints)
``plot``               :func:`plot_run`
``animate``            :func:`animate_run`
=====================  ===========================================================

These are the functions that implement the commands, re-exported from their modules
(``spheredens.run`` is ``spheredens.runner.run``); ``sd.compare`` is the function, the other
functions of its module are imported by name (``from spheredens.compare import
ensemble_agreement``).

The explicit pieces of a run::

    problem = sd.Problem.from_config(cfg)
    scheme = sd.make_scheme(problem, cfg.discretization)
    recorder = sd.Recorder(problem, scheme, cfg)
    result = sd.simulate(scheme, cfg.time, observers=[recorder])
    ds = recorder.dataset()
"""

import os
import signal
import sys
from typing import Any


def _started_as_command() -> bool:
    """Whether this process is the ``spheredens`` command: ``python -m spheredens`` (its
    package is imported while sys.argv[0] is "-m") or the console script ``spheredens``."""
    first = sys.argv[0] if sys.argv else ""
    if first == "-m":
        return "spheredens" in getattr(sys, "orig_argv", ())
    return os.path.splitext(os.path.basename(first))[0] == "spheredens"


def _exit_interrupted_while_starting() -> None:
    """One line and exit 130 at once: an interrupt that went through a C extension's code run by
    PyRun_* marks the interpreter to end by SIGINT (exit -2) however it is handled afterwards;
    nothing is open or half-written yet."""
    sys.stderr.write("spheredens: interrupted (SIGINT, Ctrl-C) while starting: nothing was done\n")
    sys.stderr.flush()
    os._exit(130)


#: the SIGINTs received while the command starts, before spheredens.cli.main holds the signals
#: (a library's bare ``except:`` may swallow the KeyboardInterrupt: the list still tells)
_STARTING_INTERRUPTS: list[int] = []


def _interrupted_while_starting(signum: int, frame: Any) -> None:
    _STARTING_INTERRUPTS.append(signum)
    raise KeyboardInterrupt


if _started_as_command():
    signal.signal(signal.SIGINT, _interrupted_while_starting)

try:  # numpy, scipy, xarray...: the command's first seconds
    from ._version import __version__
    from .analysis import analyze_beta, beta_table
    from .compare import compare
    from .compare_pairs import compare_runs
    from .config import RunConfig, config_from_dict, load_config
    from .convert import convert_particles
    from .exceptions import (
        ConfigError,
        OutputError,
        SchemaError,
        SimulationError,
        SpheredensError,
        SpheredensWarning,
    )
    from .io import open_particles, open_run, write_dataset
    from .models import Model, projection_target
    from .particles import run_particles
    from .plot import animate_run, plot_run
    from .problem import Problem
    from .recorder import Recorder
    from .runner import run
    from .schemes import make_scheme
    from .simulate import Progress, SimulationResult, simulate
    from .sweep import load_sweep, run_sweep
except BaseException as _error:
    # Ctrl-C while the command starts, before spheredens.cli.main holds the signals: one line
    # and exit 130, as later (an import by a Python program is interrupted as always). The
    # KeyboardInterrupt may reach here turned into another error by the code it landed in (a
    # RuntimeError from a class's __set_name__ in the standard library's platform module)
    if not (
        _started_as_command() and (isinstance(_error, KeyboardInterrupt) or _STARTING_INTERRUPTS)
    ):
        raise
    _exit_interrupted_while_starting()
if _STARTING_INTERRUPTS:
    _exit_interrupted_while_starting()

#: the public function of each command of the ``spheredens`` program
COMMANDS = {
    "run": "run",
    "particles": "run_particles",
    "compare": "compare",
    "convert-particles": "convert_particles",
    "sweep": "run_sweep",
    "analyze-beta": "analyze_beta",
    "plot": "plot_run",
    "animate": "animate_run",
}


__all__ = [
    "__version__",
    "RunConfig",
    "config_from_dict",
    "load_config",
    "ConfigError",
    "SchemaError",
    "SimulationError",
    "SpheredensError",
    "SpheredensWarning",
    "OutputError",
    "open_run",
    "open_particles",
    "write_dataset",
    "Model",
    "projection_target",
    "Problem",
    "Recorder",
    "make_scheme",
    "Progress",
    "SimulationResult",
    "simulate",
    # the commands
    "run",
    "run_particles",
    "compare",
    "compare_runs",
    "convert_particles",
    "load_sweep",
    "run_sweep",
    "analyze_beta",
    "beta_table",
    "plot_run",
    "animate_run",
]
