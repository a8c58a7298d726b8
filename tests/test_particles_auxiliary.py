"""Labelled particles of usa_av (docs/models.md section 5) and their comparison with slice
densities."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
from conftest import stop_after_steps

import spheredens as sd
from spheredens.compare import compare, particle_slices
from spheredens.io import open_particles
from spheredens.particles import (
    ParticleSystem,
    auxiliary_particle_energy,
    auxiliary_particle_velocity,
    initial_particles,
    initial_slice_particles,
    particle_velocity,
    run_particles,
    slice_counts,
)
from spheredens.problem import Problem

KERNELS = {
    "none": {},
    "rope": {"omega": 5.0},
    "rope_general": {"omega": 4.0, "amplitude": 0.7},
    "prefix": {"seed": 3},
    "distance_bias": {"ell": 0.3},
    "cosine_toeplitz": {"omega": 5.0},
}
CIRCLE_RUN = {
    "model": {"name": "usa_av", "beta": 1.0},
    "domain": {"name": "circle"},
    "initial": {"name": "uniform"},
    "auxiliary": {"kernel": "rope", "slices": 4, "slice_perturbation": 0.5},
    "discretization": {"scheme": "fv", "n": 64},
    "time": {"t_end": 2.0, "snapshots": 3},
    "particles": {"n": 256, "initialization": "iid", "dt": 0.05},
}


def usa_av(domain, kernel, *, beta=2.5, slices=3, particles=None, **aux):
    table = {"kernel": kernel, "slices": slices, **KERNELS[kernel], **aux}
    cfg = {
        "model": {"name": "usa_av", "beta": beta},
        "domain": {"name": domain},
        "auxiliary": table,
    }
    if particles is not None:
        cfg["particles"] = particles
    return sd.config_from_dict(cfg)


def reference_velocity(model, x, w, k):
    """The particle ODE term by term: P_{x_i} sum_j w_j b exp(beta <G_ki x_i, G_kj x_j>) G_ki^T
    G_kj x_j."""
    G, b = model.auxiliary.gauges, model.auxiliary.coupling
    out = np.zeros_like(x)
    for i in range(len(x)):
        s = np.zeros(x.shape[1])
        for j in range(len(x)):
            gi, gj = G[k[i]], G[k[j]]
            s += (
                w[j]
                * b[k[i], k[j]]
                * np.exp(model.beta * (gi @ x[i]) @ (gj @ x[j]))
                * (gi.T @ gj @ x[j])
            )
        out[i] = s - (s @ x[i]) * x[i]
    return out


def reference_energy(model, x, w, k):
    G, b = model.auxiliary.gauges, model.auxiliary.coupling
    return sum(
        w[i] * w[j] * b[k[i], k[j]] * np.exp(model.beta * (G[k[i]] @ x[i]) @ (G[k[j]] @ x[j]))
        for i in range(len(x))
        for j in range(len(x))
    ) / (2.0 * model.beta)


def random_particles(d, n, m, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    w = rng.random(n) + 0.1
    return x, w / w.sum(), rng.integers(0, m, n)


# -- (a) the velocity is the particle ODE --------------------------------------------------------
@pytest.mark.parametrize("domain", ["circle", "sphere"])
@pytest.mark.parametrize("kernel", sorted(KERNELS))
def test_velocity_and_energy_match_the_double_loop(domain, kernel):
    model = usa_av(domain, kernel, slices=4).model.build()
    d = 2 if domain == "circle" else 3
    x, w, k = random_particles(d, 13, 4, seed=len(kernel))  # labels unsorted
    v = auxiliary_particle_velocity(model, x, w, k)
    ref = reference_velocity(model, x, w, k)
    assert np.abs(v - ref).max() <= 1e-12 * np.abs(ref).max()
    assert np.abs(np.sum(v * x, axis=1)).max() <= 1e-13 * np.abs(ref).max()
    sorted_k = np.sort(k)
    np.testing.assert_allclose(
        auxiliary_particle_velocity(model, x, w, sorted_k),
        reference_velocity(model, x, w, sorted_k),
        rtol=0,
        atol=1e-12 * np.abs(ref).max(),
    )
    e_ref = reference_energy(model, x, w, k)
    assert abs(auxiliary_particle_energy(model, x, w, k) - e_ref) <= 1e-12 * abs(e_ref)


def test_row_blocks_and_large_beta(monkeypatch):
    """Several row blocks, many slices (gathered couplings): the same velocity; beta = 700 does
    not overflow."""
    import spheredens.particles as P

    model = usa_av("sphere", "cosine_toeplitz", slices=5).model.build()
    x, w, k = random_particles(3, 40, 5, seed=1)
    whole = auxiliary_particle_velocity(model, x, w, k)
    monkeypatch.setattr(P, "_CHUNK_ENTRIES", 40 * 7)
    np.testing.assert_allclose(
        auxiliary_particle_velocity(model, x, w, k), whole, rtol=0, atol=1e-13 * np.abs(whole).max()
    )
    # many slices: couplings gathered per entry instead of one product per slice
    many = usa_av("sphere", "distance_bias", beta=1.5, slices=60).model.build()
    x, w, k = random_particles(3, 50, 60, seed=3)
    assert len(np.unique(k)) > P._MAX_RUNS
    ref = reference_velocity(many, x, w, k)
    assert (
        np.abs(auxiliary_particle_velocity(many, x, w, k) - ref).max() <= 1e-12 * np.abs(ref).max()
    )
    e_ref = reference_energy(many, x, w, k)
    assert abs(auxiliary_particle_energy(many, x, w, k) - e_ref) <= 1e-12 * abs(e_ref)
    hot = usa_av("circle", "rope", beta=700.0, slices=2).model.build()
    x, w, k = random_particles(2, 30, 2, seed=2)
    assert np.all(np.isfinite(auxiliary_particle_velocity(hot, x, w, k)))


def test_kernel_none_is_plain_usa():
    """G = I, b = 1: the labels do not matter, the velocity is that of usa with Q = K = V = I."""
    model = usa_av("sphere", "none", slices=4).model.build()
    plain = sd.config_from_dict(
        {"model": {"name": "usa", "beta": 2.5}, "domain": {"name": "sphere"}}
    ).model.build()
    x, w, k = random_particles(3, 25, 4, seed=5)
    np.testing.assert_allclose(
        auxiliary_particle_velocity(model, x, w, k),
        particle_velocity(plain, x, w),
        rtol=1e-12,
        atol=1e-12,
    )


# -- (b) E_h never decreases along a particle run ------------------------------------------------
@pytest.mark.parametrize("domain", ["circle", "sphere"])
@pytest.mark.parametrize("kernel", sorted(KERNELS))
def test_energy_is_non_decreasing_along_a_particle_run(domain, kernel):
    init = "quantile" if domain == "circle" else "quasi_uniform"
    cfg = usa_av(
        domain,
        kernel,
        beta=2.0,
        slices=4,
        slice_perturbation=1.0,
        particles={"n": 40, "initialization": init, "dt": 0.05},
    )
    cfg = cfg.replace(**{"time.t_end": 2.0, "time.snapshots": 21})
    ds = run_particles(cfg, progress=False)
    model = cfg.model.build()
    w, k = ds["particle_weight"].values, ds["slice"].values
    energy = np.array([auxiliary_particle_energy(model, x, w, k) for x in ds["position"].values])
    rise = np.diff(energy)
    assert np.all(rise >= -1e-12 * np.abs(energy).max()), energy
    assert energy[-1] > energy[0]  # the particles do move


# -- (c) labels and slice masses -----------------------------------------------------------------
def test_slice_counts_round_by_largest_remainder():
    assert slice_counts(np.array([0.5, 0.3, 0.2]), 10).tolist() == [5, 3, 2]
    assert slice_counts(np.array([0.5, 0.3, 0.2]), 7).tolist() == [4, 2, 1]  # 3.5, 2.1, 1.4
    assert slice_counts(np.full(3, 1 / 3), 8).tolist() == [3, 3, 2]  # ties to the lower index
    assert slice_counts(np.array([0.5, 0.0, 0.5]), 5).tolist() == [3, 0, 2]
    with pytest.raises(sd.ConfigError, match="without particles; use n >= 100"):
        slice_counts(np.array([0.98, 0.01, 0.01]), 10)


@pytest.mark.parametrize(
    "domain,init",
    [("circle", "iid"), ("circle", "quantile"), ("sphere", "iid"), ("sphere", "quasi_uniform")],
)
def test_labels_and_slice_masses(domain, init):
    weights = [0.5, 0.3, 0.2]
    cfg = usa_av(
        domain,
        "rope",
        slices=3,
        weights=weights,
        slice_perturbation=0.8,
        particles={"n": 30, "initialization": init, "dt": 0.1},
    )
    cfg = cfg.replace(**{"time.t_end": 0.2, "time.snapshots": 2})
    ds = run_particles(cfg, progress=False)
    k = ds["slice"].values
    assert np.bincount(k).tolist() == [15, 9, 6] and np.all(np.diff(k) >= 0)
    problem = Problem.from_config(cfg)
    np.testing.assert_array_equal(ds["xi"].values, problem.xi[k])
    np.testing.assert_array_equal(ds["slice_xi"].values, problem.xi)
    w = ds["particle_weight"].values
    np.testing.assert_allclose(np.bincount(k, weights=w), weights, rtol=1e-12)
    if init != "quasi_uniform":
        np.testing.assert_allclose(w, 1 / 30, rtol=1e-12)
    # each slice starts from its own density: the same seed draws the same points
    x0, w0, k0 = initial_slice_particles(problem, 30, init, cfg.particles.seed)
    np.testing.assert_array_equal(ds["position"].values[0], x0)
    assert np.array_equal(initial_particles(problem, 30, init, cfg.particles.seed)[0], x0)
    assert particle_slices(ds, problem.xi).tolist() == k.tolist()


def test_slices_start_from_their_own_density():
    """Strongly perturbed slices: the particles of slice k sit where rho_0 exp(eps f_k) is large."""
    cfg = usa_av("circle", "rope", slices=2, slice_perturbation=3.0, particles={"n": 4000})
    problem = Problem.from_config(cfg)
    x, _, k = initial_slice_particles(problem, 4000, "iid", 1)
    f = problem.slice_initials()
    for m in range(2):
        mine, other = f[m](x[k == m]).mean(), f[m](x[k != m]).mean()
        assert mine > 1.5 * other


def test_system_needs_slices():
    cfg = usa_av("circle", "rope", slices=2, particles={"n": 4})
    problem = Problem.from_config(cfg)
    x, w, k = initial_slice_particles(problem, 4, "quantile", 0)
    with pytest.raises(sd.ConfigError, match="slice index"):
        ParticleSystem(problem, x, w, 0.1)
    with pytest.raises(sd.ConfigError, match="slice indices"):
        ParticleSystem(problem, x, w, 0.1, slices=k + 5)


# -- (d) resume bit for bit ----------------------------------------------------------------------
def test_usa_av_particle_run_resumes_bit_for_bit(tmp_path):
    cfg = sd.config_from_dict(
        {
            "model": {"name": "usa_av", "beta": 3.0},
            "auxiliary": {"kernel": "cosine_toeplitz", "slices": 3, "slice_perturbation": 0.5},
            "time": {"t_end": 1.0, "snapshots": 5},
            "particles": {"n": 50, "dt": 0.05, "seed": 4},
        },
        base_dir=tmp_path,
    )
    full = run_particles(cfg, progress=False)
    with stop_after_steps(7, "terminated"):
        with pytest.raises(KeyboardInterrupt):
            run_particles(cfg, output=tmp_path / "p.nc", progress=False)
    assert xr.open_dataset(tmp_path / "p.nc").attrs["run_status"] == "partial"
    with pytest.raises(sd.ConfigError, match="exists"):
        run_particles(cfg, output=tmp_path / "p.nc", progress=False)
    resumed = run_particles(cfg, output=tmp_path / "p.nc", resume=True, progress=False)
    np.testing.assert_array_equal(resumed["position"].values, full["position"].values)
    for name in ("xi", "slice", "particle_weight"):
        np.testing.assert_array_equal(resumed[name].values, full[name].values)
    written = open_particles(tmp_path / "p.nc")
    assert written.attrs["run_status"] == "complete"
    np.testing.assert_array_equal(written["position"].values, full["position"].values)
    np.testing.assert_array_equal(written["xi"].values, full["xi"].values)


# -- (e) density against particles, marginal and per slice ---------------------------------------
def test_compare_marginal_and_slices_converge_with_n():
    cfg = sd.config_from_dict(CIRCLE_RUN)
    density = sd.run(cfg, progress=False)
    assert density["rho"].dims == ("time", "xi", "theta")
    results = {}
    for n in (64, 256):
        runs = [
            run_particles(cfg.replace(**{"particles.n": n}), seed=s, progress=False)
            for s in range(3)
        ]
        results[n] = compare(density, runs)
    for c in results.values():
        assert c["w2"].dims == ("run", "time") and c["w2_slice"].dims == ("run", "time", "xi")
        assert np.all(np.isfinite(c["w2"].values)) and np.all(np.isfinite(c["w2_slice"].values))
        np.testing.assert_array_equal(c["xi"].values, density["xi"].values)
    w2 = {n: float(c["w2"].mean()) for n, c in results.items()}
    w2_slice = {n: float(c["w2_slice"].mean()) for n, c in results.items()}
    print(f"W2 marginal {w2}, W2 per slice {w2_slice}")
    assert w2[256] < 0.8 * w2[64]
    assert w2_slice[256] < 0.8 * w2_slice[64]
    # a slice is farther from its own particles than the marginal from all (fewer particles)
    assert w2_slice[256] > w2[256]


def test_compare_sphere_finite_volumes_and_unlabelled_particles():
    cfg = sd.config_from_dict(
        {
            "model": {"name": "usa_av", "beta": 1.0},
            "domain": {"name": "sphere"},
            "auxiliary": {"kernel": "rope", "slices": 3, "slice_perturbation": 0.5},
            "discretization": {"scheme": "fv", "nlat": 12},
            "time": {"t_end": 0.5, "snapshots": 2},
            "particles": {"n": 60, "initialization": "quasi_uniform", "dt": 0.05},
        }
    )
    density = sd.run(cfg, progress=False)
    assert density["weight"].dims == ("cell",)
    labelled = run_particles(cfg, progress=False)
    unlabelled = labelled.drop_vars(["xi", "slice"])
    c = compare(density, [labelled, unlabelled], n_points=400)
    assert np.all(np.isfinite(c["w2"].values))
    np.testing.assert_array_equal(c["w2"].values[0], c["w2"].values[1])
    assert np.all(np.isfinite(c["w2_slice"].values[0])) and np.all(
        np.isnan(c["w2_slice"].values[1])
    )
    wrong = labelled.assign(xi=("particle", labelled["xi"].values + 0.1))
    with pytest.raises(sd.SchemaError, match="is not a slice of the density"):
        compare(density, wrong, n_points=400)


def test_ensemble_agreement_statistics():
    """The two readings of "within the ensemble's sampling error", on distances worked by hand;
    and the pairwise matrix of w2_between_runs is the W2 of each pair."""
    from spheredens.compare import ensemble_agreement, w2_between_runs
    from spheredens.transport import w2_circle

    between = np.array([[0.0, 0.1, 0.3], [0.1, 0.0, 0.2], [0.3, 0.2, 0.0]])
    # run means: 0.2, 0.15, 0.25; pairs: 0.2 on average
    check = ensemble_agreement(np.array([0.2, 0.2, 0.23]), between)
    assert check["density_mean"] == pytest.approx(0.21) and check["between_mean"] == pytest.approx(
        0.2
    )
    np.testing.assert_allclose(check["run_means"], [0.2, 0.15, 0.25])
    assert check["rank"] == 2 and not check["no_farther_than_average"] and check["within_spread"]
    far = ensemble_agreement(np.array([0.3, 0.3, 0.3]), between)
    assert far["rank"] == 3 and not far["within_spread"]
    near = ensemble_agreement(np.array([0.1, 0.1, 0.1]), between)
    assert near["rank"] == 0 and near["no_farther_than_average"] and near["within_spread"]
    with pytest.raises(ValueError, match="at least 2 runs"):
        ensemble_agreement(np.array([0.1]), np.zeros((1, 1)))

    rng = np.random.default_rng(3)
    runs = []
    for _ in range(3):
        ang = rng.uniform(0, 2 * np.pi, 20)
        runs.append(
            xr.Dataset(
                {
                    "position": (
                        ("time", "particle", "component"),
                        np.stack([np.cos(ang), np.sin(ang)], -1)[None],
                    ),
                    "particle_weight": ("particle", np.full(20, 0.05)),
                }
            )
        )
    m = w2_between_runs(runs)
    a = [np.arctan2(r["position"].values[-1, :, 1], r["position"].values[-1, :, 0]) for r in runs]
    assert m[0, 0] == 0.0 and m[1, 0] == m[0, 1]
    assert m[0, 2] == pytest.approx(
        w2_circle(a[0], np.full(20, 0.05), a[2], np.full(20, 0.05)), abs=1e-14
    )
    assert m[0, 2] > 0.05
