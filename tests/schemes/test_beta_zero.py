"""The exact beta = 0 reference for every circle scheme (issue 14, acceptance 5).

At beta = 0 the softmax weighs every y alike: X(x) = P_x V m with m = int y rho, the mean.
With V = B = I this is the Kuramoto model of identical oscillators, theta' = r sin(psi - theta)
(m = r e^{i psi}). Its Poisson-kernel (wrapped Cauchy) densities

    rho_t(theta) = (1 - r^2) / (2 pi (1 - 2 r cos(theta - psi) + r^2))

form an invariant family (Ott and Antonsen; Watanabe and Strogatz), with psi fixed and
r' = r (1 - r^2) / 2, so r(t) = r_0 e^{t/2} / sqrt(1 - r_0^2 + r_0^2 e^t). The moments
int e^{i k theta} rho_t = r(t)^k e^{i k psi} are checked at T = 3 for k = 1, 2 (the order
parameter and the shape), with each scheme's observed order.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import spheredens as sd
from spheredens.problem import Problem

R0, PSI, T = 0.3, 0.7, 3.0


def wrapped_cauchy(x):
    theta = np.arctan2(x[..., 1], x[..., 0])
    return (1 - R0**2) / (2 * np.pi * (1 - 2 * R0 * np.cos(theta - PSI) + R0**2))


def r_exact(t: float) -> float:
    return R0 * math.exp(t / 2) / math.sqrt(1 - R0**2 + R0**2 * math.exp(t))


def moment_errors(scheme: str, n: int) -> tuple[float, float]:
    """(largest error of the moments k = 1, 2 at T, |mass - 1|)."""
    options = {"tolerance": 1e-6} if scheme == "log_sl" else {}
    cfg = sd.config_from_dict({
        "model": {"name": "sa", "beta": 0.0, "K": [[1.0, 0.0], [0.0, 1.0]], "V": [[1.0, 0.0], [0.0, 1.0]]},
        "initial": {"name": "uniform"}, "discretization": {"scheme": scheme, "n": n, **options},
        "time": {"t_end": T, "times": [0.0, T], **({} if scheme == "log_sl" else {"cfl": 0.2})}})
    problem = Problem(Problem.from_config(cfg).model, "circle", wrapped_cauchy, np.zeros(1), np.ones(1))
    scheme_ = sd.make_scheme(problem, cfg.discretization)
    result = sd.simulate(scheme_, cfg.time, [])
    assert result.completed
    rho = scheme_.density(result.state)[0]
    theta, w = scheme_.grid.theta, scheme_.grid.weight
    r = r_exact(T)
    errors = [abs(np.sum(rho * w * np.exp(1j * k * theta)) - r**k * np.exp(1j * k * PSI)) for k in (1, 2)]
    return max(errors), abs(float(np.sum(rho * w)) - 1.0)


@pytest.mark.parametrize("scheme, ns, tolerance, order", [
    ("fv", (128, 256), 3e-4, 1.8),
    ("log_sl", (128, 256), 3e-4, 1.8),
    ("fourier", (32, 64), 1e-9, None),
])
def test_beta_zero_follows_the_wrapped_cauchy_family(scheme, ns, tolerance, order):
    (coarse, mass_c), (fine, mass_f) = (moment_errors(scheme, n) for n in ns)
    assert fine <= tolerance, (scheme, coarse, fine)
    assert max(mass_c, mass_f) <= 1e-13
    if order is not None:  # the second order of fv and log_sl
        assert math.log2(coarse / fine) >= order, (scheme, coarse, fine)
    else:  # spectral: doubling n gains far more than any fixed order
        assert fine <= coarse / 20, (coarse, fine)
