"""Exact solution of sa_zero_temperature on S^2 by characteristics (shared by the sphere tests)."""

from __future__ import annotations

import numpy as np
from scipy.integrate import solve_ivp

from spheredens.initial import von_mises_fisher_density

V_ZT = np.array([[1.0, 0.2, 0.0], [0.1, 0.7, -0.3], [0.0, 0.4, 0.5]])

B_ZT = np.array([[1.2, 0.3, 0.1], [-0.2, 0.8, 0.4], [0.1, 0.2, 1.5]])  # B = Q^T K with Q = I
MEAN, KAPPA = np.array([0.0, 0.6, 0.8]), 3.0


def field(x):
    """X_inf(x) = P_x M x / |C x|, M = V B^T, C = B^T (rows of x are points)."""
    w = (x @ (V_ZT @ B_ZT.T).T) / np.linalg.norm(x @ B_ZT, axis=1, keepdims=True)
    return w - np.sum(w * x, axis=1, keepdims=True) * x


def divergence(x):
    """div_S X_inf = tr(M)/|Cx| - <C^T C x, M x>/|Cx|^3 - 2 <x, M x>/|Cx| (derived in the test)."""
    M, C = V_ZT @ B_ZT.T, B_ZT.T
    cx = x @ C.T
    r = np.linalg.norm(cx, axis=1)
    mx = x @ M.T
    return np.trace(M) / r - np.sum((cx @ C) * mx, axis=1) / r**3 - 2 * np.sum(x * mx, axis=1) / r


def backward_feet(points, T):
    """(x_0, int_0^T div X(x(s)) ds) of the characteristics with x(T) = points (DOP853, 1e-12)."""
    n = len(points)

    def f(s, y):
        x = y[: 3 * n].reshape(n, 3)
        return np.concatenate([field(x).reshape(-1), divergence(x)])

    sol = solve_ivp(
        f,
        (T, 0.0),
        np.concatenate([points.reshape(-1), np.zeros(n)]),
        method="DOP853",
        rtol=1e-12,
        atol=1e-12,
    )
    x0 = sol.y[: 3 * n, -1].reshape(n, 3)
    return x0 / np.linalg.norm(x0, axis=1, keepdims=True), -sol.y[3 * n :, -1]


def exact_zero_temperature(points, T):
    """rho_T(x) = rho_0(x_0) exp(-int_0^T div X(x(s)) ds), x(T) = x, integrated backward."""
    x0, divergence_integral = backward_feet(points, T)
    return von_mises_fisher_density(x0, MEAN, KAPPA) * np.exp(-divergence_integral)


def zero_temperature_path(x0, T):
    """The characteristic of the zero-temperature field through ``x0`` at time T (DOP853)."""
    sol = solve_ivp(
        lambda _t, y: field(y[None, :] / np.linalg.norm(y))[0],
        (0.0, T),
        np.asarray(x0, dtype=float),
        method="DOP853",
        rtol=1e-13,
        atol=1e-13,
    )
    end = sol.y[:, -1]
    return end / np.linalg.norm(end)
