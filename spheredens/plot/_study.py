"""Figures of concentration studies in beta (``spheredens analyze-beta``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from .._lazy import pyplot as plt
from ..analysis import level_label, resolution_dim
from ._common import (
    save_figure,
)


def beta_study_figure(combined: Any, analysis: Any) -> Any:
    """The figure of :func:`plot_beta_study` (a matplotlib Figure): W2 against t for every beta
    at the finest resolution (log axis; the minimum marked, hollow when it is at the last
    snapshot); min W2 against beta (log-log) for every resolution with the bound; departure
    time against beta on a log and a linear axis. The departure panels are left out when no
    run departs within its time window, and the betas without a departure are named."""
    w2 = combined["w2_projection"]
    last = {d: -1 for d in w2.dims if d not in ("beta", "time")}
    w2 = w2.isel(last).transpose("beta", "time") if last else w2.transpose("beta", "time")
    an = analysis.isel({d: -1 for d in last if d in analysis.dims}) if last else analysis
    beta = combined["beta"].values.astype(float)
    t = combined["time"].values
    res = resolution_dim(analysis)
    levels = list(analysis[res].values) if res else [None]
    departed = bool(np.any(np.isfinite(analysis["departure_time"].values)))
    fig, axes = plt.subplots(1, 4 if departed else 2, figsize=(17, 3.8) if departed else (9, 3.8))
    for b, curve, row in zip(beta, w2.values, (an.isel(beta=i) for i in range(len(beta)))):
        (line,) = axes[0].semilogy(t, curve, label=f"beta = {b:g}")
        if np.isfinite(float(row.min_w2)):
            axes[0].plot(
                [float(row.t_min)],
                [float(row.min_w2)],
                "o",
                color=line.get_color(),
                mfc="none" if bool(row.min_at_end) else line.get_color(),
            )
    axes[0].set_xlabel("t")
    axes[0].set_ylabel("W2(rho_t, Pi_# rho_0)")
    axes[0].legend(fontsize=7)
    for level in levels:
        sub = analysis.sel({res: level}) if res else analysis
        sub = sub.isel({d: -1 for d in sub["min_w2"].dims if d != "beta"})
        label = f"min over t of W2 ({res} = {level_label(level)})" if res else "min over t of W2"
        mins, end = sub["min_w2"].values, sub["min_at_end"].values.astype(bool)
        (line,) = axes[1].loglog(beta, mins, "o-", label=label)
        if end.any():
            axes[1].plot(beta[end], mins[end], "o", ms=9, mfc="white", color=line.get_color())
    mins, bound = an["min_w2"].values, an["bound"].values
    ok = np.flatnonzero(np.isfinite(mins) & np.isfinite(bound))
    if ok.size:
        axes[1].loglog(
            beta, mins[ok[0]] / bound[ok[0]] * bound, "k--", label="sqrt(log(beta+1)/beta) (scaled)"
        )
    if analysis["min_at_end"].values.any():
        axes[1].plot(
            [],
            [],
            "o",
            ms=9,
            mfc="white",
            color="grey",
            label="hollow: still falling at t_end (upper bound)",
        )
    axes[1].set_xlabel("beta")
    axes[1].legend(fontsize=7)
    if departed:
        for level in levels:
            sub = analysis.sel({res: level}) if res else analysis
            sub = sub.isel({d: -1 for d in sub["departure_time"].dims if d != "beta"})
            label = f"{res} = {level_label(level)}" if res else None
            for ax in axes[2:]:
                ax.plot(beta, sub["departure_time"].values, "s-", label=label)
        missing = beta[~np.isfinite(an["departure_time"].values)]
        for ax, scale in zip(axes[2:], ("log", "linear")):
            ax.set_xscale(scale)
            ax.set_xlabel(f"beta ({scale})" if scale == "log" else "beta")
            ax.set_ylabel("departure time")
            if res:
                ax.legend(fontsize=7)
            if missing.size:
                ax.text(
                    0.02,
                    0.03,
                    "no departure by t_end: beta = " + ", ".join(f"{b:g}" for b in missing),
                    transform=ax.transAxes,
                    fontsize=7,
                    va="bottom",
                )
    else:
        fig.suptitle(
            "no run departs from Pi_# rho_0 within its time window: departure panels left out",
            fontsize=9,
        )
    for ax in axes:
        ax.grid(True, which="both", alpha=0.3)
    return fig


def plot_beta_study(combined: Any, analysis: Any, path: str | Path) -> Path:
    """Draw :func:`beta_study_figure` to the PNG file ``path`` and return the path."""
    return save_figure(beta_study_figure(combined, analysis), path)
