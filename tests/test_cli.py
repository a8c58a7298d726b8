"""Command line: help texts, info, the built-in default run, plot, progress bar."""

from __future__ import annotations

import io
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
from conftest import make_config

import spheredens as sd
from spheredens.cli import main
from spheredens.simulate import Progress

ROOT = Path(__file__).resolve().parents[1]


def test_help_lists_every_command(capsys):
    try:
        main(["--help"])
    except SystemExit as exc:
        assert exc.code == 0
    out = capsys.readouterr().out
    for command in ("run", "info", "plot"):
        assert command in out
    assert "div_S( rho X[rho] )" in out


def test_run_help_describes_output(capsys):
    try:
        main(["run", "--help"])
    except SystemExit:
        pass
    out = capsys.readouterr().out
    assert "--output" in out and "netCDF" in out


def test_info_lists_registries(capsys):
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    for name in (
        "sa_zero_temperature",
        "usa",
        "fv",
        "fourier",
        "direct",
        "fft",
        "ssprk3",
        "von_mises_fisher",
        "random_smooth",
        "file",
    ):
        assert name in out


def test_default_example_runs_end_to_end(tmp_path):
    """The README's first command: runs/circle_example_c (example C, beta = 30, T = 40)."""
    folder = tmp_path / "circle_example_c"
    folder.mkdir()
    shutil.copy(ROOT / "runs" / "circle_example_c" / "config.toml", folder / "config.toml")
    proc = subprocess.run(
        [sys.executable, "-m", "spheredens.cli", "run", "circle_example_c/config.toml"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    nc, png = folder / "circle_example_c.nc", folder / "circle_example_c.png"
    assert "wrote circle_example_c/circle_example_c.nc" in proc.stdout
    assert "wrote circle_example_c/circle_example_c.png" in proc.stdout
    assert png.stat().st_size > 10_000
    ds = sd.open_run(nc)
    assert ds.sizes["time"] == 161 and float(ds.time[-1]) == 40.0
    assert np.abs(ds["mass"].values - 1).max() <= 1e-12 and float(ds["min_rho"].min()) >= 0
    w2 = ds["w2_projection"].values
    assert w2.argmin() not in (0, w2.size - 1)  # concentration, then the terminal phase


def test_plot_command(tmp_path, capsys):
    cfg = make_config(
        time={"t_end": 0.5, "snapshots": 3},
        output={"path": "p.nc", "figure": False},
        base_dir=tmp_path,
    )
    sd.run(cfg, progress=False)
    assert main(["plot", str(tmp_path / "p.nc")]) == 0
    assert (tmp_path / "p.png").stat().st_size > 5_000


class FakeTTY(io.StringIO):
    def isatty(self):
        return True


def test_progress_bar_on_terminal_only():
    cfg = make_config(
        discretization={"scheme": "fv", "n": 256}, time={"t_end": 5.0, "snapshots": 2}
    )
    problem = sd.Problem.from_config(cfg)
    stream = FakeTTY()
    sd.simulate(
        sd.make_scheme(problem, cfg.discretization),
        cfg.time,
        observers=[Progress(stream, delay=0.0)],
    )
    assert "t = " in stream.getvalue() and "%" in stream.getvalue()
    quiet = io.StringIO()  # not a terminal: nothing written
    sd.simulate(sd.make_scheme(problem, cfg.discretization), cfg.time, observers=[Progress(quiet)])
    assert quiet.getvalue() == ""
