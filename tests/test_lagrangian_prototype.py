"""The building blocks of the Lagrangian prototype of issue 30
(runs/sphere_two_atoms/lagrangian_prototype.py): the cubed-sphere index, the initial
particles, and split and merge, which must keep the mass to round-off."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import numpy as np
from scipy.special import logsumexp

PATH = Path(__file__).resolve().parents[1] / "runs" / "sphere_two_atoms" / "lagrangian_prototype.py"
SPEC = importlib.util.spec_from_file_location("lagrangian_prototype", PATH)
proto = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(proto)


def test_the_cube_index_finds_the_cell_of_every_point() -> None:
    n = 8
    rng = np.random.default_rng(0)
    for face in range(6):
        i, j = rng.integers(0, n, 50), rng.integers(0, n, 50)
        frac_i, frac_j = rng.uniform(0.05, 0.95, 50), rng.uniform(0.05, 0.95, 50)
        alpha = -math.pi / 4 + (i + frac_i) * math.pi / 2 / n
        beta = -math.pi / 4 + (j + frac_j) * math.pi / 2 / n
        key = proto.cube_index(proto.cube_point(face, alpha, beta), n)
        assert np.array_equal(key, face * n * n + proto.morton(i, j))


def test_the_initial_particles_hold_the_density_cell_by_cell() -> None:
    def f(x):  # von Mises-Fisher, kappa = 40, about e_3 (e^-80 across the sphere)
        return np.exp(40.0 * (x[:, 2] - 1.0))

    logm, x, shape = proto.initial_particles(f, 8)
    assert len(x) == 6 * 64
    assert abs(logsumexp(logm)) < 1e-13
    np.testing.assert_allclose(np.linalg.norm(x, axis=1), 1.0, atol=1e-14)
    # the tail keeps its relative accuracy: the lightest particle is about e^-80 of the heaviest
    assert 70.0 < logm.max() - logm.min() < 80.0
    areas = np.linalg.norm(np.cross(shape[:, :, 0], shape[:, :, 1]), axis=1)
    assert abs(areas.sum() / (4 * math.pi) - 1.0) < 0.05  # chords, not arcs


def test_split_keeps_the_mass_and_follows_the_log_linear_profile() -> None:
    def f(x):  # log rho linear in x: the split's fitted slope is exact to O(h)
        return np.exp(30.0 * x[:, 0])

    logm, x, shape = proto.initial_particles(f, 16)
    total = logsumexp(logm)
    s_max = 0.5 * float(np.linalg.svd(shape, compute_uv=False)[:, 0].min())
    new_logm, new_x, new_shape, count = proto.split(logm, x, shape, s_max)
    assert count >= len(x)
    assert abs(logsumexp(new_logm) - total) < 1e-13
    assert np.all(np.linalg.svd(new_shape, compute_uv=False)[:, 0] <= s_max)
    # the first moment moves by O(length^2) only (the children are put back on the sphere)
    w0, w1 = np.exp(logm - total), np.exp(new_logm - total)
    assert np.linalg.norm(w0 @ x - w1 @ new_x) < 1e-3
    # splitting without a slope would leave the heavy side 2x too light over a cell of 30 h
    # e-folds: the fitted split puts the children's masses within 2% of the density's
    ell = new_logm - proto.log_area(new_shape)
    exact = 30.0 * new_x[:, 0]
    resid = (ell - exact) - np.median(ell - exact)
    assert np.percentile(np.abs(resid), 90) < 0.15


def test_merge_sums_the_masses_exactly_and_keeps_the_mean() -> None:
    rng = np.random.default_rng(1)
    n_fine = 2**18
    h = math.pi / 2 / n_fine  # the centre of a cell, 1e-7 rad = 0.016 cells from its faces
    centre = proto.cube_point(2, -math.pi / 4 + 1000.5 * h, -math.pi / 4 + 70000.5 * h)
    x = centre + 1e-7 * rng.uniform(-1.0, 1.0, size=(40, 3))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    far = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, -1.0]])
    x = np.vstack([x, far])
    logm = np.r_[rng.uniform(-1500.0, -1400.0, 40), -3.0, -2000.0]
    shape = np.tile(np.array([[1e-3, 0.0], [0.0, 1e-3], [0.0, 0.0]]), (len(x), 1, 1))
    new_logm, new_x, _, merged = proto.merge(logm, x, shape, n_fine)
    assert merged == 39 and len(new_x) == 3
    assert abs(logsumexp(new_logm) - logsumexp(logm)) < 1e-13
    cluster = np.argmin(np.linalg.norm(new_x - centre, axis=1))
    assert abs(new_logm[cluster] - logsumexp(logm[:40])) < 1e-12
    w = np.exp(logm[:40] - logm[:40].max())
    mean = w @ x[:40] / np.linalg.norm(w @ x[:40])
    assert np.linalg.norm(new_x[cluster] - mean) < 1e-15
