"""Particle sums on the circle and the sphere with certified expansions between clusters.

At low temperature n particles gather in a few tight clusters, and the direct log-sum-exp sums
cost n^2 exponentials however tight they are: a target in a cluster sees all of it. Between a
group I of targets (centre c_I, q_I = beta B^T c_I) and a group J of sources (centre c_J), write
q_i = q_I + eps_i and y_j = c_J + delta_j. Then

    <q_i, y_j> = <q_i, c_J> + <q_I, delta_j> + <eps_i, delta_j>,

and only the last term couples i and j. With |eps_i| <= e_I and |delta_j| <= r_J it is at most
x = e_I r_J in size, and its exponential is the multinomial Taylor series

    e^{<eps, delta>} = sum_{|alpha| <= p} eps^alpha delta^alpha / alpha!  +  R_p,
    |R_p| <= x^{p+1} / (p+1)! e^x,

so that, all terms being positive, the truncated sum of the pair is within
x^{p+1} / (p+1)! e^{2x} of Z_IJ relative to it, and N_IJ within ||V|| times that of Z_IJ. The
order p is the smallest that makes this at most 2^-60 (``EXPANSION_TOLERANCE``); the sums of
the pair then cost C(p + d, d) (|I| + |J|) products instead of |I| |J| exponentials (d = 2 on
the circle, 3 on the sphere: the points and their offsets live in R^d):

    Z_iJ = e^{<q_i, c_J> + s_J} sum_alpha (eps_i^alpha / alpha!) M_alpha,
    M_alpha = sum_j e^{<q_I, delta_j> + log a_j - s_J} delta_j^alpha   (and with V y_j for N),

s_J the largest exponent of the moments (log domain: nothing overflows or is floored).
Groups are consecutive particles (on the circle in angle, on the sphere in the same cube of a
grid of R^3), narrow enough that x <= ``X_MAX`` for any pair. A pair is expanded where that
is cheaper than summing it, summed directly where not, and skipped where the bound of
:mod:`spheredens.interaction._pruned` proves it below 2^-60 of every row's sum. All together
the sums equal the direct ones to about 2^-59 of each row's Z (and N/Z to 2^-58 ||V||): the
same velocities to round-off (tests/test_particles.py::test_clustered_particle_sums_give_the_
direct_velocities, ::test_clustered_sums_on_the_sphere_give_the_direct_velocities).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from .._types import Array
from ._pruned import SourceBlocks

#: the truncation of every expanded pair, relative to the pair's sum
EXPANSION_TOLERANCE = 2.0**-60
#: the largest coupling x = e_I r_J the groups are built for (their angular width follows)
X_MAX = 0.5
#: the largest Taylor order tried; pairs that would need more are summed directly
P_MAX = 24
#: cost model (seconds): a directly summed pair, an expansion term per point, a pair's overhead
DIRECT_PAIR_COST = 8e-9
EXPANSION_TERM_COST = 2e-9
EXPANSION_OVERHEAD = 3e-5


def expansion_order(x: Array | float) -> NDArray[np.int64]:
    """The smallest order p with x^{p+1} / (p+1)! e^{2x} <= EXPANSION_TOLERANCE (module
    docstring), elementwise; P_MAX + 1 where no p <= P_MAX is enough."""
    x = np.asarray(x, dtype=float)
    p = np.arange(P_MAX + 1)
    with np.errstate(divide="ignore"):
        log_x = np.log(x)[..., None]
    log_bound = (p + 1) * log_x - np.cumsum(np.log(p + 1.0)) + 2.0 * x[..., None]
    ok = log_bound <= math.log(EXPANSION_TOLERANCE)
    return np.where(ok.any(axis=-1), ok.argmax(axis=-1), P_MAX + 1)


def n_terms(p: int, d: int = 2) -> int:
    """Number of multi-indices alpha in ``d`` dimensions with |alpha| <= p: C(p + d, d)."""
    return math.comb(p + d, d)


def _multi_indices(d: int) -> Array:
    """Every alpha in d dimensions with |alpha| <= P_MAX, ordered by |alpha|: (n_terms, d)."""
    out = [np.zeros((1, d), dtype=np.int64)]
    for k in range(1, P_MAX + 1):  # |alpha| = k: the next coordinate takes k - rest
        rows = [
            (k - sum(rest),) + rest for rest in np.ndindex(*([k + 1] * (d - 1))) if sum(rest) <= k
        ]
        out.append(np.array(sorted(rows, reverse=True), dtype=np.int64))
    return np.concatenate(out)


_LOG_FACT = np.concatenate([[0.0], np.cumsum(np.log(np.arange(1, P_MAX + 1)))])
#: the multi-indices and 1 / alpha! of the circle (d = 2, ambient) and of the sphere (d = 3)
_ALPHA = {d: _multi_indices(d) for d in (2, 3)}
_INV_FACT = {d: np.exp(-_LOG_FACT[a].sum(axis=1)) for d, a in _ALPHA.items()}


def monomials(v: Array, p: int, *, factorial: bool = False) -> Array:
    """v^alpha (or v^alpha / alpha!) for |alpha| <= p, columns ordered by |alpha|:
    (m, n_terms(p, d)) for points v of R^d, d = 2 or 3."""
    d = v.shape[1]
    k = n_terms(p, d)
    alpha = _ALPHA[d][:k]
    powers = np.arange(p + 1)
    out = np.ones((len(v), k))
    for c in range(d):
        out *= (v[:, c : c + 1] ** powers)[:, alpha[:, c]]
    return out * _INV_FACT[d][:k] if factorial else out


def _groups(x: Array, width: float) -> NDArray[np.int64]:
    """Start indices of the groups of ``x`` (ordered by angle, beginning after the largest gap):
    particles in the same bin of the given angular width."""
    phi = np.arctan2(x[:, 1], x[:, 0])
    rel = np.mod(phi - phi[0], 2.0 * np.pi)
    rel[0] = 0.0
    bins = np.floor(np.maximum.accumulate(rel) / width).astype(np.int64)
    return np.flatnonzero(np.diff(bins, prepend=-1))


def group_width(beta_sigma: float) -> float:
    """The diameter of the groups for beta sigma_max(B) = ``beta_sigma``: any two groups of it
    couple by x <= X_MAX."""
    return 2.0 * math.sqrt(X_MAX / beta_sigma)


def _grid_groups(x: Array, width: float) -> NDArray[np.int64]:
    """Start indices of the runs of consecutive points of R^3 in the same cube of side
    width / sqrt(3) (diameter ``width``)."""
    cell = np.floor((x + 1.0) * (math.sqrt(3.0) / width)).astype(np.int64)
    change = np.any(np.diff(cell, axis=0) != 0, axis=1)
    return np.flatnonzero(np.r_[True, change])


def circle_order(x: Array) -> NDArray[np.int64]:
    """An order of points on the circle by angle that begins after the largest gap."""
    phi = np.arctan2(x[:, 1], x[:, 0])
    order = np.argsort(phi, kind="stable")
    gaps = np.diff(phi[order], append=phi[order[0]] + 2.0 * np.pi)
    return np.roll(order, -(int(np.argmax(gaps)) + 1))


def sphere_order(x: Array, band: float | None = None) -> NDArray[np.int64]:
    """An order of points on S^2 in which consecutive points are close: latitude bands of height
    ``band`` (default 8 times the mean spacing sqrt(4 pi / n)), each by longitude, alternately
    east- and westward (so a band's end meets the next band's start)."""
    n = len(x)
    band = 8.0 * math.sqrt(4.0 * math.pi / max(n, 1)) if band is None else float(band)
    ring = np.floor((np.arcsin(np.clip(x[:, 2], -1.0, 1.0)) + 0.5 * math.pi) / band).astype(
        np.int64
    )
    lon = np.arctan2(x[:, 1], x[:, 0])
    return np.lexsort((np.where(ring % 2 == 0, lon, -lon), ring))


def clustered_logsumexp_sums(
    q: Array,
    x: Array,
    log_a: Array,
    vy: Array,
    beta_sigma: float,
    starts: Array | None = None,
) -> tuple[Array, Array, Array, dict]:
    """(Z e^-M, N e^-M, M) of :func:`~spheredens.interaction.logsumexp_sums` for particles
    ``x`` (n, 2) on the circle, ordered by :func:`circle_order`, or (n, 3) on the sphere, that
    are both the targets (``q`` = beta B^T x) and the sources (log weights ``log_a``, V y in
    ``vy``); ``beta_sigma`` is beta sigma_max(B). The groups are consecutive particles within
    :func:`group_width` of each other: given as their ``starts``, or found (the circle: bins of
    angle; the sphere: runs of consecutive particles in the same cube of a grid of R^3, so order
    them so that neighbours are consecutive). Pairs of groups are expanded, summed or skipped as
    the module docstring says. Returns also counts: the fractions of pairs summed directly and
    expanded. The sums are right for any groups; narrow groups make them cheap."""
    n, d = len(x), vy.shape[1]
    width = group_width(beta_sigma)
    if starts is None:
        starts = _groups(x, width) if x.shape[1] == 2 else _grid_groups(x, width)
    blocks = SourceBlocks(x, starts=starts)
    size = np.diff(np.append(starts, n))
    g_of = blocks.block
    centre = blocks.centres
    upper, lower = blocks.bounds(q, np.linalg.norm(q, axis=1), x, log_a)
    keep = upper >= lower[:, None] + blocks.log_cut  # (targets, groups)
    needed_pairs = np.logical_or.reduceat(keep, starts, axis=0)  # (target groups, groups)
    z, num, m = np.zeros(n), np.zeros((n, d)), np.full(n, -np.inf)
    stats = {"direct": 0.0, "expanded": 0.0}
    delta = x - centre[g_of]
    radius = blocks.radius
    # the target side: eps_i = q_i - q_I (any q_I will do; the group's mean keeps e_I small)
    q_centre = np.add.reduceat(q, starts, axis=0) / size[:, None]
    eps = q - q_centre[g_of]
    e_group = np.sqrt(np.maximum.reduceat(np.sum(eps * eps, axis=1), starts))
    # every pair's order, number of terms and the cheaper way to sum it (module docstring)
    orders = expansion_order(e_group[:, None] * radius[None, :])
    dim = x.shape[1]
    terms = np.ones_like(orders)  # C(p + d, d), elementwise, exact in integers
    for k in range(1, dim + 1):
        terms = terms * (np.minimum(orders, P_MAX) + k) // k
    pair_size = size[:, None] * size[None, :]
    cost_expand = EXPANSION_TERM_COST * terms * (size[:, None] + size[None, :]) + EXPANSION_OVERHEAD
    expand_pairs = needed_pairs & (orders <= P_MAX) & (cost_expand < DIRECT_PAIR_COST * pair_size)
    direct_pairs = needed_pairs & ~expand_pairs
    stats["direct"] = float(np.sum(direct_pairs * pair_size))
    stats["expanded"] = float(np.sum(expand_pairs * pair_size))
    source_terms: dict[int, Array] = {}
    weights = np.column_stack([np.ones(n), vy])
    for gi, (s, k) in enumerate(zip(starts, size)):
        if not needed_pairs[gi].any():
            continue
        rows = slice(s, s + k)
        q_i, ref, q_I, eps_i = q[rows], lower[rows], q_centre[gi], eps[rows]
        needed = np.flatnonzero(needed_pairs[gi])
        order = orders[gi, needed]
        expand = expand_pairs[gi, needed]
        direct = needed[~expand]
        # parts of each row's sums: (log offset relative to the row's reference ``ref``, Z, N)
        offsets, parts_z, parts_n = [], [], []
        if direct.size:
            cols = np.flatnonzero(np.repeat(direct_pairs[gi], size))
            g = q_i @ x[cols].T
            g += log_a[cols][None, :]
            top = g.max(axis=1)
            g -= top[:, None]
            np.exp(g, out=g)
            offsets.append(top - ref)
            parts_z.append(g.sum(axis=1))
            parts_n.append(g @ vy[cols])
        if expand.any():
            groups = needed[expand]
            p_max = int(order[expand].max())
            e_mono = monomials(eps_i, p_max, factorial=True)
            # <q_i, c_J> to twice the working precision: a rounding error of |q| 2^-53 shared by
            # a whole group would weigh the groups against each other wrongly by that much
            hi, lo = two_dot(q_i, centre[groups])
            hi -= ref[:, None]  # exact for the groups that matter (Sterbenz)
            for jj, (gj, p) in enumerate(zip(groups, order[expand])):
                t = n_terms(int(p), dim)
                src = slice(starts[gj], starts[gj] + size[gj])
                key = int(gj)
                if key not in source_terms or source_terms[key].shape[1] < t:
                    source_terms[key] = monomials(delta[src], p_max)
                expo = delta[src] @ q_I + log_a[src]
                s_J = float(expo.max())
                w = np.exp(expo - s_J)
                moments = source_terms[key][:, :t].T @ (weights[src] * w[:, None])  # (t, 1 + d)
                part = e_mono[:, :t] @ moments
                offsets.append(hi[:, jj] + s_J + lo[:, jj])
                parts_z.append(part[:, 0])
                parts_n.append(part[:, 1:])
        top = np.max(offsets, axis=0)
        scale = [np.exp(o - top) for o in offsets]
        z[rows] = sum(sc * pz for sc, pz in zip(scale, parts_z))
        num[rows] = sum(sc[:, None] * pn for sc, pn in zip(scale, parts_n))
        m[rows] = ref + top
    stats = {key: value / (n * n) for key, value in stats.items()}
    stats["groups"] = len(starts)
    return z, num, m, stats


def _two_product(a: Array, b: Array) -> tuple[Array, Array]:
    """a b = p + e exactly (Dekker's product with Veltkamp's splitting)."""
    p = a * b
    split = 134217729.0  # 2^27 + 1
    ca, cb = split * a, split * b
    a_hi, b_hi = ca - (ca - a), cb - (cb - b)
    a_lo, b_lo = a - a_hi, b - b_hi
    return p, ((a_hi * b_hi - p) + a_hi * b_lo + a_lo * b_hi) + a_lo * b_lo


def two_dot(u: Array, v: Array) -> tuple[Array, Array]:
    """(hi, lo) with hi + lo = u @ v.T to about twice the working precision, for vectors of any
    dimension (Ogita, Rump and Oishi's Dot2: exact products, error-free sums)."""
    hi, lo = _two_product(u[:, :1], v[:, 0][None, :])
    for c in range(1, u.shape[1]):
        p, e = _two_product(u[:, c : c + 1], v[:, c][None, :])
        total = hi + p
        bb = total - hi
        lo = lo + ((hi - (total - bb)) + (p - bb)) + e
        hi = total
    return hi, lo
