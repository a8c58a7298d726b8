"""Reduced latitude-longitude mesh of S^2: rings of ~cos(lat) cells each, polar caps."""

from __future__ import annotations

import math
from typing import Callable, Iterator

import numpy as np
from numpy.typing import NDArray
from scipy import sparse

from .._types import Array
from ._cf import cell_vertices, lat_lon_coords
from ._sphere_gauss import CELL_AREA_ATTRS

#: largest number of rings accepted (cells grow like 4 nlat^2 / pi)
MAX_RINGS = 2048
#: fewest rings (two caps and two rings of cells)
MIN_RINGS = 4


def _unit(lat: Array, lon: Array) -> Array:
    lat, lon = np.broadcast_arrays(lat, lon)
    cl = np.cos(lat)
    return np.stack([cl * np.cos(lon), cl * np.sin(lon), np.sin(lat)], axis=-1)


def _east(lon: Array) -> Array:
    return np.stack([-np.sin(lon), np.cos(lon), np.zeros_like(lon)], axis=-1)


def _north(lat: Array, lon: Array) -> Array:
    sl = np.sin(lat)
    return np.stack([-sl * np.cos(lon), -sl * np.sin(lon), np.cos(lat)], axis=-1)


class RingMesh:
    """Finite-volume mesh of S^2 without the pole problem.

    ``nlat`` rings of equal latitude height h = pi / nlat (or of the heights h_j that
    ``lat_edges`` gives, e.g. finer near the poles). The two polar rings are single cells
    (spherical caps of radius h_0 around the poles); ring j in between (latitudes
    [lat_j, lat_{j+1}]) holds n_j = max(3, round(2 pi cos(mid-latitude) / h_j)) equal cells in
    longitude (2 nlat cos for equal rings), so every cell is about h_j x h_j and no cell is
    thinner near the poles than its ring is high. Cells are ordered ring by ring from south to
    north, west to east from longitude 0.

    Faces are meridian arcs between neighbours of one ring and latitude arcs between the
    cells of adjacent rings whose longitude intervals overlap (one face per overlap). A face
    ``f`` joins ``face_left[f]`` to ``face_right[f]``; ``face_normal[f]`` is the unit tangent at
    the face midpoint pointing from left to right (east or north).

    Attributes
    ----------
    n_cells, n_faces : int
    ring_count : ndarray (nlat,) of int
        Cells per ring (1 for the caps).
    area : ndarray (n_cells,)
        Exact cell areas (steradians), sum 4 pi to round-off.
    lat_c, lon_c : ndarray (n_cells,)
        Cell centres in radians: the area centroid in latitude, the middle longitude
        (the poles for the caps). ``points`` are the corresponding unit vectors.
    lat_bounds, lon_bounds : ndarray (n_cells, 2)
        Cell edges in radians (caps: the full longitude range).
    face_point, face_normal : ndarray (n_faces, 3)
    face_length : ndarray (n_faces,)
    h : float
        Ring height pi / nlat (the equatorial cell size), radians; with ``lat_edges`` the
        largest ring height.
    ring_height : ndarray (nlat,)
        Each ring's height in latitude (radians).
    """

    def __init__(self, nlat: int, lat_edges: Array | None = None) -> None:
        nlat = int(nlat)
        if not MIN_RINGS <= nlat <= MAX_RINGS:
            raise ValueError(f"nlat = {nlat} must be in [{MIN_RINGS}, {MAX_RINGS}]")
        self.nlat = nlat
        #: equal rings (``lat_edges`` not given): the meshes nest (``remap_from``)
        self.uniform = lat_edges is None
        if lat_edges is None:
            self.h = math.pi / nlat
            edges = -0.5 * math.pi + self.h * np.arange(nlat + 1)
            edges[-1] = 0.5 * math.pi
            self.ring_height = np.full(nlat, self.h)
        else:
            edges = np.asarray(lat_edges, dtype=float)
            if (
                edges.shape != (nlat + 1,)
                or np.any(np.diff(edges) <= 0.0)
                or abs(edges[0] + 0.5 * math.pi) > 1e-12
                or abs(edges[-1] - 0.5 * math.pi) > 1e-12
            ):
                raise ValueError(
                    f"lat_edges must rise strictly from -pi/2 to pi/2 in nlat + 1 = {nlat + 1} "
                    "values (radians)"
                )
            edges = edges.copy()
            edges[[0, -1]] = -0.5 * math.pi, 0.5 * math.pi
            self.ring_height = np.diff(edges)
            self.h = float(self.ring_height.max())
        self.lat_edges = edges
        #: widest latitude face in longitude (radians); wider overlaps are split
        self.max_face_dlon = self.h
        mid = 0.5 * (edges[:-1] + edges[1:])
        # cells about as wide as their ring is high (2 nlat cos: the same for equal rings)
        if lat_edges is None:
            width = 2 * nlat * np.cos(mid)
        else:
            width = 2.0 * math.pi * np.cos(mid) / self.ring_height
        counts = np.maximum(3, np.rint(width).astype(int))
        counts[0] = counts[-1] = 1
        self.ring_count = counts
        self.ring_start = np.concatenate([[0], np.cumsum(counts)[:-1]])
        self.n_cells = int(counts.sum())
        ring = np.repeat(np.arange(nlat), counts)
        self.ring = ring
        k = np.arange(self.n_cells) - self.ring_start[ring]
        dlon = 2.0 * math.pi / counts[ring]
        self.dlon = dlon
        lon0, lon1 = k * dlon, (k + 1) * dlon
        lat0, lat1 = edges[ring], edges[ring + 1]
        self.lat_bounds = np.stack([lat0, lat1], axis=-1)
        self.lon_bounds = np.stack([lon0, lon1], axis=-1)
        ds = np.sin(lat1) - np.sin(lat0)
        self.area = dlon * ds
        self.weight = self.area  # cell areas (steradians): int f rho ~ sum(f * rho * weight)
        self.shape = (self.n_cells,)
        self.space_dims = ("cell",)
        # latitude centroid: int lat cos(lat) / int cos(lat) = [lat sin + cos] / [sin]
        self.lat_c = (
            (lat1 * np.sin(lat1) + np.cos(lat1)) - (lat0 * np.sin(lat0) + np.cos(lat0))
        ) / ds
        self.lon_c = 0.5 * (lon0 + lon1)
        caps = np.array([0, self.n_cells - 1])
        self.lat_c[caps] = [-0.5 * math.pi, 0.5 * math.pi]
        self.lon_c[caps] = 0.0
        self.is_cap = np.zeros(self.n_cells, dtype=bool)
        self.is_cap[caps] = True
        self.points = _unit(self.lat_c, self.lon_c)
        self._build_faces()

    # -- construction -------------------------------------------------------------------
    def _build_faces(self) -> None:
        counts, start = self.ring_count, self.ring_start
        left, right, lat_f, lon_f, length, kind = [], [], [], [], [], []
        # meridian faces inside rings 1..nlat-2: face k at the west edge of cell k
        for j in range(1, self.nlat - 1):
            n = counts[j]
            k = np.arange(n)
            left.append(start[j] + (k - 1) % n)
            right.append(start[j] + k)
            lat_f.append(np.full(n, 0.5 * (self.lat_edges[j] + self.lat_edges[j + 1])))
            lon_f.append(2.0 * math.pi * k / n)
            length.append(np.full(n, self.ring_height[j]))
            kind.append(np.zeros(n, dtype=np.int8))
        # latitude faces between ring j (south) and j + 1 (north): overlaps of longitude cells
        for j in range(self.nlat - 1):
            lat_b = self.lat_edges[j + 1]
            breaks = np.unique(
                np.concatenate(
                    [
                        2.0 * math.pi * np.arange(counts[j]) / counts[j],
                        2.0 * math.pi * np.arange(counts[j + 1]) / counts[j + 1],
                    ]
                )
            )
            keep = np.concatenate([[True], np.diff(breaks) > 1e-12])
            breaks = breaks[keep]
            ends = np.append(breaks[1:], 2.0 * math.pi)
            # near the poles an overlap spans a wide longitude range: the face is an arc of a
            # small circle whose normal turns along it, and one midpoint would make the flux
            # O(dlon^2) wrong. Split it into pieces of at most `max_dlon` radians of longitude.
            pieces = np.maximum(1, np.ceil((ends - breaks) / self.max_face_dlon - 1e-9)).astype(int)
            owner = np.repeat(np.arange(len(breaks)), pieces)
            step = ((ends - breaks) / pieces)[owner]
            index = np.arange(len(owner)) - np.repeat(np.cumsum(pieces) - pieces, pieces)
            breaks = breaks[owner] + index * step
            ends = breaks + step
            centre = 0.5 * (breaks + ends)
            south = start[j] + np.floor(centre * counts[j] / (2.0 * math.pi)).astype(int)
            north = start[j + 1] + np.floor(centre * counts[j + 1] / (2.0 * math.pi)).astype(int)
            left.append(south)
            right.append(north)
            lat_f.append(np.full(len(centre), lat_b))
            lon_f.append(centre)
            length.append(math.cos(lat_b) * (ends - breaks))
            kind.append(np.ones(len(centre), dtype=np.int8))
        self.face_left = np.concatenate(left)
        self.face_right = np.concatenate(right)
        self.face_lat = np.concatenate(lat_f)
        self.face_lon = np.concatenate(lon_f)
        self.face_length = np.concatenate(length)
        self.face_is_latitude = np.concatenate(kind).astype(bool)
        self.n_faces = len(self.face_left)
        self.face_point = _unit(self.face_lat, self.face_lon)
        self.face_normal = np.where(
            self.face_is_latitude[:, None],
            _north(self.face_lat, self.face_lon),
            _east(self.face_lon),
        )
        # face width in longitude (latitude faces): weights of the conservative neighbour averages
        lon_width = np.where(
            self.face_is_latitude, self.face_length / np.maximum(np.cos(self.face_lat), 1e-300), 0.0
        )
        n = self.n_cells
        lat_faces = np.flatnonzero(self.face_is_latitude)
        # north[c] = average over c's longitude interval of the ring above (cells of ring
        # j < nlat-1)
        w = lon_width[lat_faces]
        self.north_average = sparse.csr_matrix(
            (
                w / self.dlon[self.face_left[lat_faces]],
                (self.face_left[lat_faces], self.face_right[lat_faces]),
            ),
            shape=(n, n),
        )
        self.south_average = sparse.csr_matrix(
            (
                w / self.dlon[self.face_right[lat_faces]],
                (self.face_right[lat_faces], self.face_left[lat_faces]),
            ),
            shape=(n, n),
        )
        # flux divergence: d rho_c / dt = -(sum_{f: left = c} F_f - sum_{f: right = c} F_f) / A_c
        f = np.arange(self.n_faces)
        self.divergence = sparse.csr_matrix(
            (
                np.concatenate(
                    [1.0 / self.area[self.face_left], -1.0 / self.area[self.face_right]]
                ),
                (np.concatenate([self.face_left, self.face_right]), np.concatenate([f, f])),
            ),
            shape=(n, self.n_faces),
        )
        # boundary length of each cell (for the CFL rule and geometry checks)
        self.perimeter = np.bincount(self.face_left, self.face_length, n) + np.bincount(
            self.face_right, self.face_length, n
        )

    # -- Dataset contract -------------------------------------------------------------------
    @property
    def lat(self) -> Array:
        return np.degrees(self.lat_c)

    @property
    def lon(self) -> Array:
        return np.degrees(self.lon_c)

    def vertices(self) -> tuple[Array, Array]:
        """The CF cell vertices (lat, lon in degrees, each (n_cells, 4)), counter-clockwise seen
        from outside the sphere: south-west, south-east, north-east, north-west corner. Edges
        run along a parallel or a meridian, so the quadrilaterals in (lon, lat) tile the sphere
        with the exact cell areas dlon (sin lat1 - sin lat0); a cap is the band from its pole to
        its edge over longitudes 0 to 360 (two vertices at the pole)."""
        lat0, lat1 = np.degrees(self.lat_bounds).T
        lon0, lon1 = np.degrees(self.lon_bounds).T
        return (
            np.stack([lat0, lat0, lat1, lat1], axis=-1),
            np.stack([lon0, lon1, lon1, lon0], axis=-1),
        )

    #: what the ``lat`` and ``lon`` coordinates of a cell are
    coord_comments = ("latitude of the cell centre (area centroid)", "longitude of the cell centre")

    def dataset_coords(self) -> dict[str, tuple]:
        """CF coordinates on the ``cell`` dimension, with cell vertices for drawing the cells."""
        lat_comment, lon_comment = self.coord_comments
        return lat_lon_coords(
            ("cell", self.lat), ("cell", self.lon), lat_comment=lat_comment, lon_comment=lon_comment
        )

    def dataset_variables(self) -> dict[str, tuple]:
        """Mesh description: CF cell vertices (degrees, :meth:`vertices`), cell areas and the
        number of cells per ring."""
        lat_v, lon_v = self.vertices()
        order = (
            "counter-clockwise seen from outside the sphere: south-west, south-east, north-east, "
            "north-west corner; caps: two vertices at the pole, longitudes 0 to 360"
        )
        return {
            **cell_vertices(lat_v, lon_v, order),
            "cell_area": ("cell", self.area.copy(), dict(CELL_AREA_ATTRS)),
            "ring_count": (
                "ring",
                self.ring_count,
                {
                    "long_name": "cells per ring",
                    "units": "1",
                    "comment": "cells per latitude ring, south to north (caps: 1)",
                },
            ),
        }

    weight_attrs = {
        "long_name": "cell area",
        "units": "steradian",
        "comment": "cell areas of the reduced latitude-longitude mesh",
    }
    rho_attrs = {
        "long_name": "density",
        "units": "steradian-1",
        "cell_measures": "area: cell_area",
        "comment": "cell average of the density with respect to surface area",
    }

    # -- functions on the mesh ------------------------------------------------------------
    def cell_averages(self, f: Callable[[Array], Array], order: int = 4) -> Array:
        """Averages of f(x) over the cells by Gauss-Legendre quadrature in (sin lat, lon)
        (the area element is d(sin lat) d lon): ``order`` x ``order`` points per cell, and
        4 ``order`` points in longitude for the caps."""
        nodes, wts = np.polynomial.legendre.leggauss(order)
        s0, s1 = np.sin(self.lat_bounds[:, 0]), np.sin(self.lat_bounds[:, 1])
        lon0, lon1 = self.lon_bounds[:, 0], self.lon_bounds[:, 1]
        out = np.empty(self.n_cells)
        inner = ~self.is_cap
        s = 0.5 * (s0 + s1)[inner, None] + 0.5 * (s1 - s0)[inner, None] * nodes[None, :]
        lo = 0.5 * (lon0 + lon1)[inner, None] + 0.5 * (lon1 - lon0)[inner, None] * nodes[None, :]
        pts = _unit(np.arcsin(np.clip(s, -1, 1))[:, :, None], lo[:, None, :])
        vals = np.asarray(f(pts.reshape(-1, 3)), dtype=float).reshape(pts.shape[:-1])
        out[inner] = np.einsum("cij,i,j->c", vals, wts, wts) / 4.0
        nodes2, wts2 = np.polynomial.legendre.leggauss(4 * order)
        for c in np.flatnonzero(self.is_cap):
            s = 0.5 * (s0[c] + s1[c]) + 0.5 * (s1[c] - s0[c]) * nodes
            lo = math.pi + math.pi * nodes2
            pts = _unit(np.arcsin(np.clip(s, -1, 1))[:, None], lo[None, :])
            vals = np.asarray(f(pts.reshape(-1, 3)), dtype=float).reshape(pts.shape[:-1])
            out[c] = np.einsum("ij,i,j->", vals, wts, wts2) / 4.0
        return out

    def _pieces(self, fine: "RingMesh") -> Iterator[tuple[int, Array, Array, Array, Array]]:
        """The pieces where the cells of a finer nested ring mesh meet this mesh's cells, fine
        ring by fine ring: (fine ring, fine cell, coarse cell, west and east longitude of each
        piece); in longitude each fine cell is split where coarse cell edges cross it."""
        if not (self.uniform and fine.uniform):
            raise ValueError("remap_from needs two meshes of equal rings (no lat_edges)")
        if fine.nlat % self.nlat:
            raise ValueError(f"fine.nlat = {fine.nlat} is not a multiple of nlat = {self.nlat}")
        factor = fine.nlat // self.nlat
        for jf in range(fine.nlat):
            jc = jf // factor
            nf, nc = fine.ring_count[jf], self.ring_count[jc]
            breaks = np.unique(
                np.concatenate(
                    [2.0 * math.pi * np.arange(nf) / nf, 2.0 * math.pi * np.arange(nc) / nc]
                )
            )
            ends = np.append(breaks[1:], 2.0 * math.pi)
            centre = 0.5 * (breaks + ends)
            cf = fine.ring_start[jf] + np.floor(centre * nf / (2.0 * math.pi)).astype(int)
            cc = self.ring_start[jc] + np.floor(centre * nc / (2.0 * math.pi)).astype(int)
            yield jf, cf, cc, breaks, ends

    def remap_from(self, fine: "RingMesh", rho: Array) -> Array:
        """Exact conservative averages over this mesh's cells of a piecewise-constant density on
        a finer ring mesh whose ``nlat`` is a multiple of this one's (the rings nest; in
        longitude each fine cell is split where coarse cell edges cross it)."""
        rho = np.asarray(rho, dtype=float)
        mass = np.zeros(rho.shape[:-1] + (self.n_cells,))
        for jf, cf, cc, west, east in self._pieces(fine):
            band = math.sin(fine.lat_edges[jf + 1]) - math.sin(fine.lat_edges[jf])
            np.add.at(mass, (..., cc), rho[..., cf] * (east - west) * band)
        return mass / self.area

    def first_moments_from(self, fine: "RingMesh", rho: Array) -> Array:
        """The exact first moment int x rho dA (n_cells, 3) over each of this mesh's cells of a
        piecewise-constant density ``rho`` on a finer nested ring mesh (the pieces of
        :meth:`remap_from`, each integrated exactly over its latitude-longitude box); its
        direction is the centroid of the cell's mass."""
        rho = np.asarray(rho, dtype=float)
        moment = np.zeros((self.n_cells, 3))
        for jf, cf, cc, west, east in self._pieces(fine):
            a, b = fine.lat_edges[jf], fine.lat_edges[jf + 1]
            cos2 = 0.5 * (b - a) + 0.25 * (math.sin(2.0 * b) - math.sin(2.0 * a))  # int cos^2
            sin_cos = 0.5 * (math.sin(b) ** 2 - math.sin(a) ** 2)  # int sin cos
            box = np.stack(
                [
                    cos2 * (np.sin(east) - np.sin(west)),
                    cos2 * (np.cos(west) - np.cos(east)),
                    sin_cos * (east - west),
                ],
                axis=-1,
            )
            np.add.at(moment, cc, rho[cf, None] * box)
        return moment

    def point_values(self, f: Callable[[Array], Array]) -> Array:
        return np.asarray(f(self.points), dtype=float)

    def integrate(self, f: Array) -> float:
        return float(np.sum(f * self.area))

    def locate(self, lat: Array, lon: Array) -> NDArray[np.int64]:
        """Index of the cell containing each point (lat, lon in radians)."""
        lat = np.asarray(lat, dtype=float)
        lon = np.mod(np.asarray(lon, dtype=float), 2.0 * math.pi)
        j = np.clip(np.searchsorted(self.lat_edges, lat, side="right") - 1, 0, self.nlat - 1)
        k = np.minimum(
            np.floor(lon * self.ring_count[j] / (2.0 * math.pi)).astype(int), self.ring_count[j] - 1
        )
        return self.ring_start[j] + k

    def to_latlon(self, rho: Array, nlat: int = 180, nlon: int = 360) -> tuple[Array, Array, Array]:
        """Cell values sampled on a regular (lat, lon) grid of cell centres, for plotting.

        Returns (lat_deg (nlat,), lon_deg (nlon,), values (..., nlat, nlon)): each grid point
        takes the value of the mesh cell containing it (piecewise constant, no smoothing).
        """
        lat = -90.0 + 180.0 * (np.arange(nlat) + 0.5) / nlat
        lon = 360.0 * (np.arange(nlon) + 0.5) / nlon
        cells = self.locate(np.radians(lat)[:, None], np.radians(lon)[None, :])
        return lat, lon, np.asarray(rho)[..., cells]
