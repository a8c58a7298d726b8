"""Animations of spheredens files (``spheredens animate``): one frame per snapshot shown, with a
cursor on the curves against time."""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any, Callable

import numpy as np

from .._lazy import animation
from .._lazy import pyplot as plt
from .._types import Array
from ..exceptions import ConfigError, SchemaError, SpheredensWarning
from ..io import check_output_location
from ..schema import file_kind
from ..targets import file_targets
from ._common import (
    SPHERE_VIEWS,
    any_finite,
    circle_target_lines,
    figure_source,
    lon_lat,
    on_circle,
    open_figure_file,
    other_curve,
    sphere_targets,
    sphere_view_axes,
    target_handles,
    targets_legend,
    time_cursor,
    view_frame,
    w2_axes,
)
from ._comparison import circle_density_and_particles, compare_w2_axes
from ._density import (
    run_figure,
    run_title,
)
from ._layers import (
    CircleDensity,
    CircleParticles,
    SphereDensity,
    SphereParticles,
)
from ._particles import (
    particle_w2_axes,
    particles_title,
    with_particle_w2,
)

#: frames per second of an animation (``spheredens animate --fps``)
DEFAULT_FPS = 8
#: an animation draws every snapshot, or this many evenly spaced ones when the file has more
MAX_DEFAULT_FRAMES = 240
#: the animation formats: suffix -> matplotlib writer
ANIMATION_WRITERS = {".mp4": "ffmpeg", ".gif": "pillow"}


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
    if on_circle(ds):
        fig, (ax0, ax1) = plt.subplots(
            1, 2, figsize=(11, 4.2), gridspec_kw={"width_ratios": [1.5, 1]}
        )
        density = CircleDensity(ds, ax0)
        circle_target_lines(ax0, targets, vertical=True)
        ax0.legend(
            handles=ax0.get_legend_handles_labels()[0] + target_handles(targets),
            fontsize=7,
            loc="lower left",
            framealpha=0.85,
        )
        drawers = [density.draw]
        if w2_axes(ax1, ds):
            ax1.set_title("distances to the targets", fontsize=9)
        else:
            other_curve(ax1, ds, density.rho.max(axis=1), "max rho (per radian)")
        drawers.append(time_cursor(ax1, t[0]))
        title = fig.suptitle(run_title(ds, "circle"), fontsize=10)
    else:
        fig = plt.figure(figsize=(11, 5.8))
        grid = fig.add_gridspec(2, 3, height_ratios=[3.0, 1.6], width_ratios=[1, 1, 1.9])
        axes = sphere_view_axes(fig, [grid[0, 0], grid[0, 1], grid[0, 2]])
        density = SphereDensity(ds, axes)
        sphere_targets(axes, targets)
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
                layers.append((dots, kind, None if view is None else view_frame(view)))
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
                        dots.set_offsets(np.column_stack(lon_lat(m)))
                        dots.set_facecolor(rgba)

            drawers.append(draw_modes)
        ax = fig.add_subplot(grid[1, :])
        if not w2_axes(ax, ds):
            other_curve(
                ax, ds, density.rho.reshape(t.size, -1).max(axis=1), "max rho (per steradian)"
            )
        drawers.append(time_cursor(ax, t[0]))
        title = fig.suptitle(run_title(ds, "sphere"), fontsize=10)
        targets_legend(fig, targets)
    return fig, lambda s: [draw(s) for draw in drawers], title


def _particle_animation(run: Any) -> tuple[Any, Callable[[float], None], Any]:
    """(figure, draw(t), title text) of a particle run."""
    run, _ = with_particle_w2(run)  # recorded, or computed from the model the file records
    targets = file_targets(run)
    t = np.asarray(run["time"].values, dtype=float)
    has_w2 = "w2_projection" in run and any_finite(run["w2_projection"].values)
    if on_circle(run):
        fig, axes = plt.subplots(1, 3 if has_w2 else 2, figsize=(13 if has_w2 else 9, 4.2))
        layer = CircleParticles(run, ring=axes[0], hist=axes[1], targets=targets)
        circle_target_lines(axes[1], targets, vertical=True)
        axes[1].legend(handles=target_handles(targets), fontsize=7, loc="upper right")
        drawers = [layer.draw]
        if has_w2:
            particle_w2_axes(axes[2], run)
            drawers.append(time_cursor(axes[2], t[0]))
    else:
        fig = plt.figure(figsize=(11, 5.8 if has_w2 else 4.2))
        grid = fig.add_gridspec(
            2 if has_w2 else 1,
            3,
            height_ratios=[3.0, 1.6] if has_w2 else [1.0],
            width_ratios=[1, 1, 1.9],
        )
        axes = sphere_view_axes(fig, [grid[0, 0], grid[0, 1], grid[0, 2]])
        layer = SphereParticles(run, axes, size=6.0)
        sphere_targets(axes, targets)
        for ax, (_, _, label) in zip(axes, SPHERE_VIEWS):
            ax.set_title(label, fontsize=8)
        drawers = [layer.draw]
        if has_w2:
            ax = fig.add_subplot(grid[1, :])
            particle_w2_axes(ax, run)
            drawers.append(time_cursor(ax, t[0]))
        targets_legend(fig, targets)
    title = fig.suptitle(particles_title(run), fontsize=10)
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
        if "run" in cmp.dims:  # runs against a reference (dim pair): the W2 curves alone
            ax.set_title("(the density and particle files it names were not found)", fontsize=8)
        drawers.append(time_cursor(ax, t[0]))
    elif on_circle(density):
        targets = file_targets(density)
        fig, (ax0, ax1) = plt.subplots(
            1, 2, figsize=(11, 4.2), gridspec_kw={"width_ratios": [1, 1.4]}
        )
        compare_w2_axes(ax0, cmp)
        drawers.append(time_cursor(ax0, t[0]))
        layer, particles = circle_density_and_particles(density, run, ax1, targets)
        ax1.legend(handles=ax1.get_legend_handles_labels()[0] + target_handles(targets), fontsize=7)
        drawers += [layer.draw, particles.draw]
    else:
        targets = file_targets(density)
        fig = plt.figure(figsize=(11, 5.8))
        grid = fig.add_gridspec(2, 3, height_ratios=[3.0, 1.6], width_ratios=[1, 1, 1.9])
        axes = sphere_view_axes(fig, [grid[0, 0], grid[0, 1], grid[0, 2]])
        layer = SphereDensity(density, axes)
        td = np.asarray(density["time"].values, dtype=float)
        particles = SphereParticles(run, axes, size=5.0)
        sphere_targets(axes, targets)
        fig.colorbar(layer.mappable, ax=axes[2], shrink=0.8, label="rho (per steradian)")
        ax = fig.add_subplot(grid[1, :])
        compare_w2_axes(ax, cmp)
        drawers += [
            lambda s: layer.draw(int(np.argmin(np.abs(td - s)))),
            particles.draw,
            time_cursor(ax, t[0]),
        ]
        targets_legend(fig, targets)
    title = fig.suptitle(
        "density vs particles" if "run" in cmp.dims else "runs vs the reference", fontsize=10
    )
    return fig, lambda s: [draw(s) for draw in drawers], title


def make_animation(source: Any, *, fps: float = DEFAULT_FPS, frames: int | None = None) -> Any:
    """The animation :func:`animate_run` writes, as a
    :class:`matplotlib.animation.FuncAnimation` (its figure open): to show in a notebook
    (``IPython.display.HTML(anim.to_jshtml())``) or to save with a writer of one's choice
    (``anim.save(...)``, then ``matplotlib.pyplot.close("all")``).

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
    return _animation(*figure_source(source), fps=fps, frames=frames)[0]


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
        run_figure(ds)
        fig, draw, title = _density_animation(ds)
    elif kind == "particles":
        run_figure(ds)
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
        The animation written (``.mp4`` or ``.gif``).

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
    ds, source_path = figure_source(source)
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
