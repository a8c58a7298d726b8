"""What every figure shares: where it is written, the file it draws, the axes of theta and
of W2 against time, the three views of the sphere, and the targets drawn on them."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from .._lazy import patches
from .._lazy import pyplot as plt
from .._types import Array
from ..accessor import file_domain
from ..exceptions import SchemaError
from ..geometry import circle_angle
from ..io import open_file
from ..targets import Target

#: at most this many particles are drawn (an evenly spaced subset beyond; figures only)
MAX_DRAWN_PARTICLES = 4000

#: the label of an angle axis: every figure uses radians
THETA_LABEL = "theta (radians)"
W2_LABEL = "W2 (radians)"


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


# -- the files ---------------------------------------------------------------------------------
def open_figure_file(path: str | Path) -> Any:
    """Open a file to draw: a density run (schema spheredens-1, checked), a particle run
    (spheredens-particles-1, checked; uniform ``particle_weight`` added when absent) or a
    comparison file (``spheredens compare``), loaded in memory.

    Raises
    ------
    SchemaError
        The file is missing, unreadable, of another kind (a sweep's combined file, an
        analysis) or lacks part of its layout (one line).
    """
    kind, ds = open_file(path)
    if kind not in ("density", "particles", "comparison"):
        schema = ds.attrs.get("spheredens_schema")
        what = (
            f"a {schema} file"
            if schema
            else "not a file of spheredens (no spheredens_schema attribute)"
        )
        raise SchemaError(
            f"{str(path)!r} is {what}; plot and animate draw density, particle and "
            "comparison files (a sweep's combined file: spheredens analyze-beta)"
        )
    ds.encoding.setdefault("source", str(path))
    return ds


def figure_source(source: Any) -> tuple[Any, Path | None]:
    """(Dataset, its path or None) of a path or a Dataset."""
    if isinstance(source, (str, os.PathLike)):
        return open_figure_file(source), Path(source)
    name = source.encoding.get("source")  # set by xarray.open_dataset
    return source, (Path(name) if name else None)


#: how each target is drawn (on light and dark backgrounds alike)
TARGET_STYLE = {
    "projection": {"color": "#00b7ff", "ls": "--", "marker": "X"},
    "terminal": {"color": "#3cd23c", "ls": ":", "marker": "P"},
    "both": {"color": "#00b7ff", "ls": "-.", "marker": "X"},
}


def target_handles(targets: Sequence[Target]) -> list[Any]:
    """Legend entries of the targets."""
    handles = []
    for target in targets:
        style = TARGET_STYLE[target.role]
        if target.basis.shape[0] == 1:
            handles.append(
                plt.Line2D(
                    [],
                    [],
                    color=style["color"],
                    ls=style["ls"],
                    marker=style["marker"],
                    markeredgecolor="k",
                    label=target.label,
                )
            )
        else:
            handles.append(
                plt.Line2D([], [], color=style["color"], ls=style["ls"], lw=1.5, label=target.label)
            )
    return handles


def targets_legend(fig: Any, targets: Sequence[Target]) -> None:
    if targets:
        fig.legend(handles=target_handles(targets), loc="upper right", fontsize=7, framealpha=0.9)


def circle_target_lines(ax: Any, targets: Sequence[Target], *, vertical: bool) -> None:
    """The target angles on an axis of theta: vertical (theta on x) or horizontal lines."""
    for target in targets:
        style = TARGET_STYLE[target.role]
        for angle in circle_angle(target.points):
            draw = ax.axvline if vertical else ax.axhline
            draw(angle, color=style["color"], ls=style["ls"], lw=1.6, zorder=5)


def theta_axis(ax: Any, which: str = "x", extent: float = 2 * np.pi) -> None:
    """An axis of theta in radians on [0, extent] (2 pi: the circle; pi: the polar angle of the
    zonal domain, the measure of its interval), with ticks at multiples of pi / 2."""
    count = int(round(extent / (np.pi / 2))) + 1
    ticks = np.arange(count) * np.pi / 2
    labels = ["0", "pi/2", "pi", "3pi/2", "2pi"][:count]
    if which == "x":
        ax.set_xlim(0.0, extent)
        ax.set_xticks(ticks, labels)
        ax.set_xlabel(THETA_LABEL)
    else:
        ax.set_ylim(0.0, extent)
        ax.set_yticks(ticks, labels)
        ax.set_ylabel(THETA_LABEL)


# -- curves against time -------------------------------------------------------------------------
def on_circle(ds: Any) -> bool:
    """Whether the file's domain is drawn as the circle: a point there is one angle (the
    domain's ``points_of_angles``); the sphere is drawn on its views."""
    return file_domain(ds).points_of_angles is not None


def any_finite(values: Any) -> bool:
    return bool(np.any(np.isfinite(np.asarray(values, dtype=float))))


def log_ticks(lo: float, hi: float) -> Any:
    """Tick values of a log axis on [lo, hi]: the coarsest of 10^k and 1, 2, 5 x 10^k that
    gives at least 3 ticks (every second one, third ... when more than 8); on a shorter span,
    evenly spaced values at the largest step 1, 2 or 5 x 10^k that gives 3 of them (0.15, 0.2,
    0.25)."""
    decades = np.arange(np.floor(np.log10(lo)), np.ceil(np.log10(hi)) + 1)
    for subs in ((1.0,), (1.0, 2.0, 5.0)):
        ticks = np.array([s * 10.0**k for k in decades for s in subs])
        ticks = np.sort(ticks[(ticks >= lo * (1 - 1e-9)) & (ticks <= hi * (1 + 1e-9))])
        if ticks.size >= 3:
            return ticks[:: int(np.ceil(ticks.size / 8))]
    top = np.floor(np.log10(hi - lo))
    for step in (m * 10.0**k for k in np.arange(top, top - 4, -1) for m in (5.0, 2.0, 1.0)):
        ticks = np.arange(np.ceil(lo / step - 1e-9), np.floor(hi / step + 1e-9) + 1) * step
        if ticks.size >= 3:
            return np.round(ticks, int(max(0, 1 - np.floor(np.log10(step)))))
    return np.array([lo, hi])


def plain_log_ticks(ax: Any, which: str) -> None:
    """Label a log axis with plain numbers (0.01, 0.2, 5) at the values of :func:`log_ticks`,
    and no minor labels: never "3x10^0 4x10^0" side by side."""
    lo, hi = ax.get_ylim() if which == "y" else ax.get_xlim()
    lo, hi = min(lo, hi), max(lo, hi)
    if not (lo > 0 and np.isfinite(hi) and hi > lo):
        return
    ticks = log_ticks(lo, hi)
    labels = [f"{v:g}" for v in ticks]
    if which == "y":
        ax.set_yticks(ticks, labels=labels)
        ax.set_ylim(lo, hi)
        ax.tick_params(axis="y", which="minor", labelleft=False)
    else:
        ax.set_xticks(ticks, labels=labels)
        ax.set_xlim(lo, hi)
        ax.tick_params(axis="x", which="minor", labelbottom=False)


def w2_axes(ax: Any, ds: Any) -> bool:
    """W2 to Pi_# rho_0 and to the top eigenspace of V against t (radians, log scale); False
    when the file has neither."""
    t = ds["time"].values
    drawn = False
    for name, label, style in (
        ("w2_projection", "W2(rho_t, Pi_# rho_0)", {"color": "C3"}),
        ("w2_terminal", "W2 to the top eigenspace of V", {"color": "C0", "ls": "--"}),
    ):
        if name in ds and any_finite(ds[name].values):
            ax.semilogy(
                t, np.where(ds[name].values > 0, ds[name].values, np.nan), label=label, **style
            )
            drawn = True
    if drawn:
        ax.set_ylabel(W2_LABEL)
        ax.legend(fontsize=7)
        plain_log_ticks(ax, "y")
    ax.set_xlabel("t")
    ax.grid(True, which="both", alpha=0.3)
    return drawn


def other_curve(ax: Any, ds: Any, top: Array, top_label: str) -> None:
    """The curve of a run without W2 to a target: for usa_av the W2 of the marginal to the
    nearest Dirac mass (radians, collapse), else max rho."""
    t = ds["time"].values
    if "marginal_w2_dirac" in ds and any_finite(ds["marginal_w2_dirac"].values):
        ax.semilogy(t, np.maximum(ds["marginal_w2_dirac"].values, 1e-6), "-", color="C3")
        ax.set_ylabel("W2(marginal, nearest Dirac) (radians)", fontsize=8)
        ax.set_title("collapse of the marginal", fontsize=9)
    else:
        ax.semilogy(t, top, "-", color="C2")
        ax.set_ylabel(top_label)
    ax.set_xlabel("t")
    ax.grid(True, which="both", alpha=0.3)


def time_cursor(ax: Any, t0: float) -> Callable[[float], None]:
    line = ax.axvline(t0, color="k", lw=0.9, alpha=0.8)
    return lambda t: line.set_xdata([t, t])


# -- the sphere: views ---------------------------------------------------------------------------
#: the views of the sphere in every figure: two orthographic views and a Mollweide map
SPHERE_VIEWS = (
    ("ortho", (0.0, 0.0, 1.0), "from +z"),
    ("ortho", (1.0, 0.0, 0.0), "from +x"),
    ("mollweide", None, "Mollweide"),
)


def cell_edges(centres: np.ndarray, lo: float, hi: float) -> np.ndarray:
    mid = 0.5 * (centres[1:] + centres[:-1])
    return np.concatenate([[lo], mid, [hi]])


def view_frame(view: Any) -> tuple[Array, Array, Array]:
    """(view, right, up): the direction seen from and the screen axes of an orthographic view."""
    view = np.asarray(view, float) / np.linalg.norm(view)
    up = np.array([0.0, 0.0, 1.0]) if abs(view[2]) < 0.9 else np.array([1.0, 0.0, 0.0])
    right = np.cross(up, view)
    right /= np.linalg.norm(right)
    return view, right, np.cross(view, right)


def ortho_frame(ax: Any) -> None:
    ax.add_patch(patches.Circle((0, 0), 1.0, fill=False, lw=0.6))
    ax.set_xlim(-1.02, 1.02)
    ax.set_ylim(-1.02, 1.02)
    ax.set_aspect("equal")
    ax.axis("off")


def mollweide_frame(ax: Any) -> None:
    ax.set_xticklabels([])
    ax.set_yticklabels([])
    ax.grid(True, alpha=0.3)


def lon_lat(x: Array) -> tuple[Array, Array]:
    """Longitude in [-pi, pi) and latitude (radians) of unit vectors (..., 3)."""
    return np.arctan2(x[..., 1], x[..., 0]), np.arcsin(np.clip(x[..., 2], -1.0, 1.0))


def sphere_view_axes(fig: Any, cells: Sequence[Any]) -> list[Any]:
    """The axes of :data:`SPHERE_VIEWS` in three gridspec cells."""
    axes = []
    for cell, (kind, _, _) in zip(cells, SPHERE_VIEWS):
        ax = fig.add_subplot(cell, projection="mollweide" if kind == "mollweide" else None)
        (mollweide_frame if kind == "mollweide" else ortho_frame)(ax)
        axes.append(ax)
    return axes


def target_markers(ax: Any, style: dict[str, str], x: Array, y: Array) -> None:
    """The points of a target at (x, y) on ``ax``, as its markers."""
    ax.plot(
        x,
        y,
        ls="none",
        marker=style["marker"],
        ms=9,
        color=style["color"],
        markeredgecolor="k",
        zorder=6,
    )


def sphere_targets(
    axes: Sequence[Any], targets: Sequence[Target], views: Sequence[Any] = SPHERE_VIEWS
) -> None:
    """The targets on the views: points as markers (front side only), great circles as lines."""
    for ax, (kind, view, _) in zip(axes, views):
        for target in targets:
            style = TARGET_STYLE[target.role]
            pts, curve = target.points, target.curve()
            if kind == "ortho":
                v, right, up = view_frame(view)
                if len(pts):
                    front = pts @ v > 0
                    target_markers(ax, style, pts[front] @ right, pts[front] @ up)
                if len(curve):
                    xs, ys = curve @ right, curve @ up
                    hidden = curve @ v < -1e-9  # a great circle through the rim is drawn
                    ax.plot(
                        np.where(hidden, np.nan, xs),
                        np.where(hidden, np.nan, ys),
                        ls=style["ls"],
                        color=style["color"],
                        lw=1.5,
                        zorder=6,
                    )
            else:
                if len(pts):
                    target_markers(ax, style, *lon_lat(pts))
                if len(curve):
                    lon, lat = lon_lat(curve)
                    jump = np.concatenate([[False], np.abs(np.diff(lon)) > np.pi])
                    lon, lat = np.where(jump, np.nan, lon), np.where(jump, np.nan, lat)
                    ax.plot(lon, lat, ls=style["ls"], color=style["color"], lw=1.5, zorder=6)


def snapshot_indices(t_all: Array, times: Any, count: int) -> Array:
    """The snapshots nearest to ``times``; without them, ``count`` evenly spaced ones."""
    if times is None:
        return np.unique(np.linspace(0, t_all.size - 1, min(count, t_all.size)).round().astype(int))
    return np.array([int(np.argmin(np.abs(t_all - t))) for t in np.atleast_1d(times)])


def w2_snapshot_indices(t_all: Array, w2: Array, count: int) -> Array:
    """The ``count`` snapshots a figure shows by default: where W2 to Pi_# rho_0 changes most.

    The first and the last snapshot; the closest approach to Pi_# rho_0 (the minimum of W2:
    the collapse); and the others evenly spaced in the distance W2 travels,
    s_k = sum_{j < k} |W2(t_{j+1}) - W2(t_j)| (radians), so that a collapse in the first
    fifth of the run gets its share of the rows (the great-circle demo: t = 0, 3.5, 6, 20,
    not 0, 6.5, 13.5, 20). Evenly spaced in time (:func:`snapshot_indices`) when W2 is finite
    at fewer than 3 snapshots or does not change.

    Parameters
    ----------
    t_all : ndarray, shape (n_t,)
        The snapshot times, increasing.
    w2 : ndarray, shape (n_t,)
        W2 to Pi_# rho_0 at each snapshot (NaN where undefined).
    count : int
        How many snapshots (at most n_t).

    Returns
    -------
    ndarray of int
        Indices into ``t_all``, increasing, ``min(count, n_t)`` of them.
    """
    n, count = t_all.size, min(count, t_all.size)
    w2 = np.asarray(w2, dtype=float)
    ok = np.isfinite(w2)
    steps = np.abs(np.diff(np.where(ok, w2, np.nan)))
    travelled = np.concatenate([[0.0], np.cumsum(np.where(np.isfinite(steps), steps, 0.0))])
    if count < 3 or ok.sum() < 3 or not travelled[-1] > 0:
        return snapshot_indices(t_all, None, count)
    marks = np.linspace(0.0, travelled[-1], count)[1:-1]
    inner = [int(i) for i in np.searchsorted(travelled, marks * (1 - 1e-12))]
    lowest = int(np.nanargmin(np.where(ok, w2, np.nan)))
    if lowest not in (0, n - 1) and lowest not in inner:  # the closest of the others gives way
        nearest = int(np.argmin([abs(travelled[i] - travelled[lowest]) for i in inner]))
        inner[nearest] = lowest
    chosen = set([0, n - 1, *inner])
    while len(chosen) < count:  # repeated marks: the snapshot farthest in time from the others
        taken = np.array(sorted(chosen))
        gap = np.min(np.abs(t_all[:, None] - t_all[taken][None, :]), axis=1)
        chosen.add(int(np.argmax(gap)))
    return np.array(sorted(chosen))
