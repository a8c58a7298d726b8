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
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ._lazy import pyplot as plt, xarray as xr
from .exceptions import SchemaError
from .io import read_netcdf
from .plot import save_figure

Array = NDArray[np.float64]

DEPARTURE_FACTOR, DEPARTURE_OFFSET = 2.0, 0.02


def curve_summary(t: Array, w2: Array) -> dict[str, float]:
    """min_w2, t_min, departure_time and early_rate of one W2(t) curve (see the module doc)."""
    t, w2 = np.asarray(t, float), np.asarray(w2, float)
    ok = np.isfinite(w2)
    if ok.sum() < 3:
        return {"min_w2": np.nan, "t_min": np.nan, "departure_time": np.nan, "early_rate": np.nan}
    i = int(np.nanargmin(np.where(ok, w2, np.inf)))
    t_min, w_min = float(t[i]), float(w2[i])
    after = np.flatnonzero((t > t_min) & ok & (w2 > DEPARTURE_FACTOR * w_min + DEPARTURE_OFFSET))
    departure = float(t[after[0]]) if after.size else np.nan
    window = ok & (t >= 0.25 * t_min) & (t <= 0.75 * t_min) & (w2 > 0)
    rate = float(-np.polyfit(t[window], np.log(w2[window]), 1)[0]) if window.sum() >= 3 else np.nan
    return {"min_w2": w_min, "t_min": t_min, "departure_time": departure, "early_rate": rate}


def spectral_gap(ds: Any) -> float:
    """mu_1 - mu_2 of the symmetric part of V B^T from the dataset's matrices (NaN without them)."""
    if not all(m in ds for m in ("Q", "K", "V")):
        return float("nan")
    B = ds["Q"].values.T @ ds["K"].values
    A = ds["V"].values @ B.T
    mu = np.sort(np.linalg.eigvalsh(0.5 * (A + A.T)))[::-1]
    return float(mu[0] - mu[1])


def validate_combined(combined: Any) -> None:
    """Check that a dataset is a combined sweep over ``model.beta`` that :func:`analyze_beta`
    can analyze: dims ``beta`` and ``time`` and the variable ``w2_projection``.

    Raises
    ------
    SchemaError
        Naming what is needed.
    """
    if "w2_projection" not in combined or "beta" not in combined.dims or "time" not in combined.dims:
        raise SchemaError("analyze-beta needs a combined sweep dataset with dims beta and time and "
                          "the variable w2_projection (spheredens sweep over \"model.beta\")")


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
    """Per-beta summary of a combined sweep dataset (dims ``beta``, ``time`` and any others).

    Returns a Dataset with ``min_w2``, ``t_min``, ``departure_time``, ``early_rate``,
    ``rate_over_gap``, ``bound`` = sqrt(log(beta + 1) / beta), ``min_w2_over_bound`` over
    (beta, other dims), the fitted ``min_w2_slope`` (log-log, over beta), and when a dimension
    ``n`` (or ``lmax``) is present the relative change of min_w2 and departure_time from each
    resolution to the next (``*_resolution_change``).
    """

    validate_combined(combined)
    w2 = combined["w2_projection"]
    if not np.any(np.isfinite(w2.values)):
        raise SchemaError("w2_projection is undefined in every case (Assumption 1 fails): nothing "
                          "to analyze")
    t = combined["time"].values
    other = [d for d in w2.dims if d not in ("time",)]
    stacked = w2.transpose(*other, "time")
    names = ("min_w2", "t_min", "departure_time", "early_rate")
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
    ds["rate_over_gap"] = ds["early_rate"] / gap
    ds["bound"] = ("beta", bound, {"long_name": "sqrt(log(beta + 1) / beta)"})
    ds["min_w2_over_bound"] = ds["min_w2"] / ds["bound"]
    logb = np.log(beta)
    mins = ds["min_w2"].transpose("beta", ...).values.reshape(len(beta), -1)
    slopes = [np.polyfit(logb, np.log(mins[:, j]), 1)[0] if np.all(np.isfinite(mins[:, j])) and len(beta) > 1
              else np.nan for j in range(mins.shape[1])]
    rest = [d for d in other if d != "beta"]
    ds["min_w2_slope"] = (tuple(rest), np.array(slopes).reshape([len(coords[d]) for d in rest]),
                          {"long_name": "least-squares slope of log min_w2 against log beta"})
    for res in ("n", "lmax"):
        if res in other and len(coords[res]) > 1:
            for k in ("min_w2", "departure_time"):
                v = ds[k].transpose(res, ...)
                change = np.abs(v.diff(res, label="lower").values) / np.abs(v.values[1:])
                ds[f"{k}_resolution_change"] = ((res,) + v.dims[1:], np.concatenate(
                    [change, np.full((1,) + change.shape[1:], np.nan)]),
                    {"long_name": f"|{k}(next {res}) - {k}({res})| / {k}(next {res})"})
    ds.attrs.update({"spectral_gap": gap, "departure_definition":
                     f"first time after t_min with W2 > {DEPARTURE_FACTOR:g} min_w2 + {DEPARTURE_OFFSET:g}",
                     "early_rate_definition": "-slope of log W2 on [t_min / 4, 3 t_min / 4]"})
    return ds


def plot_beta_study(combined: Any, analysis: Any, path: str | Path) -> Path:
    """W2 against t for every beta (log axis); min W2 against beta (log-log) with the bound;
    departure time against beta and against log beta."""



    w2 = combined["w2_projection"]
    extra = {d: 0 for d in w2.dims if d not in ("beta", "time")}
    sel = {d: -1 for d in extra}  # the finest resolution / last level of other dims
    w2 = w2.isel(sel) if sel else w2
    an = analysis.isel({d: -1 for d in extra}) if extra else analysis
    beta = combined["beta"].values.astype(float)
    t = combined["time"].values
    fig, axes = plt.subplots(1, 4, figsize=(17, 3.8))
    for b, curve in zip(beta, w2.transpose("beta", "time").values):
        axes[0].semilogy(t, curve, label=f"beta = {b:g}")
    axes[0].set_xlabel("t")
    axes[0].set_ylabel("W2(rho_t, Pi_# rho_0)")
    axes[0].legend(fontsize=7)
    mins = an["min_w2"].values
    axes[1].loglog(beta, mins, "o-", label="min over t of W2")
    scale = mins[0] / an["bound"].values[0]
    axes[1].loglog(beta, scale * an["bound"].values, "k--", label="sqrt(log(beta+1)/beta) (scaled)")
    axes[1].set_xlabel("beta")
    axes[1].legend(fontsize=7)
    dep = an["departure_time"].values
    axes[2].plot(beta, dep, "s-")
    axes[2].set_xscale("log")
    axes[2].set_xlabel("beta (log)")
    axes[2].set_ylabel("departure time")
    axes[3].plot(beta, dep, "s-")
    axes[3].set_xlabel("beta")
    for ax in axes:
        ax.grid(True, which="both", alpha=0.3)
    return save_figure(fig, path)
