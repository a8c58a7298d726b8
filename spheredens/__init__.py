"""spheredens: Eulerian solvers for the mean-field continuity equations of self-attention.

    d/dt rho + div_S( rho X[rho] ) = 0  on S^1 (circle) and S^2 (sphere).

Typical use::

    import spheredens as sd
    cfg = sd.load_config("runs/circle_example_c/config.toml")
    ds = sd.run(cfg)                     # an xarray.Dataset (schema spheredens-1)

or the explicit pieces::

    problem = sd.Problem.from_config(cfg)
    scheme = sd.make_scheme(problem, cfg.discretization)
    result = sd.simulate(scheme, cfg.time, observers=[recorder := sd.Recorder(problem, scheme, cfg)])
    ds = recorder.dataset()
"""
from ._version import __version__
from .config import RunConfig, config_from_dict, load_config
from .exceptions import (ConfigError, OutputError, SchemaError, SimulationError, SpheredensError,
                         SpheredensWarning)
from .io import open_run, write_dataset
from .models import Model, projection_target
from .problem import Problem
from .recorder import Recorder
from .runner import run
from .schemes import make_scheme
from .simulate import Progress, SimulationResult, simulate

__all__ = [
    "__version__", "RunConfig", "config_from_dict", "load_config", "ConfigError", "SchemaError",
    "SimulationError", "SpheredensError", "SpheredensWarning", "OutputError", "open_run", "write_dataset", "Model",
    "projection_target", "Problem", "Recorder", "run", "make_scheme", "Progress",
    "SimulationResult", "simulate",
]
