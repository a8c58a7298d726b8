"""The exact beta = 0 reference for every circle scheme.

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

import pytest

# the reference (spheredens.references) and the runs, shared with `spheredens verify`:
# (largest error of the moments k = 1, 2 at T = 3, |mass - 1|) from r_0 = 0.3, psi = 0.7
from spheredens.verify import wrapped_cauchy_errors as moment_errors


@pytest.mark.parametrize(
    "scheme, ns, tolerance, order",
    [
        ("fv", (128, 256), 3e-4, 1.8),
        ("log_sl", (128, 256), 3e-4, 1.8),
        ("fourier", (32, 64), 1e-9, None),
    ],
)
def test_beta_zero_follows_the_wrapped_cauchy_family(scheme, ns, tolerance, order):
    (coarse, mass_c), (fine, mass_f) = (moment_errors(scheme, n) for n in ns)
    assert fine <= tolerance, (scheme, coarse, fine)
    assert max(mass_c, mass_f) <= 1e-13
    if order is not None:  # the second order of fv and log_sl
        assert math.log2(coarse / fine) >= order, (scheme, coarse, fine)
    else:  # spectral: doubling n gains far more than any fixed order
        assert fine <= coarse / 20, (coarse, fine)
