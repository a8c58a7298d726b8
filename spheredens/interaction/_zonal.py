"""The zonal sums: the velocity of a density on S^{d-1} symmetric about an axis, for any d.

A zonal density on S^{d-1} (the domain ``zonal``, docs/models.md section 6) is given by the
law g(theta) of its polar angle theta in [0, pi] about the axis e. With x = cos(theta) e +
sin(theta) omega, B = a e e^T + b P and V = l1 e e^T + l2 P (P = I - e e^T), the average of
the kernel over the (d-2)-sphere of omega is the confluent limit

    M0(c) = Gamma(nu + 1) (2 / c)^nu I_nu(c) = 0F1(; nu + 1; c^2 / 4),   nu = (d - 3) / 2,

(d = 2: cosh c, the average over S^0 = {+-1}; d = 3: sinh(c) / c), with
M1 = M0' = M0 I_{nu+1}(c) / I_nu(c), and the sums over the polar law are

    Z(theta)  = int g(phi) exp(beta a cos(theta) cos(phi)) M0(c) dphi,
    N1(theta) = int g(phi) exp(beta a cos(theta) cos(phi)) M0(c) cos(phi) dphi,
    N2(theta) = int g(phi) exp(beta a cos(theta) cos(phi)) M1(c) sin(phi) dphi,

c = beta b sin(theta) sin(phi); the polar velocity is v = (l2 cos(theta) N2 - l1 sin(theta)
N1) / Z (``sa``) or its numerator (``usa``). (``sa_zero_temperature``'s field, (l2 b - l1 a)
sin(theta) cos(theta) / sqrt(a^2 cos^2(theta) + b^2 sin^2(theta)), is the general formula
P_x V B^T x / |B^T x| at the points (cos theta, sin theta) of the meridian plane with the
reduced matrices: the evaluator ``zero_temperature`` serves it.)

Everything is formed in logs: log M0 by its power series where c^2 / 4 <= nu + 1, by the
scaled Bessel function ``scipy.special.ive`` (log I_nu(c) = log ive(nu, c) + c) for
nu <= 50 beyond, and by the uniform (Debye) expansion of I_nu for larger orders, where ``ive``
underflows (nu = 510.5 at c = 45: I_nu(c) ~ 1e-1087). The sums are the cell-centre quadrature
of the polar law, as the circle's direct sums, rescaled by each row's largest kernel entry;
a row whose rescaled Z falls below 1e-200 is recomputed in log-sum-exp form.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._types import Array
from ..kernel import log_m0, m1_over_m0
from ..models import Model
from ._base import Evaluator, Layout, register_evaluator

#: below this value of the rescaled Z a row is recomputed in log-sum-exp form
_UNDERFLOW_GUARD = 1e-200


def zonal_scalars(model: Model) -> tuple[float, float, float, float]:
    """(a, b, l1, l2) of a model reduced to its meridian plane (B = diag(a, b), V = diag(l1, l2)
    in the frame (e, omega))."""
    B, V = model.B, model.V
    return float(B[0, 0]), float(B[1, 1]), float(V[0, 0]), float(V[1, 1])


@register_evaluator
class ZonalSums(Evaluator):
    """The polar velocity of a zonal density from the sums Z, N1, N2 (module docstring), by
    the cell-centre quadrature of the polar law g with weights w_j; any d, beta <= 1e4.

    The kernel's log, L_fj = beta a cos(theta_f) cos(phi_j) + log M0(beta b sin(theta_f)
    sin(phi_j)), and the ratio R_fj = sin(phi_j) M1 / M0 are formed once and kept (with the
    rescaled kernel exp(L_fj - max_j L_fj) and its product with R: four n_t x n_s arrays);
    each call forms the three sums as two matrix products of the rescaled kernel with the
    rescaled masses g_j w_j / max(g w), and recomputes in log-sum-exp form, from L and R, the
    rows whose rescaled Z underflows (a concentrated law seen from far away: at d = 1024,
    beta = 1000 most rows of the uniform law). N / Z is a convex combination, so
    |v| <= max(|l1|, |l2|) = ||V||; round-off beyond it is clipped. The velocity is 0 at the
    poles (theta = 0, pi).
    """

    name = "zonal_sums"
    domains = ("zonal",)
    inputs = ("polar_law",)
    priority = 10
    description = (
        "zonal domain: the polar sums Z, N1, N2 with the kernel's average over S^{d-2} "
        "(log M0, log-sum-exp); any d <= 1024"
    )

    requirement = "needs an interacting model (sa_zero_temperature has its own field)"

    @staticmethod
    def structure(model: Model) -> bool:
        return model.kind.interacting

    def __init__(self, model: Model, sources: Any, targets: Array) -> None:
        """The sums from the polar law on the grid ``sources`` (cell centres ``theta``, weights,
        ``dimension`` d) to the points ``targets`` (n_t, 2) of the meridian half-plane."""
        self.model = model
        self.nu = 0.5 * (sources.dimension - 3)
        self.phi = np.asarray(sources.theta, dtype=float)
        self.weight = np.asarray(sources.weight, dtype=float)
        targets = np.asarray(targets, dtype=float)
        self.theta = np.arctan2(targets[:, 1], targets[:, 0])
        self._poles = (self.theta <= 0.0) | (self.theta >= np.pi)
        self._v_norm = model.V_norm
        a, b, l1, l2 = zonal_scalars(model)
        self._l1_sin = l1 * np.sin(self.theta)
        self._l2_cos = l2 * np.cos(self.theta)
        self._cos_phi = np.cos(self.phi)
        self._log_kernel, self._ratio = self.log_kernel(np.arange(len(self.theta)))
        self._rowmax = self._log_kernel.max(axis=1)
        self._kernel = np.exp(self._log_kernel - self._rowmax[:, None])
        self._kernel_ratio = self._kernel * self._ratio

    @classmethod
    def build(cls, model: Model, layout: Layout) -> "ZonalSums":
        return cls(model, layout.sources, layout.target_points)

    def log_kernel(self, rows: Array) -> tuple[Array, Array]:
        """(L, R) for the target rows ``rows``: the kernel's log L_fj and sin(phi_j) M1 / M0."""
        beta = self.model.beta
        a, b, _, _ = zonal_scalars(self.model)
        theta = self.theta[rows][:, None]
        c = beta * b * np.sin(theta) * np.sin(self.phi)[None, :]
        L = beta * a * np.cos(theta) * self._cos_phi[None, :] + log_m0(self.nu, c)
        return L, m1_over_m0(self.nu, c) * np.sin(self.phi)[None, :]

    def sums(self, g: Array) -> tuple[Array, Array, Array, Array]:
        """(Z, N1, N2) e^{-M} and the row log-scales M for one polar law g (n_sources,)."""
        a = np.where(g > 0.0, g, 0.0) * self.weight
        a_max = float(a.max())
        if a_max == 0.0:
            zero = np.zeros(len(self.theta))
            return zero + 1.0, zero, zero.copy(), zero - np.inf
        s = a / a_max
        both = self._kernel @ np.stack([s, s * self._cos_phi], axis=1)
        z, n1 = both[:, 0], both[:, 1]
        n2 = self._kernel_ratio @ s
        logscale = self._rowmax + math.log(a_max)
        small = np.flatnonzero(z < _UNDERFLOW_GUARD)
        if small.size:
            R = self._ratio[small]
            with np.errstate(divide="ignore"):
                logits = self._log_kernel[small] + np.log(a)[None, :]
            m = logits.max(axis=1)
            w = np.exp(logits - m[:, None])
            z[small], n1[small], n2[small] = w.sum(axis=1), w @ self._cos_phi, (w * R).sum(axis=1)
            logscale[small] = m
        return z, n1, n2, logscale

    def polar_velocity(self, g: Array) -> Array:
        """v at the targets for one polar law g: N / Z (``sa``) or N (``usa``) along e_theta."""
        z, n1, n2, logscale = self.sums(g)
        numerator = self._l2_cos * n2 - self._l1_sin * n1
        if self.model.kind.normalized:
            v = np.clip(numerator / z, -self._v_norm, self._v_norm)
        else:
            with np.errstate(over="ignore", invalid="ignore"):  # usa at large beta: inf, caught
                v = numerator * np.exp(logscale)
        v[self._poles] = 0.0
        return v

    def velocity(self, state: Array) -> Array:
        """The polar velocity of each slice at the targets, shape (n_xi, 1, n_targets)."""
        return np.stack([self.polar_velocity(g)[None] for g in np.atleast_2d(state)])
