"""Gauss-Legendre latitude-longitude grid on S^2 with its shtns transform."""

from __future__ import annotations

import math
from typing import Callable

import numpy as np
from numpy.typing import NDArray

from .._lazy import ducc0
from .._types import Array
from ._cf import lat_lon_coords
from ._shtns import WIDEST, make_sht, min_rings

Coefficients = NDArray[np.complex128]

#: attributes of ``cell_area``, the CF cell measure of the sphere's grids: CF measures area in m2,
#: so the sphere is given radius 1 m and the areas equal the steradians of ``weight``
CELL_AREA_ATTRS = {
    "long_name": "cell area",
    "standard_name": "cell_area",
    "units": "m2",
    "comment": "area of each cell on the unit sphere (radius 1 m): the same numbers as "
    "weight, in steradians",
}

#: largest truncation degree accepted (memory and transform cost grow like lmax^3)
MAX_LMAX = 1023


#: the fewest latitudes of the default grids: what every shtns build accepts (avx512's rule,
#: the widest: :mod:`spheredens.grids._shtns`), so a default grid is the same on every CPU
MIN_NLAT = min_rings(WIDEST)


def default_grid_size(lmax: int) -> tuple[int, int]:
    """(nlat, nphi) de-aliasing quadratic products: nlat >= 3 (lmax + 1) / 2 (even, >= 32),
    nphi = 2 nlat."""
    nlat = max(MIN_NLAT, 2 * math.ceil(3 * (lmax + 1) / 4))
    return nlat, 2 * nlat


class GaussGrid:
    """Gauss-Legendre grid (nlat x nphi) on S^2 and the spherical-harmonic transform of degree lmax.

    Points are ordered north to south in colatitude theta (shtns' order) and by longitude
    phi_j = 2 pi j / nphi; x = (sin theta cos phi, sin theta sin phi, cos theta), latitude
    lat = 90 - theta in degrees. Coefficients use shtns' orthonormal normalization with the
    Condon-Shortley phase (the convention ``ducc0.sht`` uses too), m >= 0 only, m-major order.

    Parameters
    ----------
    lmax : int
        Truncation degree.
    nthreads : int
        Threads for shtns (explicit: the OpenMP default was ~50x slower on 2-core machines).
    nlat, nphi : int, optional
        Grid size (default :func:`default_grid_size`: quadratic products are alias-free).

    Attributes
    ----------
    points : ndarray (nlat, nphi, 3)
    e_theta, e_phi : ndarray (nlat, nphi, 3)
        Unit vectors towards increasing colatitude (south) and longitude (east).
    weight : ndarray (nlat, nphi)
        Quadrature weights in steradians (sum 4 pi); exact for degree < 2 nlat in latitude.
    l : ndarray (nlm,)
        Degree of each coefficient.
    """

    def __init__(
        self, lmax: int, *, nthreads: int = 1, nlat: int | None = None, nphi: int | None = None
    ) -> None:
        d_nlat, d_nphi = default_grid_size(lmax)
        self.lmax = int(lmax)
        self.nlat = int(nlat or d_nlat)
        self.nphi = int(nphi or d_nphi)
        # shtns calls exit(1) on bad sizes: make_sht checks them all before calling it; a grid
        # of other rings than asked for would change the file's layout, so none is rounded up
        if self.nlat % 2:
            raise ValueError(f"a Gauss grid of {self.nlat} latitudes: the number must be even")
        self.nthreads = int(nthreads)
        self.sh = make_sht(self.lmax, self.nlat, self.nphi, grid="gauss", nthreads=self.nthreads)
        self.colat = np.arccos(self.sh.cos_theta)
        self.phi = 2.0 * np.pi * np.arange(self.nphi) / self.nphi
        self.lat = 90.0 - np.degrees(self.colat)
        self.lon = np.degrees(self.phi)
        st, ct = np.sin(self.colat)[:, None], np.cos(self.colat)[:, None]
        sp, cp = np.sin(self.phi)[None, :], np.cos(self.phi)[None, :]
        self.points = np.stack(np.broadcast_arrays(st * cp, st * sp, ct), axis=-1)
        self.e_theta = np.stack(np.broadcast_arrays(ct * cp, ct * sp, -st), axis=-1)
        self.e_phi = np.stack(np.broadcast_arrays(-sp + 0 * st, cp + 0 * st, 0 * st * sp), axis=-1)
        half = np.asarray(self.sh.gauss_wts())
        wlat = np.concatenate([half, half[::-1]])
        self.weight = np.repeat(wlat[:, None] * (2.0 * np.pi / self.nphi), self.nphi, axis=1)
        self.l = np.asarray(self.sh.l, dtype=float)
        self.nlm = int(self.sh.nlm)

    # -- Dataset contract -------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, int]:
        return (self.nlat, self.nphi)

    @property
    def space_dims(self) -> tuple[str, str]:
        return ("lat", "lon")

    def dataset_variables(self) -> dict[str, tuple]:
        """Variables describing the grid beyond its coordinates: CF cell bounds and cell areas.

        The cell of node (i, j) spans the latitudes where the cumulative Gauss weights end
        (sin lat from 1 down by the weights: each node lies inside its band) and the longitudes
        half a spacing either side: its area is exactly the quadrature weight.
        """
        wlat = (
            self.weight[:, 0] * self.nphi / (2.0 * np.pi)
        )  # the Gauss weights in sin(lat), north first
        edges = np.clip(1.0 - np.concatenate([[0.0], np.cumsum(wlat)]), -1.0, 1.0)
        edges[-1] = -1.0
        lat_b = np.degrees(np.arcsin(np.stack([edges[:-1], edges[1:]], axis=-1)))
        dl = 360.0 / self.nphi
        lon_b = self.lon[:, None] + 0.5 * dl * np.array([-1.0, 1.0])
        return {
            "lat_bounds": (
                ("lat", "nv"),
                lat_b,
                {"comment": "cell edges in latitude: the cumulative Gauss weights in sin(lat)"},
            ),
            "lon_bounds": (("lon", "nv"), lon_b, {"comment": "cell edges in longitude"}),
            "cell_area": (("lat", "lon"), self.weight.copy(), dict(CELL_AREA_ATTRS)),
        }

    def dataset_coords(self) -> dict[str, tuple]:
        """CF coordinates for a Dataset: name -> (dims, values, attrs)."""
        return lat_lon_coords(
            ("lat", self.lat), ("lon", self.lon), lat_comment="Gauss-Legendre nodes"
        )

    weight_attrs = {
        "long_name": "quadrature weight",
        "units": "steradian",
        "comment": "Gauss-Legendre x uniform longitude: the area of the cell in lat_bounds "
        "x lon_bounds",
    }
    rho_attrs = {
        "long_name": "density",
        "units": "steradian-1",
        "cell_measures": "area: cell_area",
        "comment": "density with respect to surface area",
    }

    @property
    def h(self) -> float:
        """Resolution length pi / (lmax + 1) (radians) used by the CFL rule."""
        return math.pi / (self.lmax + 1)

    # -- transforms ---------------------------------------------------------------------
    def analys(self, f: Array) -> Coefficients:
        """Coefficients of a field given on the grid (projection on degrees <= lmax)."""
        return self.sh.analys(np.ascontiguousarray(f, dtype=float))

    def synth(self, c: Coefficients) -> Array:
        """Grid values of a coefficient array."""
        return self.sh.synth(np.ascontiguousarray(c, dtype=complex))

    def synth_grad(self, c: Coefficients) -> tuple[Array, Array]:
        """Surface gradient components (d/dtheta f, (1/sin theta) d/dphi f) on the grid."""
        return self.sh.synth_grad(np.ascontiguousarray(c, dtype=complex))

    def divergence_coefficients(self, f_theta: Array, f_phi: Array) -> Coefficients:
        """Coefficients of div_S F for a tangent field F = f_theta e_theta + f_phi e_phi.

        div F is the Laplacian of the spheroidal potential: -l (l + 1) s_lm.
        """
        s, _ = self.sh.analys(np.ascontiguousarray(f_theta), np.ascontiguousarray(f_phi))
        return -self.l * (self.l + 1.0) * s

    def point_values(self, f: Callable[[Array], Array]) -> Array:
        return np.asarray(f(self.points.reshape(-1, 3)), dtype=float).reshape(self.shape)

    def integrate(self, f: Array) -> float:
        return float(np.sum(f * self.weight))


def points_to_colat_lon(x: Array) -> Array:
    """(theta, phi) in radians, shape (..., 2), of unit vectors x (..., 3)."""
    theta = np.arccos(np.clip(x[..., 2], -1.0, 1.0))
    phi = np.mod(np.arctan2(x[..., 1], x[..., 0]), 2.0 * np.pi)
    return np.stack([theta, phi], axis=-1)


class OffGridSynthesis:
    """Evaluate coefficient arrays of a :class:`GaussGrid` at fixed arbitrary points (ducc0).

    ``ducc0.sht.synthesis_general`` accepts shtns' orthonormal coefficients with the
    Condon-Shortley phase directly; accuracy ``epsilon`` (relative to the coefficients' norm).
    """

    def __init__(self, grid: GaussGrid, points: Array, *, epsilon: float = 1e-13) -> None:
        self._sht = ducc0.sht
        self.grid = grid
        self.shape = points.shape[:-1]
        self.loc = np.ascontiguousarray(points_to_colat_lon(points.reshape(-1, 3)))
        sp, cp = np.sin(self.loc[:, 1]), np.cos(self.loc[:, 1])
        st, ct = np.sin(self.loc[:, 0]), np.cos(self.loc[:, 0])
        self.e_theta = np.stack([ct * cp, ct * sp, -st], axis=-1)
        self.e_phi = np.stack([-sp, cp, np.zeros_like(sp)], axis=-1)
        self.epsilon = epsilon
        self._grad_factor = np.sqrt(grid.l * (grid.l + 1.0))

    def values(self, c: Coefficients) -> Array:
        out = self._sht.synthesis_general(
            alm=np.ascontiguousarray(c)[None, :],
            spin=0,
            lmax=self.grid.lmax,
            loc=self.loc,
            epsilon=self.epsilon,
            nthreads=self.grid.nthreads,
        )
        return out[0]

    def gradient(self, c: Coefficients) -> Array:
        """Cartesian surface gradient at the points, shape (n, 3)."""
        alm = np.stack([self._grad_factor * c, np.zeros_like(c)])
        g = self._sht.synthesis_general(
            alm=alm,
            spin=1,
            lmax=self.grid.lmax,
            loc=self.loc,
            epsilon=self.epsilon,
            nthreads=self.grid.nthreads,
        )
        return g[0][:, None] * self.e_theta + g[1][:, None] * self.e_phi
