"""``voronoi_shapes`` of ``log_lagrangian``: the deep tail's shapes from the spherical Voronoi
cells of its particles (:func:`spheredens.schemes._particle_remesh.voronoi_shapes`).
The cells tile the sphere, so the shapes' areas add up to 4 pi to round-off; a cell's shape
has the cell's area and axes; the clusters keep theirs bit for bit; filaments far apart get
shapes as wide as the gaps, which the splits then fill with the mass and the first moment
kept; a run keeps its mass and resumes bit for bit."""

from __future__ import annotations

import math

import numpy as np
import pytest
import test_sphere_interpolant as smooth
from conftest import assert_resumes_bit_for_bit
from scipy.spatial import cKDTree
from scipy.special import logsumexp

import spheredens as sd
from spheredens.geometry import tangent_frames
from spheredens.grids import CubedSphereCells
from spheredens.schemes._particle_remesh import (
    VORONOI_DISTINCT,
    VORONOI_REACH,
    log_area,
    split,
    voronoi_shapes,
)


def _cells_and_a_cluster(n: int = 16):
    """The n x n cubed sphere's cells as particles of equal density (log mass = log area, at
    their centroids, with their shapes) and one cluster e^40 heavier, 1e-6 of a cell wide."""
    log_m, x, shape = CubedSphereCells(n).log_moments(lambda p: np.zeros(len(p)), order=1)
    x = x / np.linalg.norm(x, axis=1, keepdims=True)
    centre = np.array([[0.0, 0.6, 0.8]])
    cluster = tangent_frames(centre) * 1e-6 * math.pi / (2 * n)
    return (np.append(log_m, 40.0), np.vstack([x, centre]), np.concatenate([shape, cluster]))


def test_the_tails_cells_tile_the_sphere_and_the_cluster_keeps_its_shape():
    """Every cell of the 16 x 16 cubed sphere is deep (40 e-folds below the cluster): the
    Voronoi shapes' areas add up to 4 pi to 1e-12; each is within 5% of its cell's area and its
    edges within 25% of the cell's (the centroids' Voronoi cells are near the cells
    themselves); the cluster's shape comes back bit for bit."""
    log_m, x, shape = _cells_and_a_cluster()
    new, count = voronoi_shapes(log_m, x, shape, 0.2)
    assert count == len(x) - 1
    assert abs(np.exp(log_area(new[:-1])).sum() - 4.0 * math.pi) < 1e-12
    assert np.abs(log_area(new[:-1]) - log_area(shape[:-1])).max() < 0.05
    ratio = np.linalg.svd(new[:-1], compute_uv=False) / np.linalg.svd(
        shape[:-1], compute_uv=False
    )
    assert 0.75 < ratio.min() and ratio.max() < 1.25
    assert np.array_equal(new[-1], shape[-1])
    assert np.allclose(np.einsum("ni,nik->nk", x[:-1], new[:-1]), 0.0, atol=1e-15)  # tangent


def test_a_near_duplicate_keeps_its_shape():
    """A deep particle within VORONOI_DISTINCT of another keeps its shape (the tessellation
    needs distinct generators); the others are tessellated."""
    log_m, x, shape = _cells_and_a_cluster(8)
    twin = x[5] + 0.1 * VORONOI_DISTINCT * tangent_frames(x[5:6])[0, :, 0]
    log_m = np.append(log_m, log_m[5])
    x = np.vstack([x, twin / np.linalg.norm(twin)])
    shape = np.concatenate([shape, shape[5:6]])
    new, count = voronoi_shapes(log_m, x, shape, 0.2)
    assert count == len(x) - 2  # the cluster and one of the twins keep theirs
    assert sum(np.array_equal(new[k], shape[k]) for k in (5, len(x) - 1)) == 1


def test_filaments_far_apart_are_widened_and_the_splits_fill_the_gaps():
    """A deep tail on 21 meridian arcs 0.08 rad apart (points 0.005 rad apart along them) whose
    shapes are needles 1e-6 rad wide: the Voronoi shapes are as wide as the gaps (0.08 rad times
    the cosine of the latitude, to 5%) and as long as the spacing along the arcs (0.005 rad, to
    5%), and splitting to s_max = 0.02 leaves no point of the region farther than 0.015 rad
    from a particle (before: 0.04), with the total mass to 1e-13 and the first moment to 1e-14."""
    lon = np.deg2rad(np.arange(-10, 11)) * (0.08 / np.deg2rad(1.0))
    lat = np.arange(-0.4, 0.4001, 0.005)
    LON, LAT = np.meshgrid(lon, lat, indexing="ij")
    x = np.stack(
        [np.cos(LAT) * np.cos(LON), np.cos(LAT) * np.sin(LON), np.sin(LAT)], axis=-1
    ).reshape(-1, 3)
    log_m = -50.0 + 3.0 * x[:, 1] - 2.0 * x[:, 2]
    frames = tangent_frames(x)
    east = np.cross(np.array([0.0, 0.0, 1.0]), x)
    east /= np.linalg.norm(east, axis=1, keepdims=True)
    north = np.cross(x, east)
    shape = np.stack([north * 0.005, east * 1e-6], axis=-1)
    cluster = np.array([[-1.0, 0.0, 0.0]])
    log_m = np.append(log_m, 0.0)
    x = np.vstack([x, cluster])
    shape = np.concatenate([shape, frames[:1] * 1e-4])
    new, _ = voronoi_shapes(log_m, x, shape, 0.02)
    inner = np.flatnonzero((np.abs(LON.ravel()) < 0.7) & (np.abs(LAT.ravel()) < 0.3))
    widths = np.linalg.svd(new[inner], compute_uv=False)
    across = 0.08 * np.cos(LAT.ravel()[inner])  # the arcs' spacing at each latitude
    assert np.abs(widths[:, 0] / across - 1.0).max() < 0.05
    assert np.abs(widths[:, 1] / 0.005 - 1.0).max() < 0.05
    assert widths.max() <= VORONOI_REACH * 0.02
    lengths = np.full(len(x), 0.02)
    out_m, out_x, _, _, _ = split(log_m, x, new, log_m.copy(), lengths, True)
    assert abs(logsumexp(out_m) - logsumexp(log_m)) < 1e-13
    moment = np.exp(log_m - logsumexp(log_m)) @ x
    new_moment = np.exp(out_m - logsumexp(out_m)) @ out_x
    assert np.abs(new_moment - moment).max() < 1e-14
    probe_lon, probe_lat = np.meshgrid(np.linspace(-0.6, 0.6, 61), np.linspace(-0.25, 0.25, 26))
    probe = np.stack(
        [np.cos(probe_lat) * np.cos(probe_lon), np.cos(probe_lat) * np.sin(probe_lon),
         np.sin(probe_lat)], axis=-1,
    ).reshape(-1, 3)
    before = cKDTree(x).query(probe)[0].max()
    after = cKDTree(out_x).query(probe)[0].max()
    assert before > 0.039 and after < 0.015


def test_a_run_that_tessellates_its_tail_keeps_its_mass_and_resumes_bit_for_bit(tmp_path):
    """beta = 30 (a general B), n = 8, the tail tessellated every 0.25 (log rho spans 60
    e-folds), twice: recorded, the mass 1 to 1e-12, and a run stopped after two steps and
    resumed gives the same file bit for bit."""
    cfg, full = smooth.small_run(tmp_path, (30.0, 20.0), 1e-3, voronoi_shapes=0.25)
    assert full.attrs["voronoi_shapes"] == 0.25
    assert full.attrs["tail_tessellations"] == 2 and full.attrs["tail_tessellated_particles"] > 0
    assert np.abs(full["mass"].values - 1.0).max() < 1e-12
    assert_resumes_bit_for_bit(cfg, tmp_path, full, ("rho", "mass", "w2_projection", "n_particles"))


def test_a_negative_voronoi_interval_is_refused():
    with pytest.raises(sd.ConfigError, match="voronoi_shapes"):
        smooth.small_run(None, (30.0, 20.0), 1e-3, voronoi_shapes=-1.0)
