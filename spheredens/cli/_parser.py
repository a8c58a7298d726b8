"""The parser of the ``spheredens`` command: its options, help texts and subcommands.

:func:`build_parser` gives ``spheredens --help`` and each command's ``--help``; a subcommand's
description is the docstring of its function in :mod:`spheredens.cli._commands`.
"""

from __future__ import annotations

import argparse
import math
from typing import Any, Callable

from .._version import __version__
from ..geometry import DOMAINS
from ..plot import (
    DEFAULT_FPS,
    MAX_DEFAULT_FRAMES,
)
from ..transport import DENSITY_ATOMS
from ._commands import (
    _cmd_analyze,
    _cmd_animate,
    _cmd_convergence,
    _cmd_convert,
    _cmd_info,
    _cmd_particles,
    _cmd_plot,
    _cmd_run,
    _cmd_sweep,
    _cmd_verify,
)
from ._compare import _cmd_compare

DESCRIPTION = """\
spheredens solves the mean-field continuity equation of self-attention,

    d/dt rho + div_S( rho X[rho] ) = 0   on the circle S^1 or the sphere S^2,

for a probability density rho (models sa, sa_zero_temperature, usa, usa_av: docs/models.md),
and writes the density at the requested times, with its diagnostics, to a netCDF file
(docs/dataset.md). Configuration keys: docs/config.md.
"""


def number(
    kind: type = float,
    *,
    minimum: float = 0.0,
    strict: bool = False,
    finite: bool = True,
) -> Callable[[str], Any]:
    """An argparse ``type`` for a numeric option: ``kind(text)`` (int or float) that is at least
    ``minimum`` (above it when ``strict``), not NaN, and finite when ``finite``; anything else is
    refused with one line ("argument --points: must be an integer >= 1, got '0'")."""
    noun = "an integer" if kind is int else ("a finite number" if finite else "a number")
    rule = f"must be {noun} {'>' if strict else '>='} {minimum:g}"

    def convert(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{rule}, got {text!r}") from None
        if (
            math.isnan(value)
            or (finite and math.isinf(value))
            or value < minimum
            or (strict and value == minimum)
        ):
            raise argparse.ArgumentTypeError(f"{rule}, got {text!r}")
        return value

    convert.__name__ = kind.__name__
    return convert


class _Parser(argparse.ArgumentParser):
    """argparse whose errors are one line, ``spheredens: error: ...`` with exit code 2, as the
    errors of the commands themselves (no usage block: ``--help`` shows it)."""

    def error(self, message: str) -> Any:
        self.exit(
            2,
            f"spheredens: error: {' '.join(message.split())} (see {self.prog} --help)\n",
        )


#: options several commands share: name -> (flags, argparse keywords); each command gives the help
_SHARED_OPTIONS: dict[str, tuple[tuple[str, ...], dict[str, Any]]] = {
    "output": (("--output", "-o"), {}),
    "no_figure": (("--no-figure",), {"action": "store_true"}),
    "quiet": (("--quiet", "-q"), {"action": "store_true"}),
    "progress": (("--progress",), {"action": "store_true"}),
    "resume": (("--resume",), {"action": "store_true"}),
    "overwrite": (("--overwrite",), {"action": "store_true"}),
    "times": (("--times",), {"type": number(float), "nargs": "+", "metavar": "T"}),
    "mkdir": (("--mkdir",), {"action": "store_true"}),
}

#: help of --progress (run, particles, compare)
_PROGRESS_HELP = (
    "show the progress bar even when stderr is not a terminal (by default it is shown "
    "on a terminal and in a notebook only)"
)

#: the argument of plot and animate
_FILE = ("file", "a netCDF file written by spheredens run, particles or compare")

#: help of --mkdir (every command that writes a file)
_MKDIR_HELP = (
    "create the folder of the output file when missing (otherwise a missing folder is "
    "refused before any work)"
)


def _add_shared(parser: argparse.ArgumentParser, **helps: str) -> None:
    """Add the shared options named by the keywords (:data:`_SHARED_OPTIONS`), in their order,
    each with the help text given."""
    for name, text in helps.items():
        flags, keywords = _SHARED_OPTIONS[name]
        parser.add_argument(*flags, help=text, **keywords)


def _add_command(
    sub: Any,
    name: str,
    func: Callable[[argparse.Namespace], int],
    help: str,
    *arguments: tuple[str, str],
) -> argparse.ArgumentParser:
    """A subcommand ``name`` running ``func(args)``, described by the docstring of ``func``, with
    its positional ``arguments``: (name, help) pairs, in order."""
    parser = sub.add_parser(name, help=help, description=func.__doc__)
    parser.set_defaults(func=func)
    for argument, text in arguments:
        parser.add_argument(argument, help=text)
    return parser


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="spheredens",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"spheredens {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    p = _add_command(
        sub,
        "run",
        _cmd_run,
        "integrate a run configuration (TOML) and write a netCDF file",
        ("config", "run configuration (TOML)"),
    )
    _add_shared(
        p,
        output="netCDF file to write (default: output.path of the config, else CONFIG "
        "with suffix .nc)",
        no_figure="do not draw the PNG figure",
        quiet="no progress bar, no summary and no 'wrote' lines (errors and notes are "
        "still printed)",
        progress=_PROGRESS_HELP,
        resume="continue the partial run in the output file from its last checkpoint (bit "
        "for bit the uninterrupted result); with a changed time.t_end (same snapshot "
        "spacing) a complete run is extended and a partial one ends earlier. A damaged "
        "checkpoint (checksum, NaN, mass) is refused; a complete file or a missing one is "
        "said in a note",
        overwrite="replace an existing output file (otherwise an existing file is never touched)",
        mkdir=_MKDIR_HELP,
    )
    p.add_argument(
        "--checkpoint-seconds",
        type=number(float, strict=True, finite=False),
        default=60.0,
        metavar="S",
        help="wall-clock seconds between checkpoints written between snapshots "
        "(> 0, default 60; inf: none between snapshots)",
    )
    p = _add_command(
        sub,
        "particles",
        _cmd_particles,
        "integrate the n-particle system of a configuration",
        ("config", "run configuration (TOML) with a [particles] table"),
    )
    p.add_argument(
        "--seeds",
        help="an ensemble of i.i.d. runs, e.g. 0..7 or 1,4,9 (one file each, suffix _seed<k>)",
    )
    _add_shared(
        p,
        output="netCDF file (default: particles.path, else output.path with suffix _particles)",
        quiet="no progress bar and no 'wrote' lines",
        progress=_PROGRESS_HELP,
        resume="continue partial particle files",
        overwrite="replace existing particle files",
        mkdir=_MKDIR_HELP,
    )
    p = _add_command(
        sub,
        "compare",
        _cmd_compare,
        "W2 between runs of one model: a density and particle runs, two densities, two "
        "particle runs",
    )
    p.add_argument(
        "runs",
        nargs="+",
        metavar="RUN",
        help="density files (spheredens run) and particle files (spheredens particles): a "
        "density then particle files, or runs measured against the first (or --reference)",
    )
    p.add_argument(
        "--reference",
        metavar="RUN",
        help="measure every RUN against this run (e.g. the finest); default: the first RUN",
    )
    _add_shared(
        p, output="comparison file (default: the reference (first) file with suffix _compare.nc)"
    )
    p.add_argument(
        "--points",
        type=number(int, minimum=1),
        default=DENSITY_ATOMS,
        help="sphere: atoms "
        f"of each coarsened density (>= 1, default {DENSITY_ATOMS}, as the runs' w2_projection)",
    )
    _add_shared(
        p,
        times="snapshots to draw",
        no_figure="do not draw the PNG figure",
        overwrite="replace an existing comparison file",
        mkdir=_MKDIR_HELP,
        quiet="no progress bar and no 'wrote' lines",
        progress=_PROGRESS_HELP,
    )
    p.add_argument(
        "--allow-mismatch",
        action="store_true",
        help="compare runs of another "
        "model than the reference's (the density's) (beta, Q, K, V, initial density, slice "
        "labels and weights) anyway; the differences are recorded in the comparison file",
    )
    p = _add_command(
        sub,
        "convert-particles",
        _cmd_convert,
        "convert .npy/.npz particle arrays to spheredens-particles-1",
    )
    p.add_argument("input", help=".npy or .npz file")
    p.add_argument("output", help="netCDF file to write")
    p.add_argument(
        "--domain",
        choices=list(DOMAINS),
        help="circle or sphere (required unless --config gives it)",
    )
    p.add_argument(
        "--config",
        metavar="CONFIG",
        help="run configuration (TOML) of the model the particles "
        "were run with: its model, domain, initial density and slices are stamped into the "
        "file, so that compare checks them against the density",
    )
    p.add_argument(
        "--times",
        type=number(float),
        nargs="+",
        metavar="T",
        help="snapshot times (when the file has none)",
    )
    p.add_argument(
        "--dt",
        type=number(float, strict=True),
        help="time between snapshots (t_k = k dt, "
        "> 0), when the file has no times; with --config they must end by its t_end unless "
        "--axes gives the layout",
    )
    p.add_argument(
        "--angles",
        action="store_true",
        help="the array holds angles in radians, in [-pi, pi] or [0, 2 pi] (circle)",
    )
    p.add_argument(
        "--degrees",
        action="store_true",
        help="the array holds angles in degrees, in [-180, 180] "
        "or [0, 360] (circle; implies --angles)",
    )
    p.add_argument(
        "--axes",
        metavar="AXES",
        help="the order of the array's axes, comma-separated: time, n "
        "(particles) and d (components); default time,n,d (angles: time,n), e.g. n,time,d "
        "or, for angles, n,time",
    )
    p.add_argument("--model", help="model attribute to record: a registered model name (e.g. sa)")
    p.add_argument(
        "--beta",
        type=number(float, finite=False),
        help="beta attribute to record (>= 0)",
    )
    _add_shared(p, overwrite="replace an existing output file", mkdir=_MKDIR_HELP)
    p = _add_command(
        sub,
        "sweep",
        _cmd_sweep,
        "run a sweep of configurations on Dask",
        ("sweep", "sweep file (TOML)"),
    )
    p.add_argument(
        "--scheduler",
        help="address of a running Dask scheduler, e.g. tcp://127.0.0.1:8786",
    )
    p.add_argument(
        "--workers",
        type=number(int, minimum=1),
        help="local cluster: number of worker processes (>= 1, default 2)",
    )
    p.add_argument(
        "--dashboard-address",
        metavar="HOST:PORT",
        help="local cluster: where its Dask "
        "dashboard listens (default 127.0.0.1 and a free port: this machine only; "
        ":8787 serves every interface)",
    )
    _add_shared(
        p,
        quiet="no per-case progress lines and no 'wrote' line",
        mkdir="create the missing folders above output_dir (output_dir itself is always created)",
    )
    p = _add_command(
        sub,
        "analyze-beta",
        _cmd_analyze,
        "minimum of W2 to Pi_# rho_0, its time, departure, rates over beta",
        ("combined", "combined.nc written by spheredens sweep"),
    )
    _add_shared(
        p,
        output="analysis file (default: COMBINED_beta_analysis.nc)",
        mkdir=_MKDIR_HELP,
        overwrite="replace an existing analysis file and its figure (otherwise they are never "
        "touched)",
    )
    p = _add_command(
        sub,
        "convergence",
        _cmd_convergence,
        "observed order and Richardson estimate of min W2 and departure over refinements",
    )
    p.add_argument(
        "runs",
        nargs="+",
        metavar="RUN",
        help="density runs of one model at refined resolutions (or step tolerances), any order",
    )
    _add_command(
        sub,
        "info",
        _cmd_info,
        "list the models, schemes, evaluators and initial densities",
    )
    p = _add_command(
        sub,
        "plot",
        _cmd_plot,
        "draw the figure of a run, particle or comparison file",
        _FILE,
    )
    _add_shared(
        p,
        output="PNG file (default: FILE with suffix .png)",
        times="sphere runs and particle runs: snapshot times to draw (nearest stored; default: "
        "4, for a sphere run where its W2 to Pi_# rho_0 changes most: the first, the last, the "
        "minimum; for particles evenly spaced)",
        mkdir=_MKDIR_HELP,
        overwrite="replace an existing figure (otherwise it is never touched)",
    )
    p = _add_command(
        sub,
        "animate",
        _cmd_animate,
        "animate a run, particle or comparison file (MP4 or GIF)",
        _FILE,
    )
    _add_shared(
        p,
        output="animation file, .mp4 (needs ffmpeg) or .gif (default: FILE with suffix .mp4 "
        "where ffmpeg exists, else .gif)",
        mkdir=_MKDIR_HELP,
        overwrite="replace an existing animation (otherwise it is never touched)",
    )
    p.add_argument(
        "--fps",
        type=number(float, strict=True),
        default=DEFAULT_FPS,
        metavar="N",
        help=f"frames per second (> 0, default {DEFAULT_FPS})",
    )
    p.add_argument(
        "--frames",
        type=number(int, minimum=1),
        metavar="K",
        help="number of frames: K evenly "
        f"spaced snapshots (>= 1; default every snapshot, at most {MAX_DEFAULT_FRAMES})",
    )
    p = _add_command(
        sub,
        "verify",
        _cmd_verify,
        "check the schemes against exact solutions on this machine",
    )
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.add_argument(
        "--only",
        nargs="+",
        metavar="TEXT",
        help="run only the checks whose name contains "
        "one of these, e.g. --only 'circle fv' 'linear growth'",
    )
    _add_shared(p, quiet="print only the failed checks and the summary")
    return parser
