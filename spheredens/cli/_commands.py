"""The commands of the ``spheredens`` program: one function ``_cmd_<name>(args)`` each.

Each takes the parsed arguments (:func:`spheredens.cli._parser.build_parser`), checks the
files it will write before any work, calls the library function of the command and prints what
it wrote; it returns the exit code. The docstring of each is the command's description in its
``--help``.
"""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

from .._version import __version__
from ..analysis import (
    analysis_output_path,
    analyze_beta,
    beta_table,
    open_combined,
)
from ..auxiliary import KERNELS
from ..config import load_config
from ..convergence import convergence_study, convergence_table
from ..convert import convert_particles, converted_summary
from ..exceptions import (
    ConfigError,
    shown,
)
from ..initial import INITIAL_DENSITIES
from ..integrators import INTEGRATORS
from ..interaction import INTERACTIONS
from ..io import (
    check_not_input,
    check_output_location,
    check_output_path,
    open_run,
    write_dataset,
)
from ..models import MODELS
from ..particles import particles_output_path, require_particles, run_particles
from ..plot import (
    animate_run,
    animation_output_path,
    figure_path,
    open_figure_file,
    plot_beta_study,
    plot_run,
    slices_figure_path,
)
from ..runner import input_files, run, run_output
from ..schemes import SCHEMES
from ..sweep import (
    check_dashboard_address,
    check_sweep_output,
    load_sweep,
    outcome_summary,
    run_sweep,
)
from ..verify import summary as verify_summary
from ..verify import verify
from ._signals import _interrupted_exit_code, _stop_on_signals


def _shown(path: Path | str) -> str:
    """A path as the user would type it: relative to the working directory when inside it."""
    path = Path(path).resolve()
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _check_output(
    args: argparse.Namespace,
    path: Path | str | None,
    *,
    suffix: str = ".nc",
    key: str | None = None,
    option: str | None = None,
) -> Path | None:
    """Check an output path before any work (:func:`~spheredens.io.check_output_location`):
    its suffix, its folder (created only with ``--mkdir``) and that the folder is writable."""
    if path is None:
        return None
    return check_output_location(
        path,
        suffix=suffix,
        mkdir=getattr(args, "mkdir", False),
        key=key,
        option=option,
        mkdir_hint="--mkdir",
    )


def _wrote(args: argparse.Namespace, path: Path | str) -> None:
    """Print ``wrote PATH``, unless ``--quiet``."""
    if not getattr(args, "quiet", False):
        print(f"wrote {_shown(path)}")


class _Notes:
    """The ``notify`` of :func:`~spheredens.runner.run`: prints each note as one line
    ``spheredens: note: ...`` on stderr and keeps the kinds seen (``"complete"``: nothing ran)."""

    def __init__(self) -> None:
        self.kinds: set[str] = set()

    def __call__(self, kind: str, message: str) -> None:
        self.kinds.add(kind)
        print(f"spheredens: note: {' '.join(message.split())}", file=sys.stderr)


def _check_new_output(
    args: argparse.Namespace,
    path: Path,
    *,
    suffix: str = ".nc",
    inputs: Sequence[tuple[str, Any]] = (),
) -> Path:
    """Check an output of plot, animate, analyze-beta, compare or convert-particles before any
    work: its location (:func:`_check_output`), that it is none of the command's ``inputs``
    (:func:`~spheredens.io.check_not_input`, also with --overwrite) and that it does not exist
    unless --overwrite (:func:`~spheredens.io.check_output_path`)."""
    option = "--output" if getattr(args, "output", None) else None
    _check_output(args, path, suffix=suffix, option=option)
    check_not_input(path, inputs, option=option)
    return check_output_path(path, overwrite=getattr(args, "overwrite", False), option="--output")


def _integrate(
    function: Callable[..., Any],
    args: argparse.Namespace,
    cfg: Any,
    *,
    kept: str,
    again: str,
    **options: Any,
) -> tuple[Any, _Notes, int | None]:
    """``function(cfg, **options)`` (:func:`~spheredens.runner.run` or
    :func:`~spheredens.particles.run_particles`) with the options the two commands share
    (--progress, --resume, --overwrite, --mkdir) and their notes, SIGINT and SIGTERM stopping it
    (:func:`_stop_on_signals`). Returns the dataset, the notes and None; after an interruption
    None, the notes and the exit code, having printed one line: what was ``kept`` and the
    command that continues the run (``again``)."""
    notes = _Notes()
    try:
        with _stop_on_signals() as received:
            ds = function(
                cfg,
                progress=_progress(args),
                resume=args.resume,
                overwrite=args.overwrite,
                mkdir=args.mkdir,
                notify=notes,
                **options,
            )
    except KeyboardInterrupt as exc:
        print(
            f"spheredens: {exc or 'interrupted'}; {kept}; continue with: {again}",
            file=sys.stderr,
        )
        return None, notes, _interrupted_exit_code(received)
    return ds, notes, None


def _cmd_run(args: argparse.Namespace) -> int:
    """Integrate the run described by CONFIG (a TOML file, every key in docs/config.md) and write
    the density at the snapshot times, with mass, min_rho, energy and w2_projection, to a netCDF
    file (layout in docs/dataset.md). The file is rewritten as snapshots arrive, with a
    checkpoint, so an interrupted run (Ctrl-C: exit 130, SIGTERM: exit 143) keeps what it did
    and --resume continues it.
    """
    cfg = load_config(args.config)
    output = run_output(cfg, args.config, args.output)
    path = output if output is not None else cfg.output_path()
    _check_output(
        args,
        path,
        option="--output" if args.output else None,
        key="output.path" if not args.output and cfg.output.path is not None else None,
    )
    ds, notes, code = _integrate(
        run,
        args,
        cfg,
        kept=f"the snapshots so far and a checkpoint are in {_shown(path)}",
        again=f"spheredens run {args.config} --resume"
        + (f" --output {args.output}" if args.output else ""),
        output=output,
        checkpoint_seconds=args.checkpoint_seconds,
    )
    if code is not None:
        return code
    if "complete" in notes.kinds:  # nothing was run: no "wrote", no summary of an old run
        return 0
    _wrote(args, path)
    if cfg.output.figure and not args.no_figure:
        figure = plot_run(ds, figure_path(path))
        _wrote(args, figure)
        if "slice_mode" in ds:
            _wrote(args, slices_figure_path(figure))
    if not args.quiet:
        w2 = ds["w2_projection"].values
        summary = (
            f"t = {float(ds.time[-1]):g}, {ds.attrs['n_steps']} steps in "
            f"{ds.attrs['wall_time_seconds']:.1f} s; mass {float(ds['mass'][-1]):.15g}, "
            f"min rho {float(ds['min_rho'].min()):.3g}"
        )
        if w2.size and w2[-1] == w2[-1]:
            summary += f"; min over t of W2 to Pi_# rho_0: {float(min(w2)):.4g}"
        if "marginal_w2_dirac" in ds:
            summary += (
                f"; energy {float(ds['energy'][0]):.4g} -> {float(ds['energy'][-1]):.4g}, "
                f"W2 of the marginal to the nearest Dirac mass "
                f"{float(ds['marginal_w2_dirac'][-1]):.3g}"
            )
        print(summary)
    return 0


def _cmd_info(args: argparse.Namespace) -> int:
    """List every registered name accepted in a configuration."""
    print(f"spheredens {__version__}")
    print("models:")
    for name in MODELS:
        print(f"  {name:22s} {MODELS.get(name).description}")
    print("schemes:")
    for domain, registry in SCHEMES.items():
        for name in registry:
            spec = registry.get(name)
            print(f"  {name:22s} {domain}; options: {', '.join(spec.options)}")
    print("interaction evaluators:")
    for name in ("auto", *sorted(n for n in INTERACTIONS if n != "auto")):
        print(f"  {name:22s} {INTERACTIONS.get(name)}")
    print("integrators:")
    for name in INTEGRATORS:
        print(f"  {name:22s} {INTEGRATORS.get(name).description}")
    print("initial densities: " + ", ".join(INITIAL_DENSITIES))
    print("auxiliary kernels (usa_av):")
    for name in KERNELS:
        doc = " ".join((KERNELS.get(name).__doc__ or "").split())
        print(f"  {name:22s} {doc}")
    return 0


def _cmd_plot(args: argparse.Namespace) -> int:
    """Draw the figure of a file (PNG), with the targets of its model (the atoms +-u or the great
    circle S cap E_1 of Pi_# rho_0, the top eigenspace of V). A density run: on the circle the
    space-time density beside W2 to the targets; on the sphere two orthographic views and a
    Mollweide map per snapshot, with W2 (radians), max rho (per steradian) and the Gibbs
    undershoot below; usa_av also FILE_slices.png. A particle run: the points over time and at a
    few snapshots. A comparison file (spheredens compare): W2 against time with the ensemble
    band (mean +- std and min to max over the particle runs). Angles are in radians.
    """
    out = Path(args.output or figure_path(args.file))
    _check_new_output(args, out, suffix=".png", inputs=[("the file to draw", args.file)])
    ds = open_figure_file(args.file)
    if "slice_mode" in ds:  # usa_av: the slices' figure beside it
        _check_new_output(
            args, slices_figure_path(out), suffix=".png", inputs=[("the file to draw", args.file)]
        )
    print(f"wrote {_shown(plot_run(ds, out, times=args.times, mkdir=args.mkdir))}")
    return 0


def _cmd_animate(args: argparse.Namespace) -> int:
    """Animate a file: an MP4 where ffmpeg exists, a GIF (Pillow) otherwise, one frame per
    snapshot shown, with the targets of its model. A density run (circle, sphere on the Gauss
    grid or the finite-volume mesh, usa_av with its slices): the density at each snapshot with a
    cursor on W2 to the targets; a particle run: the points; a comparison file: its W2 curves,
    and the density with the particles of its first run when the files it names are found.
    """
    out = animation_output_path(args.file, args.output)
    _check_new_output(args, out, suffix=out.suffix, inputs=[("the file to animate", args.file)])
    ds = open_figure_file(args.file)
    written = animate_run(ds, out, fps=args.fps, frames=args.frames, mkdir=args.mkdir)
    print(f"wrote {_shown(written)}")
    return 0


#: the most runs one ``spheredens particles --seeds`` starts (each a full particle run and a file)
MAX_SEEDS = 1000


def parse_seeds(text: str) -> list[int]:
    """'0..7' -> 0, 1, ..., 7; '1,4,9' -> 1, 4, 9; at most :data:`MAX_SEEDS` seeds (a range is
    counted before it is built)."""
    try:
        if ".." in text:
            lo, hi = (int(v) for v in text.split(".."))
            count = hi - lo + 1
            seeds = list(range(lo, hi + 1)) if count <= MAX_SEEDS else []
        else:
            seeds = [int(v) for v in text.split(",")]
            count = len(seeds)
    except ValueError:
        raise ConfigError(
            "--seeds", f"{shown(text)} is not a seed list; write e.g. 0..7 or 1,4,9"
        ) from None
    if count > MAX_SEEDS:
        raise ConfigError(
            "--seeds",
            f"{shown(text)} gives {count} seeds, more than {MAX_SEEDS} (each one a "
            "particle run and its file); run fewer at a time",
        )
    if not seeds or min(seeds) < 0:
        raise ConfigError("--seeds", f"{text!r} gives no non-negative seeds")
    return seeds


def _progress(args: argparse.Namespace) -> bool | None:
    """The progress bar of a command (tqdm, :func:`spheredens.simulate.progress_wanted`): off
    with --quiet, forced with --progress, else shown only when stderr is a terminal."""
    if getattr(args, "quiet", False):
        return False
    return True if getattr(args, "progress", False) else None


def _cmd_particles(args: argparse.Namespace) -> int:
    """Integrate the particle system of the model in CONFIG (its [particles] table: n, seed,
    initialization iid | quantile (circle, zonal) | quasi_uniform (sphere), dt, integrator) with
    log-sum-exp softmax and RK4 renormalized to the sphere, at the snapshot times of [time];
    writes the spheredens-particles-1 layout.
    """
    cfg = load_config(args.config)
    require_particles(cfg, args.config)
    seeds = parse_seeds(args.seeds) if args.seeds else [cfg.particles.seed]
    outputs = {
        seed: particles_output_path(
            cfg, seed, several=len(seeds) > 1, config_path=args.config, output=args.output
        )
        for seed in seeds
    }
    for out in outputs.values():  # every file of the ensemble, before the first run
        key = "particles.path" if not args.output and cfg.particles.path is not None else None
        _check_output(args, out, option="--output" if args.output else None, key=key)
        check_not_input(out, input_files(cfg), key=key, option="--output" if args.output else None)
    for seed in seeds:
        out = outputs[seed]
        ds, notes, code = _integrate(
            run_particles,
            args,
            cfg,
            kept=f"the snapshots so far are in {_shown(out)}",
            again=f"spheredens particles {args.config} --resume",
            seed=seed,
            output=out,
        )
        if code is not None:
            return code
        if "complete" not in notes.kinds and not args.quiet:  # nothing ran for a complete file
            print(
                f"wrote {_shown(out)}  ({ds.sizes['particle']} particles, "
                f"{ds.attrs['initialization']}, seed {seed}, {ds.attrs['n_steps']} steps)"
            )
    return 0


#: how the messages of convert_particles name its options on the command line
_CONVERT_OPTIONS = {
    "times": "--times",
    "dt": "--dt",
    "degrees": "--degrees",
    "axes": "--axes",
    "angles": "--angles",
    "model": "--model",
}


def _cmd_convert(args: argparse.Namespace) -> int:
    """Convert a particle run from a .npy array (time, n, d), or (time, n) angles on the circle,
    or an .npz with keys position/positions/x/X or theta/angles, time/t and weight/weights,
    into the spheredens-particles-1 netCDF layout. Positions must be finite unit vectors of the
    domain's dimension, angles radians in [-pi, pi] or [0, 2 pi] (--degrees converts degrees),
    and the array's axes (time, n, d) unless --axes gives their order: the time axis is checked
    against the times given (--times or the file's), the particle axis against the weights;
    with --dt alone the times k dt against --config's t_end, and without --config a time axis
    longer than the particle axis is told in a note. The "wrote" line says how it was read.
    With --config the model of that run configuration is recorded, so that compare checks it;
    without, compare accepts the file with a notice.
    """
    times = [float(v) for v in args.times] if args.times else None
    if args.domain is None and args.config is None:
        raise ConfigError(
            "--domain",
            "give the domain (--domain circle or --domain sphere) or the run "
            "configuration of the particles (--config CONFIG)",
        )
    check_not_input(
        args.output,
        [("the particle array", args.input), ("the configuration (--config)", args.config)],
    )
    out = check_output_path(
        args.output, overwrite=args.overwrite, suffix=".nc", mkdir=args.mkdir, mkdir_hint="--mkdir"
    )
    ds = convert_particles(
        args.input,
        domain=args.domain,
        times=times,
        dt=args.dt,
        angles=True if args.angles else None,
        degrees=args.degrees,
        axes=args.axes,
        config=args.config,
        options=_CONVERT_OPTIONS,
        attrs={k: v for k, v in (("model", args.model), ("beta", args.beta)) if v is not None},
        notify=lambda kind, message: print(f"spheredens: note: {message}", file=sys.stderr),
    )
    write_dataset(ds, out)
    print(f"wrote {_shown(out)}  ({converted_summary(ds)})")  # what was read, in one line
    return 0


def _cmd_sweep(args: argparse.Namespace) -> int:
    """Run every combination of the values listed in the [vary] table of SWEEP (a TOML file with
    base = the base configuration, output_dir, [vary] "model.beta" = [...], ...) as tasks on
    Dask distributed: a local cluster by default (on 127.0.0.1 only, its dashboard too unless
    --dashboard-address names another), or the scheduler at --scheduler. Finished cases are not
    recomputed; partial ones resume; a failed case is reported and the others go on (exit 1).
    Writes one file per case and combined.nc with one dimension per varied key, from the cases
    that finished (a failed case's values NaN, named in the attribute failed_cases).
    """
    sweep = load_sweep(args.sweep)
    check_sweep_output(sweep, mkdir=args.mkdir, mkdir_hint="--mkdir")
    if args.dashboard_address is not None:
        if args.scheduler:
            raise ConfigError(
                "--dashboard-address",
                "applies to the local cluster only: the "
                "scheduler at --scheduler serves its own dashboard",
            )
        check_dashboard_address(args.dashboard_address, "--dashboard-address")
    print(
        f"sweep: {len(sweep.cases)} cases over {', '.join(sweep.keys)}; "
        f"files in {_shown(sweep.output_dir)}"
    )
    try:
        combined, outcome = run_sweep(
            sweep,
            scheduler=args.scheduler,
            n_workers=args.workers,
            progress=not args.quiet,
            mkdir=args.mkdir,
            dashboard_address=args.dashboard_address,
        )
    except KeyboardInterrupt as exc:
        print(
            f"spheredens: {exc or 'sweep interrupted'}: spheredens sweep {args.sweep}"
            + (f" --scheduler {args.scheduler}" if args.scheduler else ""),
            file=sys.stderr,
        )
        return _interrupted_exit_code({"signal": getattr(exc, "signal", signal.SIGINT)})
    summary = outcome_summary(outcome)
    print(
        f"{summary['ran']} ran, {summary['done_earlier']} done earlier, "
        f"{len(summary['failed'])} failed"
    )
    for name, why in summary["failed"].items():
        print(f"  {name}: {why}", file=sys.stderr)
    if combined is not None:
        _wrote(args, sweep.combined_path)
    return 1 if summary["failed"] else 0


def _cmd_analyze(args: argparse.Namespace) -> int:
    """Analyze a combined sweep dataset over model.beta (spheredens sweep): for each beta the
    minimum over time of W2 to Pi_# rho_0, its time, the departure time (first time after the
    minimum with W2 > 2 min + 0.02), the early exponential rate (fit of log W2 on [t_min/4, 3
    t_min/4]) against the spectral gap of V B^T, the log-log slope of min W2 against beta next
    to sqrt(log(beta+1)/beta), and the change of these from each resolution to the next when n,
    lmax or nlat is swept too (one row per beta and resolution). A minimum at the last snapshot
    is flagged "still falling" and a missing departure "no departure by t_end". Writes a
    dataset and a figure (docs/concentration.md has the definitions).
    """
    out = analysis_output_path(args.combined, args.output)
    for written, suffix in ((out, ".nc"), (figure_path(out), ".png")):  # the dataset and its figure
        _check_new_output(
            args, Path(written), suffix=suffix, inputs=[("the combined file", args.combined)]
        )
    combined = open_combined(args.combined)
    result = analyze_beta(combined)
    write_dataset(result, out)
    figure = plot_beta_study(combined, result, figure_path(out))
    print("\n".join(beta_table(result)))
    print(f"wrote {_shown(out)}\nwrote {_shown(figure)}")
    return 0


def _cmd_convergence(args: argparse.Namespace) -> int:
    """A convergence study from runs of one model at refined resolutions (n, lmax or nlat by a
    constant ratio, e.g. 256, 512, 1024), or at one resolution with step tolerances refined by a
    constant ratio (log_sl). For each run: the minimum over time of W2 to Pi_# rho_0, its time,
    and the departure time (the first time after the minimum with W2 > 2 min + 0.02); then the
    change of min W2 and departure from each run to the next, and from the last three the
    observed order p = log((f1 - f2) / (f2 - f3)) / log(ratio), the Richardson estimate
    f3 + (f3 - f2) / (ratio^p - 1) and the grid convergence index of the finest (Roache, safety
    factor 1.25). Runs of another model, domain or scheme are refused in one line.
    """
    names = [str(path) for path in args.runs]
    runs = [open_run(path) for path in args.runs]
    print("\n".join(convergence_table(convergence_study(runs, names))))
    return 0


def _cmd_verify(args: argparse.Namespace) -> int:
    """Check the solver on this machine against exact solutions, at small sizes (9 s of CPU
    time; the references are spheredens/references.py, the bounds those of the tests):

      beta = 0, circle    With V = B = I the model is the Kuramoto model; a wrapped Cauchy
                          density stays wrapped Cauchy, r' = r (1 - r^2) / 2 (Ott-Antonsen).
                          Error of the moments k = 1, 2 at t = 3, at two n: fv and log_sl
                          second order, fourier spectral.
      beta = 0, sphere    The velocity is P_x V m / mass, m the mean of rho, for any B: the
                          evaluators lowrank_meridian (sh_spectral, general B) and funk_hecke
                          (fv), and log_sl's sum over its cells' masses at their centroids,
                          against it.
      zero temperature    Transport by the fixed field X(x) = P_x V B^T x / |B^T x|. The weak
                          form int phi rho_T of every scheme against int phi(Phi_T(y)) rho_0(y) dy,
                          Phi_T the flow of X along the characteristics (ODE solver at 1e-12),
                          at three resolutions (each twice the last), and the observed order
                          log2(e(h) / e(h/2)) beside the scheme's documented order.
      linear growth       With V = B^-T the uniform density on S^2 is steady. The linearized
                          right-hand side on the mode <a, x> against 2 phi <w, x> - <grad phi, w>,
                          w = B^-T a, phi = L(kappa) / kappa (L the Langevin function,
                          kappa = beta |B^T x|), and the growth rate of the mode, beta = 2, 20.

    Prints one line per check: PASS or FAIL, the errors (with the resolution of each), the
    observed order and the documented accuracy with the bound required; then a summary. Exit
    status 0 when every check passes, 1 when one falls short.
    """

    def report(row: Any) -> None:
        if not args.quiet or not row.passed:
            print(row.line(), flush=True)

    rows = verify(only=args.only, report=report)
    print(verify_summary(rows))
    return 0 if all(row.passed for row in rows) else 1
