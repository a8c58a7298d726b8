"""usa_av: slices over xi with gauges and couplings. The spectral slice coupling
against direct sums, energy ascent, collapse and anti-collapse, output layout, errors."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import spheredens as sd
from spheredens.auxiliary import KERNELS
from spheredens.geometry import tangent_project
from spheredens.interaction import AuxiliaryInteraction

KERNEL_PARAMS = {
    "none": {},
    "rope": {"omega": 3.0},
    "rope_general": {},
    "prefix": {"seed": 3},
    "distance_bias": {"ell": 0.3},
    "cosine_toeplitz": {"omega": 5.0},
}


def av_config(domain, kernel, *, beta=1.0, slices=8, t_end=20.0, disc=None, snapshots=5, **extra):
    disc = disc or (
        {"scheme": "fv", "n": 64}
        if domain == "circle"
        else {"scheme": "fv", "nlat": 12, "allow_underresolved": True}
    )
    aux = {"kernel": kernel, "slices": slices, "slice_perturbation": 0.5, **extra}
    return sd.config_from_dict(
        {
            "model": {"name": "usa_av", "beta": beta},
            "domain": {"name": domain},
            "initial": {"name": "uniform"},
            "auxiliary": aux,
            "discretization": disc,
            "time": {"t_end": t_end, "snapshots": snapshots},
        }
    )


def run_quietly(cfg):
    from spheredens.runner import resolution_problem

    if resolution_problem(cfg):
        with pytest.warns(sd.SpheredensWarning, match="does not resolve"):
            return sd.run(cfg, progress=False)
    return sd.run(cfg, progress=False)


# -- the velocity and the energy against direct double sums ----------------------------------
def direct_velocity(model, sources, w, targets, rho):
    aux = model.auxiliary
    G, b, r, beta = aux.gauges, aux.coupling, aux.weight, model.beta
    out = np.zeros((len(r), len(targets), targets.shape[1]))
    for k, l in itertools.product(range(len(r)), repeat=2):
        gx, gy = targets @ G[k].T, sources @ G[l].T
        kernel = np.exp(beta * gx @ gy.T)
        out[k] += r[l] * b[k, l] * (kernel @ (gy * (rho[l] * w)[:, None])) @ G[k]
    return np.stack([tangent_project(targets, v) for v in out])


def direct_energy(model, sources, w, rho):
    aux = model.auxiliary
    G, b, r, beta = aux.gauges, aux.coupling, aux.weight, model.beta
    total = 0.0
    for k, l in itertools.product(range(len(r)), repeat=2):
        kernel = np.exp(beta * (sources @ G[k].T) @ (sources @ G[l].T).T)
        total += r[k] * r[l] * b[k, l] * (rho[k] * w) @ kernel @ (rho[l] * w)
    return total / (2 * beta)


@pytest.mark.parametrize("domain", ["circle", "sphere"])
@pytest.mark.parametrize("kernel", sorted(KERNELS.names()))
def test_spectral_coupling_equals_direct_sums(domain, kernel):
    d = 2 if domain == "circle" else 3
    cfg = sd.config_from_dict(
        {
            "model": {"name": "usa_av", "beta": 3.0},
            "domain": {"name": domain},
            "auxiliary": {"kernel": kernel, "slices": 5, **KERNEL_PARAMS[kernel]},
            "discretization": {"allow_underresolved": True} if d == 3 else {},
        }
    )
    model = cfg.model.build()
    rng = np.random.default_rng(0)
    sources, targets = rng.normal(size=(60, d)), rng.normal(size=(40, d))
    sources /= np.linalg.norm(sources, axis=1, keepdims=True)
    targets /= np.linalg.norm(targets, axis=1, keepdims=True)
    w = rng.uniform(0.5, 1.5, 60) * (2 * np.pi if d == 2 else 4 * np.pi) / 60
    rho = rng.uniform(0.1, 1.0, (5, 60))
    evaluator = AuxiliaryInteraction(model, sources, w, targets)
    exact = direct_velocity(model, sources, w, targets, rho)
    assert np.abs(evaluator.velocity(rho) - exact).max() <= 1e-12 * np.abs(exact).max()
    energy = direct_energy(model, sources, w, rho)
    assert abs(evaluator.energy(rho) - energy) <= 1e-12 * abs(energy)


def test_toeplitz_product_is_used_for_equally_spaced_slices():
    cfg = av_config("circle", "distance_bias", slices=16)
    kernel = cfg.model.build().auxiliary
    assert kernel.toeplitz is not None and not kernel.uniform_coupling and kernel.trivial_gauge
    uneven = sd.config_from_dict(
        {
            "model": {"name": "usa_av", "beta": 1.0},
            "auxiliary": {"kernel": "distance_bias", "xi": [0.0, 0.1, 0.5]},
        }
    )
    assert uneven.model.build().auxiliary.toeplitz is None


# -- the energy never decreases ---------------------------------------------------
@pytest.mark.parametrize("kernel", sorted(KERNELS.names()))
def test_energy_is_non_decreasing(kernel):
    extra = {"prompts": 3} if kernel == "prefix" else {}
    ds = run_quietly(
        av_config("circle", kernel, slices=3 if kernel == "prefix" else 8, snapshots=41, **extra)
    )
    e = ds["energy"].values
    assert np.all(np.isfinite(e)) and e[-1] > e[0]
    # measured: every increment positive; allow round-off of the integrator only
    assert np.diff(e).min() >= -1e-10 * np.abs(e).max(), np.diff(e).min()
    assert np.abs(ds["mass"].values - 1.0).max() <= 1e-12


# -- collapse and its prevention -------------------------------------------------
@pytest.mark.parametrize("domain", ["circle", "sphere"])
def test_baseline_and_distance_bias_collapse(domain):
    """beta = 1, T = 20: the marginal ends within 0.2 rad (W2) of a Dirac mass.
    Measured: circle 0.067 (none), 0.157 (distance_bias, ell = 1); sphere 0.004, 0.019."""
    for kernel, extra in (("none", {}), ("distance_bias", {"ell": 1.0})):
        ds = run_quietly(av_config(domain, kernel, **extra))
        w2 = ds["marginal_w2_dirac"].values
        assert w2[0] > 1.5 and w2[-1] < 0.2, (kernel, w2)
        assert ds["marginal_mean_norm"].values[-1] > 0.95


def test_rope_does_not_collapse_on_the_circle():
    """Each slice collapses to x*(xi) = R(omega xi)^T z: the marginal spreads over the circle.
    Measured: W2 to the nearest Dirac 1.80 (uniform: 1.81), orbit distance < 1e-3."""
    ds = run_quietly(av_config("circle", "rope"))
    assert ds["marginal_w2_dirac"].values[-1] > 1.5
    assert ds["orbit_distance"].values[-1] < 0.02
    assert ds["slice_spread"].values[-1].max() < 0.1  # every slice is concentrated


def test_rope_on_the_sphere_spreads_over_a_circle_of_latitude():
    """beta = 2, T = 20, ring mesh nlat = 12 (cells of 0.26 rad): slice modes within 0.1 rad of
    the fitted orbit R(omega xi)^T z, a circle of latitude; the marginal stays far from any
    Dirac mass. Measured: orbit distance 0.074, W2 to the nearest Dirac 1.18."""
    ds = run_quietly(av_config("sphere", "rope", beta=2.0))
    assert ds["orbit_distance"].values[-1] < 0.1
    assert ds["marginal_w2_dirac"].values[-1] > 0.8
    modes = ds["slice_mode"].values[-1]
    z = ds["orbit_z"].values[-1]
    # the orbit about e3 keeps the latitude of z: the modes share it
    assert np.abs(modes[:, 2] - z[2]).max() < 0.1
    assert abs(z[2]) < 0.95  # not the degenerate orbit through the poles


# -- cosine_toeplitz and prefix ------------------------------------------------------
def test_cosine_toeplitz_ends_non_collapsed():
    ds = run_quietly(av_config("circle", "cosine_toeplitz"))
    assert ds["marginal_w2_dirac"].values[-1] > 1.0  # measured 1.62
    assert ds["energy"].values[-1] > 10 * ds["energy"].values[0]


def test_prefix_ends_near_one_cluster_per_prompt():
    """3 prompts with Haar-random gauges: the marginal ends near the three points G_k^T z.
    Measured: orbit distance 0.018, W2 to the three-point measure 0.12."""
    ds = run_quietly(av_config("circle", "prefix", slices=3, prompts=3))
    assert ds["orbit_distance"].values[-1] < 0.05
    kernel = av_config("circle", "prefix", slices=3, prompts=3).model.build().auxiliary
    centres = kernel.orbit(ds["orbit_z"].values[-1])
    theta, weight = ds["theta"].values, ds["weight"].values
    from spheredens.transport import w2_circle

    w2 = w2_circle(
        theta,
        ds["rho_marginal"].values[-1] * weight,
        np.arctan2(centres[:, 1], centres[:, 0]),
        kernel.weight,
    )
    assert w2 < 0.2, w2


# -- every scheme, output layout, errors --------------------------------------------------------
@pytest.mark.parametrize(
    "domain,disc",
    [
        ("circle", {"scheme": "fv", "n": 32}),
        ("circle", {"scheme": "fourier", "n": 32}),
        ("sphere", {"scheme": "sh_spectral", "lmax": 15}),
        ("sphere", {"scheme": "fv", "nlat": 8}),
    ],
)
def test_every_scheme_runs_usa_av(domain, disc, tmp_path):
    cfg = av_config(
        domain,
        "rope",
        slices=4,
        t_end=0.5,
        snapshots=3,
        disc={**disc, "allow_underresolved": True} if domain == "sphere" else disc,
    )
    ds = run_quietly(cfg.replace(**{"output.path": str(tmp_path / "av.nc")}))
    back = sd.open_run(tmp_path / "av.nc")
    space = ds["weight"].dims
    assert back["rho"].dims == ("time", "xi") + space
    assert back.sizes["xi"] == 4 and abs(float(back["xi_weight"].sum()) - 1.0) < 1e-15
    mass = (back["rho"] * back["weight"]).sum(space).values  # per slice
    assert np.abs(mass - 1.0).max() <= 1e-12
    marginal = (back["rho"] * back["xi_weight"]).sum("xi")
    np.testing.assert_allclose(back["rho_marginal"].values, marginal.values, rtol=1e-13, atol=1e-13)
    for name in (
        "slice_mode",
        "slice_spread",
        "marginal_mean_norm",
        "marginal_w2_dirac",
        "orbit_distance",
        "gauge",
        "coupling",
    ):
        assert name in back and "long_name" in back[name].attrs
    assert back.attrs["model"] == "usa_av"
    # the stored configuration has the [auxiliary] table and describes the same run
    import tomllib

    stored = sd.config_from_dict(tomllib.loads(back.attrs["config"]))
    assert stored.model.auxiliary.to_params() == cfg.model.auxiliary.to_params()
    assert {k: v for k, v in stored.to_dict().items() if k != "output"} == {
        k: v for k, v in cfg.to_dict().items() if k != "output"
    }


def test_slices_start_from_different_densities_only_when_asked():
    same = sd.make_scheme(
        sd.Problem.from_config(av_config("circle", "rope", slice_perturbation=0.0)),
        av_config("circle", "rope").discretization,
    ).initial_state()
    assert np.all(same == same[0])
    cfg = av_config("circle", "rope")
    varied = sd.make_scheme(sd.Problem.from_config(cfg), cfg.discretization).initial_state()
    assert np.abs(varied - varied[0]).max() > 0.05
    assert np.abs(varied.sum(axis=1) * 2 * np.pi / 64 - 1.0).max() < 1e-13


@pytest.mark.parametrize(
    "table,key,words",
    [
        (
            {"model": {"name": "usa_av", "beta": 1.0, "V": [[2, 0], [0, 1]]}},
            "model.V",
            "Q = K = V = I",
        ),
        ({"model": {"name": "usa_av", "beta": 0.0}}, "model.beta", "beta > 0"),
        (
            {"model": {"name": "usa_av", "beta": 1.0}, "auxiliary": {"kernel": "alibi"}},
            "auxiliary.kernel",
            "'rope'",
        ),
        (
            {"model": {"name": "usa", "beta": 1.0}, "auxiliary": {"kernel": "rope"}},
            "auxiliary",
            "usa_av",
        ),
        (
            {"model": {"name": "usa_av", "beta": 1.0}, "auxiliary": {"xi": [0, 1], "slices": 2}},
            "auxiliary.xi",
            "not both",
        ),
        (
            {"model": {"name": "usa_av", "beta": 1.0}, "auxiliary": {"xi": [0, 0]}},
            "auxiliary.xi",
            "repeated",
        ),
        (
            {
                "model": {"name": "usa_av", "beta": 1.0},
                "auxiliary": {"slices": 2, "weights": [1.0]},
            },
            "auxiliary.weights",
            "2",
        ),
        (
            {"model": {"name": "usa_av", "beta": 1.0}, "auxiliary": {"kernel": "rope", "ell": 1.0}},
            "auxiliary",
            "ell",
        ),
        (
            {
                "model": {"name": "usa_av", "beta": 1.0},
                "auxiliary": {"kernel": "distance_bias", "ell": 0.0},
            },
            "auxiliary.ell",
            "0",
        ),
        (
            {
                "model": {"name": "usa_av", "beta": 1.0},
                "auxiliary": {"kernel": "prefix", "xi": [0.5]},
            },
            "auxiliary.xi",
            "prompt ids",
        ),
        (
            {
                "model": {"name": "usa_av", "beta": 1.0},
                "auxiliary": {"kernel": "prefix", "gauges": [[[1, 0], [0, 2]]]},
            },
            "auxiliary.gauges[0]",
            "orthogonal",
        ),
        (
            {
                "model": {"name": "usa_av", "beta": 1.0},
                "auxiliary": {"kernel": "rope_general", "axis": [0, 0, 1]},
            },
            "auxiliary.axis",
            "circle",
        ),
        (
            {"model": {"name": "usa_av", "beta": 1.0}, "discretization": {"interaction": "direct"}},
            "discretization.interaction",
            "usa_av",
        ),
    ],
)
def test_invalid_auxiliary_configurations(table, key, words):
    with pytest.raises(sd.ConfigError) as err:
        sd.config_from_dict(table)
    assert str(err.value).startswith(key) and words in str(err.value), str(err.value)


# -- densities against particles ---------------------------------------------------
def test_density_within_the_particle_ensemble_spread_at_t20():
    """rope on the circle, 4 slices, beta = 1, T = 20; particles n = 256 (iid, 4 seeds). The
    sampling error of n = 256 particles is measured by the ensemble: the W2 distances between
    runs of different seeds. The density's marginal is no farther from the runs than they are
    from each other (measured: mean 0.226 against 0.358)."""
    from spheredens.compare import compare, ensemble_agreement, w2_between_runs
    from spheredens.particles import run_particles

    cfg = sd.config_from_dict(
        {
            "model": {"name": "usa_av", "beta": 1.0},
            "domain": {"name": "circle"},
            "initial": {"name": "uniform"},
            "auxiliary": {"kernel": "rope", "slices": 4, "slice_perturbation": 0.5},
            "discretization": {"scheme": "fv", "n": 128},
            "time": {"t_end": 20.0, "snapshots": 3},
            "particles": {"n": 256, "initialization": "iid", "dt": 0.05},
        }
    )
    density = sd.run(cfg, progress=False)
    runs = [run_particles(cfg, seed=s, progress=False) for s in range(4)]
    check = ensemble_agreement(compare(density, runs)["w2"].values[:, -1], w2_between_runs(runs))
    assert check["no_farther_than_average"] and check["within_spread"], check
    # the density did not collapse either, and neither did the particles
    assert density["marginal_w2_dirac"].values[-1] > 1.5


def test_interrupted_usa_av_run_resumes_bit_for_bit(tmp_path):
    """Slices and their diagnostics survive an interruption: --resume gives the same file."""
    from conftest import stop_after_steps

    cfg = av_config(
        "circle",
        "cosine_toeplitz",
        slices=4,
        t_end=2.0,
        snapshots=5,
        disc={"scheme": "fv", "n": 32},
    ).replace(**{"output.path": str(tmp_path / "a.nc")})
    full = sd.run(cfg.replace(**{"output.path": str(tmp_path / "full.nc")}), progress=False)
    with stop_after_steps(7, "interrupted"):
        with pytest.raises(KeyboardInterrupt):
            sd.run(cfg, progress=False)
    assert sd.open_run(tmp_path / "a.nc").attrs["run_status"] == "partial"
    resumed = sd.run(cfg, progress=False, resume=True)
    for name in (
        "rho",
        "energy",
        "rho_marginal",
        "slice_mode",
        "slice_spread",
        "marginal_w2_dirac",
    ):
        np.testing.assert_array_equal(resumed[name].values, full[name].values, err_msg=name)
