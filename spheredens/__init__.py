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
``compare``            :func:`compare` (files opened with :func:`open_run`, :func:`open_particles`)
``convert-particles``  :func:`convert_particles`
``sweep``              :func:`load_sweep`, :func:`run_sweep`
``analyze-beta``       :func:`analyze_beta` (and :func:`beta_table`, the lines it prints)
``plot``               :func:`plot_run`
``animate``            :func:`animate_run`
=====================  ===========================================================

These public functions are documented fronts: each calls the module function that implements
it (``spheredens.runner.run``, ``spheredens.compare.compare``, ...) with the arguments given,
and its signature is that function's. ``sd.compare`` is the function; the module's other
functions are imported by name (``from spheredens.compare import ensemble_agreement``).

The explicit pieces of a run::

    problem = sd.Problem.from_config(cfg)
    scheme = sd.make_scheme(problem, cfg.discretization)
    result = sd.simulate(scheme, cfg.time, observers=[recorder := sd.Recorder(problem, scheme, cfg)])
    ds = recorder.dataset()
"""

import functools
import os
import signal
import sys
from typing import Any, Callable


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
    from . import analysis as _analysis
    from . import compare as _compare
    from . import io as _io
    from . import particles as _particles
    from . import plot as _plot
    from . import runner as _runner
    from . import sweep as _sweep
    from ._version import __version__
    from .config import RunConfig, config_from_dict, load_config
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
    from .problem import Problem
    from .recorder import Recorder
    from .schemes import make_scheme
    from .simulate import Progress, SimulationResult, simulate
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


def _front(module: Any, name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Turn a function holding only the user's docstring into the public function calling
    ``module.name`` (looked up at each call) with the signature of ``module.name``."""

    def make(documented: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(getattr(module, name))
        def front(*args: Any, **kwargs: Any) -> Any:
            return getattr(module, name)(*args, **kwargs)

        front.__doc__ = documented.__doc__
        front.__module__ = __name__
        return front

    return make


@_front(_runner, "run")
def run():
    """Integrate a run configuration: the Python form of ``spheredens run CONFIG``.

    The density rho_t is advanced from rho_0 by the scheme of ``[discretization]`` and recorded
    at the snapshot times of ``[time]``, with its mass, minimum, energy and the distances
    ``w2_projection`` = W2(rho_t, Pi_# rho_0) and ``w2_terminal``.

    Parameters
    ----------
    config : RunConfig, dict or path
        A validated configuration (:func:`load_config`, :func:`config_from_dict`), the nested
        dict of a TOML file, or the path of one (every key: docs/config.md).
    output : path, optional
        The netCDF file to write (overrides ``output.path``); without either nothing is
        written. The file is rewritten atomically as the run goes, with a checkpoint.
    progress : bool, optional
        A progress bar on stderr (default: when stderr is a terminal).
    resume : bool
        Continue the partial run in ``output`` from its checkpoint (bit for bit the result of
        an uninterrupted run); a changed ``time.t_end`` extends or shortens it.
    overwrite : bool
        Replace an existing ``output``; otherwise an existing file is never touched.
    checkpoint_seconds : float
        Wall-clock seconds between checkpoints written between snapshots (default 60).
    mkdir : bool
        Create the missing folder of ``output``; otherwise a missing or unwritable folder is
        refused before any work.

    Returns
    -------
    xarray.Dataset
        Schema spheredens-1 (docs/dataset.md): ``rho`` (time, space), ``weight``, ``mass``,
        ``min_rho``, ``w2_projection``, ... and the configuration in ``attrs["config"]``.

    Raises
    ------
    ConfigError
        An invalid configuration or an existing output file (nothing is computed).
    SimulationError
        The integration stopped early; the file keeps the snapshots computed before.

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


@_front(_particles, "run_particles")
def run_particles():
    """Integrate the n-particle system of a configuration: ``spheredens particles CONFIG``.

    The particles x_1..x_n (weights 1/n; usa_av: labelled by slice) follow dx_i/dt =
    X[mu_t](x_i) for the empirical measure mu_t = sum_i w_i delta_{x_i}: the same model as the
    density, softmax in log-sum-exp form, float64, RK4 renormalized to the sphere.

    Parameters
    ----------
    config : RunConfig
        With a ``[particles]`` table: ``n``, ``initialization`` (``iid`` samples of rho_0,
        ``quantile`` on the circle, ``quasi_uniform`` on the sphere), ``seed``, ``dt``,
        ``integrator``. The snapshot times are those of ``[time]``.
    seed : int, optional
        Overrides ``particles.seed`` (one i.i.d. run of an ensemble per seed).
    output : path, optional
        The netCDF file to write (schema spheredens-particles-1).
    progress, resume, overwrite, mkdir :
        As for :func:`run`.

    Returns
    -------
    xarray.Dataset
        Schema spheredens-particles-1: ``position`` (time, particle, component),
        ``particle_weight``, ``w2_projection`` (the particles against Pi_# of their own start).

    Example
    -------
    >>> import spheredens as sd
    >>> cfg = sd.load_config("runs/circle_example_c/config.toml")
    >>> cfg = cfg.replace(**{"particles.n": 500, "particles.seed": 0})   # adds [particles]
    >>> p = sd.run_particles(cfg, output="example_c_particles.nc")
    >>> x = p["position"].values                 # (time, particle, 2), unit vectors
    """


@_front(_compare, "compare")
def compare():
    """W2 between a density run and particle runs: ``spheredens compare DENSITY PARTICLES...``.

    At every snapshot time the files share (never interpolated in time), the Wasserstein-2
    distance with the geodesic cost between rho_t and each particle measure: exact on the
    circle (the density as its piecewise-constant cells), on the sphere the exact EMD after
    coarsening the density to ``n_points`` atoms (``density_resolution`` bounds that step).

    Parameters
    ----------
    density : xarray.Dataset
        A density run (:func:`run`, :func:`open_run`).
    particles : Dataset or list of Datasets
        Particle runs of the same model (:func:`run_particles`, :func:`open_particles`).
    n_points : int
        Sphere: atoms of the coarsened density (default 4096).
    density_file, particle_files : str, sequence of str
        File names, recorded in the result and used in messages.
    allow_mismatch : bool
        Compare particle runs of another model (beta, Q, K, V, initial density, slice labels
        and weights) anyway, recording the differences; otherwise they are refused in one
        line naming the first difference.

    Returns
    -------
    xarray.Dataset
        ``w2`` (run, time) in radians, ``w2_mean``, ``w2_std``, ``density_resolution`` (time),
        for several runs ``w2_between_runs``, the departure times and the verdict in
        ``attrs["departure_verdict"]``.

    Example
    -------
    With the files of the examples of :func:`run` and :func:`run_particles`:

    >>> import spheredens as sd
    >>> result = sd.compare(sd.open_run("example_c.nc"), [sd.open_particles("example_c_particles.nc")])
    >>> w2 = result["w2"].sel(run=0).values      # W2(rho_t, mu_t) at the common times
    >>> verdict = result.attrs["departure_verdict"]
    """


@_front(_io, "convert_particles")
def convert_particles():
    """Read particles computed by another code: ``spheredens convert-particles IN OUT``.

    Parameters
    ----------
    source : path
        ``.npy`` with positions (time, n, d) or circle angles (time, n); or ``.npz`` with
        ``position`` / ``x`` / ``theta`` (and optionally ``time`` / ``t``, ``weight``).
        Positions must be finite unit vectors (to 1e-6) of the domain's dimension, angles
        radians in [-pi, pi] or [0, 2 pi]; anything else is refused in one line.
    domain : str
        ``"circle"`` or ``"sphere"``.
    times : sequence of float, optional
        The snapshot times when the file has none (their number is checked against the time
        axis); or ``dt``: t_k = k dt, as many as the time axis has; with ``config`` they must
        end by its ``time.t_end`` unless ``axes`` states the layout (nothing else counts the
        axes then: no layout is guessed from the shape).
    angles : bool, optional
        The array holds angles (circle).
    degrees : bool, optional
        The angles are in degrees ([-180, 180] or [0, 360]); implies ``angles``.
    axes : str or sequence of str, optional
        The order of the array's axes when it is not (time, n, d) (angles: (time, n)), e.g.
        ``"n,time,d"`` or ``"n,time"``.
    config : RunConfig or path, optional
        The configuration the particles were run with: the file then records its model (and
        its domain), so that :func:`compare` checks it against the density.
    attrs : dict, optional
        Attributes to record (e.g. ``{"model": "sa", "beta": 30.0}``).
    notify : callable, optional
        ``notify(kind, message)``: told ``"layout"`` and how the array was read when ``dt``
        alone gives the times and the time axis is longer than the particle axis (logged
        otherwise). The file records how it was read in the attribute ``source_layout``.

    Returns
    -------
    xarray.Dataset
        Schema spheredens-particles-1, ready for :func:`compare` (write it with
        :func:`write_dataset`).

    Example
    -------
    >>> import numpy as np, spheredens as sd
    >>> theta = np.linspace(0, 2 * np.pi, 100, endpoint=False)
    >>> np.save("tokens.npy", np.stack([theta, (theta + 0.1) % (2 * np.pi)]))   # 2 times, 100 angles
    >>> p = sd.convert_particles("tokens.npy", domain="circle", dt=0.5)
    >>> path = sd.write_dataset(p, "tokens.nc")
    """


@_front(_sweep, "load_sweep")
def load_sweep():
    """Read and validate a sweep file (the argument of ``spheredens sweep SWEEP``).

    A sweep file names a base configuration and the values to vary (``[vary]`` with dotted
    keys, e.g. ``"model.beta" = [10.0, 30.0]``); every combination is a case, validated here
    before any work.

    Parameters
    ----------
    path : path
        The sweep file (TOML); ``base`` and ``output_dir`` are relative to its folder.

    Returns
    -------
    spheredens.sweep.Sweep
        ``cases`` (each with ``name``, ``values`` and its ``config``), ``keys``, ``levels``,
        ``output_dir`` and ``combined_path``.

    Example
    -------
    >>> import spheredens as sd
    >>> sweep = sd.load_sweep("runs/concentration/sweep_circle_n1024.toml")
    >>> names = [case.name for case in sweep.cases]          # beta-10.0, beta-30.0, ...
    """


@_front(_sweep, "run_sweep")
def run_sweep():
    """Run the cases of a sweep on Dask: ``spheredens sweep SWEEP``.

    Each case not done yet runs :func:`run` with ``resume=True`` as a Dask task (a finished
    case file is never recomputed, a partial one continues); a failed case is reported and the
    others go on. The combined dataset has one dimension per varied key.

    Parameters
    ----------
    sweep : spheredens.sweep.Sweep
        From :func:`load_sweep`.
    scheduler : str, optional
        Address of a running Dask scheduler (``tcp://host:port``); default: a local cluster.
    n_workers : int, optional
        Worker processes of the local cluster (default min(2, cases to run)).
    progress : bool
        A line per finished case.
    mkdir : bool
        Create the missing parents of ``output_dir`` (checked before any work).

    Returns
    -------
    (xarray.Dataset or None, dict)
        The combined dataset (also written to ``sweep.combined_path``; ``w2_projection``
        (beta, ..., time) and the other diagnostics), and each case's outcome by name.

    Example
    -------
    >>> import spheredens as sd
    >>> sweep = sd.load_sweep("runs/concentration/sweep_circle_n1024.toml")
    >>> combined, outcome = sd.run_sweep(sweep, n_workers=2, progress=False)
    """


@_front(_analysis, "analyze_beta")
def analyze_beta():
    """Summarize a sweep over beta: ``spheredens analyze-beta COMBINED``.

    For each case, from its curve W2(t) = W2(rho_t, Pi_# rho_0): the minimum ``min_w2`` and its
    time ``t_min`` (``min_at_end`` when that is the last snapshot: W2 is still falling), the
    departure time (the first time after t_min with W2 > 2 min_w2 + 0.02), the early rate
    (-slope of log W2 on [t_min / 4, 3 t_min / 4]) against the spectral gap of V B^T, min_w2
    over sqrt(log(beta + 1) / beta), the slope of log min_w2 against log beta, and the change
    from each resolution to the next when n (lmax, nlat) was swept too. Definitions:
    docs/concentration.md.

    Parameters
    ----------
    combined : xarray.Dataset
        The combined dataset of a sweep over ``model.beta`` (:func:`run_sweep`, or
        ``combined.nc`` opened with ``xarray.open_dataset``).

    Returns
    -------
    xarray.Dataset
        The quantities above over (beta, other swept dims); :func:`beta_table` gives the
        lines ``spheredens analyze-beta`` prints.

    Example
    -------
    With ``combined`` from the example of :func:`run_sweep`:

    >>> import spheredens as sd
    >>> analysis = sd.analyze_beta(combined)
    >>> mins = analysis["min_w2"].values          # min over t of W2, per beta
    >>> table = "\\n".join(sd.beta_table(analysis))
    """


@_front(_plot, "plot_run")
def plot_run():
    """Draw the figure of a run, particle or comparison file: ``spheredens plot FILE``.

    With the targets of the model (the atoms +-u or the great circle S cap E_1 of Pi_# rho_0,
    the top eigenspace of V) and angles in radians. Circle: rho as a space-time image (log
    colour scale) beside W2 to the targets. Sphere: two orthographic views and a Mollweide map
    per snapshot, with W2 (radians), max rho (per steradian) and -min rho / max rho below, each
    on its own axis. usa_av: also ``<name>_slices.png`` (slice modes over xi, energy,
    collapse). A particle run: the points over time and at a few snapshots. A comparison file:
    W2 against time with the ensemble band (mean +- std and min to max over the runs).

    Parameters
    ----------
    ds : xarray.Dataset
        A run (:func:`run`, :func:`open_run`), a particle run (:func:`run_particles`,
        :func:`open_particles`) or a comparison (:func:`compare`).
    path : path
        The PNG file to write.
    times : sequence of float, optional
        Sphere runs and particle runs: the snapshot times to draw (the nearest stored;
        default 4 evenly spaced).
    mkdir : bool
        Create the missing folder of ``path`` (checked before drawing).

    Returns
    -------
    pathlib.Path
        The file written.

    Example
    -------
    With the file of the example of :func:`run`:

    >>> import spheredens as sd
    >>> png = sd.plot_run(sd.open_run("example_c.nc"), "example_c.png")
    """


@_front(_plot, "animate_run")
def animate_run():
    """Animate a run, particle or comparison file: ``spheredens animate FILE``.

    An MP4 where ffmpeg exists (matplotlib finds it), a GIF through Pillow otherwise; one frame
    per snapshot shown (evenly spaced ones with ``frames``), with the targets of the model and
    a cursor on the curves against time. A density run: rho at each snapshot (circle: rho(theta)
    on a log scale, usa_av with its slices; sphere: two orthographic views and a Mollweide map,
    Gauss grid or finite-volume mesh) beside W2 to the targets. A particle run: the points. A
    comparison file: its W2 curves with the ensemble band, and the density with the particles
    of its first run when the files it names are found.

    Parameters
    ----------
    source : path or xarray.Dataset
        The file, or its Dataset (then give ``output`` unless it was read from a file).
    output : path, optional
        ``.mp4`` (ffmpeg) or ``.gif``; default: the file with suffix ``.mp4`` where ffmpeg
        exists, ``.gif`` otherwise.
    fps : float
        Frames per second (default 8).
    frames : int, optional
        Number of frames: that many evenly spaced snapshots (default every snapshot, at most
        240).
    mkdir : bool
        Create the missing folder of ``output`` (checked before drawing).

    Returns
    -------
    pathlib.Path
        The file written.

    Example
    -------
    With the file of the example of :func:`run`:

    >>> import spheredens as sd
    >>> movie = sd.animate_run("example_c.nc", "example_c.gif", fps=10, frames=3)
    """


beta_table = _analysis.beta_table

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
    "convert_particles",
    "load_sweep",
    "run_sweep",
    "analyze_beta",
    "beta_table",
    "plot_run",
    "animate_run",
]
