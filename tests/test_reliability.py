"""Reliability: SIGKILL at random moments and --resume bit for bit, SIGTERM, write failures,
forced blow-ups."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import xarray as xr
from conftest import stop_after_steps

import spheredens as sd
from spheredens.cli import main
from spheredens.exceptions import OutputError

CONFIG = """
[model]
name = "sa"
beta = 10.0
K = [[1.75, 0.866025], [0.433013, 2.5]]
V = [[1.0, 0.0], [0.0, 0.5]]
[initial]
name = "random_smooth"
seed = 2
[discretization]
scheme = "fv"
n = 256
[time]
t_end = 6.0
snapshots = 25
[output]
path = "run.nc"
figure = false
"""
COMPARED = ("rho", "mass", "min_rho", "w2_projection", "energy")


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ref")
    (folder / "c.toml").write_text(CONFIG)
    return sd.run(sd.load_config(folder / "c.toml"), progress=False)


def start(folder, *extra):
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "spheredens.cli",
            "run",
            str(folder / "c.toml"),
            "-q",
            "--no-figure",
            "--checkpoint-seconds",
            "0.05",
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def assert_prefix_of(ds, ref):
    n = ds.sizes["time"]
    assert n <= ref.sizes["time"]
    for name in COMPARED:
        np.testing.assert_array_equal(ds[name].values, ref[name].values[:n])


def assert_identical(ds, ref):
    assert ds.sizes["time"] == ref.sizes["time"] and ds.attrs["run_status"] == "complete"
    for name in COMPARED:
        np.testing.assert_array_equal(ds[name].values, ref[name].values)
    assert ds.attrs["n_steps"] == ref.attrs["n_steps"]


@pytest.mark.slow
def test_sigkill_at_random_moments_then_resume_bit_for_bit(tmp_path, reference):
    rng = np.random.default_rng(12345)
    outcomes = {"no file": 0, "partial": 0, "complete": 0}
    for trial in range(20):
        folder = tmp_path / f"trial{trial}"
        folder.mkdir()
        (folder / "c.toml").write_text(CONFIG)
        proc = start(folder)
        # kill at a random moment of the run: after it has started writing (start-up time
        # varies with the machine's load), then a random delay within the run's duration
        out = folder / "run.nc"
        deadline = time.time() + 60
        while time.time() < deadline and not out.exists() and proc.poll() is None:
            time.sleep(0.01)
        time.sleep(float(rng.uniform(0.0, 1.2)))
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
        if not out.exists():
            outcomes["no file"] += 1
        else:
            with xr.open_dataset(out) as ds:  # always opens: writes are atomic
                assert_prefix_of(ds, reference)
                outcomes[ds.attrs["run_status"]] += 1
        resumed = sd.run(sd.load_config(folder / "c.toml"), progress=False, resume=True)
        assert_identical(resumed, reference)
    assert outcomes["partial"] >= 5, outcomes  # the kills did land mid-run


def test_sigterm_stops_cleanly_and_resumes(tmp_path, reference):
    (tmp_path / "c.toml").write_text(CONFIG)
    proc = start(tmp_path)
    out = tmp_path / "run.nc"
    deadline = time.time() + 60
    while time.time() < deadline and not out.exists():
        time.sleep(0.05)
    time.sleep(0.3)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert "terminated" in err and "--resume" in err and "Traceback" not in err
    with xr.open_dataset(out) as ds:
        assert ds.attrs["run_status"] == "partial" and ds.attrs["stop_reason"] == "terminated"
        assert_prefix_of(ds, reference)
    assert main(["run", str(tmp_path / "c.toml"), "-q", "--no-figure", "--resume"]) == 0
    assert_identical(sd.open_run(out), reference)
    # a finished file is left alone without --overwrite, and resuming it does nothing
    assert main(["run", str(tmp_path / "c.toml"), "-q", "--no-figure"]) == 2
    assert main(["run", str(tmp_path / "c.toml"), "-q", "--no-figure", "--resume"]) == 0


def test_resume_refuses_a_different_configuration(tmp_path):
    (tmp_path / "c.toml").write_text(CONFIG.replace("t_end = 6.0", "t_end = 0.5"))
    sd.run(sd.load_config(tmp_path / "c.toml"), progress=False)
    (tmp_path / "c.toml").write_text(
        CONFIG.replace("t_end = 6.0", "t_end = 0.5").replace("beta = 10.0", "beta = 11.0")
    )
    with pytest.raises(sd.SchemaError, match="different configuration"):
        sd.run(sd.load_config(tmp_path / "c.toml"), progress=False, resume=True)


def test_spectral_state_resumes_bit_for_bit(tmp_path):
    """sh_spectral keeps complex coefficients: the checkpoint stores them exactly."""
    cfg = sd.config_from_dict(
        {
            "model": {"name": "sa", "beta": 5.0},
            "domain": {"name": "sphere"},
            "initial": {"name": "random_smooth", "seed": 1, "bandwidth": 3},
            "discretization": {"scheme": "sh_spectral", "lmax": 15},
            "time": {"t_end": 1.0, "snapshots": 5},
            "output": {"path": "s.nc"},
        },
        base_dir=tmp_path,
    )
    full = sd.run(cfg.replace(**{"output.path": "full.nc"}), progress=False)
    with stop_after_steps(7, "interrupted"):
        with pytest.raises(KeyboardInterrupt):
            sd.run(cfg, progress=False)
    assert sd.open_run(tmp_path / "s.nc").attrs["run_status"] == "partial"
    resumed = sd.run(cfg, progress=False, resume=True)
    np.testing.assert_array_equal(resumed["rho"].values, full["rho"].values)


def test_disk_full_keeps_previous_file_and_reports(tmp_path, monkeypatch):
    (tmp_path / "c.toml").write_text(CONFIG.replace("t_end = 6.0", "t_end = 1.0"))
    calls = {"n": 0}
    original = xr.Dataset.to_netcdf

    def failing(self, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] > 3:
            raise OSError(28, "No space left on device")
        return original(self, *args, **kwargs)

    monkeypatch.setattr(xr.Dataset, "to_netcdf", failing)
    with pytest.raises(OutputError, match="No space left on device"):
        sd.run(sd.load_config(tmp_path / "c.toml"), progress=False, checkpoint_seconds=1e9)
    monkeypatch.setattr(xr.Dataset, "to_netcdf", original)
    ds = sd.open_run(tmp_path / "run.nc")  # the last good file (the third write), intact
    assert ds.attrs["run_status"] == "partial" and 1 <= ds.sizes["time"] < 25
    assert not [p for p in os.listdir(tmp_path) if ".tmp-" in p]
    resumed = sd.run(sd.load_config(tmp_path / "c.toml"), progress=False, resume=True)
    assert resumed.sizes["time"] == 25


def test_blow_up_is_diagnosed_and_keeps_last_snapshot(tmp_path, capsys):
    """usa at beta = 400: speeds ~ e^400 collapse the CFL step; the run stops at once with the
    diagnosis, and the file keeps the t = 0 snapshot."""
    (tmp_path / "b.toml").write_text(
        "[model]\nname = 'usa'\nbeta = 400.0\n[initial]\nname = 'von_mises_fisher'\n"
        "means = [[1.0, 0.0]]\nkappas = [3.0]\n[discretization]\nn = 512\n[time]\nt_end = 1.0\n"
        "[output]\npath = 'b.nc'\nfigure = false\n"
    )
    assert main(["run", str(tmp_path / "b.toml"), "-q"]) == 1
    err = capsys.readouterr().err
    assert (
        err.startswith("spheredens: run stopped: at t = 0") and "CFL step" in err and "beta" in err
    )
    ds = sd.open_run(tmp_path / "b.nc")
    assert ds.attrs["stop_reason"] == "dt_collapse" and list(ds.time.values) == [0.0]


def test_usa_overflow_refused_before_running():
    with pytest.raises(sd.ConfigError, match="model.beta.*exp\\(800\\)"):
        sd.config_from_dict({"model": {"name": "usa", "beta": 800.0}})


def test_corrupted_velocity_is_caught(tmp_path, monkeypatch):
    from spheredens.schemes import FiniteVolumeScheme

    original = FiniteVolumeScheme.face_velocity
    monkeypatch.setattr(
        FiniteVolumeScheme, "face_velocity", lambda self, state: 3.0 * original(self, state) + 2.0
    )
    cfg = sd.config_from_dict(
        {"model": {"beta": 1.0}, "time": {"t_end": 1.0}, "output": {"path": "x.nc"}},
        base_dir=tmp_path,
    )
    with pytest.raises(sd.SimulationError, match="exceeds \\|\\|V\\|\\|"):
        sd.run(cfg, progress=False)
    assert sd.open_run(tmp_path / "x.nc").sizes["time"] == 1


def test_particle_run_resumes_bit_for_bit(tmp_path):
    from spheredens.particles import run_particles

    cfg = sd.config_from_dict(
        {
            "model": {"beta": 3.0},
            "time": {"t_end": 1.0, "snapshots": 5},
            "particles": {"n": 50, "dt": 0.05, "seed": 4},
        },
        base_dir=tmp_path,
    )
    full = run_particles(cfg)
    with stop_after_steps(7, "terminated"):
        with pytest.raises(KeyboardInterrupt):
            run_particles(cfg, output=tmp_path / "p.nc")
    assert xr.open_dataset(tmp_path / "p.nc").attrs["run_status"] == "partial"
    with pytest.raises(sd.ConfigError, match="exists"):
        run_particles(cfg, output=tmp_path / "p.nc")
    resumed = run_particles(cfg, output=tmp_path / "p.nc", resume=True)
    np.testing.assert_array_equal(resumed["position"].values, full["position"].values)


def test_resume_changes_the_horizon_with_the_result_of_the_new_one(tmp_path, reference):
    """A run resumed with another t_end (same snapshot spacing) equals the run made with that
    horizon from the start: a complete run is extended, a partial one ended earlier."""
    short = CONFIG.replace("t_end = 6.0", "t_end = 3.0").replace("snapshots = 25", "snapshots = 13")
    (tmp_path / "c.toml").write_text(short)
    sd.run(sd.load_config(tmp_path / "c.toml"), progress=False)
    (tmp_path / "c.toml").write_text(CONFIG)  # extend the complete run to t = 6
    assert main(["run", str(tmp_path / "c.toml"), "-q", "--no-figure", "--resume"]) == 0
    assert_identical(sd.open_run(tmp_path / "run.nc"), reference)
    # a partial run of t_end = 6 ended at t = 3 instead
    other = tmp_path / "partial"
    other.mkdir()
    (other / "c.toml").write_text(CONFIG)
    with stop_after_steps(10, "interrupted"):
        with pytest.raises(KeyboardInterrupt):
            sd.run(sd.load_config(other / "c.toml"), progress=False)
    assert sd.open_run(other / "run.nc").attrs["checkpoint_time"] < 3.0
    (other / "c.toml").write_text(short)
    ended = sd.run(sd.load_config(other / "c.toml"), progress=False, resume=True)
    assert ended.attrs["run_status"] == "complete" and float(ended["time"][-1]) == 3.0
    assert_prefix_of(ended, reference)


def test_resume_refuses_a_horizon_that_moves_written_snapshots(tmp_path):
    (tmp_path / "c.toml").write_text(
        CONFIG.replace("t_end = 6.0", "t_end = 1.0").replace("snapshots = 25", "snapshots = 5")
    )
    sd.run(sd.load_config(tmp_path / "c.toml"), progress=False)
    # t_end 2 with 5 snapshots: spacing 0.5, so the written times 0.25, 0.75 are not its times
    (tmp_path / "c.toml").write_text(
        CONFIG.replace("t_end = 6.0", "t_end = 2.0").replace("snapshots = 25", "snapshots = 5")
    )
    with pytest.raises(sd.SchemaError, match="horizon"):
        sd.run(sd.load_config(tmp_path / "c.toml"), progress=False, resume=True)
    # nor may a horizon end before the checkpoint
    (tmp_path / "c.toml").write_text(
        CONFIG.replace("t_end = 6.0", "t_end = 0.5").replace("snapshots = 25", "snapshots = 3")
    )
    with pytest.raises(sd.SchemaError, match="horizon"):
        sd.run(sd.load_config(tmp_path / "c.toml"), progress=False, resume=True)


def test_log_sl_run_extended_keeps_its_step_control(tmp_path):
    """The error-controlled scheme carries its next step in the checkpoint: an extended run is
    bit for bit the longer run."""
    data = {
        "model": {
            "name": "sa",
            "beta": 30.0,
            "K": [[1.75, 0.866025], [0.433013, 2.5]],
            "V": [[1.0, 0.0], [0.0, 0.5]],
        },
        "initial": {"name": "random_smooth", "seed": 2},
        "discretization": {"scheme": "log_sl", "n": 192, "tolerance": 1e-2},
        "time": {"t_end": 4.0, "snapshots": 9},
        "output": {"path": "a.nc", "figure": False},
    }
    full = sd.run(sd.config_from_dict(data, base_dir=tmp_path), progress=False)
    data["time"] = {"t_end": 2.0, "snapshots": 5}
    data["output"]["path"] = "b.nc"
    sd.run(sd.config_from_dict(data, base_dir=tmp_path), progress=False)
    data["time"] = {"t_end": 4.0, "snapshots": 9}
    first = sd.open_run(tmp_path / "b.nc").attrs
    extended = sd.run(sd.config_from_dict(data, base_dir=tmp_path), progress=False, resume=True)
    for name in ("rho", "log_rho", "rho_centroid", "w2_projection"):
        np.testing.assert_array_equal(extended[name].values, full[name].values)
    assert extended.attrs["n_steps"] == full.attrs["n_steps"]
    # the wall time of the whole run adds the segments: this one's and the checkpoint's
    assert first["checkpoint_wall_seconds"] == pytest.approx(
        first["wall_time_total_seconds"], abs=0.05
    )
    assert first["checkpoint_wall_seconds"] > 0
    assert extended.attrs["wall_time_total_seconds"] == pytest.approx(
        first["checkpoint_wall_seconds"] + extended.attrs["wall_time_seconds"], rel=1e-12
    )
