"""Figures of comparison files (``spheredens compare``): W2 between a density and its particle
runs with the ensemble band, the departures, and the density with the particles at a few
snapshots."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from .._lazy import pyplot as plt
from ..geometry import circle_angle
from ..schema import file_kind
from ..targets import file_targets
from ._common import (
    SPHERE_VIEWS,
    any_finite,
    circle_target_lines,
    mollweide_frame,
    on_circle,
    save_figure,
    snapshot_indices,
    sphere_targets,
    target_handles,
    targets_legend,
    theta_axis,
)
from ._layers import (
    CircleDensity,
    CircleParticles,
    SphereDensity,
    SphereParticles,
    angle_histogram,
    default_bins,
    density_cell_edges,
)


def compare_w2_axes(ax: Any, cmp: Any) -> None:
    """W2 between a density and its particle runs against t (radians, log scale): every run,
    the ensemble band (mean +- std over the runs, and min to max), and the density's own
    resolution. A comparison of runs against a reference (dim ``pair``): :func:`pairs_w2_axes`."""
    if "pair" in cmp.dims:
        return pairs_w2_axes(ax, cmp)
    t = cmp["time"].values
    w2 = np.asarray(cmp["w2"].values, dtype=float)
    mean, std = np.asarray(cmp["w2_mean"].values, float), np.asarray(cmp["w2_std"].values, float)
    runs = w2.shape[0]
    floor = 1e-16
    if runs > 1:
        ax.fill_between(
            t,
            np.maximum(np.nanmin(w2, axis=0), floor),
            np.nanmax(w2, axis=0),
            color="C3",
            alpha=0.12,
            lw=0,
            label="min to max over runs",
        )
        ax.fill_between(
            t,
            np.maximum(mean - std, floor),
            mean + std,
            color="C3",
            alpha=0.3,
            lw=0,
            label="mean +- std",
        )
        if runs <= 40:
            for row in w2:
                ax.plot(t, row, "-", color="C3", lw=0.5, alpha=0.5)
    ax.semilogy(
        t, mean, "o-", color="C3", ms=3, label=f"mean of {runs} run(s)" if runs > 1 else "W2"
    )
    if "density_resolution" in cmp and any_finite(cmp["density_resolution"].values):
        ax.semilogy(t, cmp["density_resolution"].values, ":", color="k", label="density resolution")
    ax.set_xlabel("t")
    ax.set_ylabel("W2 density vs particles (radians)")
    ax.legend(fontsize=7)
    ax.grid(True, which="both", alpha=0.3)


def circle_density_and_particles(
    density: Any, run: Any, ax: Any, targets: Sequence[Any]
) -> tuple[CircleDensity, CircleParticles]:
    """On one axis of theta, per radian: rho (the marginal with slices) and the histogram of
    the angles of the particles of ``run`` on the density's own cells (both are then averages
    over the same cells: a cluster narrower than a wider bin would look lower than the
    density), with the target lines; the two layers returned."""
    layer = CircleDensity(
        density,
        ax,
        log=False,
        slices=False,
        label="rho (marginal)" if "xi" in density["rho"].dims else "rho",
    )
    particles = CircleParticles(  # on the density's cells: a cluster's height is comparable
        run,
        hist=ax,
        ymax=ax.get_ylim()[1],
        bins=density_cell_edges(density),
        label="particles (histogram on the density's cells)",
    )
    ax.set_ylabel("density (per radian)")
    circle_target_lines(ax, targets, vertical=True)
    return layer, particles


def plot_compare_file(cmp: Any, path: str | Path) -> Path:
    """A comparison file (``spheredens compare``) alone: W2 between the density and the
    particle runs against t with the ensemble band (every run, mean +- std and min to max over
    the runs) and the density's resolution; the W2 of each run to Pi_# of its own start, with
    the departures; for usa_av the mean over runs of each slice's W2. All in radians.

    Parameters
    ----------
    cmp : xarray.Dataset
        A comparison file (:func:`spheredens.compare.compare`).
    path : path
        PNG file to write.
    """
    t = cmp["time"].values
    panels = ["w2"]
    if "particle_w2_projection" in cmp and any_finite(cmp["particle_w2_projection"].values):
        panels.append("departure")
    if "w2_slice" in cmp and any_finite(cmp["w2_slice"].values):
        panels.append("slices")
    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels) + 1, 4.2), squeeze=False)
    axes = axes[0]
    compare_w2_axes(axes[0], cmp)
    axes[0].set_title(
        f"density vs {cmp.sizes['run']} particle run(s)"
        if "run" in cmp.dims
        else f"{cmp.sizes['pair']} run(s) vs the reference",
        fontsize=9,
    )
    if "departure" in panels:
        ax = axes[panels.index("departure")]
        w2 = np.asarray(cmp["particle_w2_projection"].values, dtype=float)
        for k, row in enumerate(w2):
            ax.semilogy(
                t,
                np.where(row > 0, row, np.nan),
                "-",
                lw=0.8,
                color="C0",
                label="each run" if k == 0 else None,
            )
        if "departure_time" in cmp:
            for k, dep in enumerate(np.atleast_1d(cmp["departure_time"].values)):
                if np.isfinite(dep):
                    ax.axvline(
                        dep, color="C0", ls=":", lw=0.8, label="run departs" if k == 0 else None
                    )
        if "density_departure_time" in cmp and np.isfinite(
            float(cmp["density_departure_time"].values)
        ):
            ax.axvline(
                float(cmp["density_departure_time"].values),
                color="C3",
                ls="--",
                label="density departs",
            )
        ax.set_xlabel("t")
        ax.set_ylabel("W2 particles vs Pi_# of their start (radians)", fontsize=8)
        ax.legend(fontsize=7)
        ax.grid(True, which="both", alpha=0.3)
        ax.set_title("departures from the zero-temperature target", fontsize=9)
    if "slices" in panels:
        ax = axes[panels.index("slices")]
        per_slice = np.nanmean(
            np.asarray(cmp["w2_slice"].values, dtype=float), axis=0
        )  # (time, xi)
        cmap = plt.get_cmap("viridis")
        count = per_slice.shape[1]
        for m in range(count):
            ax.semilogy(t, per_slice[:, m], "-", lw=0.9, color=cmap(m / max(count - 1, 1)))
        ax.set_xlabel("t")
        ax.set_ylabel("W2 of each slice, mean over runs (radians)", fontsize=8)
        ax.grid(True, which="both", alpha=0.3)
        ax.set_title(f"{count} slices (colour: xi)", fontsize=9)
    verdict = str(cmp.attrs.get("departure_verdict", ""))
    if verdict:
        fig.suptitle("\n".join(textwrap.wrap(verdict, 150)[:3]), fontsize=8)
    return save_figure(fig, path)


def plot_comparison(
    cmp: Any, density: Any, particles: Any, path: str | Path, *, times: Any = None
) -> Path:
    """The figure of ``spheredens compare``: W2 against t with the ensemble band
    (:func:`compare_w2_axes`), and at a few common snapshots the density with the particles of
    one run and the targets: on the circle rho and the histogram of the angles (per radian), on
    the sphere a Mollweide map with the particles as dots.

    Parameters
    ----------
    cmp : xarray.Dataset
        The comparison (:func:`spheredens.compare.compare`).
    density, particles : xarray.Dataset
        The density run and the particle run drawn.
    path : path
        PNG file to write.
    times : sequence of float, optional
        The snapshot times drawn (nearest common ones); default 3 evenly spaced.
    """
    t = cmp["time"].values
    idx = snapshot_indices(t, times, 3)
    targets = file_targets(density)
    mean = np.asarray(cmp["w2_mean"].values, dtype=float)
    fig = plt.figure(figsize=(4.0 * (len(idx) + 1.3), 3.9))
    compare_w2_axes(fig.add_subplot(1, len(idx) + 1, 1), cmp)
    circle = on_circle(density)
    mollweide = (SPHERE_VIEWS[2],)
    view = None if circle else density.sd.grid().regular_view(density.sd.marginal())
    for c, i in enumerate(idx):
        ti = t[i]
        if circle:
            ax = fig.add_subplot(1, len(idx) + 1, c + 2)
            layer, hist = circle_density_and_particles(density, particles, ax, targets)
            layer.draw(ti)
            hist.draw(ti)
            ax.legend(
                handles=ax.get_legend_handles_labels()[0]
                + (target_handles(targets) if c == 0 else []),
                fontsize=7,
            )
        else:
            ax = fig.add_subplot(1, len(idx) + 1, c + 2, projection="mollweide")
            mollweide_frame(ax)
            layer = SphereDensity(density, [ax], views=mollweide, view=view)
            layer.draw(int(np.argmin(np.abs(density["time"].values - ti))))
            SphereParticles(particles, [ax], size=3.0, views=mollweide).draw(ti)
            sphere_targets([ax], targets, views=mollweide)
        ax.set_title(f"t = {ti:g}, W2 = {float(mean[i]):.3g} (radians)", fontsize=9)
    targets_legend(fig, targets if not circle else ())
    return save_figure(fig, path)


#: the W2 axis of runs against a reference spans at most this factor below its largest value
PAIRS_W2_RANGE = 1e-5


def pairs_w2_axes(ax: Any, cmp: Any) -> None:
    """W2 of each run to the reference against t (radians, log scale) of a comparison of runs
    against a reference (:func:`spheredens.compare_pairs.compare_runs`), with the resolution of
    each density's representation (dotted; the reference's in black). The axis spans at most
    :data:`PAIRS_W2_RANGE` below the largest W2 (W2 at round-off, of runs that start alike, and
    resolutions far below it are left out) and at least a decade."""
    t = cmp["time"].values
    names = [Path(n).name for n in str(cmp.attrs.get("run_files", "")).split("\n")]
    w2 = np.asarray(cmp["w2"].values, dtype=float)
    floor = PAIRS_W2_RANGE * float(np.nanmax(w2, initial=0.0))
    resolutions = [*cmp["resolution"].values, cmp["reference_resolution"].values]
    for k, resolution in enumerate(resolutions):
        color, whose = ("k", "reference") if k == len(w2) else (f"C{k + 1}", names[k])
        if k < len(w2):
            ax.semilogy(t, np.where(w2[k] > 0, w2[k], np.nan), "o-", ms=3, color=color, label=whose)
        if np.nanmax(resolution, initial=0.0) > floor:  # NaN: particles
            ax.semilogy(t, resolution, ":", color=color, lw=0.9, label=f"resolution, {whose}")
    if floor > 0:
        ax.set_ylim(bottom=max(ax.get_ylim()[0], floor))
    low, high = ax.get_ylim()
    if 0 < low and high < 10 * low:  # a decade at least: a flat curve looks flat
        middle = np.sqrt(low * high)
        ax.set_ylim(middle / np.sqrt(10), middle * np.sqrt(10))
    reference = Path(str(cmp.attrs.get("reference_file", "") or "the reference")).name
    ax.set_xlabel("t")
    ax.set_ylabel(f"W2 to {reference} (radians)", fontsize=8)
    ax.legend(fontsize=7)
    ax.grid(True, which="both", alpha=0.3)


def circle_runs_axes(
    ax: Any, files: Sequence[Any], labels: Sequence[str], t: float, targets: Sequence[Any]
) -> None:
    """The runs at time ``t`` on one axis of theta, per radian: each density (the marginal) on
    its own cells, each particle run as the histogram of its angles on the cells of the finest
    density among them (default bins without one), as an outline; the reference in black,
    run k in colour C{k}."""
    densities = [ds for ds in files if file_kind(ds) == "density"]
    bins = (
        density_cell_edges(max(densities, key=lambda ds: ds.sd.grid().weight.size))
        if densities
        else default_bins(max(ds.sizes["particle"] for ds in files))
    )
    top = 0.0
    for k, (ds, label) in enumerate(zip(files, labels)):
        color = "k" if k == 0 else f"C{k}"
        i = int(np.argmin(np.abs(np.asarray(ds["time"].values, dtype=float) - t)))
        if file_kind(ds) == "density":
            rho = ds.sd.marginal(i)
            ax.plot(ds.sd.grid().theta, rho, color=color, lw=1.4 if k == 0 else 1.0, label=label)
            top = max(top, float(np.nanmax(rho)))
            continue
        weight = np.asarray(ds["particle_weight"].values, dtype=float)
        heights = angle_histogram(circle_angle(ds["position"].values[i]), weight, bins)
        ax.stairs(heights, bins, color=color, lw=0.8, label=f"{label} (histogram)")
        top = max(top, float(heights.max()))
    ax.set_ylim(0.0, 1.05 * top)
    theta_axis(ax, "x")
    ax.set_ylabel("density (per radian)")
    ax.grid(True, alpha=0.3)
    circle_target_lines(ax, targets, vertical=True)


#: the most runs drawn on the maps of a comparison of runs against a reference (the sphere)
MAX_MAPS = 4


def plot_pairs(
    cmp: Any, reference: Any, runs: Sequence[Any], path: str | Path, *, times: Any = None
) -> Path:
    """The figure of ``spheredens compare`` of runs against a reference
    (:func:`spheredens.compare_pairs.compare_runs`): W2 of each run to the reference against t
    (:func:`pairs_w2_axes`), and at a few common snapshots the runs themselves: on the circle
    all on one axis per time (:func:`circle_runs_axes`), on the sphere a Mollweide map per run
    (the reference and up to three others) and time, densities coloured, particles as dots.

    Parameters
    ----------
    cmp : xarray.Dataset
        The comparison (:func:`spheredens.compare_pairs.compare_runs`).
    reference : xarray.Dataset
        The reference run (density or particles).
    runs : sequence of xarray.Dataset
        The other runs, in the order of ``cmp``'s dimension ``pair``.
    path : path
        PNG file to write.
    times : sequence of float, optional
        The snapshot times drawn (nearest common ones); default 3 evenly spaced.
    """
    t = cmp["time"].values
    idx = snapshot_indices(t, times, 3)
    files = [reference, *runs]
    names = [str(cmp.attrs.get("reference_file", "") or "reference")]
    names += str(cmp.attrs.get("run_files", "")).split("\n")
    labels = [Path(n).name for n in names]
    labels[0] += " (reference)"
    targets = file_targets(reference)
    w2 = np.asarray(cmp["w2"].values, dtype=float)
    if on_circle(reference):
        fig = plt.figure(figsize=(4.0 * (len(idx) + 1.3), 3.9))
        pairs_w2_axes(fig.add_subplot(1, len(idx) + 1, 1), cmp)
        for c, i in enumerate(idx):
            ax = fig.add_subplot(1, len(idx) + 1, c + 2)
            circle_runs_axes(ax, files, labels, float(t[i]), targets)
            ax.legend(
                handles=ax.get_legend_handles_labels()[0]
                + (target_handles(targets) if c == 0 else []),
                fontsize=6,
            )
            ax.set_title(f"t = {t[i]:g}", fontsize=9)
        return save_figure(fig, path)
    drawn = files[:MAX_MAPS]
    fig = plt.figure(figsize=(3.6 * len(idx) + 5.0, 2.3 * len(drawn) + 0.8))
    grid = fig.add_gridspec(len(drawn), len(idx) + 1, width_ratios=[1.4] + [1.0] * len(idx))
    pairs_w2_axes(fig.add_subplot(grid[:, 0]), cmp)
    mollweide = (SPHERE_VIEWS[2],)
    for r, (ds, label) in enumerate(zip(drawn, labels)):
        density = file_kind(ds) == "density"
        view = ds.sd.grid().regular_view(ds.sd.marginal()) if density else None
        for c, i in enumerate(idx):
            ax = fig.add_subplot(grid[r, c + 1], projection="mollweide")
            mollweide_frame(ax)
            if density:
                td = np.asarray(ds["time"].values, dtype=float)
                layer = SphereDensity(ds, [ax], views=mollweide, view=view)
                layer.draw(int(np.argmin(np.abs(td - t[i]))))
            else:
                SphereParticles(ds, [ax], size=3.0, views=mollweide).draw(float(t[i]))
            sphere_targets([ax], targets, views=mollweide)
            gap = f", W2 = {w2[r - 1, i]:.3g}" if r else ""
            ax.set_title(f"{label}, t = {t[i]:g}{gap}", fontsize=7)
    targets_legend(fig, targets)
    return save_figure(fig, path)
