"""Split and merge of log-mass particles on S^2: the remeshing of ``log_lagrangian``.

A particle is (l, x, f, c): the logarithm of its mass, its centroid x on S^2, its shape
f = (f1, f2), two tangent vectors spanning the parallelogram of S^2 it stands for (its mean log
density is l - log |f1 x f2|), and the log of its point mass c = lambda + log |f1 x f2|, lambda
the log density at x itself. Both operations conserve the total mass to round-off (they add
log masses exactly) and keep every mass positive.

* :func:`split`: a particle longer than ``s_max`` (its largest singular value) is cut in two
  across its long axis. The mass follows the log-linear profile exp(gamma s), s in [-1/2, 1/2]
  along the axis, whose slope gamma is fitted to the neighbours' mean log densities (least
  squares over the 10 nearest): the halves get the shares 1 / (1 + e^{-+gamma/2}), each child
  sits at the centroid of its half (so the first moment along the axis is kept) and has the
  half shape; its lambda is the parent's plus the fitted slope of lambda times the move.
* :func:`look_lengths`: where a cluster looks, particles must be shorter. A particle at x looks,
  through its softmax, towards q = beta B^T x, with the kernel's width 1 / sqrt(|q|); once the
  mass has gathered into clusters, what holds a cluster is the sum over the tail it looks at,
  a quadrature of a kernel that narrow, and particles longer than about that width sample it
  badly (its weight jumps as a particle passes the kernel's peak). Around the look directions
  of the particles that carry at least :data:`LOOK_MASS` of the mass (clusters: merged
  particles; at most :data:`LOOK_CAPS` caps of radius :data:`LOOK_RADIUS` widths plus the
  split length) particles are split down to :data:`LOOK_LENGTH` widths.
* :func:`merge`: the particles in the same cell of a fine cubed sphere become one: the log
  masses are summed exactly, the position is the mass-weighted mean (projected back onto
  S^2), the area is the sum of the areas (with the heaviest member's shape, scaled), the point
  masses add (lambda is the area-weighted mean of the members' densities). The
  particles come back ordered by that cell (neighbours consecutive, which the sums need).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.spatial import cKDTree
from scipy.special import logsumexp

from .._types import Array
from ..grids._cubed_sphere import cube_index

#: neighbours of a long particle whose log densities set the slope of its profile
SPLIT_NEIGHBOURS = 10

#: a particle is split at most this many times in one call (each halves its length)
SPLIT_ROUNDS = 6

#: the profile's slope across a particle is clipped to this many e-folds
MAX_TILT = 200.0

#: the particles whose look directions are followed: those with this share of the mass at least
#: (clusters; a particle of the initial n x n cubed sphere has 1 / (6 n^2), 6.5e-4 at n = 16)
LOOK_MASS = 1e-3
#: at most this many look directions (the heaviest particle's first, then the next heaviest
#: not yet covered)
LOOK_CAPS = 16
#: the radius of a look cap, in kernel widths 1 / sqrt(|q|) (plus the split length, so that a
#: particle is split before it enters the part of the cap that counts: e^{-|q| theta^2 / 2}
#: is e^-12.5 at 5 widths)
LOOK_RADIUS = 5.0
#: the length a particle in a look cap is split to, in kernel widths
LOOK_LENGTH = 0.5


def tilt_mean(c: Array) -> Array:
    """The mean of the law on [-1/2, 1/2] with density proportional to e^{c s}."""
    c = np.asarray(c, dtype=float)
    small = np.abs(c) < 1e-4
    cs = np.where(small, 1.0, c)
    return np.where(small, c / 12.0, 0.5 / np.tanh(cs / 2) - 1.0 / cs)


def tangent_shapes(x: Array, shape: Array) -> Array:
    """The shapes (n, 3, 2) projected on the tangent planes at the points x (n, 3) (unit
    vectors): a shape carried or cut near x, made tangent where it now sits."""
    return shape - x[:, :, None] * np.einsum("ni,nik->nk", x, shape)[:, None, :]


def orthogonal_shapes(shape: Array) -> Array:
    """The shapes (n, 3, 2) with orthogonal edges: f V for f = U S V^T (that is, U S). The flow
    moves a shape linearly (df/dt = D f), which commutes with turning its edges by V, and what
    the scheme reads of a shape (its area, axes and lengths: singular values and vectors) is
    the same; but edges kept orthogonal keep the short one's relative accuracy, which nearly
    parallel edges lose (the flow stretches one direction and contracts the other: at an
    aspect ratio of 1e8 half the digits of the area are gone, at 1e16 all)."""
    u, s, _ = np.linalg.svd(shape, full_matrices=False)
    return u * s[:, None, :]


def log_area(shape: Array) -> Array:
    """log |f1 x f2| of every shape (n, 3, 2)."""
    return np.log(np.linalg.norm(np.cross(shape[:, :, 0], shape[:, :, 1]), axis=1))


def _slopes(x: Array, values: Array, long: Array) -> Array:
    """The least-squares gradients in R^3 of each of ``values`` (k, n) at the ``long``
    particles, from their :data:`SPLIT_NEIGHBOURS` nearest neighbours: (k, m, 3)."""
    k = min(SPLIT_NEIGHBOURS + 1, len(x))
    _, near = cKDTree(x).query(x[long], k=k)
    near = near.reshape(int(long.sum()), k)[:, 1:]
    inverse = np.linalg.pinv(x[near] - x[long][:, None, :])  # (m, 3, k - 1), all at once
    return np.stack(
        [np.einsum("mij,mj->mi", inverse, v[near] - v[long][:, None]) for v in values]
    )


def look_lengths(log_m: Array, x: Array, query: Any, s_max: float) -> Array:
    """The length each particle is split to (module docstring): ``s_max``, and
    :data:`LOOK_LENGTH` kernel widths in the caps around the look directions of the heavy
    particles. ``query`` maps positions (k, 3) to their q = beta B^T x (k, 3)."""
    lengths = np.full(len(log_m), float(s_max))
    if len(log_m) == 0:
        return lengths
    heavy = np.flatnonzero(log_m >= logsumexp(log_m) + np.log(LOOK_MASS))
    heavy = heavy[np.argsort(-log_m[heavy], kind="stable")]
    q = np.asarray(query(x[heavy]), dtype=float)
    q_norm = np.linalg.norm(q, axis=1)
    live = q_norm > 0.0
    q, q_norm = q[live], q_norm[live]
    if len(q) == 0:
        return lengths
    look = q / q_norm[:, None]
    width = q_norm**-0.5
    radius = LOOK_RADIUS * width + s_max
    open_ = np.ones(len(q), dtype=bool)  # look directions not yet inside a chosen cap
    for _ in range(LOOK_CAPS):
        if not open_.any():
            break
        k = int(np.argmax(open_))  # the heaviest not yet covered
        inside = np.arccos(np.clip(x @ look[k], -1.0, 1.0)) <= radius[k]
        lengths[inside] = np.minimum(lengths[inside], LOOK_LENGTH * width[k])
        open_ &= np.arccos(np.clip(look @ look[k], -1.0, 1.0)) > LOOK_RADIUS * width[k]
    return lengths


def split(
    log_m: Array, x: Array, shape: Array, log_point: Array, s_max: float | Array
) -> tuple[Array, Array, Array, Array, Array]:
    """Cut every particle longer than ``s_max`` (one length, or one per particle: the
    children keep their parent's) in two (module docstring), repeatedly until none is (at most
    :data:`SPLIT_ROUNDS` times). Returns (log masses, positions, shapes, log point masses, the
    depths below the heaviest of the particles cut, in e-folds)."""
    depths = []
    s_max = np.broadcast_to(np.asarray(s_max, dtype=float), np.shape(log_m))
    for _ in range(SPLIT_ROUNDS):
        u, s, vt = np.linalg.svd(shape, full_matrices=False)  # shape = u diag(s) vt
        long = s[:, 0] > s_max
        if not long.any():
            break
        depths.append(log_m.max() - log_m[long])
        area = log_area(shape)
        mean_slope, point_slope = _slopes(x, np.stack([log_m - area, log_point - area]), long)
        axis = u[long][:, :, 0]
        length = s[long][:, 0]
        gamma = np.clip(np.einsum("ij,ij->i", mean_slope, axis) * length, -MAX_TILT, MAX_TILT)
        mean = tilt_mean(gamma)
        half = tilt_mean(gamma / 2) / 2
        lm, lp = log_m[long], log_point[long] - area[long]
        child_shape = shape[long] - 0.5 * length[:, None, None] * axis[:, :, None] * vt[long][
            :, None, 0, :
        ]
        children = []  # lambda of each child from the tangent shape it gets
        for side in (1.0, -1.0):
            offset = side * 0.25 + half - mean  # the half's centroid, from the particle's
            step = (offset * length)[:, None] * axis
            point = x[long] + step
            point /= np.linalg.norm(point, axis=1, keepdims=True)
            children.append(
                (
                    lm - np.logaddexp(0.0, -side * gamma / 2),
                    point,
                    lp
                    + np.einsum("ij,ij->i", point_slope, step)
                    + log_area(tangent_shapes(point, child_shape)),
                )
            )
        keep = ~long
        log_m = np.concatenate([log_m[keep], children[0][0], children[1][0]])
        x = np.concatenate([x[keep], children[0][1], children[1][1]])
        shape = np.concatenate(
            [
                shape[keep],
                tangent_shapes(children[0][1], child_shape),
                tangent_shapes(children[1][1], child_shape),
            ]
        )
        log_point = np.concatenate([log_point[keep], children[0][2], children[1][2]])
        s_max = np.concatenate([s_max[keep], s_max[long], s_max[long]])
    return log_m, x, shape, log_point, np.concatenate(depths) if depths else np.zeros(0)


def merge(
    log_m: Array, x: Array, shape: Array, log_point: Array, n_fine: int
) -> tuple[Array, Array, Array, Array, int]:
    """Merge the particles that share a cell of the ``n_fine`` cubed sphere and order them by
    cell (module docstring). Returns (log masses, positions, shapes, log point masses,
    particles removed)."""
    key = cube_index(x, n_fine)
    order = np.argsort(key, kind="stable")
    key, log_m, x, shape = key[order], log_m[order], x[order], shape[order]
    log_point = log_point[order]
    first = np.r_[True, key[1:] != key[:-1]]
    start = np.flatnonzero(first)
    if len(start) == len(key):
        return log_m, x, shape, log_point, 0
    group = np.cumsum(first) - 1
    top = np.maximum.reduceat(log_m, start)
    w = np.exp(log_m - top[group])
    total = np.add.reduceat(w, start)
    mean = np.add.reduceat(w[:, None] * x, start) / total[:, None]
    mean /= np.linalg.norm(mean, axis=1, keepdims=True)
    point_top = np.maximum.reduceat(log_point, start)
    point = point_top + np.log(np.add.reduceat(np.exp(log_point - point_top[group]), start))
    area = np.exp(log_area(shape))
    tops = np.flatnonzero(w == 1.0)  # w = 1 exactly at each group's heaviest
    heaviest = tops[np.unique(group[tops], return_index=True)[1]]
    scale = np.sqrt(np.add.reduceat(area, start) / area[heaviest])
    merged = tangent_shapes(mean, shape[heaviest] * scale[:, None, None])
    # the point masses add over the members' areas; the tangent shape's area holds them
    point += log_area(merged) - np.log(np.add.reduceat(area, start))
    return top + np.log(total), mean, merged, point, len(key) - len(start)
