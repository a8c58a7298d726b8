"""Figures of runs (matplotlib is imported here only)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ._lazy import colors, patches, pyplot as plt
from .accessor import file_domain, register_accessor
from .geometry import CIRCLE, SPHERE
from .io import check_output_location


def save_figure(fig: Any, path: str | Path, *, dpi: int = 100) -> Path:
    """Write a matplotlib figure and close it (the folder must exist: none is created)."""

    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return path


def figure_path(path: str | Path) -> Path:
    """The figure beside a data file: ``path`` with suffix ``.png``."""
    return Path(path).with_suffix(".png")


def slices_figure_path(path: str | Path) -> Path:
    """The slice figure :func:`plot_run` draws beside the figure ``path`` of a run with slices
    (``usa_av``): ``<name>_slices.png``."""
    path = Path(path)
    return path.with_name(path.stem + "_slices.png")


def plot_circle_run(ds: Any, path: str | Path) -> Path:
    """Space-time image of rho on the circle (log colour scale) with W2 to Pi_# rho_0 beside it.

    Parameters
    ----------
    ds : xarray.Dataset
        A circle run (schema spheredens-1).
    path : path
        PNG file to write.
    """


    register_accessor()
    rho = ds.sd.marginal()  # with slices: the marginal
    t = ds["time"].values
    theta = ds["theta"].values
    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(11, 4.2), gridspec_kw={"width_ratios": [1.6, 1]})
    top = float(np.nanmax(rho))
    positive = rho[rho > 0]
    floor = max(top * 1e-6, float(positive.min()) if positive.size else top * 1e-6)
    mesh = ax0.pcolormesh(t, np.degrees(theta), np.clip(rho, floor, None).T, shading="nearest",
                          norm=colors.LogNorm(vmin=floor, vmax=top), cmap="viridis")
    fig.colorbar(mesh, ax=ax0, label="rho (per radian)")
    ax0.set_xlabel("t")
    ax0.set_ylabel("theta (degrees)")
    ax0.set_title(f"{ds.attrs.get('model')} on the circle, beta = {ds.attrs.get('beta')}, "
                  f"{ds.attrs.get('scheme')} n = {theta.size}", fontsize=9)
    w2 = ds["w2_projection"].values
    if np.any(np.isfinite(w2)):
        ax1.semilogy(t, w2, "-", color="C3")
        ax1.set_ylabel("W2(rho_t, Pi_# rho_0)  (radians)")
        ax1.set_title("distance to the zero-temperature target", fontsize=9)
    else:
        ax1.plot(t, ds["min_rho"].values, "-", color="C0")
        ax1.set_ylabel("min rho")
        ax1.set_title(ds["w2_projection"].attrs.get("comment", ""), fontsize=8)
    ax1.set_xlabel("t")
    ax1.grid(True, which="both", alpha=0.3)
    return save_figure(fig, path, dpi=110)


def _edges(centres: np.ndarray, lo: float, hi: float) -> np.ndarray:
    mid = 0.5 * (centres[1:] + centres[:-1])
    return np.concatenate([[lo], mid, [hi]])


def _orthographic(ax, lat_e, lon_e, rho, view, norm, cmap):
    """Draw rho (lat, lon) seen from direction ``view`` on a unit disk (orthographic projection)."""
    lat_r, lon_r = np.radians(lat_e)[:, None], np.radians(lon_e)[None, :]
    x = np.stack(np.broadcast_arrays(np.cos(lat_r) * np.cos(lon_r), np.cos(lat_r) * np.sin(lon_r),
                                     np.sin(lat_r)), axis=-1)
    view = np.asarray(view, float) / np.linalg.norm(view)
    up = np.array([0.0, 0.0, 1.0]) if abs(view[2]) < 0.9 else np.array([1.0, 0.0, 0.0])
    right = np.cross(up, view)
    right /= np.linalg.norm(right)
    up = np.cross(view, right)
    depth = 0.25 * (x[:-1, :-1] + x[1:, :-1] + x[:-1, 1:] + x[1:, 1:]) @ view
    data = np.ma.masked_where(depth <= 0.0, rho)
    ax.pcolormesh(x @ right, x @ up, data, norm=norm, cmap=cmap, shading="flat")
    ax.add_patch(patches.Circle((0, 0), 1.0, fill=False, lw=0.6))
    ax.set_xlim(-1.02, 1.02)
    ax.set_ylim(-1.02, 1.02)
    ax.set_aspect("equal")
    ax.axis("off")


def plot_sphere_run(ds: Any, path: str | Path, *, times: Any = None, max_rows: int = 4) -> Path:
    """Density on the sphere at a few snapshots: two orthographic views (from +z and from the
    direction of +x) and a Mollweide map per row, with W2 to Pi_# rho_0 and min rho below.

    Parameters
    ----------
    ds : xarray.Dataset
        A sphere run (schema spheredens-1: dims (time, lat, lon), or (time, cell) on the
        finite-volume mesh).
    path : path
        PNG file to write.
    times : sequence of float, optional
        Snapshot times to draw (nearest stored); default up to ``max_rows`` evenly spaced ones.
    """


    t_all = ds["time"].values
    if times is None:
        idx = np.unique(np.linspace(0, t_all.size - 1, min(max_rows, t_all.size)).round().astype(int))
    else:
        idx = np.array([int(np.argmin(np.abs(t_all - t))) for t in np.atleast_1d(times)])
    register_accessor()
    # with slices the marginal; on the finite-volume mesh its cells on a regular grid
    lat, lon, rho_all = ds.sd.grid().regular_view(ds.sd.marginal())
    order = np.argsort(lat)
    lat_e = _edges(lat[order], -90.0, 90.0)
    dlon = 360.0 / lon.size
    lon_e = np.concatenate([lon - dlon / 2, [lon[-1] + dlon / 2]])
    centred = np.where(lon >= 180.0, lon - 360.0, lon)  # Mollweide wants [-180, 180)
    moll_order = np.argsort(centred)
    moll_lon_e = _edges(centred[moll_order], -180.0, 180.0)
    rows = len(idx)
    fig = plt.figure(figsize=(11, 3.0 * rows + 2.6))
    grid = fig.add_gridspec(rows + 1, 3, height_ratios=[3.0] * rows + [2.2], width_ratios=[1, 1, 1.9])
    cmap = "magma"
    for r, i in enumerate(idx):
        rho = rho_all[i][order]
        norm = colors.Normalize(vmin=0.0, vmax=float(rho.max()))
        for c, (view, label) in enumerate([((0.0, 0.0, 1.0), "from +z"), ((1.0, 0.0, 0.0), "from +x")]):
            ax = fig.add_subplot(grid[r, c])
            _orthographic(ax, lat_e, lon_e, rho, view, norm, cmap)
            ax.set_title(f"t = {t_all[i]:g}, {label}", fontsize=8)
        ax = fig.add_subplot(grid[r, 2], projection="mollweide")
        mesh = ax.pcolormesh(np.radians(moll_lon_e), np.radians(lat_e), rho[:, moll_order],
                             norm=norm, cmap=cmap, shading="flat")
        ax.set_xticklabels([])
        ax.set_yticklabels([])
        ax.grid(True, alpha=0.3)
        ax.set_title(f"Mollweide; min rho = {float(rho.min()):.3g}", fontsize=8)
        fig.colorbar(mesh, ax=ax, shrink=0.8, label="rho (per sr)")
    ax = fig.add_subplot(grid[rows, :])
    w2 = ds["w2_projection"].values
    if np.any(np.isfinite(w2)):
        ax.semilogy(t_all, w2, "-", color="C3", label="W2(rho_t, Pi_# rho_0)")
    top = np.maximum(rho_all.max(axis=(1, 2)), 1e-300)
    ax.semilogy(t_all, top, "--", color="C2", label="max rho")
    negative = np.maximum(-ds["min_rho"].values, 0.0) / top
    if np.any(negative > 0):
        ax.semilogy(t_all, np.where(negative > 0, negative, np.nan), ":", color="C0",
                    label="-min rho / max rho (Gibbs undershoot)")
    ax.set_xlabel("t")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.suptitle(f"{ds.attrs.get('model')} on the sphere, beta = {ds.attrs.get('beta')}, "
                 f"{ds.attrs.get('scheme')} " + (f"lmax = {ds.attrs.get('lmax')}" if "lmax" in ds.attrs
                                                  else f"nlat = {ds.attrs.get('nlat')} rings"),
                 fontsize=10)
    return save_figure(fig, path)


def _angle_deg(points: np.ndarray) -> np.ndarray:
    """Longitude / angle of points in degrees, unwrapped along the slices."""
    return np.degrees(np.unwrap(np.arctan2(points[:, 1], points[:, 0])))


def plot_slices(ds: Any, path: str | Path, *, particles: Any = None) -> Path:
    """The slices of a usa_av run: slice modes against xi at the last snapshot (with the fitted
    orbit x*(xi) = G(xi)^T z for gauge kernels), the energy E_h against t, and the collapse
    measures (W2 of the marginal to the nearest Dirac mass, orbit distance) against t.

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
        ax.plot(xi, _angle_deg(modes), "o", label="slice modes")
        if fine_orbit is not None:
            ax.plot(xi, _angle_deg(fine_orbit), "-", color="k", lw=0.8, label="orbit G(xi)^T z")
        ax.set_ylabel("angle of the mode (degrees)")
    else:
        for comp, (name, color) in enumerate((("latitude", "C0"), ("longitude", "C1"))):
            value = (np.degrees(np.arcsin(np.clip(modes[:, 2], -1, 1))) if comp == 0 else
                     _angle_deg(modes))
            ax.plot(xi, value, "o", color=color, label=f"mode {name}")
            if fine_orbit is not None:
                orbit = (np.degrees(np.arcsin(np.clip(fine_orbit[:, 2], -1, 1))) if comp == 0 else
                         _angle_deg(fine_orbit))
                ax.plot(xi, orbit, "-", color=color, lw=0.8)
        ax.set_ylabel("degrees (lines: orbit G(xi)^T z)")
    ax.set_xlabel("xi")
    ax.set_title(f"slice modes at t = {t[-1]:g}", fontsize=9)
    ax.legend(fontsize=7)
    ax = axes[1]
    ax.plot(t, ds["energy"].values, "-", color="C3", label="density")
    for label, pt, pe in particles or []:
        ax.plot(pt, pe, "--", lw=0.8, label=label)
    ax.set_xlabel("t")
    ax.set_ylabel("E_h")
    ax.set_title("energy (never decreases)", fontsize=9)
    ax.legend(fontsize=7)
    ax = axes[2]
    ax.semilogy(t, np.maximum(ds["marginal_w2_dirac"].values, 1e-6), "-", label="W2(marginal, nearest Dirac)")
    if np.any(np.isfinite(ds["orbit_distance"].values)):
        ax.semilogy(t, np.maximum(ds["orbit_distance"].values, 1e-6), "-", label="orbit distance")
    ax.semilogy(t, ds["slice_spread"].values.max(axis=1), ":", label="largest slice spread")
    ax.set_xlabel("t")
    ax.set_ylabel("radians")
    ax.legend(fontsize=7)
    ax.grid(True, which="both", alpha=0.3)
    fig.suptitle(f"usa_av, kernel {ds.attrs.get('auxiliary_kernel', '')}, beta = {ds.attrs.get('beta')}, "
                 f"{xi.size} slices, {ds.attrs.get('domain')}", fontsize=10)
    return save_figure(fig, path, dpi=100)


#: the figure of a run on each domain: ``(ds, path, **options) -> path`` (the circle's takes no
#: options)
CIRCLE.provides("figure")(lambda ds, path, **options: plot_circle_run(ds, path))
SPHERE.provides("figure")(plot_sphere_run)


def plot_run(ds: Any, path: str | Path, *, mkdir: bool = False, **options: Any) -> Path:
    """The figure of a run file, drawn by its domain's part ``"figure"`` (circle:
    :func:`plot_circle_run`, sphere: :func:`plot_sphere_run` with ``options``); for usa_av also
    ``<name>_slices.png`` (:func:`plot_slices`).

    ``path`` must end in ``.png`` and its folder exist and be writable, or ``mkdir=True``
    creates it; this is checked before drawing (:func:`~spheredens.io.check_output_location`).

    Raises
    ------
    spheredens.ConfigError
        ``path`` cannot be written (one line).
    spheredens.geometry.NotProvided
        The file's domain has no figure (one line: nothing provides ``"figure"`` there).
    """
    path = check_output_location(path, suffix=".png", mkdir=mkdir)
    figure = file_domain(ds).part("figure", "a figure of a run")
    if "slice_mode" in ds:
        path = Path(path)
        plot_slices(ds, slices_figure_path(path))
    return figure(ds, path, **options)
