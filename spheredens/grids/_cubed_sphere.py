"""The equiangular cubed sphere: the initial cells of the ``log_lagrangian`` particles.

Each of the six faces of the cube [-1, 1]^3 is cut into n x n cells of equal angle pi / (2n)
in the two equiangular coordinates (alpha, beta) in [-pi/4, pi/4]^2, and projected radially
onto S^2. No cell is singular (the cells' areas differ by a factor of at most 1.4 at any n),
and there is no coordinate pole. Face k (0..5) lies about the axis k % 3, on its positive side
for k < 3; its coordinates (alpha, beta) run along the next two axes (cyclically).

The same index serves to sort points by locality (:func:`cube_index`: Morton order within a
face), which the particles' merge and the sums' groups use.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np
from numpy.typing import NDArray
from scipy.special import logsumexp

from .._types import Array

#: (normal axis, alpha axis, beta axis) of faces k and k + 3
FACE_AXES = ((0, 1, 2), (1, 2, 0), (2, 0, 1))


def cube_point(face: int, alpha: Array, beta: Array) -> Array:
    """Points of face ``face`` (0..5) at equiangular coordinates (alpha, beta), unit vectors of
    shape broadcast(alpha, beta) + (3,)."""
    normal, a, b = FACE_AXES[face % 3]
    sign = 1.0 if face < 3 else -1.0
    alpha, beta = np.broadcast_arrays(np.asarray(alpha, float), np.asarray(beta, float))
    p = np.zeros(alpha.shape + (3,))
    p[..., normal] = sign
    p[..., a] = np.tan(alpha) * sign
    p[..., b] = np.tan(beta)
    return p / np.linalg.norm(p, axis=-1, keepdims=True)


def morton(i: NDArray[np.int64], j: NDArray[np.int64]) -> NDArray[np.int64]:
    """The Morton (Z-order) code of the cell (i, j): the bits of i and j interleaved."""
    out = np.zeros_like(i)
    for bit in range(31):
        out |= ((i >> bit) & 1) << (2 * bit + 1)
        out |= ((j >> bit) & 1) << (2 * bit)
    return out


def cube_index(x: Array, n: int) -> NDArray[np.int64]:
    """The cell of each point ``x`` (m, 3) on the n x n cubed sphere, as face n^2 + morton(i, j):
    sorting by it puts the points of a cell together and neighbouring cells mostly close."""
    x = np.asarray(x, dtype=float)
    axis = np.argmax(np.abs(x), axis=1)
    sign = np.take_along_axis(x, axis[:, None], 1)[:, 0]
    face = axis + 3 * (sign < 0)
    a = np.array([FACE_AXES[k][1] for k in range(3)])[axis]
    b = np.array([FACE_AXES[k][2] for k in range(3)])[axis]
    xa = np.take_along_axis(x, a[:, None], 1)[:, 0] / sign
    xb = np.take_along_axis(x, b[:, None], 1)[:, 0] / np.abs(sign)
    scale = n / (math.pi / 2)
    i = np.clip(((np.arctan(xa) + math.pi / 4) * scale).astype(np.int64), 0, n - 1)
    j = np.clip(((np.arctan(xb) + math.pi / 4) * scale).astype(np.int64), 0, n - 1)
    return face.astype(np.int64) * n * n + morton(i, j)


class CubedSphereCells:
    """The n x n equiangular cubed sphere (module docstring): 6 n^2 cells of angle
    h = pi / (2 n).

    Attributes
    ----------
    n : int
    h : float
        The cells' equiangular size pi / (2 n), radians (about their edge length at the faces'
        centres).
    """

    def __init__(self, n: int) -> None:
        self.n = int(n)
        self.h = math.pi / (2 * self.n)
        self.centres = -math.pi / 4 + (np.arange(self.n) + 0.5) * self.h

    @property
    def n_cells(self) -> int:
        return 6 * self.n * self.n

    def log_moments(
        self, log_f: Callable[[Array], Array], order: int = 4
    ) -> tuple[Array, Array, Array]:
        """Each cell's log mass of the density exp(log_f) (a Gauss product rule of ``order``
        points per direction, in the log domain), its centroid (unit vector), and its shape:
        the two edge vectors through its centre, (n_cells, 3, 2). Cells ordered face by face,
        row by row."""
        g, w = np.polynomial.legendre.leggauss(order)
        g, w = 0.5 * g, 0.5 * w  # on [-1/2, 1/2]
        h, c = self.h, self.centres
        alpha = c[:, None, None, None] + g[None, None, :, None] * h
        beta = c[None, :, None, None] + g[None, None, None, :] * h
        alpha, beta = np.broadcast_arrays(alpha, beta)  # (n, n, order, order)
        ta, tb = np.tan(alpha), np.tan(beta)
        # the area element of the equiangular coordinates
        log_w = np.log(
            (1 + ta**2) * (1 + tb**2) / (1 + ta**2 + tb**2) ** 1.5 * h**2 * w[:, None] * w[None, :]
        )
        ca, cb = np.broadcast_arrays(c[:, None], c[None, :])
        log_m, points, shapes = [], [], []
        for face in range(6):
            p = cube_point(face, alpha, beta)
            with np.errstate(divide="ignore"):
                v = np.asarray(log_f(p.reshape(-1, 3)), dtype=float).reshape(p.shape[:-1]) + log_w
            top = np.max(v, axis=(2, 3))
            with np.errstate(divide="ignore", invalid="ignore"):
                lm = np.where(np.isfinite(top), logsumexp(v, axis=(2, 3)), -np.inf)
                wt = np.where(np.isfinite(top)[..., None, None], np.exp(v - lm[..., None, None]), 0)
            centroid = np.einsum("ijkl,ijklc->ijc", wt, p)
            norm = np.linalg.norm(centroid, axis=-1, keepdims=True)
            centre = cube_point(face, ca, cb)
            centroid = np.where(norm > 0, centroid / np.where(norm > 0, norm, 1.0), centre)
            f1 = cube_point(face, ca + h / 2, cb) - cube_point(face, ca - h / 2, cb)
            f2 = cube_point(face, ca, cb + h / 2) - cube_point(face, ca, cb - h / 2)
            log_m.append(lm.reshape(-1))
            points.append(centroid.reshape(-1, 3))
            shapes.append(np.stack([f1, f2], axis=-1).reshape(-1, 3, 2))
        return np.concatenate(log_m), np.concatenate(points), np.concatenate(shapes)
