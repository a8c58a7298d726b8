"""Output paths are checked before any work; numeric options are range-checked; warnings and
numerical failures print as one line.

Every command that writes (run, particles, compare, sweep, plot, analyze-beta, and the Python
functions behind them) refuses, before the first step, an output whose folder is missing (no
folder is ever created without ``--mkdir`` / ``mkdir=True``), is not writable, or whose name
has the wrong suffix. Unwritable folders are made portably, also for root (for whom chmod does
not stop writes): a file used as a folder (``f.txt/out.nc``) and a read-only system location
(``/proc``).
"""

from __future__ import annotations

import logging
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

import spheredens as sd
from spheredens.cli import format_warning, main, number
from spheredens.exceptions import ConfigError, SpheredensWarning
from spheredens.particles import run_particles
from spheredens.plot import plot_run
from spheredens.sweep import check_sweep_output, load_sweep, run_sweep

#: a run configuration small enough for every command, with particles
CONFIG = (
    "[model]\nbeta = 1.0\n[discretization]\nn = 64\n[time]\nt_end = 0.2\nsnapshots = 2\n"
    "[output]\nfigure = false\n[particles]\nn = 20\ndt = 0.1\n"
)


def unwritable(tmp_path: Path) -> list[Path]:
    """Folders nobody can write into, root included: a file in place of a folder, and /proc."""
    blocker = tmp_path / "f.txt"
    blocker.write_text("a file, not a folder")
    folders = [blocker]
    if Path("/proc").is_dir():
        folders.append(Path("/proc"))
    return folders


@pytest.fixture
def no_steps(monkeypatch):
    """Any integration (density or particles) or comparison fails the test."""
    import spheredens.cli._commands
    import spheredens.cli._compare
    import spheredens.particles
    import spheredens.runner
    import spheredens.sweep._run

    def forbidden(*args, **kwargs):
        raise AssertionError("work started before the output path was checked")

    monkeypatch.setattr(spheredens.runner, "simulate", forbidden)
    monkeypatch.setattr(spheredens.particles, "simulate", forbidden)
    monkeypatch.setattr(spheredens.cli._compare, "compare", forbidden)
    monkeypatch.setattr(spheredens.cli._compare, "compare_runs", forbidden)
    monkeypatch.setattr(spheredens.cli._commands, "analyze_beta", forbidden)
    monkeypatch.setattr(spheredens.sweep._run, "_local_cluster", forbidden)
    return forbidden


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A tiny density run, a particle run of it, a combined sweep over beta (synthetic)."""
    folder = tmp_path_factory.mktemp("inputs")
    (folder / "c.toml").write_text(CONFIG)
    cfg = sd.load_config(folder / "c.toml")
    sd.run(cfg, output=folder / "d.nc", progress=False)
    run_particles(cfg, output=folder / "p.nc", progress=False)
    t = np.linspace(0.0, 4.0, 41)
    w2 = np.array([0.9 * np.exp(-r * t) + 0.05 * t for r in (0.5, 0.4)])
    xr.Dataset(
        {
            "w2_projection": (("beta", "time"), w2),
            "Q": (("row", "col"), np.eye(2)),
            "K": (("row", "col"), np.eye(2)),
            "V": (("row", "col"), np.diag([1.0, 0.5])),
        },
        coords={"beta": [10.0, 30.0], "time": t},
    ).to_netcdf(folder / "combined.nc")
    (folder / "text.nc").write_text("not netCDF\n")
    return folder


def command(name: str, files: Path, out: Path) -> list[str]:
    """The command line of ``name`` writing to ``out``."""
    return {
        "run": ["run", str(files / "c.toml"), "-o", str(out), "-q"],
        "particles": ["particles", str(files / "c.toml"), "-o", str(out), "-q"],
        "compare": [
            "compare",
            str(files / "d.nc"),
            str(files / "p.nc"),
            "-o",
            str(out),
            "--no-figure",
        ],
        "plot": ["plot", str(files / "d.nc"), "-o", str(out.with_suffix(".png"))],
        "analyze-beta": ["analyze-beta", str(files / "combined.nc"), "-o", str(out)],
    }[name]


WRITERS = ["run", "particles", "compare", "plot", "analyze-beta"]


def one_error_line(capsys) -> str:
    captured = capsys.readouterr()
    err = captured.err
    assert err.count("\n") == 1 and err.startswith("spheredens: error: "), err
    assert "Traceback" not in err
    return err


@pytest.mark.parametrize("name", WRITERS)
def test_unwritable_folder_fails_at_once_with_one_line(name, files, tmp_path, capsys, no_steps):
    for folder in unwritable(tmp_path):
        assert main(command(name, files, folder / "out.nc")) == 2  # at once: no_steps
        err = one_error_line(capsys)
        assert str(folder) in err and (
            "is a file, not a directory" in err or "cannot write in" in err
        ), err


@pytest.mark.parametrize("name", WRITERS)
def test_missing_folder_is_refused_and_not_created(name, files, tmp_path, capsys, no_steps):
    missing = tmp_path / "missing" / "deeper"
    assert main(command(name, files, missing / "out.nc")) == 2  # at once: no_steps
    err = one_error_line(capsys)
    assert "does not exist; create it or pass --mkdir" in err and str(missing) in err, err
    assert not (tmp_path / "missing").exists()


@pytest.mark.parametrize("name", WRITERS)
def test_mkdir_creates_the_folder_and_the_command_runs(name, files, tmp_path, capsys):
    out = tmp_path / "new" / "deeper" / "out.nc"
    assert main([*command(name, files, out), "--mkdir"]) == 0, capsys.readouterr().err
    written = out.with_suffix(".png") if name == "plot" else out
    # run and particles are given -q: no "wrote" line then
    quiet = "-q" in command(name, files, out)
    assert written.is_file() and ("wrote " in capsys.readouterr().out) is not quiet


def test_wrong_suffix_and_directory_names_are_refused(files, tmp_path, capsys, no_steps):
    assert (
        main(["compare", str(files / "d.nc"), str(files / "p.nc"), "-o", str(tmp_path / "x.txt")])
        == 2
    )
    assert "must end in '.nc' (a netCDF file)" in one_error_line(capsys)
    assert main(["plot", str(files / "d.nc"), "-o", str(tmp_path / "x.pdf")]) == 2
    assert "must end in '.png' (a PNG figure)" in one_error_line(capsys)
    (tmp_path / "dir.nc").mkdir()
    assert main(["particles", str(files / "c.toml"), "-o", str(tmp_path / "dir.nc")]) == 2
    assert "is a directory" in one_error_line(capsys)
    assert (
        main(
            [
                "convert-particles",
                str(files / "none.npy"),
                str(tmp_path / "y.txt"),
                "--domain",
                "circle",
            ]
        )
        == 2
    )
    assert "must end in '.nc'" in one_error_line(capsys)
    assert not list(tmp_path.glob(".*probe*"))  # the write test leaves nothing behind


def test_particle_ensemble_is_checked_before_the_first_seed(files, tmp_path, capsys, no_steps):
    assert (
        main(
            [
                "particles",
                str(files / "c.toml"),
                "--seeds",
                "0..2",
                "-o",
                str(tmp_path / "missing" / "p.nc"),
            ]
        )
        == 2
    )
    assert "does not exist" in one_error_line(capsys) and not (tmp_path / "missing").exists()


# -- sweep -----------------------------------------------------------------------------------
def sweep_file(folder: Path, output_dir: str) -> Path:
    (folder / "base.toml").write_text(CONFIG)
    path = folder / "sweep.toml"
    path.write_text(
        f'base = "base.toml"\noutput_dir = "{output_dir}"\n[vary]\n"model.beta" = [1.0]\n'
    )
    return path


def test_sweep_refuses_unwritable_and_missing_folders(tmp_path, capsys, no_steps):
    for folder in unwritable(tmp_path):
        path = sweep_file(tmp_path, str(folder / "cases"))
        assert main(["sweep", str(path)]) == 2  # at once: no_steps
        err = one_error_line(capsys)
        assert err.startswith("spheredens: error: sweep.output_dir: ") and str(folder) in err, err
        with pytest.raises(ConfigError, match="sweep.output_dir"):
            run_sweep(load_sweep(path))
    path = sweep_file(tmp_path, "missing/cases")
    assert main(["sweep", str(path)]) == 2
    assert "does not exist; create it or pass --mkdir" in one_error_line(capsys)
    with pytest.raises(ConfigError, match="does not exist; create it or pass mkdir=True"):
        run_sweep(load_sweep(path))
    assert not (tmp_path / "missing").exists()


def test_sweep_mkdir_creates_the_parents(tmp_path, capsys, monkeypatch):
    import spheredens.cli._commands

    calls = []
    monkeypatch.setattr(
        spheredens.cli._commands, "run_sweep", lambda sweep, **kw: calls.append(kw) or (None, {})
    )
    path = sweep_file(tmp_path, "new/deeper/cases")
    assert main(["sweep", str(path), "--mkdir"]) == 0
    assert (tmp_path / "new" / "deeper" / "cases").is_dir() and calls[0]["mkdir"] is True
    # output_dir itself, inside an existing folder, is the sweep's own folder: always created
    check_sweep_output(load_sweep(sweep_file(tmp_path, "own")))
    assert (tmp_path / "own").is_dir()


def test_sweep_combined_name_must_be_netcdf(tmp_path):
    (tmp_path / "base.toml").write_text(CONFIG)
    (tmp_path / "s.toml").write_text(
        'base = "base.toml"\ncombined = "all.txt"\n[vary]\n"model.beta" = [1.0]\n'
    )
    with pytest.raises(ConfigError, match="sweep.combined: = 'all.txt' must end in '.nc'"):
        load_sweep(tmp_path / "s.toml")


# -- the Python functions --------------------------------------------------------------------
def test_python_writers_check_before_work_and_mkdir_on_request(files, tmp_path, no_steps):
    cfg = sd.load_config(files / "c.toml")
    missing = tmp_path / "missing" / "out.nc"
    with pytest.raises(
        ConfigError,
        match=r"^output.path: the directory .* does not exist; create it "
        r"or pass mkdir=True$",
    ):
        sd.run(cfg, output=missing, progress=False)
    with pytest.raises(ConfigError, match="does not exist; create it or pass mkdir=True"):
        run_particles(cfg, output=missing, progress=False)
    ds = sd.open_run(files / "d.nc")
    with pytest.raises(ConfigError, match="does not exist"):
        plot_run(ds, missing.with_suffix(".png"))
    with pytest.raises(ConfigError, match="must end in '.png'"):
        plot_run(ds, tmp_path / "x.nc")
    for folder in unwritable(tmp_path):
        with pytest.raises(ConfigError, match="output.path: "):
            sd.run(cfg, output=folder / "out.nc", progress=False)
    with pytest.raises(ConfigError, match="checkpoint_seconds: must be a number of seconds > 0"):
        sd.run(cfg, output=tmp_path / "ok.nc", progress=False, checkpoint_seconds=-5)
    assert not (tmp_path / "missing").exists()


def test_python_mkdir_true_creates_the_folder(files, tmp_path):
    cfg = sd.load_config(files / "c.toml")
    ds = sd.run(cfg, output=tmp_path / "a" / "d.nc", progress=False, mkdir=True)
    assert (tmp_path / "a" / "d.nc").is_file()
    run_particles(cfg, output=tmp_path / "b" / "p.nc", progress=False, mkdir=True)
    assert (tmp_path / "b" / "p.nc").is_file()
    assert plot_run(ds, tmp_path / "c" / "d.png", mkdir=True).is_file()


# -- numeric options -------------------------------------------------------------------------
BAD_OPTIONS = [
    (["run", "c.toml", "--checkpoint-seconds", "-5"], "--checkpoint-seconds", "> 0"),
    (["run", "c.toml", "--checkpoint-seconds", "0"], "--checkpoint-seconds", "> 0"),
    (["run", "c.toml", "--checkpoint-seconds", "nan"], "--checkpoint-seconds", "> 0"),
    (["compare", "d.nc", "p.nc", "--points", "0"], "--points", "an integer >= 1"),
    (["compare", "d.nc", "p.nc", "--points", "2.5"], "--points", "an integer >= 1"),
    (["compare", "d.nc", "p.nc", "--times", "nan"], "--times", "a finite number >= 0"),
    (["sweep", "s.toml", "--workers", "0"], "--workers", "an integer >= 1"),
    (["plot", "d.nc", "--times", "1", "-2"], "--times", "a finite number >= 0"),
    (["plot", "d.nc", "--times", "inf"], "--times", "a finite number >= 0"),
    (["convert-particles", "a.npy", "b.nc", "--domain", "circle", "--dt", "0"], "--dt", "> 0"),
    (["convert-particles", "a.npy", "b.nc", "--domain", "circle", "--dt", "inf"], "--dt", "> 0"),
    (
        ["convert-particles", "a.npy", "b.nc", "--domain", "circle", "--times", "-1"],
        "--times",
        ">= 0",
    ),
    (
        ["convert-particles", "a.npy", "b.nc", "--domain", "circle", "--beta", "-1"],
        "--beta",
        ">= 0",
    ),
    (
        ["convert-particles", "a.npy", "b.nc", "--domain", "circle", "--beta", "nan"],
        "--beta",
        ">= 0",
    ),
]


@pytest.mark.parametrize(
    "argv, option, rule", BAD_OPTIONS, ids=[" ".join(c[0][:1] + c[0][-2:]) for c in BAD_OPTIONS]
)
def test_bad_numeric_option_is_one_line_exit_2(argv, option, rule, capsys, no_steps):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    err = one_error_line(capsys)
    assert err.startswith(f"spheredens: error: argument {option}: must be ") and rule in err, err
    assert f"got {argv[-1]!r}" in err and "usage:" not in err


def test_numeric_types_accept_their_range():
    assert number(int, minimum=1)("3") == 3
    assert number(float, strict=True, finite=False)("inf") == float(
        "inf"
    )  # --checkpoint-seconds inf
    assert number(float, finite=False)("inf") == float("inf")  # --beta inf (zero temperature)
    assert number(float)("0") == 0.0


def test_other_argument_errors_are_one_line_too(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["run"])
    assert exit_.value.code == 2
    assert "the following arguments are required: config" in one_error_line(capsys)


# -- inputs, warnings, numerical failures ------------------------------------------------------
@pytest.mark.parametrize("name", ["plot", "compare", "analyze-beta"])
def test_text_file_named_nc_is_one_line(name, files, tmp_path, capsys):
    text = str(files / "text.nc")
    argv = {
        "plot": ["plot", text, "-o", str(tmp_path / "x.png")],
        "compare": ["compare", text, str(files / "p.nc"), "-o", str(tmp_path / "x.nc")],
        "analyze-beta": ["analyze-beta", text, "-o", str(tmp_path / "x.nc")],
    }[name]
    assert main(argv) == 2
    err = one_error_line(capsys)
    assert "text.nc" in err and "netCDF" in err and "http" not in err and "engine" not in err, err


def test_text_file_named_nc_in_python(files):
    with pytest.raises(
        sd.SchemaError,
        match=r"not a netCDF-3 or netCDF-4 \(HDF5\) file \(it starts "
        r"with b'not netCDF",
    ):
        sd.open_run(files / "text.nc")


def test_warnings_are_one_line_without_source_location():
    line = format_warning(
        SpheredensWarning("n = 128 does not\nresolve"), SpheredensWarning, "/x/config.py", 215
    )
    assert line == "spheredens: warning: n = 128 does not resolve\n"
    other = format_warning(RuntimeWarning("overflow"), RuntimeWarning, "/x/y.py", 3)
    assert other == "spheredens: warning: overflow (RuntimeWarning)\n"
    assert warnings.formatwarning is not format_warning  # installed only while a command runs


def test_warning_of_a_real_run_prints_one_line(tmp_path):
    """A run allowed to be under-resolved warns; the command line prints one line, no source."""
    (tmp_path / "w.toml").write_text(
        "[model]\nbeta = 100.0\nK = [[1.75, 0.866025], [0.433013, 2.5]]\n[discretization]\nn = 64\n"
        "allow_underresolved = true\n[time]\nt_end = 0.01\nsnapshots = 2\n[output]\nfigure = "
        "false\n"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "spheredens.cli", "run", "w.toml", "-q"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    assert lines and all(line.startswith("spheredens: warning: ") for line in lines), proc.stderr
    assert "running anyway" in proc.stderr
    assert ".py:" not in proc.stderr and "warnings.warn" not in proc.stderr


BLOW_UP = (
    "[model]\nname = 'usa'\nbeta = 400.0\n[initial]\nname = 'von_mises_fisher'\nmeans = [[1.0, "
    "0.0]]\n"
    "kappas = [3.0]\n[discretization]\nn = 512\n[time]\nt_end = 1.0\n[output]\npath = 'b.nc'\n"
    "figure = false\n"
)


def test_simulation_error_is_printed_once(tmp_path):
    (tmp_path / "b.toml").write_text(BLOW_UP)
    proc = subprocess.run(
        [sys.executable, "-m", "spheredens.cli", "run", "b.toml", "-q"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("spheredens: run stopped: "), (
        proc.stderr
    )
    assert proc.stderr.count("CFL step") == 1


def test_simulate_does_not_log_the_failure_it_returns(tmp_path, caplog):
    (tmp_path / "b.toml").write_text(BLOW_UP)
    with caplog.at_level(logging.WARNING), pytest.raises(sd.SimulationError, match="CFL step"):
        sd.run(sd.load_config(tmp_path / "b.toml"), progress=False)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text
