"""Direct quadrature of the attention integrals, stable for any beta (log-sum-exp)."""

from __future__ import annotations

import numpy as np

from .._types import Array
from ._base import Evaluator, PointsEvaluator, register_evaluator

#: below this value of the rescaled partition function a row is recomputed in log-sum-exp form
_UNDERFLOW_GUARD = 1e-200
#: largest number of kernel entries (targets x sources) kept in memory between calls
_MAX_CACHED = 1 << 25
#: rows per chunk when kernel entries are formed on the fly
_CHUNK_ENTRIES = 1 << 22


@register_evaluator
class DirectQuadrature(PointsEvaluator):
    """Velocity by direct quadrature over the source points, for any Q, K, V and beta.

    For target x_f and sources y_j with quadrature weights w_j,

        Z(x_f) = sum_j exp(L_fj) rho_j w_j,   N(x_f) = sum_j exp(L_fj) V y_j rho_j w_j,
        L_fj = beta <B^T x_f, y_j>,

    and the velocity is P_x N/Z (``sa``) or P_x N (``usa``).

    Notes
    -----
    The kernel rows are stored rescaled, E_fj = exp(L_fj - max_j L_fj) in [0, 1], and the
    weighted density as s_j = rho_j w_j / max(rho w), so Z and N are matrix products of
    numbers in [0, 1]. When a rescaled Z falls below 1e-200 (the mass seen by x_f is so small
    that terms could underflow), that row is recomputed in log-sum-exp form,
    exp(L_fj + log(rho_j w_j) - M_f), which is exact in floating point for any beta and for
    densities down to the smallest normal numbers. N/Z is a convex combination of the V y_j;
    its norm is clipped to ||V||_2 to remove round-off excursions beyond that bound.

    Parameters
    ----------
    model : Model
    sources : ndarray (n_s, d)
        Quadrature points y_j (unit vectors).
    weight : ndarray (n_s,)
        Quadrature weights w_j.
    targets : ndarray (n_t, d)
        Points x_f where the velocity is wanted.
    max_cached : int
        Keep the rescaled kernel (n_t * n_s entries) in memory when it has at most this many
        entries; otherwise it is formed chunk by chunk on every call.
    """

    name = "direct"
    domains = None  # any S^{d-1}
    inputs = ("values",)
    priority = 90

    description = "direct quadrature with log-sum-exp: any Q, K, V, beta <= 1e4"

    def setup(self, *, max_cached: int = _MAX_CACHED) -> None:
        model = self.model
        self._beta_bx = model.kernel.query(self.targets)  # row f: beta * (B^T x_f)
        self._vy = self.sources @ model.V.T  # row j: V y_j
        n_t, n_s = len(self.targets), len(self.sources)
        self._rowmax: Array | None = None
        self._kernel: Array | None = None
        if n_t * n_s <= max_cached:
            logits = self._beta_bx @ self.sources.T
            self._rowmax = logits.max(axis=1)
            self._kernel = np.exp(logits - self._rowmax[:, None])
        self._chunk = max(1, _CHUNK_ENTRIES // max(n_s, 1))

    # -- pieces -------------------------------------------------------------------------
    def _kernel_products(self, rows: Array | None, scaled: Array) -> tuple[Array, Array]:
        """(E @ scaled) and the row log-scales max_j L_fj, for all targets or for ``rows``."""
        if self._kernel is not None and self._rowmax is not None:
            if rows is None:  # no fancy indexing: it would copy the whole kernel
                return self._kernel @ scaled, self._rowmax
            return self._kernel[rows] @ scaled, self._rowmax[rows]
        idx = np.arange(len(self.targets)) if rows is None else rows
        outs, maxima = [], []
        for start in range(0, len(idx), self._chunk):
            logits = self._beta_bx[idx[start : start + self._chunk]] @ self.sources.T
            rowmax = logits.max(axis=1)
            outs.append(np.exp(logits - rowmax[:, None]) @ scaled)
            maxima.append(rowmax)
        return np.concatenate(outs), np.concatenate(maxima)

    def _logsumexp_rows(self, rows: Array, a: Array) -> tuple[Array, Array, Array]:
        """Z and N for target rows in log-sum-exp form, with their common log-scale M."""
        with np.errstate(divide="ignore"):
            log_a = np.log(a)
        return logsumexp_sums(self._beta_bx[rows], self.sources, log_a, self._vy, chunk=self._chunk)

    def attention_average(self, rho: Array, rows: Array | None = None) -> Array:
        """N/Z (``sa``) or N (``usa``) at the targets, for one density.

        Parameters
        ----------
        rho : ndarray (n_s,)
            Non-negative density values at the sources.
        rows : ndarray of int, optional
            Compute only these targets (all by default).

        Returns
        -------
        ndarray (n_rows, d)
        """
        a = np.asarray(rho, dtype=float) * self.weight
        a = np.where(a > 0.0, a, 0.0)
        a_max = float(a.max())
        rows = None if rows is None else np.asarray(rows)
        d = self.sources.shape[1]
        if a_max == 0.0:
            return np.zeros((len(self.targets) if rows is None else len(rows), d))
        scaled = np.empty((len(a), 1 + d))
        scaled[:, 0] = a / a_max
        scaled[:, 1:] = scaled[:, :1] * self._vy
        out, rowmax = self._kernel_products(rows, scaled)
        z, n = out[:, 0], out[:, 1:]
        logscale = rowmax + np.log(a_max)
        small = np.flatnonzero(z < _UNDERFLOW_GUARD)
        if small.size:
            targets = small if rows is None else rows[small]
            z[small], n[small], logscale[small] = self._logsumexp_rows(targets, a)
        if self.model.kind.normalized:
            return clip_norm(n / z[:, None], self._v_norm)
        with np.errstate(over="ignore", invalid="ignore"):  # usa at large beta: inf, caught later
            return n * np.exp(logscale)[:, None]

    vectors = Evaluator.projected_averages  # X = P_x (N/Z or N) of each slice at the targets


def logsumexp_sums(
    beta_bx: Array, sources: Array, log_a: Array, vy: Array, *, chunk: int | None = None
) -> tuple[Array, Array, Array]:
    """Attention sums in log-sum-exp form for targets given by beta B^T x (rows of ``beta_bx``).

    With logits g_fj = <beta B^T x_f, y_j> + log a_j and M_f = max_j g_fj, returns
    (Z_f e^{-M_f}, N_f e^{-M_f}, M_f) where Z_f = sum_j e^{g_fj}, N_f = sum_j e^{g_fj} V y_j.
    Terms with a_j = 0 (log a_j = -inf) drop out. Rows are processed ``chunk`` at a time.
    """
    n_t = len(beta_bx)
    step = chunk or max(1, _CHUNK_ENTRIES // max(len(sources), 1))
    zs, ns, ms = [], [], []
    for start in range(0, n_t, step):
        g = beta_bx[start : start + step] @ sources.T
        g += log_a[None, :]
        m = g.max(axis=1)
        g -= m[:, None]
        np.exp(g, out=g)  # in place: the n^2 block is the whole cost
        zs.append(g.sum(axis=1))
        ns.append(g @ vy)
        ms.append(m)
    if not zs:
        return np.zeros(0), np.zeros((0, vy.shape[1])), np.zeros(0)
    return np.concatenate(zs), np.concatenate(ns), np.concatenate(ms)


def clip_norm(u: Array, bound: float) -> Array:
    """Scale rows of u whose Euclidean norm exceeds ``bound`` back onto the ball of radius bound."""
    norm = np.linalg.norm(u, axis=-1, keepdims=True)
    factor = np.where(norm > bound, bound / np.where(norm > 0, norm, 1.0), 1.0)
    return u * factor
