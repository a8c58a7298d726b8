"""The command ``spheredens compare``: a density against particle runs
(:func:`spheredens.compare.compare`), or any runs of one model against a reference
(:func:`spheredens.compare_pairs.compare_runs`), as :func:`spheredens.compare_pairs.comparison_plan`
decides from the files given."""

from __future__ import annotations

import argparse
import math
import sys
import warnings
from typing import Any, Callable

from ..compare import (
    SAMPLING_DRAWS,
    compare,
    compare_output_path,
    comparison_summary,
)
from ..compare_pairs import ComparePlan, compare_runs, comparison_plan, pairs_report
from ..exceptions import ModelMismatchError, SpheredensWarning
from ..io import check_not_input, check_output_path, open_file, write_dataset
from ..locking import output_lock
from ..plot import figure_path, plot_comparison, plot_pairs
from ._commands import _progress, _wrote


def _cmd_compare(args: argparse.Namespace) -> int:
    """W2 (geodesic cost) between runs of one model at every common snapshot time (never
    interpolated in time). Circle: exact (POT). Sphere: exact EMD after coarsening each density
    to about --points atoms (the bound is written).

    One density file then particle files: the density against the particle measure of each
    particle file. With several particle files (an ensemble of seeds): mean and standard
    deviation over them, the W2 between the runs at the last common time, and whether the
    density is within the ensemble's spread (its mean W2 to the runs not above every run's mean
    W2 to the others) and no farther than average (its mean W2 to the runs <= the mean W2
    between runs).

    Any other list of runs (two or more densities, e.g. two resolutions or two schemes; two or
    more particle files; a density then a mix) is measured against its FIRST file: W2 between
    it and each other run, each density in its own scheme's representation on its own grid
    (circle: its piecewise-constant cells, or its cells' centroids for log_sl; sphere: its grid
    atoms), particles with their weights. --reference RUN measures every run given against RUN
    instead (e.g. the finest; with --reference a density and only particle files, the
    comparison of the density with its particle runs). A particle file first with a density
    after it is refused as swapped.
    """
    plan = comparison_plan(args.runs, args.reference)  # wrong kinds, swapped: one line
    out = compare_output_path(plan.reference, args.output)
    inputs = [("the reference" if plan.pairs else "the density file", plan.reference)]
    inputs += [("a run" if plan.pairs else "a particle file", p) for p in plan.others]
    for written in (out, *(() if args.no_figure else (figure_path(out),))):  # also with --overwrite
        check_not_input(written, inputs, option="--output")
    files = [open_file(p)[1] for p in (plan.reference, *plan.others)]
    out = check_output_path(
        out,
        overwrite=args.overwrite,
        option="--output",
        suffix=".nc",
        mkdir=args.mkdir,
        mkdir_hint="--mkdir",
    )
    with output_lock(out):  # one writer per file: refused at once when another holds it
        result = _compared(
            compare_runs if plan.pairs else compare,
            files[0],
            files[1:],
            n_points=args.points,
            progress=_progress(args),
            allow_mismatch=args.allow_mismatch,
            **_file_names(plan),
        )
        for text in result.attrs.get(
            "times_not_compared", ""
        ).splitlines():  # files compared in part
            print(f"spheredens: note: {text}", file=sys.stderr)
        write_dataset(result, out)
    _wrote(args, out)
    if not args.no_figure:
        draw = plot_pairs if plan.pairs else plot_comparison
        fig = draw(
            result,
            files[0],
            files[1:] if plan.pairs else files[1],
            figure_path(out),
            times=args.times,
        )
        _wrote(args, fig)
    model_check = result.attrs["model_check"].replace("(allow_mismatch)", "(--allow-mismatch)")
    if plan.pairs:
        print("\n".join(pairs_report(result)))
        print(f"  model check: {model_check}")
        return 0
    _print_density_particles(result, len(files) - 1, model_check)
    return 0


def _file_names(plan: ComparePlan) -> dict[str, Any]:
    """The file-name keywords of :func:`compare` or :func:`compare_runs`."""
    if plan.pairs:
        return {"reference_file": plan.reference, "run_files": list(plan.others)}
    return {"density_file": plan.reference, "particle_files": list(plan.others)}


def _compared(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``function(*args, **kwargs)`` with its SpheredensWarnings printed once each, one line,
    no source location, and a model mismatch's hint said as the command's option."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", SpheredensWarning)
        try:
            result = function(*args, **kwargs)
        except ModelMismatchError as exc:
            if not exc.hint:
                raise
            raise ModelMismatchError(
                exc.message, hint="pass --allow-mismatch to compare anyway"
            ) from None
    for text in dict.fromkeys(
        str(w.message) for w in caught if issubclass(w.category, SpheredensWarning)
    ):
        print(f"spheredens: warning: {text}", file=sys.stderr)  # once, one line, no source location
    for w in caught:
        if not issubclass(w.category, SpheredensWarning):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return result


def _print_density_particles(result: Any, runs: int, model_check: str) -> None:
    """What ``spheredens compare DENSITY PARTICLES...`` prints: W2 per time, the model check, the
    departures, the sampling level, the ensemble and the slices."""
    for t, m, sd_, r in zip(
        result["time"].values,
        result["w2_mean"].values,
        result["w2_std"].values,
        result["density_resolution"].values,
    ):
        spread = f" +- {sd_:.3g}" if runs > 1 else ""
        print(f"  t = {t:8.4g}   W2 = {m:.4g}{spread}   (density resolution {r:.2g})")
    print(f"  model check: {model_check}")
    print(f"  {result.attrs['departure_verdict']}")
    if "sampling_w2" in result:  # runs started i.i.d.: the W2 their sampling alone gives
        for n, level, spread in sorted(
            {
                (int(n), float(m), float(s))
                for n, m, s in zip(
                    result["n_particles"].values,
                    result["sampling_w2"].values,
                    result["sampling_w2_std"].values,
                )
                if math.isfinite(m)
            }
        ):
            print(
                f"  i.i.d. sampling level, n = {n}: W2 of n samples of rho_0 to rho_0 is "
                f"{level:.4g} +- {spread:.2g} ({SAMPLING_DRAWS} draws); W2 near it is sampling "
                "noise, not disagreement"
            )
    summary = comparison_summary(result)
    check = summary["ensemble"]
    if check is not None:
        print(
            f"  ensemble at t = {result['time'].values[-1]:.4g}: "
            f"W2 density-runs {check['density_mean']:.4g}, "
            f"between runs {check['between_mean']:.4g}; density's rank {check['rank']} of "
            f"{runs}: within the spread: {'yes' if check['within_spread'] else 'no'}, "
            f"no farther than average: {'yes' if check['no_farther_than_average'] else 'no'}"
        )
    for t, row in zip(
        result["time"].values, summary["slices"] or ()
    ):  # usa_av: W2 above is the marginal's
        if not row["count"]:
            print(f"  t = {t:8.4g}   slices: no particle labels")
            continue
        print(
            f"  t = {t:8.4g}   slices: W2 mean {row['mean']:.4g}, max {row['max']:.4g} "
            f"over {row['count']} slices"
        )
