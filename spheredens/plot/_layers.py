"""The layers drawn on the axes: a density (the circle's line, the sphere's views) and particles
(dots, the histogram of their angles); :meth:`draw` of each puts the snapshot of a time."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from .._lazy import colors
from .._lazy import pyplot as plt
from .._types import Array
from ..geometry import circle_angle
from ..targets import Target
from ._common import (
    MAX_DRAWN_PARTICLES,
    SPHERE_VIEWS,
    TARGET_STYLE,
    cell_edges,
    lon_lat,
    theta_axis,
    view_frame,
)


class SphereDensity:
    """rho of a sphere file (the marginal with slices; fv cells sampled on a regular grid) on
    the three views; :meth:`draw` puts snapshot ``i`` there, coloured from 0 to its maximum."""

    def __init__(
        self,
        ds: Any,
        axes: Sequence[Any],
        *,
        cmap: str = "magma",
        views: Sequence[Any] = SPHERE_VIEWS,
        view: tuple[Array, Array, Array] | None = None,
    ) -> None:
        # with slices the marginal; on the finite-volume mesh its cells on a regular grid
        lat, lon, rho_all = (
            view if view is not None else ds.sd.grid().regular_view(ds.sd.marginal())
        )
        self.order = np.argsort(lat)
        self.rho = np.asarray(rho_all, dtype=float)[:, self.order]
        lat_e = cell_edges(lat[self.order], -90.0, 90.0)
        dlon = 360.0 / lon.size
        lon_e = np.concatenate([lon - dlon / 2, [lon[-1] + dlon / 2]])
        centred = np.where(lon >= 180.0, lon - 360.0, lon)  # Mollweide wants [-180, 180)
        self.moll_order = np.argsort(centred)
        moll_lon_e = cell_edges(centred[self.moll_order], -180.0, 180.0)
        self.norm = colors.Normalize(vmin=0.0, vmax=1.0)
        first = self.rho[0]
        self.meshes: list[tuple[Any, Any]] = []
        lat_r, lon_r = np.radians(lat_e)[:, None], np.radians(lon_e)[None, :]
        x = np.stack(
            np.broadcast_arrays(
                np.cos(lat_r) * np.cos(lon_r), np.cos(lat_r) * np.sin(lon_r), np.sin(lat_r)
            ),
            axis=-1,
        )
        for ax, (kind, view, _) in zip(axes, views):
            if kind == "ortho":
                v, right, up = view_frame(view)
                hidden = 0.25 * (x[:-1, :-1] + x[1:, :-1] + x[:-1, 1:] + x[1:, 1:]) @ v <= 0.0
                mesh = ax.pcolormesh(
                    x @ right,
                    x @ up,
                    np.ma.masked_where(hidden, first),
                    norm=self.norm,
                    cmap=cmap,
                    shading="flat",
                )
                self.meshes.append(
                    (mesh, lambda rho, hidden=hidden: np.ma.masked_where(hidden, rho))
                )
            else:
                mesh = ax.pcolormesh(
                    np.radians(moll_lon_e),
                    np.radians(lat_e),
                    first[:, self.moll_order],
                    norm=self.norm,
                    cmap=cmap,
                    shading="flat",
                )
                self.meshes.append((mesh, lambda rho: rho[:, self.moll_order]))
        self.mappable = self.meshes[-1][0]

    def draw(self, i: int) -> None:
        rho = self.rho[i]
        for mesh, view in self.meshes:
            mesh.set_array(view(rho))
        self.norm.vmin, self.norm.vmax = 0.0, max(float(rho.max()), 1e-300)


def particle_colours(ds: Any) -> Any:
    """RGBA colours of the particles: by slice for labelled (usa_av) files, else one colour."""
    n = ds.sizes["particle"]
    if "slice" in ds:
        slices = np.asarray(ds["slice"].values)
        count = max(int(slices.max()) + 1, 2)
        return plt.get_cmap("viridis")(slices / (count - 1))
    return np.tile(colors.to_rgba("C1"), (n, 1))


def drawn_particles(n: int) -> Array:
    """Indices of the particles drawn: all, or :data:`MAX_DRAWN_PARTICLES` evenly spaced."""
    return np.unique(np.linspace(0, n - 1, min(n, MAX_DRAWN_PARTICLES)).round().astype(int))


class SphereParticles:
    """Particles of a sphere file as points on the three views; :meth:`draw` puts the
    snapshot nearest to time ``t``."""

    def __init__(
        self,
        run: Any,
        axes: Sequence[Any],
        *,
        size: float = 4.0,
        views: Sequence[Any] = SPHERE_VIEWS,
    ) -> None:
        keep = drawn_particles(run.sizes["particle"])
        self.t = np.asarray(run["time"].values, dtype=float)
        self.x = np.asarray(run["position"].values, dtype=float)[:, keep]
        self.rgba = particle_colours(run)[keep]
        self.layers = []
        for ax, (kind, view, _) in zip(axes, views):
            dots = ax.scatter([], [], s=size, lw=0, zorder=4)
            self.layers.append((dots, kind, None if view is None else view_frame(view)))

    def draw(self, t: float) -> None:
        x = self.x[int(np.argmin(np.abs(self.t - t)))]
        for dots, kind, frame in self.layers:
            if kind == "ortho":
                v, right, up = frame
                front = x @ v > 0
                dots.set_offsets(np.column_stack([x[front] @ right, x[front] @ up]))
                dots.set_facecolor(self.rgba[front])
            else:
                lon, lat = lon_lat(x)
                dots.set_offsets(np.column_stack([lon, lat]))
                dots.set_facecolor(self.rgba)


# -- the circle: layers --------------------------------------------------------------------------
def log_floor(rho: Array) -> tuple[float, float]:
    top = float(np.nanmax(rho))
    positive = rho[rho > 0]
    return max(top * 1e-6, float(positive.min()) if positive.size else top * 1e-6), top


class CircleDensity:
    """rho(theta) of a circle file as a line (log scale with ``log``), with the slices rho_k of
    usa_av as thin lines coloured by xi; :meth:`draw` puts the snapshot nearest to time ``t``."""

    def __init__(
        self, ds: Any, ax: Any, *, log: bool = True, label: str = "rho", slices: bool = True
    ) -> None:
        self.t = np.asarray(ds["time"].values, dtype=float)
        self.theta = np.asarray(ds["theta"].values, dtype=float)
        self.rho = np.asarray(ds.sd.marginal(), dtype=float)
        self.slices = (
            np.asarray(ds["rho"].values, dtype=float) if slices and "xi" in ds["rho"].dims else None
        )
        self.ax, self.log = ax, log
        self.slice_lines = []
        if self.slices is not None:
            xi = np.asarray(ds["xi"].values, dtype=float)
            span = max(float(xi.max() - xi.min()), 1e-300)
            cmap = plt.get_cmap("viridis")
            for k in range(self.slices.shape[1]):
                (line,) = ax.plot(
                    self.theta,
                    self.slices[0, k],
                    lw=0.7,
                    alpha=0.8,
                    color=cmap((xi[k] - xi.min()) / span),
                    label="slices rho_k (colour: xi)" if k == 0 else None,
                )
                self.slice_lines.append(line)
            label = "marginal sum_k r_k rho_k"
        (self.line,) = ax.plot(self.theta, self.rho[0], color="k", lw=1.4, label=label)
        both = (
            self.rho
            if self.slices is None
            else np.concatenate([self.rho.ravel(), self.slices.ravel()])
        )
        if log:
            floor, top = log_floor(both)
            ax.set_yscale("log")
            ax.set_ylim(floor, top * 1.5)
        else:
            ax.set_ylim(0.0, 1.05 * float(np.nanmax(both)))
        theta_axis(ax, "x")
        ax.set_ylabel("rho (per radian)")
        ax.grid(True, which="both", alpha=0.3)

    def draw(self, t: float) -> None:
        i = int(np.argmin(np.abs(self.t - t)))
        clip = (lambda v: np.maximum(v, 1e-300)) if self.log else (lambda v: v)
        self.line.set_ydata(clip(self.rho[i]))
        for k, line in enumerate(self.slice_lines):
            line.set_ydata(clip(self.slices[i, k]))


def density_cell_edges(ds: Any) -> Array:
    """The edges theta_j -+ w_j / 2 of the cells of a circle density file (its grid): the bins
    that put a particle histogram on the footing of the density's cell averages (a wider bin
    lowers a cluster narrower than it)."""
    grid = ds.sd.grid()
    theta, weight = np.asarray(grid.theta, dtype=float), np.asarray(grid.weight, dtype=float)
    return np.append(theta - weight / 2, theta[-1] + weight[-1] / 2)


def default_bins(n: int) -> Array:
    """About 2 sqrt(n) equal bins of the angle (16 to 90) for n particles, where no density
    gives its cells."""
    return np.linspace(0.0, 2 * np.pi, max(16, min(90, int(np.sqrt(n)) * 2)) + 1)


def angle_histogram(angle: Array, weight: Array, bins: Array) -> Array:
    """The density per radian of the weighted angles on ``bins`` (increasing edges spanning
    2 pi): each angle taken modulo 2 pi into [bins[0], bins[0] + 2 pi)."""
    inside = bins[0] + np.mod(np.asarray(angle, dtype=float) - bins[0], 2 * np.pi)
    heights, _ = np.histogram(inside, bins=bins, weights=weight)
    return heights / np.diff(bins) / max(float(np.sum(weight)), 1e-300)


class CircleParticles:
    """Particles of a circle file: dots on the unit circle (``ring`` axes) and/or the
    histogram of their angles per radian (``hist`` axes; on ``bins``, by default about
    2 sqrt(n) equal bins, at most 90); :meth:`draw` puts the snapshot nearest to time ``t``."""

    def __init__(
        self,
        run: Any,
        *,
        ring: Any = None,
        hist: Any = None,
        targets: Sequence[Target] = (),
        ymax: float | None = None,
        bins: Array | None = None,
        label: str = "particles (histogram)",
        color: str = "C1",
    ) -> None:
        self.t = np.asarray(run["time"].values, dtype=float)
        x = np.asarray(run["position"].values, dtype=float)
        self.angle = circle_angle(x)
        self.weight = np.asarray(run["particle_weight"].values, dtype=float)
        n = x.shape[1]
        self.keep = drawn_particles(n)
        self.rgba = particle_colours(run)[self.keep]
        self.bins = default_bins(n) if bins is None else np.asarray(bins, dtype=float)
        self.ring = self.hist = None
        if ring is not None:
            psi = np.linspace(0, 2 * np.pi, 361)
            ring.plot(np.cos(psi), np.sin(psi), color="0.6", lw=0.8)
            for target in targets:
                style = TARGET_STYLE[target.role]
                pts = target.points
                ring.plot(
                    1.12 * pts[:, 0],
                    1.12 * pts[:, 1],
                    ls="none",
                    marker=style["marker"],
                    ms=9,
                    color=style["color"],
                    markeredgecolor="k",
                )
            ring.set_xlim(-1.25, 1.25)
            ring.set_ylim(-1.25, 1.25)
            ring.set_aspect("equal")
            ring.axis("off")
            self.ring = ring.scatter([], [], s=8, lw=0, zorder=4)
        if hist is not None:
            heights = [self._histogram(i) for i in range(self.t.size)]
            self.hist = hist.stairs(
                heights[0],
                self.bins,
                color=color,
                fill=True,
                alpha=0.45,
                label=label,
            )
            hist.set_ylim(0.0, 1.05 * max(float(np.max(heights)), ymax or 0.0))
            theta_axis(hist, "x")
            hist.set_ylabel("density (per radian)")

    def _histogram(self, i: int) -> Array:
        return angle_histogram(self.angle[i], self.weight, self.bins)

    def draw(self, t: float) -> None:
        i = int(np.argmin(np.abs(self.t - t)))
        if self.ring is not None:
            a = self.angle[i, self.keep]
            self.ring.set_offsets(np.column_stack([np.cos(a), np.sin(a)]))
            self.ring.set_facecolor(self.rgba)
        if self.hist is not None:
            self.hist.set_data(self._histogram(i))
