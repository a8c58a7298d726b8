"""The velocity and its Jacobian at log-mass particles: the sums of ``log_lagrangian``.

For particles x_i of S^2 with log masses l_i (the density rho ~ sum_i e^{l_i} delta_{x_i}, each
standing for a small cell), the softmax velocity and its tangent Jacobian at every particle are

    X(x) = P_x E_x[V y],
    DX(x) v = P_x beta Cov_x(V y, B y) v - <x, E_x[V y]> v        (v tangent at x),

with E_x the average under the weights e^{l_j + beta <B^T x, y_j>} (one normalized sum per
target: ``sa``). All fifteen averaged values (V y, y, V y (B y)^T) come from one pass of
log-sum-exp sums with certified pruning (:func:`~spheredens.interaction._pruned.
pruned_logsumexp_sums`), or, once the particles gather in tight groups, with the certified
Taylor expansions between groups (:func:`~spheredens.interaction._clusters.
clustered_logsumexp_sums`); either way each sum is exact to 2^-59 of itself, and masses far
below the smallest float64 number keep their weight (the sums take l_i as they are).

For ``sa_zero_temperature`` the field is the fixed X_inf(x) = P_x A x / |B^T x|, A = V B^T,
whose Jacobian is formed in closed form (:func:`zero_temperature_flow`, the ``flow`` of
:class:`~spheredens.interaction.ZeroTemperatureField`); at beta = 0 the average is the plain
mass-weighted mean.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._types import Array
from ..models import Model
from ._base import Evaluator, Layout, register_evaluator
from ._clusters import _grid_groups, clustered_logsumexp_sums, group_width
from ._pruned import pruned_logsumexp_sums

#: the expansions between groups are used when the groups hold this many particles on average
CLUSTERED_FROM = 16


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

    def flow(self, x: Array, log_m: Array, shape: Array) -> tuple[Array, Array]:
        """(dx/dt, d shape/dt) at the particles x (n, 3) (normalized here) with log masses
        ``log_m`` (n,) and shapes (n, 3, k): X(x) and DX(x) shape - x <X, shape> (module
        docstring)."""
        self.evaluations += 1
        x = x / np.linalg.norm(x, axis=1, keepdims=True)
        ev, cov = self._averages(x, log_m)
        along = np.einsum("ij,ij->i", x, ev)
        velocity = ev - along[:, None] * x
        jac = np.einsum("nij,njk->nik", cov, shape)
        return velocity, _shape_rate(x, velocity, along, jac, shape)

    def _averages(self, x: Array, log_m: Array) -> tuple[Array, Array]:
        """(E_x[V y], beta Cov_x(V y, B y)) at every particle."""
        vy, by = x @ self.V.T, x @ self.B.T
        values = np.concatenate([vy, x, (vy[:, :, None] * by[:, None, :]).reshape(-1, 9)], 1)
        if self.beta_sigma == 0.0:  # beta = 0: the plain mass-weighted mean, the same at all x
            w = np.exp(log_m - log_m.max())
            mean = np.broadcast_to(w @ values / w.sum(), values.shape)
        else:
            q = self.model.kernel.query(x)  # beta B^T x: the logit is <q, y>
            starts = _grid_groups(x, group_width(self.beta_sigma))
            if len(starts) * CLUSTERED_FROM <= len(x):
                z, n, _, _ = clustered_logsumexp_sums(q, x, log_m, values, self.beta_sigma, starts)
            else:
                z, n, _, _ = pruned_logsumexp_sums(q, x, log_m, values)
            mean = n / z[:, None]
        ev, ey, evb = mean[:, :3], mean[:, 3:6], mean[:, 6:].reshape(-1, 3, 3)
        return ev, self.beta * (evb - ev[:, :, None] * (ey @ self.B.T)[:, None, :])



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
