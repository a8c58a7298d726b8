"""``merge_tail`` of ``log_lagrangian``: the deep tail outside the look caps merged by cells
about a kernel width wide (:func:`spheredens.schemes._particle_remesh.merge_tail`).
Each merged particle holds its members' mass to round-off down to e^-1540, at their
mass-weighted mean; the clusters and the look caps untouched; the cells' size follows the
kernel; a run keeps its mass and resumes bit for bit."""

from __future__ import annotations

import math

import numpy as np
import pytest
import test_sphere_interpolant as smooth
import test_sphere_tail_remesh as tails  # the cluster and its deep tail
from conftest import assert_resumes_bit_for_bit
from scipy.special import logsumexp

import spheredens as sd
from spheredens.grids._cubed_sphere import cube_index
from spheredens.schemes._lagrangian_options import DEFAULT_MERGE_TAIL_WIDTH
from spheredens.schemes._particle_remesh import LOOK_RADIUS, log_area, merge_tail, tail_cells

#: the rotation that turns the cluster's look direction (MU, for q = beta x) into the tail
TURN = np.array([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
BETA = 300.0


def _key(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x).view("f8,f8,f8").ravel()


def test_the_deep_tail_merges_by_the_cells_with_its_mass():
    """No look caps: the tail (20 000 random particles, log masses e^-700 to e^-1540) becomes
    one particle per 16 x 16 cell it occupies, each with the log-sum of its members' masses
    (relative 1e-13) at their mass-weighted mean (1e-12 rad); the cluster comes back bit for
    bit; the total mass to 1e-13."""
    log_m, x, shape, log_point, n_cluster = tails._state(20_000, 0)
    new_log_m, new_x, _, new_point, removed = merge_tail(
        log_m, x, shape, log_point, None, 0.1, 16, True
    )
    assert removed == len(log_m) - len(new_log_m) > 15_000
    kept = np.isin(_key(new_x), _key(x[:n_cluster]))
    assert kept.sum() == n_cluster
    assert np.array_equal(np.sort(new_log_m[kept]), np.sort(log_m[:n_cluster]))
    cells, slot = np.unique(cube_index(x[n_cluster:], 16), return_inverse=True)
    assert np.array_equal(np.sort(cube_index(new_x[~kept], 16)), cells)
    mass = np.array([logsumexp(log_m[n_cluster:][slot == k]) for k in range(len(cells))])
    order = np.argsort(cube_index(new_x[~kept], 16))
    np.testing.assert_allclose(new_log_m[~kept][order], mass, rtol=1e-13)
    weight = np.exp(log_m[n_cluster:] - mass[slot])
    mean = np.zeros((len(cells), 3))
    np.add.at(mean, slot, weight[:, None] * x[n_cluster:])
    mean /= np.linalg.norm(mean, axis=1, keepdims=True)
    assert np.abs(new_x[~kept][order] - mean).max() < 1e-12
    assert new_log_m.min() < -1500.0 and np.all(np.isfinite(new_point))
    assert abs(logsumexp(new_log_m) - logsumexp(log_m)) < 1e-13


def test_the_look_cap_keeps_its_tail_particles():
    """The cluster looks into the tail (q = beta R x, R turning MU into the tail): the tail's
    particles within LOOK_RADIUS kernel widths of the look direction stay as they are; the tail
    elsewhere is merged."""
    log_m, x, shape, log_point, n_cluster = tails._state(20_000, 0)
    look = TURN @ tails.MU
    assert look @ tails.MU < 0.9  # the cap lies in the tail

    def query(p):
        return BETA * p @ TURN.T

    new_x = merge_tail(log_m, x, shape, log_point, query, 0.1, 16, True)[1]
    near = np.arccos(np.clip(x @ look, -1, 1)) <= LOOK_RADIUS / math.sqrt(BETA)
    assert near[n_cluster:].sum() > 20
    assert np.isin(_key(x[near]), _key(new_x)).all()
    assert len(new_x) < 0.5 * len(x)


def test_a_tail_within_the_depth_is_not_merged():
    """A tail whose mean log densities lie 19.9 e-folds below the cluster's is not the deep
    tail: nothing changes; at 20.1 below, all of it is merged."""
    log_m, x, shape, log_point, n_cluster = tails._state(2_000, 0)
    top = (log_m - log_area(shape))[:n_cluster].max()
    for below, merged in ((19.9, False), (20.1, True)):
        near = log_m.copy()
        near[n_cluster:] = top - below + log_area(shape[n_cluster:])
        out = merge_tail(near, x, shape, log_point, None, 0.1, 16, True)
        assert (out[4] > 0) == merged
        assert np.array_equal(out[1], x) != merged
        assert abs(logsumexp(out[0]) - logsumexp(near)) < 1e-13


@pytest.mark.parametrize("beta_sigma", [30.0, 300.0 * 2.98, 1000.0 * 2.98, 1e4])
@pytest.mark.parametrize("width", [0.4, 0.75, 1.5])
def test_the_tail_cells_are_the_fewest_within_the_width(beta_sigma, width):
    """The cells per edge C: a power of 2, at least n = 8, the edge pi / (2 C) at most width /
    sqrt(beta sigma_max), and half as many would be wider (unless C = n)."""
    c = tail_cells(8, beta_sigma, width)
    kernel = width / math.sqrt(beta_sigma)
    assert c >= 8 and c & (c - 1) == 0
    assert math.pi / (2 * c) <= kernel * (1 + 1e-12) or c == 8
    assert c == 8 or math.pi / c > kernel
    assert tail_cells(8, 0.0, width) == 8


def test_the_two_atom_case_merges_by_128_cells_at_beta_300():
    """At beta = 300 (sigma_max = 2.98 for the two atoms' B) the default width 0.4 gives the
    128 x 128 cubed sphere (cells of 0.012 rad, 0.37 kernel widths), that of the experiment
    ``tail_merge.py --cells 128``; 0.75 gives 64, and beta = 1000 256."""
    assert tail_cells(32, 300.0 * 2.98, DEFAULT_MERGE_TAIL_WIDTH) == 128
    assert tail_cells(32, 300.0 * 2.98, 0.75) == 64
    assert tail_cells(32, 1000.0 * 2.98, DEFAULT_MERGE_TAIL_WIDTH) == 256


def test_a_run_that_merges_its_tail_keeps_its_mass_and_resumes_bit_for_bit(tmp_path):
    """beta = 30 (a general B), n = 8, the tail merged every 0.25 (log rho spans 60 e-folds),
    twice; the mass stays 1 to 1e-12, and a run stopped after two steps and resumed gives the
    same file bit for bit."""
    cfg, full = smooth.small_run(tmp_path, (30.0, 20.0), 1e-3, merge_tail=0.25)
    assert full.attrs["tail_merges"] == 2 and full.attrs["tail_merged_particles"] > 0
    sigma_max = np.linalg.svd(smooth.GENERAL_B_3D, compute_uv=False).max()
    cells = tail_cells(8, 30.0 * sigma_max, DEFAULT_MERGE_TAIL_WIDTH)
    assert full.attrs["merge_tail_cells_per_face_edge"] == cells
    assert_resumes_bit_for_bit(cfg, tmp_path, full, ("rho", "mass", "w2_projection", "n_particles"))


def test_a_bad_merge_tail_width_is_refused():
    """A width of 0 (cells of no size) is refused by name."""
    with pytest.raises(sd.ConfigError, match="merge_tail_width"):
        smooth.small_run(None, (30.0, 20.0), 1e-3, merge_tail=0.25, merge_tail_width=0.0)


def test_follow_depth_leaves_the_deep_tail_to_its_neighbours_steps(tmp_path):
    """beta = 30, n = 8, log rho spanning 60 e-folds: the error control following only the
    particles within 10 e-folds of the heaviest (``follow_depth = 10``, recorded) takes fewer
    sub-steps than the default window (2 beta sigma_max + 50: every particle here), and the
    recorded density stays within the tolerance's reach of the default run's (rho within 1e-5
    of its maximum; measured 1.6e-6, with 4 sub-steps against 16)."""
    _, full = smooth.small_run(tmp_path, (30.0, 20.0), 1e-4)
    (tmp_path / "narrow").mkdir()
    _, narrow = smooth.small_run(tmp_path / "narrow", (30.0, 20.0), 1e-4, follow_depth=10.0)
    sigma_max = np.linalg.svd(smooth.GENERAL_B_3D, compute_uv=False).max()
    assert full.attrs["follow_depth"] == pytest.approx(2 * 30.0 * sigma_max + 50.0, rel=1e-12)
    assert narrow.attrs["follow_depth"] == 10.0
    assert narrow.attrs["substeps"] < full.attrs["substeps"]
    rho, rho_narrow = full["rho"].values[-1], narrow["rho"].values[-1]
    assert np.abs(rho_narrow - rho).max() <= 1e-5 * rho.max()
    assert not np.array_equal(rho_narrow, rho)  # the option did change the steps


def test_a_negative_follow_depth_is_refused():
    with pytest.raises(sd.ConfigError, match="follow_depth"):
        smooth.small_run(None, (30.0, 20.0), 1e-3, follow_depth=-1.0)
