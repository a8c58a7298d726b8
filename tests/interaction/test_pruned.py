"""Direct quadrature with certified pruning: the certificate holds and the
velocity equals the unpruned direct sums to round-off."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import logsumexp

import spheredens as sd
from spheredens.grids import CircleGrid, LatLonCells, RingMesh
from spheredens.interaction import DirectQuadrature, PrunedDirectQuadrature
from spheredens.interaction._pruned import (
    PRUNE_FRACTION,
    SOURCE_BLOCK,
    SourceBlocks,
    log_mass_velocity,
)

K_C = np.array([[1.75, 0.866025], [0.433013, 2.5]])
V_C = np.array([[1.0, 0.0], [0.0, 0.5]])


def concentrated_circle(grid):
    """Two clusters (width ~0.03 rad) and an exponentially small floor: the low-temperature case."""
    th = grid.theta
    rho = (
        np.exp(-((th - 0.52) ** 2) / 0.001)
        + 0.5 * np.exp(-((th - 0.52 - np.pi) ** 2) / 0.002)
        + 1e-250
    )
    return rho / np.sum(rho * grid.weight)


@pytest.mark.parametrize("beta", [10.0, 1000.0])
def test_equals_direct_quadrature_on_the_circle(beta):
    model = sd.Model("sa", beta, np.eye(2), K_C, V_C)
    grid = CircleGrid(4096, 0.5)
    faces = grid.shifted(0.5)
    rho = concentrated_circle(grid)[None]
    direct = DirectQuadrature(model, grid.points, grid.weight, faces.points).vectors(rho)
    # max_cached=0: no cached kernel, so the pruned sums are always the ones taken
    pruned = PrunedDirectQuadrature(model, grid.points, grid.weight, faces.points, max_cached=0)
    got = pruned.vectors(rho)
    # with the cached kernel it may take the direct sums where they are cheaper: same numbers
    chosen = PrunedDirectQuadrature(model, grid.points, grid.weight, faces.points).vectors(rho)
    assert np.abs(chosen - direct).max() <= 1e-14
    # |X| <= ||V|| = 1; the pruned sums differ by < 2^-60 relative plus summation order: 1e-14
    assert np.abs(got - direct).max() <= 1e-14
    if beta == 1000.0:
        assert pruned.kept_fraction < 0.1  # measured 0.076: the pruning acts


def test_the_certificate_bounds_what_is_skipped():
    """Recompute, exactly, the weight of every skipped source for every target: below
    2^-60 of the row's sum, as the module's bound promises."""
    model = sd.Model("sa", 1000.0, np.eye(2), K_C, V_C)
    grid = CircleGrid(1024, 0.5)
    rho = concentrated_circle(grid)
    pruned = PrunedDirectQuadrature(model, grid.points, grid.weight, grid.points, source_block=16)
    pruned.vectors(rho[None])
    logits = model.kernel.log(grid.points, grid.points) + np.log(rho * grid.weight)[None, :]
    top = logits.max(axis=1, keepdims=True)
    weights = np.exp(logits - top)
    # the decision of the evaluator, rebuilt from its own bound (the same arrays)
    log_a = np.log(rho * grid.weight)
    blocks = pruned._blocks
    starts = blocks.starts
    block_log_a = np.maximum.reduceat(log_a, starts)
    heaviest = starts + np.array([np.argmax(log_a[s : s + 16]) for s in starts])
    lower = np.max(pruned._beta_bx @ grid.points[heaviest].T + log_a[heaviest], axis=1)
    upper = (
        pruned._beta_bx @ blocks.centres.T
        + pruned._qnorm[:, None] * blocks.radius[None, :]
        + (block_log_a + blocks.log_size)[None, :]
    )
    skipped = (upper < lower[:, None] + pruned._log_cut)[:, blocks.block]
    assert skipped.mean() > 0.5  # most pairs are skipped at beta = 1000
    share = (weights * skipped).sum(axis=1) / weights.sum(axis=1)
    assert share.max() <= PRUNE_FRACTION


def test_equals_direct_quadrature_on_a_sphere_mesh():
    K = np.array([[1.2, 0.3, 0.1], [-0.2, 0.8, 0.4], [0.1, 0.2, 1.5]])
    model = sd.Model("sa", 100.0, np.eye(3), K, np.eye(3))
    mesh = RingMesh(48)
    x = mesh.points
    rho = np.exp(60.0 * (x @ np.array([0.0, 0.6, 0.8]) - 1.0)) + 1e-200
    rho /= np.sum(rho * mesh.area)
    direct = DirectQuadrature(model, x, mesh.area, mesh.face_point).vectors(rho[None])
    pruned = PrunedDirectQuadrature(model, x, mesh.area, mesh.face_point, max_cached=0)
    assert np.abs(pruned.vectors(rho[None]) - direct).max() <= 1e-14
    assert pruned.kept_fraction < 0.9


def test_pruned_sums_in_row_chunks_equal_the_sums_at_once(monkeypatch):
    """pruned_logsumexp_sums forms its bounds BOUND_ENTRIES rows x blocks at a time (memory for
    many moving particles): with chunks of 256 and 768 rows, summed on 1, 2 or 3 threads, the
    sums, maxima and the kept fraction equal those computed at once, bit for bit, also with
    log_lower."""
    from spheredens.interaction import _pruned, sphere_order

    rng = np.random.default_rng(2)
    x = rng.standard_normal((3000, 3))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    x = x[sphere_order(x)]
    q = 300.0 * x @ np.array([[1.2, 0.3, 0.0], [0.1, 0.9, 0.2], [0.0, 0.1, 1.1]])
    log_a = np.log(rng.uniform(0.5, 1.5, len(x)))
    vy = x * np.array([1.0, 0.5, 0.5])
    log_lower = rng.uniform(250.0, 300.0, len(x))
    whole = [
        _pruned.pruned_logsumexp_sums(q, x, log_a, vy),
        _pruned.pruned_logsumexp_sums(q, x, log_a, vy, log_lower=log_lower),
    ]
    n_blocks = -(-len(x) // _pruned.SOURCE_BLOCK)
    for rows, threads in ((256, 1), (256, 2), (256, 3), (768, 2)):
        monkeypatch.setattr(_pruned, "BOUND_ENTRIES", rows * n_blocks)
        monkeypatch.setattr(_pruned, "THREADS", threads)
        parts = [
            _pruned.pruned_logsumexp_sums(q, x, log_a, vy),
            _pruned.pruned_logsumexp_sums(q, x, log_a, vy, log_lower=log_lower),
        ]
        for a, b in zip(whole, parts):
            for u, v in zip(a[:3], b[:3]):
                np.testing.assert_array_equal(u, v)
            assert a[3] == pytest.approx(b[3], rel=1e-14) and 0.0 < a[3] < 0.5
    empty = _pruned.pruned_logsumexp_sums(q[:0], x, log_a, vy)
    assert [len(e) for e in empty[:3]] == [0, 0, 0] and empty[3] == 0.0


def sphere_tails(nlat=32, seed=3):
    """Log masses on the sphere log_sl's cells spanning e^-1600 (two von Mises-Fisher clusters,
    kappa = 1200 and 1000) at centroids moved inside their cells, and a general invertible B."""
    rng = np.random.default_rng(seed)
    cells = LatLonCells(nlat, np.array([0.3, -0.5, 0.81]) / np.linalg.norm([0.3, -0.5, 0.81]))
    offsets = rng.uniform(-0.4, 0.4, (2, nlat, 2 * nlat))
    y = cells.to_world(cells.centroid_points(*offsets)).reshape(-1, 3)
    u1, u2 = np.array([0.0, 0.6, 0.8]), np.array([1.0, 0.0, 0.0])
    log_a = np.logaddexp(1200.0 * (y @ u1 - 1.0), np.log(0.5) + 1000.0 * (y @ u2 - 1.0))
    log_a += np.log(cells.weight.reshape(-1))
    Q, K, V = (np.eye(3) + 0.4 * rng.standard_normal((3, 3)) for _ in range(3))
    return y, log_a, Q, K, V


@pytest.mark.parametrize("beta", [30.0, 300.0, 3000.0])
def test_log_mass_velocity_keeps_the_tails_for_a_general_b(beta):
    """The sphere log_sl's velocity (certified pruned log-sum-exp over log masses) against the
    same sums over every source, unpruned, in the log domain: equal to the round-off of the
    logits (4 eps (beta sigma_max(B) + 10) ||V||) at every target, including those where rho is
    e^-1500 and every term of a linear-domain sum underflows; and every skipped block weighs
    below 2^-60 of its row's sum, recomputed exactly."""
    y, log_a, Q, K, V = sphere_tails()
    model = sd.Model("sa", beta, Q, K, V)
    assert log_a.min() < -1500.0 and abs(np.linalg.det(Q.T @ K)) > 1e-3
    velocity = log_mass_velocity(model, y, y, log_a)
    logits = model.kernel.log(y, y) + log_a[None, :]
    z = logsumexp(logits, axis=1)
    average = np.exp(logits - z[:, None]) @ (y @ V.T)
    expected = average - np.sum(average * y, axis=1, keepdims=True) * y
    # round-off of the logits: eps beta sigma_max(B) relative, in both sums
    sigma = np.linalg.norm(Q.T @ K, 2)
    error = np.max(np.abs(velocity - expected))
    assert error <= 4 * np.finfo(float).eps * (beta * sigma + 10.0) * np.linalg.norm(V, 2)
    # the certificate: the blocks the bound skips, their weight recomputed exactly
    blocks = SourceBlocks(y, SOURCE_BLOCK)
    q = model.kernel.query(y)
    upper, lower = blocks.bounds(q, np.linalg.norm(q, axis=1), y, log_a)
    skipped = (upper < lower[:, None] + blocks.log_cut)[:, blocks.block]
    share = logsumexp(np.where(skipped, logits, -np.inf), axis=1) - z
    assert share.max() <= np.log(PRUNE_FRACTION)
    if beta >= 300.0:
        assert skipped.mean() > 0.5  # the pruning pays at low temperature


def test_the_tree_bound_holds_for_every_block():
    """_TreeLevel.upper bounds the exact log sum over each block, for rows on all sides of the
    blocks (behind them too), at every level of a Z-ordered cloud, with rough masses and with a
    smooth tail e^{-30 (1 - <y, u>)}; it is never looser than SourceBlocks' |q| r bound with
    log |J| max a, and at each row's heaviest leaf block, where the row's sum is decided, its
    slack is less than half of that bound's (median over rows)."""
    from spheredens.interaction._pruned import _TreeLevel, z_order

    rng = np.random.default_rng(5)
    y = rng.standard_normal((4096, 3))
    y /= np.linalg.norm(y, axis=1, keepdims=True)
    y = y[z_order(y)]
    u = np.array([0.0, 0.6, 0.8])
    q = rng.standard_normal((200, 3)) * rng.uniform(10.0, 3000.0, (200, 1))
    for log_a in (rng.uniform(-30.0, 0.0, len(y)), -30.0 * (1.0 - y @ u)):
        logits = q @ y.T + log_a
        for size in (8, 64, 512):
            level = _TreeLevel(y, log_a, size, PRUNE_FRACTION)
            upper = level.upper(q, np.sum(q * q, axis=1), np.arange(len(level.starts)))
            exact = np.stack([logsumexp(logits[:, s : s + size], axis=1) for s in level.starts], 1)
            assert np.all(upper >= exact - 1e-9 * np.abs(exact))
            top = np.maximum.reduceat(log_a, level.starts) + np.log(size)
            loose = q @ level.centres.T + np.linalg.norm(q, axis=1)[:, None] * level.radius + top
            assert np.all(upper <= loose + 1e-9 * np.abs(loose))
        rows, best = np.arange(len(q)), np.argmax(exact, axis=1)
        slack, loose_slack = upper - exact, loose - exact
        ratio = np.median(slack[rows, best]) / np.median(loose_slack[rows, best])
        assert ratio < 0.5  # measured: 0.397 (rough), 0.395 (smooth)


@pytest.mark.parametrize("beta", [300.0, 1000.0])
def test_tree_sums_equal_the_direct_sums_with_a_deep_tail_and_atoms(beta):
    """tree_logsumexp_sums against the unpruned log-sum-exp sums: cells of a sphere mesh with
    a tail from e^0 down to e^-1500 plus atoms of almost all the mass (the hybrid's face sums,
    a general B). Z and N agree to round-off relative to each row's Z, in any source order;
    it sums fewer pairs than pruned_logsumexp_sums; with log_lower far above, nothing is
    summed and the rows come back (0, 0, -inf)."""
    from spheredens.interaction._pruned import pruned_logsumexp_sums, tree_logsumexp_sums
    from spheredens.interaction._quadrature import logsumexp_sums

    mesh = RingMesh(64)
    rng = np.random.default_rng(7)
    B = np.eye(3) + 0.3 * rng.standard_normal((3, 3))
    u = np.array([0.0, 0.6, 0.8])
    log_rho = -1500.0 * (1.0 - mesh.points @ u) / 2.0 + 3.0 * np.sin(5.0 * mesh.points[:, 0])
    atoms = np.array([[0.0, 0.6, 0.8], [0.0, -0.6, -0.8], [0.6, 0.0, 0.8]])
    sources = np.concatenate([mesh.points, atoms])
    log_a = np.concatenate([log_rho + np.log(mesh.area), [-0.7, -0.7, -40.0]])
    vy = sources * np.array([1.0, 0.7, 0.4])
    q = beta * mesh.face_point @ B
    z, n, m = logsumexp_sums(q, sources, log_a, vy)
    shuffled = rng.permutation(len(sources))
    for perm in (np.arange(len(sources)), shuffled):
        z_t, n_t, m_t, kept = tree_logsumexp_sums(q, sources[perm], log_a[perm], vy[perm])
        scale = np.exp(m_t - m)
        assert np.abs(z_t * scale / z - 1.0).max() <= 1e-13
        assert np.abs(n_t * scale[:, None] / z[:, None] - n / z[:, None]).max() <= 1e-13
    flat = pruned_logsumexp_sums(q, sources, log_a, vy)[3]
    # measured: 0.049 against 0.168 at beta = 300, 0.067 against 0.276 at 1000
    assert kept < 0.5 * flat and kept < 0.1
    nothing = tree_logsumexp_sums(q, sources, log_a, vy, log_lower=m + np.log(z) + 1e4)
    assert np.all(nothing[0] == 0.0) and np.all(nothing[1] == 0.0) and nothing[3] == 0.0
    assert np.all(nothing[2] == -np.inf)
    empty = tree_logsumexp_sums(q[:0], sources, log_a, vy)
    assert [len(e) for e in empty[:3]] == [0, 0, 0] and empty[3] == 0.0


def test_tree_sums_on_threads_equal_the_sums_on_one(monkeypatch):
    """The groups of rows are independent: on 2 or 3 threads tree_logsumexp_sums returns the
    one-thread sums bit for bit (also with log_lower)."""
    from spheredens.interaction import _pruned

    rng = np.random.default_rng(4)
    x = rng.standard_normal((3000, 3))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    q = 300.0 * x @ np.array([[1.2, 0.3, 0.0], [0.1, 0.9, 0.2], [0.0, 0.1, 1.1]])
    log_a = np.log(rng.uniform(0.5, 1.5, len(x)))
    vy = x * np.array([1.0, 0.5, 0.5])
    log_lower = rng.uniform(250.0, 300.0, len(x))
    monkeypatch.setattr(_pruned, "THREADS", 1)
    one = [
        _pruned.tree_logsumexp_sums(q, x, log_a, vy),
        _pruned.tree_logsumexp_sums(q, x, log_a, vy, log_lower=log_lower),
    ]
    for threads in (2, 3):
        monkeypatch.setattr(_pruned, "THREADS", threads)
        for a, b in zip(
            one,
            [
                _pruned.tree_logsumexp_sums(q, x, log_a, vy),
                _pruned.tree_logsumexp_sums(q, x, log_a, vy, log_lower=log_lower),
            ],
        ):
            for u, v in zip(a, b):
                np.testing.assert_array_equal(u, v)
    assert 0.0 < one[0][3] < 0.5
