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
  half shape; its lambda is read at its centroid from the least-squares quadratic through the
  neighbours' lambda (:class:`_LocalQuadratic`: third order). ``limited``
  (:func:`limited_tilt`): the slope is limited so that neither half leaves the neighbours'
  range of mean log densities; a cluster's particle, far denser than its neighbours, is cut in
  equal halves.
* :func:`look_lengths`: where a cluster looks, particles must be shorter. A particle at x looks,
  through its softmax, towards q = beta B^T x, with the kernel's width 1 / sqrt(|q|); once the
  mass has gathered into clusters, what holds a cluster is the sum over the tail it looks at,
  a quadrature of a kernel that narrow, and particles longer than about that width sample it
  badly (its weight jumps as a particle passes the kernel's peak). Around the look directions
  of the particles that carry at least :data:`LOOK_MASS` of the mass (clusters: merged
  particles; at most :data:`LOOK_CAPS` caps of radius :data:`LOOK_RADIUS` widths plus the
  split length) particles are split down to :data:`LOOK_LENGTH` widths.
* :func:`remesh_tail` (``remesh_tail``: every so many units of time): the particles of the
  deep tail, those whose log density on the Delaunay triangulation lies more than
  :data:`TAIL_DEPTH` below the densest's, are replaced by one particle per cell of the
  initial n x n cubed sphere that their piecewise log-linear interpolant
  (:class:`~spheredens.interaction._interpolant.Reconstruction`, sampled half a cell apart)
  puts mass in: the cell's mass exactly (log masses binned in the log domain), at the
  mass-weighted mean of what fell in it, with the cell's shape. A Lagrangian tail follows the
  mass: where the flow carries it away from the directions the clusters look at (into the
  clusters, or onto the ridges where it converges), the particles there thin out, the sums
  lose the tail's gradient, and the clusters wander off the equilibrium it sets
  (docs/concentration.md, "Where the clusters sit on the plateau"); the remeshed tail is
  sampled a cell apart everywhere. The clusters and their flanks (within :data:`TAIL_DEPTH`)
  stay Lagrangian.
* :func:`merge_tail` (``merge_tail``: every so many units of time): the particles whose mean
  log density lies more than :data:`TAIL_DEPTH` below the densest particle's, outside the look
  caps, are merged by the cells of a cubed sphere about a kernel width fine (:func:`merge`,
  nothing interpolated: each cell keeps its members' mass and first moment exactly). The flow
  that carries the tail into the clusters packs it into particles far smaller than the kernel
  (at beta = 300: 35 000 of them through the contraction, where the plateau needs 2 000);
  the tail the clusters look at is never touched.
* :func:`merge`: the particles in the same cell of a fine cubed sphere become one: the log
  masses are summed exactly, the position is the mass-weighted mean (projected back onto
  S^2), the area is the sum of the areas (with the heaviest member's shape, scaled), the point
  masses add (lambda is the area-weighted mean of the members' densities). With
  ``merge_shape = "moments"`` the shape is instead that of the second moment of the members
  that carry at least :data:`MOMENT_SHARE` of the merged mass (their parallelograms and their
  spread about the mean): a cluster's particle then keeps the extent the flow gave it when
  light particles join it, where the area's sum would give it theirs. The
  particles come back ordered by that cell (neighbours consecutive, which the sums need).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy.spatial import SphericalVoronoi, cKDTree
from scipy.special import logsumexp

from .._types import Array
from ..geometry import tangent_frames
from ..grids import CubedSphereCells
from ..grids._cubed_sphere import cube_index
from ..interaction._interpolant import Reconstruction, log_bincount

#: neighbours of a long particle whose log densities set the slope of its profile
SPLIT_NEIGHBOURS = 10

#: a merge's member whose share of the merged mass is below this adds its mass but not its
#: extent to the merged shape (``merge_shape = "moments"``): a light particle that the flow
#: brings into a cluster's cell does not widen the cluster (whose own extent the flow may have
#: contracted by many e-folds, and whose tearing apart waits until it is stretched back)
MOMENT_SHARE = 1e-3

#: log 2 (the largest rise of a half's mean log density over its particle's)
LOG2 = float(np.log(2.0))

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

#: a shape from a Voronoi cell (:func:`voronoi_shapes`) is at most this many split lengths
#: long along each axis (an isolated particle's cell can cover a hemisphere; a split cuts it
#: at most :data:`SPLIT_ROUNDS` times a step, and its children get cells of their own at the
#: next tessellation)
VORONOI_REACH = 8.0
#: deep particles closer than this (radians) to one already taken keep their shapes (the
#: tessellation needs distinct generators)
VORONOI_DISTINCT = 1e-5

#: the most cells per cube edge :func:`tail_cells` gives
MOST_TAIL_CELLS = 1 << 16

#: the tail that :func:`remesh_tail` puts on the cells: log densities more than this below the
#: densest particle's
TAIL_DEPTH = 20.0


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


def _neighbours(x: Array, long: Array) -> Array:
    """The indices (m, k) of the :data:`SPLIT_NEIGHBOURS` nearest neighbours of each of the
    ``long`` particles (fewer when there are fewer particles)."""
    k = min(SPLIT_NEIGHBOURS + 1, len(x))
    _, near = cKDTree(x).query(x[long], k=k)
    return near.reshape(int(long.sum()), k)[:, 1:]


def _slopes(x: Array, values: Array, long: Array, near: Array) -> Array:
    """The least-squares gradients in R^3 of each of ``values`` (k, n) at the ``long``
    particles, from their neighbours ``near``: (k, m, 3)."""
    inverse = np.linalg.pinv(x[near] - x[long][:, None, :])  # (m, 3, k - 1), all at once
    return np.stack([np.einsum("mij,mj->mi", inverse, v[near] - v[long][:, None]) for v in values])


class _LocalQuadratic:
    """The least-squares quadratic v(x0) + a . u + u^T H u / 2 through the values ``v`` of the
    neighbours ``near`` of the particles ``x0 = x[long]``, in the orthographic coordinates
    u = (p - x0) . (e1, e2) / h of the tangent plane at x0 (h the neighbours' root-mean-square
    distance): third-order accurate where v is smooth (a linear fit in R^3 is second order).
    The log density at the centroid of a child of a split is read from it: the split of a
    particle moves its children by a quarter of its length, and the error of a linear fit
    there, the curvature of log rho times the neighbours' distance times the move, is what
    kept lambda through the splits at 3.5e-3 at n = 32 for kappa = 3 (1e-4 with this)."""

    def __init__(self, x: Array, v: Array, long: Array, near: Array) -> None:
        self.x0 = x0 = x[long]
        self.frame = tangent_frames(x0)  # (m, 3, 2)
        d = np.einsum("mkj,mji->mki", x[near] - x0[:, None, :], self.frame)
        self.h = np.sqrt(np.mean(np.sum(d * d, axis=2), axis=1))
        self.h[self.h == 0.0] = 1.0
        basis = self._basis(d / self.h[:, None, None])
        inverse = np.linalg.pinv(basis, rcond=1e-8)  # (m, 5, k)
        self.v0 = v[long]
        with np.errstate(invalid="ignore", over="ignore"):
            self.coefficients = np.einsum("mik,mk->mi", inverse, v[near] - self.v0[:, None])
        # the fit's values are kept within the neighbours' range widened by its own width: a
        # smooth v overshoots it by far less, and an ill-conditioned neighbourhood (nearly
        # collinear neighbours) cannot hand a child a value far outside its data
        low = np.minimum(self.v0, v[near].min(axis=1))
        high = np.maximum(self.v0, v[near].max(axis=1))
        self.low, self.high = 2.0 * low - high, 2.0 * high - low

    @staticmethod
    def _basis(u: Array) -> Array:
        u1, u2 = u[..., 0], u[..., 1]
        return np.stack([u1, u2, u1 * u1, u1 * u2, u2 * u2], axis=-1)

    def unbounded(self, point: Array) -> Array:
        """The quadratic's value at ``point`` (m, 3), one point near each x0."""
        u = np.einsum("mj,mji->mi", point - self.x0, self.frame) / self.h[:, None]
        with np.errstate(invalid="ignore", over="ignore"):
            return self.v0 + np.einsum("mi,mi->m", self._basis(u), self.coefficients)

    def __call__(self, point: Array) -> Array:
        """The fitted value at ``point`` (m, 3), held within the bounds; the parent's value
        where the fit is not finite."""
        with np.errstate(invalid="ignore"):
            fit = np.clip(self.unbounded(point), self.low, self.high)
        return np.where(np.isfinite(fit), fit, self.v0)


def look_caps(log_m: Array, x: Array, query: Any) -> tuple[Array, Array]:
    """The caps' centres (k, 3) and kernel widths (k,) where the heavy particles look (module
    docstring): their look directions, heaviest first, each not yet within
    :data:`LOOK_RADIUS` widths of a chosen one, at most :data:`LOOK_CAPS`. ``query`` maps
    positions (k, 3) to their q = beta B^T x (k, 3)."""
    none = (np.zeros((0, 3)), np.zeros(0))
    if len(log_m) == 0:
        return none
    heavy = np.flatnonzero(log_m >= logsumexp(log_m) + np.log(LOOK_MASS))
    heavy = heavy[np.argsort(-log_m[heavy], kind="stable")]
    q = np.asarray(query(x[heavy]), dtype=float)
    q_norm = np.linalg.norm(q, axis=1)
    live = q_norm > 0.0
    q, q_norm = q[live], q_norm[live]
    if len(q) == 0:
        return none
    look = q / q_norm[:, None]
    width = q_norm**-0.5
    chosen = []
    open_ = np.ones(len(q), dtype=bool)  # look directions not yet inside a chosen cap
    for _ in range(LOOK_CAPS):
        if not open_.any():
            break
        k = int(np.argmax(open_))  # the heaviest not yet covered
        chosen.append(k)
        open_ &= np.arccos(np.clip(look @ look[k], -1.0, 1.0)) > LOOK_RADIUS * width[k]
    return look[chosen], width[chosen]


def look_lengths(log_m: Array, x: Array, query: Any, s_max: float) -> Array:
    """The length each particle is split to (module docstring): ``s_max``, and
    :data:`LOOK_LENGTH` kernel widths within :data:`LOOK_RADIUS` widths plus ``s_max`` of the
    centres of :func:`look_caps`."""
    lengths = np.full(len(log_m), float(s_max))
    for centre, width in zip(*look_caps(log_m, x, query)):
        inside = np.arccos(np.clip(x @ centre, -1.0, 1.0)) <= LOOK_RADIUS * width + s_max
        lengths[inside] = np.minimum(lengths[inside], LOOK_LENGTH * width)
    return lengths


def limited_tilt(gamma: Array, mean_log: Array, neighbour_log: Array) -> Array:
    """The profile slopes ``gamma`` (e-folds across the particle) limited so that neither half
    of a particle with mean log density ``mean_log`` is denser than the densest of its
    neighbours ``neighbour_log`` (m, k) nor lighter than the lightest (Barth-Jespersen, in the
    log domain): the denser half's mean log density is log(2 / (1 + e^{-|gamma|/2})) above the
    particle's, the lighter's log((1 + e^{|gamma|/2}) / 2) below. At a peak (a cluster's
    particle, far denser than every neighbour) and between equal siblings the slope is 0: the
    particle is cut by its own, symmetric profile."""
    up = np.maximum(neighbour_log.max(axis=1) - mean_log, 0.0)
    down = np.maximum(mean_log - neighbour_log.min(axis=1), 0.0)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        by_up = np.where(up >= LOG2, np.inf, -2.0 * np.log(2.0 * np.exp(-up) - 1.0))
        by_down = 2.0 * np.log(2.0 * np.exp(np.minimum(down, 700.0)) - 1.0)
        by_down = np.where(down > 700.0, 2.0 * (down + LOG2), by_down)
    bound = np.minimum(by_up, by_down)
    return np.clip(gamma, -bound, bound)


def split(
    log_m: Array,
    x: Array,
    shape: Array,
    log_point: Array,
    s_max: float | Array,
    limited: bool = False,
) -> tuple[Array, Array, Array, Array, Array]:
    """Cut every particle longer than ``s_max`` (one length, or one per particle: the
    children keep their parent's) in two (module docstring), repeatedly until none is (at most
    :data:`SPLIT_ROUNDS` times); with ``limited`` the fitted slope is limited by
    :func:`limited_tilt`. Returns (log masses, positions, shapes, log point masses, the
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
        mean_log = log_m - area
        near = _neighbours(x, long)
        mean_slope = _slopes(x, mean_log[None], long, near)[0]
        point_fit = _LocalQuadratic(x, log_point - area, long, near)
        axis = u[long][:, :, 0]
        length = s[long][:, 0]
        gamma = np.clip(np.einsum("ij,ij->i", mean_slope, axis) * length, -MAX_TILT, MAX_TILT)
        if limited:
            gamma = limited_tilt(gamma, mean_log[long], mean_log[near])
        mean = tilt_mean(gamma)
        half = tilt_mean(gamma / 2) / 2
        lm = log_m[long]
        child_shape = (
            shape[long] - 0.5 * length[:, None, None] * axis[:, :, None] * vt[long][:, None, 0, :]
        )
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
                    point_fit(point) + log_area(tangent_shapes(point, child_shape)),
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


def principal_axes(sigma: Array, x: Array) -> tuple[Array, Array]:
    """(long, short) unit tangent axes at the points ``x`` (n, 3) of the second moments
    ``sigma`` (n, 3, 3) in their tangent planes: the top eigenvector, made tangent, and x
    cross it."""
    long = np.linalg.eigh(0.5 * (sigma + sigma.transpose(0, 2, 1)))[1][:, :, 2]
    long -= x * np.sum(long * x, axis=1, keepdims=True)
    long /= np.linalg.norm(long, axis=1, keepdims=True)
    short = np.cross(x, long)
    short /= np.linalg.norm(short, axis=1, keepdims=True)
    return long, short


def moment_shapes(
    x: Array, shape: Array, weight: Array, mean: Array, group: Array, start: Array
) -> Array:
    """The shapes (g, 3, 2) of the groups ``group`` (sorted; ``start`` their first members),
    each with the second moment about its mean ``mean`` (g, 3) of its members weighted by
    ``weight`` (>= 0, positive for one member of each group at least): the members'
    parallelograms (f f^T / 12 each) and their spread about the mean, projected on the tangent
    plane at the mean; the shape is the parallelogram of that second moment (edges sqrt(12)
    times its principal half-axes, orthogonal). The long axis is the top eigenvector of the
    moment; the moment along each axis is then summed member by member (sums of squares), so
    that a short axis 1e-20 times the long one keeps its relative accuracy (an eigenvalue of
    the 3 x 3 moment would lose it: two needles 1e-12 rad wide and 3e-3 apart give a zero
    width)."""
    d = x - mean[group]
    second = np.einsum("nik,njk->nij", shape, shape) / 12.0 + d[:, :, None] * d[:, None, :]
    total = np.add.reduceat(weight, start)
    sigma = np.add.reduceat(second * weight[:, None, None], start) / total[:, None, None]
    across = np.eye(3) - mean[:, :, None] * mean[:, None, :]
    long, short = principal_axes(across @ sigma @ across, mean)
    edges = []
    for axis in (long, short):
        a = axis[group]
        along = np.sum(np.einsum("ni,nik->nk", a, shape) ** 2, axis=1) / 12.0
        along += np.sum(d * a, axis=1) ** 2
        moment = np.add.reduceat(weight * along, start) / total
        edges.append(axis * np.sqrt(12.0 * moment)[:, None])
    return np.stack(edges, axis=-1)


def merge(
    log_m: Array, x: Array, shape: Array, log_point: Array, n_fine: int, moments: bool = False
) -> tuple[Array, Array, Array, Array, int]:
    """Merge the particles that share a cell of the ``n_fine`` cubed sphere and order them by
    cell (module docstring). With ``moments`` a merged particle's shape is that of the second
    moment of its heavy members (:func:`moment_shapes`) instead of the heaviest's scaled to the
    members' total area; a particle alone in its cell keeps its shape either way. Returns (log
    masses, positions, shapes, log point masses, particles removed)."""
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
    if moments:
        alone = np.diff(np.r_[start, len(key)]) == 1
        share = w / total[group]  # each group's heaviest (w = 1) counts whatever its share
        weight = np.where((share >= MOMENT_SHARE) | (w == 1.0), share, 0.0)
        merged = moment_shapes(x, shape, weight, mean, group, start)
        merged[alone] = shape[start[alone]]
    else:
        scale = np.sqrt(np.add.reduceat(area, start) / area[heaviest])
        merged = tangent_shapes(mean, shape[heaviest] * scale[:, None, None])
    # the point masses add over the members' areas; the tangent shape's area holds them
    point += log_area(merged) - np.log(np.add.reduceat(area, start))
    return top + np.log(total), mean, merged, point, len(key) - len(start)


def coarsen_outside(
    log_m: Array,
    x: Array,
    shape: Array,
    log_point: Array,
    query: Any,
    s_max: float,
    n: int,
    moments: bool,
    among: Array | None = None,
) -> tuple[Array, Array, Array, Array]:
    """The particles outside the look caps (:func:`look_lengths` of ``query`` and ``s_max``;
    ``query`` None: no caps, all of them; of the mask ``among`` only, if given) merged by the
    cells of the n x n cubed sphere (:func:`merge`), the others kept as they are (first): a
    finer mesh's cells coarsened to the scheme's own where nothing needs them finer. The log
    masses add up to the same total to round-off."""
    outside = np.ones(len(log_m), dtype=bool) if among is None else np.array(among, dtype=bool)
    if query is not None:
        outside &= look_lengths(log_m, x, query, s_max) >= s_max
    if not outside.any():
        return log_m, x, shape, log_point
    parts = (log_m, x, shape, log_point)
    merged = merge(*(a[outside] for a in parts), n, moments)[:4]
    return tuple(np.concatenate([a[~outside], b]) for a, b in zip(parts, merged))


def merge_tail(
    log_m: Array,
    x: Array,
    shape: Array,
    log_point: Array,
    query: Any,
    s_max: float,
    n: int,
    moments: bool,
    depth: float = TAIL_DEPTH,
) -> tuple[Array, Array, Array, Array, int]:
    """(log masses, positions, shapes, log point masses, how many fewer particles): the
    particles whose mean log density lies more than ``depth`` (:data:`TAIL_DEPTH`) below the densest
    particle's, outside the look caps of ``query`` (None: no caps), merged by the cells of the
    n x n cubed sphere (:func:`coarsen_outside`); the others kept as they are (first). The log
    masses add up to the same total to round-off."""
    density = log_m - log_area(shape)
    deep = density < np.max(density, initial=-np.inf) - depth
    merged = coarsen_outside(log_m, x, shape, log_point, query, s_max, n, moments, deep)
    return (*merged, len(log_m) - len(merged[0]))


def voronoi_shapes(
    log_m: Array, x: Array, shape: Array, s_max: float, depth: float = TAIL_DEPTH
) -> tuple[Array, int]:
    """(shapes, how many were replaced): the shape of every particle of the deep tail (mean
    log density more than ``depth`` below the densest particle's) replaced by the
    parallelogram of its spherical Voronoi cell among the deep particles: the area the cell's
    exactly, the axes and the aspect those of the cell's second moment about the particle (fan
    triangles from the particle to the cell's edges, in its tangent plane), each edge at most
    :data:`VORONOI_REACH` split lengths ``s_max``. The others (the clusters and their flanks,
    and deep particles within :data:`VORONOI_DISTINCT` of another) keep theirs. Masses and
    positions are untouched: only what each mass stands for changes, which the splits then
    read (a particle whose cell is longer than the split length is cut, its children filling
    the cell)."""
    density = log_m - log_area(shape)
    deep = np.flatnonzero(density < np.max(density, initial=-np.inf) - depth)
    if len(deep) < 4:
        return shape, 0
    p = x[deep] / np.linalg.norm(x[deep], axis=1, keepdims=True)
    close = np.array(sorted(cKDTree(p).query_pairs(VORONOI_DISTINCT)), dtype=int).reshape(-1, 2)
    distinct = np.ones(len(deep), dtype=bool)
    distinct[close[:, 1]] = False
    deep, p = deep[distinct], p[distinct]
    if len(deep) < 4:
        return shape, 0
    cells = SphericalVoronoi(p, threshold=0.1 * VORONOI_DISTINCT)
    cells.sort_vertices_of_regions()
    sizes = np.fromiter(map(len, cells.regions), dtype=int, count=len(p))
    corner = np.concatenate(cells.regions)
    owner = np.repeat(np.arange(len(p)), sizes)
    first = np.repeat(np.cumsum(sizes) - sizes, sizes)
    position = np.arange(len(corner))
    following = np.where(position + 1 == first + sizes[owner], first, position + 1)
    c = p[owner]
    a = cells.vertices[corner]
    b = cells.vertices[corner[following]]
    a = a - c * np.sum(a * c, axis=1, keepdims=True)  # in the tangent plane at the particle
    b = b - c * np.sum(b * c, axis=1, keepdims=True)
    signed = 0.5 * np.sum(np.cross(a, b) * c, axis=1)
    second = (
        a[:, :, None] * a[:, None, :]
        + b[:, :, None] * b[:, None, :]
        + 0.5 * (a[:, :, None] * b[:, None, :] + b[:, :, None] * a[:, None, :])
    ) * (signed / 6.0)[:, None, None]
    moment = np.zeros((len(p), 3, 3))
    np.add.at(moment, owner, second)
    moment /= np.bincount(owner, weights=signed, minlength=len(p))[:, None, None]
    long, short = principal_axes(moment, p)
    lengths = np.stack(
        [np.sqrt(12.0 * np.einsum("ni,nij,nj->n", e, moment, e)) for e in (long, short)], axis=1
    )
    lengths *= np.sqrt(cells.calculate_areas() / np.prod(lengths, axis=1))[:, None]
    lengths = np.minimum(lengths, VORONOI_REACH * s_max)
    out = shape.copy()
    out[deep] = np.stack([long * lengths[:, :1], short * lengths[:, 1:]], axis=-1)
    return out, len(deep)


def crosses(t: float, dt: float, interval: float) -> bool:
    """Whether [t, t + dt] crosses a multiple of ``interval`` (the same steps on a resume)."""
    return math.floor((t + dt) / interval + 1e-9) > math.floor(t / interval + 1e-9)


def cells_within(length: float, most: int) -> int:
    """The fewest cells per cube edge C, a power of 2 and at most ``most``, whose edge
    pi / (2 C) is at most ``length`` (``most`` for a length of 0)."""
    if length <= 0.0:
        return most
    return min(most, 1 << max(0, math.ceil(math.log2(math.pi / 2.0 / length))))


def tail_cells(n: int, beta_sigma: float, width: float) -> int:
    """The cells per cube edge ``merge_tail`` merges by: the fewest, a power of 2 and at
    least ``n``, whose edge pi / (2 C) is at most ``width`` kernel widths
    (beta sigma_max)^(-1/2) (:func:`cells_within`); ``n`` without interaction."""
    if beta_sigma <= 0.0:
        return n
    return max(n, cells_within(width / math.sqrt(beta_sigma), MOST_TAIL_CELLS))


class TailRemesh:
    """:func:`remesh_tail`'s cells for the n x n cubed sphere ``cells``: each cell's shape by
    its :func:`~spheredens.grids._cubed_sphere.cube_index`."""

    def __init__(self, cells: CubedSphereCells) -> None:
        self.n = cells.n
        self.spacing = 0.5 * cells.h
        _, centre, shape = cells.log_moments(lambda p: np.zeros(len(p)), order=1)
        self.shape = np.empty((cells.n_cells, 3, 2))
        self.shape[cube_index(centre, cells.n)] = shape

    def cells_of(self, log_m: Array, x: Array) -> tuple[Array, Array, Array]:
        """(log masses, positions, shapes) of the particles ``x`` with log masses ``log_m`` put
        on the cells: the mass their interpolant puts in each cell (every log mass finite, the
        total the same to round-off), at its mass-weighted mean, with the cell's shape."""
        at_vertex, points, logs = Reconstruction(x, log_m, self.spacing).parts(x, log_m)
        kept = np.isfinite(at_vertex)
        sources = np.concatenate([x[kept], points])
        source_log_m = np.concatenate([at_vertex[kept], logs])
        cell = cube_index(sources, self.n)
        used, slot = np.unique(cell, return_inverse=True)
        new_log_m = log_bincount(slot, source_log_m, len(used))
        weight = np.exp(source_log_m - new_log_m[slot])
        mean = np.zeros((len(used), 3))
        np.add.at(mean, slot, weight[:, None] * sources)
        mean /= np.linalg.norm(mean, axis=1, keepdims=True)
        return new_log_m, mean, tangent_shapes(mean, self.shape[used])

    def __call__(
        self, log_m: Array, x: Array, shape: Array, log_point: Array
    ) -> tuple[Array, Array, Array, Array, int]:
        """(log masses, positions, shapes, log point masses, the tail particles replaced): the
        particles more than :data:`TAIL_DEPTH` below the densest (module docstring) replaced
        by the cells' particles, the others kept (first). The log masses add up to the
        same total to round-off."""
        # the densities need the triangles only: a spacing no triangle exceeds samples none
        lam = Reconstruction(x, log_m, 4.0).log_densities(x, log_m)
        tail = lam < np.max(lam) - TAIL_DEPTH
        if tail.sum() < 4:
            return log_m, x, shape, log_point, 0
        new_log_m, mean, new_shape = self.cells_of(log_m[tail], x[tail])
        keep = ~tail
        return (
            np.concatenate([log_m[keep], new_log_m]),
            np.concatenate([x[keep], mean]),
            np.concatenate([shape[keep], new_shape]),
            np.concatenate([log_point[keep], new_log_m]),
            int(tail.sum()),
        )


def remesh_tail(
    log_m: Array, x: Array, shape: Array, log_point: Array, cells: CubedSphereCells
) -> tuple[Array, Array, Array, Array, int]:
    """:class:`TailRemesh` of ``cells`` applied once (module docstring)."""
    return TailRemesh(cells)(log_m, x, shape, log_point)
