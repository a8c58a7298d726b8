"""Particles in R^d for the zonal domain: against the sphere's and the circle's particle solvers,
the quantile start against the exact quantiles, the exact 1-D W2 of theta-laws, and compare
against a zonal density from the command line."""

from __future__ import annotations

import math

import numpy as np
import pytest
import xarray as xr
from scipy import integrate, optimize, special

import spheredens as sd
from spheredens.cli import main
from spheredens.compare import compare
from spheredens.config import config_from_dict
from spheredens.exceptions import SchemaError
from spheredens.particles import ParticleSystem, initial_particles, run_particles
from spheredens.problem import Problem
from spheredens.recorder import checkpoint_digest
from spheredens.transport import w2_circle
from spheredens.zonal_particles import (
    ZonalFrame,
    ZonalParticleSystem,
    _may_prune,
    _pruning_pays,
    atoms_law,
    cluster_order,
    initial_zonal_particles,
    w2_theta,
    zonal_particle_velocity,
)

SCALARS = {"a": 1.3, "b": 0.7, "l1": 1.1, "l2": 0.6}


def zonal_config(d, *, axis=None, model="sa", beta=5.0, particles=None, **extra):
    domain = {"name": "zonal", "d": d, **({} if axis is None else {"axis": list(axis)})}
    table = {"name": model, **SCALARS, **({} if model == "sa_zero_temperature" else {"beta": beta})}
    data = {"domain": domain, "model": table, "time": {"t_end": 0.2, "snapshots": 3}, **extra}
    if particles is not None:
        data["particles"] = particles
    return config_from_dict(data)


def full_config(domain, e, model="sa", beta=5.0):
    """The same model as d x d matrices on the circle or the sphere: Q = I, K = B."""
    P = np.eye(len(e)) - np.outer(e, e)
    K = SCALARS["a"] * np.outer(e, e) + SCALARS["b"] * P
    V = SCALARS["l1"] * np.outer(e, e) + SCALARS["l2"] * P
    table = {"name": model, "K": K.tolist(), "V": V.tolist()}
    if model != "sa_zero_temperature":
        table["beta"] = beta
    return config_from_dict({"domain": {"name": domain}, "model": table})


def rk4(system, x, dt, steps):
    for _ in range(steps):
        k1 = system.velocity(x)
        k2 = system.velocity(x + 0.5 * dt * k1)
        k3 = system.velocity(x + 0.5 * dt * k2)
        k4 = system.velocity(x + dt * k3)
        x = x + dt / 6.0 * (k1 + 2 * k2 + 2 * k3 + k4)
        x = x / np.linalg.norm(x, axis=1, keepdims=True)
    return x


@pytest.mark.parametrize("model", ["sa", "usa", "sa_zero_temperature"])
def test_d3_particles_equal_the_sphere_particles(model):
    e = np.array([1.0, 2.0, 2.0]) / 3.0
    zonal = Problem.from_config(zonal_config(3, axis=e, model=model, beta=2.0))
    sphere = Problem.from_config(full_config("sphere", e, model, beta=2.0))
    x0, w = initial_zonal_particles(zonal, 400, "iid", 7)
    a = ZonalParticleSystem(zonal, x0, w, 0.05)
    b = ParticleSystem(sphere, x0, w, 0.05)
    va, vb = a.velocity(x0), b.velocity(x0)
    assert np.abs(va).max() > 0.1
    assert np.abs(va - vb).max() <= 4e-15 * np.abs(va).max()  # usa: |v| up to 9
    xa, xb = rk4(a, x0, 0.02, 5), rk4(b, x0, 0.02, 5)
    assert np.abs(xa - x0).max() > 1e-3  # they moved
    assert np.abs(xa - xb).max() <= 2e-14


@pytest.mark.parametrize("model", ["sa", "usa", "sa_zero_temperature"])
def test_d2_particles_equal_the_circle_particles(model):
    zonal = Problem.from_config(zonal_config(2, model=model, beta=2.0))
    circle = Problem.from_config(full_config("circle", np.array([1.0, 0.0]), model, beta=2.0))
    x0, w = initial_zonal_particles(zonal, 300, "iid", 3)
    a = ZonalParticleSystem(zonal, x0, w, 0.05)
    b = ParticleSystem(circle, x0, w, 0.05)
    va = a.velocity(x0)
    assert np.abs(va - b.velocity(x0)).max() <= 4e-15 * np.abs(va).max()
    assert np.abs(rk4(a, x0, 0.02, 5) - rk4(b, x0, 0.02, 5)).max() <= 2e-14


def test_pruned_sums_give_the_direct_velocities_in_high_dimension():
    """A concentrated state (four tight clusters in R^16, beta = 200): the certified pruning
    pays and gives the direct velocities to round-off."""
    problem = Problem.from_config(zonal_config(16, beta=200.0))
    frame = ZonalFrame.of(problem)
    rng = np.random.default_rng(0)
    n = 2100
    centres = np.concatenate([np.eye(16)[:2], -np.eye(16)[:2]])  # +-e (e = e_1) and +-e_2
    x = centres[rng.integers(0, 4, n)] + 0.02 * rng.standard_normal((n, 16))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    w = np.full(n, 1.0 / n)
    assert _may_prune(frame.query(x, frame.along(x)), x, np.log(w))
    order = cluster_order(x)
    assert sorted(order) == list(range(n))
    s = frame.along(x[order])
    assert _pruning_pays(frame.query(x[order], s), x[order], np.log(w))
    direct = zonal_particle_velocity(problem.model, frame, x, w, prune=False)
    pruned = zonal_particle_velocity(problem.model, frame, x, w, prune=True)
    assert np.abs(direct).max() > 1e-3
    assert np.abs(pruned - direct).max() <= 1e-14


def test_d1024_velocity_is_finite_and_tangent_at_beta_1000():
    problem = Problem.from_config(zonal_config(1024, beta=1000.0))
    x, w = initial_zonal_particles(problem, 250, "iid", 1)
    v = ZonalParticleSystem(problem, x, w, 0.01).velocity(x)
    frame = ZonalFrame.of(Problem.from_config(zonal_config(1024, beta=10.0)))
    assert not _may_prune(frame.query(x, frame.along(x)), x, np.log(w))  # beta = 10: all kept
    assert np.all(np.isfinite(v))
    assert np.abs(np.sum(v * x, axis=1)).max() <= 2e-15  # |N / Z| <= ||V|| = 1.1
    assert np.linalg.norm(v, axis=1).max() <= max(SCALARS["l1"], SCALARS["l2"]) + 1e-12


def test_run_keeps_unit_vectors_and_records_the_theta_marginal(tmp_path):
    cfg = zonal_config(16, particles={"n": 200, "initialization": "iid", "seed": 4, "dt": 0.05})
    ds = run_particles(cfg, output=tmp_path / "p.nc", progress=False)
    back = sd.open_particles(tmp_path / "p.nc")
    x = back["sphere_position"].values
    assert x.shape == (3, 200, 16)  # every snapshot: within the budget
    assert np.abs(np.linalg.norm(x, axis=-1) - 1.0).max() <= 4e-16
    e = back["axis"].values
    theta = np.arccos(np.clip(x @ e, -1.0, 1.0))
    assert np.abs(theta - back["polar_angle"].values).max() <= 1e-7  # arccos loses digits
    mer = back["position"].values
    assert np.abs(mer - np.stack([np.cos(theta), np.sin(theta)], -1)).max() <= 1e-7
    assert back.attrs["sphere_dimension"] == 16 and ds.attrs["domain"] == "zonal"
    assert np.abs(back["polar_angle"].values[2] - back["polar_angle"].values[0]).max() > 1e-3


def test_a_resumed_run_equals_the_uninterrupted_one(tmp_path):
    """The file of a run stopped at t = 0.2 (its first three snapshots, the checkpoint in R^d
    there), resumed to t = 0.4, equals the uninterrupted run bit for bit."""
    table = {"n": 150, "initialization": "quantile", "seed": 2, "dt": 0.05}
    cfg = zonal_config(8, particles=table).replace(**{"time.t_end": 0.4, "time.snapshots": 5})
    whole = run_particles(cfg, output=tmp_path / "whole.nc", progress=False)
    part = whole.isel(time=slice(0, 3), sphere_time=slice(0, 3)).copy()
    part["checkpoint_position"].values[...] = whole["sphere_position"].values[2]
    part.attrs.update({"checkpoint_time": 0.2, "checkpoint_steps": 4, "run_status": "partial"})
    part.attrs["checkpoint_sha256"] = checkpoint_digest(part)
    sd.write_dataset(part, tmp_path / "part.nc")
    resumed = run_particles(cfg, output=tmp_path / "part.nc", progress=False, resume=True)
    assert resumed.attrs["run_status"] == "complete" and resumed.sizes["time"] == 5
    for name in ("position", "polar_angle", "sphere_position", "w2_projection"):
        assert np.array_equal(resumed[name].values, whole[name].values), name


def exact_uniform_quantiles(d, u):
    """theta with P(theta(x) <= theta) = u for x uniform on S^{d-1}: (1 + cos theta) / 2 is
    Beta((d - 1) / 2, (d - 1) / 2)."""
    alpha = 0.5 * (d - 1)
    return np.arccos(2.0 * special.betaincinv(alpha, alpha, 1.0 - u) - 1.0)


@pytest.mark.parametrize("d", [3, 16, 128, 1024])
def test_quantile_start_is_at_the_quantiles_of_the_uniform_law(d):
    problem = Problem.from_config(zonal_config(d))
    n = 500
    x, w = initial_zonal_particles(problem, n, "quantile", 0)
    theta = ZonalFrame.of(problem).polar_angle(x)
    exact = exact_uniform_quantiles(d, (np.arange(n) + 0.5) / n)
    assert np.abs(theta - exact).max() <= 2e-6
    assert np.all(w == 1.0 / n)


def test_quantile_start_of_a_von_mises_fisher_law():
    d, kappa = 16, 3.0
    cfg = zonal_config(
        d, initial={"name": "von_mises_fisher", "means": [[1.0] + [0.0] * 15], "kappas": [kappa]}
    )
    problem = Problem.from_config(cfg)
    x, _ = initial_zonal_particles(problem, 9, "quantile", 0)
    theta = ZonalFrame.of(problem).polar_angle(x)

    def density(t):  # the law of t = cos(theta): e^{kappa t} (1 - t^2)^{(d - 3) / 2}
        return math.exp(kappa * t) * (1.0 - t * t) ** (0.5 * (d - 3))

    total = integrate.quad(density, -1.0, 1.0, epsabs=0, epsrel=1e-13)[0]

    def above(c, u):  # P(cos theta >= c) - u
        return integrate.quad(density, c, 1.0, epsabs=0, epsrel=1e-13)[0] / total - u

    for u, th in zip((np.arange(9) + 0.5) / 9, theta):
        t = optimize.brentq(
            above,
            -1.0,
            1.0,
            args=(u,),
            xtol=1e-14,
        )
        assert abs(th - math.acos(t)) <= 2e-6


def test_w2_theta_is_exact():
    rng = np.random.default_rng(1)
    a, b = rng.uniform(0, math.pi, 40), rng.uniform(0, math.pi, 70)
    wa, wb = rng.random(40), rng.random(70)
    exact = w2_circle(a, wa, b, wb)  # on [0, pi] the circle's W2 is the interval's
    assert abs(w2_theta(atoms_law(a, wa), atoms_law(b, wb)) - exact) <= 1e-9
    h = 0.3  # the uniform law on [0, h] against the atom at h / 2: h / sqrt(12)
    uniform = (np.array([0.0]), np.array([h]), np.array([1.0]))
    value = w2_theta(uniform, atoms_law([h / 2], [1.0]))
    assert abs(value - h / math.sqrt(12)) <= 1e-15
    cells = (np.linspace(0, h, 11)[:-1], np.linspace(0, h, 11)[1:], np.ones(10))
    assert abs(w2_theta(cells, atoms_law([h / 2], [1.0])) - value) <= 1e-15


def quantile_atoms_error(d, n, nodes=64):
    """W2 between the n quantile atoms of the uniform law on S^{d-1} and that law: the sum over
    the cells [Q((i - 1) / n), Q(i / n)] of int (theta - theta_i)^2 g(theta) dtheta,
    g = sin^{d-2} / int_0^pi sin^{d-2}, by Gauss-Legendre in theta on each cell."""
    x, weights = np.polynomial.legendre.leggauss(nodes)
    edges = exact_uniform_quantiles(d, np.arange(n + 1) / n)
    atoms = exact_uniform_quantiles(d, (np.arange(n) + 0.5) / n)
    lo, hi = edges[:-1, None], edges[1:, None]
    theta = 0.5 * (lo + hi) + 0.5 * (hi - lo) * x[None, :]
    log_norm = 0.5 * math.log(math.pi) + special.gammaln(0.5 * (d - 1)) - special.gammaln(0.5 * d)
    g = np.exp((d - 2) * np.log(np.sin(theta)) - log_norm)
    gap = (theta - atoms[:, None]) ** 2
    return math.sqrt(float(np.sum(0.5 * (hi - lo) * weights[None, :] * g * gap)))


@pytest.fixture(scope="module")
def d128_files(tmp_path_factory):
    """A zonal density run at d = 128 and its quantile-start particles (n = 1000), the model of
    docs/high_dimension.md's comparison."""
    base = tmp_path_factory.mktemp("d128")
    cfg = zonal_config(
        128,
        beta=1.0,
        particles={"n": 1000, "initialization": "quantile", "seed": 3, "dt": 0.05},
        discretization={"n": 1024},
    )
    sd.run(cfg, output=base / "g.nc", progress=False)
    run_particles(cfg, output=base / "p.nc", progress=False)
    return base


def test_compare_d128_quantile_particles_from_the_command_line(d128_files, capsys):
    base = d128_files
    out = base / "c.nc"
    assert main(["compare", str(base / "g.nc"), str(base / "p.nc"), "-o", str(out)]) == 0
    assert "W2 =" in capsys.readouterr().out
    result = xr.open_dataset(out)
    particles = xr.open_dataset(base / "p.nc")
    stated = float(particles.attrs["initial_theta_w2"])
    assert abs(stated - quantile_atoms_error(128, 1000)) <= 1e-6 * stated  # 1.116e-3
    w2_at_0 = float(result["w2"].values[0, 0])
    assert stated / 2 <= w2_at_0 <= 2 * stated
    assert "lower bound on the W2 on S^{d-1}" in result.attrs["method"]
    assert "lower bound" in result["w2"].attrs["comment"]


def test_compare_refuses_particles_of_another_dimension(d128_files):
    density = sd.open_run(d128_files / "g.nc")
    particles = sd.open_particles(d128_files / "p.nc")
    particles.attrs["sphere_dimension"] = 16
    with pytest.raises(SchemaError, match=r"lives in R\^16, the density on S\^127"):
        compare(density, [particles])


def test_iid_sampling_level_reads_the_theta_law(d128_files):
    """compare's i.i.d. sampling level draws zonal particles in R^d and reads their theta."""
    problem = Problem.from_config(zonal_config(128, beta=1.0))
    x, w = initial_particles(problem, 1000, "iid", 5)
    assert x.shape == (1000, 128)
    theta = ZonalFrame.of(problem).polar_angle(x)
    assert abs(np.mean(theta) - math.pi / 2) <= 4 * np.std(theta) / math.sqrt(1000)
    assert abs(np.std(theta) - 1 / math.sqrt(127)) <= 0.1 / math.sqrt(127)
