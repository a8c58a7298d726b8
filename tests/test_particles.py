"""Particle runs and density-versus-particle W2 (issue: particles and comparison)."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
from conftest import EXAMPLE_C

import spheredens as sd
from spheredens.cli import main
from spheredens.compare import compare
from spheredens.convert import convert_particles
from spheredens.geometry import sphere_points
from spheredens.io import open_particles
from spheredens.particles import run_particles

CIRCLE = {
    "model": {"name": "sa", "beta": 1.0, **EXAMPLE_C},
    "initial": {"name": "von_mises_fisher", "means": [[0.6, 0.8]], "kappas": [2.0]},
    "discretization": {"scheme": "fourier", "n": 256},
    "time": {"t_end": 2.0, "times": [0.0, 2.0], "cfl": 0.2},
}
SPHERE = {
    "model": {"name": "sa", "beta": 1.0, "V": [[1, 0.2, 0], [0.1, 0.7, -0.3], [0, 0.4, 0.5]]},
    "domain": {"name": "sphere"},
    "initial": {
        "name": "von_mises_fisher",
        "means": [[0.0, 0.6, 0.8], [1.0, 0.0, 0.0]],
        "kappas": [3.0, 2.0],
        "weights": [0.6, 0.4],
    },
    "discretization": {"scheme": "sh_spectral", "lmax": 47},
    "time": {"t_end": 1.0, "times": [0.0, 1.0]},
}


def with_particles(base, **particles):
    return sd.config_from_dict({**base, "particles": particles})


# -- convergence in dt and |x| = 1 ---------------------------------------------
@pytest.mark.parametrize("base", [CIRCLE, SPHERE], ids=["circle", "sphere"])
def test_integrator_converges_at_fourth_order_and_stays_on_the_sphere(base):
    cfg = with_particles(
        {
            **base,
            "model": {**base["model"], "beta": 5.0},
            "time": {"t_end": 1.0, "times": [0.0, 1.0]},
        },
        n=64,
        initialization="iid",
        seed=3,
        dt=0.1,
    )
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
    cfg = with_particles(
        {**CIRCLE, "model": {"name": "sa_zero_temperature", **EXAMPLE_C}},
        n=16,
        initialization="quantile",
        dt=0.01,
    )
    ds = run_particles(cfg)
    from scipy.integrate import solve_ivp

    model = cfg.model.build()
    x0 = ds["position"].values[0]
    sol = solve_ivp(
        lambda t, y: model.zero_temperature_velocity(y.reshape(-1, 2)).reshape(-1),
        (0.0, 2.0),
        x0.reshape(-1),
        rtol=1e-12,
        atol=1e-12,
    )
    expect = sol.y[:, -1].reshape(-1, 2)
    expect /= np.linalg.norm(expect, axis=1, keepdims=True)
    assert np.abs(ds["position"].values[-1] - expect).max() < 1e-8


# -- n^(-1/2) for iid, quantile much closer -------------------------------
@pytest.fixture(scope="module")
def circle_density():
    return sd.run(sd.config_from_dict(CIRCLE), progress=False)


def mean_w2(density, base, n, init, seeds):
    values = []
    for seed in seeds:
        p = run_particles(with_particles(base, n=n, initialization=init, seed=seed, dt=0.1))
        values.append(
            float(compare(density, p, n_points=4096, sampling_draws=0)["w2"].values[0, -1])
        )
    return float(np.mean(values))


@pytest.mark.slow
def test_circle_iid_rate_and_quantile_advantage(circle_density):
    ns = np.array([100, 300, 1000, 3000])
    seeds = {100: range(8), 300: range(8), 1000: range(4), 3000: range(2)}
    w2 = np.array([mean_w2(circle_density, CIRCLE, n, "iid", seeds[n]) for n in ns])
    slope = np.polyfit(np.log(ns), np.log(w2), 1)[0]
    assert -0.65 <= slope <= -0.35, (w2, slope)
    quantile = mean_w2(circle_density, CIRCLE, 1000, "quantile", [0])
    assert w2[2] >= 10 * quantile, (w2[2], quantile)  # measured ~15x


@pytest.mark.slow
def test_sphere_iid_rate():
    density = sd.run(sd.config_from_dict(SPHERE), progress=False)
    ns = np.array([100, 300, 1000, 3000])
    seeds = {100: range(4), 300: range(3), 1000: range(2), 3000: range(1)}
    w2 = np.array([mean_w2(density, SPHERE, n, "iid", seeds[n]) for n in ns])
    slope = np.polyfit(np.log(ns), np.log(w2), 1)[0]
    # on a 2-dimensional manifold E W2 ~ sqrt(log n / n): fitted slopes slightly above -1/2
    assert -0.65 <= slope <= -0.35, (w2, slope)


# -- a run against itself -------------------------------------------------------
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
    return xr.Dataset(
        {
            "position": (("time", "particle", "component"), pos[None]),
            "particle_weight": ("particle", w[-1] / w[-1].sum()),
        },
        coords={"time": [float(ds["time"].values[-1])]},
        attrs={"domain": domain},
    )


@pytest.mark.parametrize("base, domain", [(CIRCLE, "circle"), (SPHERE, "sphere")])
def test_comparison_with_itself_is_at_the_stated_resolution(base, domain, circle_density):
    density = (
        circle_density if domain == "circle" else sd.run(sd.config_from_dict(base), progress=False)
    )
    with pytest.warns(
        sd.SpheredensWarning, match="carries no model"
    ):  # built here: no model recorded
        result = compare(density, grid_particles(density, domain), n_points=2048)
    w2, bound = float(result["w2"].values[0, -1]), float(result["density_resolution"].values[-1])
    if domain == "circle":
        # uniform cells: W2(piecewise-constant, centre atoms) = h / sqrt(12) exactly
        assert w2 == pytest.approx(bound, rel=0.02) and bound == pytest.approx(
            2 * np.pi / 256 / np.sqrt(12), rel=1e-3
        )
    else:
        assert w2 <= bound * (1 + 1e-9) and w2 > 0.2 * bound


def test_no_common_time_is_refused(circle_density):
    p = run_particles(
        with_particles(
            {**CIRCLE, "time": {"t_end": 1.0, "times": [0.5, 1.0]}},
            n=10,
            initialization="quantile",
            dt=0.1,
        )
    )
    with pytest.raises(
        sd.SchemaError, match="no snapshot time in common.*density: 0, 2.*particles: 0.5, 1"
    ):
        compare(circle_density, p)


# -- bad particle files ---------------------------------------------------------
def good_positions(t=3, n=20, d=2, seed=0):
    g = np.random.default_rng(seed).standard_normal((t, n, d))
    return g / np.linalg.norm(g, axis=-1, keepdims=True)


BAD = [
    ("wrong_shape", lambda: good_positions()[0, :, 0], {}, "must have shape"),
    ("not_unit", lambda: 1.1 * good_positions(), {}, "not unit vectors"),
    (
        "nan",
        lambda: np.where(np.arange(2)[None, None, :] == 0, np.nan, good_positions()),
        {},
        "NaN",
    ),
    ("wrong_dimension", lambda: good_positions(d=3), {}, "d = 3"),
    ("times_length", lambda: good_positions(), {"times": [0.0, 1.0]}, "2 times for 3 snapshots"),
]


@pytest.mark.parametrize("case", BAD, ids=[c[0] for c in BAD])
def test_bad_particle_arrays_are_refused(tmp_path, case, capsys):
    _, make, extra, words = case
    src = tmp_path / "bad.npy"
    np.save(src, make())
    with pytest.raises(
        sd.SchemaError, match=words
    ):  # times or dt: both are refused (test_convert_checks)
        convert_particles(src, domain="circle", **(extra if "times" in extra else {"dt": 0.1}))
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
    ds = xr.Dataset(
        {"position": (("time", "particle", "component"), x)}, coords={"time": [0.0, 1.0, 2.0]}
    )
    ds.to_netcdf(tmp_path / "p.nc")
    with pytest.raises(sd.SchemaError, match="not unit vectors"):
        open_particles(tmp_path / "p.nc")


def test_converter_accepts_common_formats(tmp_path):
    theta = np.random.default_rng(1).uniform(0, 2 * np.pi, (4, 30))
    np.savez(tmp_path / "a.npz", theta=theta, t=[0.0, 0.1, 0.2, 0.3])
    ds = convert_particles(tmp_path / "a.npz", domain="circle")
    np.testing.assert_allclose(
        np.arctan2(ds.position[..., 1], ds.position[..., 0]) % (2 * np.pi), theta % (2 * np.pi)
    )
    assert list(ds.time.values) == [
        0.0,
        0.1,
        0.2,
        0.3,
    ] and ds.particle_weight.sum() == pytest.approx(1)
    np.save(tmp_path / "b.npy", good_positions(d=3))
    out = tmp_path / "b.nc"
    assert (
        main(
            [
                "convert-particles",
                str(tmp_path / "b.npy"),
                str(out),
                "--domain",
                "sphere",
                "--times",
                "0",
                "1",
                "2",
            ]
        )
        == 0
    )
    assert open_particles(out).sizes["component"] == 3


def test_cli_particles_and_compare(tmp_path, capsys):
    cfg = tmp_path / "c.toml"
    cfg.write_text(
        "[model]\nbeta = 1.0\n[initial]\nname = 'von_mises_fisher'\nmeans = [[1.0, 0.0]]\n"
        "kappas = [2.0]\n[discretization]\nn = 256\n[time]\nt_end = 0.5\nsnapshots = 2\n"
        "[output]\npath = 'c.nc'\nfigure = false\n[particles]\nn = 200\ndt = 0.05\n"
    )
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
    assert (
        f"between runs {check['between_mean']:.4g}; density's rank {check['rank']} of 3" in out
        and "within the spread: " in out
        and "no farther than average: " in out
    ), out


# -- low temperature: compare places the departures --------------------------------
DEPARTURE_CASE = """[model]
name = "sa"
beta = 30.0
K = [[1.75, 0.866025], [0.433013, 2.5]]
V = [[1.0, 0.0], [0.0, 0.5]]
[initial]
name = "uniform"
[discretization]
scheme = "log_sl"
n = 256
tolerance = 1e-2
[time]
t_end = 24.0
snapshots = 97
[output]
path = "c.nc"
figure = false
[particles]
n = 200
dt = 0.02
initialization = "quantile"
"""


def hand_departure(t, w2):
    """analyze-beta's rule written out: the first snapshot after the minimum with
    W2 > 2 min + 0.02."""
    i = int(np.argmin(w2))
    later = [k for k in range(i + 1, len(t)) if w2[k] > 2 * w2[i] + 0.02]
    return t[later[0]] if later else np.nan


def test_compare_reports_the_departures_as_computed_by_hand(tmp_path, capsys):
    """Example C at beta = 30 with 200 quantile particles: the particle departure time that
    compare reports and records equals the rule applied by hand to W2 between the file's
    positions and +-u carrying the initial particles' masses of each side (an independent EMD
    with POT's ot.emd2 on the geodesic cost), and the
    density's equals the rule applied to its w2_projection; the verdict says who departs first."""
    import ot

    (tmp_path / "c.toml").write_text(DEPARTURE_CASE)
    assert main(["run", str(tmp_path / "c.toml"), "-q"]) == 0
    assert main(["particles", str(tmp_path / "c.toml"), "-q"]) == 0
    capsys.readouterr()
    assert (
        main(["compare", str(tmp_path / "c.nc"), str(tmp_path / "c_particles.nc"), "--no-figure"])
        == 0
    )
    out = capsys.readouterr().out
    result = xr.open_dataset(tmp_path / "c_compare.nc")
    particles = open_particles(tmp_path / "c_particles.nc")
    density = sd.open_run(tmp_path / "c.nc")
    # the target by hand: u the top eigenvector of the symmetric part of V B^T (B = K here),
    # the masses of the initial particles on each side of u^perp
    a = np.array([[1.0, 0.0], [0.0, 0.5]]) @ np.array([[1.75, 0.866025], [0.433013, 2.5]]).T
    u = np.linalg.eigh((a + a.T) / 2)[1][:, -1]
    atoms = np.array([u, -u])
    t = particles["time"].values
    w = particles["particle_weight"].values
    x0 = particles["position"].values[0]
    masses = np.array([w[x0 @ u >= 0].sum(), w[x0 @ u < 0].sum()])  # Pi_# of the t = 0 particles
    by_hand = []
    for x in particles["position"].values:
        cost = np.arccos(np.clip(x @ atoms.T, -1.0, 1.0)) ** 2
        by_hand.append(np.sqrt(ot.emd2(w, masses, cost)))
    by_hand = np.array(by_hand)
    np.testing.assert_allclose(particles["w2_projection"].values, by_hand, rtol=1e-9, atol=1e-12)
    t_p = hand_departure(t, by_hand)
    t_d = hand_departure(density["time"].values, density["w2_projection"].values)
    assert float(result["departure_time"].values[0]) == t_p
    assert float(result["density_departure_time"]) == t_d
    # at beta = 30 both depart inside the window, the 200 particles first
    assert 5.0 < t_p < t_d < 24.0
    assert result.attrs["departure_verdict"] in out
    assert f"the density departs at t = {t_d:g}" in out and f"depart at t = {t_p:g}" in out
    assert "(the particles first)" in out


def test_departure_verdict_says_which_side_has_left():
    from spheredens.analysis import departure_verdict

    nan = float("nan")
    only_density = departure_verdict(
        {"departure_time": 18.0, "t_end": 24.0}, [{"departure_time": nan, "t_end": 15.0}]
    )
    assert (
        "the density departs at t = 18" in only_density
        and "have not departed by t = 15" in only_density
        and "the density has left Pi_# rho_0 and the particles have not" in only_density
    )
    only_particles = departure_verdict(
        {"departure_time": nan, "t_end": 40.0},
        [{"departure_time": 12.0, "t_end": 40.0}, {"departure_time": 14.0, "t_end": 40.0}],
    )
    assert (
        "the density has not departed by t = 40" in only_particles
        and "2 of 2 particle run(s) depart at t = 12 to 14 (mean 13)" in only_particles
        and "the particles have left Pi_# rho_0 and the density has not" in only_particles
    )
    neither = departure_verdict(
        {"departure_time": nan, "t_end": 10.0}, [{"departure_time": nan, "t_end": 10.0}]
    )
    assert "neither has departed" in neither


def test_pruned_particle_sums_give_the_direct_velocities():
    """From PRUNE_FROM particles on the circle, the sums skip blocks certified below 2^-60 of each
    row's sum: the velocities equal the direct log-sum-exp ones to round-off, while most pairs
    are skipped at beta = 300 (clustered and spread particles, in any order)."""
    import spheredens.particles as particles
    from spheredens.interaction import pruned_logsumexp_sums
    from spheredens.problem import Problem

    model = Problem.from_config(
        sd.config_from_dict(
            {
                "model": {"name": "sa", "beta": 300.0, **EXAMPLE_C},
                "initial": {"name": "uniform"},
                "discretization": {"scheme": "log_sl", "n": 2048},
                "time": {"t_end": 1.0},
            }
        )
    ).model
    rng = np.random.default_rng(3)
    n = particles.PRUNE_FROM + 500
    theta = np.concatenate(
        [rng.uniform(0, 2 * np.pi, n // 2), 0.5 + 0.01 * rng.standard_normal(n - n // 2)]
    )
    x = np.stack([np.cos(theta), np.sin(theta)], axis=1)  # unsorted: half of them in a cluster
    w = rng.uniform(0.5, 1.5, n)
    w /= w.sum()
    pruned = particles.particle_velocity(model, x, w)
    direct_z, direct_n, _ = particles.logsumexp_sums(
        model.kernel.query(x), x, np.log(w), x @ model.V.T
    )
    direct = sd.geometry.tangent_project(x, direct_n / direct_z[:, None])
    np.testing.assert_allclose(pruned, direct, rtol=0, atol=1e-14 * np.abs(direct).max())
    order = np.argsort(theta % (2 * np.pi))
    *_, kept = pruned_logsumexp_sums(
        model.kernel.query(x[order]), x[order], np.log(w[order]), x[order] @ model.V.T
    )
    assert kept < 0.35


def test_pruned_particle_sums_on_the_sphere_give_the_direct_velocities():
    """From PRUNE_FROM particles on S^2 (a general B), the sums over the particles in latitude
    bands skip blocks certified below 2^-60 of each row's sum: the velocities equal the direct
    log-sum-exp ones to round-off for spread, clustered and coincident particles in any order,
    while at beta = 300 on spread particles most pairs are skipped."""
    import spheredens.particles as particles
    from spheredens.interaction import pruned_logsumexp_sums, sphere_order
    from spheredens.problem import Problem

    model = Problem.from_config(
        sd.config_from_dict(
            {
                "model": {
                    "name": "sa",
                    "beta": 300.0,
                    "Q": np.eye(3).tolist(),
                    "K": [[1.75, 0.866026, 0.4], [0.433013, 2.5, 0.2], [0.2, 0.2, 2.0]],
                    "V": np.diag([1.0, 0.5, 0.5]).tolist(),
                },
                "domain": {"name": "sphere"},
                "initial": {"name": "uniform"},
                "discretization": {"scheme": "fv", "nlat": 8},
                "time": {"t_end": 1.0},
            }
        )
    ).model
    rng = np.random.default_rng(5)
    spread = rng.standard_normal((particles.PRUNE_FROM + 1000, 3))
    cluster = np.array([0.8, 0.5, 0.3]) + 0.02 * rng.standard_normal((1500, 3))
    x = np.concatenate([spread, cluster, np.repeat(cluster[:1], 50, axis=0)])
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    x = x[rng.permutation(len(x))]
    w = rng.uniform(0.5, 1.5, len(x))
    w /= w.sum()
    pruned = particles.particle_velocity(model, x, w)
    direct_z, direct_n, _ = particles.logsumexp_sums(
        model.kernel.query(x), x, np.log(w), x @ model.V.T
    )
    direct = sd.geometry.tangent_project(x, direct_n / direct_z[:, None])
    np.testing.assert_allclose(pruned, direct, rtol=0, atol=1e-14 * np.abs(direct).max())
    s = spread / np.linalg.norm(spread, axis=1, keepdims=True)
    order = sphere_order(s)
    assert sorted(order) == list(range(len(s)))
    *_, kept = pruned_logsumexp_sums(
        model.kernel.query(s[order]),
        s[order],
        np.full(len(s), -np.log(len(s))),
        s[order] @ model.V.T,
    )
    assert kept < 0.25


def _longdouble_velocity(q, x, log_w, vy):
    """N/Z at every particle summed in extended precision (the reference of the sums' tests)."""
    long = np.longdouble
    g = q.astype(long) @ x.T.astype(long) + log_w.astype(long)[None, :]
    e = np.exp(g - g.max(axis=1, keepdims=True))
    return (e @ vy.astype(long)) / e.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("beta", [30.0, 300.0, 3000.0])
def test_clustered_particle_sums_give_the_direct_velocities(beta):
    """From PRUNE_FROM particles on the circle the sums expand the pairs of tight clusters (and
    skip the negligible ones): N/Z is as close to an extended-precision sum as the direct
    float64 sum is, within the round-off of the logits (beta sigma_max 2^-53 ||V||), for
    clusters of every width, coincident particles, stragglers and unequal weights; most pairs
    are expanded or skipped, not summed."""
    import spheredens.particles as particles
    from spheredens.interaction import circle_order, clustered_logsumexp_sums
    from spheredens.problem import Problem

    model = Problem.from_config(
        sd.config_from_dict(
            {
                "model": {"name": "sa", "beta": beta, **EXAMPLE_C},
                "initial": {"name": "uniform"},
                "discretization": {"scheme": "log_sl", "n": 2048},
                "time": {"t_end": 1.0},
            }
        )
    ).model
    rng = np.random.default_rng(7)
    n = particles.PRUNE_FROM + 400
    theta = np.concatenate(
        [
            0.6 + 1e-3 * rng.standard_normal(900),  # tight cluster
            -2.5 + 0.05 * rng.standard_normal(900),  # a wide one
            np.full(200, 1.7),
            1.7 + 1e-9 * rng.standard_normal(100),  # coincident
            rng.uniform(-np.pi, np.pi, n - 2100),
        ]
    )  # stragglers
    x = np.stack([np.cos(theta), np.sin(theta)], axis=1)
    w = rng.uniform(0.5, 1.5, n)
    w /= w.sum()
    q, vy = model.kernel.query(x), x @ model.V.T
    reference = _longdouble_velocity(q, x, np.log(w), vy).astype(float)
    z, num, _ = particles.logsumexp_sums(q, x, np.log(w), vy)
    zc, numc, _ = particles.particle_sums(model, x, np.log(w))
    roundoff = beta * model.kernel.sigma_max * 2.0**-53 * np.linalg.norm(model.V, 2)
    direct_error = np.abs(num / z[:, None] - reference).max()
    clustered_error = np.abs(numc / zc[:, None] - reference).max()
    assert clustered_error <= 30 * roundoff, (clustered_error, roundoff)
    assert clustered_error <= max(10 * direct_error, 4 * roundoff), (clustered_error, direct_error)
    order = circle_order(x)
    *_, stats = clustered_logsumexp_sums(
        q[order], x[order], np.log(w[order]), vy[order], beta * model.kernel.sigma_max
    )
    if beta <= 300:  # at beta = 3000 the stragglers near each peak direction outweigh the clusters
        assert stats["expanded"] > 0.2 and stats["direct"] < 0.15, stats
    assert stats["direct"] + stats["expanded"] < 0.55


@pytest.mark.parametrize("beta", [30.0, 300.0, 3000.0])
def test_clustered_sums_on_the_sphere_give_the_direct_velocities(beta):
    """The expansions in three dimensions (particles on S^2, a general B): N/Z as close to an
    extended-precision sum as the direct float64 sum, within the round-off of the logits, for a
    tight and a wide cluster, coincident particles and stragglers, log weights spanning 1500
    e-folds; the tight cluster's pairs are expanded, not summed."""
    from spheredens.interaction import clustered_logsumexp_sums, logsumexp_sums
    from spheredens.interaction._clusters import group_width

    rng = np.random.default_rng(11)
    B = np.array([[1.75, 0.866, 0.4], [0.433, 2.5, 0.2], [0.2, 0.2, 2.0]])
    V = np.diag([1.0, 0.5, 0.5])

    def around(centre, spread, k):
        p = np.asarray(centre, dtype=float) + spread * rng.standard_normal((k, 3))
        return p / np.linalg.norm(p, axis=1, keepdims=True)

    x = np.vstack(
        [
            around([0.8, 0.5, 0.3], 1e-4, 1500),  # tight
            around([-0.6, 0.2, -0.7], 0.03, 600),  # wide
            np.tile(around([0.0, 0.0, 1.0], 0.0, 1), (100, 1)),  # coincident
            around([0.0, 0.0, 0.0], 1.0, 300),  # stragglers
        ]
    )
    log_w = np.r_[rng.uniform(-2.0, 0.0, 2200), rng.uniform(-1500.0, 0.0, 300)]
    cell = np.floor((x + 1.0) * (np.sqrt(3.0) / group_width(beta * 3.0))).astype(np.int64)
    order = np.lexsort(cell.T[::-1])
    x, log_w = x[order], log_w[order]
    q, vy = beta * x @ B, x @ V.T
    reference = _longdouble_velocity(q, x, log_w, vy).astype(float)
    z, num, _ = logsumexp_sums(q, x, log_w, vy)
    sigma = float(np.linalg.svd(B, compute_uv=False)[0])
    zc, numc, _, stats = clustered_logsumexp_sums(q, x, log_w, vy, beta * sigma)
    roundoff = beta * sigma * 2.0**-53
    direct_error = np.abs(num / z[:, None] - reference).max()
    clustered_error = np.abs(numc / zc[:, None] - reference).max()
    assert clustered_error <= 30 * roundoff, (clustered_error, roundoff)
    assert clustered_error <= max(10 * direct_error, 4 * roundoff), (clustered_error, direct_error)
    if beta <= 300:  # at beta = 3000 the stragglers near each peak direction outweigh the clusters
        assert stats["expanded"] > 0.3, stats  # the tight cluster sees itself through expansions
    assert stats["direct"] + stats["expanded"] < 0.55


def test_expansion_order_bounds_the_truncation():
    """The Taylor order of an expanded pair: x^{p+1} / (p+1)! e^{2x} <= 2^-60, the smallest such
    p, and the truncated series of e^s for |s| <= x is within that of e^s relative to it."""
    from math import factorial

    from spheredens.interaction._clusters import EXPANSION_TOLERANCE, P_MAX, X_MAX, expansion_order

    assert expansion_order(3.0) == P_MAX + 1  # no order up to P_MAX is enough: summed directly
    xs = np.array([0.0, 1e-12, 1e-3, 0.1, X_MAX, 1.0, 1.5])
    orders = expansion_order(xs)
    for x, p in zip(xs, orders):
        bound = lambda p, x=x: x ** (p + 1) / factorial(p + 1) * np.exp(2 * x)  # noqa: E731
        assert bound(p) <= EXPANSION_TOLERANCE and (p == 0 or bound(p - 1) > EXPANSION_TOLERANCE)
        for s in (-x, x):  # the extremes of |e^s - T_p(s)| / e^s
            mp = __import__("mpmath")
            mp.mp.dps = 40
            taylor = sum(mp.mpf(s) ** k / mp.factorial(k) for k in range(p + 1))
            assert abs(mp.exp(s) - taylor) / mp.exp(s) <= EXPANSION_TOLERANCE
    assert orders[0] == 0 and orders[-1] > orders[-2]


def test_particle_run_stops_after_its_departure(tmp_path):
    """particles.stop_after_departure: the run ends, complete, that long after it departs (the
    rule of analyze-beta on its w2_projection), and a second invocation reuses the file."""
    text = DEPARTURE_CASE.replace("[particles]\n", "[particles]\nstop_after_departure = 2.0\n")
    cfg = sd.config_from_dict(__import__("tomllib").loads(text), base_dir=tmp_path)
    ds = run_particles(cfg, output=tmp_path / "p.nc", progress=False)
    t, w2 = ds["time"].values, ds["w2_projection"].values
    t_dep = hand_departure(t, w2)
    assert ds.attrs["run_status"] == "complete" and ds.attrs["stop_reason"] == "done"
    assert t[-1] == t_dep + 2.0 < 24.0, (t_dep, t[-1])
    assert (
        f"departed from Pi_# of the initial particles at t = {t_dep:g}" in ds.attrs["stop_message"]
    )
    again = run_particles(cfg, output=tmp_path / "p.nc", progress=False, resume=True)
    np.testing.assert_array_equal(again["position"].values, ds["position"].values)
