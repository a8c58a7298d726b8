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
from scipy.linalg import matmul_toeplitz

from .._types import Array
from ..geometry import tangent_project
from ..models import Model
from ._base import Evaluator, Layout, register_evaluator
from ._points import CircleBasis, SphereBasis


@register_evaluator
class AuxiliaryInteraction(Evaluator):
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
    domains = ("circle", "sphere")
    inputs = ("values",)
    priority = 0
    selectable = False

    requirement = "is the evaluator of usa_av"
    refusal_text = (
        "= {choice!r}: usa_av has its own spectral evaluator (gauges and couplings of "
        "the slices); remove the key"
    )

    @staticmethod
    def structure(model: Model) -> bool:
        return model.auxiliary is not None

    @classmethod
    def build(cls, model: Model, layout: Layout) -> "AuxiliaryInteraction":
        return cls(model, layout.sources.points, layout.sources.weight, layout.target_points)

    def __init__(self, model: Model, sources: Array, weight: Array, targets: Array) -> None:
        aux = model.auxiliary
        self.model, self.kernel = model, aux
        self.sources = np.asarray(sources, dtype=float)
        self.weight = np.asarray(weight, dtype=float)
        self.targets = np.asarray(targets, dtype=float)
        self.kappa = float(model.beta)
        self.basis = CircleBasis(self.kappa) if model.d == 2 else SphereBasis(self.kappa)
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
        return np.stack(
            [
                self.basis.analysis(self._source_frames[l], rho[l] * self.weight)
                for l in range(len(rho))
            ]
        )

    def coupled(self, c: Array) -> Array:
        """mu_k = sum_l r_l b_kl c_l, shape (M, n_coefficients) (one row when b = 1)."""
        rc = self.kernel.weight[:, None] * c
        if self.kernel.uniform_coupling:
            return rc.sum(axis=0, keepdims=True)
        if self._toeplitz is not None:
            col = self._toeplitz
            return matmul_toeplitz((col, col), rc.real, check_finite=False) + 1j * matmul_toeplitz(
                (col, col), rc.imag, check_finite=False
            )
        return self.kernel.coupling @ rc

    def vectors(self, rho: Array) -> Array:
        """X_k at the targets, shape (M, F, d), for slice values ``rho`` (M, N) at the sources."""
        mu = self.coupled(self.slice_coefficients(rho))
        M, F = self.kernel.n_slices, len(self.targets)
        G = self.kernel.gauges
        if len(mu) == 1:  # every slice sees the same field: one synthesis at all M x F points
            m = self.basis.fields(mu[0], self._all_targets)[1].reshape(M, F, -1)
        else:
            m = np.stack([self.basis.fields(mu[k], self._target_frames[k])[1] for k in range(M)])
        n = tangent_project(self._target_frames, m)
        # P_x G_k^T v = G_k^T P_{G_k x} v for orthogonal G_k
        with np.errstate(over="ignore", invalid="ignore"):
            return np.einsum("kji,kfj->kfi", G, n) * self._scale

    def energy(self, rho: Array) -> float:
        """E_h = 1/(2 beta) sum_kl r_k r_l b_kl int int exp(beta <G_k x, G_l y>) rho_k rho_l for
        slice values ``rho`` (M, N) at the sources (their masses at the source points)."""
        c = self.slice_coefficients(rho)
        mu = self.coupled(c)
        r = self.kernel.weight
        total = sum(
            r[k] * self.basis.inner(c[k], mu[0] if len(mu) == 1 else mu[k]) for k in range(len(c))
        )
        return total * self._scale / (2.0 * self.kappa)
