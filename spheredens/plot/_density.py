"""Figures of density runs: the space-time image of the circle, the views of the sphere at a
few snapshots, and the slices of ``usa_av``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from .._lazy import colors
from .._lazy import pyplot as plt
from ..accessor import file_domain
from ..geometry import CIRCLE, SPHERE, ZONAL, domain_entry
from ..targets import file_targets
from ._common import (
    SPHERE_VIEWS,
    circle_target_lines,
    save_figure,
    snapshot_indices,
    sphere_targets,
    sphere_view_axes,
    target_handles,
    targets_legend,
    theta_axis,
    w2_axes,
    w2_snapshot_indices,
)
from ._layers import (
    SphereDensity,
    log_floor,
)


def run_title(ds: Any, where: str) -> str:
    scheme = ds.attrs.get("scheme")
    size = (
        f"n = {ds.attrs['n']}"
        if "n" in ds.attrs
        else f"lmax = {ds.attrs['lmax']}"
        if "lmax" in ds.attrs
        else f"nlat = {ds.attrs['nlat']} rings"
        if "nlat" in ds.attrs
        else ""
    )
    model, beta = ds.attrs.get("model"), ds.attrs.get("beta")
    return f"{model} on the {where}, beta = {beta}, {scheme} {size}".strip()


def plot_circle_run(ds: Any, path: str | Path) -> Path:
    """Space-time image of rho on the circle (log colour scale, theta in radians) with the
    targets (:func:`file_targets`), and W2 to Pi_# rho_0 and to the top eigenspace of V beside it.
    The zonal domain's runs are drawn alike: the law g of the polar angle on [0, pi].

    Parameters
    ----------
    ds : xarray.Dataset
        A circle or zonal run (schema spheredens-1); with slices (usa_av) the marginal is drawn.
    path : path
        PNG file to write.
    """
    rho = ds.sd.marginal()  # with slices: the marginal
    t = ds["time"].values
    theta = ds["theta"].values
    targets = file_targets(ds)
    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(11, 4.2), gridspec_kw={"width_ratios": [1.6, 1]})
    floor, top = log_floor(rho)
    mesh = ax0.pcolormesh(
        t,
        theta,
        np.clip(rho, floor, None).T,
        shading="nearest",
        norm=colors.LogNorm(vmin=floor, vmax=top),
        cmap="viridis",
    )
    domain = file_domain(ds)
    fig.colorbar(mesh, ax=ax0, label=ds["rho"].attrs.get("long_name", "rho") + " (per radian)")
    circle_target_lines(ax0, targets, vertical=False)
    if targets:
        ax0.legend(handles=target_handles(targets), fontsize=7, loc="lower left", framealpha=0.85)
    ax0.set_xlabel("t")
    theta_axis(ax0, "y", domain.area)
    where = domain.name
    if domain.meridian:
        where = f"zonal S^{ds.attrs.get('zonal_dimension', '?') - 1}"
    ax0.set_title(run_title(ds, where), fontsize=9)
    if w2_axes(ax1, ds):
        ax1.set_title("distances to the targets", fontsize=9)
    else:
        ax1.plot(t, ds["min_rho"].values, "-", color="C0")
        ax1.set_ylabel("min rho (per radian)")
        ax1.set_title(ds["w2_projection"].attrs.get("comment", "")[:90], fontsize=8)
    return save_figure(fig, path, dpi=110)


def plot_sphere_run(ds: Any, path: str | Path, *, times: Any = None, max_rows: int = 4) -> Path:
    """Density on the sphere at a few snapshots: two orthographic views (from +z and from +x)
    and a Mollweide map per row, with the targets (:func:`file_targets`); below, three panels:
    W2 to Pi_# rho_0 and to the top eigenspace of V (radians), max rho (per steradian) and the
    Gibbs undershoot -min rho / max rho.

    Parameters
    ----------
    ds : xarray.Dataset
        A sphere run (schema spheredens-1: dims (time, lat, lon), or (time, cell) on the
        finite-volume mesh); with slices (usa_av) the marginal is drawn.
    path : path
        PNG file to write.
    times : sequence of float, optional
        Snapshot times to draw (nearest stored); default ``max_rows`` of them where W2 to
        Pi_# rho_0 changes most (:func:`~spheredens.plot._common.w2_snapshot_indices`: the
        first, the last, the closest approach and the others evenly spaced in the W2
        travelled), or evenly spaced in time when the file has no W2.
    """
    t_all = ds["time"].values
    idx = (
        w2_snapshot_indices(t_all, ds["w2_projection"].values, max_rows)
        if times is None and "w2_projection" in ds
        else snapshot_indices(t_all, times, max_rows)
    )
    targets = file_targets(ds)
    rows = len(idx)
    fig = plt.figure(figsize=(11, 3.0 * rows + 2.8))
    grid = fig.add_gridspec(
        rows + 1, 3, height_ratios=[3.0] * rows + [2.3], width_ratios=[1, 1, 1.9]
    )
    density = None
    view = ds.sd.grid().regular_view(ds.sd.marginal())  # computed once for every row
    for r, i in enumerate(idx):
        axes = sphere_view_axes(fig, [grid[r, 0], grid[r, 1], grid[r, 2]])
        density = SphereDensity(ds, axes, view=view)
        density.draw(i)
        sphere_targets(axes, targets)
        rho = density.rho[i]
        for ax, (_, _, label) in zip(axes, SPHERE_VIEWS):
            ax.set_title(
                f"t = {t_all[i]:g}, {label}"
                + (f"; min rho = {float(rho.min()):.3g}" if label == "Mollweide" else ""),
                fontsize=8,
            )
        fig.colorbar(density.mappable, ax=axes[2], shrink=0.8, label="rho (per steradian)")
    bottom = grid[rows, :].subgridspec(1, 3, wspace=0.35)
    ax = fig.add_subplot(bottom[0, 0])
    if not w2_axes(ax, ds):
        ax.text(
            0.5,
            0.5,
            "no W2 to a target:\n" + ds["w2_projection"].attrs.get("comment", "")[:60],
            ha="center",
            va="center",
            fontsize=7,
            transform=ax.transAxes,
            wrap=True,
        )
    for i in idx:  # the times of the rows above
        ax.axvline(float(t_all[i]), color="0.55", lw=0.8, ls=":", zorder=0)
    ax.set_title("distances to the targets (dotted: the rows' times)", fontsize=8)
    assert density is not None
    top = np.maximum(density.rho.reshape(density.rho.shape[0], -1).max(axis=1), 1e-300)
    ax = fig.add_subplot(bottom[0, 1])
    ax.semilogy(t_all, top, "-", color="C2")
    ax.set_xlabel("t")
    ax.set_ylabel("max rho (per steradian)")
    ax.grid(True, which="both", alpha=0.3)
    ax.set_title("concentration", fontsize=8)
    ax = fig.add_subplot(bottom[0, 2])
    negative = np.maximum(-ds["min_rho"].values, 0.0) / top
    if np.any(negative > 0):
        ax.semilogy(t_all, np.where(negative > 0, negative, np.nan), "o-", ms=3, color="C0")
    else:
        ax.text(
            0.5,
            0.5,
            "min rho >= 0 at every snapshot",
            ha="center",
            va="center",
            fontsize=8,
            transform=ax.transAxes,
        )
        ax.set_xlim(float(t_all[0]), float(t_all[-1]))
        ax.set_yticks([])
    ax.set_xlabel("t")
    ax.set_ylabel("-min rho / max rho (1)")
    ax.grid(True, which="both", alpha=0.3)
    ax.set_title("Gibbs undershoot", fontsize=8)
    fig.suptitle(run_title(ds, "sphere"), fontsize=10)
    targets_legend(fig, targets)
    return save_figure(fig, path)


def _angle(points: np.ndarray) -> np.ndarray:
    """Longitude / angle of points in radians, unwrapped along the slices."""
    return np.unwrap(np.arctan2(points[:, 1], points[:, 0]))


def plot_slices(ds: Any, path: str | Path, *, particles: Any = None) -> Path:
    """The slices of a usa_av run: slice modes against xi at the last snapshot (radians, with
    the fitted orbit x*(xi) = G(xi)^T z for gauge kernels), the energy E_h against t, and the
    collapse measures (W2 of the marginal to the nearest Dirac mass, orbit distance, in
    radians) against t.

    ``particles``: optional list of (label, times, energies) curves drawn beside the energy.
    """
    t = ds["time"].values
    xi = ds["xi"].values
    modes = ds["slice_mode"].values[-1]
    gauges = ds["gauge"].values
    z = ds["orbit_z"].values[-1]
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    ax = axes[0]
    fine_orbit = None
    if np.all(np.isfinite(z)):
        fine_orbit = np.einsum("kji,j->ki", gauges, z)
    if file_domain(ds).points_of_angles is not None:  # the circle: a mode is one angle
        ax.plot(xi, _angle(modes), "o", label="slice modes")
        if fine_orbit is not None:
            ax.plot(xi, _angle(fine_orbit), "-", color="k", lw=0.8, label="orbit G(xi)^T z")
        ax.set_ylabel("angle of the mode (radians)")
    else:
        for comp, (name, color) in enumerate((("latitude", "C0"), ("longitude", "C1"))):
            value = np.arcsin(np.clip(modes[:, 2], -1, 1)) if comp == 0 else _angle(modes)
            ax.plot(xi, value, "o", color=color, label=f"mode {name}")
            if fine_orbit is not None:
                orbit = (
                    np.arcsin(np.clip(fine_orbit[:, 2], -1, 1)) if comp == 0 else _angle(fine_orbit)
                )
                ax.plot(xi, orbit, "-", color=color, lw=0.8)
        ax.set_ylabel("latitude, longitude (radians; lines: orbit G(xi)^T z)", fontsize=8)
    ax.set_xlabel("xi")
    ax.set_title(f"slice modes at t = {t[-1]:g}", fontsize=9)
    ax.legend(fontsize=7)
    ax = axes[1]
    ax.plot(t, ds["energy"].values, "-", color="C3", label="density")
    for label, pt, pe in particles or []:
        ax.plot(pt, pe, "--", lw=0.8, label=label)
    ax.set_xlabel("t")
    ax.set_ylabel("E_h (1)")
    ax.set_title("energy (never decreases)", fontsize=9)
    ax.legend(fontsize=7)
    ax = axes[2]
    ax.semilogy(
        t,
        np.maximum(ds["marginal_w2_dirac"].values, 1e-6),
        "-",
        label="W2(marginal, nearest Dirac)",
    )
    if np.any(np.isfinite(ds["orbit_distance"].values)):
        ax.semilogy(t, np.maximum(ds["orbit_distance"].values, 1e-6), "-", label="orbit distance")
    ax.semilogy(t, ds["slice_spread"].values.max(axis=1), ":", label="largest slice spread")
    ax.set_xlabel("t")
    ax.set_ylabel("distance (radians)")
    ax.legend(fontsize=7)
    ax.grid(True, which="both", alpha=0.3)
    fig.suptitle(
        f"usa_av, kernel {ds.attrs.get('auxiliary_kernel', '')}, beta = {ds.attrs.get('beta')}, "
        f"{xi.size} slices, {ds.attrs.get('domain')}",
        fontsize=10,
    )
    return save_figure(fig, path, dpi=100)


#: the figure of a run on each domain: ``(ds, path, **options) -> path`` (the circle's takes no
#: options)
FIGURES = {
    CIRCLE.name: lambda ds, path, **options: plot_circle_run(ds, path),
    SPHERE.name: plot_sphere_run,
    ZONAL.name: lambda ds, path, **options: plot_circle_run(ds, path),
}


def run_figure(ds: Any) -> Any:
    """The figure function of the run's domain (:data:`FIGURES`); NotProvided on a domain
    spheredens does not draw."""
    return domain_entry(FIGURES, file_domain(ds), "figure", "a figure of a run")
