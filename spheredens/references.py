"""Exact references for the schemes, computed independently of them (numpy and scipy only).

Three families of exact solutions, used by the tests and by ``spheredens verify``
(:mod:`spheredens.verify`):

* **beta = 0 on the circle** (:func:`wrapped_cauchy`, :func:`wrapped_cauchy_radius`). At beta = 0
  the softmax weighs every y alike: X(x) = P_x V m with m = int y rho, the mean. With V = B = I
  this is the Kuramoto model of identical oscillators, theta' = r sin(psi - theta)
  (m = r e^{i psi}). Its Poisson-kernel (wrapped Cauchy) densities

      rho_t(theta) = (1 - r^2) / (2 pi (1 - 2 r cos(theta - psi) + r^2))

  form an invariant family (Ott and Antonsen; Watanabe and Strogatz), with psi fixed and
  r' = r (1 - r^2) / 2, so r(t) = r_0 e^{t/2} / sqrt(1 - r_0^2 + r_0^2 e^t); the moments are
  int e^{i k theta} rho_t = r(t)^k e^{i k psi}.
  **beta = 0 on the sphere** (:func:`mean_field_velocity`): the same X = P_x V m / mass, for any B.

* **Zero temperature by characteristics** (:func:`exact_zero_temperature_weak_form`).
  sa_zero_temperature is transport by the fixed field X(x) = P_x V B^T x / |B^T x|, so
  rho_T = (Phi_T)_# rho_0 with Phi the flow of X, and for test functions phi

      int phi rho_T = int phi(Phi_T(y)) rho_0(y) dy,

  computed with rho_0 a von Mises-Fisher density, a fine quadrature in y and the flow
  integrated to 1e-12 (DOP853).

* **Linear growth around the uniform density on S^2** (:func:`linear_growth_tendency`). With
  V = B^-T the uniform density rho_0 = 1 / (4 pi) is steady: N_0 / Z_0 = V q^ L(kappa),
  q = beta B^T x, and V q^ = x / |B^T x| is normal to the sphere. For rho_0 + eps <a, x>, with
  the moments of exp(<q, y>) over the sphere (I_0 = 4 pi sinh k / k, its gradient and Hessian
  in q), the velocity is to first order eps 4 pi phi(kappa(x)) P_x B^-T a, with phi = L(k) / k
  (L the Langevin function coth k - 1/k) and kappa(x) = beta |B^T x|. So

      d/dt <a, x> = -(1 / 4 pi) div(4 pi phi P_x w) = 2 phi <w, x> - <grad_S phi, w>,
      w = B^-T a

  (div_S P_x w = -2 <w, x> on S^2); for B = I the growth rate of the mode is 2 L(beta) / beta.

* **Linear growth of the zonal modes on S^{d-1}, any d** (:func:`zonal_growth_rate`). With
  B = b I and V = v I the kernel exp(kappa <x, y>), kappa = beta b, is zonal, and by
  Funk-Hecke int exp(kappa <x, y>) Y_l(y) dy = Lambda_l Y_l(x) for every spherical harmonic of
  degree l, Lambda_l = (2 pi)^{d/2} kappa^{1-d/2} I_{l+d/2-1}(kappa). Around the uniform
  density rho_0, N_0 is normal to the sphere, so for rho_0 (1 + eps Y_l) the velocity is
  eps v P_x grad(Lambda_l Y_l) / (kappa Lambda_0) (the y-moment is the gradient in x of the
  kernel's integral) = eps v Lambda_l / (kappa Lambda_0) grad_S Y_l, and with
  div_S grad_S Y_l = -l (l + d - 2) Y_l the mode grows at the rate

      sigma_l = v l (l + d - 2) I_{l+d/2-1}(kappa) / (kappa I_{d/2-1}(kappa)),

  (d = 3, l = 1: 2 L(kappa) / kappa, as above; kappa -> 0: sigma_1 = v (d - 1) / d, the
  beta = 0 mean field, sigma_l = 0 for l >= 2). The zonal harmonic of degree l is the
  Gegenbauer polynomial C_l^{(d-2)/2}(cos theta) of the polar angle.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.integrate import solve_ivp
from scipy.special import ive

from ._types import Array
from .geometry import CIRCLE, domain_of_dimension


def zonal_growth_rate(l: int, d: int, beta: float, *, b: float = 1.0, v: float = 1.0) -> float:
    """The growth rate sigma_l of the zonal mode of degree l >= 1 around the uniform density on
    S^{d-1} for ``sa`` with B = b I, V = v I (module docstring: Funk-Hecke), from the ratio of
    scaled Bessel functions ``ive`` (the factors e^{-kappa} cancel)."""
    kappa = beta * b
    if kappa == 0.0:
        return v * (d - 1) / d if l == 1 else 0.0
    nu = 0.5 * d - 1.0
    ratio = float(ive(l + nu, kappa) / ive(nu, kappa))
    return v * l * (l + d - 2) * ratio / kappa


# -- beta = 0 ------------------------------------------------------------------------------------
def wrapped_cauchy(theta: Array, r: float, psi: float) -> Array:
    """The wrapped Cauchy (Poisson kernel) density of radius r < 1 and centre angle psi."""
    return (1 - r**2) / (2 * np.pi * (1 - 2 * r * np.cos(theta - psi) + r**2))


def wrapped_cauchy_radius(t: float, r0: float) -> float:
    """r(t) of the wrapped Cauchy family under the beta = 0 flow with V = B = I:
    r' = r (1 - r^2) / 2, r(0) = r0."""
    return float(r0 * np.exp(t / 2) / np.sqrt(1 - r0**2 + r0**2 * np.exp(t)))


def mean_field_velocity(
    points: Array, weights: Array, rho: Array, V: Array, targets: Array | None = None
) -> Array:
    """X = P_x V m / mass at ``targets`` (..., d; default: ``points``), m = sum rho w x: the
    beta = 0 velocity of the discrete density ``rho`` with quadrature ``weights`` at ``points``."""
    targets = points if targets is None else targets
    mass = np.sum(rho * weights)
    m = np.tensordot(rho * weights, points, axes=np.ndim(rho)) / mass
    w = np.broadcast_to(np.asarray(V) @ m, targets.shape)
    return w - np.sum(w * targets, axis=-1, keepdims=True) * targets


# -- zero temperature by characteristics ---------------------------------------------------------
def zero_temperature_field(x: Array, B: Array, V: Array) -> Array:
    """X(x) = P_x V B^T x / |B^T x|, rows of x are points."""
    bx = x @ np.asarray(B)
    w = (bx @ np.asarray(V).T) / np.linalg.norm(bx, axis=1, keepdims=True)
    return w - np.sum(w * x, axis=1, keepdims=True) * x


#: the dimensions d of S^{d-1} that :func:`reference_quadrature` covers
QUADRATURE_DIMENSIONS = (2, 3)


def reference_quadrature(d: int) -> tuple[Array, Array]:
    """Fine quadrature (points, weights) of S^{d-1}, exact far beyond the references' accuracy
    for the smooth integrands here: 2048 equispaced angles on the circle, a Gauss grid of
    96 x 192 nodes on the sphere."""
    if d not in QUADRATURE_DIMENSIONS:
        raise NotImplementedError(f"no reference quadrature of S^{d - 1}")
    if domain_of_dimension(d) is CIRCLE:
        theta = 2 * np.pi * np.arange(2048) / 2048
        return np.stack([np.cos(theta), np.sin(theta)], axis=1), np.full(2048, 2 * np.pi / 2048)
    z, wz = np.polynomial.legendre.leggauss(96)
    phi = 2 * np.pi * np.arange(192) / 192
    s = np.sqrt(1 - z**2)[:, None]
    pts = np.stack(np.broadcast_arrays(s * np.cos(phi), s * np.sin(phi), z[:, None]), axis=-1)
    return pts.reshape(-1, 3), np.repeat(wz * 2 * np.pi / 192, 192)


def von_mises_fisher(x: Array, mean: Array, kappa: float) -> Array:
    """The von Mises-Fisher density on S^1 (d = 2) or S^2 (d = 3), written out here."""
    if domain_of_dimension(x.shape[-1]) is CIRCLE:
        return np.exp(kappa * (x @ mean - 1)) / (2 * np.pi * ive(0, kappa))
    return kappa / (2 * np.pi * (1 - np.exp(-2 * kappa))) * np.exp(kappa * (x @ mean - 1))


def smooth_functions(x: Array) -> Array:
    """Smooth test functions phi_k(x), shape (k, n)."""
    d = x.shape[1]
    a, b = np.linspace(0.3, 1.1, d), np.linspace(-0.7, 0.5, d)
    return np.stack([np.exp(x @ a), (x @ b) ** 2, np.cos(2 * x[:, 0]) * x[:, 1]])


def exact_zero_temperature_weak_form(
    B: Array, V: Array, mean: Array, kappa: float, T: float
) -> Array:
    """int phi_k rho_T = int phi_k(Phi_T(y)) rho_0(y) dy for :func:`smooth_functions`, rho_0 the
    von Mises-Fisher density (mean, kappa) and Phi the flow of :func:`zero_temperature_field`."""
    d = len(mean)
    y, w = reference_quadrature(d)
    n = len(y)
    sol = solve_ivp(
        lambda s, z: zero_temperature_field(z.reshape(n, d), B, V).reshape(-1),
        (0.0, T),
        y.reshape(-1),
        method="DOP853",
        rtol=1e-12,
        atol=1e-12,
    )
    x = sol.y[:, -1].reshape(n, d)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return smooth_functions(x) @ (von_mises_fisher(y, np.asarray(mean), kappa) * w)


def run_weak_form(ds: Any, index: int = -1) -> Array:
    """sum_j phi_k(x_j) rho_j w_j over the points of a run file (cell centres or quadrature
    nodes; the cells' centroids where the file has them on the sphere, ``rho_centroid_xyz``) at
    the snapshot ``index``."""
    rho = ds["rho"].values[index]
    if "rho_centroid_xyz" in ds:
        x = np.asarray(ds["rho_centroid_xyz"].values[index], dtype=float)
    elif "theta" in ds.coords:
        th = ds["theta"].values
        x = np.stack([np.cos(th), np.sin(th)], axis=1)
    else:
        lat, lon = np.radians(ds["lat"].values), np.radians(ds["lon"].values)
        if ds["lat"].dims != ds["lon"].dims:
            lat, lon = np.meshgrid(lat, lon, indexing="ij")
        x = np.stack([np.cos(lat) * np.cos(lon), np.cos(lat) * np.sin(lon), np.sin(lat)], axis=-1)
    return smooth_functions(x.reshape(-1, x.shape[-1])) @ (rho * ds["weight"].values).reshape(-1)


# -- linear growth around the uniform density -----------------------------------------------------
def langevin_over_kappa(k: Array) -> tuple[Array, Array]:
    """phi(k) = L(k) / k, L the Langevin function coth k - 1/k, and its derivative."""
    coth = 1.0 / np.tanh(k)
    lang = coth - 1.0 / k
    dlang = 1.0 / k**2 - (coth**2 - 1.0)
    return lang / k, dlang / k - lang / k**2


def linear_growth_tendency(points: Array, B: Array, a: Array, beta: float) -> Array:
    """d/dt of the perturbation eps <a, x> of the uniform density on S^2 for sa with V = B^-T,
    per unit eps, at ``points`` (..., 3): 2 phi <w, x> - <grad_S phi, w>, w = B^-T a, phi =
    L(kappa) / kappa at kappa = beta |B^T x|."""
    B = np.asarray(B)
    bx = points @ B
    r = np.linalg.norm(bx, axis=-1)
    phi, dphi = langevin_over_kappa(beta * r)
    grad = beta * (bx @ B.T) / r[..., None]  # grad kappa in R^3: beta B B^T x / |B^T x|
    grad_kappa = grad - np.sum(grad * points, axis=-1, keepdims=True) * points
    w = np.linalg.inv(B).T @ np.asarray(a)
    return 2.0 * phi * (points @ w) - dphi * (grad_kappa @ w)
