"""Where results go and how files are opened: the library functions the command line uses
(output rule, default paths, per-seed particle files, combined files, summaries)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import xarray as xr

import spheredens as sd
from spheredens.analysis import analysis_output_path, finest, open_combined
from spheredens.cli import main
from spheredens.compare import compare_output_path, comparison_summary, ensemble_agreement
from spheredens.config import config_from_dict
from spheredens.io import check_output_path, read_netcdf
from spheredens.particles import particles_output_path, require_particles
from spheredens.plot import figure_path, slices_figure_path
from spheredens.runner import resume_point, run_output
from spheredens.sweep import outcome_summary

BASE = {
    "model": {"name": "sa", "beta": 1.0},
    "domain": {"name": "circle"},
    "initial": {"name": "uniform"},
    "discretization": {"scheme": "fv", "n": 64},
    "time": {"t_end": 0.2, "snapshots": 2},
}


def config(base_dir, *, particles=None, output=None):
    data = dict(BASE)
    if particles is not None:
        data["particles"] = particles
    if output is not None:
        data["output"] = output
    return config_from_dict(data, base_dir=base_dir)


# -- the output rule ---------------------------------------------------------------------------
def test_check_output_path_allows_new_files_and_overwrite(tmp_path):
    new = tmp_path / "new.nc"
    assert check_output_path(str(new), overwrite=False) == new
    old = tmp_path / "old.nc"
    old.write_text("x")
    assert check_output_path(old, overwrite=True) == old
    assert old.read_text() == "x"  # checking never touches the file


def test_check_output_path_refuses_existing_files(tmp_path):
    old = tmp_path / "old.nc"
    old.write_text("x")
    with pytest.raises(sd.SchemaError) as info:
        check_output_path(old, overwrite=False)
    assert str(info.value) == f"{str(old)!r} exists; choose another name or pass --overwrite"
    with pytest.raises(sd.SchemaError) as info:
        check_output_path(old, overwrite=False, option="--output")
    assert (
        str(info.value)
        == f"{str(old)!r} exists; choose another name (--output) or pass --overwrite"
    )
    with pytest.raises(sd.ConfigError) as info:
        check_output_path(old, overwrite=False, key="output.path", resumable=True)
    assert info.value.key == "output.path"
    assert str(info.value) == (
        f"output.path: {str(old)!r} exists; pass --resume to continue it, "
        "--overwrite to replace it, or choose another path"
    )


def test_resume_point_uses_the_output_rule(tmp_path):
    old = tmp_path / "old.nc"
    assert (
        resume_point(old, None, None, None, resume=False, overwrite=False, key="k") == {}
    )  # no file
    old.write_text("x")
    assert resume_point(old, None, None, None, resume=False, overwrite=True, key="k") == {}
    with pytest.raises(sd.ConfigError, match="^particles.path: .* exists; pass --resume"):
        resume_point(old, None, None, None, resume=False, overwrite=False, key="particles.path")


def test_cli_compare_and_convert_refuse_existing_outputs(tmp_path, capsys):
    cfg = config(tmp_path, output={"path": "d.nc", "figure": False})
    sd.run(cfg, progress=False)
    theta = np.random.default_rng(0).uniform(0, 2 * np.pi, (2, 20))
    np.savez(tmp_path / "p.npz", theta=theta, t=[0.0, 0.2])
    out = tmp_path / "p.nc"
    out.write_text("keep")
    assert main(["convert-particles", str(tmp_path / "p.npz"), str(out), "--domain", "circle"]) == 2
    assert capsys.readouterr().err == (
        f"spheredens: error: {str(out)!r} exists; choose another name or pass --overwrite\n"
    )
    assert out.read_text() == "keep"
    assert (
        main(
            [
                "convert-particles",
                str(tmp_path / "p.npz"),
                str(out),
                "--domain",
                "circle",
                "--overwrite",
            ]
        )
        == 0
    )
    capsys.readouterr()
    existing = tmp_path / "d_compare.nc"
    existing.write_text("keep")
    assert main(["compare", str(tmp_path / "d.nc"), str(out), "--no-figure"]) == 2
    assert capsys.readouterr().err == (
        f"spheredens: error: {str(existing)!r} exists; choose another "
        "name (--output) or pass --overwrite\n"
    )
    assert main(["compare", str(tmp_path / "d.nc"), str(out), "--no-figure", "--overwrite"]) == 0
    assert "wrote " in capsys.readouterr().out and xr.open_dataset(existing).sizes["time"] == 2


# -- default paths -----------------------------------------------------------------------------
def test_run_output(tmp_path):
    bare = config(tmp_path)
    assert run_output(bare, "runs/x/config.toml") == Path("runs/x/config.nc")
    assert run_output(bare, "runs/x/config.toml", "elsewhere.nc") == Path("elsewhere.nc")
    assert run_output(bare) is None  # nothing to name the file after: nothing is written
    named = config(tmp_path, output={"path": "named.nc"})
    assert run_output(named, "runs/x/config.toml") is None  # run writes to output.path
    assert named.output_path() == tmp_path / "named.nc"
    assert run_output(named, "runs/x/config.toml", "o.nc") == Path("o.nc")


def test_default_output_names(tmp_path):
    assert compare_output_path("a/run.nc") == Path("a/run_compare.nc")
    assert compare_output_path("a/run.nc", "b.nc") == Path("b.nc")
    assert analysis_output_path("s/combined.nc") == Path("s/combined_beta_analysis.nc")
    assert analysis_output_path("s/combined.nc", "x.nc") == Path("x.nc")
    assert figure_path("a/run.nc") == Path("a/run.png")
    assert slices_figure_path("a/run.png") == Path("a/run_slices.png")


def test_particles_output_path_precedence(tmp_path):
    both = config(tmp_path, particles={"n": 10, "path": "sub/p.nc"}, output={"path": "out/d.nc"})
    assert particles_output_path(both, 3, several=False) == tmp_path / "sub/p.nc"
    assert particles_output_path(both, 3, several=True) == tmp_path / "sub/p_seed3.nc"
    absolute = config(tmp_path, particles={"n": 10, "path": str(tmp_path / "abs.nc")})
    assert particles_output_path(absolute, 0, several=False) == tmp_path / "abs.nc"
    from_output = config(tmp_path, particles={"n": 10}, output={"path": "out/d.nc"})
    assert particles_output_path(from_output, 1, several=False) == tmp_path / "out/d_particles.nc"
    assert (
        particles_output_path(from_output, 1, several=True) == tmp_path / "out/d_particles_seed1.nc"
    )
    bare = config(tmp_path, particles={"n": 10})
    assert particles_output_path(bare, 0, several=False) is None
    assert particles_output_path(bare, 0, several=False, config_path="r/c.toml") == Path(
        "r/c_particles.nc"
    )
    assert particles_output_path(bare, 2, several=True, config_path="r/c.toml") == Path(
        "r/c_particles_seed2.nc"
    )
    # an explicit output wins and is taken as it is
    assert particles_output_path(both, 2, several=False, output="o.nc") == Path("o.nc")
    assert particles_output_path(both, 2, several=True, output="o.nc") == Path("o_seed2.nc")


def test_particles_need_a_particles_table(tmp_path):
    cfg = config(tmp_path)
    with pytest.raises(sd.ConfigError) as info:
        require_particles(cfg, "runs/c.toml")
    assert info.value.key == "particles" and str(info.value).startswith(
        "particles: runs/c.toml has no [particles] table (e.g. [particles] n = 1000"
    )
    with pytest.raises(sd.ConfigError, match="^particles: the configuration has no"):
        particles_output_path(cfg, 0, several=False)


def test_cli_particles_file_names(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "c.toml").write_text(
        "[model]\nbeta = 1.0\n[initial]\nname = 'uniform'\n[discretization]\nn = 64\n"
        "[time]\nt_end = 0.1\nsnapshots = 2\n[particles]\nn = 20\ndt = 0.05\n"
    )
    assert main(["particles", "c.toml", "--seeds", "1,2"]) == 0  # -q would print no "wrote" line
    out = capsys.readouterr().out
    assert (
        "wrote c_particles_seed1.nc  (20 particles" in out and "wrote c_particles_seed2.nc" in out
    )
    assert main(["particles", "c.toml", "-q", "-o", "e.nc", "--seeds", "4..5"]) == 0
    assert sorted(p.name for p in tmp_path.glob("e_seed*.nc")) == ["e_seed4.nc", "e_seed5.nc"]
    assert capsys.readouterr().out == ""  # --quiet: no "wrote" lines
    assert main(["particles", "c.toml", "--seeds", "1"]) == 0  # one seed: no suffix
    assert "wrote c_particles.nc  (20 particles, iid, seed 1" in capsys.readouterr().out


# -- opening files -----------------------------------------------------------------------------
def test_read_netcdf_errors_are_one_line(tmp_path):
    with pytest.raises(sd.SchemaError) as info:
        read_netcdf(tmp_path / "none.nc")
    assert str(info.value) == f"{str(tmp_path / 'none.nc')!r} does not exist"
    bad = tmp_path / "bad.nc"
    bad.write_text("not netCDF")
    with pytest.raises(sd.SchemaError, match="^cannot read '.*bad.nc' as netCDF: "):
        read_netcdf(bad)
    xr.Dataset({"a": ("x", [1.0, 2.0])}).to_netcdf(tmp_path / "ok.nc")
    ds = read_netcdf(tmp_path / "ok.nc")
    assert list(ds["a"].values) == [1.0, 2.0]


def test_open_combined_checks_the_layout(tmp_path):
    path = tmp_path / "c.nc"
    xr.Dataset(
        {"w2_projection": (("beta", "time"), np.ones((2, 3)))},
        coords={"beta": [1.0, 2.0], "time": [0.0, 1.0, 2.0]},
    ).to_netcdf(path)
    assert open_combined(path).sizes == {"beta": 2, "time": 3}
    xr.Dataset({"mass": ("time", np.ones(3))}, coords={"time": [0.0, 1.0, 2.0]}).to_netcdf(path)
    with pytest.raises(sd.SchemaError, match="^analyze-beta needs a combined sweep dataset"):
        open_combined(path)
    with pytest.raises(sd.SchemaError, match="does not exist"):
        open_combined(tmp_path / "absent.nc")


# -- summaries ---------------------------------------------------------------------------------
def test_finest_takes_the_last_resolution():
    ds = xr.Dataset(
        {"min_w2": (("beta", "n"), [[1.0, 2.0], [3.0, 4.0]])},
        coords={"beta": [1.0, 2.0], "n": [64, 128]},
    )
    assert list(finest(ds)["min_w2"].values) == [2.0, 4.0]
    only_beta = ds.isel(n=0)
    assert finest(only_beta) is only_beta


def test_outcome_summary():
    summary = outcome_summary({"a": "ran", "b": "done earlier", "c": "failed: boom", "d": "ran"})
    assert summary == {"ran": 2, "done_earlier": 1, "failed": {"c": "failed: boom"}}


def test_comparison_summary():
    w2 = np.array([[0.1, 0.2], [0.3, 0.4]])
    between = np.array([[0.0, 0.5], [0.5, 0.0]])
    slices = np.array([[np.nan, np.nan], [0.1, np.nan]])
    cmp = xr.Dataset(
        {
            "w2": (("run", "time"), w2),
            "w2_between_runs": (("run", "other"), between),
            "w2_slice": (("run", "time", "slice"), np.zeros((2, 2, 2))),
            "w2_slice_mean": (("time", "slice"), slices),
        },
        coords={"time": [0.0, 1.0]},
    )
    summary = comparison_summary(cmp)
    expected = ensemble_agreement(w2[:, -1], between)
    assert summary["ensemble"]["rank"] == expected["rank"]
    assert summary["ensemble"]["density_mean"] == expected["density_mean"]
    assert summary["slices"][0] == {
        "mean": pytest.approx(np.nan, nan_ok=True),
        "max": pytest.approx(np.nan, nan_ok=True),
        "count": 0,
    }
    assert summary["slices"][1] == {"mean": 0.1, "max": 0.1, "count": 1}
    single = comparison_summary(cmp.drop_vars(["w2_between_runs", "w2_slice", "w2_slice_mean"]))
    assert single == {"ensemble": None, "slices": None}
