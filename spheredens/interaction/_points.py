"""Spectral interaction from weighted source points to arbitrary target points on S^2 (ducc0)."""
from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from ..geometry import tangent_project
from ..grids._sphere_gauss import points_to_colat_lon
from ..models import Model
from ._funk_hecke import GUARD_RELATIVE_Z, funk_hecke_multipliers, orthogonal_multiple
from ._quadrature import clip_norm

Array = NDArray[np.float64]

#: degrees kept: the scaled multipliers s_l(kappa) / s_0(kappa) fall below this beyond them
MULTIPLIER_CUTOFF = 1e-17
#: largest degree used by the point evaluator
MAX_POINT_LMAX = 2047


def multiplier_degree(kappa: float, cutoff: float = MULTIPLIER_CUTOFF) -> int:
    """Smallest L with s_l(kappa) / s_0(kappa) < cutoff for all l > L (at least 4).

    s_l / s_0 ~ exp(-l (l + 1) / (2 kappa)) for l << kappa: L ~ sqrt(2 kappa log(1/cutoff)).
    """
    if kappa == 0.0:
        return 4
    guess = int(4 + 2 * math.sqrt(2.0 * kappa * math.log(1.0 / cutoff)) + 4)
    l = np.arange(min(guess, MAX_POINT_LMAX) + 1, dtype=float)
    s, _ = funk_hecke_multipliers(l, kappa)
    above = np.flatnonzero(s / s[0] >= cutoff)
    return int(min(max(4, above[-1] + 1 if len(above) else 4), MAX_POINT_LMAX))


def degrees(lmax: int) -> Array:
    """Degree l of each coefficient in the m-major order shared by shtns and ducc0."""
    return np.concatenate([np.arange(m, lmax + 1) for m in range(lmax + 1)]).astype(float)


class FunkHeckePoints:
    """Velocity at target points for a density given as weighted source points (cells).

    For B = Q^T K = a R (a > 0, R orthogonal) and kappa = beta a, the sums over sources y_j with
    masses a_j = rho_j |cell_j|,

        Z(x) = sum_j a_j exp(kappa <x, R y_j>),   N(x) = V R^T sum_j a_j exp(kappa <x, R y_j>) R y_j,

    are evaluated spectrally: the coefficients of the measure sum_j a_j delta_{R y_j} (an
    adjoint general synthesis, ``ducc0.sht.adjoint_synthesis_general``) are multiplied by the
    scaled Funk-Hecke multipliers s_l(kappa), ds_l(kappa) up to the degree L beyond which
    s_l / s_0 < 1e-17 (:func:`multiplier_degree`), and Z, dZ/dkappa and grad Z are synthesized at
    the targets (``synthesis_general``); N = V R^T (x dZ/dkappa + grad Z / kappa). The result
    equals the direct sums up to the accuracy ``epsilon`` of the general transforms (tested).
    Cost: O(L^2 log L + n_sources + n_targets) per density, against O(n_sources n_targets) directly.
    Where Z < 1e-6 max Z its relative accuracy is low; the speed there is clipped to ||V||
    (``guarded_fraction``).
    """

    name = "funk_hecke"

    def __init__(self, model: Model, sources: Array, weight: Array, targets: Array, *,
                 epsilon: float = 1e-13, nthreads: int = 1) -> None:
        import ducc0

        self._sht = ducc0.sht
        self.model = model
        self.weight = np.asarray(weight, dtype=float)
        self.sources = np.asarray(sources, dtype=float)
        self.targets = np.asarray(targets, dtype=float)
        self.epsilon = epsilon
        self.nthreads = nthreads
        self.guarded_fraction = 0.0
        self._v_norm = model.V_norm
        if model.beta == 0.0:
            self.kappa, self.lmax = 0.0, 0
            return
        decomposition = orthogonal_multiple(model.B)
        if decomposition is None:
            raise ValueError("FunkHeckePoints needs B = Q^T K to be a positive multiple of an "
                             "orthogonal matrix")
        a, R = decomposition
        self.kappa = model.beta * a
        self.lmax = multiplier_degree(self.kappa)
        l = degrees(self.lmax)
        self._s, self._ds = funk_hecke_multipliers(l, self.kappa)
        self._grad = self._s * np.sqrt(l * (l + 1.0))
        self._source_loc = np.ascontiguousarray(points_to_colat_lon(self.sources @ R.T))
        self._target_loc = np.ascontiguousarray(points_to_colat_lon(self.targets))
        th, ph = self._target_loc[:, 0], self._target_loc[:, 1]
        e_theta = np.stack([np.cos(th) * np.cos(ph), np.cos(th) * np.sin(ph), -np.sin(th)], axis=-1)
        e_phi = np.stack([-np.sin(ph), np.cos(ph), np.zeros_like(ph)], axis=-1)
        W = model.V @ R.T
        # tangent velocity = P_x W M, M = x D + (g_theta e_theta + g_phi e_phi) / kappa
        self._wx = tangent_project(self.targets, self.targets @ W.T)
        self._wt = tangent_project(self.targets, e_theta @ W.T) / self.kappa
        self._wp = tangent_project(self.targets, e_phi @ W.T) / self.kappa

    def coefficients(self, masses: Array) -> Array:
        """Spherical-harmonic coefficients of sum_j masses_j delta_{R y_j} (degrees <= lmax)."""
        return self._sht.adjoint_synthesis_general(
            map=np.ascontiguousarray(masses, dtype=float)[None, :], spin=0, lmax=self.lmax,
            loc=self._source_loc, epsilon=self.epsilon, nthreads=self.nthreads)[0]

    def _synth(self, alm: Array, spin: int) -> Array:
        return self._sht.synthesis_general(alm=alm, spin=spin, lmax=self.lmax, loc=self._target_loc,
                                           epsilon=self.epsilon, nthreads=self.nthreads)

    def velocity(self, rho: Array) -> Array:
        """Tangent velocity X[rho] at the targets, shape (n_xi, n_targets, 3), for cell values
        ``rho`` of shape (n_xi, n_sources) (negative values are clipped)."""
        rho = np.atleast_2d(rho)
        return np.stack([self._one(np.where(r > 0.0, r, 0.0) * self.weight) for r in rho])

    def _one(self, masses: Array) -> Array:
        model = self.model
        if self.kappa == 0.0:
            m = masses @ self.sources
            avg = model.V @ m / (masses.sum() if model.kind.normalized else 1.0)
            return tangent_project(self.targets, np.broadcast_to(avg, self.targets.shape))
        c = self.coefficients(masses)
        z = self._synth((self._s * c)[None, :], 0)[0]
        dz = self._synth((self._ds * c)[None, :], 0)[0]
        grad = self._synth(np.stack([self._grad * c, np.zeros_like(c)]), 1)
        vel = self._wx * dz[:, None] + self._wt * grad[0][:, None] + self._wp * grad[1][:, None]
        if not model.kind.normalized:
            with np.errstate(over="ignore", invalid="ignore"):  # usa at large beta: inf, caught later
                return vel * math.exp(self.kappa)
        small = z < GUARD_RELATIVE_Z * z.max()
        self.guarded_fraction = float(small.mean())
        return clip_norm(vel / np.where(z > 0.0, z, np.inf)[:, None], self._v_norm)
