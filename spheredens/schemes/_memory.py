"""Peak memory of a run, estimated from its configuration before any work.

:meth:`Scheme.memory_parts <spheredens.schemes.Scheme.memory_parts>` adds these terms up and
:func:`spheredens.config.check_memory` refuses a run that would not fit. Each function returns
bytes: an upper bound, within a small factor, of what the arrays it names hold at their peak,
from the sizes the configuration fixes:

* ``points`` P: where the state lives (cells, nodes, Gauss-grid points), ``targets`` T: where
  the velocity is evaluated (faces, nodes), ``n_xi`` M: the slices of ``usa_av`` (the state's
  leading axis), ``snapshots`` S;
* the evaluator's own sizes: the degree of its multipliers (from beta, as it computes it), its
  chunks of kernel entries (the constants of :mod:`spheredens.interaction`).

The terms add peaks that do not all happen at once (the set-up of an evaluator, a right-hand
side, the writing of the file), so the sum is an upper bound. tests/test_bounds_and_signals.py
measures the peak of the numpy allocations of small runs of every scheme and evaluator (with
slices, and particle runs) and checks that the estimate is at least that and at most 10 times it.
What is not counted: the libraries' own tables (shtns, ducc0, POT, HDF5) and Python objects.
"""

from __future__ import annotations

import math

from ..geometry import CIRCLE, domain_of_dimension
from ..interaction._clusters import P_MAX, X_MAX
from ..interaction._lowrank import WEIGHT_NODES
from ..interaction._points import circle_multiplier_degree, multiplier_degree
from ..interaction._pruned import BOUND_ENTRIES, SOURCE_BLOCK, TARGET_BLOCK
from ..interaction._quadrature import _CHUNK_ENTRIES, _MAX_CACHED
from ..models import Model, projection_target

#: bytes of a float64 and of a complex128
F8, C16 = 8.0, 16.0
#: the Gauss grid on which the low-rank evaluators analyse their weights at most (degree 255:
#: 384 x 768 points, :meth:`~spheredens.interaction.KappaLowRank.weight_degree`); whether that
#: analysis stops at degree 63 or goes on to 255 is only known once it is done
WEIGHT_GRID_POINTS = 384 * 768
#: the largest low-rank profile count (rank) seen for condition numbers up to 1e3
MAX_RANK = 32
#: from this many particles on, their sums are pruned (:data:`spheredens.particles.PRUNE_FROM`,
#: which imports this module's package: the number is kept equal by a test)
PRUNE_FROM = 2000
#: a zonal particle file keeps the vectors of R^d at every snapshot when they take at most this
#: many bytes, else at the first and the last snapshot (:mod:`spheredens.zonal_particles`)
FULL_POSITION_BYTES = 1 << 27
#: cells of the fine midpoint rule of the zonal initial law's CDF, from which zonal particles
#: are drawn (its inverse by linear interpolation)
QUANTILE_CELLS = 1 << 16
#: points of R^d formed at once when the zonal initial law is evaluated on those cells
ZONAL_EVAL_CHUNK = 1 << 22
#: rows of candidate Dirac centres formed at once by the slices' marginal_w2_dirac
DIRAC_ROWS = 256


def direct_sums(n_targets: int, n_sources: int, *, cached: bool = True) -> float:
    """Direct log-sum-exp quadrature (:class:`~spheredens.interaction.DirectQuadrature`): the
    rescaled kernel (targets x sources) kept when it has at most 2^25 entries, with the two
    arrays it is formed from; otherwise chunks of 2^22 entries, formed on every call."""
    pairs = float(n_targets) * n_sources
    if cached and pairs <= _MAX_CACHED:
        return 3 * F8 * pairs
    return 3 * F8 * min(pairs, _CHUNK_ENTRIES)


def pruned_sums(n_targets: int, n_sources: int, *, cached: bool = True) -> float:
    """:class:`~spheredens.interaction.PrunedDirectQuadrature`: the direct sums' kernel, the
    bounds of every target against every block of 16 sources (upper bounds, the products they
    come from, the boolean mask), and the kept sources of a block of 256 targets."""
    blocks = math.ceil(n_sources / SOURCE_BLOCK)
    return (
        direct_sums(n_targets, n_sources, cached=cached)
        + 2.2 * F8 * n_targets * blocks
        + 2 * F8 * min(n_targets, TARGET_BLOCK) * n_sources
    )


def pruned_point_sums(n: int) -> float:
    """:func:`~spheredens.interaction.pruned_logsumexp_sums` of n moving points (particles on
    the sphere, the low-rank evaluators' log-domain rows): bounds of at most 2^24 rows x blocks
    at a time, and the kept sources of 256 rows."""
    blocks = math.ceil(n / SOURCE_BLOCK)
    return 2.2 * F8 * min(float(n) * blocks, BOUND_ENTRIES) + 2 * F8 * min(n, TARGET_BLOCK) * n


def lowrank_setup(lmax: int) -> float:
    """The low-rank evaluators (``lowrank_meridian``, ``lowrank_points``): the analysis of their
    weights A_r(kappa) on Gauss grids up to degree 255 (barycentric weights at 64 nodes per
    point, formed with two more arrays of that size), and what they keep: the weights on their
    own grid of degree up to max(lmax, 255) + 16, at most :data:`MAX_RANK` of them."""
    grid_degree = max(lmax, 255) + 16
    own = (grid_degree + 1) * 2 * (grid_degree + 1)
    return 3.3 * F8 * WEIGHT_NODES * WEIGHT_GRID_POINTS + F8 * (2 * MAX_RANK + 16) * own


def evaluator_memory(
    name: str,
    model: Model,
    *,
    points: int,
    targets: int,
    n_xi: int,
    lmax: int | None = None,
    inputs: str = "values",
) -> float:
    """Bytes of the interaction evaluator ``name`` (the one the configuration resolves): its
    precomputed arrays, its set-up's temporaries and what one call forms, for a state of
    ``n_xi`` slices on ``points`` sources and the velocity at ``targets``."""
    d = model.d
    beta = float(model.beta)
    if name == "zero_temperature":
        return 6 * F8 * d * targets
    if name == "fft":  # FourierConvolution: a few complex arrays of the grid
        return 24 * C16 * points
    if name == "direct":
        return direct_sums(targets, points) + 8 * F8 * d * (points + targets)
    if name == "direct_pruned":
        cached = inputs != "log_moments"  # the log-moment state moves its sources: no kernel
        return pruned_sums(targets, points, cached=cached) + 10 * F8 * d * (points + targets)
    if name == "funk_hecke":
        if inputs == "coefficients":  # FunkHeckeInteraction: 9 frame products, ~20 fields
            return 32 * F8 * points
        # FunkHeckePoints: the targets' frames (cached), the fields at them, the coefficients
        L = multiplier_degree(beta * model.kernel.sigma_max) if beta > 0 else 4
        return 40 * F8 * targets + 8 * F8 * points + 10 * C16 * (L + 1) ** 2
    if name == "kappa_interpolation":  # barycentric weights at up to 64 nodes, multipliers
        nlm = (lmax + 1) * (lmax + 2) // 2
        return 3.3 * F8 * 64 * points + 2 * F8 * 64 * nlm + 30 * F8 * points
    if name in ("lowrank_meridian", "lowrank_points"):
        L = multiplier_degree(beta * model.kernel.sigma_max) if beta > 0 else 4
        work = 60 * F8 * max(points, targets)
        if name == "lowrank_points":  # its guarded rows: pruned sums over the cells
            work += 2 * pruned_point_sums(points)
        else:  # the guarded rows: log-sum-exp over the grid in chunks
            work += direct_sums(points, points, cached=False)
        return lowrank_setup(max(L, lmax or 0)) + work
    if name == "particle_sums":  # LogParticleSums: pruned sums of 15 averaged values at once
        return pruned_point_sums(targets) + 40 * F8 * 15 * targets
    if name == "auxiliary_spectral":
        return auxiliary_memory(model, points=points, targets=targets, n_xi=n_xi)
    if name == "zonal_log_sums":  # per call: c, the logits, the weights, the ratio's products
        return 16 * F8 * targets * points + 8 * F8 * (points + targets) * max(n_xi, 1)
    if name == "zonal_sums":  # four cached n_t x n_s arrays, the set-up's and guarded rows' work
        return 20 * F8 * targets * points + 8 * F8 * (points + targets) * max(n_xi, 1)
    # an evaluator not described here (a new one, registered elsewhere): as the direct sums
    return direct_sums(targets, points) + 8 * F8 * d * (points + targets) * max(n_xi, 1)


def auxiliary_memory(model: Model, *, points: int, targets: int, n_xi: int) -> float:
    """:class:`~spheredens.interaction.AuxiliaryInteraction` (``usa_av``): per slice, the gauge
    frames G_l y of the sources and G_k x of the targets; the bases' cached modes (circle: e^{i n
    phi} at every frame point, 2 L + 1 complex numbers each) or frames (sphere: 8 numbers per
    point); the fields of one call (F, M and their pieces) at the targets of every slice at once
    (b = 1) or one slice at a time; the coupling (M x M)."""
    d, M = model.d, n_xi
    beta = float(model.beta)
    aux = model.auxiliary
    uniform = aux is None or aux.uniform_coupling
    frames = F8 * d * M * (points + targets)
    if domain_of_dimension(d) is CIRCLE:  # the circle's Fourier basis, as the evaluator picks it
        L = circle_multiplier_degree(beta)
        cache = C16 * (2 * L + 1) * M * (points + targets)
        fields = C16 * (2 * L + 1) * targets * (M if uniform else 1) + 12 * F8 * M * targets
    else:
        cache = 8 * F8 * M * (points + targets)
        fields = 24 * F8 * targets * (M if uniform else 1) + 12 * F8 * M * targets
        L = multiplier_degree(beta)
        fields += 10 * C16 * (L + 1) ** 2 * M
    return frames + cache + fields + 3 * F8 * M * M


def slice_diagnostics(points: int, n_xi: int) -> float:
    """The per-snapshot diagnostics of slices: distances of 256 candidate Dirac centres to every
    point at a time (marginal_w2_dirac), and of every slice's mode to every point (slice_spread)."""
    if n_xi <= 1:
        return 0.0
    return 4 * F8 * DIRAC_ROWS * points + 3 * F8 * n_xi * points


def w2_diagnostics(model: Model, points: int, *, centroids: bool = False) -> float:
    """w2_projection, where Pi_# rho_0 is defined (Assumption 1, E_1 not the whole space): on
    the circle POT's solver on the cells' sub-atoms (about 12 MiB; on the atoms at the cells'
    centroids with ``centroids``: a few arrays of the grid); on the sphere the density coarsened
    to 4096 atoms (a ring mesh of them) and the exact EMD to the target's atoms (up to 512 on a
    great circle): about 64 MiB. w2_terminal: a few arrays of the grid."""
    terminal = 10 * F8 * points
    target = projection_target(model)
    if not target.holds or target.basis.shape[0] >= model.d:
        return terminal
    if domain_of_dimension(model.d) is CIRCLE:
        fixed = 0.0 if centroids else 12 * 2**20
    else:
        fixed = 64 * 2**20
    return terminal + fixed + 20 * F8 * points


def energy_sums(model: Model, points: int, inputs: str) -> float:
    """The energy of ``usa`` (Q = K = V = I) on point values: direct sums in chunks of 2^22."""
    if model.kind.energy != "pairs" or inputs == "coefficients":
        return 0.0
    return 3 * F8 * min(float(points) ** 2, _CHUNK_ENTRIES)


def particle_memory(
    model: Model, n: int, snapshots: int, n_xi: int, dimension: int | None = None
) -> float:
    """``spheredens particles``: positions (n x d) at every snapshot, kept, copied into the
    Dataset and rendered in memory (3 copies), and the integrator's stages; the pairwise sums:
    direct log-sum-exp in chunks of 2^22 entries below 2000 particles; from there on the circle
    the bounds of every particle against every cluster and the Taylor monomials of the
    expansions (up to order 24: 325 per particle), on the sphere the bounds against blocks of
    16 (in chunks of 2^24) and the kept sources of 256 rows; for slices the coupled sums
    (entries, couplings gathered, products) in chunks of 2^22.

    ``dimension``: the zonal domain's particles are vectors of R^d (d = ``dimension``, while the
    model's points are the meridian plane's): their stages and the sources gathered for the
    pruned sums are n x d; the vectors are kept at every snapshot within
    :data:`FULL_POSITION_BYTES`, else at 2; the meridian points (n x 2) at every snapshot."""
    d = model.d if dimension is None else dimension
    if dimension is None:
        positions = F8 * n * d * (3 * snapshots + 12)
    else:
        kept = snapshots if F8 * n * d * snapshots <= FULL_POSITION_BYTES else 2
        positions = (
            F8 * n * d * (3 * kept + 14)
            + 3 * F8 * n * model.d * snapshots
            + 2 * F8 * min(QUANTILE_CELLS * d, ZONAL_EVAL_CHUNK)
        )
    pairs = float(n) * n
    if model.auxiliary is not None:
        sums = 3 * F8 * min(pairs, _CHUNK_ENTRIES)
    elif n < PRUNE_FROM:
        sums = 1.5 * F8 * min(pairs, _CHUNK_ENTRIES)
    elif dimension is None and domain_of_dimension(d) is CIRCLE:
        # clusters on the circle, blocks elsewhere
        beta_sigma = max(float(model.beta) * model.kernel.sigma_max, 1e-300)
        groups = min(n, math.ceil(math.pi * math.sqrt(beta_sigma / X_MAX)) + 2)
        terms = (P_MAX + 1) * (P_MAX + 2) // 2
        sums = 2.2 * F8 * n * groups + 2 * F8 * n * terms
    else:
        sums = pruned_point_sums(n)
    return positions + sums + 3 * F8 * n_xi * n_xi


__all__ = [
    "FULL_POSITION_BYTES",
    "QUANTILE_CELLS",
    "ZONAL_EVAL_CHUNK",
    "auxiliary_memory",
    "direct_sums",
    "energy_sums",
    "evaluator_memory",
    "lowrank_setup",
    "particle_memory",
    "pruned_point_sums",
    "pruned_sums",
    "slice_diagnostics",
    "w2_diagnostics",
]
