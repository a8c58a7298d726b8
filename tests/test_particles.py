"""Particle runs and density-versus-particle W2 (issue: particles and comparison)."""
from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

import spheredens as sd
from spheredens.cli import main
from spheredens.compare import compare
from spheredens.geometry import sphere_points
from spheredens.io import convert_particles, open_particles, write_dataset
from spheredens.particles import ParticleSystem, initial_particles, run_particles
from conftest import EXAMPLE_C

CIRCLE = {"model": {"name": "sa", "beta": 1.0, **EXAMPLE_C},
          "initial": {"name": "von_mises_fisher", "means": [[0.6, 0.8]], "kappas": [2.0]},
          "discretization": {"scheme": "fourier", "n": 256},
          "time": {"t_end": 2.0, "times": [0.0, 2.0], "cfl": 0.2}}
SPHERE = {"model": {"name": "sa", "beta": 1.0, "V": [[1, 0.2, 0], [0.1, 0.7, -0.3], [0, 0.4, 0.5]]},
          "domain": {"name": "sphere"},
          "initial": {"name": "von_mises_fisher", "means": [[0.0, 0.6, 0.8], [1.0, 0.0, 0.0]],
                      "kappas": [3.0, 2.0], "weights": [0.6, 0.4]},
          "discretization": {"scheme": "sh_spectral", "lmax": 47},
          "time": {"t_end": 1.0, "times": [0.0, 1.0]}}


def with_particles(base, **particles):
    return sd.config_from_dict({**base, "particles": particles})


# -- acceptance 1: convergence in dt and |x| = 1 ---------------------------------------------
@pytest.mark.parametrize("base", [CIRCLE, SPHERE], ids=["circle", "sphere"])
def test_integrator_converges_at_fourth_order_and_stays_on_the_sphere(base):
    cfg = with_particles({**base, "model": {**base["model"], "beta": 5.0},
                          "time": {"t_end": 1.0, "times": [0.0, 1.0]}},
                         n=64, initialization="iid", seed=3, dt=0.1)
    final = {}
    for dt in (0.2, 0.1, 0.05, 0.0125):
        ds = run_particles(cfg.replace(**{"particles.dt": dt}))
        x = ds["position"].values
        assert np.abs(np.linalg.norm(x, axis=-1) - 1.0).max() <= 1e-12
        assert ds.attrs["n_steps"] == round(1.0 / dt)
        final[dt] = x[-1]
    errors = [np.abs(final[dt] - final[0.0125]).max() for dt in (0.2, 0.1, 0.05)]
    orders = np.log2(np.array(errors[:-1]) / np.array(errors[1:]))
    # RK4 with renormalization (a projection of an O(dt^5) local error): order 4
    assert np.all(np.abs(orders - 4.0) < 0.3), (errors, orders)


def test_zero_temperature_particles_follow_the_field():
    cfg = with_particles({**CIRCLE, "model": {"name": "sa_zero_temperature", **EXAMPLE_C}},
                         n=16, initialization="quantile", dt=0.01)
    ds = run_particles(cfg)
    from scipy.integrate import solve_ivp

    model = cfg.model.build()
    x0 = ds["position"].values[0]
    sol = solve_ivp(lambda t, y: model.zero_temperature_velocity(y.reshape(-1, 2)).reshape(-1),
                    (0.0, 2.0), x0.reshape(-1), rtol=1e-12, atol=1e-12)
    expect = sol.y[:, -1].reshape(-1, 2)
    expect /= np.linalg.norm(expect, axis=1, keepdims=True)
    assert np.abs(ds["position"].values[-1] - expect).max() < 1e-8


# -- acceptance 2 and 3: n^(-1/2) for iid, quantile much closer -------------------------------
@pytest.fixture(scope="module")
def circle_density():
    return sd.run(sd.config_from_dict(CIRCLE), progress=False)


def mean_w2(density, base, n, init, seeds):
    values = []
    for seed in seeds:
        p = run_particles(with_particles(base, n=n, initialization=init, seed=seed, dt=0.1))
        values.append(float(compare(density, p, n_points=4096)["w2"].values[0, -1]))
    return float(np.mean(values))


def test_circle_iid_rate_and_quantile_advantage(circle_density):
    ns = np.array([100, 300, 1000, 3000])
    seeds = {100: range(8), 300: range(8), 1000: range(4), 3000: range(2)}
    w2 = np.array([mean_w2(circle_density, CIRCLE, n, "iid", seeds[n]) for n in ns])
    slope = np.polyfit(np.log(ns), np.log(w2), 1)[0]
    assert -0.65 <= slope <= -0.35, (w2, slope)
    quantile = mean_w2(circle_density, CIRCLE, 1000, "quantile", [0])
    assert w2[2] >= 10 * quantile, (w2[2], quantile)  # measured ~15x


def test_sphere_iid_rate():
    density = sd.run(sd.config_from_dict(SPHERE), progress=False)
    ns = np.array([100, 300, 1000, 3000])
    seeds = {100: range(4), 300: range(3), 1000: range(2), 3000: range(1)}
    w2 = np.array([mean_w2(density, SPHERE, n, "iid", seeds[n]) for n in ns])
    slope = np.polyfit(np.log(ns), np.log(w2), 1)[0]
    # on a 2-dimensional manifold E W2 ~ sqrt(log n / n): fitted slopes slightly above -1/2
    assert -0.65 <= slope <= -0.35, (w2, slope)


# -- acceptance 4: a run against itself -------------------------------------------------------
def grid_particles(ds, domain):
    """The density at its quadrature nodes as a particle run (weights rho * weight)."""
    if domain == "circle":
        th = ds["theta"].values
        pos = np.stack([np.cos(th), np.sin(th)], -1)
    else:
        pos = sphere_points(ds["lat"].values, ds["lon"].values).reshape(-1, 3)
    rho = np.clip(ds["rho"].values, 0, None)
    w = (rho * ds["weight"].values).reshape(rho.shape[0], -1)
    # one particle set per time is not the layout: use the last snapshot, weights of that time
    return xr.Dataset({"position": (("time", "particle", "component"), pos[None]),
                       "particle_weight": ("particle", w[-1] / w[-1].sum())},
                      coords={"time": [float(ds["time"].values[-1])]}, attrs={"domain": domain})


@pytest.mark.parametrize("base, domain", [(CIRCLE, "circle"), (SPHERE, "sphere")])
def test_comparison_with_itself_is_at_the_stated_resolution(base, domain, circle_density):
    density = circle_density if domain == "circle" else sd.run(sd.config_from_dict(base), progress=False)
    result = compare(density, grid_particles(density, domain), n_points=2048)
    w2, bound = float(result["w2"].values[0, -1]), float(result["density_resolution"].values[-1])
    if domain == "circle":
        # uniform cells: W2(piecewise-constant, centre atoms) = h / sqrt(12) exactly
        assert w2 == pytest.approx(bound, rel=0.02) and bound == pytest.approx(2 * np.pi / 256 / np.sqrt(12), rel=1e-3)
    else:
        assert w2 <= bound * (1 + 1e-9) and w2 > 0.2 * bound


def test_no_common_time_is_refused(circle_density):
    p = run_particles(with_particles({**CIRCLE, "time": {"t_end": 1.0, "times": [0.5, 1.0]}},
                                     n=10, initialization="quantile", dt=0.1))
    with pytest.raises(sd.SchemaError, match="no snapshot time in common.*density: 0, 2.*particles: 0.5, 1"):
        compare(circle_density, p)


# -- acceptance 5: bad particle files ---------------------------------------------------------
def good_positions(t=3, n=20, d=2, seed=0):
    g = np.random.default_rng(seed).standard_normal((t, n, d))
    return g / np.linalg.norm(g, axis=-1, keepdims=True)


BAD = [
    ("wrong_shape", lambda: good_positions()[0, :, 0], {}, "must have shape"),
    ("not_unit", lambda: 1.1 * good_positions(), {}, "not unit vectors"),
    ("nan", lambda: np.where(np.arange(2)[None, None, :] == 0, np.nan, good_positions()), {}, "NaN"),
    ("wrong_dimension", lambda: good_positions(d=3), {}, "d = 3"),
    ("times_length", lambda: good_positions(), {"times": [0.0, 1.0]}, "2 times for 3 snapshots"),
]


@pytest.mark.parametrize("case", BAD, ids=[c[0] for c in BAD])
def test_bad_particle_arrays_are_refused(tmp_path, case, capsys):
    _, make, extra, words = case
    src = tmp_path / "bad.npy"
    np.save(src, make())
    with pytest.raises(sd.SchemaError, match=words):
        convert_particles(src, domain="circle", dt=0.1, **extra)
    out = tmp_path / "out.nc"
    args = ["convert-particles", str(src), str(out), "--domain", "circle"]
    args += ["--times", *map(str, extra["times"])] if "times" in extra else ["--dt", "0.1"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("spheredens: error:") and err.count("\n") == 1 and words in err
    assert not out.exists() and not list(tmp_path.glob(".*tmp*"))


def test_bad_netcdf_particle_file_is_refused(tmp_path):
    x = good_positions()
    x[1, 3] = [2.0, 0.0]
    ds = xr.Dataset({"position": (("time", "particle", "component"), x)}, coords={"time": [0.0, 1.0, 2.0]})
    ds.to_netcdf(tmp_path / "p.nc")
    with pytest.raises(sd.SchemaError, match="not unit vectors"):
        open_particles(tmp_path / "p.nc")


def test_converter_accepts_common_formats(tmp_path):
    theta = np.random.default_rng(1).uniform(0, 2 * np.pi, (4, 30))
    np.savez(tmp_path / "a.npz", theta=theta, t=[0.0, 0.1, 0.2, 0.3])
    ds = convert_particles(tmp_path / "a.npz", domain="circle")
    np.testing.assert_allclose(np.arctan2(ds.position[..., 1], ds.position[..., 0]) % (2 * np.pi), theta % (2 * np.pi))
    assert list(ds.time.values) == [0.0, 0.1, 0.2, 0.3] and ds.particle_weight.sum() == pytest.approx(1)
    np.save(tmp_path / "b.npy", good_positions(d=3))
    out = tmp_path / "b.nc"
    assert main(["convert-particles", str(tmp_path / "b.npy"), str(out), "--domain", "sphere",
                 "--times", "0", "1", "2"]) == 0
    assert open_particles(out).sizes["component"] == 3


def test_cli_particles_and_compare(tmp_path, capsys):
    cfg = tmp_path / "c.toml"
    cfg.write_text("[model]\nbeta = 1.0\n[initial]\nname = 'von_mises_fisher'\nmeans = [[1.0, 0.0]]\n"
                   "kappas = [2.0]\n[discretization]\nn = 256\n[time]\nt_end = 0.5\nsnapshots = 2\n"
                   "[output]\npath = 'c.nc'\nfigure = false\n[particles]\nn = 200\ndt = 0.05\n")
    assert main(["run", str(cfg), "-q"]) == 0
    assert main(["particles", str(cfg), "--seeds", "0..2", "-q"]) == 0
    files = sorted(tmp_path.glob("c_particles_seed*.nc"))
    assert len(files) == 3
    assert main(["compare", str(tmp_path / "c.nc"), *map(str, files)]) == 0
    out = capsys.readouterr().out
    assert "+-" in out and (tmp_path / "c_compare.png").exists()
    result = xr.open_dataset(tmp_path / "c_compare.nc")
    assert result.sizes["run"] == 3 and np.all(result["w2_std"].values > 0)
    assert "c.nc" in result.attrs["density_file"] and "seed2" in result.attrs["particle_files"]
    # the ensemble's own spread at the last common time, and the verdict printed from it
    from spheredens.compare import ensemble_agreement, w2_between_runs
    from spheredens.io import open_particles

    runs = [open_particles(f) for f in files]
    np.testing.assert_array_equal(result["w2_between_runs"].values, w2_between_runs(runs))
    check = ensemble_agreement(result["w2"].values[:, -1], result["w2_between_runs"].values)
    assert (f"between runs {check['between_mean']:.4g}; density's rank {check['rank']} of 3" in out
            and "within the spread: " in out and "no farther than average: " in out), out
