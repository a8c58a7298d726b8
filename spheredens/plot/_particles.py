"""Figures of particle runs: the points over time and at a few snapshots, with the targets."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from .._lazy import pyplot as plt
from ..analysis import density_model, particle_projection_curve
from ..geometry import circle_angle
from ..targets import file_targets
from . import _common as common
from ._layers import (
    CircleParticles,
    SphereParticles,
    drawn_particles,
    particle_colours,
)


def particles_title(run: Any) -> str:
    n = run.sizes["particle"]
    model = run.attrs.get("model")
    head = f"{n} particles" + (
        f", {model}, beta = {run.attrs.get('beta')}" if model else " (no model recorded)"
    )
    extra = [f"{key} {run.attrs[key]}" for key in ("initialization", "seed") if key in run.attrs]
    return head + (f" ({', '.join(extra)})" if extra else "") + f" on the {run.attrs.get('domain')}"


#: the comment of a ``w2_projection`` the figures compute for a file that records none
COMPUTED_W2_COMMENT = (
    "computed by the figure from the positions and the model the file records (the file has "
    "no w2_projection): W2 of the particles to Pi_# of the particles at t = 0"
)


def with_particle_w2(run: Any) -> tuple[Any, str]:
    """The particle run with its W2 to Pi_# of its own particles at t = 0, and why there is none.

    As recorded (``w2_projection``: spheredens particle runs); else, when the file records its
    model (a file of ``convert-particles --config CONFIG``), computed here from the positions
    (:func:`spheredens.analysis.particle_projection_curve`, as ``compare`` does) and added as
    ``w2_projection``, its comment saying so. Returns ``(run, "")``, or the run unchanged and
    the reason in words when neither (no model recorded, Assumption 1 fails, ...)."""
    if "w2_projection" in run and common.any_finite(run["w2_projection"].values):
        return run, ""
    model, reason = density_model(run)
    if model is None:
        return run, (
            "the file records no model (convert-particles --config CONFIG records it)"
            if "model" not in run.attrs
            else reason.replace("density", "particle file")
        )
    w2, reason = particle_projection_curve(model, run)
    if not common.any_finite(w2):
        return run, reason or "W2 is undefined at every snapshot"
    attrs = {"long_name": "W2 to Pi_# rho_0", "units": "radian", "comment": COMPUTED_W2_COMMENT}
    return run.assign(w2_projection=("time", w2, attrs)), ""


def no_w2_note(ax: Any, reason: str) -> None:
    """An empty panel saying why no W2 is drawn."""
    ax.axis("off")
    ax.text(
        0.5,
        0.5,
        "no W2 to a target:\n" + reason,
        ha="center",
        va="center",
        fontsize=8,
        wrap=True,
        transform=ax.transAxes,
    )


def particle_w2_axes(ax: Any, run: Any) -> bool:
    if "w2_projection" not in run or not common.any_finite(run["w2_projection"].values):
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
    ax.set_ylabel(common.W2_LABEL)
    ax.legend(fontsize=7)
    ax.grid(True, which="both", alpha=0.3)
    common.plain_log_ticks(ax, "y")
    if run["w2_projection"].attrs.get("comment") == COMPUTED_W2_COMMENT:
        ax.set_title("computed from the positions and the file's model", fontsize=8)
    return True


def plot_particles(run: Any, path: str | Path, *, times: Any = None, max_panels: int = 4) -> Path:
    """A particle run: the points over time and at a few snapshots, with the targets.

    Circle: the angles of the particles against t (a point per particle and snapshot), with
    their W2 to Pi_# of their start beside it (recorded, or computed from the model the file
    records: :func:`with_particle_w2`); below, one panel per snapshot: the particles on
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
    return common.save_figure(particles_figure(run, times=times, max_panels=max_panels), path)


def particles_figure(run: Any, *, times: Any = None, max_panels: int = 4) -> Any:
    """The figure of :func:`plot_particles` (a matplotlib Figure): its W2 to Pi_# of the
    particles' start is the recorded one, or computed from the model the file records
    (:func:`with_particle_w2`)."""
    run, no_w2 = with_particle_w2(run)
    t_all = np.asarray(run["time"].values, dtype=float)
    idx = common.snapshot_indices(t_all, times, max_panels)
    targets = file_targets(run)
    if common.on_circle(run):
        cols = len(idx)
        fig = plt.figure(figsize=(max(11, 3.2 * cols), 7.6))
        grid = fig.add_gridspec(3, cols, height_ratios=[2.4, 1.6, 1.5])
        top = grid[0, :].subgridspec(1, 2, width_ratios=[1.6, 1])
        ax = fig.add_subplot(top[0, 0])
        keep = drawn_particles(run.sizes["particle"])[: max(1, 200_000 // max(t_all.size, 1))]
        angles = circle_angle(np.asarray(run["position"].values, dtype=float)[:, keep])
        rgba = particle_colours(run)[keep]
        ax.scatter(
            np.repeat(t_all, keep.size),
            angles.ravel(),
            s=1.5,
            lw=0,
            c=np.tile(rgba, (t_all.size, 1)),
            rasterized=True,
        )
        common.circle_target_lines(ax, targets, vertical=False)
        if targets:
            ax.legend(
                handles=common.target_handles(targets),
                fontsize=7,
                loc="lower left",
                framealpha=0.85,
            )
        ax.set_xlabel("t")
        common.theta_axis(ax, "y")
        ax.set_title(particles_title(run), fontsize=9)
        ax = fig.add_subplot(top[0, 1])
        if not particle_w2_axes(ax, run):
            no_w2_note(ax, no_w2)
        for c, i in enumerate(idx):
            ring, hist = fig.add_subplot(grid[1, c]), fig.add_subplot(grid[2, c])
            layer = CircleParticles(run, ring=ring, hist=hist, targets=targets)
            layer.draw(t_all[i])
            common.circle_target_lines(hist, targets, vertical=True)
            ring.set_title(f"t = {t_all[i]:g}", fontsize=9)
        return fig
    rows = len(idx)
    fig = plt.figure(figsize=(11, 3.0 * rows + 2.6))
    grid = fig.add_gridspec(
        rows + 1, 3, height_ratios=[3.0] * rows + [2.2], width_ratios=[1, 1, 1.9]
    )
    for r, i in enumerate(idx):
        axes = common.sphere_view_axes(fig, [grid[r, 0], grid[r, 1], grid[r, 2]])
        SphereParticles(run, axes).draw(t_all[i])
        common.sphere_targets(axes, targets)
        for ax, (_, _, label) in zip(axes, common.SPHERE_VIEWS):
            ax.set_title(f"t = {t_all[i]:g}, {label}", fontsize=8)
    ax = fig.add_subplot(grid[rows, :])
    if not particle_w2_axes(ax, run):
        no_w2_note(ax, no_w2)
    fig.suptitle(particles_title(run), fontsize=10)
    common.targets_legend(fig, targets)
    return fig
