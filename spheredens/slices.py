"""Diagnostics of densities with auxiliary slices (``usa_av``): the marginal, where each slice
concentrates, whether the marginal collapses, and how far the slice modes are from the orbit
x*(xi) = G(xi)^T z predicted for gauge kernels. Array-level functions of points and weights;
no grid, no files.
"""

from __future__ import annotations

import numpy as np

from ._types import Array

#: candidate centres tried for the W2 distance to the nearest Dirac mass (a subsample of points)
MAX_DIRAC_CANDIDATES = 4096


def _unit(v: Array) -> Array:
    n = np.linalg.norm(v, axis=-1, keepdims=True)
    return v / np.where(n > 0, n, 1.0)


def _dist(a: Array, b: Array) -> Array:
    return np.arccos(np.clip(a @ b.T, -1.0, 1.0))


def marginal(rho: Array, xi_weight: Array, axis: int = 0) -> Array:
    """The marginal density sum_k r_k rho_k: ``rho`` summed over its slice axis ``axis``
    (length M) with the slice masses ``xi_weight`` (M,), e.g. rho (M, *space) -> (*space,),
    or rho (time, M, *space) with ``axis=1`` -> (time, *space).

    The one place the marginal is formed: the recorder (``rho_marginal``, the target and the
    diagnostics), the files' ``ds.sd.marginal()`` and through it the comparisons and figures.
    """
    return np.tensordot(xi_weight, np.moveaxis(np.asarray(rho), axis, 0), axes=1)


def slice_modes(rho: Array, points: Array, weight: Array) -> Array:
    """Mode of each slice, shape (M, d): the normalized mass-weighted mean direction of the
    density within 3 cell sizes of its largest value (sub-grid accurate for a peaked slice)."""
    h = float(np.sqrt(np.mean(weight))) if points.shape[1] == 3 else float(np.mean(weight))
    out = np.empty((len(rho), points.shape[1]))
    for k, r in enumerate(rho):
        top = points[int(np.argmax(r))]
        near = _dist(points, top[None, :])[:, 0] <= 3.0 * h
        a = np.clip(r[near], 0.0, None) * weight[near]
        out[k] = _unit(a @ points[near]) if a.sum() > 0 else top
    return out


def slice_spread(rho: Array, points: Array, weight: Array, modes: Array) -> Array:
    """sqrt(int d(x, mode_k)^2 rho_k / int rho_k) per slice, radians: the W2 distance of the
    normalized slice to the Dirac mass at its mode."""
    d2 = _dist(modes, points) ** 2  # (M, N)
    a = np.clip(rho, 0.0, None) * weight
    return np.sqrt(np.sum(d2 * a, axis=1) / np.sum(a, axis=1))


def mean_norm(density: Array, points: Array, weight: Array) -> float:
    """|int x density| for a density of unit mass (1 for a Dirac mass, 0 when balanced)."""
    return float(np.linalg.norm((density * weight) @ points))


def w2_to_nearest_dirac(density: Array, points: Array, weight: Array) -> float:
    """min over z of W2(density, delta_z) = sqrt(min_z int d(x, z)^2 density), z among the
    grid points (at most :data:`MAX_DIRAC_CANDIDATES`, evenly subsampled), radians."""
    a = np.clip(density, 0.0, None) * weight
    a = a / a.sum()
    step = max(1, -(-len(points) // MAX_DIRAC_CANDIDATES))
    candidates = points[::step]
    best = np.inf
    for s in range(0, len(candidates), 256):
        cost = (_dist(candidates[s : s + 256], points) ** 2) @ a
        best = min(best, float(cost.min()))
    return float(np.sqrt(best))


def fit_orbit(modes: Array, gauges: Array, xi_weight: Array) -> tuple[Array, Array]:
    """The z that best aligns the slice modes with the orbit x*(xi_k) = G_k^T z (it maximizes
    sum_k r_k <G_k m_k, z>), and the distances d(m_k, G_k^T z) per slice (radians)."""
    z = _unit(np.einsum("k,kij,kj->i", xi_weight, gauges, modes))
    orbit = np.einsum("kji,j->ki", gauges, z)
    return z, np.arccos(np.clip(np.sum(orbit * modes, axis=1), -1.0, 1.0))
