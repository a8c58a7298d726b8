"""``remesh_tail`` of ``log_lagrangian``: the deep tail put back on the cells of the cubed sphere
(:func:`spheredens.schemes._particle_remesh.remesh_tail`). Its mass to round-off down to
e^-1500, the clusters untouched, the density it gives the cells against the exact one, and a
run that keeps its mass and resumes bit for bit."""

from __future__ import annotations

import math

import numpy as np
import test_sphere_interpolant as smooth  # the smooth density and the divergence of a frame
from conftest import assert_resumes_bit_for_bit
from scipy.special import logsumexp

import spheredens as sd
from spheredens.grids import CubedSphereCells
from spheredens.grids._cubed_sphere import cube_index
from spheredens.interaction._particle_flow import LogParticleSums
from spheredens.schemes._particle_remesh import TailRemesh, log_area, remesh_tail, tangent_shapes
from spheredens.verify import GENERAL_B_3D

MU = np.array([0.3, -0.5, 0.8]) / math.sqrt(0.98)
TILT = np.array([-0.6, 0.2, 0.3]) / math.sqrt(0.49)


def _random_points(n: int, seed: int) -> np.ndarray:
    x = np.random.default_rng(seed).normal(size=(n, 3))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _state(n_tail: int, seed: int, slope: float = 40.0):
    """A cluster of 400 particles within 1e-3 rad of MU carrying most of the mass, and a tail of
    ``n_tail`` random particles whose log density is slope (TILT . x) - 700 (- 800 more on one
    side of a great circle: down to about e^-1540), each with the mass of the density over its
    barycentric dual area."""
    rng = np.random.default_rng(seed)
    cluster = MU + 1e-3 * rng.normal(size=(400, 3))
    cluster /= np.linalg.norm(cluster, axis=1, keepdims=True)
    tail = _random_points(n_tail, seed + 1)
    tail = tail[tail @ MU < 0.9]  # away from the cluster
    log_density = slope * (tail @ TILT) - 700.0 - np.where(tail @ MU < -0.5, 800.0, 0.0)
    x = np.concatenate([cluster, tail])
    tail_log_m = log_density + np.log(smooth._dual_areas(tail))
    log_m = np.concatenate([np.full(len(cluster), -math.log(len(cluster))), tail_log_m])
    e1 = np.cross(x, np.eye(3)[np.argmin(np.abs(x), axis=1)])
    e1 /= np.linalg.norm(e1, axis=1, keepdims=True)
    side = np.where(np.arange(len(x)) < len(cluster), 1e-4, math.sqrt(4 * math.pi / n_tail))
    shape = side[:, None, None] * np.stack([e1, np.cross(x, e1)], axis=2)
    return log_m, x, tangent_shapes(x, shape), log_m.copy(), len(cluster)


def test_the_tail_goes_to_the_cells_with_its_mass_and_the_cluster_stays():
    """The tail (200 000 random particles, log masses from e^-700 to e^-1540) becomes one
    particle per cell of the 16 x 16 cubed sphere it puts mass in, each in its own cell, every
    log mass finite; the total mass is the same to 1e-13 (relative); the cluster's particles,
    within TAIL_DEPTH of the densest, come back unchanged, bit for bit."""
    log_m, x, shape, log_point, n_cluster = _state(20_000, 0)
    new_log_m, new_x, new_shape, new_point, replaced = remesh_tail(
        log_m, x, shape, log_point, CubedSphereCells(16)
    )
    assert replaced == len(x) - n_cluster
    assert np.array_equal(new_x[:n_cluster], x[:n_cluster])
    assert np.array_equal(new_log_m[:n_cluster], log_m[:n_cluster])
    assert np.array_equal(new_shape[:n_cluster], shape[:n_cluster])
    cells = cube_index(new_x[n_cluster:], 16)
    assert len(np.unique(cells)) == len(cells) <= 6 * 16 * 16
    assert np.all(np.isfinite(new_log_m)) and new_log_m.min() < -1500.0
    assert abs(logsumexp(new_log_m) - logsumexp(log_m)) < 1e-13
    tail_mass = logsumexp(log_m[n_cluster:])
    assert abs(logsumexp(new_log_m[n_cluster:]) - tail_mass) < 1e-12 * abs(tail_mass)
    assert np.abs(np.linalg.norm(new_x, axis=1) - 1.0).max() < 1e-15
    assert np.all(np.isfinite(new_point)) and np.all(np.isfinite(log_area(new_shape)))


def test_a_tail_put_on_the_cells_gives_the_sums_of_its_smooth_density():
    """beta = 300, a general B: 3456 particles at random positions (1.3 kernel widths apart),
    each with the smooth density's mass over its dual cell, put on the cells of the 32 x 32
    cubed sphere (6144 particles about a kernel width apart). At 200 random targets the point
    sums over the cells' particles give the velocity and its divergence within 0.005 (median)
    and 0.04 (largest) and 1e-3 of a cell quadrature on the 128 x 128 cubed sphere, where the
    point sums over the random particles themselves err by more than 20 times as much (the
    median divergence). Measured: 2.9e-3, 2.4e-2, 4.2e-4 against 0.125, 1.18, 4.4e-2 (the
    divergence about 0.5)."""
    cfg = sd.config_from_dict(
        {
            "model": {
                "name": "sa",
                "beta": 300.0,
                "K": GENERAL_B_3D.tolist(),
                "V": np.diag([1.0, 0.5, 0.5]).tolist(),
            },
            "domain": {"name": "sphere"},
            "initial": {"name": "uniform"},
        }
    )
    sums = LogParticleSums(sd.Problem.from_config(cfg).model)
    x = smooth._random_points(3456, 3)
    log_m = smooth._log_rho(x) + np.log(smooth._dual_areas(x))
    targets = smooth._random_points(200, 11)
    e1 = np.cross(targets, np.eye(3)[np.argmin(np.abs(targets), axis=1)])
    e1 /= np.linalg.norm(e1, axis=1, keepdims=True)
    frame = 1e-3 * np.stack([e1, np.cross(targets, e1)], axis=2)

    def flow(sources, log_a, quadrature="points", shapes=None):
        """(velocity, divergence) at the targets, massless, from the sources."""
        rows = np.arange(len(sources), len(sources) + len(targets))
        shapes = np.zeros((len(sources), 3, 2)) if shapes is None else shapes
        v, rate = sums.flow(
            np.concatenate([sources, targets]),
            np.concatenate([log_a, np.full(len(targets), -1e300)]),
            np.concatenate([shapes, frame]),
            quadrature,
            rows,
        )
        return v, smooth._divergence(rate, frame)

    log_f, x_f, shape_f = CubedSphereCells(128).log_moments(smooth._log_rho)
    v_ref, div_ref = flow(x_f, log_f, "cells", tangent_shapes(x_f, shape_f))
    new_log_m, new_x, _ = TailRemesh(CubedSphereCells(32)).cells_of(log_m, x)
    assert abs(logsumexp(new_log_m) - logsumexp(log_m)) < 1e-13
    errors = {}
    for name, (sources, log_a) in {"cells": (new_x, new_log_m), "random": (x, log_m)}.items():
        v, div = flow(sources, log_a)
        error = np.abs(div - div_ref)
        errors[name] = (float(np.median(error)), float(error.max()), float(np.abs(v - v_ref).max()))
    assert 0.3 < np.median(np.abs(div_ref)) < 0.7
    assert all(e < b for e, b in zip(errors["cells"], (0.005, 0.04, 1e-3))), errors
    assert errors["random"][0] > 20.0 * errors["cells"][0], errors


def test_a_run_that_remeshes_its_tail_keeps_its_mass_and_resumes_bit_for_bit(tmp_path):
    """beta = 30 (a general B), n = 8, the tail remeshed every 0.25 (log rho spans 60 e-folds:
    the deep side is a tail from the start), put on the cells twice; the mass stays 1 to 1e-12,
    and a run stopped after two steps and resumed gives the same file bit for bit."""
    cfg, full = smooth.small_run(tmp_path, (30.0, 20.0), 1e-3, remesh_tail=0.25)
    assert full.attrs["tail_remeshes"] == 2 and full.attrs["tail_remeshed_particles"] > 0
    assert_resumes_bit_for_bit(cfg, tmp_path, full, ("rho", "mass", "w2_projection", "n_particles"))
