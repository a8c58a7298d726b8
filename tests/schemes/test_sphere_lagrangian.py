"""The sphere's Lagrangian scheme ``log_lagrangian``: its blocks (the cubed-sphere index, the
initial particles, split and merge), and the whole scheme against exact solutions of the
zero-temperature model (characteristics integrated here with scipy, independently of the
package), beta = 0 and the growth rate around the uniform density."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import assert_resumes_bit_for_bit
from scipy.special import logsumexp

import spheredens as sd
from spheredens.grids import CubedSphereCells
from spheredens.grids._cubed_sphere import cube_index, cube_point, morton
from spheredens.initial import von_mises_fisher_log_density
from spheredens.interaction._particle_flow import cell_moments
from spheredens.references import linear_growth_tendency, mean_field_velocity, reference_quadrature
from spheredens.schemes._particle_remesh import (
    LOOK_LENGTH,
    LOOK_RADIUS,
    _LocalQuadratic,
    log_area,
    look_lengths,
    merge,
    split,
    tangent_shapes,
)
from spheredens.simulate import Observer
from spheredens.verify import GENERAL_B_3D, steady_uniform_model

sys.path.insert(0, str(Path(__file__).parent))
from _characteristics import (  # noqa: E402
    B_ZT,
    V_ZT,
    backward_feet,
    zero_temperature_path,
)

ZERO_TEMPERATURE = {"name": "sa_zero_temperature", "K": B_ZT.tolist(), "V": V_ZT.tolist()}


def _scheme(model, initial, n, tolerance, T, **options):
    cfg = sd.config_from_dict(
        {
            "model": model,
            "domain": {"name": "sphere"},
            "initial": initial,
            "discretization": {
                "scheme": "log_lagrangian",
                "n": n,
                "tolerance": tolerance,
                "allow_underresolved": True,
                **options,
            },
            "time": {"t_end": T, "times": [0.0, T]},
        }
    )
    return sd.make_scheme(sd.Problem.from_config(cfg), cfg.discretization), cfg


def _vmf(mean, kappa):
    return {"name": "von_mises_fisher", "means": [list(mean)], "kappas": [kappa]}


# -- the blocks ----------------------------------------------------------------------------------
def test_the_cube_index_finds_the_cell_of_every_point() -> None:
    n = 8
    rng = np.random.default_rng(0)
    for face in range(6):
        i, j = rng.integers(0, n, 50), rng.integers(0, n, 50)
        frac_i, frac_j = rng.uniform(0.05, 0.95, 50), rng.uniform(0.05, 0.95, 50)
        alpha = -math.pi / 4 + (i + frac_i) * math.pi / 2 / n
        beta = -math.pi / 4 + (j + frac_j) * math.pi / 2 / n
        key = cube_index(cube_point(face, alpha, beta), n)
        assert np.array_equal(key, face * n * n + morton(i, j))


def test_the_initial_particles_hold_the_density_cell_by_cell() -> None:
    """kappa = 40 about e_3: mass 1 in the log domain, the lightest particle e^-70..-80 of the
    heaviest (the tail kept), the cells' chord areas sum to 4 pi within 5%."""
    log_m, x, shape = CubedSphereCells(8).log_moments(lambda p: 40.0 * (p[:, 2] - 1.0))
    log_m = log_m - logsumexp(log_m)
    assert len(x) == 6 * 64
    np.testing.assert_allclose(np.linalg.norm(x, axis=1), 1.0, atol=1e-14)
    assert 70.0 < log_m.max() - log_m.min() < 80.0
    areas = np.exp(log_area(shape))
    assert abs(areas.sum() / (4 * math.pi) - 1.0) < 0.05


def test_split_keeps_the_mass_and_follows_the_log_linear_profile() -> None:
    """log rho = 30 x_1: every particle cut until none is longer than s_max, the mass to
    round-off, the first moment to O(length^2), and the children's mean log densities on the
    profile (splitting without the fitted slope leaves the heavy side 2x too light)."""
    log_m, x, shape = CubedSphereCells(16).log_moments(lambda p: 30.0 * p[:, 0])
    point = 30.0 * x[:, 0] + log_area(shape)
    total = logsumexp(log_m)
    s_max = 0.5 * float(np.linalg.svd(shape, compute_uv=False)[:, 0].min())
    new_m, new_x, new_shape, new_point, depths = split(log_m, x, shape, point, s_max)
    assert len(depths) >= len(x)
    assert abs(logsumexp(new_m) - total) < 1e-13
    assert np.all(np.linalg.svd(new_shape, compute_uv=False)[:, 0] <= s_max * (1 + 1e-12))
    w0, w1 = np.exp(log_m - total), np.exp(new_m - total)
    assert np.linalg.norm(w0 @ x - w1 @ new_x) < 1e-3
    ell = new_m - log_area(new_shape)
    resid = (ell - 30.0 * new_x[:, 0]) - np.median(ell - 30.0 * new_x[:, 0])
    assert np.percentile(np.abs(resid), 90) < 0.15
    # lambda (the log density at each child's centroid) from the fitted slope: log rho is
    # linear in R^3 here, so the fit is exact up to the children's step off the sphere
    lam = new_point - log_area(new_shape)
    assert np.abs(lam - 30.0 * new_x[:, 0]).max() < 0.05


def test_a_limited_split_cuts_a_cluster_in_halves_and_keeps_a_smooth_profile() -> None:
    """A cluster's particle (e^17 denser than the tail about it, stretched to 3 split lengths)
    with split_slope = "limited": cut into 4 pieces of equal mass (the fitted slope, skewed by
    the tail's own gradient, gives one end far more of it), mass to round-off, the first moment
    kept. On the smooth log rho = 30 x_1 the limit acts only about the extrema +-e_1 (where
    the density's gradient on S^2 vanishes; 0.3% of the children): elsewhere the same children
    as the fitted slope's to round-off."""
    log_m, x, shape = CubedSphereCells(8).log_moments(lambda p: 4.0 * p[:, 0])
    c = np.array([0.0, 0.6, 0.8])
    keep = np.arccos(np.clip(x @ c, -1.0, 1.0)) > 0.3  # the tail about the cluster
    log_m, x, shape = log_m[keep], x[keep], shape[keep]
    log_m -= logsumexp(log_m)
    s_max = 0.05
    axis = np.cross(c, [1.0, 0.0, 0.0])
    cluster = np.stack([3.0 * s_max * axis, 1e-9 * np.cross(c, axis)], axis=-1)[None]
    density = np.max(log_m - log_area(shape)) + 17.0
    log_m = np.r_[log_m, density + log_area(cluster)]
    x, shape = np.vstack([x, c]), np.concatenate([shape, cluster])
    total = logsumexp(log_m)
    for limited, even in ((True, True), (False, False)):
        new_m, new_x, _, _, _ = split(log_m, x, shape, log_m + 0.0, s_max, limited)
        assert abs(logsumexp(new_m) - total) < 1e-13
        pieces = np.arccos(np.clip(new_x @ c, -1.0, 1.0)) < 0.2
        assert pieces.sum() == 4
        shares = np.exp(new_m[pieces] - logsumexp(new_m[pieces]))
        assert (np.ptp(shares) < 1e-12) == even, shares
        first = shares @ new_x[pieces]
        # on the great circle through c (the children projected onto S^2): its direction
        assert np.linalg.norm(first / np.linalg.norm(first) - c) < (1e-12 if even else 0.1)
    log_m, x, shape = CubedSphereCells(16).log_moments(lambda p: 30.0 * p[:, 0])
    s_max = 0.5 * float(np.linalg.svd(shape, compute_uv=False)[:, 0].min())
    fitted = split(log_m, x, shape, log_m + 0.0, s_max)
    limited = split(log_m, x, shape, log_m + 0.0, s_max, True)
    differ = np.abs(fitted[0] - limited[0]) > 1e-12
    assert differ.sum() < 0.005 * len(differ)
    assert np.all(np.abs(fitted[1][differ, 0]) > np.cos(0.2))  # only about the extrema +-e_1
    np.testing.assert_allclose(fitted[1][~differ], limited[1][~differ], rtol=0.0, atol=1e-12)


def test_the_particles_where_a_cluster_looks_are_split_to_half_the_kernel_width() -> None:
    """One particle at c (a cluster) and a tail on the n = 16 cubed sphere (none of its
    particles 1e-3 of the mass): the
    particles within LOOK_RADIUS widths + s_max of B^T c / |B^T c| get LOOK_LENGTH widths, the
    others s_max; without a particle of 1e-3 of the mass, every one s_max. Split with those
    lengths, none is longer than its own, the mass is kept to round-off, and the tail in the
    cap is sampled 4 times finer than the kernel's width."""
    beta = 300.0
    B = np.array([[1.75, 0.866026, 0.4], [0.433013, 2.5, 0.2], [0.2, 0.2, 2.0]])
    log_m, x, shape = CubedSphereCells(16).log_moments(lambda p: -5.0 * p[:, 2])
    c = np.array([0.8483, 0.4867, 0.2084])
    log_m -= logsumexp(log_m)
    tail = 0.5e-3 / float(np.exp(log_m.max()))  # its heaviest particle 5e-4 of the mass
    log_m = np.r_[log_m + math.log(tail), math.log(1.0 - tail)]
    x = np.vstack([x, c])
    shape = np.concatenate([shape, 1e-4 * shape[:1]])

    def query(points):
        return beta * points @ B

    s_max = 1.05 * float(np.linalg.svd(shape[:-1], compute_uv=False)[:, 0].max())
    lengths = look_lengths(log_m, x, query, s_max)
    q = beta * B.T @ c
    width = float(np.linalg.norm(q)) ** -0.5
    angle = np.arccos(np.clip(x @ (q / np.linalg.norm(q)), -1.0, 1.0))
    inside = angle <= LOOK_RADIUS * width + s_max
    assert 20 < inside.sum() < 200
    assert np.all(lengths[inside] == LOOK_LENGTH * width)
    assert np.all(lengths[~inside] == s_max)
    even = np.full(len(x) - 1, -math.log(len(x) - 1))  # each particle 6.5e-4 of the mass
    assert np.all(look_lengths(even, x[:-1], query, s_max) == s_max)
    point = log_m + 0.0
    new_m, new_x, new_shape, _, _ = split(log_m, x, shape, point, lengths)
    new_m, new_x, new_shape, _, _ = split(new_m, new_x, new_shape, new_m + 0.0, s_max)
    assert abs(logsumexp(new_m) - logsumexp(log_m)) < 1e-13
    longest = np.linalg.svd(new_shape, compute_uv=False)[:, 0]
    near = np.arccos(np.clip(new_x @ (q / np.linalg.norm(q)), -1.0, 1.0)) < 2.0 * width
    assert near.sum() >= 16
    assert longest[near].max() <= LOOK_LENGTH * width * (1 + 1e-12)
    assert longest.max() <= s_max * (1 + 1e-12)


def test_merge_sums_the_masses_exactly_and_keeps_the_mean() -> None:
    rng = np.random.default_rng(1)
    n_fine = 2**18
    h = math.pi / 2 / n_fine  # the centre of a cell, 1e-7 rad = 0.016 cells from its faces
    centre = cube_point(2, -math.pi / 4 + 1000.5 * h, -math.pi / 4 + 70000.5 * h)
    x = centre + 1e-7 * rng.uniform(-1.0, 1.0, size=(40, 3))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    x = np.vstack([x, [[1.0, 0.0, 0.0], [0.0, 0.0, -1.0]]])
    log_m = np.r_[rng.uniform(-1500.0, -1400.0, 40), -3.0, -2000.0]
    e1 = np.cross(x, [0.3, -0.4, 0.5])
    e1 /= np.linalg.norm(e1, axis=1, keepdims=True)
    shape = 1e-3 * np.stack([e1, np.cross(x, e1)], axis=-1)  # tangent squares
    new_m, new_x, _, _, merged = merge(log_m, x, shape, log_m.copy(), n_fine)
    assert merged == 39 and len(new_x) == 3
    assert abs(logsumexp(new_m) - logsumexp(log_m)) < 1e-13
    cluster = np.argmin(np.linalg.norm(new_x - centre, axis=1))
    assert abs(new_m[cluster] - logsumexp(log_m[:40])) < 1e-12
    w = np.exp(log_m[:40] - log_m[:40].max())
    assert np.linalg.norm(new_x[cluster] - w @ x[:40] / np.linalg.norm(w @ x[:40])) < 1e-15



def _cell_of_particles(offsets, n_fine, log_m, side, cell=(1000, 70000)):
    """Particles at ``offsets`` (k, 2) (radians, in the tangent plane) about the centre of one
    cell of the n_fine cubed sphere, with log masses ``log_m`` and square shapes of ``side``
    (a pair (long, short): rectangles, long along the first tangent direction)."""
    h = math.pi / 2 / n_fine
    centre = cube_point(2, -math.pi / 4 + (cell[0] + 0.5) * h, -math.pi / 4 + (cell[1] + 0.5) * h)
    e = np.cross(centre, [0.3, -0.4, 0.5])
    e /= np.linalg.norm(e)
    frame = np.stack([e, np.cross(centre, e)], axis=1)
    x = centre + np.asarray(offsets) @ frame.T
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    sides = np.broadcast_to(np.asarray(side, dtype=float), (2,))
    shape = tangent_shapes(x, np.repeat((frame * sides)[None], len(x), axis=0))
    return centre, frame, x, np.asarray(log_m, dtype=float), shape


def test_merge_by_moments_keeps_a_heavy_particles_extent_when_light_ones_join() -> None:
    # a cluster's particle 1e-9 rad wide, and 20 particles 1e-6 of its mass each, 1e-8 to 3e-8
    # rad away, in the same cell of 1e-7 rad
    n_fine = 2**24
    rng = np.random.default_rng(2)
    offsets = np.vstack([[0.0, 0.0], rng.uniform(-3e-8, 3e-8, size=(20, 2))])
    log_m = np.r_[0.0, np.full(20, math.log(1e-6))]
    centre, _, x, log_m, shape = _cell_of_particles(offsets, n_fine, log_m, 1e-9)
    assert len(np.unique(cube_index(x, n_fine))) == 1
    by_area = merge(log_m, x, shape, log_m.copy(), n_fine)
    by_moments = merge(log_m, x, shape, log_m.copy(), n_fine, moments=True)
    for new_m, new_x, *_ in (by_area, by_moments):
        assert len(new_m) == 1 and abs(new_m[0] - logsumexp(log_m)) < 1e-15
        assert np.linalg.norm(new_x[0] - x[0]) < 1e-12  # the light ones move the mean little
    # the area's sum takes the light particles' extent: 21 times the area
    assert abs(log_area(by_area[2])[0] - log_area(shape[:1])[0] - math.log(21.0)) < 1e-9
    # the moments keep the heavy particle's: its half-axes to 1e-6 (the light ones' spread, of
    # weight 0, is left out; the heavy one sits within 1e-12 rad of the merged mean)
    axes = np.linalg.svd(by_moments[2][0], compute_uv=False)
    assert np.allclose(axes, 1e-9, rtol=1e-6)
    # lambda (the log density at the centroid) is the same either way
    lam = [point - log_area(f) for _, _, f, point, _ in (by_area, by_moments)]
    assert abs(lam[0][0] - lam[1][0]) < 1e-12


def test_merge_by_moments_gives_two_equal_particles_their_spread() -> None:
    # two particles of equal mass 2a apart and 1e-10 rad wide: the merged second moment is a^2
    # along their separation, so the merged parallelogram's long edge is sqrt(12) a
    n_fine, a = 2**24, 2e-8
    _, frame, x, log_m, shape = _cell_of_particles([[a, 0.0], [-a, 0.0]], n_fine, [-1.0, -1.0],
                                                   1e-10)
    new_m, new_x, merged, _, count = merge(log_m, x, shape, log_m.copy(), n_fine, moments=True)
    assert count == 1 and abs(new_m[0] - (math.log(2.0) - 1.0)) < 1e-15
    axes = np.linalg.svd(merged[0], compute_uv=False)
    second = a * a + 1e-20 / 12.0  # the spread plus each square's own second moment
    assert abs(axes[0] - math.sqrt(12.0 * second)) < 1e-6 * axes[0]
    assert abs(axes[1] - 1e-10) < 1e-6 * 1e-10
    long_edge = merged[0][:, np.argmax(np.linalg.norm(merged[0], axis=0))]
    assert abs(abs(long_edge @ frame[:, 0]) / np.linalg.norm(long_edge) - 1.0) < 1e-6
    assert abs(long_edge @ new_x[0]) < 1e-20  # tangent


def test_merge_by_moments_keeps_the_width_of_needles_far_apart_along_their_length() -> None:
    # two needles 1e-12 rad wide and 1e-3 long, 3e-3 rad apart along their length, in one cell
    # of 6e-3 rad: the merged width is theirs (the 3 x 3 moment's eigenvalues would give 0:
    # 1e-24 against 1e-6 is below round-off), the length their spread
    n_fine, a = 256, 1.5e-3
    _, frame, x, log_m, shape = _cell_of_particles([[a, 0.0], [-a, 0.0]], n_fine, [-3.0, -3.0],
                                                   (1e-3, 1e-12), cell=(100, 100))
    assert len(np.unique(cube_index(x, n_fine))) == 1
    _, _, merged, point, count = merge(log_m, x, shape, log_m.copy(), n_fine, moments=True)
    assert count == 1 and np.isfinite(point).all()
    long, short = np.linalg.svd(merged[0], compute_uv=False)
    assert abs(short - 1e-12) < 1e-6 * 1e-12
    # the spread a^2 / (1 + a^2) and the needles' own length (tangent where they sit: to a^2)
    assert abs(long - math.sqrt(12.0 * (a * a / (1.0 + a * a) + 1e-6 / 12.0))) < 1e-6 * long

# -- zero temperature by characteristics ---------------------------------------------------------
def _exact_log_density(points, T, mean, kappa):
    """log rho_T at ``points``: log rho_0(x_0) - int_0^T div X(x(s)) ds, backward (DOP853)."""
    x0, divergence_integral = backward_feet(points, T)
    return von_mises_fisher_log_density(x0, np.asarray(mean), kappa) - divergence_integral



@pytest.mark.parametrize("split_slope", ["fitted", "limited"])
def test_a_run_merged_by_moments_keeps_the_mass_and_resumes_bit_for_bit(
    tmp_path, split_slope
) -> None:
    """Two von Mises-Fisher bumps gathering at beta = 30 (general B) to T = 3, n = 8, merge
    cells of 3 / (beta sigma_max) rad, merged particles shaped by their moments, splits by the
    fitted or the limited slope: particles merge, the mass stays 1 to 1e-12, every mass is
    finite, and a run stopped after two steps and resumed ends bit for bit where the
    uninterrupted one does."""
    cfg = sd.config_from_dict(
        {
            "model": {"name": "sa", "beta": 30.0, "K": GENERAL_B_3D.tolist()},
            "domain": {"name": "sphere"},
            "initial": {
                "name": "von_mises_fisher",
                "means": [[0.0, 0.6, 0.8], [0.0, -0.6, -0.8]],
                "kappas": [4.0, 2.0],
                "weights": [0.7, 0.3],
            },
            "discretization": {
                "scheme": "log_lagrangian",
                "n": 8,
                "tolerance": 1e-3,
                "merge": 3.0,
                "merge_shape": "moments",
                "split_slope": split_slope,
                "allow_underresolved": True,
            },
            "time": {"t_end": 3.0, "snapshots": 3},
        }
    )
    full = sd.run(cfg, output=tmp_path / "full.nc", progress=False)
    assert full.attrs["merge_shape"] == "moments" and int(full.attrs["merges"]) > 0  # 106
    assert full.attrs["split_slope"] == split_slope
    assert np.abs(full["mass"].values - 1.0).max() <= 1e-12
    assert float(full["min_rho"].min()) >= 0.0
    assert_resumes_bit_for_bit(cfg, tmp_path, full, ("rho", "mass", "w2_projection"))


def test_an_unknown_split_slope_is_refused_with_the_choices() -> None:
    """split_slope = "steep": a ConfigError naming the key and both choices."""
    with pytest.raises(sd.ConfigError) as caught:
        sd.config_from_dict(
            {
                "model": {"name": "sa", "beta": 1.0},
                "domain": {"name": "sphere"},
                "initial": {"name": "uniform"},
                "discretization": {"scheme": "log_lagrangian", "split_slope": "steep"},
            }
        )
    message = str(caught.value)
    assert "discretization.split_slope" in message and "'steep'" in message
    assert "'fitted'" in message and "'limited'" in message


def test_the_moments_of_a_tilted_cell_match_quadrature() -> None:
    """log of the normalizer, mean and second moment of e^{a s} on [-1/2, 1/2], against
    40-digit quadrature, from a = 0 across the switch to the series (0.05) to a = 800."""
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 40
    a = np.array([0.0, 1e-8, 1e-3, 0.0499, 0.05, -0.2, 1.0, -7.0, 30.0, -300.0, 800.0])
    log_norm, mean, second = cell_moments(a.copy())

    def moment(c, p):
        return mpmath.quad(lambda s: s**p * mpmath.exp(c * s), [-0.5, 0, 0.5])

    for k, ak in enumerate(a):
        moments = [moment(mpmath.mpf(ak), p) for p in (0, 1, 2)]
        assert abs(log_norm[k] - float(mpmath.log(moments[0]))) < 1e-13 * max(1.0, abs(ak))
        assert abs(mean[k] - float(moments[1] / moments[0])) < 1e-13
        assert abs(second[k] - float(moments[2] / moments[0])) < 1e-13


@pytest.mark.parametrize("beta, bounds", [(30.0, (5e-4, 8e-5)), (300.0, (1e-3, 1.2e-4))])
def test_cell_sums_beat_point_sums_against_the_exact_tilted_von_mises_fisher(beta, bounds):
    """rho = vMF(mu, kappa = 20): the softmax average at x is that of vMF(kappa mu + q),
    q = beta B^T x, so X(x) = P_x V A_3(r) (kappa mu + q) / r, A_3(r) = coth r - 1 / r, exactly.
    At the 200 heaviest of the n x n cubed sphere's particles, the sums over cells
    (``quadrature = "cells"``) are within ``bounds`` at n = 16, 32 (measured 3.3e-4, 5.7e-5 at
    beta = 30; 7.7e-4, 8.5e-5 at beta = 300, where the particles are 3 and 1.5 times the
    kernel's width) and closer than the point sums (1.7e-3, 3.8e-4; 3.1e-3, 1.8e-4): 3.5 times
    at n = 16, 1.8 times at n = 32."""
    kappa, mu = 20.0, np.array([0.3, -0.5, 0.8]) / math.sqrt(0.98)
    V = np.diag([1.0, 0.5, 0.5])
    model = {"name": "sa", "beta": beta, "K": GENERAL_B_3D.tolist(), "V": V.tolist()}
    scheme, _ = _scheme(model, _vmf(mu, kappa), 16, 1e-3, 1.0)
    interaction, B = scheme.interaction, np.asarray(scheme.problem.model.B)
    for n, bound in zip((16, 32), bounds):
        log_m, x, shape = CubedSphereCells(n).log_moments(lambda p: kappa * (p @ mu - 1.0))
        shape = tangent_shapes(x, shape)
        heavy = np.argsort(-log_m)[:200]
        k = kappa * mu + beta * x[heavy] @ B
        r = np.linalg.norm(k, axis=1, keepdims=True)
        ey = ((1.0 / np.tanh(r) - 1.0 / r) * k / r) @ V.T
        exact = ey - np.sum(ey * x[heavy], axis=1, keepdims=True) * x[heavy]
        errors = [
            np.abs(interaction.flow(x, log_m, shape, quadrature)[0][heavy] - exact).max()
            for quadrature in ("cells", "points")
        ]
        assert errors[0] < bound, errors
        assert errors[0] < errors[1] / (3.5 if n == 16 else 1.8), errors


@pytest.mark.parametrize("multirate, tolerance", [(False, 1e-5), (True, 5e-6)])
def test_the_log_density_at_the_particles_keeps_a_tail_of_e_minus_800_between_remeshings(
    multirate, tolerance
):
    """kappa = 400 (log rho spans 800 e-folds, down to 1e-345), a general B, T = 1, with the
    splits switched off: lambda at every particle, however deep, equals the exact log density
    to 1e-3, the mass is 1 to 1e-12. Measured: single steps at tolerance 1e-5, 7.1e-4 with the
    default shape tolerance, 100 times the positions' (1.5e-4 with the shapes held to the
    positions' tolerance); with local sub-steps (the default), whose steps are sized so that
    most particles run near the tolerance, 1.28e-3 at 1e-5 and 6.8e-4 at 5e-6."""
    mean = [0.0, 0.6, 0.8]
    scheme, cfg = _scheme(
        ZERO_TEMPERATURE, _vmf(mean, 400.0), 16, tolerance, 1.0, multirate=multirate
    )
    scheme.s_max = 1e9  # never split
    state = sd.simulate(scheme, cfg.time).state
    x = state[0, 1:4].T
    exact = _exact_log_density(x, 1.0, mean, 400.0)
    assert exact.min() < math.log(1e-300)
    assert np.abs(scheme.point_log_density(state)[0] - exact).max() < 1e-3
    assert abs(scheme.masses(state)[0] - 1.0) < 1e-12
    assert np.all(np.isfinite(state[0, 0]))


def _split_errors(kappa, ns, tolerance):
    """The largest error of lambda over all particles (against the characteristics) at T = 1,
    a general B, with the scheme's splits, for each n of ``ns``; checks the splits happened and
    the mass. Returns (errors, the deepest exact log density)."""
    mean = [0.0, 0.6, 0.8]
    errors = []
    for n in ns:
        scheme, cfg = _scheme(ZERO_TEMPERATURE, _vmf(mean, kappa), n, tolerance, 1.0)
        state = sd.simulate(scheme, cfg.time).state
        exact = _exact_log_density(state[0, 1:4].T, 1.0, mean, kappa)
        errors.append(np.abs(scheme.point_log_density(state)[0] - exact).max())
        assert scheme.splits > 0.2 * 6 * n * n
        assert abs(scheme.masses(state)[0] - 1.0) < 1e-12
    return errors, float(exact.min())


def test_the_split_fit_stays_within_its_neighbours_where_they_are_nearly_collinear():
    """A run at beta = 300 (interpolant, n = 32) failed at t = 60 with log densities of 1e306:
    children fitted through neighbours on a line, where the least-squares quadratic's cross
    terms are noise over 1e-6, and their children through them. The fit is now held within its
    neighbours' range widened by its own width, and a non-finite neighbour gives the parent's
    value: at a quarter length off a line of 10 neighbours 1e-6 apart across it, the fit stays
    within that range (the raw quadratic gives 17 times the range), and where it is smooth it is
    unchanged (to 1e-12 of the exact quadratic)."""
    rng = np.random.default_rng(11)
    x0 = np.array([[0.0, 0.0, 1.0]])
    along = np.linspace(-0.05, 0.05, 10)
    near_x = np.stack([along, 1e-6 * rng.normal(size=10), np.ones(10)], axis=1)
    near_x /= np.linalg.norm(near_x, axis=1, keepdims=True)
    x = np.concatenate([x0, near_x])
    near = np.arange(1, 11)[None, :]
    v = np.concatenate([[0.0], along + 1e-3 * rng.normal(size=10)])
    fit = _LocalQuadratic(x, v, np.array([0]), near)
    off = np.array([[0.0, 0.0125, 1.0]]) / math.hypot(0.0125, 1.0)
    span = v.max() - v.min()
    assert abs(fit.unbounded(off)[0]) > 10.0 * span
    assert v.min() - span <= fit(off)[0] <= v.max() + span
    v_bad = v.copy()
    v_bad[3] = -np.inf
    assert _LocalQuadratic(x, v_bad, np.array([0]), near)(off)[0] == 0.0
    # a smooth quadratic on a ring of neighbours: the fit is exact, the bounds do not act
    angle = np.linspace(0.0, 2.0 * np.pi, 10, endpoint=False)
    ring = np.stack([0.05 * np.cos(angle), 0.05 * np.sin(angle), np.ones(10)], axis=1)
    ring /= np.linalg.norm(ring, axis=1, keepdims=True)
    xr = np.concatenate([x0, ring])
    quad = lambda p: 3.0 * p[:, 0] - 40.0 * p[:, 0] ** 2 + 25.0 * p[:, 0] * p[:, 1]  # noqa: E731
    exact_fit = _LocalQuadratic(xr, quad(xr), np.array([0]), near)
    point = np.array([[0.0125, 0.004, 1.0]])
    point /= np.linalg.norm(point)
    frame_u = np.einsum("mj,mji->mi", point - x0, exact_fit.frame)
    on_plane = x0 + np.einsum("mi,mji->mj", frame_u, exact_fit.frame)
    assert abs(exact_fit(point)[0] - quad(on_plane)[0]) < 1e-12


def test_the_log_density_through_the_splits_converges_at_third_order():
    """kappa = 3, T = 1, with the splits of the scheme (about a third of the particles are
    cut): the children's lambda from the local quadratic fit (``_particle_remesh``), so the
    largest error of lambda over all particles falls at third order: 2.98e-3 (n = 16) to
    4.25e-4 (n = 32) measured (the linear fit gave 1.24e-2, 3.54e-3: second order)."""
    errors, _ = _split_errors(3.0, (16, 32), 1e-5)
    assert errors[1] < 1e-3 and math.log2(errors[0] / errors[1]) > 2.5, errors


@pytest.mark.slow
def test_the_log_density_through_the_splits_is_right_to_1e_minus_3_down_to_e_minus_596():
    """kappa = 300 (log rho spans 596 e-folds: rho down to 1e-259), T = 1, tolerance 1e-6,
    with the splits (a third of the particles cut): lambda at every particle within 1e-3 of
    the exact log density at n = 128 (148 000 particles), at third order from n = 64.
    Measured 3.83e-3 and 5.55e-4 (order 2.8); about 60 s on one core."""
    errors, deepest = _split_errors(300.0, (64, 128), 1e-6)
    assert deepest < math.log(1e-250)
    assert errors[1] < 1e-3 and math.log2(errors[0] / errors[1]) > 2.5, errors


def test_a_cluster_narrower_than_a_cell_stays_on_its_characteristic():
    """A von Mises-Fisher cluster with kappa = 1e6 (width 1e-3 rad) on cells of 0.1 rad
    (n = 16), zero temperature with a general B, to T = 5 at tolerance 1e-8: it is one
    particle, on the exact characteristic of its mean to 1e-6 rad at t = 1 and 5, mass 1."""
    mean = np.array([0.3, -0.5, 0.8]) / np.linalg.norm([0.3, -0.5, 0.8])
    for t in (1.0, 5.0):
        scheme, cfg = _scheme(ZERO_TEMPERATURE, _vmf(mean, 1e6), 16, 1e-8, t)
        state = sd.simulate(scheme, cfg.time).state
        assert state.shape[-1] == 1
        distance = float(np.linalg.norm(state[0, 1:4, 0] - zero_temperature_path(mean, t)))
        assert distance < 1e-6, (t, distance)
        assert abs(scheme.masses(state)[0] - 1.0) < 1e-12


# -- beta = 0 and the growth rate around the uniform density ---------------------------------------
def test_beta_zero_velocity_is_the_mean_field_to_round_off():
    """beta = 0: X = P_x V m / mass, m the particles' mass-weighted mean, at every particle."""
    V = np.array([[1.0, 0.3, 0.0], [-0.2, 0.8, 0.1], [0.0, 0.4, 0.6]])
    initial = {
        "name": "von_mises_fisher",
        "means": [[0.0, 0.6, 0.8], [1.0, 0.0, 0.0]],
        "kappas": [4.0, 6.0],
        "weights": [0.6, 0.4],
    }
    model = {"name": "sa", "beta": 0.0, "K": GENERAL_B_3D.tolist(), "V": V.tolist()}
    scheme, _ = _scheme(model, initial, 8, 1e-3, 1.0)
    state = scheme.initial_state()
    x, masses = scheme.atoms(state)
    want = mean_field_velocity(x, np.ones_like(masses), masses, V)
    assert np.abs(scheme.rhs(state, 0.0).rate[0, 1:4].T - want).max() < 1e-14


def _growth_rate(
    n: int, beta: float, mean: np.ndarray, quadrature: str = "points", kappa: float = 1e-4
) -> float:
    times = np.linspace(0.0, 0.2, 5)
    cfg = sd.config_from_dict(
        {
            "model": steady_uniform_model(beta, GENERAL_B_3D),
            "domain": {"name": "sphere"},
            "initial": _vmf(mean.tolist(), kappa),
            "discretization": {
                "scheme": "log_lagrangian",
                "n": n,
                "tolerance": 1e-8,
                "quadrature": quadrature,
            },
            "time": {"t_end": float(times[-1]), "snapshots": len(times)},
        }
    )
    scheme = sd.make_scheme(sd.Problem.from_config(cfg), cfg.discretization)
    # the particles move by about kappa t = 2e-5 rad here: the positions' tolerance (absolute,
    # at least 1e-8 in a configuration) must be far below that
    scheme.tolerance = 1e-13
    moments = []

    class Moment(Observer):
        def observe(self, t, state):
            x, masses = scheme.atoms(state)
            moments.append(float(masses @ (x @ mean)))

    sd.simulate(scheme, cfg.time, [Moment()])
    # the interpolating quartic: its slope at 0 errs by O((r t)^5), not the quadratic fit's
    # O((r t)^2) (1e-3 here)
    *_, c1, c0 = np.polyfit(times, np.array(moments), 4)
    return c1 / c0


@pytest.mark.parametrize(
    "beta, ns, bound, quadrature",
    [
        (2.0, (8, 16), 5e-5, "points"),
        (2.0, (8, 16), 5e-5, "cells"),
        pytest.param(20.0, (16, 32), 1e-4, "points", marks=pytest.mark.slow),  # 50 s
        pytest.param(20.0, (16, 32), 2e-5, "cells", marks=pytest.mark.slow),  # 120 s
    ],
)
def test_the_growth_rate_around_the_uniform_density_at_second_order(beta, ns, bound, quadrature):
    """sa with a general B and V = B^-T from the uniform density perturbed by kappa <a, x>
    (kappa = 1e-4): the initial growth rate of <a, x> equals the Rayleigh quotient of the
    linearized operator (``spheredens.references.linear_growth_tendency``) to second order in
    n, with the sources as points (the default) and as cells. Measured relative errors: points
    8.4e-6, 2.0e-6 and cells 2.1e-5, 5.0e-6 at n = 8, 16 (beta = 2); points 2.1e-4, 5.1e-5 and
    cells 4.0e-5, 7.2e-6 at n = 16, 32 (beta = 20)."""
    a = np.array([0.3, -0.5, 0.8])
    mean = a / np.linalg.norm(a)
    points, weights = reference_quadrature(3)
    f = points @ mean
    tendency = linear_growth_tendency(points, GENERAL_B_3D, mean, beta)
    want = np.sum(f * tendency * weights) / np.sum(f * f * weights)
    errors = [abs(_growth_rate(n, beta, mean, quadrature) / want - 1.0) for n in ns]
    assert errors[-1] < bound, (want, errors)
    assert math.log2(errors[0] / errors[1]) > 1.8, errors


def test_a_particle_stretched_at_a_saddle_keeps_its_area():
    """sa_zero_temperature with B = I and a symmetric V of eigenvalues 2, 1, 0.2 along turned
    axes: the middle eigenvector is a saddle of X_inf, stretching at rate 1 and contracting at
    0.8. A narrow particle there (one particle, splits off) becomes a needle of aspect ratio
    e^(1.8 T) = 3.5e19 by T = 25; its area must still grow as e^(div X T), div X = 0.2 (edges
    kept orthogonal after each step; nearly parallel edges lose every digit of the area beyond
    an aspect ratio of 1e16: the run at beta = 300, n = 32 ended in a non-finite rho at t = 80.7
    from such needles)."""
    turn = np.linalg.qr(np.array([[1.0, 0.4, 0.2], [0.3, 1.0, -0.5], [0.1, 0.6, 1.0]]))[0]
    V = turn @ np.diag([2.0, 1.0, 0.2]) @ turn.T
    saddle = turn[:, 1]
    model = {"name": "sa_zero_temperature", "K": np.eye(3).tolist(), "V": V.tolist()}
    T = 25.0
    scheme, cfg = _scheme(model, _vmf(saddle, 1e12), 4, 1e-8, T)
    scheme.s_max = 1e30  # never split
    start = scheme.initial_state()
    state = sd.simulate(scheme, cfg.time).state
    assert state.shape[-1] == 1
    shape = state[0, 4:10, :].T.reshape(1, 3, 2)
    singular = np.linalg.svd(shape, compute_uv=False)[0]
    assert singular[0] / singular[1] > 1e19
    grown = log_area(shape)[0] - log_area(start[0, 4:10, :].T.reshape(1, 3, 2))[0]
    assert abs(grown - 0.2 * T) < 1e-3, grown  # measured 3.4e-4
    assert abs(scheme.masses(state)[0] - 1.0) < 1e-12
