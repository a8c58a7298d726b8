"""The log-domain semi-Lagrangian scheme ``log_sl``: its pieces against closed
forms, and the whole scheme against exact solutions where rho spans hundreds of orders of
magnitude.

The zero-temperature reference is computed here, independently of the package: log rho_T at
Gauss points of every cell by integrating the characteristic and its log-Jacobian backward
(scipy DOP853, rtol 1e-12), then the exact log cell averages by log-sum-exp.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.integrate import quad, solve_ivp
from scipy.special import i0e, logsumexp

import spheredens as sd
from spheredens.schemes._circle_log_sl import (
    backward_feet,
    backward_trace,
    cell_slopes,
    inverse_langevin,
    langevin,
    log_integral_exp,
    remap,
)

K_C = [[1.75, 0.866025], [0.433013, 2.5]]
V_C = [[1.0, 0.0], [0.0, 0.5]]
#: von Mises initial density exp(KAPPA cos(theta - MU)): spans e^(2 KAPPA) = 1e-234
KAPPA, MU = 270.0, 2.0


def test_log_integral_exp_matches_quadrature():
    for slope in (-3000.0, -40.0, -1e-9, 0.0, 2e-7, 5.0, 800.0):
        a, b = -0.01, 0.013
        exact = quad(
            lambda s, slope=slope: math.exp(slope * s - abs(slope) * 0.013),
            a,
            b,
            epsabs=0,
            epsrel=1e-13,
            limit=200,
        )[0]
        assert log_integral_exp(np.array(slope), a, b) - abs(slope) * 0.013 == pytest.approx(
            math.log(exact), abs=1e-12
        )


def test_feet_are_exact_for_a_piecewise_linear_field():
    """u = 0.4 + 0.3 sin(x) sampled at nodes and linear in between: away from the nodes the
    feet converge at second order; for a linear-in-x field on each cell they are exact, which a
    constant field shows to round-off, also across several periods."""
    n = 64
    h = 2 * np.pi / n
    x = np.arange(n) * h
    for u, shift in ((np.full(n, 0.3), 0.3 * 25.0), (np.full(n, -1.1), -1.1 * 7.0)):
        feet = backward_feet(u, h, abs(shift / u[0]))
        assert np.abs(feet - (x - shift)).max() < 1e-11
    errors = []
    for n in (64, 128, 256):
        h = 2 * np.pi / n
        x = np.arange(n) * h
        feet = backward_feet(np.sin(x), h, 0.8)  # dx/dt = sin x: tan(x0/2) = tan(x/2) e^{-t}
        exact = 2 * np.arctan(np.tan(x / 2) * np.exp(-0.8))
        errors.append(np.abs((feet - exact + np.pi) % (2 * np.pi) - np.pi).max())
    orders = np.log2(np.array(errors[:-1]) / errors[1:])
    assert np.all(orders > 1.8), (errors, orders)


@pytest.mark.filterwarnings("ignore::scipy.integrate.IntegrationWarning")
def test_langevin_and_its_inverse():
    """The centroid of e^{sigma s} on a cell of width h sits h L(sigma h / 2) / 2 from the centre;
    the slope recovered from the centroid is the slope, from flat to a wall at the edge."""
    h = 0.01
    for sigma in (-5e4, -300.0, -1.0, 0.0, 1e-6, 20.0, 2e3, 1e5):
        centroid = (
            quad(
                lambda s, sigma=sigma: s * math.exp(sigma * (s - h / 2)),
                -h / 2,
                h / 2,
                epsabs=0,
                epsrel=1e-13,
            )[0]
            / quad(
                lambda s, sigma=sigma: math.exp(sigma * (s - h / 2)),
                -h / 2,
                h / 2,
                epsabs=0,
                epsrel=1e-13,
            )[0]
        )
        assert h * langevin(sigma * h / 2) / 2 == pytest.approx(centroid, rel=1e-9, abs=1e-15)
        assert cell_slopes(np.array(centroid / h), h) == pytest.approx(sigma, rel=1e-7, abs=1e-6)
    assert np.all(np.isfinite(inverse_langevin(np.array([-1.0, 1.0]))))


def test_forward_trace_inverts_the_backward_one():
    n = 96
    h = 2 * np.pi / n
    u = 0.2 + np.sin(np.arange(n) * h) + 0.3 * np.cos(3 * np.arange(n) * h)
    x = np.random.default_rng(2).uniform(-1.0, 8.0, 500)
    back = backward_trace(x, u, h, 0.9)
    assert np.abs(backward_trace(back, -u, h, 0.9) - x).max() < 1e-9


def log_cells(q, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(log cell averages, centroid offsets in cell widths) of the density exp(q(x)) on n cells,
    by 16-point Gauss in each cell and log-sum-exp."""
    h = 2 * np.pi / n
    g, gw = np.polynomial.legendre.leggauss(16)
    x = (np.arange(n)[:, None] + 0.5 + 0.5 * g[None, :]) * h
    logw = q(x) + np.log(0.5 * gw)[None, :]
    ell = logsumexp(logw, axis=1)
    offset = np.sum(np.exp(logw - ell[:, None]) * 0.5 * g[None, :], axis=1)
    return ell, offset


def test_remap_conserves_mass_and_keeps_relative_accuracy():
    """A remap by a rigid shift of whole cells returns the same cells, whatever their size
    (down to e^-5000, 60 e-folds from one cell to the next); any monotone feet conserve the
    mass to round-off."""
    n = 128
    h = 2 * np.pi / n
    ell, offset = log_cells(lambda x: -2500.0 * (1 - np.cos(x - 1.0)), n)
    ell -= logsumexp(ell + math.log(h))
    feet = np.arange(n + 1) * h - 3 * h
    shifted, moved = remap(ell, offset, feet, h, lambda x: x + 3 * h)
    assert np.abs(shifted - np.roll(ell, 3)).max() < 1e-9 * np.abs(ell).max()
    assert np.abs(moved - np.roll(offset, 3)).max() < 1e-9
    rng = np.random.default_rng(1)
    feet = np.sort(np.arange(n + 1) * h + rng.uniform(-0.4, 0.4, n + 1) * h)
    feet[-1] = feet[0] + 2 * np.pi
    new, _ = remap(ell, offset, feet, h, lambda x: x)
    assert logsumexp(new + math.log(h)) == pytest.approx(0.0, abs=1e-13)


def _zero_temperature_field(theta):
    """Tangential X_inf = <tau, V B^T x / |B^T x|> on the circle, Q = I so B = K."""
    B, V = np.array(K_C), np.array(V_C)
    x = np.stack([np.cos(theta), np.sin(theta)], axis=-1)
    bx = x @ B
    w = (bx @ V.T) / np.linalg.norm(bx, axis=-1, keepdims=True)
    return -np.sin(theta) * w[..., 0] + np.cos(theta) * w[..., 1]


def exact_log_cell_averages(n: int, T: float) -> np.ndarray:
    """log of the cell averages of rho_T for sa_zero_temperature from the von Mises rho_0."""
    h = 2 * np.pi / n
    g, gw = np.polynomial.legendre.leggauss(8)
    theta = ((np.arange(n)[:, None] + 0.5 + 0.5 * g[None, :]) * h).reshape(-1)

    def f(s, y):
        th = y[: theta.size]
        d = 1e-5
        dv = (_zero_temperature_field(th + d) - _zero_temperature_field(th - d)) / (2 * d)
        return np.concatenate([-_zero_temperature_field(th), dv])

    sol = solve_ivp(
        f,
        (0.0, T),
        np.concatenate([theta, np.zeros(theta.size)]),
        method="DOP853",
        rtol=1e-12,
        atol=1e-12,
    )
    foot, integral = sol.y[: theta.size, -1], sol.y[theta.size :, -1]
    log_norm = math.log(2 * np.pi * i0e(KAPPA)) + KAPPA
    q = KAPPA * np.cos(foot - MU) - log_norm - integral
    return logsumexp((q + np.log(0.5 * gw[None, :].repeat(n, 0).reshape(-1))).reshape(n, 8), axis=1)


def zero_temperature_run(n: int, T: float, tolerance: float = 1e-3):
    cfg = sd.config_from_dict(
        {
            "model": {"name": "sa_zero_temperature", "K": K_C, "V": V_C},
            "domain": {"name": "circle"},
            "initial": {
                "name": "von_mises_fisher",
                "means": [[math.cos(MU), math.sin(MU)]],
                "kappas": [KAPPA],
            },
            "discretization": {"scheme": "log_sl", "n": n, "tolerance": tolerance},
            "time": {"t_end": T, "snapshots": 2},
        }
    )
    scheme = sd.make_scheme(sd.Problem.from_config(cfg), cfg.discretization)
    result = sd.simulate(scheme, cfg.time)
    return scheme, result


def test_zero_temperature_log_rho_to_1e3_down_to_1e_200():
    """log rho to 1e-3 wherever rho >= 1e-200, mass to round-off.
    rho_0 spans 1e-234..1e1; by T = 1.5 the flow has compressed and drained it further."""
    n, T = 2048, 1.5
    scheme, result = zero_temperature_run(n, T)
    exact = exact_log_cell_averages(n, T)
    ell = result.state[0, 0]
    where = exact >= math.log(1e-200)
    assert exact.min() < math.log(1e-230) and where.sum() > n // 2  # the range is really there
    assert np.abs(ell - exact)[where].max() < 1e-3
    assert logsumexp(ell + math.log(scheme.grid.h)) == pytest.approx(0.0, abs=1e-13)


def test_zero_temperature_second_order():
    """The error in log rho (where rho >= 1e-200) falls at second order with n."""
    T = 1.5
    errors = []
    for n in (512, 1024, 2048):
        _, result = zero_temperature_run(n, T)
        exact = exact_log_cell_averages(n, T)
        where = exact >= math.log(1e-200)
        errors.append(np.abs(result.state[0, 0] - exact)[where].max())
    orders = np.log2(np.array(errors[:-1]) / errors[1:])
    assert np.all(orders > 1.8), (errors, orders)
