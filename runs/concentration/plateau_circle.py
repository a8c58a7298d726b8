"""The plateau's W2 of example C on the circle from the zero-temperature tail, against the
converged `log_sl` runs (docs/concentration.md, "Where the clusters sit on the plateau").

The same reasoning as runs/sphere_two_atoms/plateau.py, on S^1: on the plateau each cluster's
softmax is held by the tail it looks at, about w = B^T u / |B^T u|; that tail follows the
zero-temperature field X(x) = P_x V B^T x / |B^T x| (log rho(t, y) = log rho_0(x_0) minus the
integral of div X along the backward characteristic from y; on S^{d-1},
div X = tr(M)/r - <C^T C x, M x>/r^3 - (d - 1) <x, M x>/r with M = V B^T, C = B^T, r = |C x|),
and its log-density gradient about w moves the kernel's mean, so the cluster sits where
P_c V E_c[y] = 0, off +-u. W2 to Pi_# rho_0 on the plateau is then
sqrt(m_+ d_+^2 + m_- d_-^2), d the clusters' angles from +-u, m = 1/2.

Usage: .venv/bin/python runs/concentration/plateau_circle.py   (seconds)
"""

from __future__ import annotations

import math
import tomllib
from pathlib import Path

import numpy as np
from scipy.integrate import solve_ivp
from scipy.optimize import brentq
from scipy.special import logsumexp

HERE = Path(__file__).resolve().parent
#: min W2 of the finest `log_sl` runs (docs/concentration.md, tables 1 and 2)
LOG_SL = {1000.0: 0.005032, 3000.0: 0.001671, 10000.0: 0.0005012}
TIMES = (40.0, 100.0, 200.0)
#: the quadrature about w: this many kernel widths either side, this many points
WIDTHS, POINTS = 40.0, 4001


def model() -> tuple[np.ndarray, np.ndarray]:
    data = tomllib.loads((HERE / "base_low_temperature.toml").read_text())["model"]
    Q, K, V = (np.array(data[k], dtype=float) for k in ("Q", "K", "V"))
    return Q.T @ K, V


def field(theta: np.ndarray, B: np.ndarray, V: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(X along the unit tangent, div X) at the angles ``theta``."""
    M, C = V @ B.T, B.T
    x = np.array([np.cos(theta), np.sin(theta)])
    tangent = np.array([-np.sin(theta), np.cos(theta)])
    cx = C @ x
    r = np.linalg.norm(cx, axis=0)
    mx = M @ x
    div = (np.trace(M) / r - np.sum((C.T @ cx) * mx, axis=0) / r**3
           - np.sum(x * mx, axis=0) / r)
    return np.sum(tangent * mx, axis=0) / r, div


def log_density(theta: np.ndarray, times: tuple[float, ...], B, V) -> list[np.ndarray]:
    """log rho(t, theta) of the uniform rho_0 carried by the zero-temperature field."""
    k = len(theta)

    def backward(_s, y):
        X, div = field(y[:k], B, V)
        return np.concatenate([-X, div])

    sol = solve_ivp(backward, (0.0, max(times)), np.concatenate([theta, np.zeros(k)]),
                    t_eval=times, method="DOP853", rtol=1e-11, atol=1e-12)
    return [-math.log(2.0 * math.pi) - sol.y[k:, i] for i in range(len(times))]


def offset(beta: float, phi_u: float, theta: np.ndarray, log_w: np.ndarray, B, V) -> float:
    """The angle from phi_u of the root of <tangent, V E_c[y]> = 0 (the cluster's mass 1/2)."""
    y = np.stack([np.cos(theta), np.sin(theta)], axis=1)

    def velocity(phi):
        c = np.array([math.cos(phi), math.sin(phi)])
        q = beta * (B.T @ c)
        logits = np.append(y @ q + log_w, math.log(0.5) + q @ c)
        weights = np.exp(logits - logsumexp(logits))
        mean = weights[:-1] @ y + weights[-1] * c
        return float(np.array([-math.sin(phi), math.cos(phi)]) @ (V @ mean))

    return brentq(velocity, phi_u - 0.3, phi_u + 0.3, xtol=1e-14) - phi_u


def main() -> None:
    B, V = model()
    values, vectors = np.linalg.eigh(0.5 * (V @ B.T + (V @ B.T).T))
    u = vectors[:, -1] * np.sign(vectors[0, -1])
    print(f"u at {math.degrees(math.atan2(u[1], u[0])):.3f} degrees; the plateau's W2 from the "
          "zero-temperature tail against the finest log_sl runs")
    for beta, measured in LOG_SL.items():
        angles = {}
        for sign in (1.0, -1.0):
            w = sign * (B.T @ u)
            half = WIDTHS / math.sqrt(beta * float(np.linalg.norm(w)))
            theta = math.atan2(w[1], w[0]) + np.linspace(-half, half, POINTS)
            logs = log_density(theta, TIMES, B, V)
            log_step = math.log(theta[1] - theta[0])
            phi_u = math.atan2(sign * u[1], sign * u[0])
            angles[sign] = [offset(beta, phi_u, theta, lg + log_step, B, V) for lg in logs]
        w2 = [math.sqrt(0.5 * angles[1.0][i] ** 2 + 0.5 * angles[-1.0][i] ** 2)
              for i in range(len(TIMES))]
        shown = ", ".join(f"{v:.6f} (t = {t:g})" for v, t in zip(w2, TIMES))
        print(f"  beta = {beta:6g}: clusters {math.degrees(angles[1.0][0]):+.4f} and "
              f"{math.degrees(angles[-1.0][0]):+.4f} degrees from +-u; W2 {shown}; log_sl "
              f"{measured:.6f} ({100 * (w2[0] / measured - 1):+.2f}%)")


if __name__ == "__main__":
    main()
