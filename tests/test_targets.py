"""Targets of docs/models.md section 3: Pi_# rho_0 (exact masses) and the terminal subspace of V."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import EXAMPLE_C
from scipy import integrate

import spheredens as sd
from spheredens.geometry import circle_points
from spheredens.initial import VonMisesFisher
from spheredens.models import Model
from spheredens.targets import (
    AssumptionError,
    projection_measure,
    projection_target,
    terminal_subspace,
)


def circle_rho0(x):
    theta = np.arctan2(x[..., 1], x[..., 0])
    f = np.exp(0.7 * np.cos(theta - 0.4) + 0.3 * np.sin(3 * theta))
    return f / 7.7  # any positive function: the masses are normalized


def test_circle_atom_masses_are_half_circle_masses():
    model = Model("sa", 30.0, np.eye(2), np.array(EXAMPLE_C["K"]), np.array(EXAMPLE_C["V"]))
    target = projection_measure(model, circle_rho0)
    u = target.points[0]
    a = np.arctan2(u[1], u[0])
    f = lambda t: circle_rho0(circle_points(np.array(t)))  # noqa: E731
    plus = integrate.quad(f, a - np.pi / 2, a + np.pi / 2, epsabs=1e-13, epsrel=1e-13, limit=200)[0]
    total = integrate.quad(f, 0, 2 * np.pi, epsabs=1e-13, epsrel=1e-13, limit=200)[0]
    assert abs(target.masses[0] - plus / total) <= 1e-10
    # example C: E_1 is the line at 30 degrees (u is defined up to sign)
    np.testing.assert_allclose(np.abs(u), [np.cos(np.pi / 6), np.sin(np.pi / 6)], atol=1e-6)


def test_sphere_atom_masses_are_hemisphere_masses():
    """vMF(mu, kappa): P(z > 0) = C int_0^1 2 pi e^{kappa mu_z z} I_0(kappa r sqrt(1 - z^2)) dz with
    r = |(mu_x, mu_y)| and C = kappa / (4 pi sinh kappa) (the longitude integral in closed form)."""
    from scipy.special import i0

    V = np.diag([0.5, 0.6, 1.0])  # E_1 = span(e3)
    model = Model("sa", 1.0, np.eye(3), np.eye(3), V)
    mu, kappa = np.array([0.3, 0.4, np.sqrt(0.75)]), 2.0
    target = projection_measure(model, VonMisesFisher((tuple(mu),), (kappa,), (1.0,)))
    r = np.hypot(mu[0], mu[1])
    inner = lambda z: 2 * np.pi * np.exp(kappa * mu[2] * z) * i0(kappa * r * np.sqrt(1 - z * z))  # noqa: E731
    upper = (
        kappa
        / (4 * np.pi * np.sinh(kappa))
        * integrate.quad(inner, 0, 1, epsabs=1e-14, epsrel=1e-13)[0]
    )
    top = 0 if target.points[0][2] > 0 else 1
    assert abs(target.masses[top] - upper) <= 1e-10
    assert target.sampling_error == 0.0


def test_great_circle_target_matches_exact_push_forward():
    """rho_0 = (1 + a x_1) / (4 pi): Pi maps it onto the equator with angular density
    f(psi) = (2 + a (pi / 2) cos psi) / (4 pi) (integrate cos(alpha) (1 + a cos alpha cos psi))."""
    a = 0.8
    model = Model("sa", 1.0, np.eye(3), np.eye(3), np.diag([1.0, 1.0, 0.3]))
    target = projection_measure(model, lambda x: (1 + a * x[..., 0]) / (4 * np.pi), circle_atoms=64)
    psi = np.arctan2(target.points[:, 1], target.points[:, 0])
    # exact mass of each arc [psi - h/2, psi + h/2] of the push-forward (in the target's basis)
    e1 = model.Q[0]  # any basis of E_1: compare in the coordinates of the target's own atoms
    h = 2 * np.pi / 64
    ang = np.arctan2(target.points @ np.array([0, 1.0, 0]), target.points @ np.array([1.0, 0, 0]))
    exact = (2 * h + a * (np.pi / 2) * (np.sin(ang + h / 2) - np.sin(ang - h / 2))) / (4 * np.pi)
    assert np.abs(target.masses - exact).max() <= 1e-12 and target.sampling_error == pytest.approx(
        np.pi / 64
    )
    assert psi.shape == (64,) and e1.shape == (3,)


@pytest.mark.parametrize(
    "K, V, words",
    [
        ([[1.0, 1.0], [1.0, 1.0]], [[1.0, 0.0], [0.0, 0.5]], r"B = Q\^T K is singular"),
        ([[1.0, 0.0], [0.0, 2.0]], [[1.0, 0.3], [0.0, 0.5]], "not symmetric"),
        ([[1.0, 0.0], [0.0, 1.0]], [[1.0, 0.0], [0.0, 1.0]], "no spectral gap"),
    ],
)
def test_assumption_failure_is_named(K, V, words):
    cfg = sd.config_from_dict({"model": {"name": "sa", "beta": 1.0, "K": K, "V": V}})
    with pytest.raises(AssumptionError, match=words):
        projection_target(cfg)


def test_terminal_subspace_definitions():
    t = terminal_subspace(Model("sa", 1.0, np.eye(2), np.eye(2), np.diag([1.0, 0.5])))
    np.testing.assert_allclose(np.abs(t.basis), [[1.0, 0.0]])
    assert "real eigenvalue" in t.definition and t.eigenvalue == 1.0
    rot = np.array([[0.2, -1.0, 0.0], [1.0, 0.2, 0.0], [0.0, 0.0, 0.1]])  # complex pair dominant
    t3 = terminal_subspace(Model("sa", 1.0, np.eye(3), np.eye(3), rot))
    assert t3.basis.shape == (2, 3) and "complex pair" in t3.definition
    np.testing.assert_allclose(np.abs(t3.basis[:, 2]), 0.0, atol=1e-12)
    assert terminal_subspace(Model("sa", 1.0, np.eye(2), np.eye(2), np.eye(2))).basis is None
    # W2 to the support: a density concentrated at the target has ~0, uniform has the mean angle
    x = circle_points(np.linspace(0, 2 * np.pi, 4096, endpoint=False))
    w = np.full(4096, 2 * np.pi / 4096)
    uniform = np.full(4096, 1 / (2 * np.pi))
    # distance to {+-e1} is |theta| folded to [0, pi/2]: E d^2 = pi^2 / 12
    assert t.w2(x, uniform * w) == pytest.approx(np.pi / np.sqrt(12), rel=1e-6)


def test_runs_record_both_targets():
    ds = sd.run(
        sd.config_from_dict(
            {
                "model": {"name": "sa", "beta": 5.0, **EXAMPLE_C},
                "time": {"t_end": 0.5, "snapshots": 2},
            }
        ),
        progress=False,
    )
    assert np.all(np.isfinite(ds["w2_projection"])) and np.all(np.isfinite(ds["w2_terminal"]))
    assert "dominant eigenvalue of V" in ds["w2_terminal"].attrs["comment"]


def test_zero_temperature_rate_matches_spectral_gap():
    """W2(rho_t, Pi_# rho_0) for sa_zero_temperature decays like exp(-gamma t / (2 |B^T w|)),
    w the unit vector of E_1^perp (circle).

    Along characteristics tan(angle(x_t, E_1)) = e^{-gamma s} tan(angle(x_0, E_1)), ds/dt = 1 / |B^T
    x|. A bounded rho_0 puts mass ~ 1/tau above tan(angle) = tau, i.e. near E_1^perp, where
    |B^T x| ~ |B^T w|; those points dominate: W2^2 ~ int min(1, tau^2 e^{-2 gamma s}) d tau / tau^2
    ~ e^{-gamma s}, so W2 ~ exp(-gamma t / (2 |B^T w|)). Example C: gamma = 1, |B^T w| = 1.803,
    rate 0.2774.
    """
    K = np.array(EXAMPLE_C["K"])
    cfg = sd.config_from_dict(
        {
            "model": {"name": "sa_zero_temperature", **EXAMPLE_C},
            "discretization": {"scheme": "fv", "n": 2048},
            "time": {"t_end": 20.0, "snapshots": 41},
        }
    )
    ds = sd.run(cfg, progress=False)
    target = projection_measure(cfg.model.build(), cfg.initial.density)
    u = target.points[0]
    w = np.array([-u[1], u[0]])
    gap = 1.0  # eigenvalues of V B^T: 2 and 1
    theory = gap / (2 * np.linalg.norm(K.T @ w))
    t, w2 = ds["time"].values, ds["w2_projection"].values
    window = (t >= 12) & (t <= 20)
    assert w2[window].min() > 5 * 2 * np.pi / 2048 / np.sqrt(12)  # well above the grid floor
    fitted = -np.polyfit(t[window], np.log(w2[window]), 1)[0]
    assert abs(fitted - theory) <= 0.10 * theory, (fitted, theory)


def test_empirical_projection_is_the_projection_of_the_particles():
    """Pi_# of particles: on the circle two atoms +-u with the weights of each side; on S^2 with
    dim E_1 = 2 the projected particles gathered into arcs, within pi / M of Pi(x_i) each."""
    from spheredens.targets import empirical_projection

    rng = np.random.default_rng(5)
    circle = sd.Model(
        "sa", 1.0, np.eye(2), np.array([[1.75, 0.866025], [0.433013, 2.5]]), np.diag([1.0, 0.5])
    )
    theta = rng.uniform(0, 2 * np.pi, 301)
    x = np.stack([np.cos(theta), np.sin(theta)], axis=1)
    w = rng.uniform(size=301)
    w /= w.sum()
    target = empirical_projection(circle, x, w)
    u = target.points[0]
    assert abs(float(np.linalg.norm(u)) - 1) < 1e-14
    np.testing.assert_allclose(target.masses, [w[x @ u >= 0].sum(), w[x @ u < 0].sum()], rtol=1e-14)
    # S^2, V = diag(1, 1, 0.3), B = I: E_1 is the (e1, e2) plane
    sphere = sd.Model("sa", 1.0, np.eye(3), np.eye(3), np.diag([1.0, 1.0, 0.3]))
    y = rng.standard_normal((500, 3))
    y /= np.linalg.norm(y, axis=1, keepdims=True)
    v = np.full(500, 1 / 500)
    target = empirical_projection(sphere, y, v, circle_atoms=64)
    assert abs(target.masses.sum() - 1) < 1e-14 and np.all(np.abs(target.points[:, 2]) < 1e-14)
    projected = y[:, :2] / np.linalg.norm(y[:, :2], axis=1, keepdims=True)
    nearest = np.max(np.arccos(np.clip(projected @ target.points[:, :2].T, -1, 1)).min(axis=1))
    assert nearest <= np.pi / 64 + 1e-12 and target.sampling_error == np.pi / 64
