"""Spectral interaction on S^2: Funk-Hecke multipliers (scaled modified spherical Bessel
functions)."""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy import special
from scipy.spatial.transform import Rotation

from .._lazy import ducc0
from .._types import Array
from ..geometry import tangent_project
from ..grids import GaussGrid, OffGridSynthesis
from ..models import Model
from ._base import Evaluator, Layout, register_evaluator
from ._quadrature import DirectQuadrature, clip_norm

Coefficients = NDArray[np.complex128]

#: where the scaled partition function is below this fraction of its maximum, the spectral
#: value has few significant digits: the velocity there is only guaranteed bounded by ||V||
GUARD_RELATIVE_Z = 1e-6


def funk_hecke_multipliers(l: Array, kappa: float) -> tuple[Array, Array]:
    """Scaled multipliers of f -> int exp(kappa <x, y>) f(y) dsigma(y) on S^2, and their
    kappa-derivatives.

    Returns s_l = e^{-kappa} 4 pi i_l(kappa) and ds_l = e^{-kappa} 4 pi i_l'(kappa), with i_l the
    modified spherical Bessel function,
    i_l(kappa) e^{-kappa} = sqrt(pi / (2 kappa)) ive(l + 1/2, kappa), and
    i_l' = i_{l+1} + (l / kappa) i_l. Stable for kappa up to 1e5 and beyond.
    """
    l = np.asarray(l, dtype=float)
    if kappa == 0.0:
        return 4.0 * np.pi * (l == 0), 4.0 * np.pi / 3.0 * (l == 1)
    c = 4.0 * np.pi * math.sqrt(math.pi / (2.0 * kappa))
    s = c * special.ive(l + 0.5, kappa)
    s_next = c * special.ive(l + 1.5, kappa)
    return s, s_next + (l / kappa) * s


#: the general-B evaluators (kappa = beta |B^T x| between beta sigma_min and beta sigma_max)
#: need B invertible with at most this condition number
MAX_CONDITION = 1e3
GENERAL_B_REQUIREMENT = "needs B = Q^T K invertible with condition number <= 1e3"


def well_conditioned(model: Model) -> bool:
    """Whether sigma_max(B) / sigma_min(B) < MAX_CONDITION."""
    sigma = model.kernel.singular_values
    return bool(sigma[-1] * MAX_CONDITION > sigma[0])


def zonal_decomposition(model: Model, who: str) -> tuple[float, Array]:
    """(kappa, R) with B = Q^T K = a R (a > 0, R orthogonal) and kappa = beta a: the kernel is
    exp(kappa <R^T x, y>), zonal; a ValueError naming ``who`` when B is no such multiple."""
    decomposition = model.kernel.orthogonal_multiple()
    if decomposition is None:
        raise ValueError(f"{who} needs B = Q^T K to be a positive multiple of an orthogonal matrix")
    a, R = decomposition
    return model.beta * a, R


class _SphereEvaluator(Evaluator):
    """Shared pieces: beta = 0 shortcut, normalization, guard, tangent projection."""

    @classmethod
    def build(cls, model: Model, layout: Layout) -> "_SphereEvaluator":
        return cls(model, layout.sources)

    def __init__(self, model: Model, grid: GaussGrid) -> None:
        self.model = model
        self.grid = grid
        self._v_norm = model.V_norm
        self.guarded_fraction = 0.0

    def _finish(self, z: Array, n: Array, log_scale: Array | float) -> Array:
        """N/Z (sa) or N e^{log_scale} (usa) on the grid, guarded where Z is round-off."""
        if not self.model.kind.normalized:
            with np.errstate(
                over="ignore", invalid="ignore"
            ):  # usa at large beta: inf, caught later
                return (
                    n * np.exp(log_scale)[..., None]
                    if np.ndim(log_scale)
                    else n * np.exp(log_scale)
                )
        small = z < GUARD_RELATIVE_Z * z.max()
        self.guarded_fraction = float(small.mean())
        out = n / np.where(z > 0.0, z, np.inf)[..., None]
        return clip_norm(out, self._v_norm)

    def _mean_field(self, rho_c: Coefficients) -> Array:
        """beta = 0: X = P_x V m with m = int y rho (and Z = mass)."""
        rho = self.grid.synth(rho_c)
        m = np.einsum("ij,ijk->k", rho * self.grid.weight, self.grid.points)
        mass = float(np.sum(rho * self.grid.weight))
        avg = np.broadcast_to(self.model.V @ m, self.grid.points.shape)
        return avg / mass if self.model.kind.normalized else avg

    def vectors(self, state: Coefficients) -> Array:
        """Tangent velocity (n_xi, nlat, nphi, 3) for coefficient arrays (n_xi, nlm)."""
        state = np.atleast_2d(state)
        out = []
        for c in state:
            avg = self._mean_field(c) if self.model.beta == 0.0 else self.attention_average(c)
            out.append(tangent_project(self.grid.points, avg))
        return np.stack(out)

    def attention_average(self, rho_c: Coefficients) -> Array:
        raise NotImplementedError


def rotation_euler_zyz(R: Array) -> tuple[float, float, float]:
    """Angles (psi, theta, phi) for ``ducc0.sht.rotate_alm`` so that the rotated coefficients
    describe f(R^T x) (checked against direct evaluation in the tests)."""

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # gimbal lock is harmless here
        alpha, beta, gamma = Rotation.from_matrix(R).as_euler("ZYZ")
    return float(gamma), float(beta), float(alpha)


@register_evaluator
class FunkHeckeInteraction(_SphereEvaluator):
    """Exact spectral velocity when B = Q^T K = a R, a > 0, R orthogonal.

    With rho_R(z) = rho(R^T z) and kappa = beta a,

        Z(x) = (K_kappa * rho_R)(x),   N(x) = V R^T M(x),
        M(x) = int exp(kappa <x, z>) z rho_R(z) dz = x d/dkappa Z(x) + (1/kappa) grad_S Z(x),

    and K_kappa is diagonal in spherical harmonics with multipliers 4 pi i_l(kappa)
    (:func:`funk_hecke_multipliers`, scaled by e^{-kappa}, which cancels in N/Z). One
    evaluation costs three scalar syntheses (Z, dZ/dkappa, and grad Z as one vector
    synthesis) plus, when R != I, an off-grid synthesis and an analysis for the rotation.
    For a band-limited rho the result is exact to round-off.
    """

    name = "funk_hecke"
    domains = ("sphere",)
    inputs = ("coefficients",)
    priority = 10

    description = "sphere: Funk-Hecke multipliers (B a multiple of an orthogonal matrix)"
    requirement = "needs B = Q^T K to be a positive multiple of an orthogonal matrix"

    @staticmethod
    def structure(model: Model) -> bool:
        return model.beta == 0.0 or model.kernel.orthogonal_multiple() is not None

    def __init__(self, model: Model, grid: GaussGrid) -> None:
        super().__init__(model, grid)
        if model.beta == 0.0:  # kernel = 1: the mean field, for any B
            return
        self.kappa, R = zonal_decomposition(model, type(self).__name__)
        self._r = R
        self._s, self._ds = funk_hecke_multipliers(grid.l, self.kappa)
        # rho_R(z) = rho(R^T z): a rotation of the coefficients (R = -R' for det R = -1 is the
        # rotation R' followed by the parity x -> -x, i.e. a factor (-1)^l)
        self._parity = None
        if np.linalg.det(R) < 0:
            R = -R
            self._parity = (-1.0) ** grid.l
        self._euler = None if np.abs(R - np.eye(3)).max() <= 1e-15 else rotation_euler_zyz(R)
        # tangent components of N = V R^T M with M = x D + (g_theta e_theta + g_phi e_phi) / kappa:
        # <e_r, W e_s> for r in (theta, phi), s in (x, theta, phi), W = V R^T (one R^T for
        # det R = -1 too: W uses the original R)
        W = model.V @ self._r.T
        self._w = {
            (r, c): np.einsum("ijd,de,ije->ij", er, W, ec)
            for r, er in (("t", grid.e_theta), ("p", grid.e_phi), ("x", grid.points))
            for c, ec in (("x", grid.points), ("t", grid.e_theta), ("p", grid.e_phi))
        }

    def _rotated(self, rho_c: Coefficients) -> Coefficients:
        if self._euler is not None:
            rho_c = ducc0.sht.rotate_alm(np.ascontiguousarray(rho_c), self.grid.lmax, *self._euler)
        if self._parity is not None:
            rho_c = self._parity * rho_c
        return rho_c

    def _fields(self, rho_c: Coefficients) -> tuple[Array, Array, Array, Array]:
        g = self.grid
        rho_c = self._rotated(rho_c)
        f_c = self._s * rho_c
        gt, gp = g.synth_grad(f_c)
        return g.synth(f_c), g.synth(self._ds * rho_c), gt / self.kappa, gp / self.kappa

    def attention_average(self, rho_c: Coefficients) -> Array:
        g = self.grid
        z, dz, gt, gp = self._fields(rho_c)
        m = g.points * dz[..., None] + gt[..., None] * g.e_theta + gp[..., None] * g.e_phi
        n = m @ (self.model.V @ self._r.T).T
        return self._finish(z, n, self.kappa)

    def velocity(self, state: Coefficients) -> Array:
        """With the frame (e_theta, e_phi) of the grid (the spectral scheme's layout), a fast
        path: the components from precomputed <e_r, V R^T e_s>, no 3-vectors.

        The guard clips the tangent speed to ||V|| where it exceeds it (|P_x N / Z| <= ||V||).
        """
        if self.model.beta == 0.0 or self.frame is None:
            return super().velocity(state)
        w = self._w
        out = np.empty((len(state), 2) + self.grid.shape)
        for k, c in enumerate(np.atleast_2d(state)):
            z, dz, gt, gp = self._fields(c)
            xt = w["t", "x"] * dz + w["t", "t"] * gt + w["t", "p"] * gp
            xp = w["p", "x"] * dz + w["p", "t"] * gt + w["p", "p"] * gp
            if self.model.kind.normalized:
                small = z < GUARD_RELATIVE_Z * z.max()
                self.guarded_fraction = float(small.mean())
                inv = 1.0 / np.where(z > 0.0, z, np.inf)
                xt *= inv
                xp *= inv
                speed2 = xt * xt + xp * xp
                over = speed2 > self._v_norm**2
                if over.any():
                    scale = np.where(over, self._v_norm / np.sqrt(np.where(over, speed2, 1.0)), 1.0)
                    xt *= scale
                    xp *= scale
            else:
                with np.errstate(over="ignore", invalid="ignore"):
                    factor = np.exp(self.kappa)
                    xt *= factor
                    xp *= factor
            out[k, 0], out[k, 1] = xt, xp
        return out


def chebyshev_log_nodes(a: float, b: float, p: int) -> Array:
    """p Chebyshev nodes of the first kind for log(kappa) on [log a, log b], returned as kappa."""
    j = np.arange(p)
    t = np.cos((2 * j + 1) * np.pi / (2 * p))
    return np.exp(0.5 * (math.log(a) + math.log(b)) + 0.5 * (math.log(b) - math.log(a)) * t)


def barycentric_weights(nodes: Array, x: Array) -> Array:
    """Lagrange basis values c_j(x) (len(x), p) for Chebyshev nodes (first kind) in log(kappa)."""
    p = len(nodes)
    j = np.arange(p)
    w = (-1.0) ** j * np.sin((2 * j + 1) * np.pi / (2 * p))
    diff = np.log(x)[:, None] - np.log(nodes)[None, :]
    hit = diff == 0.0
    diff = np.where(hit, 1.0, diff)
    t = w / diff
    c = t / t.sum(axis=1, keepdims=True)
    rows = hit.any(axis=1)
    c[rows] = hit[rows].astype(float)
    return c


@register_evaluator
class KappaInterpolation(_SphereEvaluator):
    """Near-spectral velocity for a general invertible B, by interpolation in kappa.

    With kappa(x) = beta |B^T x| and u(x) = B^T x / |B^T x|,

        Z(x) = F_{kappa(x)}(u(x)),  F_kappa = K_kappa * rho,
        N(x) = V [u D_{kappa(x)}(u) + grad_S F_{kappa(x)}(u) / kappa(x)],
        D_kappa = dF_kappa/dkappa.

    The scaled multipliers s_l(kappa), ds_l(kappa) are interpolated by a polynomial in
    log(kappa) through p Chebyshev nodes on [beta sigma_min(B), beta sigma_max(B)]; p is the
    smallest multiple of 4 for which the interpolation error of every multiplier (l <= lmax) is
    below ``tol`` times s_0(kappa) on a fine sample (``achieved_tolerance`` records it). Each
    node needs the fields F, D and grad F at the fixed points u(x): off-grid syntheses with
    ``ducc0`` (3 per node).
    """

    name = "kappa_interpolation"
    domains = ("sphere",)
    inputs = ("coefficients",)
    priority = 20

    description = (
        "sphere: Funk-Hecke multipliers interpolated in kappa = beta |B^T x| "
        "(B invertible, cond <= 1e3)"
    )
    requirement = GENERAL_B_REQUIREMENT
    structure = staticmethod(well_conditioned)

    def __init__(
        self, model: Model, grid: GaussGrid, *, tol: float = 1e-12, max_nodes: int = 64
    ) -> None:
        super().__init__(model, grid)
        B = model.kernel.B
        sigma = model.kernel.singular_values
        if not well_conditioned(model):
            raise ValueError(f"KappaInterpolation {GENERAL_B_REQUIREMENT}")
        bx = grid.points @ B  # rows: (B^T x)^T
        r = np.linalg.norm(bx, axis=-1)
        self.kappa = (model.beta * r).reshape(-1)
        u = bx / r[..., None]
        self.u = u.reshape(-1, 3)
        a, b = model.beta * sigma[-1] * (1 - 1e-12), model.beta * sigma[0] * (1 + 1e-12)
        self.nodes, self.achieved_tolerance = self._choose_nodes(a, b, tol, max_nodes)
        self._weights = barycentric_weights(self.nodes, self.kappa)
        mult = [funk_hecke_multipliers(grid.l, k) for k in self.nodes]
        self._s = np.array([m[0] for m in mult])
        self._ds = np.array([m[1] for m in mult])
        self._offgrid = OffGridSynthesis(grid, self.u)

    def attributes(self) -> dict[str, Any]:
        return {
            "kappa_nodes": len(self.nodes),
            "kappa_interpolation_tolerance": self.achieved_tolerance,
        }

    def _choose_nodes(self, a: float, b: float, tol: float, max_nodes: int) -> tuple[Array, float]:
        l = np.arange(self.grid.lmax + 1.0)
        sample = chebyshev_log_nodes(a, b, 257)
        exact = np.array([np.concatenate(funk_hecke_multipliers(l, k)) for k in sample])
        scale = np.array([funk_hecke_multipliers(np.zeros(1), k)[0][0] for k in sample])
        err = np.inf
        for p in range(4, max_nodes + 1, 4):
            nodes = chebyshev_log_nodes(a, b, p)
            vals = np.array([np.concatenate(funk_hecke_multipliers(l, k)) for k in nodes])
            err = float(
                (
                    np.abs(barycentric_weights(nodes, sample) @ vals - exact).max(axis=1) / scale
                ).max()
            )
            if err <= tol:
                return nodes, err
        return nodes, err

    def attention_average(self, rho_c: Coefficients) -> Array:
        n_pts = self.u.shape[0]
        z = np.zeros(n_pts)
        dz = np.zeros(n_pts)
        grad = np.zeros((n_pts, 3))
        for j in range(len(self.nodes)):
            cj = self._weights[:, j]
            f_c = self._s[j] * rho_c
            z += cj * self._offgrid.values(f_c)
            dz += cj * self._offgrid.values(self._ds[j] * rho_c)
            grad += cj[:, None] * self._offgrid.gradient(f_c)
        m = self.u * dz[:, None] + grad / self.kappa[:, None]
        shape = self.grid.shape
        n = (m @ self.model.V.T).reshape(shape + (3,))
        return self._finish(z.reshape(shape), n, self.kappa.reshape(shape))


@register_evaluator
class SphereDirectQuadrature(_SphereEvaluator):
    """Direct log-sum-exp quadrature on the Gauss grid (the always-correct fallback, O(N^2))."""

    name = "direct"
    domains = ("sphere",)
    inputs = ("coefficients",)
    priority = 90

    description = DirectQuadrature.description

    def __init__(self, model: Model, grid: GaussGrid) -> None:
        super().__init__(model, grid)
        pts = grid.points.reshape(-1, 3)
        self._direct = DirectQuadrature(model, pts, grid.weight.reshape(-1), pts)

    def attention_average(self, rho_c: Coefficients) -> Array:
        rho = self.grid.synth(rho_c).reshape(-1)
        return self._direct.attention_average(rho).reshape(self.grid.shape + (3,))
