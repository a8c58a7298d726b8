"""Concentration studies in beta: minimum of W2 to Pi_# rho_0, its time, departure, early rate.

Definitions (for W2(t) = ``w2_projection`` of one run):

* ``min_w2``, ``t_min``: the minimum over the snapshots and its time.
* ``departure_time``: the first snapshot after ``t_min`` where W2 > 2 min_w2 + 0.02 (the
  density has left the neighbourhood of Pi_# rho_0: the terminal phase); NaN if never.
* ``early_rate``: -slope of a least-squares line through log W2 on t in [t_min / 4, 3 t_min / 4]
  (the exponential approach, away from the start and from the minimum); compared with the
  spectral gap gamma = mu_1 - mu_2 of V B^T (``rate_over_gap``).
* Across beta: the least-squares slope of log min_w2 against log beta, and the bound
  sqrt(log(beta + 1) / beta) of the concentration theorem (its constant is unknown: the table
  gives min_w2 divided by it).
* ``t_last``: the last snapshot with a finite W2. A minimum at ``t_last`` means W2 is still
  falling when the run ends (``min_at_end``): min_w2 is then only an upper bound of the
  minimum and there is no departure yet.

:func:`beta_table` prints one row per (beta, resolution) with these flags in words and the
change of min_w2 and departure_time from each resolution to the next (n -> 2n).

The same departure, of a density and of each of its particle runs, is what ``spheredens
compare`` reports (:func:`departures`, :func:`departure_verdict`). The figures of a study are
drawn by :mod:`spheredens.plot` (:func:`spheredens.plot.plot_beta_study`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ._lazy import xarray as xr
from ._types import Array
from .diagnostics import particle_projection_distance
from .exceptions import SchemaError
from .io import read_netcdf
from .result_schema import analysis_attrs

DEPARTURE_FACTOR, DEPARTURE_OFFSET = 2.0, 0.02
#: two snapshot times are the same when they differ by less than this (relative to max(1, |t|))
TIME_TOLERANCE = 1e-9

#: the sweep dimensions that are resolutions (refinement studies): circle cells, spectral degree,
#: finite-volume rings
RESOLUTION_DIMS = ("n", "lmax", "nlat")


def curve_summary(t: Array, w2: Array) -> dict[str, float]:
    """min_w2, t_min, departure_time, early_rate and t_last of one W2(t) curve (see the module
    doc)."""
    t, w2 = np.asarray(t, float), np.asarray(w2, float)
    ok = np.isfinite(w2)
    if ok.sum() < 3:
        return {
            "min_w2": np.nan,
            "t_min": np.nan,
            "departure_time": np.nan,
            "early_rate": np.nan,
            "t_last": np.nan,
        }
    i = int(np.nanargmin(np.where(ok, w2, np.inf)))
    t_min, w_min = float(t[i]), float(w2[i])
    after = np.flatnonzero((t > t_min) & ok & (w2 > DEPARTURE_FACTOR * w_min + DEPARTURE_OFFSET))
    departure = float(t[after[0]]) if after.size else np.nan
    window = ok & (t >= 0.25 * t_min) & (t <= 0.75 * t_min) & (w2 > 0)
    rate = float(-np.polyfit(t[window], np.log(w2[window]), 1)[0]) if window.sum() >= 3 else np.nan
    return {
        "min_w2": w_min,
        "t_min": t_min,
        "departure_time": departure,
        "early_rate": rate,
        "t_last": float(t[ok][-1]),
    }


def density_model(density: Any) -> tuple[Any, str]:
    """The model the density file records (``density.sd.model()``), or None and the reason it
    could not be rebuilt."""
    try:
        return density.sd.model(), ""
    except SchemaError as exc:  # no model recorded: say so, do not stop the comparison
        return None, f"the density's model could not be rebuilt ({exc})"


def particle_projection_curve(model: Any, run: Any) -> tuple[Array, str]:
    """W2 of a particle run to Pi_# of its own particles at t = 0 at each of its snapshots
    (:class:`spheredens.diagnostics.ParticleProjectionDistance`, the ``w2_projection`` that
    spheredens particle runs record), and the reason when it is undefined (NaN then)."""
    t = np.asarray(run["time"].values, dtype=float)
    positions = np.asarray(run["position"].values, dtype=float)
    weight = np.asarray(run["particle_weight"].values, dtype=float)
    if abs(t[0]) > TIME_TOLERANCE:
        return np.full(t.size, np.nan), f"the particle file starts at t = {t[0]:g}, not 0"
    distance, reason = particle_projection_distance(model, positions[0], weight)
    if distance is None:
        return np.full(t.size, np.nan), reason
    return np.array([distance(x, weight) for x in positions]), ""


def departures(density: Any, runs: Sequence[Any]) -> dict[str, Any]:
    """When the density and each particle run leave the zero-temperature target, by the
    definition of ``analyze-beta`` (:func:`spheredens.analysis.curve_summary`: the first
    snapshot after the minimum of W2 to the target with W2 > 2 min + 0.02), each on its own
    snapshot times.

    The density's W2 is its ``w2_projection`` (to Pi_# rho_0); each particle run's is to
    Pi_# of its own initial particles (:func:`particle_projection_curve`, with the density's
    model), computed from the positions so that files converted from other codes are treated
    alike.

    Returns
    -------
    dict
        ``density`` (curve summary and ``t_end``, the density's last time), ``runs`` (one per
        particle run, the same keys), ``w2`` (per run, its W2 curve at each of its times),
        ``verdict`` (a sentence: who departs when, and what W2 between them means after that)
        and ``reason`` (why no departure could be computed, else empty).
    """
    t_den = np.asarray(density["time"].values, dtype=float)
    den_w2 = (
        np.asarray(density["w2_projection"].values, dtype=float)
        if "w2_projection" in density
        else np.full(t_den.size, np.nan)
    )
    dens = {**curve_summary(t_den, den_w2), "t_end": float(t_den[-1])}
    model, reason = density_model(density)
    rows, curves = [], []
    for p in runs:
        t_p = np.asarray(p["time"].values, dtype=float)
        w, why = (
            (np.full(t_p.size, np.nan), reason)
            if model is None
            else particle_projection_curve(model, p)
        )
        reason = reason or why
        curves.append(w)
        rows.append({**curve_summary(t_p, w), "t_end": float(t_p[-1])})
    if not np.isfinite(dens["min_w2"]):
        reason = reason or "the density file has no finite w2_projection"
    verdict = (
        f"departure from Pi_# rho_0 not compared: {reason}"
        if reason
        else departure_verdict(dens, rows)
    )
    return {"density": dens, "runs": rows, "w2": curves, "verdict": verdict, "reason": reason}


def departure_verdict(density: dict[str, float], runs: Sequence[dict[str, float]]) -> str:
    """The sentence ``compare`` prints about the departures (see :func:`departures`)."""
    rule = (
        "departure: first time after the minimum with W2 to the target > "
        f"{DEPARTURE_FACTOR:g} min + {DEPARTURE_OFFSET:g}; targets Pi_# rho_0 and Pi_# of each "
        "run's initial particles"
    )
    t_d = density["departure_time"]
    dep = np.array([r["departure_time"] for r in runs])
    gone = dep[np.isfinite(dep)]
    ends = np.array([r["t_end"] for r in runs])
    if gone.size:
        spread = (
            f"at t = {gone.min():g}"
            if gone.size == 1 or gone.min() == gone.max()
            else f"at t = {gone.min():g} to {gone.max():g} (mean {gone.mean():.4g})"
        )
        parts = f"{gone.size} of {len(runs)} particle run(s) depart {spread}"
        if gone.size < len(runs):
            parts += f", the others not by t = {ends[~np.isfinite(dep)].min():g}"
    else:
        parts = f"the particles have not departed by t = {ends.min():g}"
    dens = (
        f"the density departs at t = {t_d:g}"
        if np.isfinite(t_d)
        else f"the density has not departed by t = {density['t_end']:g}"
    )
    if np.isfinite(t_d) and gone.size:
        first = min(t_d, float(gone.min()))
        who = "the particles" if gone.min() < t_d else "the density"
        tail = (
            f"; from t = {first:g} on they are in different phases ({who} first), so W2 between "
            "them measures the gap between the departures, not an error of either code"
        )
        if abs(t_d - gone.min()) <= 0 and abs(t_d - gone.max()) <= 0:
            tail = "; they depart together"
    elif np.isfinite(t_d):
        tail = (
            f"; the density has left Pi_# rho_0 and the particles have not: after t = {t_d:g} "
            "W2 between them measures the departure, not an error of either code"
        )
    elif gone.size:
        tail = (
            "; the particles have left Pi_# rho_0 and the density has not: after "
            f"t = {gone.min():g} W2 between them measures the departure, not an error of either "
            "code (at low temperature n particles leave early: they carry no mass below ~1/n, "
            "docs/particles_low_temperature.md)"
        )
    else:
        tail = "; neither has departed"
    return f"{dens}; {parts}{tail} ({rule})"


def richardson_estimate(
    coarse: float, medium: float, fine: float, ratio: float = 2.0
) -> dict[str, float]:
    """What three resolutions say of a converging quantity (Roache's grid convergence index).

    For values f_1, f_2, f_3 on resolutions refined by ``ratio`` each time (f_3 the finest),
    with f_h = f + C h^p + o(h^p):

    * ``order`` p = log((f_1 - f_2) / (f_2 - f_3)) / log(ratio), the observed order;
    * ``extrapolated`` f_3 + (f_3 - f_2) / (ratio^p - 1), the Richardson estimate of the limit;
    * ``gci_fine`` = 1.25 |f_3 - f_2| / (|f_3| (ratio^p - 1)), the relative error band of f_3
      with a safety factor of 1.25 (three grids in the asymptotic range).

    All three are NaN where the changes do not shrink monotonically (f_1 - f_2 and f_2 - f_3 of
    opposite signs, or the finer change not smaller): there is no asymptotic order to use.
    """
    e21, e32 = coarse - medium, medium - fine
    nan = {"order": np.nan, "extrapolated": np.nan, "gci_fine": np.nan}
    if (
        not all(np.isfinite([coarse, medium, fine]))
        or e32 == 0.0
        or e21 * e32 <= 0.0
        or abs(e32) >= abs(e21)
    ):
        return nan
    p = float(np.log(e21 / e32) / np.log(ratio))
    factor = ratio**p - 1.0
    return {
        "order": p,
        "extrapolated": float(fine + (fine - medium) / factor),
        "gci_fine": float(1.25 * abs(e32) / (abs(fine) * factor)),
    }


def _matrix(ds: Any, name: str) -> Any:
    """The matrix ``name`` (Q, K or V) of a run or combined dataset as a DataArray ending in
    (row, col): ``name`` itself, or ``<name>_value`` along the dimension ``name`` of a sweep
    that varies it; None when absent."""
    if f"{name}_value" in ds and name in ds.dims:
        return ds[f"{name}_value"]
    if name in ds.data_vars and ds[name].dims[-2:] == ("row", "col"):
        return ds[name]
    return None


def spectral_gap(ds: Any) -> Any:
    """mu_1 - mu_2 of the symmetric part of V B^T from the dataset's matrices (NaN without them):
    a float, or a DataArray over the dimensions of a sweep that varies a matrix
    (``V_value``: one gap per value of V)."""
    mats = [_matrix(ds, m) for m in ("Q", "K", "V")]
    if any(m is None for m in mats):
        return float("nan")
    mats = xr.broadcast(*mats)
    other = [d for d in mats[0].dims if d not in ("row", "col")]
    Q, K, V = (m.transpose(*other, "row", "col").values for m in mats)
    B = np.swapaxes(Q, -1, -2) @ K
    A = V @ np.swapaxes(B, -1, -2)
    mu = np.sort(np.linalg.eigvalsh(0.5 * (A + np.swapaxes(A, -1, -2))), axis=-1)[..., ::-1]
    gap = mu[..., 0] - mu[..., 1]
    if not other:
        return float(gap)
    return xr.DataArray(
        gap,
        dims=other,
        coords={d: ds[d].values for d in other if d in ds.coords},
        attrs={
            "long_name": "spectral gap of V B^T",
            "units": "1",
            "comment": "mu_1 - mu_2 of the symmetric part of V B^T, per case",
        },
    )


def validate_combined(combined: Any) -> None:
    """Check that a dataset is a combined sweep over ``model.beta`` that :func:`analyze_beta`
    can analyze: dims ``beta`` and ``time`` and the variable ``w2_projection``.

    Raises
    ------
    SchemaError
        Naming what is needed.
    """
    if (
        "w2_projection" not in combined
        or "beta" not in combined.dims
        or "time" not in combined.dims
    ):
        raise SchemaError(
            "analyze-beta needs a combined sweep dataset with dims beta and time and "
            'the variable w2_projection (spheredens sweep over "model.beta")'
        )


def open_combined(path: str | Path) -> Any:
    """Open the combined dataset of a sweep (``combined.nc`` of ``spheredens sweep``) for
    :func:`analyze_beta`: loaded in memory and checked by :func:`validate_combined`.

    Raises
    ------
    SchemaError
        The file does not exist, cannot be read as netCDF or is no combined sweep over beta.
    """
    combined = read_netcdf(path)
    validate_combined(combined)
    return combined


def analysis_output_path(combined_path: str | Path, output: str | Path | None = None) -> Path:
    """The analysis file of ``spheredens analyze-beta``: ``output`` when given, else
    ``<combined>_beta_analysis.nc`` beside the combined file."""
    if output:
        return Path(output)
    combined_path = Path(combined_path)
    return combined_path.with_name(combined_path.stem + "_beta_analysis.nc")


def finest(analysis: Any) -> Any:
    """The result of :func:`analyze_beta` at the last level of every dimension but ``beta``
    (the finest resolution when ``n`` or ``lmax`` is swept too): a function of beta alone."""
    other = [d for d in analysis["min_w2"].dims if d != "beta"]
    return analysis.isel({d: -1 for d in other}) if other else analysis


def analyze_beta(combined: Any) -> Any:
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
        The combined dataset of a sweep over ``model.beta`` (dims ``beta``, ``time`` and any
        others: :func:`spheredens.run_sweep`, or ``combined.nc`` opened with
        ``xarray.open_dataset``).

    Returns
    -------
    xarray.Dataset
        ``min_w2``, ``t_min``, ``departure_time``, ``early_rate``, ``rate_over_gap``, ``bound``
        = sqrt(log(beta + 1) / beta), ``min_w2_over_bound``, ``t_last`` and ``min_at_end`` over
        (beta, other dims), the fitted ``min_w2_slope`` (log-log, over beta), and when a
        dimension ``n`` (or ``lmax``, ``nlat``) is present the relative change of min_w2 and
        departure_time from each resolution to the next (``*_resolution_change``, at the coarser
        of the two). :func:`beta_table` gives the lines ``spheredens analyze-beta`` prints.

    Example
    -------
    With ``combined`` from the example of :func:`spheredens.run_sweep`:

    >>> import spheredens as sd
    >>> analysis = sd.analyze_beta(combined)
    >>> mins = analysis["min_w2"].values          # min over t of W2, per beta
    >>> table = "\\n".join(sd.beta_table(analysis))
    """

    validate_combined(combined)
    w2 = combined["w2_projection"]
    if not np.any(np.isfinite(w2.values)):
        raise SchemaError(
            "w2_projection is undefined in every case (Assumption 1 fails): nothing to analyze"
        )
    t = combined["time"].values
    other = [d for d in w2.dims if d not in ("time",)]
    stacked = w2.transpose(*other, "time")
    names = ("min_w2", "t_min", "departure_time", "early_rate", "t_last")
    out = {k: np.full(stacked.shape[:-1], np.nan) for k in names}
    for idx in np.ndindex(*stacked.shape[:-1]):
        summary = curve_summary(t, stacked.values[idx])
        for k in names:
            out[k][idx] = summary[k]
    gap = spectral_gap(combined)
    beta = combined["beta"].values.astype(float)
    bound = np.sqrt(np.log(beta + 1.0) / beta)
    coords = {d: combined[d].values for d in other}
    ds = xr.Dataset({k: (tuple(other), v) for k, v in out.items()}, coords=coords)
    ds["t_last"].attrs.update(
        {
            "long_name": "last time with a finite W2",
            "units": combined["time"].attrs.get("units", "1"),
        }
    )
    ds["min_at_end"] = (ds["t_min"] >= ds["t_last"]) & np.isfinite(ds["min_w2"])
    ds["min_at_end"].attrs.update(
        {"long_name": "minimum at the last time (W2 still falling)", "units": "1"}
    )
    ds["rate_over_gap"] = ds["early_rate"] / gap
    if isinstance(gap, xr.DataArray):  # a sweep that varies a matrix: one gap per case
        ds["spectral_gap"] = gap
    ds["bound"] = ("beta", bound, {"long_name": "sqrt(log(beta + 1) / beta)"})
    ds["min_w2_over_bound"] = ds["min_w2"] / ds["bound"]
    logb = np.log(beta)
    mins = ds["min_w2"].transpose("beta", ...).values.reshape(len(beta), -1)
    slopes = [
        np.polyfit(logb, np.log(mins[:, j]), 1)[0]
        if np.all(np.isfinite(mins[:, j])) and len(beta) > 1
        else np.nan
        for j in range(mins.shape[1])
    ]
    rest = [d for d in other if d != "beta"]
    ds["min_w2_slope"] = (
        tuple(rest),
        np.array(slopes).reshape([len(coords[d]) for d in rest]),
        {"long_name": "least-squares slope of log min_w2 against log beta"},
    )
    for res in RESOLUTION_DIMS:
        if res in other and len(coords[res]) > 1:
            for k in ("min_w2", "departure_time"):
                v = ds[k].transpose(res, ...)
                change = np.abs(v.diff(res, label="lower").values) / np.abs(v.values[1:])
                ds[f"{k}_resolution_change"] = (
                    (res,) + v.dims[1:],
                    np.concatenate([change, np.full((1,) + change.shape[1:], np.nan)]),
                    {"long_name": f"|{k}(next {res}) - {k}({res})| / {k}(next {res})"},
                )
    if "failed_cases" in combined.attrs:
        ds.attrs["failed_cases"] = combined.attrs["failed_cases"]
    ds.attrs.update(
        {
            **({} if isinstance(gap, xr.DataArray) else {"spectral_gap": gap}),
            "departure_definition": (
                f"first time after t_min with W2 > {DEPARTURE_FACTOR:g} min_w2 + "
                f"{DEPARTURE_OFFSET:g}"
            ),
            "early_rate_definition": "-slope of log W2 on [t_min / 4, 3 t_min / 4]",
        }
    )
    return analysis_attrs(ds, combined)


def resolution_dim(analysis: Any) -> str | None:
    """The swept resolution dimension of an analysis (or combined) dataset: the first of
    :data:`RESOLUTION_DIMS` it has with more than one level, else None."""
    for d in RESOLUTION_DIMS:
        if d in analysis.dims and analysis.sizes[d] > 1:
            return d
    return None


def _fmt(value: float, spec: str, missing: str = "-") -> str:
    """``value`` formatted by ``spec``; ``missing`` (right-aligned to the width of ``spec``)
    when it is not finite."""
    if np.isfinite(value):
        return format(value, spec)
    width = spec.split(".")[0]
    return format(missing, f">{width}") if width.isdigit() else missing


def level_label(value: Any) -> str:
    """A level of a swept dimension for tables and legends: numbers by %g."""
    return f"{value:g}" if isinstance(value, (float, np.floating)) else str(value)


def row_note(row: Any) -> str:
    """The flags of one row of :func:`analyze_beta` in words: a minimum at the last snapshot
    ("still falling"), a departure that did not happen within the run, no finite W2."""
    if not np.isfinite(float(row["min_w2"])):
        return "no finite W2"
    t_last = float(row["t_last"])
    if bool(row["min_at_end"]):
        return f"still falling at t_end = {t_last:g} (min W2 is an upper bound; no departure yet)"
    if not np.isfinite(float(row["departure_time"])):
        return f"no departure by t_end = {t_last:g}"
    return ""


def beta_table(analysis: Any) -> list[str]:
    """The lines ``spheredens analyze-beta`` prints for the result of :func:`analyze_beta`.

    One row per (beta, resolution) -- per beta and every level of the other swept dimensions,
    each named in its own column -- with min W2, t_min, the departure time, the early rate
    and its ratio to the spectral gap, min W2 over the bound, and in words a minimum at the
    last snapshot ("still falling") or a missing departure. When a resolution (``n``, ``lmax``
    or ``nlat``) was swept, two more columns give the relative change of min W2 and of the
    departure time from the row's resolution to the next one (n -> 2n), and the slope of
    log min W2 against log beta is given for each resolution.
    """
    if "spectral_gap" in analysis.data_vars:  # one per case (a sweep that varies a matrix)
        gaps = analysis["spectral_gap"].values
        gap = (
            f"{np.nanmin(gaps):.4g} to {np.nanmax(gaps):.4g} over "
            f"{', '.join(map(str, analysis['spectral_gap'].dims))}"
        )
    else:
        gap = f"{analysis.attrs['spectral_gap']:.4g}"
    first = [f"spectral gap of V B^T: {gap}; departure = {analysis.attrs['departure_definition']}"]
    table = analysis.transpose("beta", ...)
    other = [d for d in table["min_w2"].dims if d != "beta"]
    res = resolution_dim(analysis)
    width = {d: max([7, len(d)] + [len(level_label(v)) for v in analysis[d].values]) for d in other}
    head = f"{'beta':>8} " + "".join(f"{d:>{width[d]}} " for d in other)
    head += (
        f"{'min W2':>10} {'t_min':>7} {'departure':>9} {'early rate':>10} {'rate/gap':>8} "
        f"{'min/bound':>9}"
    )
    if res:
        head += f" {'min chg':>8} {'dep chg':>8}"
    lines = first + [head + "  note"]
    for idx in np.ndindex(*table["min_w2"].shape):
        row = table.isel(dict(zip(["beta"] + other, idx)))
        text = f"{float(row.beta):8g} " + "".join(
            f"{level_label(row[d].item()):>{width[d]}} " for d in other
        )
        text += (
            f"{_fmt(float(row.min_w2), '10.4g')} {_fmt(float(row.t_min), '7.3g')} "
            f"{_fmt(float(row.departure_time), '9.3g', 'none'):>9} "
            f"{_fmt(float(row.early_rate), '10.4g')} {_fmt(float(row.rate_over_gap), '8.3g')} "
            f"{_fmt(float(row.min_w2_over_bound), '9.3g')}"
        )
        if res:
            finest_level = idx[1 + other.index(res)] == analysis.sizes[res] - 1
            changes = [
                "finest"
                if finest_level
                else _fmt(100.0 * float(row[f"{k}_resolution_change"]), ".2g") + "%"
                if np.isfinite(float(row[f"{k}_resolution_change"]))
                else "-"
                for k in ("min_w2", "departure_time")
            ]
            text += "".join(f" {c:>8}" for c in changes)
        note = row_note(row)
        lines.append(text + (f"  {note}" if note else ""))
    if res:
        levels = " -> ".join(level_label(v) for v in analysis[res].values)
        lines.append(
            f"min chg, dep chg: |x(next {res}) - x({res})| / x(next {res}) for x = min W2 "
            f"and the departure time, from each {res} to the next ({levels})"
        )
    slopes = analysis["min_w2_slope"]
    if slopes.ndim == 0:
        lines.append(
            f"slope of log min W2 against log beta: {_fmt(slopes.item(), '.3f', 'undefined')}"
        )
    else:
        dim = slopes.dims[0]
        parts = [
            f"{_fmt(float(slopes.isel({dim: j}).values.ravel()[-1]), '.3f', 'undefined')} "
            f"({dim} = {level_label(v)})"
            for j, v in enumerate(slopes[dim].values)
        ]
        lines.append(
            "slope of log min W2 against log beta: "
            + ", ".join(parts)
            + (" (last level of the other dims)" if slopes.ndim > 1 else "")
        )
    if analysis.attrs.get("failed_cases"):
        lines.append(
            f"failed in the sweep (no values, their rows 'no finite W2'): "
            f"{analysis.attrs['failed_cases']}"
        )
    falling = int(analysis["min_at_end"].sum())
    if falling:
        lines.append(
            f"{falling} row(s) still falling at t_end: their min W2 is an upper bound and "
            "their departure is not reached; raise time.t_end and --resume"
        )
    return lines
