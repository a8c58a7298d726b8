"""Command line: ``spheredens run | info | plot``.

Errors in configurations and files are printed as one line (``spheredens: error: ...``) with
exit code 2; a run stopped by a numerical failure exits with 1, an interrupted run with 130.
"""
from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Sequence

from ._version import __version__
from .exceptions import SimulationError, SpheredensError

DESCRIPTION = """\
spheredens solves the mean-field continuity equation of self-attention,

    d/dt rho + div_S( rho X[rho] ) = 0   on the circle S^1 or the sphere S^2,

for a probability density rho (models sa, sa_zero_temperature, usa of MODELS.md), and writes
the density at the requested times, with its diagnostics, to a netCDF file.
"""


def _shown(path: Path | str) -> str:
    """A path as the user would type it: relative to the working directory when inside it."""
    path = Path(path).resolve()
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _cmd_run(args: argparse.Namespace) -> int:
    from .config import load_config
    from .runner import run

    cfg = load_config(args.config)
    output = args.output
    if output is None and cfg.output_path() is None:
        output = Path(args.config).with_suffix(".nc")
    try:
        ds = run(cfg, output=output, progress=None if not args.quiet else False)
    except KeyboardInterrupt:
        path = output or cfg.output_path()
        print(f"spheredens: interrupted; the snapshots so far are in {_shown(path)}", file=sys.stderr)
        return 130
    path = Path(output) if output is not None else cfg.output_path()
    print(f"wrote {_shown(path)}")
    if cfg.output.figure and not args.no_figure:
        from .plot import plot_run

        figure = plot_run(ds, Path(path).with_suffix(".png"))
        print(f"wrote {_shown(figure)}")
    if not args.quiet:
        w2 = ds["w2_projection"].values
        summary = (f"t = {float(ds.time[-1]):g}, {ds.attrs['n_steps']} steps in "
                   f"{ds.attrs['wall_time_seconds']:.1f} s; mass {float(ds['mass'][-1]):.15g}, "
                   f"min rho {float(ds['min_rho'].min()):.3g}")
        if w2.size and w2[-1] == w2[-1]:
            summary += f"; min over t of W2 to Pi_# rho_0: {float(min(w2)):.4g}"
        print(summary)
    return 0


def _cmd_info(args: argparse.Namespace) -> int:
    from .initial import INITIAL_DENSITIES
    from .integrators import INTEGRATORS
    from .interaction import INTERACTIONS
    from .models import MODELS
    from .schemes import SCHEMES

    print(f"spheredens {__version__}")
    print("models:")
    for name in MODELS:
        print(f"  {name:22s} {MODELS.get(name).description}")
    print("schemes:")
    for name in SCHEMES:
        spec = SCHEMES.get(name)
        print(f"  {name:22s} {spec.domain}; options: {', '.join(spec.options)}")
    print("interaction evaluators:")
    for name in INTERACTIONS:
        print(f"  {name:22s} {INTERACTIONS.get(name)}")
    print("integrators:")
    for name in INTEGRATORS:
        print(f"  {name:22s} {INTEGRATORS.get(name).description}")
    print("initial densities: " + ", ".join(INITIAL_DENSITIES))
    return 0


def _cmd_plot(args: argparse.Namespace) -> int:
    from .io import open_run
    from .plot import plot_run

    ds = open_run(args.file)
    out = args.output or Path(args.file).with_suffix(".png")
    options = {"times": args.times} if args.times and ds.attrs.get("domain") == "sphere" else {}
    print(f"wrote {_shown(plot_run(ds, out, **options))}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="spheredens", description=DESCRIPTION,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"spheredens {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    p = sub.add_parser("run", help="integrate a run configuration (TOML) and write a netCDF file",
                       description="Integrate the run described by CONFIG (a TOML file, see "
                       "CONFIG.md) and write the density at the snapshot times, with mass, min_rho, "
                       "energy and w2_projection, to a netCDF file (DATASET.md layout). The file is "
                       "rewritten as snapshots arrive, so an interrupted run keeps what it did.")
    p.add_argument("config", help="run configuration (TOML)")
    p.add_argument("--output", "-o", help="netCDF file to write (default: output.path of the "
                   "config, else CONFIG with suffix .nc)")
    p.add_argument("--no-figure", action="store_true", help="do not draw the PNG figure")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress bar and no summary")
    p.set_defaults(func=_cmd_run)
    p = sub.add_parser("info", help="list the models, schemes, evaluators and initial densities",
                       description="List every registered name accepted in a configuration.")
    p.set_defaults(func=_cmd_info)
    p = sub.add_parser("plot", help="draw the figure of a run file",
                       description="Draw the figure of a run file (PNG): on the circle the "
                       "space-time density beside W2 to Pi_# rho_0; on the sphere orthographic views "
                       "and a Mollweide map per snapshot, with W2 and min rho below.")
    p.add_argument("file", help="a netCDF file written by spheredens run")
    p.add_argument("--output", "-o", help="PNG file (default: FILE with suffix .png)")
    p.add_argument("--times", type=float, nargs="+", metavar="T",
                   help="sphere: snapshot times to draw (nearest stored; default: 4 evenly spaced)")
    p.set_defaults(func=_cmd_plot)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``spheredens`` command."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    logging.basicConfig(level=logging.WARNING, format="spheredens: %(message)s")
    try:
        return int(args.func(args))
    except SimulationError as exc:
        print(f"spheredens: run stopped: {exc}", file=sys.stderr)
        return 1
    except SpheredensError as exc:
        print(f"spheredens: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
