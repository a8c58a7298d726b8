"""Direct quadrature and FFT convolution: agreement, bounds, extreme beta."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest

from spheredens.grids import CircleGrid
from spheredens.initial import von_mises_fisher_density
from spheredens.interaction import DirectQuadrature, FourierConvolution, make_interaction
from spheredens.models import Model


def rot(phi):
    return np.array([[np.cos(phi), -np.sin(phi)], [np.sin(phi), np.cos(phi)]])


def smooth_density(points):
    theta = np.arctan2(points[:, 1], points[:, 0])
    f = np.exp(0.8 * np.cos(theta - 0.3) + 0.5 * np.sin(2 * theta) + 0.2 * np.cos(3 * theta + 1))
    return f / (f.mean() * 2 * np.pi)


def model(name, beta, B, V):
    # Q = I, K = B gives Q^T K = B
    return Model(name, beta, np.eye(2), np.asarray(B, float), np.asarray(V, float))


V_GENERAL = np.array([[1.0, 0.3], [-0.2, 0.6]])


@pytest.mark.parametrize("offset", [0.0, 0.5], ids=["nodes", "faces"])
@pytest.mark.parametrize("beta", [0.0, 1.0, 10.0, 30.0])
@pytest.mark.parametrize("B", [np.eye(2), 1.7 * rot(0.7)], ids=["identity", "scaled_rotation"])
@pytest.mark.parametrize("name", ["sa", "usa"])
def test_fft_equals_direct_on_smooth_density(name, B, beta, offset):
    sources = CircleGrid(256, offset=0.5)
    targets = sources.shifted(offset)
    m = model(name, beta, B, V_GENERAL)
    rho = smooth_density(sources.points)[None, :]
    direct = DirectQuadrature(m, sources.points, sources.weight, targets.points).velocity(rho)
    fft = FourierConvolution(m, sources, targets).velocity(rho)
    scale = np.abs(direct).max()
    # both are the same discrete sum; only round-off (~n eps relative to the largest term) differs
    assert np.abs(fft - direct).max() <= 1e-12 * scale


def test_auto_choice_uses_fft_only_for_rotation_multiples():
    grid = CircleGrid(64)
    assert isinstance(
        make_interaction(model("sa", 5.0, 2 * rot(1.0), np.eye(2)), grid, grid), FourierConvolution
    )
    general = np.array([[1.75, 0.866025], [0.433013, 2.5]])
    assert isinstance(
        make_interaction(model("sa", 5.0, general, np.eye(2)), grid, grid), DirectQuadrature
    )
    # a reflection (det < 0) is not a rotation
    assert isinstance(
        make_interaction(model("sa", 5.0, np.diag([1.0, -1.0]), np.eye(2)), grid, grid),
        DirectQuadrature,
    )


def test_direct_matches_plain_formula_at_moderate_beta():
    """Against the textbook formula, exp without any rescaling (fine at beta = 2)."""
    grid = CircleGrid(128)
    B = np.array([[1.75, 0.866025], [0.433013, 2.5]])
    m = model("sa", 2.0, B, V_GENERAL)
    rho = smooth_density(grid.points)
    x = grid.shifted(0.5).points
    kernel = np.exp(2.0 * np.einsum("fi,ij,sj->fs", x, B, grid.points))
    num = (kernel * rho * grid.weight) @ (grid.points @ V_GENERAL.T)
    den = (kernel * rho * grid.weight).sum(1)
    u = num / den[:, None]
    expected = u - np.sum(u * x, 1, keepdims=True) * x
    got = DirectQuadrature(m, grid.points, grid.weight, x).velocity(rho[None])[0]
    assert np.abs(got - expected).max() <= 1e-14 * 50  # a few dozen ulps of |V|


def mp_average(x, sources, a, beta, B, V, dps=60):
    """N/Z at one target in 60-digit arithmetic (independent reference)."""
    mpmath.mp.dps = dps
    bx = B.T @ x
    z = mpmath.mpf(0)
    n = [mpmath.mpf(0), mpmath.mpf(0)]
    vy = sources @ V.T
    for j in range(len(a)):
        if a[j] == 0:
            continue
        w = mpmath.exp(beta * mpmath.mpf(float(bx @ sources[j]))) * mpmath.mpf(float(a[j]))
        z += w
        n[0] += w * vy[j, 0]
        n[1] += w * vy[j, 1]
    return np.array([float(n[0] / z), float(n[1] / z)])


@pytest.mark.parametrize("beta", [1e3, 1e4])
def test_direct_extreme_beta_and_tiny_density(beta):
    """beta up to 1e4 and densities down to 1e-300: finite, |N/Z| <= ||V||, exact vs 60 digits."""
    grid = CircleGrid(256)
    B = np.array([[1.75, 0.866025], [0.433013, 2.5]])
    V = V_GENERAL
    m = model("sa", beta, B, V)
    rho = von_mises_fisher_density(grid.points, np.array([1.0, 0.0]), 400.0)
    rho = np.maximum(rho, 1e-300)  # the far side of the circle holds values ~1e-300
    targets = grid.shifted(0.5)
    ev = DirectQuadrature(m, grid.points, grid.weight, targets.points)
    avg = ev.attention_average(rho)
    assert np.all(np.isfinite(avg))
    v_norm = np.linalg.norm(V, 2)
    assert np.linalg.norm(avg, axis=1).max() <= v_norm * (1 + 1e-15)
    # rows looking at the bulk, at the 1e-300 tail, and in between
    a = rho * grid.weight
    for row in (0, 64, 128, 200):
        ref = mp_average(targets.points[row], grid.points, a, beta, B, V)
        assert np.abs(avg[row] - ref).max() <= 1e-12, row


def test_density_with_only_subnormal_scale_values_is_handled():
    grid = CircleGrid(64)
    m = model("sa", 1e4, np.eye(2), np.eye(2))
    rho = np.full(64, 1e-300)
    rho[10] = 64 / (2 * np.pi)
    vel = DirectQuadrature(m, grid.points, grid.weight, grid.points).velocity(rho[None])
    assert np.all(np.isfinite(vel)) and np.linalg.norm(vel, axis=-1).max() <= 1 + 1e-15


@pytest.mark.parametrize("beta", [100.0, 1e4])
def test_fft_guard_on_concentrated_density(beta):
    """Where the FFT partition function is round-off, the evaluator falls back to quadrature."""
    grid = CircleGrid(512)
    m = model("sa", beta, 1.3 * rot(0.4), V_GENERAL)
    rho = np.maximum(von_mises_fisher_density(grid.points, np.array([0.0, 1.0]), 300.0), 1e-200)
    targets = grid.shifted(0.5)
    fft = FourierConvolution(m, grid, targets).attention_average(rho)
    direct = DirectQuadrature(m, grid.points, grid.weight, targets.points).attention_average(rho)
    assert np.linalg.norm(fft, axis=1).max() <= np.linalg.norm(V_GENERAL, 2) * (1 + 1e-15)
    # the FFT keeps ~ eps / 1e-6 relative digits where it is used
    assert np.abs(fft - direct).max() <= 1e-8
