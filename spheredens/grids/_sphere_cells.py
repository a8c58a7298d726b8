"""Equiangular latitude-longitude cells of S^2: the grid of the sphere's ``log_sl``."""

from __future__ import annotations

import math
from typing import Callable

import numpy as np
from numpy.typing import NDArray

from .._types import Array
from ._cf import cell_vertices
from ._sphere_gauss import CELL_AREA_ATTRS
from ._sphere_rings import MAX_RINGS, MIN_RINGS, RingMesh


def colat_lon_points(theta: Array, phi: Array) -> Array:
    """Unit vectors (..., 3) at colatitude ``theta`` and longitude ``phi`` (radians)."""
    theta, phi = np.broadcast_arrays(theta, phi)
    st = np.sin(theta)
    return np.stack([st * np.cos(phi), st * np.sin(phi), np.cos(theta)], axis=-1)


def colat_lon_frame(theta: Array, phi: Array) -> tuple[Array, Array]:
    """(e_theta, e_phi): unit tangents towards increasing colatitude (south) and longitude
    (east)."""
    theta, phi = np.broadcast_arrays(theta, phi)
    ct, cp, sp = np.cos(theta), np.cos(phi), np.sin(phi)
    return (
        np.stack([ct * cp, ct * sp, -np.sin(theta)], axis=-1),
        np.stack([-sp, cp, np.zeros_like(phi)], axis=-1),
    )


def rotation_to(pole: Array) -> Array:
    """A rotation R with R e_3 = ``pole`` (the identity for e_3, a half turn about e_1 for -e_3)."""
    p = np.asarray(pole, dtype=float)
    p = p / np.linalg.norm(p)
    e3 = np.array([0.0, 0.0, 1.0])
    c = float(p @ e3)
    if c > 1.0 - 1e-15:
        return np.eye(3)
    if c < -1.0 + 1e-15:
        return np.diag([1.0, -1.0, -1.0])
    k = np.cross(e3, p)
    s = float(np.linalg.norm(k))
    k = k / s
    K = np.array([[0.0, -k[2], k[1]], [k[2], 0.0, -k[0]], [-k[1], k[0], 0.0]])
    return np.eye(3) + s * K + (1.0 - c) * K @ K


def _lat_lon(x: Array) -> tuple[Array, Array]:
    """Latitude and longitude in degrees (longitude in [0, 360)) of unit vectors (..., 3)."""
    lat = np.degrees(np.arcsin(np.clip(x[..., 2], -1.0, 1.0)))
    lon = np.mod(np.degrees(np.arctan2(x[..., 1], x[..., 0])), 360.0)
    return lat, lon


class LatLonCells:
    """``nlat`` x ``2 nlat`` cells of equal angular size h = pi / nlat on S^2, about a polar
    axis ``pole`` (default e_3).

    In the grid's own frame (its north pole at ``pole``: a point x of S^2 has the grid
    coordinates R^T x, R = :func:`rotation_to` (pole)), cell (i, j) spans colatitudes
    [i h, (i + 1) h] (north to south) and longitudes [j h, (j + 1) h]; its coordinate centre
    is ((i + 1/2) h, (j + 1/2) h). Masses
    are measured in the coordinates (theta, phi), where the area element is sin(theta)
    dtheta dphi: a cell of mass m has the coordinate density m / h^2 and the density
    m / |cell|. Rings of colatitude are periodic lines in phi; the meridians phi_j and
    phi_j + pi together are a great circle through both poles, a periodic line in theta.

    In files the cells are a mesh (dimension ``cell``, ring by ring from the grid's north pole,
    with the latitude and longitude of each cell's centre and of its vertices in the ordinary
    frame), whatever the pole.

    Attributes
    ----------
    nlat, nlon : int
    h : float
        The cell's angular size pi / nlat (radians).
    rotation : ndarray (3, 3)
        R: grid coordinates to points of S^2.
    colat, phi : ndarray
        Coordinate centres of the rings (nlat,) and of the columns (nlon,), radians, grid frame.
    points : ndarray (n_cells, 3)
        The cells' coordinate centres as points of S^2.
    weight : ndarray (n_cells,)
        Exact cell areas (steradians, sum 4 pi to round-off).
    lat, lon : ndarray (n_cells,)
        Latitude and longitude of the centres in degrees (the ordinary frame).
    """

    space_dims = ("cell",)

    def __init__(self, nlat: int, pole: Array | None = None) -> None:
        nlat = int(nlat)
        if not MIN_RINGS <= nlat <= MAX_RINGS:
            raise ValueError(f"nlat = {nlat} must be in [{MIN_RINGS}, {MAX_RINGS}]")
        self.nlat, self.nlon = nlat, 2 * nlat
        self.h = math.pi / nlat
        self.colat_edges = np.arange(nlat + 1) * self.h
        self.colat_edges[-1] = math.pi
        self.colat = (np.arange(nlat) + 0.5) * self.h
        self.phi = (np.arange(self.nlon) + 0.5) * self.h
        self.pole = np.array([0.0, 0.0, 1.0]) if pole is None else np.asarray(pole, dtype=float)
        self.rotation = rotation_to(self.pole)
        self.local_points = colat_lon_points(self.colat[:, None], self.phi[None, :])
        self.points = self.to_world(self.local_points).reshape(-1, 3)
        self.lat, self.lon = _lat_lon(self.points)
        ring_area = self.h * (np.cos(self.colat_edges[:-1]) - np.cos(self.colat_edges[1:]))
        self.ring_area = ring_area
        self.weight = np.repeat(ring_area[:, None], self.nlon, axis=1).reshape(-1)
        self.n_cells = self.nlat * self.nlon

    @property
    def shape(self) -> tuple[int]:
        return (self.n_cells,)

    @property
    def cells_shape(self) -> tuple[int, int]:
        """The cells as the grid's rings x columns."""
        return (self.nlat, self.nlon)

    def to_world(self, x: Array) -> Array:
        """Points or vectors (..., 3) from the grid's frame to the ordinary one: R x."""
        return x @ self.rotation.T

    def to_grid(self, x: Array) -> Array:
        """Points or vectors (..., 3) from the ordinary frame to the grid's: R^T x."""
        return x @ self.rotation

    def centroid_angles(self, offset_theta: Array, offset_phi: Array) -> tuple[Array, Array]:
        """(colatitude, longitude) of points offset from the cell centres by the given fractions
        of a cell (shape (..., nlat, nlon))."""
        return (
            (np.arange(self.nlat)[:, None] + 0.5 + offset_theta) * self.h,
            (np.arange(self.nlon)[None, :] + 0.5 + offset_phi) * self.h,
        )

    def centroid_points(self, offset_theta: Array, offset_phi: Array) -> Array:
        """Unit vectors (..., nlat, nlon, 3) of the cells' centroids given as offsets, in the
        grid's frame."""
        return colat_lon_points(*self.centroid_angles(offset_theta, offset_phi))

    def cell_quadrature(self, order: int = 6) -> tuple[Array, Array, Array]:
        """Gauss-Legendre product rule on every cell in (theta, phi): (node offsets in theta
        and in phi, in cell widths from the centre, shape (order^2,) each, and the log of the
        weights of sin(theta) dtheta dphi at every cell and node, shape (nlat, order^2))."""
        g, w = np.polynomial.legendre.leggauss(order)
        ot, op = np.meshgrid(0.5 * g, 0.5 * g, indexing="ij")
        wt = np.outer(0.5 * w, 0.5 * w).reshape(-1) * self.h * self.h
        theta = self.colat[:, None] + ot.reshape(-1)[None, :] * self.h
        return ot.reshape(-1), op.reshape(-1), np.log(wt)[None, :] + np.log(np.sin(theta))

    def cell_averages(self, f: Callable[[Array], Array], order: int = 4) -> Array:
        """Cell averages of f (a function of points (..., 3) of S^2) by a Gauss product rule in
        the grid's coordinates, shape (n_cells,)."""
        ot, op, log_w = self.cell_quadrature(order)
        theta = self.colat[:, None, None] + ot[None, None, :] * self.h
        phi = self.phi[None, :, None] + op[None, None, :] * self.h
        values = np.asarray(f(self.to_world(colat_lon_points(theta, phi))), dtype=float)
        return np.sum(values * np.exp(log_w)[:, None, :], axis=-1).reshape(-1) / self.weight

    # -- Dataset contract -------------------------------------------------------------------
    def vertices(self) -> tuple[Array, Array]:
        """Latitude and longitude (degrees, (n_cells, 4) each) of the cells' corners in the
        ordinary frame: in the grid's frame north-west, south-west, south-east, north-east."""
        t0, t1 = self.colat_edges[:-1, None], self.colat_edges[1:, None]
        p0, p1 = (self.phi - 0.5 * self.h)[None, :], (self.phi + 0.5 * self.h)[None, :]
        corners = [colat_lon_points(t, p) for t, p in ((t0, p0), (t1, p0), (t1, p1), (t0, p1))]
        lat, lon = _lat_lon(self.to_world(np.stack(corners, axis=-2)))
        return lat.reshape(-1, 4), lon.reshape(-1, 4)

    def dataset_variables(self) -> dict[str, tuple]:
        """Mesh description: cell vertices (degrees), cell areas."""
        lat_v, lon_v = self.vertices()
        order = "in the grid's frame: north-west, south-west, south-east, north-east corner"
        return {
            **cell_vertices(lat_v, lon_v, order),
            "cell_area": ("cell", self.weight.copy(), dict(CELL_AREA_ATTRS)),
            "grid_pole": (
                "xyz",
                self.pole.copy(),
                {
                    "long_name": "north pole of the equiangular cells",
                    "units": "1",
                    "comment": f"{self.nlat} rings of {self.nlon} cells of pi / {self.nlat} in "
                    "colatitude and longitude about this unit vector, ring by ring from it",
                },
            ),
        }

    coord_comments = (
        "latitude of the cell's coordinate centre",
        "longitude of the cell's coordinate centre",
    )
    dataset_coords = RingMesh.dataset_coords

    weight_attrs = {
        "long_name": "cell area",
        "units": "steradian",
        "comment": "cell areas of the equiangular latitude-longitude cells (about the grid's pole)",
    }
    rho_attrs = {
        "long_name": "density",
        "units": "steradian-1",
        "cell_measures": "area: cell_area",
        "comment": "cell average of the density with respect to surface area",
    }

    def locate(self, lat: Array, lon: Array) -> NDArray[np.int64]:
        """Index of the cell holding each point given by its latitude and longitude (radians,
        the ordinary frame)."""
        lat, lon = np.broadcast_arrays(lat, lon)
        cl = np.cos(lat)
        return self.cell_of(np.stack([cl * np.cos(lon), cl * np.sin(lon), np.sin(lat)], axis=-1))

    def cell_of(self, points: Array) -> NDArray[np.int64]:
        """Index of the cell holding each point of S^2 (unit vectors (..., 3))."""
        x = self.to_grid(np.asarray(points, dtype=float))
        theta = np.arccos(np.clip(x[..., 2], -1.0, 1.0))
        phi = np.mod(np.arctan2(x[..., 1], x[..., 0]), 2.0 * math.pi)
        i = np.clip(np.floor(theta / self.h).astype(np.int64), 0, self.nlat - 1)
        j = np.clip(np.floor(phi / self.h).astype(np.int64), 0, self.nlon - 1)
        return i * self.nlon + j

    #: cell values sampled on a regular (lat, lon) grid for plotting, as for the ring mesh
    to_latlon = RingMesh.to_latlon

    def point_values(self, f: Callable[[Array], Array]) -> Array:
        return np.asarray(f(self.points), dtype=float)

    def integrate(self, f: Array) -> float:
        return float(np.sum(f * self.weight))
