"""The ``interpolant`` quadrature of ``log_lagrangian``: the piecewise log-linear interpolant of
the particles on their Delaunay triangulation, sampled a kernel width apart
(:mod:`spheredens.interaction._interpolant`). Its mass, its limit where the particles are fine,
and the velocity and divergence it gives from irregular particles sparser than the kernel,
against a fine cell quadrature of the same smooth density."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import assert_resumes_bit_for_bit
from scipy.special import logsumexp

import spheredens as sd
from spheredens.grids import CubedSphereCells
from spheredens.grids._cubed_sphere import cube_index
from spheredens.interaction import _particle_flow as particle_flow
from spheredens.interaction._clusters import clustered_logsumexp_sums
from spheredens.interaction._interpolant import (
    MAX_LEVEL,
    Reconstruction,
    interpolant_sources,
    triangles,
)
from spheredens.interaction._particle_flow import LogParticleSums
from spheredens.schemes._particle_remesh import tangent_shapes
from spheredens.verify import GENERAL_B_3D

MU = np.array([0.3, -0.5, 0.8]) / math.sqrt(0.98)
MU2 = np.array([-0.6, 0.2, 0.3]) / math.sqrt(0.49)


def _log_rho(p: np.ndarray) -> np.ndarray:
    """A smooth density with two bumps (unnormalized)."""
    return np.logaddexp(6.0 * (p @ MU - 1.0), math.log(0.3) + 3.0 * (p @ MU2 - 1.0))


def _random_points(n: int, seed: int) -> np.ndarray:
    x = np.random.default_rng(seed).normal(size=(n, 3))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _dual_areas(x: np.ndarray) -> np.ndarray:
    simplex = triangles(x)
    c = x[simplex]
    twice = np.linalg.norm(np.cross(c[:, 1] - c[:, 0], c[:, 2] - c[:, 0]), axis=1)
    return np.bincount(simplex.ravel(), weights=np.repeat(twice / 6.0, 3), minlength=len(x))


def test_the_interpolant_keeps_the_mass_of_log_masses_down_to_e_minus_1500():
    """Particles whose log masses lie 1500 e-folds lower on one side of a great circle than on
    the other, smooth on each side: the sources' log masses are all finite (every share
    positive, however small), on S^2, and add up to the particles' to 1e-13; the smooth
    triangles are sub-sampled on both sides, the steep ones across the circle are not."""
    x = _random_points(4000, 0)
    deep = x @ MU < 0.0
    log_m = 2.0 * (x @ MU2) - np.where(deep, 1500.0, 0.0)
    points, log_a = interpolant_sources(x, log_m, 0.02)
    on_deep_side = points @ MU < 0.0
    assert on_deep_side.sum() > 3 * deep.sum() and (~on_deep_side).sum() > 3 * (~deep).sum()
    assert np.all(np.isfinite(log_a))
    assert np.abs(np.linalg.norm(points, axis=1) - 1.0).max() < 1e-15
    assert abs(logsumexp(log_a) - logsumexp(log_m)) < 1e-13
    assert log_a.min() < -1400.0


def test_where_the_particles_are_finer_than_the_spacing_they_are_the_sources():
    """No triangle longer than ``spacing``: every particle's shares come back to it, so the
    sources are the particles with their own masses (the ``points`` quadrature), to 1e-13."""
    x = _random_points(500, 1)
    log_m = np.random.default_rng(2).normal(size=len(x))
    points, log_a = interpolant_sources(x, log_m, 10.0)
    assert np.array_equal(points, x)
    assert np.abs(log_a - log_m).max() < 1e-13
    # and with sub-sampling (spacing shorter than every edge) the mass is still the particles'
    points, log_a = interpolant_sources(x, log_m, 0.01)
    assert len(points) > len(x) * MAX_LEVEL**2
    assert abs(logsumexp(log_a) - logsumexp(log_m)) < 1e-13


def _divergence(rate: np.ndarray, frame: np.ndarray) -> np.ndarray:
    """d log |f1 x f2| / dt from the rate of the shapes ``frame``: the divergence of X."""
    c = np.cross(frame[:, :, 0], frame[:, :, 1])
    dc = np.cross(rate[:, :, 0], frame[:, :, 1]) + np.cross(frame[:, :, 0], rate[:, :, 1])
    return np.sum(dc * c, axis=1) / np.sum(c * c, axis=1)


@pytest.mark.parametrize(
    "n_particles, bounds",
    [(1536, (0.005, 0.05, 2e-3)), (3456, (0.005, 0.03, 1e-3))],
)
def test_the_interpolant_sums_follow_a_smooth_density_that_point_sums_miss(
    n_particles, bounds, monkeypatch
):
    """beta = 300, a general B: particles at random positions (about 1.9 and 1.3 kernel widths
    apart, as the tail of a concentrated run), each with the mass of the smooth density over its
    dual cell, the interpolant sampled everywhere (as it is in a tail deeper than
    ``INTERPOLANT_DEPTH`` below the densest particle; this density spans 9 e-folds). At 200
    of them, the velocity and its divergence from the ``interpolant`` sums are within
    ``bounds`` (median and largest divergence error, largest velocity error) of a cell
    quadrature on the 128 x 128 cubed sphere (98 304 cells of 0.012 rad); the point sums err by
    more than 20 times as much. Measured: interpolant divergence 0.0020 / 0.026, velocity
    6.9e-4 (1536), 0.0021 / 0.012, 5.1e-4 (3456); points 0.21 / 3.7, 7.2e-2 and 0.092 / 0.85,
    2.0e-2 (the divergence about 0.5)."""
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
    monkeypatch.setattr(particle_flow, "INTERPOLANT_DEPTH", math.inf)
    x = _random_points(n_particles, 3)
    log_m = _log_rho(x) + np.log(_dual_areas(x))
    rows = np.random.default_rng(4).choice(len(x), 200, replace=False)
    e1 = np.cross(x[rows], np.eye(3)[np.argmin(np.abs(x[rows]), axis=1)])
    e1 /= np.linalg.norm(e1, axis=1, keepdims=True)
    frame = 1e-3 * np.stack([e1, np.cross(x[rows], e1)], axis=2)
    shape = np.zeros((len(x), 3, 2))
    shape[rows] = frame
    # the reference: fine cells as sources, the 200 particles as massless extra targets
    log_f, x_f, shape_f = CubedSphereCells(128).log_moments(_log_rho)
    v_ref, rate_ref = sums.flow(
        np.concatenate([x_f, x[rows]]),
        np.concatenate([log_f, np.full(len(rows), -1e300)]),
        np.concatenate([tangent_shapes(x_f, shape_f), frame]),
        "cells",
        np.arange(len(x_f), len(x_f) + len(rows)),
    )
    div_ref = _divergence(rate_ref, frame)
    errors = {}
    for quadrature in ("interpolant", "points"):
        v, rate = sums.flow(x, log_m, shape, quadrature, rows)
        div_error = np.abs(_divergence(rate, frame) - div_ref)
        errors[quadrature] = (
            float(np.median(div_error)),
            float(div_error.max()),
            float(np.abs(v - v_ref).max()),
        )
    assert 0.3 < np.median(np.abs(div_ref)) < 0.7
    assert all(e < b for e, b in zip(errors["interpolant"], bounds)), errors
    assert all(p > 20.0 * i for p, i in zip(errors["points"], errors["interpolant"])), errors


def _sums_at_beta_300() -> LogParticleSums:
    cfg = sd.config_from_dict(
        {
            "model": {"name": "sa", "beta": 300.0, "K": GENERAL_B_3D.tolist()},
            "domain": {"name": "sphere"},
            "initial": {"name": "uniform"},
        }
    )
    return LogParticleSums(sd.Problem.from_config(cfg).model)


def test_within_the_depth_of_the_densest_particle_the_sources_are_the_particles():
    """Where the density is within ``INTERPOLANT_DEPTH`` (20) e-folds of its largest value the
    particles are summed as points: for the two bumps (9 e-folds) on 1536 random particles,
    about 1.9 kernel widths apart, the ``interpolant`` sums are the point sums to 1e-12 (the
    shares given back to the particles add up to their masses to round-off); with the same
    density 40 e-folds below one heavy particle the triangles sampled are those of the
    interpolant without a depth (all but the heavy particle's, which are steep, and those
    finer than the spacing), and the velocity differs from the point sums' by more than 1e-3
    at most targets; 5 e-folds below it, none is."""
    sums = _sums_at_beta_300()
    x = _random_points(1536, 3)
    log_m = _log_rho(x) + np.log(_dual_areas(x))
    shape = np.zeros((len(x), 3, 2))
    v_points, _ = sums.flow(x, log_m, shape, "points")
    v_interp, _ = sums.flow(x, log_m, shape, "interpolant")
    assert np.abs(v_interp - v_points).max() < 1e-12
    at_vertex, points, _ = sums.reconstruction(x, log_m).parts(x, log_m)
    assert len(points) == 0
    assert np.abs(at_vertex - log_m).max() < 1e-12
    # the same tail 40 e-folds below a heavy particle at MU (one vertex among the others)
    heavy = np.argmax(x @ MU)
    deep = log_m - 40.0
    deep[heavy] = 0.0
    reconstruction = sums.reconstruction(x, deep)
    everywhere = Reconstruction(x, deep, 1.0 / math.sqrt(sums.beta_sigma))
    assert np.array_equal(reconstruction.back, everywhere.back)
    assert len(reconstruction.parts(x, deep)[1]) > len(x)
    v_deep, _ = sums.flow(x, deep, shape, "interpolant")
    v_deep_points, _ = sums.flow(x, deep, shape, "points")
    assert np.median(np.abs(v_deep - v_deep_points).max(axis=1)) > 1e-3
    shallow = deep + 35.0
    shallow[heavy] = 0.0
    assert sums.reconstruction(x, shallow).back.all()


def test_the_split_sums_equal_the_sums_over_all_the_sources(monkeypatch):
    """The ``interpolant`` sums take the mass left at the particles with the points' sums (and
    their expansions between groups, used here: a tight cluster of 6000 particles beside a
    tail of 400) and add the sub-triangles' centroids pruned against that sum: the velocity
    is that of one pruned sum over all the sources (:func:`interpolant_sources`) to 1e-12."""
    sums = _sums_at_beta_300()
    rng = np.random.default_rng(5)
    cluster = MU + 1e-3 * rng.normal(size=(6000, 3))
    cluster /= np.linalg.norm(cluster, axis=1, keepdims=True)
    x = np.concatenate([cluster, _random_points(400, 6)])
    x = x[np.argsort(cube_index(x, 1 << 12), kind="stable")]
    log_m = np.where(x @ MU > 0.999, 0.0, -40.0 + _log_rho(x))
    shape = np.zeros((len(x), 3, 2))
    expanded = []

    def counting(*args, **kwargs):
        expanded.append(1)
        return clustered_logsumexp_sums(*args, **kwargs)

    monkeypatch.setattr(particle_flow, "clustered_logsumexp_sums", counting)
    velocity, _ = sums.flow(x, log_m, shape, "interpolant")
    assert expanded
    points, log_a = interpolant_sources(x, log_m, 1.0 / math.sqrt(sums.beta_sigma))
    assert len(points) > len(x) + 1000
    mean = sums._averages(points, log_a, x)[:, :3]
    want = mean - np.sum(mean * x, axis=1, keepdims=True) * x
    assert np.abs(velocity - want).max() < 1e-12


def small_run(tmp_path, kappas, tolerance, **options):
    """(config, file) of a short ``log_lagrangian`` run at beta = 30 with a general B, n = 8
    (particles 0.2 rad apart, the kernel 0.1 wide), from two von Mises-Fisher components about
    MU and -MU2 with ``kappas`` (weights 0.7, 0.3), to t = 0.5, with the scheme ``options``;
    checks that the mass stays 1 to 1e-12."""
    cfg = sd.config_from_dict(
        {
            "model": {"name": "sa", "beta": 30.0, "K": GENERAL_B_3D.tolist()},
            "domain": {"name": "sphere"},
            "initial": {
                "name": "von_mises_fisher",
                "means": [MU.tolist(), (-MU2).tolist()],
                "kappas": list(kappas),
                "weights": [0.7, 0.3],
            },
            "discretization": {
                "scheme": "log_lagrangian",
                "n": 8,
                "tolerance": tolerance,
                "allow_underresolved": True,
                **options,
            },
            "time": {"t_end": 0.5, "snapshots": 3},
        }
    )
    full = sd.run(cfg, output=tmp_path / "full.nc", progress=False)
    assert np.abs(full["mass"].values - 1.0).max() <= 1e-12
    return cfg, full


def test_a_run_with_the_interpolant_keeps_its_mass_and_resumes_bit_for_bit(tmp_path):
    """``quadrature = "interpolant"`` at beta = 30, n = 8 (every smooth triangle sub-sampled):
    the mass stays 1 to 1e-12, and a run stopped after two steps and resumed gives the same
    file bit for bit."""
    cfg, full = small_run(tmp_path, (4.0, 2.0), 1e-4, quadrature="interpolant")
    assert full.attrs["quadrature"] == "interpolant"
    assert_resumes_bit_for_bit(cfg, tmp_path, full, ("rho", "mass", "w2_projection", "n_particles"))


def test_the_fixed_triangles_move_the_sources_smoothly_with_the_particles():
    """A :class:`Reconstruction` keeps its triangles and levels: moving every particle by about
    1e-7 rad moves every source by less than 1e-6 and changes its log mass by less than 1e-3
    (measured 1.5e-4, in the thinnest slivers of the random triangulation; a flip or a change
    of level would change some by O(1)), and the mass stays the particles' to 1e-13."""
    x = _random_points(2000, 7)
    log_m = _log_rho(x) + np.log(_dual_areas(x))
    reconstruction = Reconstruction(x, log_m, 0.03)
    at_vertex, points, log_a = reconstruction.parts(x, log_m)
    moved = x + 1e-7 * np.random.default_rng(8).normal(size=x.shape)
    moved /= np.linalg.norm(moved, axis=1, keepdims=True)
    at_vertex_2, points_2, log_a_2 = reconstruction.parts(moved, log_m)
    assert len(points) > 5 * len(x) and points.shape == points_2.shape
    assert np.abs(points_2 - points).max() < 1e-6
    assert np.abs(log_a_2 - log_a).max() < 1e-3
    finite = np.isfinite(at_vertex)
    assert np.array_equal(finite, np.isfinite(at_vertex_2))
    assert np.abs(at_vertex_2[finite] - at_vertex[finite]).max() < 1e-3
    total = logsumexp(np.concatenate([at_vertex_2[finite], log_a_2]))
    assert abs(total - logsumexp(log_m)) < 1e-13
