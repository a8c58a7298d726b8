"""Spectral interaction from weighted source points to arbitrary target points on S^2 (ducc0)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy import special

from .._lazy import ducc0
from .._types import Array
from ..geometry import tangent_project
from ..grids._sphere_gauss import points_to_colat_lon
from ._base import PointsEvaluator, register_evaluator
from ._funk_hecke import (
    GUARD_RELATIVE_Z,
    FunkHeckeInteraction,
    funk_hecke_multipliers,
    zonal_decomposition,
)
from ._quadrature import clip_norm

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


class _PointCache:
    """Per-point-set arrays kept between calls: the sources and targets of a scheme never change.

    Keyed by the points' memory address, shape and strides; the cache keeps a reference to the
    points, so that memory cannot be reused by another array while the entry lives. At most 2^24
    entries in all."""

    def __init__(self) -> None:
        self._cache: dict = {}
        self._cached_entries = 0

    def _cached(self, points: Array, make):
        key = (points.__array_interface__["data"][0], points.shape, points.strides)
        entry = self._cache.get(key)
        if entry is not None:
            return entry[1]
        value = make()
        size = sum(np.size(v) for v in value) if isinstance(value, tuple) else np.size(value)
        if self._cached_entries + size <= 1 << 24:
            self._cache[key] = (points, value)
            self._cached_entries += size
        return value


def circle_multiplier_degree(kappa: float, cutoff: float = MULTIPLIER_CUTOFF) -> int:
    """Smallest L with I_n(kappa) / I_0(kappa) < cutoff for |n| > L (at least 4)."""
    n = np.arange(int(8 + 2 * math.sqrt(2.0 * kappa * math.log(1.0 / cutoff)) + 8))
    ratio = special.ive(n, kappa) / special.ive(0, kappa)
    above = np.flatnonzero(ratio >= cutoff)
    return int(max(4, above[-1] + 1 if len(above) else 4))


class CircleBasis(_PointCache):
    """Fourier modes n = -L..L on S^1: mu_hat(n) = sum_j a_j e^{-i n phi_j}."""

    def __init__(self, kappa: float) -> None:
        self.kappa = kappa
        self.L = circle_multiplier_degree(kappa)
        self.n = np.arange(-self.L, self.L + 1)
        self.i_n = special.ive(self.n, kappa)  # e^{-kappa} I_n(kappa)
        self.i_next = special.ive(self.n + 1, kappa)
        super().__init__()

    @staticmethod
    def angles(points: Array) -> Array:
        return np.arctan2(points[..., 1], points[..., 0])

    def _modes(self, points: Array) -> Array:
        """e^{i n phi} at the points, shape (len(points), 2L + 1) (cached)."""
        return self._cached(points, lambda: np.exp(1j * np.outer(self.angles(points), self.n)))

    def analysis(self, points: Array, masses: Array) -> Array:
        return masses @ self._modes(points).conj()

    def fields(self, mu: Array, points: Array) -> tuple[Array, Array]:
        """(F, M) at the points u, both times e^{-kappa}: F = int exp(kappa <u, z>) mu and the
        vector M = int exp(kappa <u, z>) z mu, (n, 2)."""
        e = self._modes(points)
        f = (e @ (mu * self.i_n)).real
        # M_x + i M_y = sum_n mu(n) I_{n+1} e^{i (n + 1) phi}; e^{i phi} is the cached mode n = 1
        g = e[:, self.L + 1] * (e @ (mu * self.i_next))
        return f, np.stack([g.real, g.imag], axis=-1)

    def inner(self, c: Array, mu: Array) -> float:
        """e^{-kappa} int rho~ F[mu] for rho~ with coefficients c: sum_n conj(c) mu I_n."""
        return float(np.sum(np.conj(c) * mu * self.i_n).real)


class SphereBasis(_PointCache):
    """Spherical harmonics up to degree L on S^2 (m >= 0, shtns / ducc0 order), via ducc0."""

    def __init__(self, kappa: float, nthreads: int = 1, epsilon: float = 1e-13) -> None:
        self._sht = ducc0.sht
        self.kappa = kappa
        self.L = multiplier_degree(kappa)
        l = degrees(self.L)
        self.s, self.ds = funk_hecke_multipliers(l, kappa)
        self.grad = self.s * np.sqrt(l * (l + 1.0))
        self.real_weight = np.where(np.arange(len(l)) <= self.L, 1.0, 2.0)  # m = 0 first
        self.nthreads, self.epsilon = nthreads, epsilon
        super().__init__()

    def _frames(self, points: Array) -> tuple[Array, Array, Array]:
        """(colatitude, longitude) of the points and their unit vectors e_theta, e_phi (cached)."""

        def make():
            loc = np.ascontiguousarray(points_to_colat_lon(points))
            th, ph = loc[:, 0], loc[:, 1]
            e_theta = np.stack(
                [np.cos(th) * np.cos(ph), np.cos(th) * np.sin(ph), -np.sin(th)], axis=-1
            )
            e_phi = np.stack([-np.sin(ph), np.cos(ph), np.zeros_like(ph)], axis=-1)
            return loc, e_theta, e_phi

        return self._cached(points, make)

    def analysis(self, points: Array, masses: Array) -> Array:
        """Coefficients of sum_j masses_j delta_{points_j} (degrees <= L)."""
        loc = self._frames(points)[0]
        return self._sht.adjoint_synthesis_general(
            map=np.ascontiguousarray(masses, dtype=float)[None, :],
            spin=0,
            lmax=self.L,
            loc=loc,
            epsilon=self.epsilon,
            nthreads=self.nthreads,
        )[0]

    def fields(self, mu: Array, points: Array) -> tuple[Array, Array]:
        """(F, M) at the points u, both times e^{-kappa}: F = K_kappa * mu and the vector
        M = int exp(kappa <u, z>) z mu = u dF/dkappa + grad_S F / kappa, (n, 3)."""
        loc, e_theta, e_phi = self._frames(points)

        def synth(alm, spin):
            return self._sht.synthesis_general(
                alm=alm,
                spin=spin,
                lmax=self.L,
                loc=loc,
                epsilon=self.epsilon,
                nthreads=self.nthreads,
            )

        f = synth((self.s * mu)[None, :], 0)[0]
        dz = synth((self.ds * mu)[None, :], 0)[0]
        g = synth(np.stack([self.grad * mu, np.zeros_like(mu)]), 1)
        m = points * dz[:, None] + (g[0][:, None] * e_theta + g[1][:, None] * e_phi) / self.kappa
        return f, m

    def inner(self, c: Array, mu: Array) -> float:
        return float(np.sum(self.real_weight * (np.conj(c) * self.s * mu).real))


@register_evaluator
class FunkHeckePoints(PointsEvaluator):
    """Velocity at target points for a density given as weighted source points (cells).

    For B = Q^T K = a R (a > 0, R orthogonal) and kappa = beta a, the sums over sources y_j with
    masses a_j = rho_j |cell_j|,

        Z(x) = sum_j a_j exp(kappa <x, R y_j>),
        N(x) = V R^T sum_j a_j exp(kappa <x, R y_j>) R y_j,

    are evaluated spectrally (:class:`SphereBasis`): the coefficients of the measure
    sum_j a_j delta_{R y_j} (an adjoint general synthesis, ``ducc0.sht.adjoint_synthesis_general``)
    are multiplied by the scaled Funk-Hecke multipliers s_l(kappa), ds_l(kappa) up to the degree L
    beyond which s_l / s_0 < 1e-17 (:func:`multiplier_degree`), and Z, dZ/dkappa and grad Z are
    synthesized at the targets (``synthesis_general``); N = V R^T (x dZ/dkappa + grad Z / kappa).
    The result equals the direct sums up to the accuracy ``epsilon`` of the general transforms
    (tested). Cost: O(L^2 log L + n_sources + n_targets) per density, against
    O(n_sources n_targets) directly. Where Z < 1e-6 max Z its relative accuracy is low; the speed
    there is clipped to ||V|| (``guarded_fraction``).
    """

    name = "funk_hecke"
    domains = ("sphere",)
    inputs = ("values",)
    priority = 10

    description = FunkHeckeInteraction.description
    requirement = FunkHeckeInteraction.requirement
    structure = FunkHeckeInteraction.structure

    def setup(self, *, epsilon: float = 1e-13, nthreads: int = 1) -> None:
        model = self.model
        self.guarded_fraction = 0.0
        if model.beta == 0.0:
            self.kappa, self.lmax = 0.0, 0
            return
        self.kappa, R = zonal_decomposition(model, type(self).__name__)
        self.basis = SphereBasis(self.kappa, nthreads=nthreads, epsilon=epsilon)
        self.lmax = self.basis.L
        self._rotated_sources = np.ascontiguousarray(self.sources @ R.T)
        self._w = model.V @ R.T

    def attributes(self) -> dict[str, Any]:
        return {"interaction_lmax": self.lmax}

    def vectors(self, rho: Array) -> Array:
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
        z, m = self.basis.fields(self.basis.analysis(self._rotated_sources, masses), self.targets)
        vel = tangent_project(self.targets, m @ self._w.T)
        if not model.kind.normalized:
            with np.errstate(
                over="ignore", invalid="ignore"
            ):  # usa at large beta: inf, caught later
                return vel * math.exp(self.kappa)
        small = z < GUARD_RELATIVE_Z * z.max()
        self.guarded_fraction = float(small.mean())
        return clip_norm(vel / np.where(z > 0.0, z, np.inf)[:, None], self._v_norm)
