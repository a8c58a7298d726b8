"""The attention kernel k(x, y) = exp(beta <Q x, K y>) = exp(beta <B^T x, y>), B = Q^T K.

Everything that evaluates the kernel goes through :class:`AttentionKernel`: the interaction
evaluators on grids, the particle system, the resolution rule of the schemes and the
validation of configurations. The kernel is only ever needed in its log form,
log k(x, y) = <q(x), y> with the *query* q(x) = beta B^T x, because the sums over y are formed
in log-sum-exp form or rescaled by their largest term; and through its symmetry: when B is a
positive multiple a R of an orthogonal matrix, k(x, y) = exp(kappa <R^T x, y>) with
kappa = beta a depends on <R^T x, y> only (a zonal kernel: Fourier / Funk-Hecke multipliers).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

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
