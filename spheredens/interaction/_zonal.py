"""The zonal sums: the velocity of a density on S^{d-1} symmetric about an axis, for any d.

A zonal density on S^{d-1} (the domain ``zonal``, docs/models.md section 6) is given by the
law g(theta) of its polar angle theta in [0, pi] about the axis e. With x = cos(theta) e +
sin(theta) omega, B = a e e^T + b P and V = l1 e e^T + l2 P (P = I - e e^T), the average of
the kernel over the (d-2)-sphere of omega is the confluent limit

    M0(c) = Gamma(nu + 1) (2 / c)^nu I_nu(c) = 0F1(; nu + 1; c^2 / 4),   nu = (d - 3) / 2,

(d = 2: cosh c, the average over S^0 = {+-1}; d = 3: I_0(c), over the circle S^1; d = 4:
sinh(c) / c, over S^2), with
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
a row whose rescaled Z falls below 1e-200 is recomputed in log-sum-exp form
(:class:`ZonalSums`, for ``fv``). ``log_sl``'s sums take log g at the cells' centroids, in
log-sum-exp form with certified pruning (:class:`ZonalLogSums`).
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
#: ``log_sl``'s sums: consecutive sources per block of the certified pruning, targets per
#: block of rows summed together, and the weight all skipped blocks stay below (of Z)
SOURCE_BLOCK = 16
TARGET_BLOCK = 128
PRUNE_FRACTION = 2.0**-60


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


class LogM0Table:
    """log M0(c) and M1 / M0 (c) for 0 <= c <= c_max by cubic Hermite interpolation on a
    uniform grid of u = log(1 + c), with the exact derivatives d log M0 / dc = r and
    dr / dc = 1 - r^2 - (2 nu + 1) r / c (r = I_{nu+1} / I_nu): for kernels evaluated at
    points that move (the centroids of ``log_sl``), where forming log M0 exactly on n^2
    entries per call would cost seconds. Spacing 2e-3 in u: error below 1e-10 (1 + c) in
    log M0 (measured in tests/test_zonal.py)."""

    def __init__(self, nu: float, c_max: float, spacing: float = 2e-3) -> None:
        self.nu = nu
        top = math.log1p(max(c_max, 1.0))
        self.count = int(math.ceil(top / spacing)) + 1
        self.u0, self.du = 0.0, top / (self.count - 1)
        u = np.linspace(0.0, top, self.count)
        c = np.expm1(u)
        self.f = log_m0(nu, c)
        self.r = m1_over_m0(nu, c)
        with np.errstate(divide="ignore", invalid="ignore"):
            dr = np.where(c > 0.0, 1.0 - self.r**2 - (2.0 * nu + 1.0) * self.r / c, 0.0)
        dr[0] = 1.0 / (2.0 * nu + 2.0)
        self.df = self.r * (1.0 + c) * self.du  # derivatives in the unit of one interval
        self.dr = dr * (1.0 + c) * self.du

        self._log_m0 = self._cubic(self.f, self.df)
        self._ratio = self._cubic(self.r, self.dr)

    @staticmethod
    def _cubic(values: Array, slopes: Array) -> tuple[Array, ...]:
        """The Hermite cubic of each interval, y0 + m0 t + (3 dy - 2 m0 - m1) t^2 +
        (m0 + m1 - 2 dy) t^3 (t in [0, 1]), as its four coefficient arrays."""
        dy = values[1:] - values[:-1]
        m0, m1 = slopes[:-1], slopes[1:]
        return values[:-1], m0, 3.0 * dy - 2.0 * m0 - m1, m0 + m1 - 2.0 * dy

    def _locate(self, c: Array) -> tuple[Array, Array]:
        x = np.log1p(c) * (1.0 / self.du)
        i = np.minimum(x.astype(np.intp), self.count - 2)
        return i, x - i

    @staticmethod
    def _horner(coefficients: tuple[Array, ...], i: Array, t: Array) -> Array:
        c0, c1, c2, c3 = (np.take(a, i) for a in coefficients)
        out = c3 * t
        out += c2
        out *= t
        out += c1
        out *= t
        out += c0
        return out

    def log_m0(self, c: Array) -> Array:
        """log M0(|c|) (even)."""
        return self._horner(self._log_m0, *self._locate(np.abs(c)))

    def ratio(self, c: Array) -> Array:
        """M1 / M0 (c) (odd)."""
        return np.sign(c) * self._horner(self._ratio, *self._locate(np.abs(c)))

    def both(self, c: Array) -> tuple[Array, Array]:
        """(log M0(c), M1 / M0 (c)), the cell located once."""
        i, t = self._locate(np.abs(c))
        return self._horner(self._log_m0, i, t), np.sign(c) * self._horner(self._ratio, i, t)


@register_evaluator
class ZonalLogSums(Evaluator):
    """The zonal sums of :class:`ZonalSums` from log g and the cells' centroids (the inputs
    ``"log_moments"`` of ``log_sl``): the sources are the centroids phi_j = theta_j + c_j h
    with log weights log g_j + log h, the kernel's log formed at them on every call (log M0 and
    M1 / M0 from a :class:`LogM0Table`), and the sums in log-sum-exp form, so that a cluster
    narrower than a cell pulls from where it is and no weight underflows. Source blocks that
    a bound proves negligible for a target (below 2^-60 of its Z together) are skipped
    (:meth:`kept_blocks`): the circle's certified pruning, with the zonal logit's bound."""

    name = "zonal_log_sums"
    domains = ("zonal",)
    inputs = ("log_moments",)
    priority = 10
    description = (
        "zonal domain, log_sl: the polar sums from log g at the cells' centroids, log-sum-exp"
    )
    requirement = ZonalSums.requirement
    structure = ZonalSums.structure

    def __init__(self, model: Model, sources: Any, targets: Array) -> None:
        self.model = model
        self.nu = 0.5 * (sources.dimension - 3)
        self.centres = np.asarray(sources.theta, dtype=float)
        self.h = float(sources.h)
        targets = np.asarray(targets, dtype=float)
        self.theta = np.arctan2(targets[:, 1], targets[:, 0])
        self._poles = (self.theta <= 0.0) | (self.theta >= np.pi)
        self._v_norm = model.V_norm
        a, b, l1, l2 = zonal_scalars(model)
        self._a, self._b = a, b
        self._l1_sin = l1 * np.sin(self.theta)
        self._l2_cos = l2 * np.cos(self.theta)
        self.table = LogM0Table(self.nu, model.beta * abs(b))

    @classmethod
    def build(cls, model: Model, layout: Layout) -> "ZonalLogSums":
        return cls(model, layout.sources, layout.target_points)

    #: whether far source blocks are skipped (certified: :meth:`kept_blocks`)
    prune: bool = True

    def logits(self, rows: Array, phi: Array, log_a: Array) -> tuple[Array, Array]:
        """(logits, R) of the target rows ``rows`` against the sources at ``phi`` with log
        weights ``log_a``: beta a cos cos + log M0(c) + log a_j, and sin(phi_j) M1 / M0 (c)."""
        beta = self.model.beta
        c = (beta * self._b) * np.sin(self.theta[rows])[:, None] * np.sin(phi)[None, :]
        log_m0_c, ratio = self.table.both(c)
        out = (beta * self._a) * np.cos(self.theta[rows])[:, None] * np.cos(phi)[None, :]
        out += log_m0_c
        out += log_a[None, :]
        ratio *= np.sin(phi)[None, :]
        return out, ratio

    def kept_blocks(self, phi: Array, log_a: Array) -> tuple[Array, Array]:
        """Which source blocks (of :data:`SOURCE_BLOCK` consecutive cells) each target must
        sum, (targets, blocks), and the block of each source. For a block J with centroids in
        [lo, hi] (they increase with the cell), the logit is at most

            upper = max(A cos(lo), A cos(hi)) + log M0(beta |b| sin(theta) max_J sin(phi))
                    + max_J log a_j + log |J| + 1e-9 (1 + c),     A = beta a cos(theta)

        (log M0 is even and increasing in |c|; the last term covers the table's error); the
        log of the row's sum is at least the largest logit of the blocks' heaviest sources. A
        block is skipped when upper < lower + log(2^-60 / blocks): all skipped blocks together
        weigh less than 2^-60 of Z, and change N / Z by less than 2^-59 ||V||, as the circle's
        ``direct_pruned``."""
        n_s = len(phi)
        starts = np.arange(0, n_s, SOURCE_BLOCK)
        block = np.repeat(np.arange(len(starts)), np.diff(np.append(starts, n_s)))
        lo, hi = phi[starts], phi[np.append(starts[1:], n_s) - 1]
        sin_max = np.where(
            (lo <= 0.5 * np.pi) & (hi >= 0.5 * np.pi), 1.0, np.maximum(np.sin(lo), np.sin(hi))
        )
        heavy_log = np.maximum.reduceat(log_a, starts)
        index = np.where(log_a == heavy_log[block], np.arange(n_s), n_s)
        heaviest = np.minimum.reduceat(index, starts)
        beta = self.model.beta
        A = (beta * self._a) * np.cos(self.theta)[:, None]
        c_max = (beta * abs(self._b)) * np.sin(self.theta)[:, None] * sin_max[None, :]
        sizes = np.log(np.diff(np.append(starts, n_s)).astype(float))
        upper = np.maximum(A * np.cos(lo)[None, :], A * np.cos(hi)[None, :])
        upper += self.table.log_m0(c_max) + 1e-9 * (1.0 + c_max)
        upper += (heavy_log + sizes)[None, :]
        everything = np.arange(len(self.theta))
        lower = self.logits(everything, phi[heaviest], log_a[heaviest])[0].max(axis=1)
        cut = math.log(PRUNE_FRACTION / len(starts))
        return upper >= (lower + cut)[:, None], block

    def polar_velocity(self, ell: Array, offset: Array) -> Array:
        """v at the targets for one law given by log g (``ell``) and centroid offsets: the sums
        over the kept blocks (:meth:`kept_blocks`), targets :data:`TARGET_BLOCK` at a time."""
        phi = np.clip(self.centres + offset * self.h, 0.0, np.pi)
        log_a = ell + math.log(self.h)
        n_t = len(self.theta)
        z, n1, n2, m = np.empty(n_t), np.empty(n_t), np.empty(n_t), np.empty(n_t)
        if self.prune:
            keep, block = self.kept_blocks(phi, log_a)
        cos_phi = np.cos(phi)
        for start in range(0, n_t, TARGET_BLOCK):
            rows = np.arange(start, min(start + TARGET_BLOCK, n_t))
            cols = np.flatnonzero(keep[rows].any(axis=0)[block]) if self.prune else slice(None)
            logits, ratio = self.logits(rows, phi[cols], log_a[cols])
            m[rows] = logits.max(axis=1)
            logits -= m[rows, None]
            w = np.exp(logits, out=logits)
            z[rows] = w.sum(axis=1)
            n1[rows] = w @ cos_phi[cols]
            n2[rows] = np.einsum("fj,fj->f", w, ratio)
        numerator = self._l2_cos * n2 - self._l1_sin * n1
        if self.model.kind.normalized:
            v = np.clip(numerator / z, -self._v_norm, self._v_norm)
        else:
            with np.errstate(over="ignore", invalid="ignore"):
                v = numerator * np.exp(m)
        v[self._poles] = 0.0
        return v

    def velocity(self, state: Array) -> Array:
        """The polar velocity of each slice at the targets, shape (n_xi, 1, n_targets), for a
        state (n_xi, 2, n) of log g and centroid offsets (cell widths)."""
        return np.stack([self.polar_velocity(ell, c)[None] for ell, c in np.asarray(state)])
