"""The general-B evaluator of the sphere's finite volumes, lowrank_points.

The finite-volume velocity is, by definition, the discrete sums over the cell masses at the
cell centres evaluated at the face midpoints; direct log-sum-exp quadrature over the same
sources (:class:`DirectQuadrature`) computes exactly these sums, so it is the reference here.
"""

from __future__ import annotations

import numpy as np
import pytest

# the matrices, centres and mixtures of the Gauss-grid evaluator's tests
from test_lowrank_meridian import B_CASES, V, mixture  # noqa: E402

import spheredens as sd
from spheredens.grids import RingMesh
from spheredens.interaction import DirectQuadrature, LowRankPoints, pruned_logsumexp_sums
from spheredens.interaction._quadrature import clip_norm, logsumexp_sums
from spheredens.models import Model
from spheredens.problem import Problem
from spheredens.references import linear_growth_tendency
from spheredens.schemes import make_scheme
from spheredens.verify import steady_uniform_model


@pytest.fixture(scope="module")
def mesh():
    return RingMesh(32)


def both(model, mesh, rho):
    ev = LowRankPoints(model, mesh.points, mesh.area, mesh.face_point)
    direct = DirectQuadrature(model, mesh.points, mesh.area, mesh.face_point)
    return ev, ev.attention_average(rho), direct.attention_average(rho)


@pytest.mark.parametrize("beta", [1.0, 30.0, 300.0])
@pytest.mark.parametrize("case", list(B_CASES))
def test_velocity_matches_direct_quadrature(mesh, case, beta):
    """Agreement to 1e-10 relative to ||V|| where Z e^-kappa >= 1e-6 of its maximum (measured
    ~1e-13), at every face midpoint of the mesh."""
    model = Model("sa", beta, np.eye(3), B_CASES[case], V)
    rho = mixture(mesh.points, [1.0, 0.5, 0.3], [8.0, 3.0, 15.0], floor=0.02)
    ev, got, want = both(model, mesh, rho)
    h = ev.fields(rho * mesh.area)[0]
    assert (h >= 1e-6 * h.max()).all()  # this density: no row falls back
    assert ev.fallback_fraction == 0.0
    assert np.abs(got - want).max() / np.linalg.norm(V, 2) <= 1e-10
    assert ev.attributes()["lowrank_rank"] <= 20


@pytest.mark.parametrize("beta", [30.0, 300.0])
def test_tiny_partition_function_rows_are_computed_in_the_log_domain(mesh, beta):
    """A concentrated density (two caps of width ~0.1 rad) whose
    Z e^-kappa spans hundreds of decades (below the smallest float64 at beta = 300). Without
    peeling, rows below 1e-6 of the maximum are the pruned log-sum-exp sums: equal to direct
    quadrature to 1e-12; the other rows hold to 1e-8 of ||V||."""
    model = Model("sa", beta, np.eye(3), B_CASES["general"], V)
    rho = mixture(mesh.points, [1.0, 0.5], [100.0, 100.0])
    ev = LowRankPoints(model, mesh.points, mesh.area, mesh.face_point)
    ev.peel_levels = 0
    got = ev.attention_average(rho)
    want = DirectQuadrature(model, mesh.points, mesh.area, mesh.face_point).attention_average(rho)
    h = ev.fields(rho * mesh.area)[0]
    small = (h < 1e-6 * h.max()) | ~(h > 0)
    assert 0.05 < ev.fallback_fraction == ev.direct_fraction == small.mean() < 0.95
    assert np.isfinite(got).all()
    assert np.abs(got[small] - want[small]).max() <= 1e-12
    assert np.abs(got[~small] - want[~small]).max() / np.linalg.norm(V, 2) <= 1e-8


@pytest.mark.parametrize("beta", [30.0, 300.0])
def test_peeling_keeps_the_tiny_rows_right_at_the_cost_of_a_few_cells(mesh, beta):
    """With peeling (the default): the small rows of the
    concentrated density above are taken from the spectral sums of its tail plus the exact sums
    over the few peeled heavy cells. They agree with direct quadrature to 1e-8 of ||V|| (the
    bound asserted for them; measured 2.6e-9 and 2.3e-10), and only a minority of them
    falls back to the direct sum over all cells (measured: 8% of them at beta = 30, 33% at 300).
    The premise, measured: the tail's spectral error is ~1e-14 of the tail's mass, so a row is
    taken where its e^-kappa Z_t is >= 1e-6 of it."""
    model = Model("sa", beta, np.eye(3), B_CASES["general"], V)
    rho = mixture(mesh.points, [1.0, 0.5], [100.0, 100.0])
    ev = LowRankPoints(model, mesh.points, mesh.area, mesh.face_point)
    want = DirectQuadrature(model, mesh.points, mesh.area, mesh.face_point).attention_average(rho)
    h = ev.fields(rho * mesh.area)[0]
    small = (h < 1e-6 * h.max()) | ~(h > 0)
    # this mesh is small: by default its small rows are cheaper summed directly than peeled
    assert np.abs(ev.attention_average(rho)[small] - want[small]).max() <= 1e-12
    assert ev.direct_fraction == ev.fallback_fraction
    ev.peel_min_pairs = 0
    got = ev.attention_average(rho)
    assert ev.fallback_fraction == small.mean() > 0.05
    assert ev.direct_fraction <= (0.15 if beta == 30.0 else 0.4) * ev.fallback_fraction
    assert np.isfinite(got).all()
    assert np.abs(got - want).max() / np.linalg.norm(V, 2) <= 1e-8
    # the premise: a tail (cells below 1e-3 of the largest mass) has spectral sums right to
    # 1e-13 of its mass
    a = rho * mesh.area
    tail = np.where(a > 1e-3 * a.max(), 0.0, a)
    h_t = ev.scaled_sums(tail)[0]
    with np.errstate(divide="ignore"):
        z, _, m, _ = pruned_logsumexp_sums(ev._query, ev.sources, np.log(tail), ev._vy)
    assert np.abs(h_t - z * np.exp(m - ev._kappa)).max() <= 1e-13 * tail.sum()


def test_beta_zero_is_the_mean_field(mesh):
    model = Model("sa", 0.0, np.eye(3), B_CASES["general"], V)
    rho = mixture(mesh.points, [1.0, 0.5], [2.0, 4.0], 0.1)
    got = LowRankPoints(model, mesh.points, mesh.area, mesh.face_point).vectors(rho[None])[0]
    m = (rho * mesh.area) @ mesh.points
    avg = V @ m / np.sum(rho * mesh.area)
    want = (
        avg[None, :]
        - np.sum(avg[None, :] * mesh.face_point, axis=1, keepdims=True) * mesh.face_point
    )
    assert np.abs(got - want).max() <= 1e-14


def test_usa_matches_direct_quadrature(mesh):
    model = Model("usa", 3.0, np.eye(3), B_CASES["cond3"], V)
    rho = mixture(mesh.points, [1.0, 0.5], [8.0, 3.0], 0.05)
    _, got, want = both(model, mesh, rho)
    assert np.abs(got - want).max() <= 1e-11 * np.abs(want).max()


def fv_linear_growth(nlat: int, beta: float, B: np.ndarray, a: np.ndarray) -> tuple[float, float]:
    """(rate of the fv right-hand side linearized at the uniform density in the direction <a, x>,
    the rate of the exact tendency on the same cells), <f, df/dt> / <f, f> in the cell inner
    product; V = B^-T keeps the uniform density steady."""
    cfg = sd.config_from_dict(
        {
            "model": steady_uniform_model(beta, B),
            "domain": {"name": "sphere"},
            "initial": {"name": "uniform"},
            "discretization": {
                "scheme": "fv",
                "nlat": nlat,
                "interaction": "lowrank_points",
            },
            "time": {"t_end": 1.0, "snapshots": 2},
        }
    )
    solver = make_scheme(Problem.from_config(cfg), cfg.discretization)
    m = solver.grid
    f = m.cell_averages(lambda x: x @ a)
    base = np.full(m.n_cells, 1.0 / (4.0 * np.pi))
    eps = (
        1e-4  # the mc slopes of base +- eps f are +- eps times those of f: the difference is linear
    )
    got = (
        solver.rhs((base + eps * f)[None], 0.0).rate[0]
        - solver.rhs((base - eps * f)[None], 0.0).rate[0]
    ) / (2 * eps)
    want = m.cell_averages(lambda x: linear_growth_tendency(x, B, a, beta))
    return float(np.sum(f * got * m.area) / np.sum(f * f * m.area)), float(
        np.sum(f * want * m.area) / np.sum(f * f * m.area)
    )


def test_fv_linear_growth_rate_converges_at_second_order():
    """For the finite volumes: the exact linear growth around the uniform density
    with a non-orthogonal B (:func:`~spheredens.references.linear_growth_tendency`) is reached at
    second order in the mesh size (measured relative errors 3.6e-3, 9.4e-4, 2.4e-4 at nlat = 16, 32,
    64 for beta = 1: orders 1.94, 1.99)."""
    B, a = B_CASES["general"], np.array([0.3, -0.5, 0.8])
    errors = []
    for nlat in (16, 32, 64):
        rate, exact = fv_linear_growth(nlat, 1.0, B, a)
        errors.append(abs(rate - exact) / abs(exact))
    orders = np.log2(np.array(errors[:-1]) / np.array(errors[1:]))
    assert (orders > 1.7).all(), (errors, orders)
    assert errors[-1] < 1e-3, errors


def test_auto_picks_it_for_a_general_b_and_the_run_equals_direct():
    """fv with a general B: ``auto`` is lowrank_points, and a run equals the direct one."""

    def cfg(interaction):
        return sd.config_from_dict(
            {
                "model": {
                    "name": "sa",
                    "beta": 2.0,
                    "K": B_CASES["general"].tolist(),
                    "V": V.tolist(),
                },
                "domain": {"name": "sphere"},
                "initial": {"name": "random_smooth", "seed": 3},
                "discretization": {"scheme": "fv", "nlat": 20, "interaction": interaction},
                "time": {"t_end": 0.5, "times": [0.0, 0.5]},
            }
        )

    a = sd.run(cfg("auto"), progress=False)
    b = sd.run(cfg("direct"), progress=False)
    assert a.attrs["interaction"] == "lowrank_points"
    assert a.attrs["n_steps"] == b.attrs["n_steps"]
    assert np.abs(a["rho"].values - b["rho"].values).max() <= 1e-11


def test_a_lower_log_domain_level_trades_accuracy_as_documented(mesh):
    """``log_domain_below`` = 1e-9: fewer log-domain rows; between 1e-9 and 1e-6 of the maximum
    the spectral velocity holds to 1e-14 max(H) / H (the floor the option's documentation
    states: ~1e-16 of the maximum, so <= 1e-5 of ||V|| there). Below it the peeled rows hold to
    the same level's bound, 1e-14 / 1e-9 of ||V|| (measured 5e-7), and without peeling they are
    the exact log-domain sums."""
    model = Model("sa", 30.0, np.eye(3), B_CASES["general"], V)
    rho = mixture(mesh.points, [1.0, 0.5], [40.0, 40.0], floor=1e-12)
    ev, strict, want = both(model, mesh, rho)
    default_fraction = ev.fallback_fraction
    ev.log_domain_below = 1e-9
    ev.peel_min_pairs = 0
    got = ev.attention_average(rho)
    h = ev.fields(rho * mesh.area)[0]
    r = h / h.max()
    band = (r >= 1e-9) & (r < 1e-6)
    assert band.any() and ev.fallback_fraction < default_fraction
    assert (np.abs(got - want).max(axis=1)[band] <= 1e-14 / r[band]).all()
    assert 0.0 < np.abs(got[r < 1e-9] - want[r < 1e-9]).max() <= 1e-5 * np.linalg.norm(V, 2)
    ev.peel_levels = 0
    got = ev.attention_average(rho)
    assert np.abs(got[r < 1e-9] - want[r < 1e-9]).max() <= 1e-12


def test_log_domain_below_is_an_fv_option_of_lowrank_points(tmp_path):
    def cfg(**disc):
        return sd.config_from_dict(
            {
                "model": {
                    "name": "sa",
                    "beta": 2.0,
                    "K": B_CASES["general"].tolist(),
                    "V": V.tolist(),
                },
                "domain": {"name": "sphere"},
                "initial": {"name": "random_smooth", "seed": 3},
                "discretization": {"scheme": "fv", "nlat": 20, **disc},
                "time": {"t_end": 0.1, "times": [0.0, 0.1]},
            }
        )

    ds = sd.run(cfg(log_domain_below=1e-9), progress=False)
    assert ds.attrs["log_domain_below"] == 1e-9
    with pytest.raises(sd.ConfigError, match="log_domain_below"):
        cfg(log_domain_below=0.1)
    with pytest.raises(sd.ConfigError, match="lowrank_points only"):
        sd.run(cfg(log_domain_below=1e-9, interaction="direct"), progress=False)
    # peeling: on by default (12 levels), off on request; a bool
    assert ds.attrs["log_domain_peel_levels"] == 12
    assert (
        sd.run(cfg(log_domain_peeling=False), progress=False).attrs["log_domain_peel_levels"] == 0
    )
    with pytest.raises(sd.ConfigError, match="log_domain_peeling"):
        cfg(log_domain_peeling="yes")
    with pytest.raises(sd.ConfigError, match="lowrank_points only"):
        sd.run(cfg(log_domain_peeling=True, interaction="direct"), progress=False)


def test_a_larger_sum_lets_the_pruning_skip_more_and_stays_certified(mesh):
    """``pruned_logsumexp_sums(..., log_lower=)``: with a lower bound of a larger sum the sources
    are part of, blocks below 2^-60 of it are skipped. Split the cells of a concentrated density
    into the heavy ones and the rest: the heavy part summed with the rest's log Z as the bound
    adds up, with the rest, to the whole sum to 1e-14; rows whose blocks are all below the bound
    come back as (0, 0, -inf); and more is skipped than without the bound."""
    model = Model("sa", 100.0, np.eye(3), B_CASES["general"], V)
    a = mixture(mesh.points, [1.0, 0.5], [100.0, 100.0], floor=1e-12) * mesh.area
    q, vy = model.kernel.query(mesh.face_point), mesh.points @ V.T
    heavy = a > 1e-3 * a.max()
    z, n, m, _ = pruned_logsumexp_sums(q, mesh.points, np.log(a), vy)
    z_r, n_r, m_r, _ = pruned_logsumexp_sums(q, mesh.points[~heavy], np.log(a[~heavy]), vy[~heavy])
    log_rest = m_r + np.log(z_r)
    z_h, n_h, m_h, kept = pruned_logsumexp_sums(
        q, mesh.points[heavy], np.log(a[heavy]), vy[heavy], log_lower=log_rest
    )
    *_, kept_alone = pruned_logsumexp_sums(q, mesh.points[heavy], np.log(a[heavy]), vy[heavy])
    assert kept < 0.9 * kept_alone  # measured 0.58 against 0.69
    w_h = np.exp(m_h - m)
    total = z_r * np.exp(m_r - m) + w_h * z_h
    both_n = n_r * np.exp(m_r - m)[:, None] + w_h[:, None] * n_h
    assert np.abs(total / z - 1.0).max() <= 1e-14
    assert np.abs(both_n / total[:, None] - n / z[:, None]).max() <= 1e-14
    # a bound far above every block: nothing is summed
    z_0, n_0, m_0, kept_0 = pruned_logsumexp_sums(
        q, mesh.points[heavy], np.log(a[heavy]), vy[heavy], log_lower=log_rest + 1e4
    )
    assert kept_0 == 0.0 and np.all(z_0 == 0.0) and np.all(n_0 == 0.0) and np.all(m_0 == -np.inf)


def atoms_beside_a_tail(mesh, beta, tail, peel_min_pairs=None, peel_min_gain=None):
    """The clusters carried as atoms (99.99% of the mass: 40 atoms within 0.02 rad of two
    centres, and one e^-1500 deep at a third) beside a tail on the cells (1e-4 of the mass,
    ``"smooth"`` or ``"caps"`` of width 0.1 rad): ``attention_average_with_atoms`` and the
    direct log-sum-exp sums over cells and atoms together."""
    from test_lowrank_meridian import CENTRES

    model = Model("sa", beta, np.eye(3), B_CASES["general"], V)
    if tail == "smooth":
        rho = 1e-4 * mixture(mesh.points, [1.0, 0.5, 0.3], [8.0, 3.0, 15.0], floor=0.02)
    else:
        rho = 1e-4 * mixture(mesh.points, [1.0, 0.5, 0.3], [100.0, 100.0, 100.0])
    rng = np.random.default_rng(3)
    atoms = np.repeat(CENTRES[:2], 20, axis=0) + 0.02 * rng.standard_normal((40, 3))
    atoms = np.concatenate([atoms, CENTRES[2:]])
    atoms /= np.linalg.norm(atoms, axis=1)[:, None]
    log_m = np.concatenate([np.log(rng.uniform(0.5, 1.0, 40) / 40.0), [-1500.0]])
    ev = LowRankPoints(model, mesh.points, mesh.area, mesh.face_point)
    if peel_min_pairs is not None:
        ev.peel_min_pairs = peel_min_pairs
    if peel_min_gain is not None:
        ev.peel_min_gain = peel_min_gain
    got = ev.attention_average_with_atoms(rho, atoms, log_m)
    sources = np.concatenate([mesh.points, atoms])
    with np.errstate(divide="ignore"):
        z, n, _ = logsumexp_sums(
            model.kernel.query(mesh.face_point),
            sources,
            np.concatenate([np.log(rho * mesh.area), log_m]),
            sources @ model.V.T,
        )
    return ev, got, clip_norm(n / z[:, None], np.linalg.norm(V, 2))


@pytest.mark.parametrize("beta", [30.0, 300.0])
@pytest.mark.parametrize("tail", ["smooth", "caps"])
@pytest.mark.parametrize("peel_min_pairs", [0, None])
def test_atoms_beside_the_cells_match_the_direct_sums(mesh, beta, tail, peel_min_pairs):
    """Equal to the direct sums to 1e-8 of ||V|| at every face midpoint, with and without
    peeling (measured: 2e-13 with the smooth tail, 3e-11 to 5e-9 with the caps). Behind a
    smooth tail every row is certified at the first level (no direct sum); behind the caps at
    beta = 300 every level of peeling (the default) leaves fewer rows to the full direct sums
    (measured 34% against 77%), and the peeling ended at the first level that certifies less
    than a quarter of its rows (``peel_min_gain = 0.25``) a share in between (measured 65%),
    as accurate."""
    ev, got, want = atoms_beside_a_tail(mesh, beta, tail, peel_min_pairs)
    assert np.isfinite(got).all()
    assert np.abs(got - want).max() / np.linalg.norm(V, 2) <= 1e-8
    if tail == "smooth":
        assert ev.direct_fraction == 0.0
    elif beta == 300.0 and peel_min_pairs == 0:
        unpeeled = atoms_beside_a_tail(mesh, beta, tail)[0]
        assert 0.0 < ev.direct_fraction < 0.6 * unpeeled.direct_fraction
        ended, got_ended, _ = atoms_beside_a_tail(mesh, beta, tail, 0, peel_min_gain=0.25)
        assert np.abs(got_ended - want).max() / np.linalg.norm(V, 2) <= 1e-8
        assert ev.direct_fraction < ended.direct_fraction < unpeeled.direct_fraction


def test_atoms_need_the_normalized_model(mesh):
    rho = np.ones(mesh.n_cells)
    ev = LowRankPoints(
        Model("usa", 30.0, np.eye(3), B_CASES["general"], V),
        mesh.points,
        mesh.area,
        mesh.face_point,
    )
    with pytest.raises(ValueError, match="sa at beta > 0"):
        ev.attention_average_with_atoms(rho, mesh.points[:2], np.zeros(2))
