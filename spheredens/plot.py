"""Figures and animations of spheredens files (matplotlib is imported on first use).

Every kind of file is drawn: density runs (the circle; the sphere on the Gauss grid of
``sh_spectral`` or the finite-volume ring mesh; ``usa_av`` with its slices xi), particle runs
and comparison files (:func:`plot_run`, ``spheredens plot``), and animated
(:func:`animate_run`, ``spheredens animate``).

Conventions of every figure:

* angles and distances are in radians (theta on the circle, W2 everywhere, slice modes); a
  density is per radian on the circle and per steradian on the sphere; time is the model's
  (dimensionless);
* each quantity has its own labelled axis (W2, max rho and the Gibbs undershoot of the sphere
  are three panels);
* the targets are drawn (:func:`file_targets`): the support of Pi_# rho_0 (the atoms +-u, or
  the great circle S cap E_1 when E_1 is a plane) and the dominant eigenspace of V (the
  terminal phase), when the file's model defines them.
"""

from __future__ import annotations

import os
import textwrap
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from ._lazy import animation, colors, patches
from ._lazy import pyplot as plt
from ._types import Array
from .accessor import file_domain, register_accessor
from .exceptions import ConfigError, SchemaError, SpheredensWarning
from .geometry import CIRCLE, SPHERE, circle_angle
from .io import check_output_location, read_netcdf
from .models import Model, projection_target
from .schema import COMPARE_SCHEMA, PARTICLE_SCHEMA, SCHEMA, validate_particles, validate_schema
from .targets import terminal_subspace

#: frames per second of an animation (``spheredens animate --fps``)
DEFAULT_FPS = 8
#: an animation draws every snapshot, or this many evenly spaced ones when the file has more
MAX_DEFAULT_FRAMES = 240
#: the animation formats: suffix -> matplotlib writer
ANIMATION_WRITERS = {".mp4": "ffmpeg", ".gif": "pillow"}
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
#: the kinds of file drawn, by ``spheredens_schema``
FILE_KINDS = {SCHEMA: "density", PARTICLE_SCHEMA: "particles", COMPARE_SCHEMA: "comparison"}


def file_kind(ds: Any) -> str:
    """``"density"``, ``"particles"``, ``"comparison"`` or ``"other"``: the kind of a spheredens
    Dataset, by its ``spheredens_schema`` (files without one: by their variables)."""
    schema = str(ds.attrs.get("spheredens_schema", ""))
    if schema in FILE_KINDS:
        return FILE_KINDS[schema]
    if schema:
        return "other"
    if "rho" in ds.variables:
        return "density"
    if "position" in ds.variables:
        return "particles"
    if "w2" in ds.variables and "w2_mean" in ds.variables:
        return "comparison"
    return "other"


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
    ds = read_netcdf(path)
    kind = file_kind(ds)
    if kind == "density":
        validate_schema(ds)
    elif kind == "particles":
        validate_particles(ds, name=str(path))
        if "particle_weight" not in ds:
            n = ds.sizes["particle"]
            ds["particle_weight"] = ("particle", np.full(n, 1.0 / n))
    elif kind == "comparison":
        missing = [name for name in ("w2", "w2_mean", "w2_std") if name not in ds]
        if missing or "time" not in ds.coords:
            raise SchemaError(
                f"{str(path)!r} is a comparison file without {', '.join(missing) or 'time'}"
            )
    else:
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


def _source(source: Any) -> tuple[Any, Path | None]:
    """(Dataset, its path or None) of a path or a Dataset."""
    if isinstance(source, (str, os.PathLike)):
        return open_figure_file(source), Path(source)
    name = source.encoding.get("source")  # set by xarray.open_dataset
    return source, (Path(name) if name else None)


# -- targets -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Target:
    """A set a density tends to, drawn on the figures.

    Attributes
    ----------
    role : str
        ``"projection"``: the support of Pi_# rho_0 (the zero-temperature target of MODELS.md
        section 3); ``"terminal"``: the dominant eigenspace of V (the terminal phase);
        ``"both"`` when the two coincide.
    basis : ndarray (k, d)
        Orthonormal rows spanning the subspace E, k < d: the set drawn is S cap E, the two
        points +-b for k = 1, a great circle for k = 2 (sphere).
    label : str
        The legend entry.
    """

    role: str
    basis: Array
    label: str

    @property
    def points(self) -> Array:
        """The points +-b of a line (k = 1), shape (2, d); empty for a plane."""
        if self.basis.shape[0] != 1:
            return np.empty((0, self.basis.shape[1]))
        return np.array([self.basis[0], -self.basis[0]])

    def curve(self, n: int = 361) -> Array:
        """The great circle S cap E of a plane (k = 2), n points (n, d); empty for a line."""
        if self.basis.shape[0] != 2:
            return np.empty((0, self.basis.shape[1]))
        psi = np.linspace(0.0, 2.0 * np.pi, n)
        return np.cos(psi)[:, None] * self.basis[0] + np.sin(psi)[:, None] * self.basis[1]


#: how each target is drawn (on light and dark backgrounds alike)
TARGET_STYLE = {
    "projection": {"color": "#00b7ff", "ls": "--", "marker": "X"},
    "terminal": {"color": "#3cd23c", "ls": ":", "marker": "P"},
    "both": {"color": "#00b7ff", "ls": "-.", "marker": "X"},
}


def _matrix(ds: Any, name: str) -> Array | None:
    if name in ds.variables:
        return np.asarray(ds[name].values, dtype=float)
    if name in ds.attrs:
        return np.asarray(ds.attrs[name], dtype=float)
    return None


def _all_nan(ds: Any, name: str) -> bool:
    return name in ds.variables and not np.any(
        np.isfinite(np.asarray(ds[name].values, dtype=float))
    )


def _same_subspace(a: Array, b: Array) -> bool:
    return a.shape == b.shape and float(np.abs(a.T @ a - b.T @ b).max()) <= 1e-8


def file_targets(ds: Any) -> list[Target]:
    """The targets of the model of a density or particle file, from its Q, K and V.

    * the support of Pi_# rho_0 (MODELS.md section 3) when Assumption 1 holds (B = Q^T K
      invertible, A = V B^T symmetric with a spectral gap, :func:`spheredens.models.projection_target`):
      the atoms +-u (E_1 a line) or the great circle S cap E_1 (E_1 a plane, sphere); not drawn
      when the file's ``w2_projection`` is NaN throughout (the file says why in its ``comment``);
    * the dominant eigenspace of V (:func:`spheredens.targets.terminal_subspace`, the support
      conjectured for the terminal phase) when it is not all of R^d.

    A file without Q, K, V (a converted particle file) has no targets.

    Returns
    -------
    list of Target
        One entry when the two coincide (role ``"both"``), none when neither is defined.
    """
    Q, K, V = (_matrix(ds, name) for name in ("Q", "K", "V"))
    if (
        Q is None
        or K is None
        or V is None
        or Q.ndim != 2
        or Q.shape != K.shape
        or Q.shape != V.shape
    ):
        return []
    model = Model("sa", 1.0, Q, K, V)  # the targets depend on Q, K, V only
    d = model.d
    out: list[Target] = []
    target = projection_target(model)
    if target.holds and target.basis.shape[0] < d and not _all_nan(ds, "w2_projection"):
        k = target.basis.shape[0]
        out.append(
            Target(
                "projection",
                target.basis,
                "support of Pi_# rho_0: "
                + ("the atoms +-u" if k == 1 else "the great circle S cap E_1"),
            )
        )
    terminal = terminal_subspace(model)
    if (
        terminal.basis is not None
        and terminal.basis.shape[0] < d
        and not _all_nan(ds, "w2_terminal")
    ):
        basis = terminal.basis
        if out and _same_subspace(out[0].basis, basis):
            k = basis.shape[0]
            out[0] = Target(
                "both",
                out[0].basis,
                ("the atoms +-u" if k == 1 else "the great circle S cap E_1")
                + " = the top eigenspace of V",
            )
        else:
            out.append(
                Target(
                    "terminal",
                    basis,
                    "top eigenspace of V: "
                    + ("+-e_1" if basis.shape[0] == 1 else "a great circle"),
                )
            )
    return out


def _target_handles(targets: Sequence[Target]) -> list[Any]:
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


def _targets_legend(fig: Any, targets: Sequence[Target]) -> None:
    if targets:
        fig.legend(handles=_target_handles(targets), loc="upper right", fontsize=7, framealpha=0.9)


def _circle_target_lines(ax: Any, targets: Sequence[Target], *, vertical: bool) -> None:
    """The target angles on an axis of theta: vertical (theta on x) or horizontal lines."""
    for target in targets:
        style = TARGET_STYLE[target.role]
        for angle in circle_angle(target.points):
            draw = ax.axvline if vertical else ax.axhline
            draw(angle, color=style["color"], ls=style["ls"], lw=1.6, zorder=5)


def _theta_axis(ax: Any, which: str = "x") -> None:
    """An axis of theta in radians on [0, 2 pi], with ticks at multiples of pi / 2."""
    ticks = np.arange(5) * np.pi / 2
    labels = ["0", "pi/2", "pi", "3pi/2", "2pi"]
    if which == "x":
        ax.set_xlim(0.0, 2 * np.pi)
        ax.set_xticks(ticks, labels)
        ax.set_xlabel(THETA_LABEL)
    else:
        ax.set_ylim(0.0, 2 * np.pi)
        ax.set_yticks(ticks, labels)
        ax.set_ylabel(THETA_LABEL)


# -- curves against time -------------------------------------------------------------------------
def _on_circle(ds: Any) -> bool:
    """Whether the file's domain is drawn as the circle: a point there is one angle (the
    domain's ``points_of_angles``); the sphere is drawn on its views."""
    return file_domain(ds).points_of_angles is not None


def _finite(values: Any) -> bool:
    return bool(np.any(np.isfinite(np.asarray(values, dtype=float))))


def _w2_axes(ax: Any, ds: Any) -> bool:
    """W2 to Pi_# rho_0 and to the top eigenspace of V against t (radians, log scale); False
    when the file has neither."""
    t = ds["time"].values
    drawn = False
    for name, label, style in (
        ("w2_projection", "W2(rho_t, Pi_# rho_0)", {"color": "C3"}),
        ("w2_terminal", "W2 to the top eigenspace of V", {"color": "C0", "ls": "--"}),
    ):
        if name in ds and _finite(ds[name].values):
            ax.semilogy(
                t, np.where(ds[name].values > 0, ds[name].values, np.nan), label=label, **style
            )
            drawn = True
    if drawn:
        ax.set_ylabel(W2_LABEL)
        ax.legend(fontsize=7)
    ax.set_xlabel("t")
    ax.grid(True, which="both", alpha=0.3)
    return drawn


def compare_w2_axes(ax: Any, cmp: Any) -> None:
    """W2 between a density and its particle runs against t (radians, log scale): every run,
    the ensemble band (mean +- std over the runs, and min to max), and the density's own
    resolution."""
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
    if "density_resolution" in cmp and _finite(cmp["density_resolution"].values):
        ax.semilogy(t, cmp["density_resolution"].values, ":", color="k", label="density resolution")
    ax.set_xlabel("t")
    ax.set_ylabel("W2 density vs particles (radians)")
    ax.legend(fontsize=7)
    ax.grid(True, which="both", alpha=0.3)


def _other_curve(ax: Any, ds: Any, top: Array, top_label: str) -> None:
    """The curve of a run without W2 to a target: for usa_av the W2 of the marginal to the
    nearest Dirac mass (radians, collapse), else max rho."""
    t = ds["time"].values
    if "marginal_w2_dirac" in ds and _finite(ds["marginal_w2_dirac"].values):
        ax.semilogy(t, np.maximum(ds["marginal_w2_dirac"].values, 1e-6), "-", color="C3")
        ax.set_ylabel("W2(marginal, nearest Dirac) (radians)", fontsize=8)
        ax.set_title("collapse of the marginal", fontsize=9)
    else:
        ax.semilogy(t, top, "-", color="C2")
        ax.set_ylabel(top_label)
    ax.set_xlabel("t")
    ax.grid(True, which="both", alpha=0.3)


def _cursor(ax: Any, t0: float) -> Callable[[float], None]:
    line = ax.axvline(t0, color="k", lw=0.9, alpha=0.8)
    return lambda t: line.set_xdata([t, t])


# -- the sphere: views ---------------------------------------------------------------------------
#: the views of the sphere in every figure: two orthographic views and a Mollweide map
SPHERE_VIEWS = (
    ("ortho", (0.0, 0.0, 1.0), "from +z"),
    ("ortho", (1.0, 0.0, 0.0), "from +x"),
    ("mollweide", None, "Mollweide"),
)


def _edges(centres: np.ndarray, lo: float, hi: float) -> np.ndarray:
    mid = 0.5 * (centres[1:] + centres[:-1])
    return np.concatenate([[lo], mid, [hi]])


def _view_frame(view: Any) -> tuple[Array, Array, Array]:
    """(view, right, up): the direction seen from and the screen axes of an orthographic view."""
    view = np.asarray(view, float) / np.linalg.norm(view)
    up = np.array([0.0, 0.0, 1.0]) if abs(view[2]) < 0.9 else np.array([1.0, 0.0, 0.0])
    right = np.cross(up, view)
    right /= np.linalg.norm(right)
    return view, right, np.cross(view, right)


def _ortho_frame(ax: Any) -> None:
    ax.add_patch(patches.Circle((0, 0), 1.0, fill=False, lw=0.6))
    ax.set_xlim(-1.02, 1.02)
    ax.set_ylim(-1.02, 1.02)
    ax.set_aspect("equal")
    ax.axis("off")


def _mollweide_frame(ax: Any) -> None:
    ax.set_xticklabels([])
    ax.set_yticklabels([])
    ax.grid(True, alpha=0.3)


def _lon_lat(x: Array) -> tuple[Array, Array]:
    """Longitude in [-pi, pi) and latitude (radians) of unit vectors (..., 3)."""
    return np.arctan2(x[..., 1], x[..., 0]), np.arcsin(np.clip(x[..., 2], -1.0, 1.0))


def _sphere_view_axes(fig: Any, cells: Sequence[Any]) -> list[Any]:
    """The axes of :data:`SPHERE_VIEWS` in three gridspec cells."""
    axes = []
    for cell, (kind, _, _) in zip(cells, SPHERE_VIEWS):
        ax = fig.add_subplot(cell, projection="mollweide" if kind == "mollweide" else None)
        (_mollweide_frame if kind == "mollweide" else _ortho_frame)(ax)
        axes.append(ax)
    return axes


def _sphere_targets(
    axes: Sequence[Any], targets: Sequence[Target], views: Sequence[Any] = SPHERE_VIEWS
) -> None:
    """The targets on the views: points as markers (front side only), great circles as lines."""
    for ax, (kind, view, _) in zip(axes, views):
        for target in targets:
            style = TARGET_STYLE[target.role]
            pts, curve = target.points, target.curve()
            if kind == "ortho":
                v, right, up = _view_frame(view)
                if len(pts):
                    front = pts @ v > 0
                    ax.plot(
                        pts[front] @ right,
                        pts[front] @ up,
                        ls="none",
                        marker=style["marker"],
                        ms=9,
                        color=style["color"],
                        markeredgecolor="k",
                        zorder=6,
                    )
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
                    lon, lat = _lon_lat(pts)
                    ax.plot(
                        lon,
                        lat,
                        ls="none",
                        marker=style["marker"],
                        ms=9,
                        color=style["color"],
                        markeredgecolor="k",
                        zorder=6,
                    )
                if len(curve):
                    lon, lat = _lon_lat(curve)
                    jump = np.concatenate([[False], np.abs(np.diff(lon)) > np.pi])
                    lon, lat = np.where(jump, np.nan, lon), np.where(jump, np.nan, lat)
                    ax.plot(lon, lat, ls=style["ls"], color=style["color"], lw=1.5, zorder=6)


class _SphereDensity:
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
        register_accessor()
        # with slices the marginal; on the finite-volume mesh its cells on a regular grid
        lat, lon, rho_all = (
            view if view is not None else ds.sd.grid().regular_view(ds.sd.marginal())
        )
        self.order = np.argsort(lat)
        self.rho = np.asarray(rho_all, dtype=float)[:, self.order]
        lat_e = _edges(lat[self.order], -90.0, 90.0)
        dlon = 360.0 / lon.size
        lon_e = np.concatenate([lon - dlon / 2, [lon[-1] + dlon / 2]])
        centred = np.where(lon >= 180.0, lon - 360.0, lon)  # Mollweide wants [-180, 180)
        self.moll_order = np.argsort(centred)
        moll_lon_e = _edges(centred[self.moll_order], -180.0, 180.0)
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
                v, right, up = _view_frame(view)
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


def _particle_colours(ds: Any) -> Any:
    """RGBA colours of the particles: by slice for labelled (usa_av) files, else one colour."""
    n = ds.sizes["particle"]
    if "slice" in ds:
        slices = np.asarray(ds["slice"].values)
        count = max(int(slices.max()) + 1, 2)
        return plt.get_cmap("viridis")(slices / (count - 1))
    return np.tile(colors.to_rgba("C1"), (n, 1))


def _drawn_particles(n: int) -> Array:
    """Indices of the particles drawn: all, or :data:`MAX_DRAWN_PARTICLES` evenly spaced."""
    return np.unique(np.linspace(0, n - 1, min(n, MAX_DRAWN_PARTICLES)).round().astype(int))


class _SphereParticles:
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
        keep = _drawn_particles(run.sizes["particle"])
        self.t = np.asarray(run["time"].values, dtype=float)
        self.x = np.asarray(run["position"].values, dtype=float)[:, keep]
        self.rgba = _particle_colours(run)[keep]
        self.layers = []
        for ax, (kind, view, _) in zip(axes, views):
            dots = ax.scatter([], [], s=size, lw=0, zorder=4)
            self.layers.append((dots, kind, None if view is None else _view_frame(view)))

    def draw(self, t: float) -> None:
        x = self.x[int(np.argmin(np.abs(self.t - t)))]
        for dots, kind, frame in self.layers:
            if kind == "ortho":
                v, right, up = frame
                front = x @ v > 0
                dots.set_offsets(np.column_stack([x[front] @ right, x[front] @ up]))
                dots.set_facecolor(self.rgba[front])
            else:
                lon, lat = _lon_lat(x)
                dots.set_offsets(np.column_stack([lon, lat]))
                dots.set_facecolor(self.rgba)


# -- the circle: layers --------------------------------------------------------------------------
def _log_floor(rho: Array) -> tuple[float, float]:
    top = float(np.nanmax(rho))
    positive = rho[rho > 0]
    return max(top * 1e-6, float(positive.min()) if positive.size else top * 1e-6), top


class _CircleDensity:
    """rho(theta) of a circle file as a line (log scale with ``log``), with the slices rho_k of
    usa_av as thin lines coloured by xi; :meth:`draw` puts the snapshot nearest to time ``t``."""

    def __init__(
        self, ds: Any, ax: Any, *, log: bool = True, label: str = "rho", slices: bool = True
    ) -> None:
        register_accessor()
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
            floor, top = _log_floor(both)
            ax.set_yscale("log")
            ax.set_ylim(floor, top * 1.5)
        else:
            ax.set_ylim(0.0, 1.05 * float(np.nanmax(both)))
        _theta_axis(ax, "x")
        ax.set_ylabel("rho (per radian)")
        ax.grid(True, which="both", alpha=0.3)

    def draw(self, t: float) -> None:
        i = int(np.argmin(np.abs(self.t - t)))
        clip = (lambda v: np.maximum(v, 1e-300)) if self.log else (lambda v: v)
        self.line.set_ydata(clip(self.rho[i]))
        for k, line in enumerate(self.slice_lines):
            line.set_ydata(clip(self.slices[i, k]))


class _CircleParticles:
    """Particles of a circle file: dots on the unit circle (``ring`` axes) and/or the
    histogram of their angles per radian (``hist`` axes); :meth:`draw` puts the snapshot
    nearest to time ``t``."""

    def __init__(
        self,
        run: Any,
        *,
        ring: Any = None,
        hist: Any = None,
        targets: Sequence[Target] = (),
        ymax: float | None = None,
    ) -> None:
        self.t = np.asarray(run["time"].values, dtype=float)
        x = np.asarray(run["position"].values, dtype=float)
        self.angle = circle_angle(x)
        self.weight = np.asarray(run["particle_weight"].values, dtype=float)
        n = x.shape[1]
        self.keep = _drawn_particles(n)
        self.rgba = _particle_colours(run)[self.keep]
        self.bins = np.linspace(0.0, 2 * np.pi, max(16, min(90, int(np.sqrt(n)) * 2)) + 1)
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
                color="C1",
                fill=True,
                alpha=0.45,
                label="particles (histogram)",
            )
            hist.set_ylim(0.0, 1.05 * max(float(np.max(heights)), ymax or 0.0))
            _theta_axis(hist, "x")
            hist.set_ylabel("density (per radian)")

    def _histogram(self, i: int) -> Array:
        heights, _ = np.histogram(self.angle[i], bins=self.bins, weights=self.weight)
        return heights / np.diff(self.bins) / max(self.weight.sum(), 1e-300)

    def draw(self, t: float) -> None:
        i = int(np.argmin(np.abs(self.t - t)))
        if self.ring is not None:
            a = self.angle[i, self.keep]
            self.ring.set_offsets(np.column_stack([np.cos(a), np.sin(a)]))
            self.ring.set_facecolor(self.rgba)
        if self.hist is not None:
            self.hist.set_data(self._histogram(i))


# -- figures of density runs -----------------------------------------------------------------------
def _run_title(ds: Any, where: str) -> str:
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
    return f"{ds.attrs.get('model')} on the {where}, beta = {ds.attrs.get('beta')}, {scheme} {size}".strip()


def plot_circle_run(ds: Any, path: str | Path) -> Path:
    """Space-time image of rho on the circle (log colour scale, theta in radians) with the
    targets (:func:`file_targets`), and W2 to Pi_# rho_0 and to the top eigenspace of V beside it.

    Parameters
    ----------
    ds : xarray.Dataset
        A circle run (schema spheredens-1); with slices (usa_av) the marginal is drawn.
    path : path
        PNG file to write.
    """
    register_accessor()
    rho = ds.sd.marginal()  # with slices: the marginal
    t = ds["time"].values
    theta = ds["theta"].values
    targets = file_targets(ds)
    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(11, 4.2), gridspec_kw={"width_ratios": [1.6, 1]})
    floor, top = _log_floor(rho)
    mesh = ax0.pcolormesh(
        t,
        theta,
        np.clip(rho, floor, None).T,
        shading="nearest",
        norm=colors.LogNorm(vmin=floor, vmax=top),
        cmap="viridis",
    )
    fig.colorbar(mesh, ax=ax0, label="rho (per radian)")
    _circle_target_lines(ax0, targets, vertical=False)
    if targets:
        ax0.legend(handles=_target_handles(targets), fontsize=7, loc="lower left", framealpha=0.85)
    ax0.set_xlabel("t")
    _theta_axis(ax0, "y")
    ax0.set_title(_run_title(ds, "circle"), fontsize=9)
    if _w2_axes(ax1, ds):
        ax1.set_title("distances to the targets", fontsize=9)
    else:
        ax1.plot(t, ds["min_rho"].values, "-", color="C0")
        ax1.set_ylabel("min rho (per radian)")
        ax1.set_title(ds["w2_projection"].attrs.get("comment", "")[:90], fontsize=8)
    return save_figure(fig, path, dpi=110)


def _snapshot_indices(t_all: Array, times: Any, count: int) -> Array:
    if times is None:
        return np.unique(np.linspace(0, t_all.size - 1, min(count, t_all.size)).round().astype(int))
    return np.array([int(np.argmin(np.abs(t_all - t))) for t in np.atleast_1d(times)])


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
        Snapshot times to draw (nearest stored); default up to ``max_rows`` evenly spaced ones.
    """
    t_all = ds["time"].values
    idx = _snapshot_indices(t_all, times, max_rows)
    targets = file_targets(ds)
    rows = len(idx)
    fig = plt.figure(figsize=(11, 3.0 * rows + 2.8))
    grid = fig.add_gridspec(
        rows + 1, 3, height_ratios=[3.0] * rows + [2.3], width_ratios=[1, 1, 1.9]
    )
    density = None
    register_accessor()
    view = ds.sd.grid().regular_view(ds.sd.marginal())  # computed once for every row
    for r, i in enumerate(idx):
        axes = _sphere_view_axes(fig, [grid[r, 0], grid[r, 1], grid[r, 2]])
        density = _SphereDensity(ds, axes, view=view)
        density.draw(i)
        _sphere_targets(axes, targets)
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
    if not _w2_axes(ax, ds):
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
    ax.set_title("distances to the targets", fontsize=8)
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
    fig.suptitle(_run_title(ds, "sphere"), fontsize=10)
    _targets_legend(fig, targets)
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


# -- figures of particle runs and comparison files --------------------------------------------------
def _particles_title(run: Any) -> str:
    n = run.sizes["particle"]
    model = run.attrs.get("model")
    head = f"{n} particles" + (
        f", {model}, beta = {run.attrs.get('beta')}" if model else " (no model recorded)"
    )
    extra = [f"{key} {run.attrs[key]}" for key in ("initialization", "seed") if key in run.attrs]
    return head + (f" ({', '.join(extra)})" if extra else "") + f" on the {run.attrs.get('domain')}"


def _particle_w2_axes(ax: Any, run: Any) -> bool:
    if "w2_projection" not in run or not _finite(run["w2_projection"].values):
        return False
    w2 = np.asarray(run["w2_projection"].values, dtype=float)
    ax.semilogy(
        run["time"].values,
        np.where(w2 > 0, w2, np.nan),
        "-",
        color="C3",
        label="W2(particles, Pi_# of their start)",
    )
    ax.set_xlabel("t")
    ax.set_ylabel(W2_LABEL)
    ax.legend(fontsize=7)
    ax.grid(True, which="both", alpha=0.3)
    return True


def plot_particles(run: Any, path: str | Path, *, times: Any = None, max_panels: int = 4) -> Path:
    """A particle run: the points over time and at a few snapshots, with the targets.

    Circle: the angles of the particles against t (a point per particle and snapshot), with
    their W2 to Pi_# of their start beside it; below, one panel per snapshot: the particles on
    the circle and the histogram of their angles (per radian). Sphere: per snapshot two
    orthographic views and a Mollweide map of the points; below, their W2 to Pi_# of their
    start. Labelled (usa_av) particles are coloured by slice.

    Parameters
    ----------
    run : xarray.Dataset
        A particle file (schema spheredens-particles-1, :func:`spheredens.io.open_particles`).
    path : path
        PNG file to write.
    times : sequence of float, optional
        Snapshot times to draw (nearest stored); default up to ``max_panels`` evenly spaced.
    """
    t_all = np.asarray(run["time"].values, dtype=float)
    idx = _snapshot_indices(t_all, times, max_panels)
    targets = file_targets(run)
    if _on_circle(run):
        cols = len(idx)
        fig = plt.figure(figsize=(max(11, 3.2 * cols), 7.6))
        grid = fig.add_gridspec(3, cols, height_ratios=[2.4, 1.6, 1.5])
        top = grid[0, :].subgridspec(1, 2, width_ratios=[1.6, 1])
        ax = fig.add_subplot(top[0, 0])
        keep = _drawn_particles(run.sizes["particle"])[: max(1, 200_000 // max(t_all.size, 1))]
        angles = circle_angle(np.asarray(run["position"].values, dtype=float)[:, keep])
        rgba = _particle_colours(run)[keep]
        ax.scatter(
            np.repeat(t_all, keep.size),
            angles.ravel(),
            s=1.5,
            lw=0,
            c=np.tile(rgba, (t_all.size, 1)),
            rasterized=True,
        )
        _circle_target_lines(ax, targets, vertical=False)
        if targets:
            ax.legend(
                handles=_target_handles(targets), fontsize=7, loc="lower left", framealpha=0.85
            )
        ax.set_xlabel("t")
        _theta_axis(ax, "y")
        ax.set_title(_particles_title(run), fontsize=9)
        ax = fig.add_subplot(top[0, 1])
        if not _particle_w2_axes(ax, run):
            ax.axis("off")
            ax.text(
                0.5,
                0.5,
                "no W2 to a target recorded",
                ha="center",
                va="center",
                transform=ax.transAxes,
            )
        for c, i in enumerate(idx):
            ring, hist = fig.add_subplot(grid[1, c]), fig.add_subplot(grid[2, c])
            layer = _CircleParticles(run, ring=ring, hist=hist, targets=targets)
            layer.draw(t_all[i])
            _circle_target_lines(hist, targets, vertical=True)
            ring.set_title(f"t = {t_all[i]:g}", fontsize=9)
        return save_figure(fig, path, dpi=100)
    rows = len(idx)
    fig = plt.figure(figsize=(11, 3.0 * rows + 2.6))
    grid = fig.add_gridspec(
        rows + 1, 3, height_ratios=[3.0] * rows + [2.2], width_ratios=[1, 1, 1.9]
    )
    for r, i in enumerate(idx):
        axes = _sphere_view_axes(fig, [grid[r, 0], grid[r, 1], grid[r, 2]])
        _SphereParticles(run, axes).draw(t_all[i])
        _sphere_targets(axes, targets)
        for ax, (_, _, label) in zip(axes, SPHERE_VIEWS):
            ax.set_title(f"t = {t_all[i]:g}, {label}", fontsize=8)
    ax = fig.add_subplot(grid[rows, :])
    if not _particle_w2_axes(ax, run):
        ax.axis("off")
        ax.text(
            0.5, 0.5, "no W2 to a target recorded", ha="center", va="center", transform=ax.transAxes
        )
    fig.suptitle(_particles_title(run), fontsize=10)
    _targets_legend(fig, targets)
    return save_figure(fig, path)


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
    if "particle_w2_projection" in cmp and _finite(cmp["particle_w2_projection"].values):
        panels.append("departure")
    if "w2_slice" in cmp and _finite(cmp["w2_slice"].values):
        panels.append("slices")
    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels) + 1, 4.2), squeeze=False)
    axes = axes[0]
    compare_w2_axes(axes[0], cmp)
    axes[0].set_title(f"density vs {cmp.sizes['run']} particle run(s)", fontsize=9)
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


def plot_comparison_snapshots(
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
    register_accessor()
    t = cmp["time"].values
    idx = _snapshot_indices(t, times, 3)
    targets = file_targets(density)
    mean = np.asarray(cmp["w2_mean"].values, dtype=float)
    fig = plt.figure(figsize=(4.0 * (len(idx) + 1.3), 3.9))
    compare_w2_axes(fig.add_subplot(1, len(idx) + 1, 1), cmp)
    circle = _on_circle(density)
    mollweide = (SPHERE_VIEWS[2],)
    view = None if circle else density.sd.grid().regular_view(density.sd.marginal())
    for c, i in enumerate(idx):
        ti = t[i]
        if circle:
            ax = fig.add_subplot(1, len(idx) + 1, c + 2)
            layer = _CircleDensity(
                density,
                ax,
                log=False,
                slices=False,
                label="rho (marginal)" if "xi" in density["rho"].dims else "rho",
            )
            hist = _CircleParticles(particles, hist=ax, ymax=ax.get_ylim()[1])
            layer.draw(ti)
            hist.draw(ti)
            ax.set_ylabel("density (per radian)")
            _circle_target_lines(ax, targets, vertical=True)
            ax.legend(
                handles=ax.get_legend_handles_labels()[0]
                + (_target_handles(targets) if c == 0 else []),
                fontsize=7,
            )
        else:
            ax = fig.add_subplot(1, len(idx) + 1, c + 2, projection="mollweide")
            _mollweide_frame(ax)
            layer = _SphereDensity(density, [ax], views=mollweide, view=view)
            layer.draw(int(np.argmin(np.abs(density["time"].values - ti))))
            _SphereParticles(particles, [ax], size=3.0, views=mollweide).draw(ti)
            _sphere_targets([ax], targets, views=mollweide)
        ax.set_title(f"t = {ti:g}, W2 = {float(mean[i]):.3g} (radians)", fontsize=9)
    _targets_legend(fig, targets if not circle else ())
    return save_figure(fig, path)


#: the figure of a run on each domain: ``(ds, path, **options) -> path`` (the circle's takes no
#: options)
CIRCLE.provides("figure")(lambda ds, path, **options: plot_circle_run(ds, path))
SPHERE.provides("figure")(plot_sphere_run)


def plot_run(ds: Any, path: str | Path, *, mkdir: bool = False, **options: Any) -> Path:
    """Draw the figure of a run, particle or comparison file: ``spheredens plot FILE``.

    With the targets of the model (the atoms +-u or the great circle S cap E_1 of Pi_# rho_0,
    the top eigenspace of V) and angles in radians, by the kind of file:

    * a density run: drawn by its domain's part ``"figure"`` (circle: :func:`plot_circle_run`,
      rho as a space-time image (log colour scale) beside W2 to the targets; sphere:
      :func:`plot_sphere_run` with ``options``, two orthographic views and a Mollweide map per
      snapshot, with W2 (radians), max rho (per steradian) and -min rho / max rho below, each on
      its own axis); for usa_av also ``<name>_slices.png`` (:func:`plot_slices`: slice modes
      over xi, energy, collapse);
    * a particle run: :func:`plot_particles`, the points over time and at a few snapshots;
    * a comparison file: :func:`plot_compare_file`, W2 against time with the ensemble band
      (mean +- std and min to max over the runs).

    Parameters
    ----------
    ds : xarray.Dataset
        A run (:func:`spheredens.run`, :func:`spheredens.open_run`), a particle run
        (:func:`spheredens.run_particles`, :func:`spheredens.open_particles`) or a comparison
        (:func:`spheredens.compare`).
    path : path
        The PNG file to write: it must end in ``.png`` and its folder exist and be writable, or
        ``mkdir=True`` creates it; this is checked before drawing
        (:func:`~spheredens.io.check_output_location`).
    mkdir : bool
        Create the missing folder of ``path``.
    **options :
        ``times`` (sequence of float, optional): sphere runs and particle runs, the snapshot
        times to draw (the nearest stored; default 4 evenly spaced).

    Returns
    -------
    pathlib.Path
        The file written.

    Raises
    ------
    spheredens.ConfigError
        ``path`` cannot be written (one line).
    spheredens.geometry.NotProvided
        The file's domain has no figure (one line: nothing provides ``"figure"`` there).

    Example
    -------
    With the file of the example of :func:`spheredens.run`:

    >>> import spheredens as sd
    >>> png = sd.plot_run(sd.open_run("example_c.nc"), "example_c.png")
    """
    path = check_output_location(path, suffix=".png", mkdir=mkdir)
    kind = file_kind(ds)
    if kind == "particles":
        file_domain(ds).part("figure", "a figure of a run")  # a domain spheredens draws
        return plot_particles(ds, path, times=options.get("times"))
    if kind == "comparison":
        return plot_compare_file(ds, path)
    figure = file_domain(ds).part("figure", "a figure of a run")
    if "slice_mode" in ds:
        path = Path(path)
        plot_slices(ds, slices_figure_path(path))
    return figure(ds, path, **options)


# -- animations ----------------------------------------------------------------------------------
def ffmpeg_available() -> bool:
    """Whether matplotlib finds ffmpeg (MP4 animations); GIF through Pillow otherwise."""
    return bool(animation.writers.is_available("ffmpeg"))


def animation_output_path(source: str | Path | None, output: str | Path | None = None) -> Path:
    """Where :func:`animate_run` writes: ``output``, else the file ``source`` with suffix
    ``.mp4`` where ffmpeg exists and ``.gif`` otherwise.

    Raises
    ------
    ConfigError
        Neither is given (a Dataset not read from a file), the suffix is neither ``.mp4`` nor
        ``.gif``, or ``.mp4`` is asked for and ffmpeg is missing (one line).
    """
    if output is None:
        if source is None:
            raise ConfigError(
                "output",
                "the Dataset was not read from a file: give the animation file "
                "to write (output='run.gif' or 'run.mp4')",
            )
        return Path(source).with_suffix(".mp4" if ffmpeg_available() else ".gif")
    output = Path(output)
    if output.suffix not in ANIMATION_WRITERS:
        raise ConfigError(
            "--output", f"{str(output)!r} must end in '.mp4' (ffmpeg) or '.gif' (Pillow)"
        )
    if output.suffix == ".mp4" and not ffmpeg_available():
        raise ConfigError(
            "--output",
            f"cannot write {str(output)!r}: ffmpeg is not installed (matplotlib "
            "finds no ffmpeg on the PATH); install it or write a '.gif' instead",
        )
    return output


def frame_indices(n_snapshots: int, frames: int | None = None) -> Array:
    """The snapshots an animation shows: ``frames`` evenly spaced distinct ones, first and
    last included (never interpolated in time); default every snapshot, at most
    :data:`MAX_DEFAULT_FRAMES`. More frames than snapshots draw every snapshot once, with a
    :class:`SpheredensWarning`.

    Raises
    ------
    ConfigError
        ``frames`` < 1.
    """
    if frames is not None and (int(frames) != frames or frames < 1):
        raise ConfigError("--frames", f"must be an integer >= 1, got {frames!r}")
    if frames is None:
        count = min(n_snapshots, MAX_DEFAULT_FRAMES)
    else:
        count = min(int(frames), n_snapshots)
        if frames > n_snapshots:
            warnings.warn(
                f"the file has {n_snapshots} snapshot(s): drawing {n_snapshots} frame(s), not "
                f"{frames} (frames are snapshots, never interpolated in time)",
                SpheredensWarning,
                stacklevel=3,
            )
    return np.unique(np.floor(np.linspace(0, n_snapshots - 1, count) + 0.5).astype(int))


def _frame_title(kind: str, t: float, i: int, n: int) -> str:
    return f"{kind}: t = {t:.6g} (snapshot {i + 1} of {n})"


def _density_animation(ds: Any) -> tuple[Any, Callable[[float], None], Any]:
    """(figure, draw(t), title text) of a density run."""
    targets = file_targets(ds)
    t = np.asarray(ds["time"].values, dtype=float)
    if _on_circle(ds):
        fig, (ax0, ax1) = plt.subplots(
            1, 2, figsize=(11, 4.2), gridspec_kw={"width_ratios": [1.5, 1]}
        )
        density = _CircleDensity(ds, ax0)
        _circle_target_lines(ax0, targets, vertical=True)
        ax0.legend(
            handles=ax0.get_legend_handles_labels()[0] + _target_handles(targets),
            fontsize=7,
            loc="lower left",
            framealpha=0.85,
        )
        drawers = [density.draw]
        if _w2_axes(ax1, ds):
            ax1.set_title("distances to the targets", fontsize=9)
        else:
            _other_curve(ax1, ds, density.rho.max(axis=1), "max rho (per radian)")
        drawers.append(_cursor(ax1, t[0]))
        title = fig.suptitle(_run_title(ds, "circle"), fontsize=10)
    else:
        fig = plt.figure(figsize=(11, 5.8))
        grid = fig.add_gridspec(2, 3, height_ratios=[3.0, 1.6], width_ratios=[1, 1, 1.9])
        axes = _sphere_view_axes(fig, [grid[0, 0], grid[0, 1], grid[0, 2]])
        density = _SphereDensity(ds, axes)
        _sphere_targets(axes, targets)
        for ax, (_, _, label) in zip(axes, SPHERE_VIEWS):
            ax.set_title(label, fontsize=8)
        fig.colorbar(density.mappable, ax=axes[2], shrink=0.8, label="rho (per steradian)")
        drawers: list[Callable[[float], None]] = [
            lambda s: density.draw(int(np.argmin(np.abs(t - s))))
        ]
        if "slice_mode" in ds:  # usa_av: where each slice concentrates
            modes = np.asarray(ds["slice_mode"].values, dtype=float)
            xi = np.asarray(ds["xi"].values, dtype=float)
            rgba = plt.get_cmap("viridis")(
                (xi - xi.min()) / max(float(xi.max() - xi.min()), 1e-300)
            )
            layers = []
            for ax, (kind, view, _) in zip(axes, SPHERE_VIEWS):
                dots = ax.scatter([], [], s=30, marker="o", edgecolors="w", lw=0.6, zorder=7)
                layers.append((dots, kind, None if view is None else _view_frame(view)))
            entry = plt.Line2D(
                [],
                [],
                ls="none",
                marker="o",
                color="C4",
                markeredgecolor="w",
                label="slice modes (colour: xi)",
            )
            axes[2].legend(handles=[entry], fontsize=7, loc="lower right")

            def draw_modes(s: float) -> None:
                m = modes[int(np.argmin(np.abs(t - s)))]
                for dots, kind, frame in layers:
                    if kind == "ortho":
                        v, right, up = frame
                        front = m @ v > 0
                        dots.set_offsets(np.column_stack([m[front] @ right, m[front] @ up]))
                        dots.set_facecolor(rgba[front])
                    else:
                        dots.set_offsets(np.column_stack(_lon_lat(m)))
                        dots.set_facecolor(rgba)

            drawers.append(draw_modes)
        ax = fig.add_subplot(grid[1, :])
        if not _w2_axes(ax, ds):
            _other_curve(
                ax, ds, density.rho.reshape(t.size, -1).max(axis=1), "max rho (per steradian)"
            )
        drawers.append(_cursor(ax, t[0]))
        title = fig.suptitle(_run_title(ds, "sphere"), fontsize=10)
        _targets_legend(fig, targets)
    return fig, lambda s: [draw(s) for draw in drawers], title


def _particle_animation(run: Any) -> tuple[Any, Callable[[float], None], Any]:
    """(figure, draw(t), title text) of a particle run."""
    targets = file_targets(run)
    t = np.asarray(run["time"].values, dtype=float)
    has_w2 = "w2_projection" in run and _finite(run["w2_projection"].values)
    if _on_circle(run):
        fig, axes = plt.subplots(1, 3 if has_w2 else 2, figsize=(13 if has_w2 else 9, 4.2))
        layer = _CircleParticles(run, ring=axes[0], hist=axes[1], targets=targets)
        _circle_target_lines(axes[1], targets, vertical=True)
        axes[1].legend(handles=_target_handles(targets), fontsize=7, loc="upper right")
        drawers = [layer.draw]
        if has_w2:
            _particle_w2_axes(axes[2], run)
            drawers.append(_cursor(axes[2], t[0]))
    else:
        fig = plt.figure(figsize=(11, 5.8 if has_w2 else 4.2))
        grid = fig.add_gridspec(
            2 if has_w2 else 1,
            3,
            height_ratios=[3.0, 1.6] if has_w2 else [1.0],
            width_ratios=[1, 1, 1.9],
        )
        axes = _sphere_view_axes(fig, [grid[0, 0], grid[0, 1], grid[0, 2]])
        layer = _SphereParticles(run, axes, size=6.0)
        _sphere_targets(axes, targets)
        for ax, (_, _, label) in zip(axes, SPHERE_VIEWS):
            ax.set_title(label, fontsize=8)
        drawers = [layer.draw]
        if has_w2:
            ax = fig.add_subplot(grid[1, :])
            _particle_w2_axes(ax, run)
            drawers.append(_cursor(ax, t[0]))
        _targets_legend(fig, targets)
    title = fig.suptitle(_particles_title(run), fontsize=10)
    return fig, lambda s: [draw(s) for draw in drawers], title


def _compare_inputs(cmp: Any, base: Path | None) -> tuple[Any, Any]:
    """The density and first particle run a comparison file names, when they can be read
    (as written, or beside the comparison file); (None, None) otherwise."""

    def find(name: str) -> Path | None:
        for candidate in (
            Path(name),
            *((base.parent / Path(name).name,) if base is not None else ()),
        ):
            if name and candidate.is_file():
                return candidate
        return None

    density_path = find(str(cmp.attrs.get("density_file", "")))
    first = str(cmp.attrs.get("particle_files", "")).split("\n")[0]
    particle_path = find(first)
    if density_path is None or particle_path is None:
        return None, None
    try:
        density, run = open_figure_file(density_path), open_figure_file(particle_path)
    except SchemaError:
        return None, None
    if file_kind(density) != "density" or file_kind(run) != "particles":
        return None, None
    return density, run


def _compare_animation(cmp: Any, base: Path | None) -> tuple[Any, Callable[[float], None], Any]:
    """(figure, draw(t), title text) of a comparison file: the W2 curves with the time, and
    the density with the particles of the first run at that time when both files are found."""
    t = np.asarray(cmp["time"].values, dtype=float)
    density, run = _compare_inputs(cmp, base)
    drawers: list[Callable[[float], None]] = []
    if density is None:
        fig, ax = plt.subplots(1, 1, figsize=(7, 4.2))
        compare_w2_axes(ax, cmp)
        ax.set_title("(the density and particle files it names were not found)", fontsize=8)
        drawers.append(_cursor(ax, t[0]))
    elif _on_circle(density):
        targets = file_targets(density)
        fig, (ax0, ax1) = plt.subplots(
            1, 2, figsize=(11, 4.2), gridspec_kw={"width_ratios": [1, 1.4]}
        )
        compare_w2_axes(ax0, cmp)
        drawers.append(_cursor(ax0, t[0]))
        layer = _CircleDensity(
            density,
            ax1,
            log=False,
            slices=False,
            label="rho (marginal)" if "xi" in density["rho"].dims else "rho",
        )
        particles = _CircleParticles(run, hist=ax1, ymax=ax1.get_ylim()[1])
        ax1.set_ylabel("density (per radian)")
        _circle_target_lines(ax1, targets, vertical=True)
        ax1.legend(
            handles=ax1.get_legend_handles_labels()[0] + _target_handles(targets), fontsize=7
        )
        drawers += [layer.draw, particles.draw]
    else:
        targets = file_targets(density)
        fig = plt.figure(figsize=(11, 5.8))
        grid = fig.add_gridspec(2, 3, height_ratios=[3.0, 1.6], width_ratios=[1, 1, 1.9])
        axes = _sphere_view_axes(fig, [grid[0, 0], grid[0, 1], grid[0, 2]])
        layer = _SphereDensity(density, axes)
        td = np.asarray(density["time"].values, dtype=float)
        particles = _SphereParticles(run, axes, size=5.0)
        _sphere_targets(axes, targets)
        fig.colorbar(layer.mappable, ax=axes[2], shrink=0.8, label="rho (per steradian)")
        ax = fig.add_subplot(grid[1, :])
        compare_w2_axes(ax, cmp)
        drawers += [
            lambda s: layer.draw(int(np.argmin(np.abs(td - s)))),
            particles.draw,
            _cursor(ax, t[0]),
        ]
        _targets_legend(fig, targets)
    title = fig.suptitle("density vs particles", fontsize=10)
    return fig, lambda s: [draw(s) for draw in drawers], title


def make_animation(source: Any, *, fps: float = DEFAULT_FPS, frames: int | None = None) -> Any:
    """The animation :func:`animate_run` writes, as a :class:`matplotlib.animation.FuncAnimation`
    (its figure open): to show in a notebook (``IPython.display.HTML(anim.to_jshtml())``) or to
    save with a writer of one's choice (``anim.save(...)``, then ``matplotlib.pyplot.close("all")``).

    Parameters
    ----------
    source : path or xarray.Dataset
        A density, particle or comparison file, or its Dataset.
    fps : float
        Frames per second (> 0).
    frames : int, optional
        Number of frames (:func:`frame_indices`).

    Raises
    ------
    spheredens.ConfigError
        A bad ``fps`` or ``frames``.
    spheredens.SchemaError
        ``source`` is not a file spheredens draws.
    """
    return _animation(*_source(source), fps=fps, frames=frames)[0]


def _check_fps(fps: Any) -> None:
    if isinstance(fps, bool) or not (
        isinstance(fps, (int, float)) and np.isfinite(fps) and fps > 0
    ):
        raise ConfigError("--fps", f"must be a finite number > 0, got {fps!r}")


def _animation(
    ds: Any, source_path: Path | None, *, fps: float, frames: int | None
) -> tuple[Any, Any]:
    """(FuncAnimation, its figure) of a file (see :func:`animate_run`)."""
    _check_fps(fps)
    kind = file_kind(ds)
    if kind not in ("density", "particles", "comparison"):
        raise SchemaError("plot and animate draw density, particle and comparison files")
    t = np.asarray(ds["time"].values, dtype=float)
    idx = frame_indices(t.size, frames)
    if kind == "density":
        file_domain(ds).part("figure", "a figure of a run")
        fig, draw, title = _density_animation(ds)
    elif kind == "particles":
        file_domain(ds).part("figure", "a figure of a run")
        fig, draw, title = _particle_animation(ds)
    else:
        fig, draw, title = _compare_animation(ds, source_path)
    head = title.get_text()

    def update(k: int) -> list[Any]:
        i = int(idx[k])
        draw(t[i])
        title.set_text(f"{head}\n{_frame_title(kind, t[i], i, t.size)}")
        return []

    update(0)
    fig.tight_layout()
    return animation.FuncAnimation(
        fig,
        update,
        frames=len(idx),
        interval=1000.0 / fps,
        blit=False,
        repeat=False,
        cache_frame_data=False,
    ), fig


def animate_run(
    source: Any,
    output: str | Path | None = None,
    *,
    fps: float = DEFAULT_FPS,
    frames: int | None = None,
    mkdir: bool = False,
    dpi: int = 80,
) -> Path:
    """Animate a run, particle or comparison file: ``spheredens animate FILE``.

    An MP4 where ffmpeg exists (matplotlib finds it), a GIF through Pillow otherwise; one frame
    per snapshot shown (:func:`frame_indices`; evenly spaced ones with ``frames``), drawn with
    :class:`matplotlib.animation.FuncAnimation`, with the targets of the model
    (:func:`file_targets`) and a cursor on the curves against time:

    * a density run on the circle: rho(theta) (log scale, per radian; usa_av: the slices
      rho_k coloured by xi and their marginal) beside W2 to the targets;
    * on the sphere (Gauss grid or finite-volume mesh): two orthographic views and a
      Mollweide map, coloured from 0 to the frame's max rho (per steradian); usa_av: the
      marginal, with the slice modes as dots coloured by xi; below, W2 to the targets;
    * a particle run: the points on the circle with the histogram of their angles, or on the
      three views of the sphere; their W2 to Pi_# of their start;
    * a comparison file: its W2 curves with the ensemble band, and the density with the
      particles of its first run when the files it names are found.

    Parameters
    ----------
    source : path or xarray.Dataset
        A density, particle or comparison file, or its Dataset (then give ``output`` unless it
        was read from a file).
    output : path, optional
        ``.mp4`` (needs ffmpeg) or ``.gif``; default: the file with suffix ``.mp4`` where
        ffmpeg exists, ``.gif`` otherwise. Its folder must exist and be writable, or
        ``mkdir=True`` creates it (checked before drawing). The file is written to a
        temporary name and renamed, so a failed animation leaves no partial file.
    fps : float
        Frames per second (> 0, default 8).
    frames : int, optional
        Number of frames: that many evenly spaced snapshots (at most every snapshot); default
        every snapshot, at most :data:`MAX_DEFAULT_FRAMES` (240).
    mkdir : bool
        Create the missing folder of ``output``.
    dpi : int
        Resolution of the frames.

    Returns
    -------
    pathlib.Path
        The file written.

    Raises
    ------
    spheredens.ConfigError
        A bad output path, format, ``fps`` or ``frames`` (one line).
    spheredens.SchemaError
        ``source`` is not a file spheredens draws.

    Example
    -------
    With the file of the example of :func:`spheredens.run`:

    >>> import spheredens as sd
    >>> movie = sd.animate_run("example_c.nc", "example_c.gif", fps=10, frames=3)
    """
    _check_fps(fps)
    ds, source_path = _source(source)
    out = animation_output_path(source_path, output)
    out = check_output_location(out, suffix=out.suffix, mkdir=mkdir)
    anim, fig = _animation(ds, source_path, fps=fps, frames=frames)
    writer = (
        animation.FFMpegWriter(fps=fps)
        if ANIMATION_WRITERS[out.suffix] == "ffmpeg"
        else animation.PillowWriter(fps=fps)
    )
    # the writer creates the temporary file itself (so it gets the umask's permissions, as any
    # file the user writes); the suffix stays last: it tells the writer the format
    temporary = out.with_name(f".{out.stem}.{os.getpid()}.partial{out.suffix}")
    try:
        anim.save(temporary, writer=writer, dpi=dpi)
        os.replace(temporary, out)
    finally:
        plt.close(fig)
        if os.path.exists(temporary):
            os.unlink(temporary)
    return out
