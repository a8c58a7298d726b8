"""Figures that read at a glance, checked on their artists (Agg backend, drawn once).

* ``analyze-beta``: one panel per quantity (W2 against t, min W2 against beta, departure
  against beta), tick labels that do not overlap and are plain numbers, the unit and the grid of
  the W2 curves on the axis, and a run that never departs drawn as an open triangle at T.
* A converted particle file whose configuration gave the model: its W2 to Pi_# of its start
  is computed and drawn (exact at t = 0: each particle to its nearest atom).
* The sphere demo's default snapshots include the collapse (before t = 4).
"""

from __future__ import annotations

import itertools
import tomllib
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest
import xarray as xr
from conftest import EXAMPLE_C
from matplotlib.lines import Line2D
from matplotlib.text import Text

import spheredens as sd
from spheredens.analysis import analyze_beta
from spheredens.config import config_from_dict, load_config
from spheredens.convert import convert_particles
from spheredens.io import write_dataset
from spheredens.plot import beta_study_figure
from spheredens.plot._common import W2_LABEL, w2_snapshot_indices
from spheredens.plot._particles import particles_figure

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "runs" / "sphere_great_circle" / "config.toml"


def study(betas, ns, *, t_end=80.0, attrs=None):
    """A combined sweep over beta (and n when two or more are given) with synthetic W2 curves:
    an exponential approach to min W2 = 0.5 beta^-0.9, then a rise of 0.5 centred at
    t = 20 + 0.26 beta (no departure by T = t_end for the largest betas)."""
    t = np.linspace(0.0, t_end, 321)
    w2 = np.empty((len(betas), len(ns), t.size))
    for i, b in enumerate(betas):
        for j in range(len(ns)):
            rise = 0.5 / (1.0 + np.exp(np.clip(-2.0 * (t - 20.0 - 0.26 * b), -700, 700)))
            w2[i, j] = 0.9 * np.exp(-0.24 * t) + 0.5 * b**-0.9 * (1 + 0.02 * j) + rise
    swept = len(ns) > 1
    coords = {
        "beta": np.asarray(betas, float),
        "time": t,
        **({"n": np.asarray(ns)} if swept else {}),
    }
    return xr.Dataset(
        {
            "w2_projection": (
                ("beta", "n", "time") if swept else ("beta", "time"),
                w2 if swept else w2[:, 0],
                {"units": "radian"},
            ),
            **{k: (("row", "col"), np.asarray(v)) for k, v in EXAMPLE_C.items()},
        },
        coords=coords,
        attrs={"domain": "circle", "model": "sa", **(attrs or {})},
    )


STUDIES = {
    "five betas, two n": (study([10, 30, 100, 300, 1000], [1024, 2048]), "n = 2048"),
    "less than a decade": (study([3, 4, 6], [256], t_end=10.0, attrs={"n": 256}), "n = 256"),
    "crowded betas": (study([10, 11, 12, 13, 15, 20, 30, 100], [512], attrs={"n": 512}), "n = 512"),
}


def drawn(combined):
    fig = beta_study_figure(combined, analyze_beta(combined))
    fig.canvas.draw()
    return fig


def shown_labels(ax, which):
    """The tick labels drawn on one axis: visible, not empty, at a tick inside the view."""
    if which == "x":
        labels, (lo, hi), coord = ax.get_xticklabels(which="both"), ax.get_xlim(), 0
    else:
        labels, (lo, hi), coord = ax.get_yticklabels(which="both"), ax.get_ylim(), 1
    lo, hi = min(lo, hi), max(lo, hi)
    return [
        label
        for label in labels
        if label.get_visible()
        and label.get_text()
        and lo * (1 - 1e-9) - 1e-12 <= label.get_position()[coord] <= hi * (1 + 1e-9) + 1e-12
    ]


@pytest.mark.parametrize("name", STUDIES)
def test_beta_study_tick_labels_are_plain_numbers_that_do_not_overlap(name):
    """On every axis of the figure, x and y: no two tick labels' boxes overlap (the user's
    "3x10^0 4x10^0 6x10^0"), and each label is a plain number; the beta axes are labelled at
    betas of the study, the first and the last always."""
    combined, _ = STUDIES[name]
    fig = drawn(combined)
    renderer = fig.canvas.get_renderer()
    for ax, which in itertools.product(fig.axes, "xy"):
        labels = shown_labels(ax, which)
        assert len(labels) >= 2, (ax.get_title(), which)
        boxes = [label.get_window_extent(renderer) for label in labels]
        for a, b in itertools.combinations(boxes, 2):
            lo_a, hi_a, lo_b, hi_b = (
                (a.x0, a.x1, b.x0, b.x1) if which == "x" else (a.y0, a.y1, b.y0, b.y1)
            )
            assert hi_a <= lo_b or hi_b <= lo_a, (name, ax.get_title(), which, a, b)
        values = [float(label.get_text()) for label in labels]  # no "3x10^0", no mathtext
        assert all(v >= 0 for v in values)
    betas = combined["beta"].values
    for ax in fig.axes[1:]:
        ticks = [float(label.get_text()) for label in shown_labels(ax, "x")]
        assert set(ticks) <= set(betas.tolist())
        assert ticks[0] == betas[0] and ticks[-1] == betas[-1]
    if name == "crowded betas":  # 10, 11, 12, 13 cannot all be labelled at this width
        assert len(shown_labels(fig.axes[1], "x")) < betas.size


@pytest.mark.parametrize("name", STUDIES)
def test_beta_study_has_one_panel_per_quantity_with_units_and_the_grid(name):
    """Three panels, each its own quantity (distinct titles and y labels: the departure is
    drawn once); the W2 axis says radians and which n its curves are at; times are in model
    time units."""
    combined, grid = STUDIES[name]
    fig = drawn(combined)
    assert len(fig.axes) == 3
    titles = [ax.get_title() for ax in fig.axes]
    ylabels = [ax.get_ylabel() for ax in fig.axes]
    assert len(set(titles)) == 3 and len(set(ylabels)) == 3
    assert sum("departure" in y for y in ylabels) == 1
    w2_label = fig.axes[0].get_ylabel()
    assert "W2" in w2_label and "(rad)" in w2_label and grid in w2_label
    assert "(rad)" in fig.axes[1].get_ylabel()
    assert "model time units" in fig.axes[0].get_xlabel()
    assert "model time units" in fig.axes[2].get_ylabel()


def test_beta_study_marks_each_missing_departure_at_T():
    """beta = 300 and 1000 do not depart by T = 80 (the rise is centred at 98 and 280): each
    is an open triangle at (beta, 80) on the departure panel, at both n, with a legend entry
    "no departure by T = 80"; the betas that depart are filled squares at their departure."""
    combined, _ = STUDIES["five betas, two n"]
    analysis = analyze_beta(combined)
    missing = analysis["departure_time"].isel(n=-1).isnull().values
    assert combined["beta"].values[missing].tolist() == [300.0, 1000.0]
    fig = drawn(combined)
    ax = fig.axes[2]
    open_marks = [
        line
        for line in ax.get_lines()
        if line.get_marker() == "^"
        and line.get_markerfacecolor() == "none"
        and len(line.get_xdata())
    ]
    assert len(open_marks) == 2  # one per n
    for line in open_marks:
        assert np.asarray(line.get_xdata()).tolist() == [300.0, 1000.0]
        assert np.asarray(line.get_ydata()).tolist() == [80.0, 80.0]
        assert line.get_visible() and line.get_markersize() >= 8
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any(t.startswith("no departure by T = 80") for t in legend), legend
    squares = [line for line in ax.get_lines() if line.get_marker() == "s"]
    dep = analysis["departure_time"].isel(n=-1).values
    np.testing.assert_array_equal(squares[-1].get_ydata(), dep)  # the same numbers as the table


def test_beta_study_without_any_departure_keeps_the_departure_panel():
    """No run departs within T = 10: the departure panel is drawn all the same, every beta an
    open triangle at T (not left out)."""
    combined, _ = STUDIES["less than a decade"]
    fig = drawn(combined)
    assert len(fig.axes) == 3
    (line,) = [
        ln for ln in fig.axes[2].get_lines() if ln.get_marker() == "^" and len(ln.get_xdata())
    ]
    assert np.asarray(line.get_ydata()).tolist() == [10.0, 10.0, 10.0]


# -- a converted particle file --------------------------------------------------------------------
CIRCLE_TOML = """
[model]
name = "sa"
beta = 30.0
Q = [[1.0, 0.0], [0.0, 1.0]]
K = [[1.75, 0.866025], [0.433013, 2.5]]
V = [[1.0, 0.0], [0.0, 0.5]]
[initial]
name = "uniform"
[discretization]
scheme = "fv"
n = 128
[time]
t_end = 2.0
snapshots = 3
"""


def converted(tmp_path, *, with_config):
    """Six particles at fixed angles (t = 0), halfway to the nearest atom of Pi_# (t = 1),
    on it (t = 2), converted as convert-particles does, with or without the configuration."""
    a = np.asarray(EXAMPLE_C["V"]) @ np.asarray(EXAMPLE_C["K"]).T  # A = V B^T, B = K (Q = I)
    top = np.linalg.eigh((a + a.T) / 2)[1][:, -1]
    u = np.arctan2(top[1], top[0]) % np.pi  # the atoms +-u: 30 degrees to 1e-6 (K rounded)
    theta0 = np.array([0.1, 0.9, 1.5, 2.9, 4.0, 5.5])
    atom = np.where(np.cos(theta0 - u) > 0, u, u + np.pi)
    step = np.angle(np.exp(1j * (atom - theta0)))
    theta = np.stack([theta0, theta0 + step / 2, theta0 + step])
    np.save(tmp_path / "x.npy", np.stack([np.cos(theta), np.sin(theta)], axis=-1))
    (tmp_path / "c.toml").write_text(CIRCLE_TOML)
    kwargs = {"config": tmp_path / "c.toml"} if with_config else {"domain": "circle"}
    ds = convert_particles(tmp_path / "x.npy", dt=1.0, **kwargs)
    write_dataset(ds, tmp_path / "p.nc")
    return sd.open_particles(tmp_path / "p.nc"), np.sqrt(np.mean(step**2))


def texts(fig):
    return [t.get_text() for t in fig.findobj(Text) if t.get_text()]


def test_a_converted_particle_file_with_its_model_shows_w2_to_the_target(tmp_path):
    """convert-particles --config records the model: the figure computes W2 to Pi_# of the
    particles at t = 0 and draws it; at t = 0 it is sqrt(mean d_i^2), d_i the angle from each
    particle to its nearest atom +-u (the optimal coupling: the target's masses are those of
    the half circles), and 0 at t = 2, when every particle sits on its atom. No "no W2"."""
    run, w2_start = converted(tmp_path, with_config=True)
    assert "w2_projection" not in run  # the file records none: the figure computes it
    fig = particles_figure(run)
    fig.canvas.draw()
    (ax,) = [a for a in fig.axes if a.get_ylabel() == W2_LABEL]
    (line,) = [ln for ln in ax.get_lines() if isinstance(ln, Line2D) and len(ln.get_xdata())]
    t, w2 = np.asarray(line.get_xdata()), np.asarray(line.get_ydata(), dtype=float)
    np.testing.assert_array_equal(t, [0.0, 1.0, 2.0])
    assert abs(w2[0] - w2_start) < 1e-12 * w2_start  # measured 1.4e-16: round-off
    assert w2[0] > w2[1] > 0  # halfway: 0.39157
    assert w2[2] < 1e-7  # on the atoms: 3.3e-8, the tolerance of POT's circle solver
    assert not any("no W2" in s for s in texts(fig))
    assert "computed" in ax.get_title()


def test_a_particle_file_without_a_model_says_why_there_is_no_w2(tmp_path):
    """Without --config no model is recorded: the panel says so and how to record one."""
    run, _ = converted(tmp_path, with_config=False)
    fig = particles_figure(run)
    notes = [s for s in texts(fig) if s.startswith("no W2 to a target")]
    assert len(notes) == 1 and "--config" in notes[0]
    assert not any(a.get_ylabel() == W2_LABEL for a in fig.axes)


# -- the sphere demo's snapshots -------------------------------------------------------------------
#: W2 to Pi_# rho_0 of `make demo-sphere` (runs/sphere_great_circle, lmax = 63) at its 41
#: snapshots t = 0, 0.5, ..., 20, as measured on 2026-12-02 (minimum 0.22187 at t = 3.5)
DEMO_W2 = [0.71618, 0.62281, 0.53105, 0.44427, 0.36585, 0.2995, 0.24963, 0.22187, 0.22515,
           0.26092, 0.31429, 0.3708, 0.42304, 0.4678, 0.50695, 0.54077, 0.57061, 0.59825,
           0.62012, 0.63832, 0.65214, 0.66273, 0.67103, 0.6776, 0.68239, 0.68519, 0.68732,
           0.68862, 0.68828, 0.68746, 0.68593, 0.6854, 0.68363, 0.68399, 0.68298, 0.68167,
           0.68185, 0.6822, 0.68378, 0.68648, 0.68793]  # fmt: skip


def test_the_sphere_demo_snapshots_show_the_collapse():
    """With the demo's snapshot times (its configuration) and its W2 curve, the 4 rows of its
    figure are t = 0, 3.5 (the W2 minimum: the collapse onto the great circle), 6 and 20; evenly
    spaced rows were 0, 6.5, 13.5 and 20, none before t = 4."""
    t = np.array(load_config(DEMO).time.snapshot_times())
    assert t.size == len(DEMO_W2)
    chosen = t[w2_snapshot_indices(t, np.array(DEMO_W2), 4)]
    np.testing.assert_array_equal(chosen, [0.0, 3.5, 6.0, 20.0])
    assert (chosen[1:] < 4.0).any()
    evenly = t[np.unique(np.linspace(0, t.size - 1, 4).round().astype(int))]
    np.testing.assert_array_equal(evenly, [0.0, 6.5, 13.5, 20.0])


def test_w2_snapshots_keep_count_first_last_and_minimum():
    """The rule on simple curves: the first, the last and the minimum are always rows; a
    curve whose change is all in a short window gets its rows there; W2 undefined (NaN) or
    flat falls back to evenly spaced times."""
    t = np.linspace(0.0, 10.0, 101)
    fast = np.where(t < 1.0, 1.0 - 0.9 * t, 0.1)  # all the change in [0, 1]
    idx = w2_snapshot_indices(t, fast, 5)
    assert idx.size == 5 and idx[0] == 0 and idx[-1] == 100
    assert (t[idx[1:-1]] <= 1.0 + 1e-12).all()
    bowl = (t - 3.0) ** 2
    assert 30 in w2_snapshot_indices(t, bowl, 4)  # the minimum, t = 3
    for flat in (np.full(t.size, 0.3), np.full(t.size, np.nan)):
        np.testing.assert_array_equal(w2_snapshot_indices(t, flat, 3), [0, 50, 100])


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::spheredens.exceptions.SpheredensWarning")  # the ringing
def test_the_sphere_demo_at_the_coarsest_resolved_grid_collapses_before_t_4():
    """The demo's configuration at lmax = 24 (the coarsest grid resolving its kernel; 25-30 s):
    its own W2 curve has its minimum before t = 4 (measured: 0.268 at t = 3), and its default
    rows include it (measured: t = 0, 1.5, 3, 20)."""
    table = tomllib.loads(DEMO.read_text())
    table["discretization"]["lmax"] = 24
    table.pop("output")
    ds = sd.run(config_from_dict(table, base_dir=DEMO.parent), progress=False)
    t, w2 = ds["time"].values, ds["w2_projection"].values
    assert t[np.argmin(w2)] < 4.0
    chosen = t[w2_snapshot_indices(t, w2, 4)]
    assert chosen[0] == 0.0 and chosen[-1] == 20.0 and (chosen[1:] < 4.0).any()
