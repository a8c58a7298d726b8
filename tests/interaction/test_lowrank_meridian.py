"""The general-B evaluator of the sphere, lowrank_meridian.

References:
- direct log-sum-exp quadrature on a fine Gauss grid, on which the band-limited rho times the
  kernel is integrated exactly (the kernel exp(kappa <u, y>) is below 1e-16 of its peak beyond
  degree ~ sqrt(2 kappa ln 1e16): 185 at kappa = 450);
- :class:`SphereDirectQuadrature` on the grid itself, which computes the rows where the scaled
  partition function is tiny;
- the linearization around the uniform density, derived by hand for V = B^-T (in
  :mod:`spheredens.references`).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from spheredens.grids import GaussGrid
from spheredens.interaction import (
    DirectQuadrature,
    Layout,
    LowRankMeridianInteraction,
    SphereDirectQuadrature,
    make_evaluator,
    make_sphere_interaction,
)
from spheredens.models import Model
from spheredens.references import mean_field_velocity
from spheredens.verify import linear_growth_errors

V = np.diag([1.0, 0.8, 0.5])
B_CASES = {
    # condition numbers 2.3, 3.0 and 1.25 (two equal singular values, a reflection)
    "general": np.array([[1.2, 0.3, 0.1], [-0.2, 0.8, 0.4], [0.1, 0.2, 1.5]]),
    "cond3": (
        Rotation.from_rotvec([0.4, 0.1, -0.9]).as_matrix()
        @ np.diag([1.5, 1.0, 0.5])
        @ Rotation.from_rotvec([-0.3, 0.8, 0.2]).as_matrix().T
    ),
    "axisymmetric_reflection": (
        Rotation.from_rotvec([1.1, -0.5, 0.3]).as_matrix()
        @ np.diag([1.0, 0.8, -0.8])
        @ Rotation.from_rotvec([0.2, 0.2, 1.2]).as_matrix().T
    ),
}
LMAX = 31
CENTRES = np.array([[0.3, 0.5, 0.8], [-0.6, 0.2, -0.3], [0.1, -0.9, 0.2]])
CENTRES = CENTRES / np.linalg.norm(CENTRES, axis=1)[:, None]


def mixture(points, weights, kappas, floor=0.0):
    return (
        sum(w * np.exp(k * (points @ mu - 1.0)) for w, k, mu in zip(weights, kappas, CENTRES))
        + floor
    )


@pytest.fixture(scope="module")
def grid():
    return GaussGrid(LMAX)


def fine_oracle(model, grid, rho_c, targets, lmax_fine):
    """N / Z at ``targets`` by log-sum-exp quadrature on a Gauss grid of degree lmax_fine."""
    nlat = (lmax_fine + 1) + (lmax_fine + 1) % 2
    fine = GaussGrid(grid.lmax, nlat=nlat, nphi=2 * nlat)
    oracle = DirectQuadrature(model, fine.points.reshape(-1, 3), fine.weight.reshape(-1), targets)
    return oracle.attention_average(fine.synth(rho_c).reshape(-1))


@pytest.mark.parametrize("beta", [1.0, 30.0, 300.0])
@pytest.mark.parametrize("case", list(B_CASES))
def test_velocity_matches_direct_quadrature(grid, case, beta):
    """Agreement to 1e-10 relative to ||V|| where Z e^-kappa >= 1e-6 of its maximum (measured
    ~1e-12: the rank, grid degree and interpolation are chosen for round-off)."""
    model = Model("sa", beta, np.eye(3), B_CASES[case], V)
    rho_c = grid.analys(mixture(grid.points, [1.0, 0.5, 0.3], [8.0, 3.0, 15.0], floor=0.02))
    ev = make_sphere_interaction(model, grid)
    assert isinstance(ev, LowRankMeridianInteraction)
    rows = np.random.default_rng(1).choice(grid.nlat * grid.nphi, 300, replace=False)
    got = ev.attention_average(rho_c).reshape(-1, 3)[rows]
    want = fine_oracle(model, grid, rho_c, grid.points.reshape(-1, 3)[rows], 255)
    h = ev.fields(rho_c)[rows, 0]
    kept = h >= 1e-6 * h.max()
    assert kept.all()  # this density: Z e^-kappa varies by less than 1e2
    err = np.abs(got - want)[kept].max() / np.linalg.norm(V, 2)
    assert err <= 1e-10, err
    assert ev.attributes()["lowrank_rank"] <= 20


def test_tiny_partition_function_rows_are_computed_in_the_log_domain(grid):
    """Where Z e^-kappa < 1e-6 of its maximum the rows are direct
    log-sum-exp quadrature, equal to SphereDirectQuadrature's; elsewhere the spectral value
    holds to 1e-8 of ||V|| for a density whose Z e^-kappa spans many decades (the floor of every
    spectral evaluator there is ~1e-14 of the largest Z e^-kappa: measured 1e-9 at 1e-6 of it,
    1e-12 at 1e-3)."""
    model = Model("sa", 30.0, np.eye(3), B_CASES["general"], V)
    # positive and of degree 31 (exact on the grid, no Gibbs lobes): cos^62 of half the angle to
    # two centres, 1e-36 at 150 degrees from them; Z e^-kappa spans 10 decades
    rho = sum(w * ((1.0 + grid.points @ mu) / 2.0) ** 31 for w, mu in zip([1.0, 0.5], CENTRES))
    rho_c = grid.analys(rho)
    ev = LowRankMeridianInteraction(model, grid)
    got = ev.attention_average(rho_c).reshape(-1, 3)
    h = ev.fields(rho_c)[:, 0]
    small = h < 1e-6 * h.max()
    assert 0.05 < ev.fallback_fraction == small.mean() < 0.5
    direct = SphereDirectQuadrature(model, grid).attention_average(rho_c).reshape(-1, 3)
    assert np.abs(got[small] - direct[small]).max() <= 1e-12
    rows = np.flatnonzero(~small)[::7]
    want = fine_oracle(model, grid, rho_c, grid.points.reshape(-1, 3)[rows], 255)
    assert np.abs(got[rows] - want).max() <= 1e-8
    far = h[rows] >= 1e-3 * h.max()
    assert np.abs(got[rows][far] - want[far]).max() <= 1e-11


def test_frame_components_equal_the_projected_vectors(grid):
    """The scheme's fast path (components along e_theta, e_phi) is the vector path projected."""
    model = Model("sa", 30.0, np.eye(3), B_CASES["cond3"], V)
    layout = Layout(
        "sphere",
        "coefficients",
        grid,
        grid,
        frame=np.stack([grid.e_theta, grid.e_phi]),
        scheme="sh_spectral",
    )
    ev = make_evaluator(model, layout, "lowrank_meridian")
    rho_c = grid.analys(mixture(grid.points, [1.0, 0.5], [25.0, 40.0]))
    state = np.stack([rho_c, grid.analys(mixture(grid.points, [0.3, 1.0], [3.0, 8.0], 0.1))])
    fast = ev.velocity(state)
    vectors = ev.vectors(state)
    slow = np.stack(
        [
            np.stack([np.einsum("...d,...d->...", v, e) for e in (grid.e_theta, grid.e_phi)])
            for v in vectors
        ]
    )
    assert np.abs(fast - slow).max() <= 1e-14


def test_beta_zero_is_the_mean_field(grid):
    """beta = 0: X = P_x V m / mass, m the first moment, for any B."""
    model = Model("sa", 0.0, np.eye(3), B_CASES["general"], V)
    rho = mixture(grid.points, [1.0, 0.5], [2.0, 4.0], 0.1)
    ev = LowRankMeridianInteraction(model, grid)
    want = mean_field_velocity(grid.points, grid.weight, rho, V)
    assert np.abs(ev.vectors(grid.analys(rho))[0] - want).max() <= 1e-14


@pytest.mark.parametrize("beta", [2.0, 20.0])
def test_linear_growth_around_uniform(beta):
    """An exact reference with a non-orthogonal B.

    With V = B^-T the uniform density rho_0 = 1 / (4 pi) is steady, and the perturbation
    eps <a, x> has the first-order tendency 2 phi <w, x> - <grad_S phi, w>, w = B^-T a,
    phi = L(kappa) / kappa (derived in :mod:`spheredens.references`,
    :func:`~spheredens.references.linear_growth_tendency`). The scheme's linearized right-hand
    side (centred difference in eps with Richardson extrapolation, filter off;
    :func:`spheredens.verify.linear_growth_errors`, run by ``spheredens verify`` too) must give
    this to 1e-9, and the growth rate <f, df/dt> / <f, f> (B = I: 2 L(beta) / beta) to 1e-10.
    """
    tendency, rate, _ = linear_growth_errors(
        beta, LMAX, B_CASES["general"], np.array([0.3, -0.5, 0.8])
    )
    assert tendency <= 1e-9
    assert rate <= 1e-10
