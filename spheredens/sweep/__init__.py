"""Sweeps: a base configuration and lists of values, every case a task on Dask distributed.

A sweep file (TOML)::

    base = "config.toml"              # the base run configuration (relative to this file)
    output_dir = "cases"              # one netCDF file per case, and the combined dataset
    [vary]
    "model.beta" = [10.0, 30.0, 100.0]
    "discretization.n" = [256, 512]

Every combination of the listed values is a case (here 6). Cases run as tasks on a local Dask
cluster by default, or on an existing scheduler (``--scheduler tcp://host:port``). Each case
runs :func:`spheredens.run` with ``resume=True``: a finished case file (same configuration) is
never recomputed or rewritten, a partial one (a worker lost mid-case) continues from its
checkpoint. A failed case is reported and does not stop the others. Ctrl-C (or SIGTERM) stops
the sweep: the workers are shut down, a running case keeps the checkpoint its file last got, no
lock file is left behind, and the same command continues. The combined dataset
(``combined.nc``) holds the diagnostics of every case with one dimension per varied key (named
by its last component: ``beta``, ``n``, ...), and ``rho`` when all cases share one grid. It is
written from the cases that finished: a failed case's values are NaN there, and the file's
attribute ``failed_cases`` names it. A key whose values are not numbers or strings (a matrix
such as ``model.V``, a list) has a label per value as its coordinate (the value as written,
``"[[1.0, 0.0], [0.0, 0.5]]"``) and the values themselves in ``<dim>_value`` (``V_value``:
dims ``V``, ``row``, ``col``).

Refused before any case runs, in one line: values repeated (also when equal as numbers but
written differently: ``2`` and ``2.0``, ``0.0`` and ``-0.0``), cases with other snapshot times,
a dimension named like a part of the combined dataset, and ``output.*`` keys (set by the sweep).

The modules: :mod:`~spheredens.sweep._define` (the sweep file and its cases),
:mod:`~spheredens.sweep._worker` (one case on a Dask worker),
:mod:`~spheredens.sweep._report` (the progress report), :mod:`~spheredens.sweep._run`
(:func:`run_sweep`) and :mod:`~spheredens.sweep._combine` (the combined dataset).
"""

from ._combine import combine
from ._define import (
    COMBINED_VARIABLES,
    DEFAULT_DASHBOARD_ADDRESS,
    MAX_SWEEP_CASES,
    RESERVED_NAMES,
    Sweep,
    SweepCase,
    case_status,
    check_dashboard_address,
    check_sweep_output,
    load_sweep,
    sweep_from_dict,
)
from ._report import SweepReporter
from ._run import outcome_summary, run_sweep

__all__ = [
    "COMBINED_VARIABLES",
    "DEFAULT_DASHBOARD_ADDRESS",
    "MAX_SWEEP_CASES",
    "RESERVED_NAMES",
    "Sweep",
    "SweepCase",
    "SweepReporter",
    "case_status",
    "check_dashboard_address",
    "check_sweep_output",
    "combine",
    "load_sweep",
    "outcome_summary",
    "run_sweep",
    "sweep_from_dict",
]
