"""Figures and animations of every file kind, with the Agg backend.

``spheredens plot`` and ``spheredens animate`` on a tiny file of each kind: a circle run, a
Gauss-grid run (sh_spectral), a finite-volume run on the sphere, a usa_av run with slices,
particle runs on the circle and the sphere, and comparison files on both. Each PNG and each
frame of each GIF must be non-blank (pixels vary, not all white) and a GIF must hold the frames
asked for. The figures draw the targets, use radians and give each quantity its own axis.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest
import xarray as xr
from conftest import EXAMPLE_C
from matplotlib.image import imread
from PIL import Image

import spheredens as sd
import spheredens.plot as sdplot
from spheredens.cli import main
from spheredens.compare import compare
from spheredens.geometry import circle_angle
from spheredens.io import write_dataset
from spheredens.particles import run_particles

#: every file kind drawn, as named by the tests
KINDS = [
    "circle",
    "gauss",
    "sphere_fv",
    "usa_av",
    "particles_circle",
    "particles_sphere",
    "compare_circle",
    "compare_sphere",
]

CIRCLE = {
    "model": {"name": "sa", "beta": 3.0, **EXAMPLE_C},
    "initial": {"name": "uniform"},
    "discretization": {"scheme": "fv", "n": 64},
    "time": {"t_end": 1.0, "snapshots": 5},
    "particles": {"n": 40, "dt": 0.1},
}
SPHERE_V = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 0.5]]  # E_1 = the equatorial plane
GAUSS = {
    "model": {"name": "sa", "beta": 1.0, "V": SPHERE_V},
    "domain": {"name": "sphere"},
    "initial": {"name": "random_smooth", "seed": 4, "bandwidth": 3},
    "discretization": {"scheme": "sh_spectral", "lmax": 7},
    "time": {"t_end": 0.5, "snapshots": 4},
    "particles": {"n": 40, "dt": 0.1},
}
SPHERE_FV = {
    **GAUSS,
    "model": {"name": "sa", "beta": 1.0, "V": [[1.0, 0, 0], [0, 0.6, 0], [0, 0, 0.5]]},
    "discretization": {"scheme": "fv", "nlat": 10},
}
USA_AV = {
    "model": {"name": "usa_av", "beta": 1.0},
    "domain": {"name": "circle"},
    "initial": {"name": "uniform"},
    "auxiliary": {"kernel": "rope", "slices": 4, "slice_perturbation": 0.5},
    "discretization": {"scheme": "fv", "n": 32},
    "time": {"t_end": 1.0, "snapshots": 4},
}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """One tiny file of each kind (about 5 s): name -> path."""
    folder = tmp_path_factory.mktemp("plot_animate")
    out = {}

    def run(name, table):
        out[name] = folder / f"{name}.nc"
        return sd.run(sd.config_from_dict(table), output=out[name], progress=False)

    def ensemble(name, table, density, seeds):
        cfg = sd.config_from_dict(table)
        paths = [folder / f"{name}_particles_seed{s}.nc" for s in seeds]
        runs = [run_particles(cfg, seed=s, output=p, progress=False) for s, p in zip(seeds, paths)]
        cmp = compare(
            density,
            runs,
            n_points=256,
            density_file=str(out[name]),
            particle_files=[str(p) for p in paths],
        )
        write_dataset(cmp, folder / f"{name}_compare.nc")
        return paths[0], folder / f"{name}_compare.nc"

    circle = run("circle", CIRCLE)
    out["particles_circle"], out["compare_circle"] = ensemble("circle", CIRCLE, circle, (0, 1, 2))
    gauss = run("gauss", GAUSS)
    out["particles_sphere"], out["compare_sphere"] = ensemble("gauss", GAUSS, gauss, (0, 1))
    run("sphere_fv", SPHERE_FV)
    run("usa_av", USA_AV)
    return out


def assert_not_blank(pixels, what):
    """An image that shows something: its pixels vary and are not all white."""
    rgb = np.asarray(pixels, dtype=float)[..., :3]
    rgb = rgb / 255.0 if rgb.max() > 1.0 else rgb
    assert rgb.std() > 0.0, f"{what} is a single colour"
    assert rgb.min() < 1.0, f"{what} is all white"


def gif_frames(path):
    """The frames of a GIF as RGB arrays."""
    with Image.open(path) as im:
        frames = []
        for k in range(im.n_frames):
            im.seek(k)
            frames.append(np.asarray(im.convert("RGB")))
    return frames


# -- plot and animate every file kind -----------------------------------------------
@pytest.mark.parametrize("kind", KINDS)
def test_plot_draws_every_file_kind(files, kind, tmp_path, capsys):
    png = tmp_path / f"{kind}.png"
    rows = (
        ["--times", "0", "0.5"] if kind in ("gauss", "sphere_fv", "particles_sphere") else []
    )  # 2 rows
    assert main(["plot", str(files[kind]), "-o", str(png), *rows]) == 0
    assert capsys.readouterr().out.strip().endswith(f"{kind}.png")
    assert_not_blank(imread(png), png.name)
    if kind == "usa_av":  # the slices' own figure beside it
        assert_not_blank(imread(tmp_path / f"{kind}_slices.png"), "the slice figure")


@pytest.mark.parametrize("kind", KINDS)
def test_animate_every_file_kind(files, kind, tmp_path, capsys):
    gif = tmp_path / f"{kind}.gif"
    assert main(["animate", str(files[kind]), "-o", str(gif), "--frames", "2", "--fps", "5"]) == 0
    assert capsys.readouterr().out.strip().endswith(f"{kind}.gif")
    frames = gif_frames(gif)
    # 2 frames asked for (the first and last snapshots; Pillow would merge identical frames)
    assert len(frames) == 2
    for k, frame in enumerate(frames):
        assert_not_blank(frame, f"frame {k} of {gif.name}")
    assert not any(np.array_equal(a, b) for a, b in zip(frames, frames[1:]))
    assert not list(tmp_path.glob(f".{kind}.*"))  # the temporary file was renamed


def test_animation_has_one_frame_per_snapshot_by_default(files, tmp_path):
    gif = sd.animate_run(files["usa_av"], tmp_path / "all.gif", fps=4, dpi=40)
    assert Image.open(gif).n_frames == xr.open_dataset(files["usa_av"]).sizes["time"] == 4
    umask = os.umask(0)
    os.umask(umask)
    assert gif.stat().st_mode & 0o777 == 0o666 & ~umask  # as any file the user writes


def test_make_animation_gives_the_animation_itself(files, tmp_path):
    """For notebooks (anim.to_jshtml()) and writers of one's choice: the frames asked for."""
    import matplotlib.pyplot as plt

    anim = sdplot.make_animation(files["particles_circle"], frames=3)
    try:
        assert len(list(anim.new_frame_seq())) == 3
        anim.save(tmp_path / "own.gif", writer="pillow", dpi=30)
        assert Image.open(tmp_path / "own.gif").n_frames == 3
    finally:
        plt.close("all")


@pytest.mark.skipif(not sdplot.ffmpeg_available(), reason="ffmpeg is not installed: GIF only")
def test_mp4_has_the_frames_asked_for(files, tmp_path):
    mp4 = sd.animate_run(files["circle"], tmp_path / "c.mp4", frames=4, dpi=40)
    if shutil.which("ffprobe") is None:
        pytest.skip("no ffprobe to count the frames")
    count = subprocess.run(
        [
            "ffprobe",
            "-v",
            "error",
            "-count_frames",
            "-select_streams",
            "v:0",
            "-show_entries",
            "stream=nb_read_frames",
            "-of",
            "csv=p=0",
            str(mp4),
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert int(count) == 4


def test_default_format_follows_ffmpeg(files, tmp_path, monkeypatch):
    source = tmp_path / "c.nc"
    shutil.copy(files["circle"], source)
    monkeypatch.setattr(sdplot._animation, "ffmpeg_available", lambda: False)
    assert sdplot.animation_output_path(source) == tmp_path / "c.gif"
    assert main(["animate", str(source), "--frames", "2"]) == 0
    assert Image.open(tmp_path / "c.gif").n_frames == 2
    monkeypatch.setattr(sdplot._animation, "ffmpeg_available", lambda: True)
    assert sdplot.animation_output_path(source) == tmp_path / "c.mp4"


def test_frames_are_distinct_snapshots_with_the_ends():
    idx = sdplot.frame_indices(161, 7)
    assert idx.size == 7 and idx[0] == 0 and idx[-1] == 160 and np.all(np.diff(idx) > 0)
    assert sdplot.frame_indices(5).tolist() == [0, 1, 2, 3, 4]
    assert sdplot.frame_indices(10_000).size == sdplot.MAX_DEFAULT_FRAMES
    with pytest.warns(sd.SpheredensWarning, match="has 5 snapshot"):
        assert sdplot.frame_indices(5, 9).tolist() == [0, 1, 2, 3, 4]


# -- refusals: one line ---------------------------------------------------------------------------
def one_line(capsys):
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("spheredens: error: "), err
    return err


def test_animation_paths_and_options_are_refused_in_one_line(files, tmp_path, capsys, monkeypatch):
    circle = str(files["circle"])
    assert main(["animate", circle, "-o", str(tmp_path / "x.avi")]) == 2
    assert "must end in '.mp4' (ffmpeg) or '.gif'" in one_line(capsys)
    assert main(["animate", circle, "-o", str(tmp_path / "no" / "x.gif")]) == 2
    assert "does not exist; create it or pass --mkdir" in one_line(capsys)
    assert (
        main(["animate", circle, "-o", str(tmp_path / "no" / "x.gif"), "--frames", "2", "--mkdir"])
        == 0
    )
    capsys.readouterr()
    monkeypatch.setattr(sdplot._animation, "ffmpeg_available", lambda: False)
    assert main(["animate", circle, "-o", str(tmp_path / "x.mp4")]) == 2
    assert "ffmpeg is not installed" in one_line(capsys) and not (tmp_path / "x.mp4").exists()
    with pytest.raises(SystemExit):
        main(["animate", circle, "--fps", "0"])
    assert "--fps: must be a finite number > 0" in one_line(capsys)
    with pytest.raises(sd.ConfigError, match="give the animation file"):
        sd.animate_run(xr.Dataset(attrs=dict(sd.open_run(files["circle"]).attrs)))


def test_plot_refuses_other_files_in_one_line(tmp_path, capsys):
    sweep = tmp_path / "combined.nc"
    xr.Dataset(
        {"w2": ("beta", [0.1])}, attrs={"spheredens_schema": "spheredens-sweep-1"}
    ).to_netcdf(sweep)
    for command in ("plot", "animate"):
        assert main([command, str(sweep)]) == 2
        assert "plot and animate draw density, particle and comparison files" in one_line(capsys)


# -- the figures: targets, units, one axis per quantity --------------------------------------------
def test_targets_of_example_c_are_the_atoms_and_the_eigenvector_of_v(files):
    """Example C: Pi_# rho_0 sits on +-u, u = (cos 30 deg, sin 30 deg) (README); V = diag(1, 0.5)
    has the top eigenvector e_1."""
    targets = sdplot.file_targets(sd.open_run(files["circle"]))
    assert [t.role for t in targets] == ["projection", "terminal"]
    # K is typed with 6 significant digits: u is 30 degrees to ~1e-6
    np.testing.assert_allclose(
        np.sort(circle_angle(targets[0].points)), [np.pi / 6, 7 * np.pi / 6], atol=1e-5
    )
    np.testing.assert_allclose(np.sort(circle_angle(targets[1].points)), [0.0, np.pi], atol=1e-12)


def test_targets_on_the_sphere_and_none_for_usa_av(files):
    """V = diag(1, 1, 0.5), Q = K = I: E_1 and the top eigenspace of V are both the equatorial
    plane: one target, the equator; usa_av (Q = K = V = I) has none."""
    (target,) = sdplot.file_targets(sd.open_run(files["gauss"]))
    assert target.role == "both" and target.basis.shape == (2, 3)
    assert np.abs(target.curve()[:, 2]).max() <= 1e-12  # the equator, to round-off
    assert sdplot.file_targets(sd.open_run(files["usa_av"])) == []
    assert [t.role for t in sdplot.file_targets(sd.open_particles(files["particles_circle"]))] == [
        "projection",
        "terminal",
    ]


@pytest.fixture
def drawn(monkeypatch):
    """The figures drawn, kept open: name of the file -> figure."""
    figures = {}
    real = sdplot.save_figure

    def keep(fig, path, **kw):
        figures[str(path)] = [
            (ax.get_xlabel(), ax.get_ylabel(), [t.get_text() for t in ax.get_yticklabels()])
            for ax in fig.axes
        ]
        return real(fig, path, **kw)

    for module in (sdplot._common, sdplot._density, sdplot._comparison, sdplot._study):
        monkeypatch.setattr(module, "save_figure", keep)
    return figures


def test_sphere_figure_gives_each_quantity_its_own_labelled_axis(files, tmp_path, drawn):
    sd.plot_run(sd.open_run(files["gauss"]), tmp_path / "g.png")
    ylabels = [y for _, y, _ in drawn[str(tmp_path / "g.png")]]
    for label in ("W2 (radians)", "max rho (per steradian)", "-min rho / max rho (1)"):
        assert ylabels.count(label) == 1, (label, ylabels)
    assert "rho (per steradian)" in ylabels  # the colour bars


def test_angles_are_in_radians_everywhere(files, tmp_path, drawn):
    sd.plot_run(sd.open_run(files["circle"]), tmp_path / "c.png")
    sd.plot_run(sd.open_particles(files["particles_circle"]), tmp_path / "p.png")
    sd.plot_run(sd.open_run(files["usa_av"]), tmp_path / "a.png")
    from spheredens.plot import plot_comparison

    cmp = xr.open_dataset(files["compare_circle"]).load()
    plot_comparison(
        cmp,
        sd.open_run(files["circle"]),
        sd.open_particles(files["particles_circle"]),
        tmp_path / "cmp.png",
    )
    labels = {name: [text for x, y, _ in axes for text in (x, y)] for name, axes in drawn.items()}
    for name in ("c.png", "p.png", "cmp.png"):
        assert "theta (radians)" in labels[str(tmp_path / name)], labels[str(tmp_path / name)]
    everything = " ".join(text for texts in labels.values() for text in texts)
    assert "degree" not in everything
    assert "angle of the mode (radians)" in labels[str(tmp_path / "a_slices.png")]
    circle_axes = drawn[str(tmp_path / "c.png")]
    assert ["0", "pi/2", "pi", "3pi/2", "2pi"] in [
        ticks for _, y, ticks in circle_axes if y == "theta (radians)"
    ]


def test_compare_figure_draws_the_ensemble_band(files, tmp_path, drawn):
    sd.plot_run(xr.open_dataset(files["compare_circle"]).load(), tmp_path / "band.png")
    (axes_w2, *_) = drawn[str(tmp_path / "band.png")]
    assert axes_w2[:2] == ("t", "W2 density vs particles (radians)")
