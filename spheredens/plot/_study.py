"""Figures of concentration studies in beta (``spheredens analyze-beta``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from .._lazy import pyplot as plt
from ..analysis import RESOLUTION_DIMS, level_label, resolution_dim
from ._common import plain_log_ticks, save_figure

#: the time axis of every panel: model time is dimensionless (schema: ``time`` has units "1")
TIME_LABEL = "t (model time units)"
#: the unit of W2 on the circle and the sphere (geodesic cost): the files say "radian"
UNIT_SYMBOLS = {"radian": "rad", "radians": "rad", "1": "dimensionless"}
#: the smallest gap between two tick labels, in pixels
LABEL_GAP = 4.0


def _w2_unit(combined: Any) -> str:
    """The unit of W2 in the combined file (``rad``: the geodesic distance on the circle and
    the sphere), as an axis label writes it."""
    units = str(combined["w2_projection"].attrs.get("units", "radian"))
    return UNIT_SYMBOLS.get(units, units)


def _resolution_text(combined: Any, analysis: Any) -> str:
    """Which grid the W2 curves are drawn at: the finest level of the swept resolution
    (``n = 2048``), else the resolution the cases share (the combined file's attribute, or the
    length of its ``theta``), else a note that it is not recorded."""
    res = resolution_dim(analysis)
    if res:
        return f"{res} = {level_label(analysis[res].values[-1])}"
    for key in RESOLUTION_DIMS:
        if key in combined.attrs:
            return f"{key} = {combined.attrs[key]}"
        if key in combined.dims and combined.sizes[key] == 1:
            return f"{key} = {level_label(combined[key].values[0])}"
    if "theta" in combined.dims:  # circle and zonal: n cells in theta
        return f"n = {combined.sizes['theta']}"
    return "resolution not recorded"


def _beta_axis(ax: Any, beta: Any) -> None:
    """A log beta axis ticked at the betas of the study, labelled in plain numbers (10, 30,
    100), with a margin of 6% of the span at each end; :func:`_thin_labels` removes the labels
    that would overlap once the figure is laid out."""
    values = np.unique(np.asarray(beta, dtype=float))
    values = values[np.isfinite(values) & (values > 0)]
    ax.set_xscale("log")
    if values.size == 0:
        return
    lo, hi = values[0], values[-1]
    pad = (hi / lo) ** 0.06 if hi > lo else 1.3
    ax.set_xlim(lo / pad, hi * pad)
    ax.set_xticks(values, labels=[f"{v:g}" for v in values])
    ax.set_xticks([], minor=True)
    ax.set_xlabel("beta (log scale)")


def _thin_labels(fig: Any, axes: Any) -> None:
    """Draw the figure, then keep as labelled x ticks of each beta axis only those whose labels
    do not overlap the one kept before (from the left; the last beta is always kept, its left
    neighbour dropped if need be); the others stay as unlabelled ticks."""
    fig.tight_layout()
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    for ax in axes:
        ticks = ax.get_xticks()
        labels = ax.get_xticklabels()
        boxes = [label.get_window_extent(renderer) for label in labels]
        kept: list[int] = []
        for i, box in enumerate(boxes):
            if i == len(boxes) - 1:  # the last beta wins over its neighbours
                while kept and boxes[kept[-1]].x1 + LABEL_GAP > box.x0:
                    kept.pop()
            if not kept or boxes[kept[-1]].x1 + LABEL_GAP <= box.x0:
                kept.append(i)
        if len(kept) < len(ticks):
            dropped = [t for i, t in enumerate(ticks) if i not in kept]
            ax.set_xticks([ticks[i] for i in kept], labels=[labels[i].get_text() for i in kept])
            ax.set_xticks(dropped, minor=True)
            ax.tick_params(axis="x", which="minor", labelbottom=False)


def beta_study_figure(combined: Any, analysis: Any) -> Any:
    """The figure of :func:`plot_beta_study` (a matplotlib Figure), three panels, one quantity
    each:

    * W2(rho_t, Pi_# rho_0) against t for every beta, at the finest resolution (named on the
      axis; log scale, radians): the minimum marked, hollow when it is at the last snapshot;
    * min over t of W2 against beta (log-log, radians) for every resolution, with the bound
      sqrt(log(beta + 1) / beta) scaled to the first point;
    * the departure time against beta (log beta) for every resolution; a run that does not
      depart within its window is an open triangle at its last time T, labelled "no departure
      by T".

    The beta axes are ticked at the betas of the study in plain numbers, and no two tick labels
    overlap."""
    w2 = combined["w2_projection"]
    last = {d: -1 for d in w2.dims if d not in ("beta", "time")}
    w2 = w2.isel(last).transpose("beta", "time") if last else w2.transpose("beta", "time")
    an = analysis.isel({d: -1 for d in last if d in analysis.dims}) if last else analysis
    beta = combined["beta"].values.astype(float)
    t = combined["time"].values
    res = resolution_dim(analysis)
    levels = list(analysis[res].values) if res else [None]
    unit, where = _w2_unit(combined), _resolution_text(combined, analysis)
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.3))
    ax = axes[0]
    for b, curve, row in zip(beta, w2.values, (an.isel(beta=i) for i in range(len(beta)))):
        (line,) = ax.semilogy(t, curve, label=f"beta = {b:g}")
        if np.isfinite(float(row.min_w2)):
            ax.plot(
                [float(row.t_min)],
                [float(row.min_w2)],
                "o",
                color=line.get_color(),
                mfc="none" if bool(row.min_at_end) else line.get_color(),
            )
    ax.set_xlabel(TIME_LABEL)
    ax.set_ylabel(f"W2(rho_t, Pi_# rho_0) ({unit}), {where}")
    ax.set_title(f"W2 to Pi_# rho_0 against t ({where})", fontsize=9)
    ax.legend(fontsize=7)
    plain_log_ticks(ax, "y")
    ax = axes[1]
    for level in levels:
        sub = analysis.sel({res: level}) if res else analysis
        sub = sub.isel({d: -1 for d in sub["min_w2"].dims if d != "beta"})
        label = f"{res} = {level_label(level)}" if res else "min over t of W2"
        mins, end = sub["min_w2"].values, sub["min_at_end"].values.astype(bool)
        (line,) = ax.loglog(beta, mins, "o-", label=label)
        if end.any():
            ax.plot(beta[end], mins[end], "o", ms=9, mfc="white", color=line.get_color())
    mins, bound = an["min_w2"].values, an["bound"].values
    ok = np.flatnonzero(np.isfinite(mins) & np.isfinite(bound))
    if ok.size:
        ax.loglog(
            beta, mins[ok[0]] / bound[ok[0]] * bound, "k--", label="sqrt(log(beta+1)/beta) (scaled)"
        )
    if analysis["min_at_end"].values.any():
        ax.plot(
            [], [], "o", ms=9, mfc="white", color="grey", label="hollow: still falling at t_end"
        )
    ax.set_ylabel(f"min over t of W2 ({unit})")
    ax.set_title("closest approach to Pi_# rho_0", fontsize=9)
    ax.legend(fontsize=7)
    plain_log_ticks(ax, "y")
    _beta_axis(ax, beta)
    ax = axes[2]
    missing_t: list[float] = []
    top = 0.0
    for k, level in enumerate(levels):
        sub = analysis.sel({res: level}) if res else analysis
        sub = sub.isel({d: -1 for d in sub["departure_time"].dims if d != "beta"})
        departure, t_last = sub["departure_time"].values, sub["t_last"].values
        colour = f"C{k}"
        label = f"{res} = {level_label(level)}" if res else "departure time"
        if np.isfinite(departure).any():
            ax.plot(beta, departure, "s-", color=colour, label=label)
            top = max(top, float(np.nanmax(departure)))
        gone = ~np.isfinite(departure) & np.isfinite(t_last)
        if gone.any():
            ax.plot(beta[gone], t_last[gone], "^", ms=10, mfc="none", mew=1.5, color=colour)
            missing_t.extend(t_last[gone].tolist())
    if missing_t:
        ends = sorted({float(f"{v:.6g}") for v in missing_t})
        ax.plot(
            [],
            [],
            "^",
            ms=10,
            mfc="none",
            mew=1.5,
            color="grey",
            label="no departure by T = " + ", ".join(f"{v:g}" for v in ends) + " (drawn at T)",
        )
    top = max([top, *missing_t])
    if top > 0:  # room above for the legend
        ax.set_ylim(0.0, 1.3 * top)
    ax.set_ylabel("departure time (model time units)")
    ax.set_title("departure from Pi_# rho_0 (W2 > 2 min + 0.02)", fontsize=9)
    ax.legend(fontsize=7, loc="upper left")
    _beta_axis(ax, beta)
    for ax in axes:
        ax.grid(True, which="major", alpha=0.3)
    domain, model = combined.attrs.get("domain"), combined.attrs.get("model")
    head = f"{model} on the {domain}: " if model and domain else ""
    fig.suptitle(
        f"{head}concentration in beta; W2 in {unit} (geodesic distance), t in model time units",
        fontsize=10,
    )
    _thin_labels(fig, axes[1:])
    return fig


def plot_beta_study(combined: Any, analysis: Any, path: str | Path) -> Path:
    """Draw :func:`beta_study_figure` to the PNG file ``path`` and return the path."""
    return save_figure(beta_study_figure(combined, analysis), path)
