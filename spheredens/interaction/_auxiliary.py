"""The velocity of ``usa_av``: slices coupled through gauges and couplings, spectrally.

In the gauge frame z = G_l y the slice densities become rho~_l(z) = rho_l(G_l^T z), and

    X_k(x) = P_x G_k^T M[mu_k](G_k x),   mu_k = sum_l r_l b_kl rho~_l,
    M[mu](u) = int exp(beta <u, z>) z mu(z) dsigma(z) = u D(u) + grad_S F(u) / beta,

with F = K_beta * mu (Funk-Hecke on S^2, Bessel I_n on S^1) and D = dF/dbeta. Everything is
linear in the densities, so:

* each slice, given as masses at source points (cell centres or quadrature nodes), enters through
  the coefficients of its gauge-frame measure, sum_j a_lj delta_{G_l y_j} (one adjoint general
  synthesis, or a non-uniform DFT on the circle): O(M) transforms for M slices;
* the coupling mu_k = sum_l r_l b_kl c_l acts on coefficient arrays: nothing for b = 1 (one
  combined mu for every slice), an FFT Toeplitz product over the slices for equally spaced
  slices with b a function of xi - zeta (O(M log M) per coefficient), a matrix product otherwise;
* the fields are synthesized at the gauge-frame targets G_k x: one call for all slices when
  b = 1, one per slice otherwise.

No per-pair convolution: the cost per right-hand side is O(M (N + L^2 log L)) + O(L^2 M log M)
with N points and degree L (measured in benchmarks/bench_auxiliary.py).
"""
from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray
from scipy import special
from scipy.linalg import matmul_toeplitz

from ..geometry import tangent_project
from ..grids._sphere_gauss import points_to_colat_lon
from ..models import Model
from ._funk_hecke import funk_hecke_multipliers
from ._points import MULTIPLIER_CUTOFF, degrees, multiplier_degree

Array = NDArray[np.float64]


def circle_multiplier_degree(kappa: float, cutoff: float = MULTIPLIER_CUTOFF) -> int:
    """Smallest L with I_n(kappa) / I_0(kappa) < cutoff for |n| > L (at least 4)."""
    n = np.arange(int(8 + 2 * math.sqrt(2.0 * kappa * math.log(1.0 / cutoff)) + 8))
    ratio = special.ive(n, kappa) / special.ive(0, kappa)
    above = np.flatnonzero(ratio >= cutoff)
    return int(max(4, above[-1] + 1 if len(above) else 4))


class _CircleBasis:
    """Fourier modes n = -L..L on S^1: mu_hat(n) = sum_j a_j e^{-i n phi_j}."""

    def __init__(self, kappa: float) -> None:
        self.kappa = kappa
        self.L = circle_multiplier_degree(kappa)
        self.n = np.arange(-self.L, self.L + 1)
        self.i_n = special.ive(self.n, kappa)  # e^{-kappa} I_n(kappa)
        self.i_next = special.ive(self.n + 1, kappa)
        self._cache: dict = {}
        self._cached = 0

    @staticmethod
    def angles(points: Array) -> Array:
        return np.arctan2(points[..., 1], points[..., 0])

    def _modes(self, points: Array) -> Array:
        """e^{i n phi} at the points, shape (len(points), 2L + 1); cached for fixed point sets
        (the sources and targets of a scheme never change) up to 2^24 entries in all."""
        key = (points.__array_interface__["data"][0], points.shape)
        e = self._cache.get(key)
        if e is None:
            e = np.exp(1j * np.outer(self.angles(points), self.n))
            if self._cached + e.size <= 1 << 24:
                self._cache[key] = e
                self._cached += e.size
        return e

    def analysis(self, points: Array, masses: Array) -> Array:
        return masses @ self._modes(points).conj()

    def fields(self, mu: Array, points: Array) -> tuple[Array, Array]:
        """(F, tangent numerator) at the points: F = e^{-kappa} int exp(kappa <u, z>) mu, and
        P_u M[mu](u) e^{-kappa} as vectors (n, 2)."""
        phi = self.angles(points)
        e = self._modes(points)
        f = (e @ (mu * self.i_n)).real
        # <tau, M> = Im sum_n mu(n) I_{n+1} e^{i n phi}, tau = (-sin, cos)
        v = (e @ (mu * self.i_next)).imag
        tau = np.stack([-np.sin(phi), np.cos(phi)], axis=-1)
        return f, v[:, None] * tau

    def inner(self, c: Array, mu: Array) -> float:
        """e^{-kappa} int rho~ F[mu] for rho~ with coefficients c: sum_n conj(c) mu I_n."""
        return float(np.sum(np.conj(c) * mu * self.i_n).real)


class _SphereBasis:
    """Spherical harmonics up to degree L on S^2 (m >= 0, shtns / ducc0 order), via ducc0."""

    def __init__(self, kappa: float, nthreads: int = 1, epsilon: float = 1e-13) -> None:
        import ducc0

        self._sht = ducc0.sht
        self.kappa = kappa
        self.L = multiplier_degree(kappa)
        l = degrees(self.L)
        self.s, self.ds = funk_hecke_multipliers(l, kappa)
        self.grad = self.s * np.sqrt(l * (l + 1.0))
        self.real_weight = np.where(np.arange(len(l)) <= self.L, 1.0, 2.0)  # m = 0 first
        self.nthreads, self.epsilon = nthreads, epsilon

    def analysis(self, points: Array, masses: Array) -> Array:
        loc = np.ascontiguousarray(points_to_colat_lon(points))
        return self._sht.adjoint_synthesis_general(
            map=np.ascontiguousarray(masses, dtype=float)[None, :], spin=0, lmax=self.L, loc=loc,
            epsilon=self.epsilon, nthreads=self.nthreads)[0]

    def fields(self, mu: Array, points: Array) -> tuple[Array, Array]:
        loc = np.ascontiguousarray(points_to_colat_lon(points))

        def synth(alm, spin):
            return self._sht.synthesis_general(alm=alm, spin=spin, lmax=self.L, loc=loc,
                                               epsilon=self.epsilon, nthreads=self.nthreads)

        f = synth((self.s * mu)[None, :], 0)[0]
        dz = synth((self.ds * mu)[None, :], 0)[0]
        g = synth(np.stack([self.grad * mu, np.zeros_like(mu)]), 1)
        th, ph = loc[:, 0], loc[:, 1]
        e_theta = np.stack([np.cos(th) * np.cos(ph), np.cos(th) * np.sin(ph), -np.sin(th)], axis=-1)
        e_phi = np.stack([-np.sin(ph), np.cos(ph), np.zeros_like(ph)], axis=-1)
        m = points * dz[:, None] + (g[0][:, None] * e_theta + g[1][:, None] * e_phi) / self.kappa
        return f, tangent_project(points, m)

    def inner(self, c: Array, mu: Array) -> float:
        return float(np.sum(self.real_weight * (np.conj(c) * self.s * mu).real))


class AuxiliaryInteraction:
    """Velocity X_k of every slice of ``usa_av`` at target points (module docstring).

    Parameters
    ----------
    model : Model
        ``usa_av`` with its :class:`~spheredens.auxiliary.AuxiliaryKernel`.
    sources : ndarray (N, d)
        Points where the slice densities are given (cell centres, quadrature nodes).
    weight : ndarray (N,)
        Their cell areas / quadrature weights.
    targets : ndarray (F, d)
        Points where the velocity is wanted (faces, nodes).
    """

    name = "auxiliary_spectral"

    def __init__(self, model: Model, sources: Array, weight: Array, targets: Array) -> None:
        aux = model.auxiliary
        self.model, self.kernel = model, aux
        self.sources = np.asarray(sources, dtype=float)
        self.weight = np.asarray(weight, dtype=float)
        self.targets = np.asarray(targets, dtype=float)
        self.kappa = float(model.beta)
        self.basis = _CircleBasis(self.kappa) if model.d == 2 else _SphereBasis(self.kappa)
        G = aux.gauges
        self._source_frames = np.einsum("kij,nj->kni", G, self.sources)  # G_l y
        self._target_frames = np.einsum("kij,nj->kni", G, self.targets)  # G_k x
        self._all_targets = self._target_frames.reshape(-1, self.targets.shape[1])
        self._toeplitz = aux.toeplitz
        self._scale = math.exp(self.kappa)
        self.guarded_fraction = 0.0

    def slice_coefficients(self, rho: Array) -> Array:
        """c_l: coefficients of sum_j rho_lj w_j delta_{G_l y_j}, shape (M, n_coefficients)."""
        rho = np.atleast_2d(rho)
        return np.stack([self.basis.analysis(self._source_frames[l], rho[l] * self.weight)
                         for l in range(len(rho))])

    def coupled(self, c: Array) -> Array:
        """mu_k = sum_l r_l b_kl c_l, shape (M, n_coefficients) (one row when b = 1)."""
        rc = self.kernel.weight[:, None] * c
        if self.kernel.uniform_coupling:
            return rc.sum(axis=0, keepdims=True)
        if self._toeplitz is not None:
            col = self._toeplitz
            return (matmul_toeplitz((col, col), rc.real, check_finite=False)
                    + 1j * matmul_toeplitz((col, col), rc.imag, check_finite=False))
        return self.kernel.coupling @ rc

    def velocity(self, rho: Array) -> Array:
        """X_k at the targets, shape (M, F, d), for slice values ``rho`` (M, N) at the sources."""
        mu = self.coupled(self.slice_coefficients(rho))
        M, F = self.kernel.n_slices, len(self.targets)
        G = self.kernel.gauges
        if len(mu) == 1:  # every slice sees the same field: one synthesis at all M x F points
            _, n = self.basis.fields(mu[0], self._all_targets)
            n = n.reshape(M, F, -1)
        else:
            n = np.stack([self.basis.fields(mu[k], self._target_frames[k])[1] for k in range(M)])
        # P_x G_k^T v = G_k^T P_{G_k x} v for orthogonal G_k
        with np.errstate(over="ignore", invalid="ignore"):
            return np.einsum("kji,kfj->kfi", G, n) * self._scale

    def energy(self, rho: Array) -> float:
        """E_h = 1/(2 beta) sum_kl r_k r_l b_kl int int exp(beta <G_k x, G_l y>) rho_k rho_l for
        slice values ``rho`` (M, N) at the sources (their masses at the source points)."""
        c = self.slice_coefficients(rho)
        mu = self.coupled(c)
        r = self.kernel.weight
        total = sum(r[k] * self.basis.inner(c[k], mu[0] if len(mu) == 1 else mu[k])
                    for k in range(len(c)))
        return total * self._scale / (2.0 * self.kappa)
