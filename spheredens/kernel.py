"""The attention kernel k(x, y) = exp(beta <Q x, K y>) = exp(beta <B^T x, y>), B = Q^T K.

Everything that evaluates the kernel goes through :class:`AttentionKernel`: the interaction
evaluators on grids, the particle system, the resolution rule of the schemes and the
validation of configurations. The kernel is only ever needed in its log form,
log k(x, y) = <q(x), y> with the *query* q(x) = beta B^T x, because the sums over y are formed
in log-sum-exp form or rescaled by their largest term; and through its symmetry: when B is a
positive multiple a R of an orthogonal matrix, k(x, y) = exp(kappa <R^T x, y>) with
kappa = beta a depends on <R^T x, y> only (a zonal kernel: Fourier / Funk-Hecke multipliers).

For densities symmetric about an axis (the domain ``zonal``), the kernel enters through its
average over the (d-2)-sphere orthogonal to the axis, M0(c) = 0F1(; nu + 1; c^2 / 4),
nu = (d - 3) / 2, and M1 = M0': :func:`log_m0`, :func:`m1_over_m0` and :func:`log_bessel_i`,
in logs for every order up to 510.5 (docs/models.md section 6).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy import special

from ._types import Array


def rotation_multiple_2d(B: Array, *, rtol: float = 1e-12) -> tuple[float, float] | None:
    """Write a 2x2 matrix as B = a R(phi0) with a > 0 and R a rotation, if possible.

    Returns
    -------
    (a, phi0) or None
        ``None`` when B is not a positive multiple of a rotation (to relative tolerance rtol).
    """
    B = np.asarray(B, dtype=float)
    if B.shape != (2, 2):
        return None
    det = float(np.linalg.det(B))
    scale = float(np.abs(B).max())
    if det <= 0.0 or scale == 0.0:
        return None
    a = np.sqrt(det)
    if np.abs(B.T @ B - a * a * np.eye(2)).max() > rtol * scale * scale:
        return None
    return float(a), float(np.arctan2(B[1, 0], B[0, 0]))


def orthogonal_multiple(B: Array, *, rtol: float = 1e-12) -> tuple[float, Array] | None:
    """Write B = a R with a > 0 and R orthogonal (any determinant), if possible."""
    B = np.asarray(B, dtype=float)
    d = B.shape[0]
    gram = B.T @ B
    a2 = float(np.trace(gram)) / d
    if a2 <= 0.0 or np.abs(gram - a2 * np.eye(d)).max() > rtol * a2:
        return None
    a = math.sqrt(a2)
    return a, B / a


@dataclass(frozen=True, eq=False)
class AttentionKernel:
    """k(x, y) = exp(beta <B^T x, y>) on S^{d-1}, B = Q^T K.

    Parameters
    ----------
    beta : float
        Inverse temperature (>= 0; ``inf`` for the zero-temperature model, which has no kernel).
    B : ndarray (d, d)
        Q^T K.

    Examples
    --------
    >>> import numpy as np
    >>> k = AttentionKernel(2.0, np.eye(2))
    >>> x = np.array([[1.0, 0.0]]); y = np.array([[0.0, 1.0], [1.0, 0.0]])
    >>> k.log(x, y).tolist()
    [[0.0, 2.0]]
    """

    beta: float
    B: Array
    singular_values: Array = field(init=False, repr=False)

    def __post_init__(self) -> None:
        B = np.array(self.B, dtype=float)
        B.setflags(write=False)
        object.__setattr__(self, "B", B)
        object.__setattr__(self, "singular_values", np.linalg.svd(B, compute_uv=False))

    @property
    def d(self) -> int:
        return int(self.B.shape[0])

    def query(self, x: Array) -> Array:
        """q(x) = beta B^T x for points x (..., d): log k(x, y) = <q(x), y>."""
        return self.beta * (x @ self.B)  # rows: beta (B^T x)^T = beta x^T B

    def log(self, x: Array, y: Array) -> Array:
        """log k(x_i, y_j) = beta <B^T x_i, y_j>, shape (len(x), len(y))."""
        return self.query(x) @ np.asarray(y).T

    def __call__(self, x: Array, y: Array) -> Array:
        """k(x_i, y_j), shape (len(x), len(y)) (overflows for beta |B| > 709: use :meth:`log`)."""
        return np.exp(self.log(x, y))

    @property
    def sigma_max(self) -> float:
        """Largest singular value of B: the kernel's width is (beta sigma_max)^(-1/2) at least."""
        return float(self.singular_values[0])

    @property
    def condition(self) -> float:
        """Condition number sigma_max / sigma_min of B (inf when B is singular)."""
        s = self.singular_values
        return float(s[0] / s[-1]) if s[-1] > 0.0 else math.inf

    def is_singular(self, rtol: float = 1e-12) -> bool:
        """Whether sigma_min(B) <= rtol sigma_max(B)."""
        s = self.singular_values
        return bool(s[-1] <= rtol * max(s[0], 1e-300))

    @property
    def width(self) -> float:
        """(beta sigma_max(B))^(-1/2): the narrowest angular width of the kernel, in radians."""
        return (self.beta * self.sigma_max) ** -0.5

    def orthogonal_multiple(self) -> tuple[float, Array] | None:
        """(a, R) with B = a R, a > 0, R orthogonal, or None: then k(x, y) = exp(kappa <R^T x, y>),
        kappa = beta a, is zonal about R^T x."""
        return orthogonal_multiple(self.B)

    def rotation_multiple_2d(self) -> tuple[float, float] | None:
        """(a, phi0) with B = a R(phi0), a > 0, R a rotation, or None (circle only): then
        k(x(theta), y(phi)) = exp(kappa cos(theta - phi0 - phi)), kappa = beta a."""
        return rotation_multiple_2d(self.B)


# -- the kernel averaged over the (d-2)-sphere of a zonal density (docs/models.md section 6) --
#: orders above this use the uniform (Debye) expansion instead of ``ive`` (which underflows
#: there); its first omitted term is below 1e-11 relative from here on
DEBYE_FROM = 50.0
#: terms of the power series of 0F1(; nu + 1; x), used where x = c^2 / 4 <= nu + 1
SERIES_TERMS = 40


def _debye_log_bessel_i(nu: float, c: Array) -> Array:
    """log I_nu(c) for c > 0 by the uniform asymptotic expansion in the order (Abramowitz &
    Stegun 9.7.7, terms u_1..u_4): with z = c / nu, t = 1 / sqrt(1 + z^2),
    log I_nu(nu z) = nu eta - log(2 pi nu) / 2 - log(1 + z^2) / 4 + log(1 + sum_k u_k(t) / nu^k),
    eta = sqrt(1 + z^2) + log(z / (1 + sqrt(1 + z^2)))."""
    z = c / nu
    root = np.sqrt(1.0 + z * z)
    t = 1.0 / root
    eta = root + np.log(z / (1.0 + root))
    t2 = t * t
    u1 = t * (3.0 - 5.0 * t2) / 24.0
    u2 = t2 * (81.0 - 462.0 * t2 + 385.0 * t2 * t2) / 1152.0
    u3 = t * t2 * (30375.0 + t2 * (-369603.0 + t2 * (765765.0 - 425425.0 * t2))) / 414720.0
    u4 = (
        t2
        * t2
        * (
            4465125.0
            + t2 * (-94121676.0 + t2 * (349922430.0 + t2 * (-446185740.0 + 185910725.0 * t2)))
        )
        / 39813120.0
    )
    series = 1.0 + u1 / nu + u2 / nu**2 + u3 / nu**3 + u4 / nu**4
    return nu * eta - 0.5 * math.log(2.0 * math.pi * nu) - 0.5 * np.log(root) + np.log(series)


def _series_log_0f1(nu: float, x: Array) -> Array:
    """log 0F1(; nu + 1; x) for 0 <= x <= nu + 1 by its power series (all terms positive)."""
    term = np.ones_like(x)
    total = np.ones_like(x)
    for k in range(SERIES_TERMS):
        term = term * x / ((k + 1.0) * (nu + 1.0 + k))
        total = total + term
    return np.log(total)


def log_bessel_i(nu: float, c: Array) -> Array:
    """log I_nu(c) for c >= 0 and nu >= -1/2, finite wherever c > 0 (no underflow for any
    order up to the largest the domain takes, nu = 510.5): the power series where
    c^2 / 4 <= nu + 1, else ``ive`` (nu <= :data:`DEBYE_FROM`) or the Debye expansion."""
    c = np.asarray(c, dtype=float)
    out = np.full(c.shape, -np.inf)
    x = 0.25 * c * c
    series = (x <= nu + 1.0) & (c > 0.0)
    if np.any(series):
        cs = c[series]
        out[series] = (
            nu * np.log(0.5 * cs) - special.gammaln(nu + 1.0) + _series_log_0f1(nu, x[series])
        )
    far = ~series & (c > 0.0)
    if np.any(far):
        cf = c[far]
        if nu <= DEBYE_FROM:
            out[far] = np.log(special.ive(nu, cf)) + cf
        else:
            out[far] = _debye_log_bessel_i(nu, cf)
    return out


def log_m0(nu: float, c: Array) -> Array:
    """log M0(c) = log 0F1(; nu + 1; c^2 / 4), the log of the average of exp(c <omega, eta>)
    over eta in S^{d-2} (nu = (d - 3) / 2); even in c, 0 at c = 0."""
    c = np.abs(np.asarray(c, dtype=float))
    out = np.zeros(c.shape)
    x = 0.25 * c * c
    series = x <= nu + 1.0
    if np.any(series):
        out[series] = _series_log_0f1(nu, x[series])
    far = ~series
    if np.any(far):
        cf = c[far]
        out[far] = special.gammaln(nu + 1.0) + nu * np.log(2.0 / cf) + log_bessel_i(nu, cf)
    return out


def m1_over_m0(nu: float, c: Array) -> Array:
    """M1(c) / M0(c) = M0'(c) / M0(c) = I_{nu+1}(|c|) / I_nu(|c|) sign(c): in (-1, 1), 0 at 0."""
    c = np.asarray(c, dtype=float)
    a = np.abs(c)
    out = np.zeros(c.shape)
    positive = a > 0.0
    if np.any(positive):
        ap = a[positive]
        out[positive] = np.exp(log_bessel_i(nu + 1.0, ap) - log_bessel_i(nu, ap))
    return np.sign(c) * out
