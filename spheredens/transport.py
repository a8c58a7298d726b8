"""Wasserstein distances between weighted point sets on S^{d-1} (wraps POT).

W2 on a domain is :meth:`spheredens.geometry.Domain.w2`: this module registers the circle's
(POT's circle solver on the angles) and the domain-generic default (the exact EMD with squared
geodesic cost, any d), which the sphere uses.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ._lazy import ot
from ._types import Array
from .geometry import CIRCLE, SPHERE, circle_angle, circle_points, provides_by_default
from .grids import RingMesh


def w2_circle(
    theta_a: Array, weight_a: Array, theta_b: Array, weight_b: Array, *, tol: float = 1e-12
) -> float:
    """Exact W2 (geodesic cost, radians) between two weighted point sets on S^1.

    Parameters
    ----------
    theta_a, theta_b : ndarray
        Angles in radians (any real values; taken modulo 2 pi).
    weight_a, weight_b : ndarray
        Non-negative weights, each summing to 1 (they are renormalized).
    tol : float
        Tolerance of POT's binary search over the rotation parameter.

    Notes
    -----
    ``ot.wasserstein_circle`` works on the circle of circumference 1 (coordinates in [0, 1))
    and returns W_p^p: the result is W2 = 2 pi sqrt(value). When an arc of at most half the
    circle holds every atom of positive weight (:func:`half_circle_start`: a zonal law in its
    meridian half-plane, two close clusters), the geodesic is the arc's coordinate difference
    and ``ot.wasserstein_1d`` gives the same W2 exactly, without the search over rotations.

    The circle solver minimizes over the shift theta of the cumulative distribution, and when
    the optimum is theta = 0 (the unrotated quantile coupling, which is common) its search may
    end at theta = -1e-16; POT (0.9.7) then evaluates the cost wrongly unless the cumulative
    weights end at exactly 1 (with 16 and 24 equal weights it returned W2 = 5.70 rad, more than
    pi, for a true 0.275). The points are therefore sorted here and the last weight of each
    side set so that its cumulative sum ends at exactly 1 (:func:`_sorted_with_exact_total`).
    """

    u, wa = _sorted_with_exact_total(theta_a, weight_a)
    v, wb = _sorted_with_exact_total(theta_b, weight_b)
    start = half_circle_start(np.concatenate([u[wa > 0.0], v[wb > 0.0]]))
    if start is not None:  # one arc of at most pi holds both: there the geodesic is |u - v|
        u, v = np.mod(u - start, 1.0), np.mod(v - start, 1.0)
        w2p = ot.wasserstein_1d(u, v, wa, wb, p=2)
    else:
        w2p = ot.wasserstein_circle(u, v, wa, wb, p=2, eps=tol, require_sort=False)
    value = float(np.asarray(w2p).reshape(-1)[0])
    return float(2.0 * np.pi * np.sqrt(max(value, 0.0)))


def _sorted_with_exact_total(theta: Array, weight: Array) -> tuple[Array, Array]:
    """Coordinates theta / 2 pi in [0, 1), sorted, and their weights (clipped at 0,
    normalized) with the last one 1 - (the cumulative sum of the others), so that the
    cumulative sum POT forms ends at exactly 1."""
    u = np.mod(np.asarray(theta, dtype=float) / (2.0 * np.pi), 1.0)
    u = np.where(u >= 1.0, 0.0, u)  # mod of a tiny negative angle rounds up to 1.0
    w = np.clip(np.asarray(weight, dtype=float), 0.0, None)
    order = np.argsort(u, kind="stable")
    u, w = u[order], w[order] / w.sum()
    if w.size > 1:
        w[-1] = max(1.0 - float(np.cumsum(w[:-1])[-1]), 0.0)
    return u, w


def half_circle_start(u: Array) -> float | None:
    """The start s of an arc [s, s + 1/2] (circumference 1) holding all the points u in [0, 1),
    else None: the end of the widest gap between the sorted points when it is at least 1/2.
    On such an arc the geodesic distance is |u - v| (both taken from s), so W2 there is the
    exact 1-D W2 of the quantile functions, with no search over rotations."""
    if u.size == 0:
        return None
    x = np.sort(u)
    gaps = np.diff(np.append(x, x[0] + 1.0))
    k = int(np.argmax(gaps))
    return float(x[(k + 1) % x.size]) if gaps[k] >= 0.5 else None


@CIRCLE.provides("w2")
def w2_circle_points(x: Array, a: Array, y: Array, b: Array) -> float:
    """Exact W2 on S^1 between weighted points, by :func:`w2_circle` on their angles.

    Parameters
    ----------
    x, y : ndarray
        Points (n, 2) on the circle, or their angles (n,) in radians (a 1-D array is taken
        as angles, e.g. the sub-atoms of :func:`circle_density_atoms`).
    a, b : ndarray
        Non-negative weights (renormalized).
    """
    return w2_circle(_angles(x), a, _angles(y), b)


def _angles(x: Array) -> Array:
    """Angles of points (n, 2) on the circle; a 1-D array is already angles."""
    return x if np.ndim(x) == 1 else circle_angle(x)


#: sub-atoms of a circle density: k = ceil(CIRCLE_SUB_ATOMS / n) per cell
CIRCLE_SUB_ATOMS = 1 << 16


def sub_atoms_per_cell(n: int, min_atoms: int = CIRCLE_SUB_ATOMS) -> int:
    """k = ceil(min_atoms / n) sub-atoms per cell of a circle grid of n cells."""
    return max(1, -(-min_atoms // n))


def circle_density_atoms(
    theta: Array, weight: Array, rho: Array, *, min_atoms: int = CIRCLE_SUB_ATOMS
) -> tuple[Array, Array, float]:
    """The piecewise-constant density on the cells [theta_j -+ w_j / 2] as k equal sub-atoms per
    cell (k = ceil(min_atoms / n)). Returns (angles, masses, bound) with bound = max_j w_j / (2 k),
    an upper bound of W2 between the atoms and the piecewise-constant density. Negative values
    (Gibbs undershoots of spectral runs) are clipped."""
    k = sub_atoms_per_cell(len(theta), min_atoms)
    offsets = (np.arange(k) + 0.5) / k - 0.5
    angles = (theta[:, None] + offsets[None, :] * weight[:, None]).reshape(-1)
    masses = np.repeat(np.clip(rho, 0.0, None) * weight / k, k)
    return angles, masses / masses.sum(), float(np.max(weight) / (2 * k))


def sphere_density_atoms(
    points: Array, weight: Array, rho: Array, *, n_points: int = 4096
) -> tuple[Array, Array, float]:
    """Coarsen a density on a (lat, lon) grid to about ``n_points`` weighted atoms.

    Blocks of b x b grid cells (b = ceil(sqrt(N / n_points))) become one atom at the block's
    mass-weighted centroid (projected to the sphere) carrying its mass; negative values are
    clipped. Returns (atoms, masses, bound) where bound = sqrt(sum_i a_i d(x_i, c(i))^2) is the
    cost of the coupling that moves each grid atom to its block's atom: an upper bound of W2
    between the grid atoms and the coarse atoms.
    """
    if np.ndim(weight) == 1:
        return _cell_atoms(points, weight, rho, n_points)
    nlat, nphi = weight.shape
    b = max(1, int(np.ceil(np.sqrt(nlat * nphi / n_points))))
    lat_edges, lon_edges = np.arange(0, nlat, b), np.arange(0, nphi, b)
    a = np.clip(rho, 0.0, None) * weight
    a = a / a.sum()

    def blocks(f):
        return np.add.reduceat(np.add.reduceat(f, lat_edges, axis=0), lon_edges, axis=1)

    mass = blocks(a)
    centroid = blocks(a[..., None] * points)
    norm = np.linalg.norm(centroid, axis=-1, keepdims=True)
    centre = centroid / np.where(norm > 0, norm, 1.0)
    # each grid cell's block index -> its atom, for the bound
    bi = np.searchsorted(lat_edges, np.arange(nlat), side="right") - 1
    bj = np.searchsorted(lon_edges, np.arange(nphi), side="right") - 1
    own = centre[bi[:, None], bj[None, :]]
    dist = np.arccos(np.clip(np.sum(own * points, axis=-1), -1.0, 1.0))
    bound = float(np.sqrt(np.sum(a * dist**2)))
    keep = (mass > 0).reshape(-1)
    return centre.reshape(-1, 3)[keep], mass.reshape(-1)[keep], bound


def _cell_atoms(
    points: Array, weight: Array, rho: Array, n_points: int
) -> tuple[Array, Array, float]:
    """Unstructured cells: group them by the cells of a coarse ring mesh of about ``n_points``
    cells containing their centres; same atoms and bound as for a (lat, lon) grid."""

    a = np.clip(rho, 0.0, None) * weight
    a = a / a.sum()
    nlat = int(np.clip(np.ceil(np.sqrt(np.pi * n_points / 4.0)), 4, 2048))
    coarse = RingMesh(nlat)
    lat = np.arcsin(np.clip(points[:, 2], -1.0, 1.0))
    lon = np.arctan2(points[:, 1], points[:, 0])
    block = coarse.locate(lat, lon)
    mass = np.bincount(block, a, coarse.n_cells)
    centroid = np.stack(
        [np.bincount(block, a * points[:, i], coarse.n_cells) for i in range(3)], axis=-1
    )
    norm = np.linalg.norm(centroid, axis=-1, keepdims=True)
    centre = centroid / np.where(norm > 0, norm, 1.0)
    dist = np.arccos(np.clip(np.sum(centre[block] * points, axis=-1), -1.0, 1.0))
    bound = float(np.sqrt(np.sum(a * dist**2)))
    keep = mass > 0
    return centre[keep], mass[keep], bound


@provides_by_default("w2")
def w2_sphere(x: Array, a: Array, y: Array, b: Array) -> float:
    """Exact W2 (geodesic cost) between weighted point sets on S^{d-1} (S^2, and the default of
    every domain without its own W2) by POT's network simplex; to two antipodal atoms (Pi_# rho_0
    when E_1 is a line) by the exact sort of :func:`w2_to_antipodal_atoms`, O(n log n)."""

    if len(y) == 2 and np.allclose(y[0], -y[1], rtol=0.0, atol=1e-14):
        return w2_to_antipodal_atoms(x, a, y[0], float(b[0] / (b[0] + b[1])))
    cost = np.arccos(np.clip(x @ y.T, -1.0, 1.0)) ** 2
    value = ot.emd2(a / a.sum(), b / b.sum(), cost, numItermax=50_000_000)
    return float(np.sqrt(max(float(value), 0.0)))


def w2_to_antipodal_atoms(x: Array, a: Array, u: Array, m_plus: float) -> float:
    """Exact W2 (geodesic cost) between weighted points (x_i, a_i) on S^{d-1} and the two atoms
    m_+ delta_u + (1 - m_+) delta_{-u}, without coarsening (masses normalized to 1).

    For two antipodal atoms the cost difference d(x, u)^2 - d(x, -u)^2 = 2 pi theta - pi^2
    (theta the angle of x from u) increases with theta, so an optimal plan sends to u the
    mass m_+ of the points nearest to it (one point split at the threshold) and the rest to
    -u: a sort, O(n log n), for any number of points (the EMD would need n x 2 costs and a
    network simplex; tested against it).
    """
    a = np.clip(np.asarray(a, dtype=float), 0.0, None)
    a = a / a.sum()
    x, u = np.asarray(x, dtype=float), np.asarray(u, dtype=float)
    # 2 atan2(|x - u|, |x + u|): accurate at every angle (arccos loses half the digits near 0)
    theta = 2.0 * np.arctan2(np.linalg.norm(x - u, axis=-1), np.linalg.norm(x + u, axis=-1))
    order = np.argsort(theta, kind="stable")
    theta, a = theta[order], a[order]
    upto = np.cumsum(a)
    to_plus = np.clip(np.minimum(upto, m_plus) - (upto - a), 0.0, None)
    cost = np.sum(to_plus * theta**2 + (a - to_plus) * (np.pi - theta) ** 2)
    return float(np.sqrt(max(cost, 0.0)))


#: atoms of a sphere density coarsened for the exact EMD: one default for ``w2_projection`` and
#: ``spheredens compare`` (``--points``), so that both represent rho_t the same way
DENSITY_ATOMS = 4096


@dataclass(frozen=True)
class GridAtoms:
    """The one representation of a density on a grid for every W2 computed from it
    (``w2_projection``, ``w2_terminal`` and ``spheredens compare``): the part ``"grid_atoms"`` of
    a domain. It needs only what a run file holds (the grid's points, angles and weights), so a
    run's grid and a :class:`~spheredens.accessor.FileGrid` give the same atoms.

    Attributes
    ----------
    atoms : callable
        ``(grid, rho, n_points, centroid=None) -> (points, masses, bound)``: unit vectors
        (n, d), masses summing to 1 (rho clipped at 0, times the weights) and an upper bound of
        W2 between the represented density and these atoms (radians). ``n_points``: the
        coarsening for an exact EMD (sphere), None for none (a closed-form distance such as
        ``w2_terminal``). ``centroid``: the cells' centroids, for a density whose scheme
        carries them (``log_sl``): on the circle their offsets from the cell centres in cell
        widths (file variable ``rho_centroid``), on the sphere unit vectors
        (``rho_centroid_xyz``); each cell's mass is then an atom at its centroid.
    describe : callable
        ``(grid, n_points, centroids=False) -> str``: the representation, with its W2 bound,
        for the ``comment`` of the variables computed from it.
    resolution : callable
        ``(grid, rho, bound) -> float``: ``density_resolution`` of ``spheredens compare``.
    method : str
        How W2 between the atoms and other atoms is computed (:meth:`Domain.w2`).
    """

    atoms: Callable[..., tuple[Array, Array, float]]
    describe: Callable[..., str]
    resolution: Callable[[Any, Array, float], float]
    method: str = "exact W2 (POT emd2, squared geodesic cost)"


def grid_point_atoms(
    grid: Any, rho: Array, n_points: int | None = None, centroid: Array | None = None
) -> tuple[Array, Array, float]:
    """rho as atoms at the grid points (cell centres or quadrature nodes) with masses rho_j w_j
    (clipped at 0, normalized); bound 0 (the atoms are the representation). With ``centroid``
    (unit vectors of the cells' centroids, the shape of ``grid.points``) each cell's mass sits
    at its centroid instead."""
    where = grid.points if centroid is None else centroid
    points = np.asarray(where).reshape(-1, np.shape(grid.points)[-1])
    a = np.clip(np.asarray(rho, dtype=float), 0.0, None).reshape(-1) * np.asarray(
        grid.weight
    ).reshape(-1)
    return points, a / a.sum(), 0.0


def _circle_atoms(
    grid: Any, rho: Array, n_points: int | None, centroid: Array | None = None
) -> tuple[Array, Array, float]:
    if centroid is not None:  # the mass of each cell at its centroid
        a = np.clip(np.asarray(rho, dtype=float), 0.0, None) * grid.weight
        return (
            circle_points(grid.theta + np.asarray(centroid, dtype=float) * grid.weight),
            a / a.sum(),
            0.0,
        )
    angles, masses, bound = circle_density_atoms(
        grid.theta, grid.weight, np.asarray(rho, dtype=float)
    )
    return circle_points(angles), masses, bound


_CENTROIDS = (
    "rho_t as the mass of each cell at its centroid theta_j + c_j w_j (c_j: the variable "
    "rho_centroid, the first moment the scheme carries)"
)


def _circle_describe(grid: Any, n_points: int | None, centroids: bool = False) -> str:
    if centroids:
        return _CENTROIDS
    k = sub_atoms_per_cell(len(grid.theta))
    return (
        f"rho_t as the piecewise-constant density on the grid cells [theta_j -+ w_j / 2] (finite "
        f"volumes: their cell averages; nodal values: the cells around the nodes), {k} equal "
        f"sub-atoms per cell, W2 error <= {float(np.max(grid.weight)) / (2 * k):.2g} rad"
    )


def _cell_resolution(grid: Any, rho: Array, bound: float) -> float:
    """W2 between the piecewise-constant density and its cell-centre atoms (h / sqrt(12) for
    uniform cells): the resolution of the grid itself."""
    pos = np.clip(rho, 0, None)
    weight = grid.weight
    return float(np.sqrt(np.sum(pos * weight * weight**2) / np.sum(pos * weight) / 12.0))


def _sphere_atoms(
    grid: Any, rho: Array, n_points: int | None, centroid: Array | None = None
) -> tuple[Array, Array, float]:
    if n_points is None:
        return grid_point_atoms(grid, rho, None, centroid)
    # with centroids (unit vectors, the file's rho_centroid_xyz) each cell's mass sits there
    points = grid.points if centroid is None else np.reshape(centroid, np.shape(grid.points))
    return sphere_density_atoms(
        points, grid.weight, np.asarray(rho, dtype=float), n_points=n_points
    )


_GRID_POINTS = (
    "rho_t as atoms at the grid points (cell centres or quadrature nodes) with masses rho_j w_j"
)
_SPHERE_CENTROIDS = (
    "rho_t as the mass rho_j w_j of each cell at its centroid (the variable rho_centroid_xyz, "
    "the first moment the scheme carries)"
)


def _sphere_describe(grid: Any, n_points: int | None, centroids: bool = False) -> str:
    where = _SPHERE_CENTROIDS if centroids else _GRID_POINTS
    if n_points is None:
        return where + " (not coarsened)"
    return (
        where + f", coarsened to ~{n_points} atoms (mass centroids of blocks of cells), "
        "W2 error <= sqrt(sum_j a_j d(x_j, c_j)^2), c_j the atom of x_j's block"
    )


CIRCLE.provides("grid_atoms")(
    GridAtoms(
        _circle_atoms,
        _circle_describe,
        _cell_resolution,
        "exact W2 on the circle (POT wasserstein_circle, geodesic cost)",
    )
)
SPHERE.provides("grid_atoms")(
    GridAtoms(
        _sphere_atoms,
        _sphere_describe,
        lambda grid, rho, bound: bound,
        "exact W2 on the sphere (POT emd2, squared geodesic cost)",
    )
)
provides_by_default("grid_atoms")(
    GridAtoms(
        grid_point_atoms,
        lambda grid, n_points, centroids=False: _GRID_POINTS,
        lambda grid, rho, bound: bound,
    )
)
