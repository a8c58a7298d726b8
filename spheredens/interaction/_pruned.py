"""Direct quadrature in the log domain with certified pruning of source blocks.

At low temperature (beta >= 1000) a target x sees almost nothing of most of the domain: the
weight of y is exp(<q(x), y>) a(y) with q(x) = beta B^T x, and away from the direction of q(x)
it is below the round-off of the row's sum by hundreds of orders of magnitude. Summing those
terms is most of the O(n^2) cost. This evaluator skips a block J of sources for a target x only
when a bound proves that the whole block cannot change the row's sums beyond round-off:

    upper(x, J) = <q, c_J> + |q| r_J + max_{j in J} log a_j + log |J|
                >= log sum_{j in J} e^{<q, y_j>} a_j,
    lower(x)    = max_J ( <q, y_J*> + log a_J* )   <=   log sum_j e^{<q, y_j>} a_j,

with c_J the unit mean direction of the block, r_J = max_j |y_j - c_J| (so that
|<q, y_j> - <q, c_J>| <= |q| r_J) and y_J* the source of largest mass a_J* in the block. A
block is skipped when upper(x, J) < lower(x) + log(2^-60 / m),
m the number of blocks: all skipped blocks together are below 2^-60 ~ 8.7e-19 of the row's sum
Z(x), and change N/Z by less than 2 ||V|| 2^-60. What is summed is summed exactly as by
:class:`~spheredens.interaction.DirectQuadrature`'s log-sum-exp form, for any beta and for
densities down to the smallest normal numbers; nothing small is floored.
"""

from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterator, TypeVar

import numpy as np
from numpy.typing import NDArray

from .._types import Array
from ..geometry import tangent_project
from ..models import Model
from ._base import Layout, register_evaluator
from ._interpolant import log_bincount
from ._quadrature import _MAX_CACHED, DirectQuadrature, clip_norm

T = TypeVar("T")

#: all skipped blocks of a row together weigh less than this fraction of the row's sum
PRUNE_FRACTION = 2.0**-60
#: sources per block, and targets per block of rows computed together (each block of rows sums
#: the union of its rows' kept blocks: 64 rows instead of 256 sum 0.30 s instead of 0.43 s at
#: 22 465 particles of the two atoms at beta = 300, 4.2 ms instead of 7.4 ms on a circle mesh
#: of 4096 cells at beta = 1e4)
SOURCE_BLOCK = 16
TARGET_BLOCK = 64
#: rows x blocks of the bounds of :func:`pruned_logsumexp_sums` in one chunk (8 bytes each)
BOUND_ENTRIES = 1 << 22


def _default_threads() -> int:
    """``SPHEREDENS_THREADS`` if set, else ``OMP_NUM_THREADS`` if set (one thread where BLAS and
    OpenMP were told one: sweep workers, benchmarks), else the CPUs this process may use."""
    for name in ("SPHEREDENS_THREADS", "OMP_NUM_THREADS"):
        value = os.environ.get(name, "").strip()
        if value.isdigit():
            return max(1, int(value))
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


#: threads that sum chunks of rows at once (numpy's products and exponentials release the
#: GIL); the chunks and the sums do not depend on it: any number gives the same numbers
THREADS = _default_threads()


def map_chunks(work: Callable[[int], T], starts: range) -> list[T]:
    """``[work(s) for s in starts]``, on :data:`THREADS` threads where there is more than one
    chunk (the order of the results is that of ``starts``)."""
    if THREADS == 1 or len(starts) < 2:
        return [work(s) for s in starts]
    with ThreadPoolExecutor(min(THREADS, len(starts))) as pool:
        return list(pool.map(work, starts))


class SourceBlocks:
    """Blocks of consecutive sources with their unit mean directions c_J and radii r_J
    (module docstring); ``extra`` (per source) widens the radii (a centroid that may move).
    ``starts`` gives blocks of any sizes (their first indices) instead of ``block`` each."""

    def __init__(
        self,
        sources: Array,
        block: int = SOURCE_BLOCK,
        extra: Array | float = 0.0,
        *,
        starts: NDArray[np.int64] | None = None,
        fraction: float = PRUNE_FRACTION,
    ) -> None:
        n_s = len(sources)
        self.starts = np.arange(0, n_s, block) if starts is None else np.asarray(starts)
        mean = np.add.reduceat(sources, self.starts, axis=0)
        norm = np.linalg.norm(mean, axis=1, keepdims=True)
        self.centres = mean / np.where(norm > 0.0, norm, 1.0)
        self.block = np.repeat(np.arange(len(self.starts)), np.diff(np.append(self.starts, n_s)))
        chord = np.linalg.norm(sources - self.centres[self.block], axis=1) + extra
        self.radius = np.maximum.reduceat(chord, self.starts) * (1.0 + 1e-12) + 1e-15
        self.log_size = np.log(np.diff(np.append(self.starts, n_s)).astype(float))
        self.log_cut = math.log(fraction / len(self.starts))

    def heaviest_sources(self, log_a: Array, block_log_a: Array) -> NDArray[np.int64]:
        """The index of each block's first source of largest log mass (``block_log_a``, the
        blocks' maxima of ``log_a``)."""
        index = np.where(log_a == block_log_a[self.block], np.arange(len(log_a)), len(log_a))
        return np.minimum.reduceat(index, self.starts)

    def bounds(self, q: Array, q_norm: Array, sources: Array, log_a: Array) -> tuple[Array, Array]:
        """(upper (targets, blocks), lower (targets,)) of the module docstring for logits
        <q_f, y_j> + log a_j. Each is one product of (q, |q|, 1) with a table per block (so no
        (targets, blocks) temporaries beyond the result)."""
        block_log_a = np.maximum.reduceat(log_a, self.starts)
        # one term per block exactly, the source of largest mass: a lower bound of the row's sum
        heaviest = self.heaviest_sources(log_a, block_log_a)
        rows = np.column_stack([q, q_norm, np.ones(len(q))])
        zero = np.zeros(len(heaviest))
        lower = np.max(rows @ np.column_stack([sources[heaviest], zero, log_a[heaviest]]).T, axis=1)
        upper = rows @ np.column_stack([self.centres, self.radius, block_log_a + self.log_size]).T
        return upper, lower

    def kept_chunks(
        self, keep: Array, target_block: int = TARGET_BLOCK
    ) -> Iterator[tuple[slice, NDArray[np.int64]]]:
        """(rows, sources) for each block of ``target_block`` rows of ``keep`` (rows x blocks):
        the sources of the union of the blocks its rows keep."""
        for start in range(0, len(keep), target_block):
            rows = slice(start, start + target_block)
            yield rows, np.flatnonzero(keep[rows].any(axis=0)[self.block])

    def kept_sums(
        self,
        q: Array,
        keep: Array,
        sources: Array,
        log_a: Array,
        vy: Array,
        target_block: int = TARGET_BLOCK,
    ) -> tuple[Array, Array, Array]:
        """(Z e^-M, N e^-M, M) as :func:`~spheredens.interaction.logsumexp_sums`, over the
        sources of the kept blocks only (for each block of targets, the union of its rows')."""
        n_t, d = len(q), vy.shape[1]
        z, n, m = np.empty(n_t), np.empty((n_t, d)), np.empty(n_t)
        # (q, 1) . (y, log a) is the logit; (1, V y) gives Z and N in one product
        q_one = np.column_stack([q, np.ones(n_t)])
        y_log_a = np.column_stack([sources, log_a])
        one_vy = np.column_stack([np.ones(len(vy)), vy])
        for rows_i, cols in self.kept_chunks(keep, target_block):
            if cols.size == 0:  # every block below 2^-60 of a larger sum (``log_lower``)
                z[rows_i], n[rows_i], m[rows_i] = 0.0, 0.0, -np.inf
                continue
            g = q_one[rows_i] @ y_log_a[cols].T
            m[rows_i] = g.max(axis=1)
            g -= m[rows_i, None]
            np.exp(g, out=g)
            zn = g @ one_vy[cols]
            z[rows_i], n[rows_i] = zn[:, 0], zn[:, 1:]
        return z, n, m


#: the sums over the kept blocks of a chunk of rows: (blocks, q of the rows, keep) -> (Z, N, M)
KeptSums = Callable[[SourceBlocks, Array, Array], tuple[Array, Array, Array]]


def pruned_logsumexp_sums(
    q: Array,
    sources: Array,
    log_a: Array,
    vy: Array,
    *,
    source_block: int = SOURCE_BLOCK,
    log_lower: Array | None = None,
    extra: Array | float = 0.0,
    kept: KeptSums | None = None,
    fraction: float = PRUNE_FRACTION,
) -> tuple[Array, Array, Array, float]:
    """:func:`~spheredens.interaction.logsumexp_sums` with the certified pruning of the module
    docstring, for sources that move (particles): the blocks are built from ``sources`` at each
    call. Sources (and targets) ordered so that consecutive ones are close make it cheap; any
    order gives the same sums (to 2^-60 of each row's). Returns (Z e^-M, N e^-M, M, the
    fraction of pairs summed). The bounds are formed for :data:`BOUND_ENTRIES` rows x blocks
    at a time (whole blocks of :data:`TARGET_BLOCK` rows: the same sums as all at once), the
    chunks on :data:`THREADS` threads (:func:`map_chunks`).

    ``log_lower`` (per row) is a lower bound of the log of a larger sum these sources are part
    of (the rest summed elsewhere): blocks are then skipped below 2^-60 of that sum, and a row
    with nothing left returns (0, 0, -inf).

    ``extra`` (per source, or one number) widens the blocks' radii, and ``kept`` replaces the
    sums over the kept blocks (:meth:`SourceBlocks.kept_sums`, called as
    ``kept(blocks, q, keep)``): for sums whose pair logits exceed <q, y_j> + log a_j by at most
    |q| extra_j (and never fall below it), e.g. sources that are small cells, not points.
    ``fraction`` replaces :data:`PRUNE_FRACTION` as the weight all skipped blocks of a row stay
    below."""
    n_t = len(q)
    if n_t == 0:
        return np.zeros(0), np.zeros((0, vy.shape[1])), np.zeros(0), 0.0
    blocks = SourceBlocks(sources, source_block, extra, fraction=fraction)
    if kept is None:

        def kept(b: SourceBlocks, q_rows: Array, keep: Array) -> tuple[Array, Array, Array]:
            return b.kept_sums(q_rows, keep, sources, log_a, vy)

    step = TARGET_BLOCK * max(1, BOUND_ENTRIES // (len(blocks.starts) * TARGET_BLOCK))
    q_norm = np.linalg.norm(q, axis=1)
    sizes = np.exp(blocks.log_size)

    def chunk(start: int) -> tuple[tuple[Array, Array, Array], float]:
        rows = slice(start, start + step)
        upper, lower = blocks.bounds(q[rows], q_norm[rows], sources, log_a)
        if log_lower is not None:
            lower = np.maximum(lower, log_lower[rows])
        keep = upper >= lower[:, None] + blocks.log_cut
        return kept(blocks, q[rows], keep), float(keep.sum(axis=0) @ sizes)

    done = map_chunks(chunk, range(0, n_t, step))
    parts, summed = [d[0] for d in done], sum(d[1] for d in done)
    z, n, m = (np.concatenate(p) for p in zip(*parts))
    return z, n, m, summed / (n_t * len(log_a))


#: the source tree of :func:`tree_logsumexp_sums`: sources per leaf, children per block, and
#: rows that sum the union of their kept leaves together (measured on the hybrid's 74 346 face
#: midpoints against 19 787 cells at beta = 1000, late on the plateau: 3.4 s against 9.1-11.3 s
#: for :func:`pruned_logsumexp_sums`, 876 sources summed per row against 2174; the rows need
#: 174)
TREE_LEAF = 8
TREE_FAN = 8
TREE_ROWS = 64


def z_order(points: Array, bits: int | None = None) -> NDArray[np.int64]:
    """Indices that sort the unit vectors ``points`` (n, d) along the Z-order (Morton) curve of
    the cube [-1, 1]^d: consecutive points are close at every scale (a run of 8^k consecutive
    points of a dense set in d = 3 fills about one cube of the curve's k-th coarser level)."""
    points = np.asarray(points, dtype=float)
    d = points.shape[1]
    bits = bits or 62 // d
    k = np.floor((np.clip(points, -1.0, 1.0) + 1.0) * (0.5 * (2**bits - 1))).astype(np.int64)
    code = np.zeros(len(points), dtype=np.int64)
    for b in range(bits):
        for j in range(d):
            code |= ((k[:, j] >> b) & 1) << (d * b + j)
    return np.argsort(code, kind="stable")


class _TreeLevel(SourceBlocks):
    """One level of :func:`tree_logsumexp_sums`' tree: blocks of ``size`` consecutive sources
    (Z-ordered) with their unit mean directions c_J and chord radii r_J (:class:`SourceBlocks`),
    the log of each block's total mass log A_J, its heaviest source (for the lower bound) and
    the level's cut log(``fraction`` / blocks), ``fraction`` the level's share."""

    def __init__(self, y: Array, log_a: Array, size: int, fraction: float) -> None:
        super().__init__(y, size, fraction=fraction)
        self.log_mass = log_bincount(self.block, log_a, len(self.starts))
        heaviest = self.heaviest_sources(log_a, np.maximum.reduceat(log_a, self.starts))
        self.heaviest = np.column_stack([y[heaviest], log_a[heaviest]]).T.copy()

    def upper(self, q: Array, q_norm2: Array, blocks: Array) -> Array:
        """Upper bounds of log sum_{j in J} e^{<q, y_j>} a_j, rows x ``blocks``:
        <q, c> + min(|P_c q| r + max(0, -<q, c>) r^2 / 2, |q| r) + log A_J (docstring of
        :func:`tree_logsumexp_sums`)."""
        r = self.radius[blocks]
        u = q @ self.centres[blocks].T
        across = np.sqrt(np.maximum(q_norm2[:, None] - u * u, 0.0)) * r
        across += np.maximum(-u, 0.0) * (0.5 * r * r)
        # |q| r bounds it too (a little tighter behind the block, <q, c> < 0)
        np.minimum(across, np.sqrt(q_norm2)[:, None] * r, out=across)
        return u + across + self.log_mass[blocks]


def tree_logsumexp_sums(
    q: Array,
    sources: Array,
    log_a: Array,
    vy: Array,
    *,
    log_lower: Array | None = None,
    fraction: float = PRUNE_FRACTION,
    leaf: int = TREE_LEAF,
    fan: int = TREE_FAN,
    rows: int = TREE_ROWS,
) -> tuple[Array, Array, Array, float]:
    """:func:`pruned_logsumexp_sums` (the same returns, the same certificate: the sources a row
    skips weigh less than ``fraction`` of its sum, or of e^``log_lower``) with the sources in a
    tree, for sums where each row sees a small part of many sources (low temperature, deep
    tails). Sources in any order, any number.

    The sources are sorted along a Z-order curve (:func:`z_order`) and grouped into blocks of
    ``leaf`` sources, ``leaf * fan``, ``leaf * fan^2``, ... (L levels; each block the union of
    ``fan`` blocks of the next finer level). A block J with unit mean direction c, chord radius
    r (every y_j in J has |y_j - c| <= r) and total mass A_J is bounded, for a row with query
    q, by

        log sum_{j in J} e^{<q, y_j>} a_j <= <q, c> + |P_c q| r + max(0, -<q, c>) r^2 / 2 + log A_J,

    P_c q = q - <q, c> c: for a unit y with |y - c| <= r, y = <c, y> c + t with t orthogonal
    to c, |t| <= |y - c| <= r and 1 - r^2 / 2 <= <c, y> <= 1. Only the part of q across the
    block costs slack, so near the row's maximum (where P_c q is small) the bound is tight,
    unlike |q| r (:class:`SourceBlocks`). From the coarsest level down, a row drops a block
    whose bound is below lower + log(fraction / (L m_l)), m_l the level's number of blocks and
    lower the largest exact logit <q, y*> + log a* of the heaviest source of every block visited
    so far (or ``log_lower``): at most fraction Z in all. The children of the blocks a row keeps
    are visited next. Rows are taken ``rows`` at a time in the Z-order of q / |q|, and each such
    group sums exactly (log-sum-exp) the union of the leaves its rows keep; the groups run on
    :data:`THREADS` threads. Returns (Z e^-M, N e^-M, M, the fraction of pairs summed)."""
    q = np.asarray(q, dtype=float)
    n_t, n_s, d = len(q), len(sources), vy.shape[1]
    if n_t == 0 or n_s == 0:
        return np.zeros(n_t), np.zeros((n_t, d)), np.full(n_t, -np.inf), 0.0
    order = z_order(sources)
    y, log_a, vy = sources[order], np.asarray(log_a, dtype=float)[order], vy[order]
    sizes = [leaf]
    while sizes[-1] * fan < n_s:
        sizes.append(sizes[-1] * fan)
    levels = [_TreeLevel(y, log_a, s, fraction / len(sizes)) for s in reversed(sizes)]
    leaves = levels[-1].starts
    ends = np.append(leaves[1:], n_s)
    q_norm2 = np.einsum("ij,ij->i", q, q)
    row_order = z_order(q / np.sqrt(np.where(q_norm2 > 0.0, q_norm2, 1.0))[:, None])
    q_one = np.column_stack([q, np.ones(n_t)])[row_order]
    lower_all = np.full(n_t, -np.inf) if log_lower is None else np.asarray(log_lower)[row_order]
    y_log_a = np.column_stack([y, log_a])
    one_vy = np.column_stack([np.ones(n_s), vy])

    def group(start: int) -> tuple[Array, Array, Array, int]:
        sel = slice(start, min(start + rows, n_t))
        q1 = q_one[sel]
        qq, qn2 = q1[:, :-1], q_norm2[row_order[sel]]
        lower = lower_all[sel].copy()
        blocks = np.arange(len(levels[0].starts))
        kept = np.ones((len(qq), blocks.size), dtype=bool)
        for i, level in enumerate(levels):
            if i:
                children = (blocks[:, None] * fan + np.arange(fan)).ravel()
                real = children < len(level.starts)
                blocks, kept = children[real], np.repeat(kept, fan, axis=1)[:, real]
            lower = np.maximum(lower, (q1 @ level.heaviest[:, blocks]).max(axis=1))
            kept &= level.upper(qq, qn2, blocks) >= (lower + level.log_cut)[:, None]
            visit = kept.any(axis=0)
            blocks, kept = blocks[visit], kept[:, visit]
            if blocks.size == 0:
                n_rows = len(qq)
                return np.zeros(n_rows), np.zeros((n_rows, d)), np.full(n_rows, -np.inf), 0
        size = ends[blocks] - leaves[blocks]
        cols = np.repeat(leaves[blocks] - np.cumsum(size) + size, size) + np.arange(size.sum())
        g = q1 @ y_log_a[cols].T
        m = g.max(axis=1)
        g -= m[:, None]
        np.exp(g, out=g)
        zn = g @ one_vy[cols]
        return zn[:, 0], zn[:, 1:], m, len(qq) * cols.size

    done = map_chunks(group, range(0, n_t, rows))
    back = np.empty(n_t, dtype=np.int64)
    back[row_order] = np.arange(n_t)
    z, n, m = (np.concatenate([g[k] for g in done])[back] for k in range(3))
    return z, n, m, sum(g[3] for g in done) / (n_t * n_s)


@register_evaluator
class PrunedDirectQuadrature(DirectQuadrature):
    """Direct log-sum-exp quadrature that skips source blocks certified negligible (module
    docstring): equal to :class:`DirectQuadrature` to round-off (2^-60 of each row's sum),
    at a cost that falls with the kernel's width at large beta. Where the direct sums with their
    cached kernel are cheaper (few rows that need log-sum-exp), it sums as
    :class:`DirectQuadrature` does (the same numbers). Sources should be ordered so
    that consecutive ones are close (every grid of spheredens is).

    With a layout of ``"log_moments"`` a slice of the state is (ell, c): ell_j = log rho_j of
    the cell of source j and c_j the offset of the cell's centroid from y_j, in cell widths w_j
    along the grid's tangent t_j. The source is then the centroid, y_j cos(c_j w_j) +
    t_j sin(c_j w_j) (block radii grow by w_j / 2 to keep the bound), and the sums take
    log a_j = ell_j + log w_j as they are: densities far below the smallest float64 number
    (e^-1460) keep their weight in the softmax."""

    name = "direct_pruned"
    domains = None
    inputs = ("values", "log_moments")
    priority = 95

    description = (
        "direct quadrature in the log domain, skipping source blocks proven below "
        "2^-60 of each row's sum (any Q, K, V, beta <= 1e4)"
    )

    @classmethod
    def build(cls, model: Model, layout: Layout) -> "PrunedDirectQuadrature":
        moments = layout.inputs == "log_moments"
        return cls(
            model,
            layout.sources.points,
            layout.sources.weight,
            layout.target_points,
            tangents=layout.sources.tangents if moments else None,
        )

    def setup(
        self,
        *,
        source_block: int = SOURCE_BLOCK,
        target_block: int = TARGET_BLOCK,
        max_cached: int = _MAX_CACHED,
        tangents: Array | None = None,
    ) -> None:
        #: with tangents, the state is (log rho, centroid offset) per source (class docstring)
        self.tangents = None if tangents is None else np.asarray(tangents, dtype=float)
        # the cached kernel serves densities at fixed points only
        super().setup(max_cached=max_cached if tangents is None else 0)
        # a centroid moves at most half a cell from y_j
        self._blocks = SourceBlocks(
            self.sources, source_block, 0.5 * self.weight if self.tangents is not None else 0.0
        )
        self._qnorm = np.linalg.norm(self._beta_bx, axis=1)
        self._log_cut = self._blocks.log_cut
        self._target_block = target_block
        #: fraction of (target, source) pairs summed at the last call
        self.kept_fraction = 1.0

    def _fallback_fraction(self, upper: Array, a: Array) -> float:
        """The share of rows whose sums :class:`DirectQuadrature` must redo in log-sum-exp form
        (its rescaled Z below 1e-200), bounded from below through ``upper``: where that share
        exceeds the fraction of pairs kept, summing only the kept pairs is the cheaper way."""
        log_z_max = upper.max(axis=1) + math.log(upper.shape[1])
        rescaled = log_z_max - self._rowmax - math.log(float(a.max()))
        return float(np.mean(rescaled < math.log(1e-200)))

    def attention_average(self, rho: Array, rows: Array | None = None) -> Array:
        """N/Z (``sa``) or N (``usa``) at the targets, for one density (module docstring); with
        ``log_inputs``, ``rho`` is log rho."""
        n_t, d = len(self.targets), self.sources.shape[1]
        if self.tangents is not None:
            ell, offset = np.asarray(rho, dtype=float)
            angle = (offset * self.weight)[:, None]
            points = self.sources * np.cos(angle) + self.tangents * np.sin(angle)
            return self._pruned_average(ell + np.log(self.weight), sources=points)
        if rows is not None:
            return super().attention_average(rho, rows)
        a = np.asarray(rho, dtype=float) * self.weight
        a = np.where(a > 0.0, a, 0.0)
        if a.max() == 0.0:
            return np.zeros((n_t, d))
        with np.errstate(divide="ignore"):
            log_a = np.log(a)
        return self._pruned_average(log_a, rho, a)

    def _pruned_average(
        self,
        log_a: Array,
        rho: Array | None = None,
        a: Array | None = None,
        *,
        sources: Array | None = None,
    ) -> Array:
        """The sums over the kept blocks, from the log weights ``log_a`` at ``sources`` (by default
        the fixed source points); given the density ``rho`` and its weights ``a`` too, the
        cached kernel's sums where they are cheaper."""
        n_t = len(self.targets)
        vy = self._vy if sources is None else sources @ self.model.V.T
        sources = self.sources if sources is None else sources
        blocks = self._blocks
        upper, lower = blocks.bounds(self._beta_bx, self._qnorm, sources, log_a)
        keep = upper >= lower[:, None] + self._log_cut
        self.kept_fraction = float((keep @ np.exp(blocks.log_size)).sum() / (n_t * len(log_a)))
        if (
            a is not None
            and self._kernel is not None
            and self.kept_fraction > self._fallback_fraction(upper, a)
        ):
            return super().attention_average(rho)  # the cached kernel is cheaper: the same sums
        z, n, m = blocks.kept_sums(self._beta_bx, keep, sources, log_a, vy, self._target_block)
        if self.model.kind.normalized:
            return clip_norm(n / z[:, None], self._v_norm)
        with np.errstate(over="ignore", invalid="ignore"):  # usa at large beta: inf, caught later
            return n * np.exp(m)[:, None]


def log_mass_velocity(model: Model, targets: Array, sources: Array, log_a: Array) -> Array:
    """X[rho] at any points for a density given as log masses ``log_a`` at ``sources`` (unit
    vectors ordered so that consecutive ones are close): the certified pruned log-sum-exp sums
    of the module docstring, so masses far below the smallest float64 number keep their
    weight; the zero-temperature field where the model has no interaction. Returns tangent
    vectors (n_targets, d)."""
    targets = np.asarray(targets, dtype=float)
    if not model.kind.interacting:
        return model.zero_temperature_velocity(targets)
    keep = log_a > -np.inf
    sources, log_a = sources[keep], log_a[keep]
    z, n, m, _ = pruned_logsumexp_sums(
        model.kernel.query(targets), sources, log_a, sources @ model.V.T
    )
    if model.kind.normalized:
        average = clip_norm(n / z[:, None], model.V_norm)
    else:
        with np.errstate(over="ignore", invalid="ignore"):
            average = n * np.exp(m)[:, None]
    return tangent_project(targets, average)
