"""Hostile values and paths get one line, not a traceback or a wrong message (also the
errors of the accessor and of open_run).

One test per defect of the probe, each of which failed before: a very concentrated von
Mises-Fisher density (kappa = 1e10) gave an all-NaN t = 0 snapshot; K or V of 1e308, a huge
integer, deeply nested TOML, a 300-character name, a loop of symbolic links and a MemoryError
gave tracebacks; a directory or /dev/null was "does not exist"; a 10 MB value was echoed
whole; ``ds.sd.marginal()`` on a particle file raised a bare KeyError and ``open_run`` on one
listed what it lacks. The CLI cases of the same inputs are in tests/test_hostile_inputs.py
(ids ``value_*``).
"""

from __future__ import annotations

import math
import os
import warnings
from pathlib import Path

import numpy as np
import pytest

import spheredens as sd
from spheredens.cli import main
from spheredens.config import config_from_dict, load_config
from spheredens.exceptions import ConfigError, SchemaError, SpheredensWarning, shown
from spheredens.grids import RingMesh
from spheredens.initial import VonMisesFisher, scaled_bessel_i, von_mises_fisher_density
from spheredens.models import Model
from spheredens.particles import run_particles
from spheredens.targets import AssumptionError, projection_measure

V_GAP = [[1.0, 0.0], [0.0, 0.5]]  # A = V B^T symmetric with a spectral gap: Pi_# rho_0 defined
MEAN = [0.6, 0.8]  # at angle 0.9273, inside fv cell 4 of 32 ([4 h, 5 h], h = 2 pi / 32)


def circle(**tables):
    data = {
        "model": {"name": "sa", "beta": 2.0, "V": V_GAP},
        "initial": {"name": "von_mises_fisher", "means": [MEAN], "kappas": [1e10]},
        "discretization": {"scheme": "fv", "n": 32},
        "time": {"t_end": 0.2, "snapshots": 3},
    }
    for name, table in tables.items():
        data[name] = {**data.get(name, {}), **table}
    return data


def one_line(capsys, argv):
    """The CLI exits 2 with exactly one line ``spheredens: error: ...``: returns it."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("spheredens: error: "), err
    return err


# -- probe 6: a very concentrated von Mises-Fisher density -------------------------------------
def test_scaled_bessel_function_is_finite_beyond_scipy():
    # scipy's ive is NaN from about 2e9 on; the series is exact to round-off from 1e8 (its first
    # omitted term is below 1e-24): at 1e8 both agree to 4 ulp, at 1e10 the series is
    # 1 / sqrt(2 pi kappa) (1 + 1 / (8 kappa) + ...)
    from scipy import special

    for nu in (0.0, 0.5, 1.0):
        assert scaled_bessel_i(nu, 1e8) == pytest.approx(float(special.ive(nu, 1e8)), rel=1e-15)
    k = 1e10
    assert scaled_bessel_i(0.0, k) == pytest.approx(
        (1 + 1 / (8 * k)) / math.sqrt(2 * math.pi * k), rel=1e-15
    )
    assert math.isfinite(scaled_bessel_i(0.0, 1e308)) and scaled_bessel_i(0.0, 1e308) > 0
    # the density's peak: C(kappa) = 1 / (2 pi ive(0, kappa))
    #                               -> sqrt(kappa / (2 pi)) (1 - 1 / (8 kappa))
    peak = von_mises_fisher_density(np.array([[1.0, 0.0]]), np.array([1.0, 0.0]), k)
    assert peak[0] == pytest.approx(math.sqrt(k / (2 * math.pi)), rel=1e-10)


def test_concentrated_von_mises_fisher_on_the_circle_is_one_cell_not_nan(tmp_path):
    cfg = config_from_dict(circle())
    with pytest.warns(
        SpheredensWarning,
        match=r"^initial.kappas: a component of the initial density \(width "
        r"1 / sqrt\(kappa\) = 1e-05\) is narrower than this grid "
        r"resolves \(cells of 0.196\)",
    ):
        ds = sd.run(cfg, output=tmp_path / "c.nc", progress=False)
    rho0 = ds["rho"].values[0]
    h = 2 * np.pi / 32
    # the width 1e-5 is far inside cell 4: its exact cell averages are 1 / h there, 0 elsewhere
    expected = np.zeros(32)
    expected[4] = 1.0 / h
    np.testing.assert_allclose(rho0, expected, rtol=1e-14, atol=0.0)
    assert abs(float(np.sum(rho0 * ds["weight"].values)) - 1.0) <= 1e-15
    assert np.all(np.isfinite(ds["rho"].values)) and ds.attrs["stop_reason"] == "end"
    # Pi_# rho_0 puts all the mass on the side of the mean: the same target as kappa = 1e5 (whose
    # mass beyond the perpendicular through u = (1, 0) is erfc(0.6 sqrt(1e5 / 2)) / 2, far below
    # round-off), so W2 at t = 0 is that of the same one-cell density to the same target
    w2 = ds["w2_projection"].values
    assert np.all(np.isfinite(w2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SpheredensWarning)
        ref = sd.run(config_from_dict(circle(initial={"kappas": [1e5]})), progress=False)
    assert w2[0] == pytest.approx(float(ref["w2_projection"].values[0]), rel=1e-12)


def test_concentrated_von_mises_fisher_on_the_sphere_is_finite_with_mass_1(tmp_path):
    cell = 40  # the mean at the centre of cell 40 of the nlat = 16 ring mesh
    mean = RingMesh(16).points[cell]
    data = {
        "model": {"name": "sa", "beta": 2.0, "V": [[1.0, 0, 0], [0, 0.5, 0], [0, 0, 0.25]]},
        "domain": {"name": "sphere"},
        "initial": {"name": "von_mises_fisher", "means": [mean.tolist()], "kappas": [1e10]},
        "discretization": {"scheme": "fv", "nlat": 16},
        "time": {"t_end": 0.2, "snapshots": 2},
    }
    with pytest.warns(SpheredensWarning, match="initial.kappas"):
        ds = sd.run(config_from_dict(data), output=tmp_path / "s.nc", progress=False)
    rho0, weight = ds["rho"].values[0], ds["weight"].values
    assert np.all(np.isfinite(ds["rho"].values))
    # the width 1e-5 is far inside the cell (about 0.2 rad wide): it holds the whole mass
    expected = np.zeros_like(rho0)
    expected[cell] = 1.0 / weight[cell]
    np.testing.assert_allclose(rho0, expected, rtol=1e-14, atol=0.0)
    assert np.all(np.isfinite(ds["w2_projection"].values))


def test_mixture_keeps_the_weight_of_a_component_narrower_than_the_grid():
    # weights 0.5 / 0.5: a kappa = 1e10 spike in cell 4 and a broad kappa = 1 component; the spike's
    # samples all underflow, yet it keeps its weight 0.5 (before: the spike's mass was lost or NaN)
    cfg = config_from_dict(
        circle(initial={"means": [MEAN, [-1.0, 0.0]], "kappas": [1e10, 1.0], "weights": [1.0, 1.0]})
    )
    with pytest.warns(SpheredensWarning, match="initial.kappas"):
        ds = sd.run(cfg, progress=False)
    rho0, h = ds["rho"].values[0], 2 * np.pi / 32
    broad = config_from_dict(circle(initial={"means": [[-1.0, 0.0]], "kappas": [1.0]}))
    rho_broad = sd.run(broad, progress=False)["rho"].values[0]
    expected = 0.5 * rho_broad
    expected[4] += 0.5 / h
    np.testing.assert_allclose(rho0, expected, rtol=1e-13, atol=0.0)


def test_initial_state_without_mass_is_refused_before_anything_is_written(tmp_path):
    # usa_av with perturbed slices multiplies the density by a factor: no components to sample
    # apart; every sample of the kappa = 1e10 spike underflows (mass 0): one line, no file
    cfg = config_from_dict(
        {
            "model": {"name": "usa_av", "beta": 1.0},
            "initial": {"name": "von_mises_fisher", "means": [MEAN], "kappas": [1e10]},
            "auxiliary": {"kernel": "rope", "slices": 3, "slice_perturbation": 0.5},
            "discretization": {"n": 32},
            "time": {"t_end": 0.2, "snapshots": 3},
        }
    )
    out = tmp_path / "av.nc"
    with pytest.raises(
        ConfigError,
        match=r"^initial: the initial density sampled on this grid has mass 0, "
        r"so no initial state can be formed \(nothing was written\)",
    ):
        sd.run(cfg, output=out, progress=False)
    assert not out.exists()


def test_huge_mixture_weights_are_normalized():
    density = VonMisesFisher.from_params(
        {"means": [[1.0, 0.0], [0.0, 1.0]], "kappas": [1.0, 1.0], "weights": [1e308, 1e308]},
        2,
        Path("."),
    )
    assert density.weights == (0.5, 0.5)


# -- probe 11: tracebacks -------------------------------------------------------------------
@pytest.mark.parametrize("domain", ["circle", "sphere"])
@pytest.mark.parametrize("matrix", ["K", "V"])
def test_matrix_entry_of_1e308_is_refused_naming_the_entry(domain, matrix):
    d = 2 if domain == "circle" else 3
    m = np.eye(d).tolist()
    m[0][0] = 1e308
    data = {
        "model": {"name": "sa", "beta": 2.0, matrix: m},
        "domain": {"name": domain},
        "discretization": {
            "scheme": "fv",
            "n" if domain == "circle" else "nlat": 32 if d == 2 else 16,
        },
    }
    hint = "put the scale in model.beta" if matrix == "K" else "scale time.t_end instead"
    with pytest.raises(
        ConfigError,
        match=rf"^model.{matrix}\[0\]\[0\]: = 1e\+308 is too large: the entries of "
        rf"Q, K and V must be at most 1e\+06 in absolute value; .*{hint}$",
    ):
        config_from_dict(data)


def test_projection_target_with_overflowing_eigenvectors_is_an_assumption_error():
    # a Model built directly (no config bound): V B^T of 1e308 has no finite eigenvectors
    model = Model("sa", 2.0, np.eye(2), np.eye(2), np.diag([1e308, 1.0]))
    with np.errstate(all="ignore"), pytest.raises(AssumptionError, match="eigenvectors of A = V B"):
        projection_measure(model, VonMisesFisher(((1.0, 0.0),), (1.0,), (1.0,)))


def test_subnormal_beta_and_vanishing_kernel_are_refused():
    with pytest.raises(ConfigError, match=r"^model.beta: = 1e-320 is below 1e-300.*write beta = 0"):
        config_from_dict({"model": {"beta": 1e-320}})
    with pytest.raises(
        ConfigError, match=r"^model.K: B = Q\^T K has entries of at most 1e-200, below 1e-100"
    ):
        config_from_dict({"model": {"K": [[1e-200, 0.0], [0.0, 1e-200]]}})


def test_integers_beyond_float64_and_beyond_4300_digits(tmp_path, capsys):
    with pytest.raises(
        ConfigError, match=r"^model.beta: = an integer of 401 digits is beyond float64"
    ):
        config_from_dict({"model": {"beta": 10**400}})
    path = tmp_path / "digits.toml"
    path.write_text("[model]\nbeta = 1" + "0" * 5000 + "\n")
    err = one_line(capsys, ["run", str(path)])
    assert "holds an integer of more than 4300 digits" in err


@pytest.mark.parametrize(
    "depth, words",
    [
        (100_000, "nested hundreds of levels deep"),
        (
            40,
            "a[0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0]: tables "
            "and arrays are nested more than 16 levels deep",
        ),
    ],
)
def test_deeply_nested_toml_is_one_line(tmp_path, capsys, depth, words):
    path = tmp_path / "nested.toml"
    path.write_text("a = " + "[" * depth + "]" * depth + "\n")
    assert words in one_line(capsys, ["run", str(path)])


def test_300_character_names_are_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    long_config = "a" * 300 + ".toml"
    err = one_line(capsys, ["run", long_config])
    assert (
        "has a name of 305 characters, more than the file system allows (255); use a shorter name"
        in err
    )
    Path("ok.toml").write_text("[discretization]\nn = 32\n[time]\nt_end = 0.1\nsnapshots = 2\n")
    err = one_line(capsys, ["run", "ok.toml", "-o", "b" * 300 + ".nc"])
    assert (
        err.startswith("spheredens: error: --output: cannot write 'bbb")
        and "a name of 303 characters" in err
    )
    # 250 characters fit the file system, not its side files (.NAME.tmp-PID, .NAME.flock)
    err = one_line(capsys, ["run", "ok.toml", "-o", "c" * 247 + ".nc"])
    assert "allows 239: use a shorter name" in err
    assert sorted(os.listdir(tmp_path)) == ["ok.toml"]
    with pytest.raises(SchemaError, match="has a name of 303 characters"):
        sd.open_run("d" * 300 + ".nc")


def test_symbolic_link_loops_are_named(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    os.symlink("loop.toml", "loop.toml")
    err = one_line(capsys, ["run", "loop.toml"])
    assert err == (
        "spheredens: error: configuration file 'loop.toml' is a loop of symbolic links (a link "
        "that leads back to itself); fix or remove the link\n"
    )
    Path("ok.toml").write_text("[discretization]\nn = 32\n[time]\nt_end = 0.1\nsnapshots = 2\n")
    os.symlink("out.nc", "out.nc")
    err = one_line(capsys, ["run", "ok.toml", "-o", "out.nc"])
    assert err.startswith(
        "spheredens: error: --output: cannot write 'out.nc': it is a loop of symbolic links"
    )
    os.symlink("folder", "folder")
    err = one_line(capsys, ["run", "ok.toml", "-o", "folder/out.nc"])
    assert "it is in a folder that is a loop of symbolic links" in err
    os.symlink("missing.toml", "dangling.toml")
    err = one_line(capsys, ["run", "dangling.toml"])
    assert "is a symbolic link to 'missing.toml', which does not exist" in err


def test_memory_error_while_reading_is_one_line(tmp_path, monkeypatch):
    path = tmp_path / "c.toml"
    path.write_text("[time]\nt_end = 1.0\n")

    def no_memory(self, *args, **kwargs):
        raise MemoryError

    monkeypatch.setattr(Path, "read_text", no_memory)
    with pytest.raises(
        ConfigError,
        match=r"^configuration file '.*c.toml' \(0 MiB\) is too large to read into memory$",
    ):
        load_config(path)


# -- probe 12: a directory or device, a 10 MB value -----------------------------------------
def test_directory_and_dev_null_are_not_missing(tmp_path, capsys):
    (tmp_path / "folder.toml").mkdir()
    err = one_line(capsys, ["run", str(tmp_path / "folder.toml")])
    assert err.endswith("folder.toml' is a directory, not a TOML file; give the path of a file\n")
    err = one_line(capsys, ["run", os.devnull])
    assert err == (
        f"spheredens: error: configuration file '{os.devnull}' is a character device, not a "
        "regular "
        "file (a TOML file); give the path of a file\n"
    )
    with pytest.raises(SchemaError, match="is a directory, not a netCDF file"):
        sd.open_run(tmp_path / "folder.toml")


def test_a_10_mb_value_is_not_echoed(tmp_path, capsys):
    path = tmp_path / "big.toml"
    path.write_text('[model]\nname = "' + "x" * 10_000_000 + '"\n')
    err = one_line(capsys, ["run", str(path)])
    assert err == (
        "spheredens: error: model.name: '" + "x" * 80 + "...' (10000000 characters) is not a known "
        "model; choose one of 'sa', 'sa_zero_temperature', 'usa', 'usa_av'\n"
    )
    # every echo goes through shown(): an unknown 10 MB key, a value inside a list
    with pytest.raises(ConfigError) as info:
        config_from_dict({"model": {"k" * 10_000_000: 1}})
    assert len(str(info.value)) < 300
    with pytest.raises(
        ConfigError,
        match=r"^initial.means\[0\]: must be a vector of 2 numbers, got 'y{80}\.\.\.' "
        r"\(10000000 characters\)$",
    ):
        config_from_dict({"initial": {"name": "von_mises_fisher", "means": ["y" * 10_000_000]}})


def test_shown_cuts_long_and_deep_values():
    assert shown("x" * 81) == "'" + "x" * 80 + "...' (81 characters)"
    assert shown([[1.0, 0.0], [0.0]]) == "[[1.0, 0.0], [0.0]]"  # short values: repr unchanged
    deep: list = []
    for _ in range(10_000):
        deep = [deep]
    assert shown(deep) == "[[[[[...]]]]]"  # no RecursionError
    assert shown(-(10**100)) == "a negative integer of 101 digits"
    assert len(shown(list(range(10**6)))) <= 80


# -- item 7: the accessor and the openers name the right function ------------------------------
@pytest.fixture(scope="module")
def run_and_particles(tmp_path_factory):
    root = tmp_path_factory.mktemp("kinds")
    cfg = config_from_dict(
        {
            **circle(initial={"kappas": [2.0]}),
            "particles": {"n": 8, "dt": 0.1, "initialization": "quantile"},
        }
    )
    sd.run(cfg, output=root / "d.nc", progress=False)
    run_particles(cfg, output=root / "p.nc", progress=False)
    return root


def test_marginal_of_a_particle_file_says_what_to_use(run_and_particles):
    ds = sd.open_particles(run_and_particles / "p.nc")
    with pytest.raises(
        SchemaError,
        match=r"^ds.sd.marginal\(\) needs a density file \(schema spheredens-1, "
        r"opened with spheredens.open_run\), with the variable 'rho'; this is "
        r"a particle file \(spheredens-particles-1\): its particles are "
        r"ds\['position'\]",
    ):
        ds.sd.marginal()
    for call in (lambda: ds.sd.grid(), lambda: ds.sd.density_function(0)):
        with pytest.raises(
            SchemaError, match=r"needs a density file .* 'rho' and 'weight'; this is a particle"
        ):
            call()


def test_openers_point_to_the_right_function(run_and_particles, tmp_path):
    d, p = str(run_and_particles / "d.nc"), str(run_and_particles / "p.nc")
    with pytest.raises(SchemaError) as info:
        sd.open_run(p)
    assert str(info.value) == (
        f"{p!r} is a particle file (spheredens-particles-1), not a density file "
        "(spheredens-1); open it with spheredens.open_particles"
    )
    with pytest.raises(SchemaError) as info:
        sd.open_particles(d)
    assert str(info.value) == (
        f"{d!r} is a density file (spheredens-1), not a particle file "
        "(spheredens-particles-1); open it with spheredens.open_run"
    )
    c = tmp_path / "c.nc"
    sd.write_dataset(sd.compare(sd.open_run(d), [sd.open_particles(p)]), c)
    with pytest.raises(
        SchemaError,
        match=r"is a comparison file of spheredens compare \(spheredens-compare-1\), "
        r"not a density file \(spheredens-1\); open it with "
        r"spheredens.io.read_netcdf$",
    ):
        sd.open_run(c)


def test_compare_and_convert_name_bad_paths(run_and_particles, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    d, p = str(run_and_particles / "d.nc"), str(run_and_particles / "p.nc")
    long = "a" * 300 + ".nc"
    err = one_line(capsys, ["compare", long, p, "--no-figure"])
    assert err == (
        f"spheredens: error: '{long}' has a name of 303 characters, more than the file system "
        "allows (255); use a shorter name\n"
    )
    Path("folder.nc").mkdir()
    err = one_line(capsys, ["compare", d, "folder.nc", "--no-figure", "-o", "c.nc"])
    assert (
        err
        == "spheredens: error: 'folder.nc' is a directory, not a netCDF file; give the path of a "
        "file\n"
    )
    # a path no command checked first (convert-particles' input): the command line still says
    # one line
    err = one_line(capsys, ["convert-particles", "b" * 300 + ".npz", "x.nc", "--domain", "circle"])
    assert "has a name of 304 characters, more than the file system allows (255)" in err
    assert sorted(os.listdir(tmp_path)) == ["folder.nc"]
