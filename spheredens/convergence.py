"""``spheredens convergence RUN...``: what a sequence of refinements of one run says.

The runs are one model (:func:`spheredens.agreement.check_models`: beta, Q, K, V, initial
density, slices) on one domain with one scheme, at resolutions refined by a constant ratio
(``n``, ``lmax`` or ``nlat``, the scheme's :class:`~spheredens.schemes.Resolution`), or at one
resolution with step tolerances refined by a constant ratio (``log_sl``). Of each run's W2 to
Pi_# rho_0 (``w2_projection``) it takes the minimum, its time and the departure time, as
:func:`spheredens.analysis.curve_summary` defines them, and from the last three runs the
observed order, the Richardson estimate of the limit and the grid convergence index of the
finest (:func:`spheredens.analysis.richardson_estimate`); from two runs only the change.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from .agreement import check_models
from .analysis import curve_summary, richardson_estimate
from .exceptions import SchemaError
from .geometry import get_domain

#: the quantities of each run, in the order printed
QUANTITIES = ("min_w2", "t_min", "departure_time")
#: two refinement ratios are the same when they differ by less than this (relative)
RATIO_TOLERANCE = 1e-6


def _refinement(ds: Any, name: str) -> tuple[str, float]:
    """(the refined parameter, its value) of one run: the scheme's resolution key."""
    try:
        cls = get_domain(str(ds.attrs["domain"])).scheme_class(str(ds.attrs["scheme"]))
    except KeyError as exc:
        raise SchemaError(f"{name}: not a density run (no domain or scheme recorded)") from exc
    key = cls.resolution.key
    if key not in ds.attrs:
        raise SchemaError(f"{name}: the run does not record its resolution {key}")
    return key, float(ds.attrs[key])


def convergence_study(runs: Sequence[Any], names: Sequence[str] = ()) -> dict[str, Any]:
    """Min W2 to Pi_# rho_0, its time and the departure time of each run, their changes under
    refinement and, from three runs or more, the Richardson estimates (module docstring).

    Parameters
    ----------
    runs : sequence of xarray.Dataset
        Density runs (:func:`spheredens.open_run`) of one model, domain and scheme, at least
        two, in any order.
    names : sequence of str
        The file names, for messages and the table.

    Returns
    -------
    dict
        ``parameter`` (``n``, ``lmax``, ``nlat`` or ``tolerance``), ``ratio`` (the refinement
        ratio, > 1), ``rows`` (coarse to fine: name, value of the parameter and the
        :data:`QUANTITIES`), ``changes`` (per quantity, |f_fine - f_coarse| / |f_fine| of each
        step) and ``richardson`` (per quantity, order / extrapolated / gci_fine of the last three;
        NaN where the changes do not shrink, or absent with two runs).

    Raises
    ------
    SchemaError
        Fewer than two runs, another domain or scheme, no refinement, or refinements that are
        not by one ratio.
    ModelMismatchError
        Runs of different models (the first difference, in one line).
    """
    names = list(names) + [f"run {k}" for k in range(len(names), len(runs))]
    if len(runs) < 2:
        raise SchemaError("convergence needs two runs or more (three for an order)")
    for key in ("domain", "scheme"):
        values = {str(ds.attrs.get(key)) for ds in runs}
        if len(values) > 1:
            raise SchemaError(f"the runs differ in {key} ({', '.join(sorted(values))}): refine one")
    check_models(runs[0], runs[1:], density_file=names[0], particle_files=names[1:])
    params = [_refinement(ds, name) for ds, name in zip(runs, names)]
    values = np.array([v for _, v in params])
    parameter = params[0][0]
    if np.all(values == values[0]) and all("tolerance" in ds.attrs for ds in runs):
        parameter, values = (
            "tolerance",
            1.0 / np.array([float(ds.attrs["tolerance"]) for ds in runs]),
        )
    order = np.argsort(values, kind="stable")
    steps = values[order][1:] / values[order][:-1]
    if np.any(steps <= 1.0):
        raise SchemaError(f"two runs have the same {parameter}: give each refinement once")
    ratio = float(steps[0])
    if np.any(np.abs(steps / ratio - 1.0) > RATIO_TOLERANCE):
        raise SchemaError(
            f"the {parameter} is not refined by one ratio ({', '.join(f'{s:g}' for s in steps)}): "
            "Richardson's estimate needs a constant ratio"
        )
    rows = []
    for k in order:
        ds = runs[k]
        summary = curve_summary(ds["time"].values, ds["w2_projection"].values)
        shown = float(ds.attrs["tolerance"]) if parameter == "tolerance" else values[k]
        rows.append({"name": names[k], parameter: shown, **{q: summary[q] for q in QUANTITIES}})
    changes = {
        q: [
            abs(fine[q] - coarse[q]) / abs(fine[q]) if fine[q] else math.nan
            for coarse, fine in zip(rows[:-1], rows[1:])
        ]
        for q in QUANTITIES
    }
    out: dict[str, Any] = {"parameter": parameter, "ratio": ratio, "rows": rows, "changes": changes}
    if len(rows) >= 3:
        out["richardson"] = {
            q: richardson_estimate(*(row[q] for row in rows[-3:]), ratio=ratio)
            for q in ("min_w2", "departure_time")
        }
    return out


def convergence_table(study: dict[str, Any]) -> list[str]:
    """The lines ``spheredens convergence`` prints for :func:`convergence_study`."""
    p = study["parameter"]
    lines = [f"{p:>10}  {'min W2':>10}  {'t_min':>8}  {'departure':>9}  file"]
    for row in study["rows"]:
        dep = row["departure_time"]
        lines.append(
            f"{row[p]:>10g}  {row['min_w2']:>10.6g}  {row['t_min']:>8.4g}  "
            f"{'none' if math.isnan(dep) else f'{dep:.4g}':>9}  {row['name']}"
        )
    for q, label in (("min_w2", "min W2"), ("departure_time", "departure")):
        steps = ", ".join("-" if math.isnan(c) else f"{100 * c:.2f}%" for c in study["changes"][q])
        lines.append(f"{label}: change per refinement (ratio {study['ratio']:g}): {steps}")
        r = study.get("richardson", {}).get(q)
        if r is None:
            continue
        if math.isnan(r["order"]):
            lines.append(f"{label}: no observed order (the changes do not shrink monotonically)")
        else:
            lines.append(
                f"{label}: observed order {r['order']:.2f}, Richardson estimate "
                f"{r['extrapolated']:.6g}, grid convergence index of the finest "
                f"{100 * r['gci_fine']:.2f}%"
            )
    return lines
