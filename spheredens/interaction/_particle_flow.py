"""The velocity and its Jacobian at log-mass particles: the sums of ``log_lagrangian``.

For particles x_i of S^2 with log masses l_i (the density rho ~ sum_i e^{l_i} delta_{x_i}, each
standing for a small cell), the softmax velocity and its tangent Jacobian at every particle are

    X(x) = P_x E_x[V y],
    DX(x) v = P_x beta Cov_x(V y, B y) v - <x, E_x[V y]> v        (v tangent at x),

with E_x the average under the weights e^{l_j + beta <B^T x, y_j>} (one normalized sum per
target: ``sa``). All fifteen averaged values (V y, y, V y (B y)^T) come from one pass of
log-sum-exp sums with certified pruning (:func:`~spheredens.interaction._pruned.
pruned_logsumexp_sums`: the blocks a row skips weigh less than :data:`PARTICLE_FRACTION` =
1e-12 of its sum), or, once the particles gather in tight groups, with the certified Taylor
expansions between groups (:func:`~spheredens.interaction._clusters.
clustered_logsumexp_sums`, to 2^-59); masses far below the smallest float64 number keep their
weight (the sums take l_i as they are). With ``cells`` each source is its parallelogram
(:class:`CellSources`).

For ``sa_zero_temperature`` the field is the fixed X_inf(x) = P_x A x / |B^T x|, A = V B^T,
whose Jacobian is formed in closed form (:func:`zero_temperature_flow`, the ``flow`` of
:class:`~spheredens.interaction.ZeroTemperatureField`); at beta = 0 the average is the plain
mass-weighted mean.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.sparse import csr_matrix

from .._types import Array
from ..models import Model
from ._base import Evaluator, Layout, register_evaluator
from ._clusters import _grid_groups, clustered_logsumexp_sums, group_width
from ._interpolant import Reconstruction
from ._pruned import SourceBlocks, pruned_logsumexp_sums

#: the blocks (and the pairs of the cell sums) that a row skips weigh together less than this
#: fraction of its sum: nine orders below the positions' tolerance (1e-3 by default), and half
#: the pairs of 2^-60 at beta = 300
PARTICLE_FRACTION = 1e-12

#: the expansions between groups are used when the groups hold this many particles on average
CLUSTERED_FROM = 16

#: the ``interpolant`` sources are spaced this many kernel widths (beta sigma_max(B))^(-1/2)
INTERPOLANT_SPACING = 1.0

#: the ``interpolant`` quadrature samples only triangles deeper than this many e-folds below
#: the densest particle; above, the particles are summed as points
#: (:mod:`~spheredens.interaction._interpolant`, the ``depth``)
INTERPOLANT_DEPTH = 20.0

#: the log mass the sums give a particle that left all of its mass to sub-sampled triangles
#: (nothing, finite: the expansions between groups take it as any other)
EMPTY_LOG_MASS = -1e300

#: how the sums see a source particle (``quadrature`` of :meth:`LogParticleSums.flow`, and the
#: scheme option of ``log_lagrangian``)
QUADRATURES = {
    "cells": "its mass spread evenly over its parallelogram (the kernel integrated over it)",
    "points": "its mass at its centroid",
    "interpolant": (
        "the piecewise log-linear interpolant of the particles' densities on their Delaunay "
        "triangulation, sampled a kernel width apart (the tail's own sums at low temperature)"
    ),
}


def _shape_rate(x: Array, velocity: Array, along: Array, jac: Array, shape: Array) -> Array:
    """d f / dt = D(P_x F) f for each column f of ``shape`` (n, 3, k), given DF f (``jac``),
    X = P_x F (``velocity``) and <x, F> (``along``): P_x DF f - <x, F> f - x <X, f>. The last
    term turns f with the tangent plane, so that tangent vectors stay tangent."""
    tangent = jac - x[:, :, None] * np.einsum("ni,nik->nk", x, jac)[:, None, :]
    turn = x[:, :, None] * np.einsum("ni,nik->nk", velocity, shape)[:, None, :]
    return tangent - along[:, None, None] * shape - turn


@register_evaluator
class LogParticleSums(Evaluator):
    """X and its Jacobian at particles with log masses (module docstring)."""

    name = "particle_sums"
    domains = ("sphere",)
    inputs = ("log_particles",)
    priority = 0
    description = (
        "log-sum-exp sums over log-mass particles with certified pruning and, between tight "
        "groups, certified Taylor expansions (scheme log_lagrangian; sa, sa_zero_temperature)"
    )
    requirement = "needs normalized attention without slices (sa or sa_zero_temperature)"

    @staticmethod
    def structure(model: Model) -> bool:
        return bool(model.kind.normalized and model.kind.interacting) and not model.kind.sliced

    @classmethod
    def build(cls, model: Model, layout: Layout) -> "LogParticleSums":
        return cls(model)

    def __init__(self, model: Model) -> None:
        self.model = model
        self.B = np.asarray(model.B, dtype=float)
        self.V = np.asarray(model.V, dtype=float)
        self.beta = float(model.beta)
        self.beta_sigma = self.beta * float(np.linalg.svd(self.B, compute_uv=False)[0])
        #: right-hand sides evaluated (each: all particles as targets and as sources)
        self.evaluations = 0

    def attributes(self) -> dict[str, Any]:
        return {"interaction_clustered_from": CLUSTERED_FROM}

    def flow(
        self,
        x: Array,
        log_m: Array,
        shape: Array,
        quadrature: str = "points",
        rows: NDArray[np.int64] | None = None,
        reconstruction: Reconstruction | None = None,
    ) -> tuple[Array, Array]:
        """(dx/dt, d shape/dt) at the particles x (n, 3) (normalized here) with log masses
        ``log_m`` (n,) and shapes (n, 3, k): X(x) and DX(x) shape - x <X, shape> (module
        docstring). ``quadrature`` says what the sums take as sources: ``"points"`` each
        particle's mass at its centroid; ``"cells"`` (shapes (n, 3, 2)) the parallelogram of its
        shape, its mass spread evenly (:class:`CellSources`); ``"interpolant"`` the piecewise
        log-linear interpolant of the particles' densities on their Delaunay triangulation,
        sampled :data:`INTERPOLANT_SPACING` kernel widths apart where it is
        :data:`INTERPOLANT_DEPTH` e-folds below the densest particle
        (:class:`~spheredens.interaction._interpolant.Reconstruction`: ``reconstruction``,
        from :meth:`reconstruction`, fixes its triangles, else they are found here). With
        ``rows`` (indices) only those particles are targets (all are sources)."""
        if quadrature not in QUADRATURES:
            raise ValueError(f"quadrature {quadrature!r}: expected one of {tuple(QUADRATURES)}")
        self.evaluations += 1
        x = x / np.linalg.norm(x, axis=1, keepdims=True)
        targets, target_shape = (x, shape) if rows is None else (x[rows], shape[rows])
        if quadrature == "cells" and self.beta_sigma > 0.0:
            mean = self._cell_averages(x, log_m, shape, targets)
        elif quadrature == "interpolant" and self.beta_sigma > 0.0:
            mean = self._interpolant_averages(
                x, log_m, None if rows is None else targets, reconstruction
            )
        else:
            mean = self._averages(x, log_m, None if rows is None else targets)
        ev, cov = self._moments(mean)
        along = np.einsum("ij,ij->i", targets, ev)
        velocity = ev - along[:, None] * targets
        jac = np.einsum("nij,njk->nik", cov, target_shape)
        return velocity, _shape_rate(targets, velocity, along, jac, target_shape)

    def _values(self, y: Array) -> Array:
        """(V y, y, V y (B y)^T) at the sources ``y`` (n, 15)."""
        vy, by = y @ self.V.T, y @ self.B.T
        return np.concatenate([vy, y, (vy[:, :, None] * by[:, None, :]).reshape(-1, 9)], 1)

    def _averages(self, x: Array, log_m: Array, targets: Array | None) -> Array:
        """The averages of (V y, y, V y (B y)^T) at every particle (``targets`` None) or at
        ``targets``."""
        if self.beta_sigma == 0.0:  # beta = 0: the plain mass-weighted mean, the same at all x
            n_t = len(x) if targets is None else len(targets)
            w = np.exp(log_m - log_m.max())
            return np.broadcast_to(w @ self._values(x) / w.sum(), (n_t, 15))
        z, n, _ = self._sums(x, log_m, targets)
        return n / z[:, None]

    def _sums(self, x: Array, log_m: Array, targets: Array | None) -> tuple[Array, Array, Array]:
        """(Z e^-M, N e^-M, M) of the values (V y, y, V y (B y)^T) over the sources x at every
        particle (``targets`` None: the expansions between groups where the particles gather)
        or at ``targets`` (beta > 0)."""
        values = self._values(x)
        if targets is None:
            q = self.model.kernel.query(x)  # beta B^T x: the logit is <q, y>
            starts = _grid_groups(x, group_width(self.beta_sigma))
            if len(starts) * CLUSTERED_FROM <= len(x):
                z, n, m, _ = clustered_logsumexp_sums(q, x, log_m, values, self.beta_sigma, starts)
                return z, n, m
        else:
            q = self.model.kernel.query(targets)
        z, n, m, _ = pruned_logsumexp_sums(q, x, log_m, values, fraction=PARTICLE_FRACTION)
        return z, n, m

    def reconstruction(self, x: Array, log_m: Array) -> Reconstruction:
        """The triangles and sub-sampling levels of the ``interpolant`` quadrature for the
        particles ``x`` (n, 3) with log masses ``log_m``, spaced :data:`INTERPOLANT_SPACING`
        kernel widths (beta sigma_max(B))^(-1/2) (none at beta = 0), only where the density is
        :data:`INTERPOLANT_DEPTH` e-folds below the densest particle."""
        x = x / np.linalg.norm(x, axis=1, keepdims=True)
        width = 1.0 / math.sqrt(self.beta_sigma) if self.beta_sigma > 0.0 else math.inf
        return Reconstruction(x, log_m, INTERPOLANT_SPACING * width, INTERPOLANT_DEPTH)

    def _interpolant_averages(
        self,
        x: Array,
        log_m: Array,
        targets: Array | None,
        reconstruction: Reconstruction | None,
    ) -> Array:
        """:meth:`_averages` with the sources of the ``interpolant`` quadrature
        (:meth:`~spheredens.interaction._interpolant.Reconstruction.parts`, of
        ``reconstruction`` if it is for as many particles): the mass left at the particles
        summed as the points are (with the expansions between groups), the sub-triangles'
        centroids added with the pruning certified against that first sum."""
        if reconstruction is None or reconstruction.n != len(x):
            reconstruction = self.reconstruction(x, log_m)
        at_vertex, points, log_a = reconstruction.parts(x, log_m)
        z, n, m = self._sums(x, np.maximum(at_vertex, EMPTY_LOG_MASS), targets)
        if len(points) == 0:
            return n / z[:, None]
        q = self.model.kernel.query(x if targets is None else targets)
        z_s, n_s, m_s, _ = pruned_logsumexp_sums(
            q,
            points,
            log_a,
            self._values(points),
            log_lower=m + np.log(z),
            fraction=PARTICLE_FRACTION,
        )
        top = np.maximum(m, m_s)
        a, b = np.exp(m - top), np.exp(m_s - top)
        return (n * a[:, None] + n_s * b[:, None]) / (z * a + z_s * b)[:, None]

    def _moments(self, mean: Array) -> tuple[Array, Array]:
        """(E_x[V y], beta Cov_x(V y, B y)) from the averages of (V y, y, V y (B y)^T)."""
        ev, ey, evb = mean[:, :3], mean[:, 3:6], mean[:, 6:].reshape(-1, 3, 3)
        return ev, self.beta * (evb - ev[:, :, None] * (ey @ self.B.T)[:, None, :])

    def _cell_averages(self, x: Array, log_m: Array, shape: Array, targets: Array) -> Array:
        """:meth:`_averages` at ``targets`` with every source the cell of its shape
        (:class:`CellSources`)."""
        cells = CellSources(x, log_m, shape, self.V, self.B)
        q = self.model.kernel.query(targets)
        z, n, _, _ = pruned_logsumexp_sums(
            q,
            cells.centre,
            log_m,
            cells.point_values,
            extra=cells.reach,
            kept=cells.kept_sums,
            fraction=PARTICLE_FRACTION,
        )
        return n / z[:, None]


def cell_moments(a: Array) -> tuple[Array, Array, Array]:
    """For the law on [-1/2, 1/2] with density proportional to e^{a s}, elementwise in ``a``:
    (log of its normalizer sinh(a/2) / (a/2), its mean, its second moment E[s^2]), to about
    1e-13 absolute (closed forms, and series where they cancel)."""
    abs_a = np.abs(a)
    small = abs_a < 0.05
    abs_a[small] = 1.0  # the series below
    one_minus_e = -np.expm1(-abs_a)  # 1 - e^-|a|
    inv = 1.0 / abs_a
    log_norm = np.log(one_minus_e * inv)
    log_norm += 0.5 * abs_a
    r = 1.0 / one_minus_e
    mean = np.copysign(r - 0.5 - inv, a)  # coth(|a| / 2) / 2 - 1 / |a|
    second = inv * inv - (r - 1.0) * r + mean * mean  # variance 1/a^2 - e / (1 - e)^2
    a_s = a[small]
    a2 = a_s * a_s
    log_norm[small] = a2 * (1.0 / 24.0 - a2 * (1.0 / 2880.0 - a2 / 181440.0))
    mean[small] = a_s * (1.0 / 12.0 - a2 * (1.0 / 720.0 - a2 / 30240.0))
    second[small] = 1.0 / 12.0 + a2 * (1.0 / 360.0 - a2 / 15120.0)
    return log_norm, mean, second


def _rows(values: Array, index: tuple[Array, Array], shape: tuple[int, int]) -> csr_matrix:
    """The sparse matrix of ``values`` at the (columns, row pointers) ``index``."""
    return csr_matrix((values, *index), shape=shape)


class CellSources:
    """Sources that are cells, not points: particle j spreads its mass evenly over the
    parallelogram y = x_j + f_j1 s_1 + f_j2 s_2, s in [-1/2, 1/2]^2, of its tangent plane. Across
    it the logit <q, y> is linear, <q, x_j> + a_1 s_1 + a_2 s_2 with a_k = <q, f_jk>, less the
    sphere's curvature, whose mean is <q, x_j> tau_j, tau_j = (|f_j1|^2 + |f_j2|^2) / 24 (y
    normalized). So the pair's weight is exactly

        e^{l_j + <q, x_j (1 - tau_j)>} prod_k sinh(a_k / 2) / (a_k / 2),

    and its averages of y, V y and V y (B y)^T are those of the tilted law of s: the means
    m_k and second moments of :func:`cell_moments`, about x_j. (The values leave out the
    curvature's shortening x_j tau_j: with every source it would scale the velocity by about
    1 - tau, a bias the particles, points on S^2, do not carry: the growth rate of the moments
    of the particles around the uniform density errs by tau with it, by 2e-5 at n = 8 without
    it.) The kernel
    is then integrated over each particle's cell, not sampled at its centroid, which is what a
    particle wider than the kernel (beta sigma_max(B))^(-1/2) needs: at beta = 300, n = 16 the
    velocities of the cluster move by 5% between the two (docs/numerics.md). The extra cost is
    five exponentials or logarithms and five products with the sources per pair.

    The weight exceeds the point weight of the shortened centre by at most
    |q| (|f_j1| + |f_j2|) / 2 (log sinh(h) / h <= h) and never falls below it: the pruning of
    :func:`~spheredens.interaction._pruned.pruned_logsumexp_sums` stays certified with the
    blocks' radii widened by ``reach``."""

    def __init__(self, x: Array, log_m: Array, shape: Array, V: Array, B: Array) -> None:
        f1, f2 = shape[:, :, 0], shape[:, :, 1]
        tau = (np.einsum("ij,ij->i", f1, f1) + np.einsum("ij,ij->i", f2, f2)) / 24.0
        self.centre = x * (1.0 - tau)[:, None]
        self.log_m = log_m
        self.f1, self.f2 = f1, f2
        self.reach = 0.5 * (np.linalg.norm(f1, axis=1) + np.linalg.norm(f2, axis=1))
        vc, bc = x @ V.T, x @ B.T
        vf = [f @ V.T for f in (f1, f2)]
        bf = [f @ B.T for f in (f1, f2)]

        def outer(a: Array, b: Array) -> Array:
            return (a[:, :, None] * b[:, None, :]).reshape(len(a), 9)

        #: (V y, y, V y (B y)^T) at x; their parts linear in s_1, s_2; the quadratic
        self.point_values = np.concatenate([vc, x, outer(vc, bc)], axis=1)
        self.linear = [
            np.concatenate([vf[k], f, outer(vf[k], bc) + outer(vc, bf[k])], axis=1)
            for k, f in enumerate((f1, f2))
        ]
        self.square = [outer(vf[0], bf[0]), outer(vf[1], bf[1])]
        self.cross = outer(vf[0], bf[1]) + outer(vf[1], bf[0])

    def kept_sums(self, blocks: SourceBlocks, q: Array, keep: Array) -> tuple[Array, Array, Array]:
        """(Z e^-M, N e^-M, M) over the kept blocks (the ``kept`` of
        :func:`~spheredens.interaction._pruned.pruned_logsumexp_sums`), for the values
        (V y, y, V y (B y)^T) averaged over each cell. In each chunk of rows, the pairs whose
        weight is certified below :data:`PARTICLE_FRACTION` / (its sources) of the row's largest
        point weight (bounded above with log sinh(h) / h <= h) are dropped before the cells'
        moments are formed: the rest is summed as sparse rows."""
        n_t = len(q)
        z, n, m = np.empty(n_t), np.zeros((n_t, 15)), np.empty(n_t)
        for rows, cols in blocks.kept_chunks(keep):
            if cols.size == 0:
                z[rows], m[rows] = 0.0, -np.inf
                continue
            qr = q[rows]
            g = qr @ self.centre[cols].T
            g += self.log_m[cols][None, :]
            a1, a2 = qr @ self.f1[cols].T, qr @ self.f2[cols].T
            cut = g.max(axis=1) + math.log(PARTICLE_FRACTION / cols.size)
            live = g + 0.5 * (np.abs(a1) + np.abs(a2)) >= cut[:, None]
            i, j = np.nonzero(live)
            l1, m1, s1 = cell_moments(a1[i, j])
            l2, m2, s2 = cell_moments(a2[i, j])
            w = g[i, j] + l1 + l2
            counts = np.bincount(i, minlength=g.shape[0])  # every row keeps its top
            starts = np.r_[0, np.cumsum(counts)[:-1]]
            top = np.maximum.reduceat(w, starts)
            w = np.exp(w - np.repeat(top, counts))
            m[rows], z[rows] = top, np.add.reduceat(w, starts)
            pattern = (j, np.r_[0, np.cumsum(counts)]), g.shape
            n[rows] = (
                _rows(w, *pattern) @ self.point_values[cols]
                + _rows(w * m1, *pattern) @ self.linear[0][cols]
                + _rows(w * m2, *pattern) @ self.linear[1][cols]
            )
            n[rows, 6:] += (
                _rows(w * s1, *pattern) @ self.square[0][cols]
                + _rows(w * s2, *pattern) @ self.square[1][cols]
                + _rows(w * (m1 * m2), *pattern) @ self.cross[cols]
            )
        return z, n, m


def zero_temperature_flow(model: Model, x: Array, shape: Array) -> tuple[Array, Array]:
    """(dx/dt, d shape/dt) of particles under the fixed field of ``sa_zero_temperature``:
    X_inf = P_x A x / r, r = |B^T x|, A = V B^T, and along each column f of ``shape`` the
    derivative of A x / r, A f / r - A x <B^T x, B^T f> / r^3 (:func:`_shape_rate`)."""
    x = x / np.linalg.norm(x, axis=1, keepdims=True)
    B = np.asarray(model.B, dtype=float)
    A = np.asarray(model.V, dtype=float) @ B.T
    ax, bx = x @ A.T, x @ B
    r = np.linalg.norm(bx, axis=1)
    along = np.einsum("ij,ij->i", x, ax) / r
    velocity = ax / r[:, None] - along[:, None] * x
    af = np.einsum("ij,njk->nik", A, shape)
    bf = np.einsum("ji,njk->nik", B, shape)  # B^T f
    dot = np.einsum("ni,nik->nk", bx, bf)
    jac = af / r[:, None, None] - ax[:, :, None] * (dot / r[:, None] ** 3)[:, None, :]
    return velocity, _shape_rate(x, velocity, along, jac, shape)
