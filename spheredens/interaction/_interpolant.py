"""The piecewise log-linear interpolant of log-mass particles on S^2, sampled finer than the
kernel: the sources of ``log_lagrangian``'s ``interpolant`` quadrature.

Why. Once the mass has gathered, the softmax at a particle x of the tail averages the tail's
own density over the kernel's width 1 / sqrt(beta |B^T x|) around its look direction (0.033 to
0.05 rad at beta = 300), and the particles there are further apart than that (0.06 rad at
n = 32). A sum over irregular points that sparse is a quadrature with O(1) errors: the average
jumps from one particle to the next as x moves, and the velocity's divergence, which drains
the tail that decides when a cluster is released, comes out near 0 where it is 0.6
(docs/numerics.md, "The tail's own quadrature"). The density between the particles has to be
reconstructed, and the kernel integrated against the reconstruction.

The reconstruction, for particles x_j (unit vectors) with log masses l_j:

1. the Delaunay triangulation of S^2 by the particles: the convex hull of the unit vectors
   (qhull, :class:`scipy.spatial.ConvexHull`); each flat triangle T stands for its radial
   projection;
2. the log density at each vertex, lambda_j = l_j - log a_j, with a_j = sum_{T ni j} |T| / 3
   the barycentric dual area;
3. each triangle receives from each of its vertices the share m_j |T| / (3 a_j): the shares of a
   particle add to its mass exactly, so the reconstruction's mass is the particles' to
   round-off, and every share is positive (a logarithm, however small);
4. a triangle whose vertex log densities differ by at most :data:`STEEP` and whose longest
   edge exceeds ``spacing`` is cut into k^2 sub-triangles, k = ceil(edge / spacing) (at most
   :data:`MAX_LEVEL`); its mass (the sum of its three shares) is spread over their centroids,
   radially projected onto S^2, in proportion to exp(the barycentric interpolation of lambda)
   times the radial projection's area element h_T / |p|^3 (h_T the plane's distance from the
   origin): a midpoint rule of the log-linear interpolant, second order;
5. every other triangle (finer than ``spacing``, where the points already sample the kernel,
   or steep, at the edge of a cluster, where interpolating lambda across e-folds would move
   mass away from the heavy vertex, or, with a finite ``depth``, one with a vertex within
   ``depth`` e-folds of the largest lambda) gives its shares back to its vertices; a particle
   in no triangle (qhull drops points that coincide to round-off) keeps its whole mass.

The ``depth`` is for the scheme (``log_lagrangian`` passes 20): where the density is within
that many e-folds of its largest value the particles are those the flow has moved from a
regular start, as many as the contraction made, and their point sums are a better quadrature
than the midpoint rule of a log-linear interpolant, second order in a kernel barely wider than
the particles (the two-atom case at beta = 300, n = 32: the interpolant everywhere sends
4.1e-5 of the mass across the plane between the clusters where the point sums send 7.3e-5,
and n = 64 7.5e-5; W2 on the plateau holds pi^2 times it, docs/concentration.md). The deep tail,
sparse and irregular, is where point sums fail and the interpolant is needed.

The sources are then points again, at most N + sum_T k_T^2, and the sums over them keep their
certificate (:func:`~spheredens.interaction._pruned.pruned_logsumexp_sums`). With ``spacing``
one kernel width the velocity's divergence of a smooth density sampled by the irregular
particles 1.3-1.9 kernel widths apart errs by 0.002 (median, on values about 0.5) where the
point sums err by 0.09-0.21 (tests/schemes/test_sphere_interpolant.py).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.spatial import ConvexHull, QhullError
from scipy.special import logsumexp

from .._types import Array
from ..grids._cubed_sphere import cube_index

#: a triangle whose vertex log densities differ by more than this keeps its mass at its vertices
STEEP = 3.0

#: at most this many sub-triangles along an edge
MAX_LEVEL = 6

#: the sub-triangles' centroids are ordered by the cells of this cubed sphere (Morton order in
#: each face: consecutive points close, so that the pruned sums' blocks are small)
ORDER_CELLS = 1 << 16


def _centroids(k: int) -> Array:
    """The barycentric coordinates (k^2, 3) of the centroids of the k^2 sub-triangles of the
    regular subdivision of a triangle into k parts along each edge."""
    up = [((i + 1 / 3) / k, (j + 1 / 3) / k) for i in range(k) for j in range(k - i)]
    down = [((i + 2 / 3) / k, (j + 2 / 3) / k) for i in range(k) for j in range(k - 1 - i)]
    st = np.array(up + down)
    return np.stack([st[:, 0], st[:, 1], 1.0 - st[:, 0] - st[:, 1]], axis=1)


_PATTERNS = {k: _centroids(k) for k in range(1, MAX_LEVEL + 1)}


def log_bincount(index: Array, log_values: Array, n: int) -> Array:
    """log sum_{i: index_i = j} exp(log_values_i) for j < n (-inf where nothing falls), with
    each bin's largest value factored out (no overflow or underflow)."""
    top = np.full(n, -np.inf)
    np.maximum.at(top, index, log_values)
    shift = np.where(np.isfinite(top), top, 0.0)
    total = np.bincount(index, weights=np.exp(log_values - shift[index]), minlength=n)
    with np.errstate(divide="ignore"):
        return shift + np.log(total)


def triangles(x: Array) -> Array | None:
    """The Delaunay triangles (m, 3) of the unit vectors ``x`` on S^2 (their convex hull), each
    row ordered by its smallest index, the rows sorted by it (neighbours close: what the
    pruned sums need); None when qhull cannot build it (fewer than 4 points, all on a plane)."""
    if len(x) < 4:
        return None
    try:
        simplices = ConvexHull(x).simplices
    except QhullError:
        return None
    return simplices[np.argsort(simplices.min(axis=1), kind="stable")]


class Reconstruction:
    """The reconstruction of the module docstring with its triangles and their sub-sampling
    levels fixed, as found for the particles ``x`` (n, 3), unit vectors, with log masses
    ``log_m``, ``spacing`` (radians) and ``depth`` (e-folds; none by default): :meth:`parts`
    forms the sources for these particles at any positions near ``x``. A scheme fixes them for
    one time step, so that the sources move smoothly with the particles within it (a Delaunay
    flip or a change of level would make the velocity jump between the stages of a step), and
    the triangulation is built once per step, not at every stage."""

    def __init__(self, x: Array, log_m: Array, spacing: float, depth: float = math.inf) -> None:
        self.n = len(x)
        self.simplex = triangles(x) if math.isfinite(spacing) else None
        if self.simplex is None:
            return
        geometry = self._geometry(x, log_m)
        corners, corner_lam = geometry[0], geometry[4]
        edge = np.linalg.norm(corners - np.roll(corners, 1, axis=1), axis=2).max(axis=1)
        level = np.minimum(np.ceil(edge / spacing), MAX_LEVEL).astype(int)
        level[np.ptp(corner_lam, axis=1) > STEEP] = 1
        if math.isfinite(depth) and len(corner_lam):
            level[corner_lam.max(axis=1) > corner_lam.max() - depth] = 1
        self.back = level == 1
        #: (k, the triangles of level k) for k >= 2
        self.levels = [(k, np.flatnonzero(level == k)) for k in range(2, MAX_LEVEL + 1)]
        self.levels = [(k, rows) for k, rows in self.levels if len(rows)]
        points = self._points(corners)[0]
        self.order = np.argsort(cube_index(points, ORDER_CELLS), kind="stable")

    def _geometry(self, x: Array, log_m: Array) -> tuple[Array, Array, Array, Array, Array]:
        """(corners (m, 3, 3), height (m,), vertex (n,) bool, share (m, 3), corner lambda
        (m, 3)) of the triangles at the positions ``x``."""
        simplex = self.simplex
        corners = x[simplex]
        normal = np.cross(corners[:, 1] - corners[:, 0], corners[:, 2] - corners[:, 0])
        twice_area = np.linalg.norm(normal, axis=1)
        height = np.abs(np.einsum("ij,ij->i", normal, corners[:, 0])) / twice_area
        weights = np.repeat(twice_area / 6.0, 3)
        dual = np.bincount(simplex.ravel(), weights=weights, minlength=self.n)
        vertex = dual > 0.0
        lam = np.where(vertex, log_m - np.log(np.where(vertex, dual, 1.0)), -np.inf)
        corner_lam = lam[simplex]
        share = corner_lam + np.log(twice_area / 6.0)[:, None]  # (m, 3): m_j |T| / (3 a_j)
        return corners, height, vertex, share, corner_lam

    def log_densities(self, x: Array, log_m: Array) -> Array:
        """lambda_j = l_j - log a_j of each particle at the positions ``x`` (a_j its barycentric
        dual area; -inf for a particle in no triangle, and for every one when there are no
        triangles)."""
        if self.simplex is None:
            return np.full(self.n, -np.inf)
        corner_lam = self._geometry(x, log_m)[4]
        lam = np.full(self.n, -np.inf)
        lam[self.simplex.ravel()] = corner_lam.ravel()
        return lam

    def _points(self, corners: Array) -> tuple[Array, list[Array]]:
        """The sub-triangles' centroids on S^2 (k, 3), level by level, and the radii of the
        flat centroids (one array per level)."""
        points, radii = [np.zeros((0, 3))], []
        for k, rows in self.levels:
            p = np.einsum("sk,tkd->tsd", _PATTERNS[k], corners[rows])
            radius = np.linalg.norm(p, axis=2)
            points.append((p / radius[:, :, None]).reshape(-1, 3))
            radii.append(radius)
        return np.concatenate(points), radii

    def parts(self, x: Array, log_m: Array) -> tuple[Array, Array, Array]:
        """(the log mass left at each particle (n,), -inf where it gave all to sub-sampled
        triangles; the sub-triangles' centroids (k, 3) on S^2; their log masses (k,)) for the
        particles at ``x`` with log masses ``log_m``. The two parts' masses add up to the
        particles' to round-off."""
        if self.simplex is None:
            return log_m, np.zeros((0, 3)), np.zeros(0)
        corners, height, vertex, share, corner_lam = self._geometry(x, log_m)
        points, radii = self._points(corners)
        logs = [np.zeros(0)]
        for (k, rows), radius in zip(self.levels, radii):
            log_w = corner_lam[rows] @ _PATTERNS[k].T - 3.0 * np.log(radius)
            log_w += np.log(height[rows])[:, None]
            log_w += (logsumexp(share[rows], axis=1) - logsumexp(log_w, axis=1))[:, None]
            logs.append(log_w.ravel())
        at_vertex = log_bincount(self.simplex[self.back].ravel(), share[self.back].ravel(), self.n)
        at_vertex = np.where(vertex, at_vertex, log_m)  # a particle in no triangle keeps its mass
        return at_vertex, points[self.order], np.concatenate(logs)[self.order]


def interpolant_parts(
    x: Array, log_m: Array, spacing: float, depth: float = math.inf
) -> tuple[Array, Array, Array]:
    """:meth:`Reconstruction.parts` of the particles ``x`` with log masses ``log_m``, their
    triangles and levels found for these positions: (the log mass left at each particle, the
    sub-triangles' centroids, their log masses)."""
    return Reconstruction(x, log_m, spacing, depth).parts(x, log_m)


def interpolant_sources(
    x: Array, log_m: Array, spacing: float, depth: float = math.inf
) -> tuple[Array, Array]:
    """(points (k, 3) on S^2, their log masses (k,)): both parts of :func:`interpolant_parts`
    as one set of sources, the particles that kept mass first. The log masses add up to the
    particles' to round-off."""
    at_vertex, points, logs = interpolant_parts(x, log_m, spacing, depth)
    kept = np.flatnonzero(np.isfinite(at_vertex))
    return np.concatenate([x[kept], points]), np.concatenate([at_vertex[kept], logs])
