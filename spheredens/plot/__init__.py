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

from pathlib import Path
from typing import Any

from ..io import check_output_location
from ..schema import file_kind
from ..targets import Target, file_targets
from ._animation import (
    ANIMATION_WRITERS,
    DEFAULT_FPS,
    MAX_DEFAULT_FRAMES,
    animate_run,
    animation_output_path,
    ffmpeg_available,
    frame_indices,
    make_animation,
)
from ._common import (
    MAX_DRAWN_PARTICLES,
    THETA_LABEL,
    W2_LABEL,
    figure_path,
    open_figure_file,
    save_figure,
    slices_figure_path,
)
from ._comparison import compare_w2_axes, plot_compare_file, plot_comparison, plot_pairs
from ._density import plot_circle_run, plot_slices, plot_sphere_run, run_figure
from ._particles import plot_particles
from ._study import beta_study_figure, plot_beta_study

__all__ = [
    "ANIMATION_WRITERS",
    "DEFAULT_FPS",
    "MAX_DEFAULT_FRAMES",
    "MAX_DRAWN_PARTICLES",
    "THETA_LABEL",
    "Target",
    "W2_LABEL",
    "animate_run",
    "animation_output_path",
    "beta_study_figure",
    "compare_w2_axes",
    "ffmpeg_available",
    "figure_path",
    "file_targets",
    "frame_indices",
    "make_animation",
    "open_figure_file",
    "plot_beta_study",
    "plot_circle_run",
    "plot_compare_file",
    "plot_comparison",
    "plot_pairs",
    "plot_particles",
    "plot_run",
    "plot_slices",
    "plot_sphere_run",
    "save_figure",
    "slices_figure_path",
]


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
    * a particle run: :func:`plot_particles`, the points over time and at a few snapshots,
      with their W2 to Pi_# of their start (recorded, or computed from the model the file
      records: a file of ``convert-particles --config``);
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
        times to draw (the nearest stored; default 4: for a sphere run where its W2 to
        Pi_# rho_0 changes most, the first, the last and the minimum among them; for particles
        evenly spaced).

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
        run_figure(ds)  # a domain spheredens draws
        return plot_particles(ds, path, times=options.get("times"))
    if kind == "comparison":
        return plot_compare_file(ds, path)
    figure = run_figure(ds)
    if "slice_mode" in ds:
        path = Path(path)
        plot_slices(ds, slices_figure_path(path))
    return figure(ds, path, **options)
