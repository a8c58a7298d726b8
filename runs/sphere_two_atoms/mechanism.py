"""The departure mechanism of the two-atom case on S^2 (base.toml), from the zero-temperature
field alone: what the circle's law t_dep ~ beta Delta / lambda_r predicts on the sphere.

For the cluster at u (the top eigenvector of A = V B^T), the softmax at u looks toward
w = B^T u / |B^T u|, which beats the cluster's own logit by Delta = |B^T u| - <B^T u, u> per
unit beta. The tail density at w decides when the cluster leaves; along the zero-temperature
field X(x) = P_x V B^T x / |B^T x| it obeys d/dt log rho(x(t)) = -div X(x(t)), so the density
at the fixed point w at time t is log rho(t, w) = log rho_0(x_0) - D(t), where x_0 is the foot
of the backward characteristic from w and D(t) = int_0^t div X(x(s)) ds along it. The backward
characteristic from w runs into the repelling fixed point r of the field (the eigenvector of A
of the smallest eigenvalue), where div X = lambda_r, so D(t) ~ lambda_r t + c for large t. The
law then predicts t_dep ~ beta Delta / lambda_r, and at finite beta the root of D(t) = beta Delta.

At finite beta the tail's weight in the cluster's softmax carries two more factors: the mass of
the kernel's width around w and the cluster's own mass. With kappa = beta |B^T c| for the
cluster at c = +-u (mass m, the initial mass of its hemisphere) and rho(t, .) nearly constant
over the kernel's width 1 / sqrt(kappa) around w,

    Z_tail / Z_self = rho(t, w) (4 pi sinh(kappa) / kappa) / (m e^{beta <c, B c>}),
    log (Z_tail / Z_self) = log rho_0(x_0(t)) - D(t) + beta Delta + log(2 pi / kappa) - log m,

(sinh kappa ~ e^kappa / 2), and the cluster is released when this crosses 0: D(t) = beta Delta
+ log rho_0(x_0(t)) + log(2 pi / kappa) - log m. The extra terms are a few e-folds (at
beta = 300: log(2 pi / kappa) = -4.6, log rho_0(+-r) = -2.6, -2.2, -log m = 0.8, 0.6), worth
about 10 time units at 1 / lambda_r = 1.6 per e-fold; they grow like log beta only, so the
law beta Delta / lambda_r holds as beta -> infinity. (log rho(t, .) changes by about 10 per
radian around w, 0.4 over the kernel's width at beta = 300: the Laplace factor errs by
|grad log rho|^2 / (2 kappa) ~ 0.1 e-fold.) The cluster at -u sees the tail at -w, fed
from -r (the field is odd, rho_0 is not), so the two clusters are released at different times.

Usage: .venv/bin/python runs/sphere_two_atoms/mechanism.py   (about a second)
"""

from __future__ import annotations

import math
import re
import tomllib
from pathlib import Path

import numpy as np
from scipy.integrate import solve_ivp
from scipy.optimize import brentq

from spheredens.config import load_config

HERE = Path(__file__).resolve().parent
BETAS = (30.0, 100.0, 300.0, 1000.0, 3000.0, 1e4)
#: points of the Monte Carlo estimate of the hemispheres' initial masses
MASS_POINTS = 1_000_000


def start_time(path: str | Path) -> float:
    """The absolute time of a run file's t = 0: T0 for a run that continues a snapshot at T0
    (lagrangian/handover.py names its files ..._t{T0}_n{N}_...; their own clock starts at 0
    there), 0 for a run from rho_0. Every comparison with the mechanism (whose clock is the
    absolute time) adds it to the file's times."""
    match = re.search(r"_t(\d+(?:\.\d+)?)_n\d", Path(path).stem)
    return float(match.group(1)) if match else 0.0


def model() -> tuple[np.ndarray, np.ndarray]:
    data = tomllib.loads((HERE / "base.toml").read_text())["model"]
    Q, K, V = (np.array(data[k], dtype=float) for k in ("Q", "K", "V"))
    return Q.T @ K, V  # B = Q^T K


def field_and_divergence(x: np.ndarray, B: np.ndarray, V: np.ndarray) -> tuple[np.ndarray, float]:
    """X(x) = P_x M x / |C x| and div_S X = tr(M)/r - <C^T C x, M x>/r^3 - 2 <x, M x>/r with
    M = V B^T, C = B^T, r = |C x| (the formula of tests/schemes/_characteristics.py)."""
    M, C = V @ B.T, B.T
    cx = C @ x
    r = float(np.linalg.norm(cx))
    mx = M @ x
    w = mx / r
    div = np.trace(M) / r - float((C.T @ cx) @ mx) / r**3 - 2.0 * float(x @ mx) / r
    return w - (w @ x) * x, div


class Geometry:
    """The case's fixed points and the backward characteristic from w with its drain D(t)."""

    def __init__(self, t_max: float = 4000.0) -> None:
        B, V = model()
        self.B, self.V = B, V
        A = V @ B.T
        self.values, vectors = np.linalg.eigh(0.5 * (A + A.T))
        self.u = vectors[:, -1] * np.sign(vectors[0, -1])
        self.r = vectors[:, 0]
        self.bu = B.T @ self.u
        self.w = self.bu / np.linalg.norm(self.bu)
        self.delta = float(np.linalg.norm(self.bu) - self.bu @ self.u)
        self.lambda_r = field_and_divergence(self.r, B, V)[1]

        def backward(_s, y):
            x = y[:3] / np.linalg.norm(y[:3])
            X, div = field_and_divergence(x, B, V)
            return np.concatenate((-X, [div]))

        self.t_max = t_max
        self.sol = solve_ivp(backward, (0.0, t_max), np.concatenate((self.w, [0.0])),
                             method="DOP853", rtol=1e-11, atol=1e-12, dense_output=True)
        self.rho_0 = load_config(HERE / "base.toml").initial.density
        points = np.random.default_rng(0).standard_normal((MASS_POINTS, 3))
        points /= np.linalg.norm(points, axis=1, keepdims=True)
        #: the initial mass of the hemisphere about u (the cluster at u's mass on the plateau)
        self.m_u = float(np.mean(4.0 * np.pi * self.rho_0(points) * (points @ self.u > 0)))

    def D(self, t: float) -> float:
        return float(self.sol.sol(t)[3])

    def log_ratio(self, t: float, beta: float, sign: float) -> float:
        """log(Z_tail / Z_self) of the cluster at sign * u (module docstring)."""
        y = self.sol.sol(t)
        foot = sign * y[:3] / np.linalg.norm(y[:3])
        kappa = beta * float(np.linalg.norm(self.bu))
        m = self.m_u if sign > 0 else 1.0 - self.m_u
        return (math.log(float(self.rho_0(foot[None])[0])) - float(y[3]) + beta * self.delta
                + math.log(2.0 * math.pi / kappa) - math.log(m))


def main() -> None:
    g = Geometry()
    values, u, r_point = g.values, g.u, g.r
    w, delta, lambda_r, sol, D, T = g.w, g.delta, g.lambda_r, g.sol, g.D, g.t_max
    foot = sol.sol(400.0)[:3] / np.linalg.norm(sol.sol(400.0)[:3])
    print(f"eigenvalues of A: {values[::-1].round(4).tolist()}")
    print(f"u = {u.round(4).tolist()}; B^T u / |B^T u| = {w.round(4).tolist()}, "
          f"{math.degrees(math.acos(min(1.0, float(w @ u)))):.2f} degrees from u; Delta = {delta:.5f}")
    print(f"repelling point r (smallest eigenvalue of A) = {r_point.round(4).tolist()}; "
          f"div X there: lambda_r = {lambda_r:.5f}")
    print("the backward characteristic from w ends, after t = 400, "
          f"{math.degrees(math.acos(min(1.0, abs(float(foot @ r_point))))):.2e} degrees from +-r")
    for t in (5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 400.0):
        print(f"  t = {t:5g}: D(t) = {D(t):9.3f}, D(t) / t = {D(t) / t:.5f}, "
              f"D(t) - lambda_r t = {D(t) - lambda_r * t:+.3f}")
    offset = D(T) - lambda_r * T  # D(t) = lambda_r t + offset once the path is near r
    print(f"predicted departure t_dep ~ beta Delta / lambda_r = {delta / lambda_r:.4f} beta; with "
          f"the offset of D, t_dep ~ (beta Delta - ({offset:.2f})) / lambda_r, the root of "
          "D(t) = beta Delta:")
    for beta in BETAS:
        target = beta * delta
        if D(T) > target:
            root = brentq(lambda t, y=target: D(t) - y, 0.0, T)
        else:
            root = (target - offset) / lambda_r
        print(f"  beta = {beta:7g}: beta Delta / lambda_r = {target / lambda_r:8.2f}, "
              f"D(t) = beta Delta at t = {root:8.2f}")

    m_u = g.m_u
    print(f"with the tail's kernel mass and the cluster's own (hemisphere masses {m_u:.4f} at u, "
          f"{1 - m_u:.4f} at -u), the release log(Z_tail / Z_self) = 0:")
    log_ratio = g.log_ratio

    for beta in BETAS:
        times = []
        for sign in (1.0, -1.0):
            if log_ratio(0.0, beta, sign) < 0:
                times.append("none (the tail never outweighs the cluster)")
            elif log_ratio(T, beta, sign) > 0:
                times.append(f"after t = {T:g}")
            else:
                t = brentq(lambda t, b=beta, s=sign: log_ratio(t, b, s), 0.0, T)
                times.append(f"{t:8.2f}")
        print(f"  beta = {beta:7g}: released at t = {times[0]} (cluster at u), {times[1]} (at -u)")

if __name__ == "__main__":
    main()
