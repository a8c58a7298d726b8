"""Output files: the layout of docs/dataset.md, round trip on both netCDF engines, reproducibility
and interrupted runs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import xarray as xr
from conftest import EXAMPLE_C, make_config

import spheredens as sd
from spheredens.io import REQUIRED_ATTRS, REQUIRED_VARS, open_run, validate_schema

DATASET_ATTRS = (
    "Conventions",
    "spheredens_schema",
    "spheredens_version",
    "model",
    "domain",
    "scheme",
    "beta",
    "config",
    "history",
    "title",
)
DATASET_VARS = ("rho", "weight", "Q", "K", "V", "mass", "energy", "w2_projection")


def test_io_checks_cover_dataset_md():
    assert set(DATASET_ATTRS) <= set(REQUIRED_ATTRS)
    assert set(DATASET_VARS) <= set(REQUIRED_VARS)


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """Two small runs: sa with example C (w2 defined) and usa with Q = K = V = I (energy
    defined)."""
    folder = tmp_path_factory.mktemp("runs")
    out = {}
    for label, model, scheme in [
        ("sa", {"beta": 10.0, **EXAMPLE_C}, "fv"),
        ("usa", {"name": "usa", "beta": 3.0}, "fourier"),
    ]:
        cfg = make_config(
            model=model,
            discretization={"scheme": scheme, "n": 128},
            initial={"name": "random_smooth", "seed": 3, "amplitude": 0.7},
            time={"t_end": 2.0, "snapshots": 5},
            output={"path": f"{label}.nc"},
            base_dir=folder,
        )
        ds = sd.run(cfg, progress=False)
        out[label] = (cfg, ds, folder / f"{label}.nc")
    return out


@pytest.mark.parametrize("engine", ["netcdf4", "h5netcdf"])
@pytest.mark.parametrize("label", ["sa", "usa"])
def test_round_trip_has_every_variable_and_attribute(written, label, engine):
    cfg, ds, path = written[label]
    with xr.open_dataset(path, engine=engine) as back:
        for name in DATASET_ATTRS:
            assert name in back.attrs, name
        for name in DATASET_VARS:
            assert name in back.variables, name
        assert back.attrs["Conventions"] == "CF-1.10"
        assert back.attrs["spheredens_schema"] == "spheredens-1"
        assert back.attrs["domain"] == "circle" and back.attrs["model"] == cfg.model.name
        assert back.attrs["beta"] == cfg.model.beta
        assert back["rho"].dims == ("time", "theta")
        assert back["time"].attrs["units"] == "1"
        for name in ("rho", "weight", "mass", "min_rho", "energy", "w2_projection"):
            assert "units" in back[name].attrs and "long_name" in back[name].attrs, name
        np.testing.assert_array_equal(back["rho"].values, ds["rho"].values)
        np.testing.assert_array_equal(back["time"].values, [0.0, 0.5, 1.0, 1.5, 2.0])
        mass = (back["rho"] * back["weight"]).sum("theta").values
        assert np.abs(mass - 1.0).max() <= 1e-12
        np.testing.assert_array_equal(back["K"].values, np.array(cfg.model.K))


def test_diagnostics_defined_where_models_md_defines_them(written):
    _, sa, _ = written["sa"]
    _, usa, _ = written["usa"]
    assert np.all(np.isfinite(sa["w2_projection"])) and np.all(np.isnan(sa["energy"]))
    assert "not defined" in sa["energy"].attrs["comment"]
    assert np.all(np.isfinite(usa["energy"])) and np.all(np.isnan(usa["w2_projection"]))
    # E_beta never decreases along usa with Q = K = V = I (gradient ascent); round-off slack only
    energy = usa["energy"].values
    assert np.all(np.diff(energy) >= -1e-13 * np.abs(energy).max()), energy


def test_config_attribute_reproduces_the_run(written, tmp_path):
    cfg, ds, path = written["sa"]
    again_path = tmp_path / "again.toml"
    again_path.write_text(ds.attrs["config"])
    cfg2 = sd.load_config(again_path)
    assert cfg2.to_dict() == cfg.to_dict()
    ds2 = sd.run(cfg2.replace(**{"output.path": str(tmp_path / "again.nc")}), progress=False)
    np.testing.assert_array_equal(ds2["rho"].values, ds["rho"].values)


def test_open_run_validates_schema(written, tmp_path):
    _, _, path = written["sa"]
    assert open_run(path).attrs["run_status"] == "complete"
    bad = tmp_path / "bad.nc"
    xr.Dataset({"rho": ("theta", np.ones(4))}).to_netcdf(bad)
    with pytest.raises(sd.SchemaError, match="spheredens_schema"):
        open_run(bad)
    with pytest.raises(sd.SchemaError):
        validate_schema(xr.Dataset())


def test_interrupted_run_leaves_readable_partial_file(tmp_path):
    """SIGINT mid-run: exit code 130, a message, and a file holding the snapshots done so far."""
    config = tmp_path / "long.toml"
    config.write_text(
        "[model]\nname = 'sa'\nbeta = 30.0\nK = [[1.75, 0.866025], [0.433013, 2.5]]\n"
        "V = [[1.0, 0.0], [0.0, 0.5]]\n[discretization]\nscheme = 'fv'\nn = 1024\n"
        "[time]\nt_end = 200.0\nsnapshots = 2001\n[output]\npath = 'long.nc'\nfigure = false\n"
    )
    out = tmp_path / "long.nc"
    proc = subprocess.Popen(
        [sys.executable, "-m", "spheredens.cli", "run", str(config), "-q"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.time() + 120
    while time.time() < deadline:
        if out.exists():
            with xr.open_dataset(out) as ds:
                if ds.sizes["time"] >= 3:
                    break
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert "interrupted" in stderr and "Traceback" not in stderr
    ds = open_run(out)
    assert ds.attrs["run_status"] == "partial" and ds.attrs["stop_reason"] == "interrupted"
    assert 3 <= ds.sizes["time"] < 2001
    assert np.abs(ds["mass"].values - 1.0).max() <= 1e-12
    assert not [p for p in os.listdir(tmp_path) if ".tmp-" in p]
