"""Density files (``initial.name = "file"``): the layouts a run's file may have on each domain,
reading and checking one, and evaluating it at points.

A circle file holds ``rho(theta)``; a sphere file either ``rho(lat, lon)`` on a grid (values at
points, interpolated bilinearly) or ``rho(cell)`` on a mesh of latitude-longitude cells (the
cell averages of a finite-volume run, with CF ``lat_bounds`` and ``lon_bounds``: taken as the
piecewise-constant density they are, so every cell keeps its mass exactly, and
:meth:`CellBoxes.particles` gives each cell as a particle for the Lagrangian scheme).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

import numpy as np
from scipy.interpolate import RegularGridInterpolator

from ._lazy import xarray as xr
from ._types import Array
from ._validate import netcdf_read_problem
from .exceptions import ConfigError
from .geometry import circle_angle, sphere_points_paired, tangent_frames

#: a density read from a file may undershoot zero by this fraction of its maximum (Gibbs
#: oscillations of a spectral run); such values are clipped to 0, larger ones refused
NEGATIVE_TOLERANCE = 1e-2

#: the cells of a mesh file must tile the sphere: their areas sum to 4 pi, and each agrees
#: with the file's ``weight``, to this relative tolerance
TILING_TOLERANCE = 1e-9


@dataclass(frozen=True)
class DensityFile:
    """The layout of a density file on one domain (its entry of :data:`DENSITY_FILES`, used by
    :class:`FromFile`).

    Attributes
    ----------
    dims : tuple of str
        The dims of the density (after choosing a time).
    uniform_weight : bool
        Whether a file without ``weight`` is read with uniform weights |S| / n (an evenly
        spaced circle grid); else ``weight`` is required.
    coords : callable
        ``ds -> coordinates`` of the density.
    sort : callable
        ``(coords, values) -> (coords, values)`` in increasing, wrapped coordinates.
    interpolate : callable
        ``(coords, values, x) -> values at points x (n, d)``.
    """

    dims: tuple[str, ...]
    uniform_weight: bool
    coords: Callable[[Any], Any]
    sort: Callable[[Any, Array], tuple[Any, Array]]
    interpolate: Callable[[Any, Array, Array], Array]


def _sort_angles(coords: Array, values: Array) -> tuple[Array, Array]:
    order = np.argsort(np.mod(coords, 2.0 * np.pi))
    return np.mod(coords, 2.0 * np.pi)[order], values[order]


def _sort_lat_lon(coords: tuple[Array, Array], values: Array) -> tuple[Any, Array]:
    lat, lon = coords
    i, j = np.argsort(lat), np.argsort(np.mod(lon, 360.0))
    return (lat[i], np.mod(lon, 360.0)[j]), values[np.ix_(i, j)]


def _interp_lat_lon(coords: tuple[Array, Array], values: Array, x: Array) -> Array:
    """Bilinear interpolation in (lat, lon), periodic in longitude, clamped beyond the extreme
    latitudes (non-negative values stay non-negative)."""

    lat, lon = coords
    lon_ext = np.concatenate([lon[-1:] - 360.0, lon, lon[:1] + 360.0])
    vals = np.concatenate([values[:, -1:], values, values[:, :1]], axis=1)
    interp = RegularGridInterpolator((lat, lon_ext), vals, method="linear")
    q_lat = np.clip(np.degrees(np.arcsin(np.clip(x[..., 2], -1.0, 1.0))), lat[0], lat[-1])
    q_lon = np.mod(np.degrees(np.arctan2(x[..., 1], x[..., 0])) - lon_ext[0], 360.0) + lon_ext[0]
    q_lon = np.clip(q_lon, lon_ext[0], lon_ext[-1])
    return interp(np.stack([q_lat, q_lon], axis=-1))


@dataclass(frozen=True)
class CellBoxes:
    """The cells of a sphere file on a mesh (dims ``("cell",)``): latitude-longitude boxes
    [lat0, lat1] x [lon0, lon1] (radians, longitudes in [0, 2 pi]; a polar cap spans all
    longitudes), with the file's cell centres and areas. Cells of one ring share their
    latitudes, as the reduced mesh of ``fv`` has them (docs/dataset.md)."""

    lat0: Array
    lat1: Array
    lon0: Array
    lon1: Array
    centres: Array  # (n, 3): the file's (lat, lon) as unit vectors
    area: Array
    ring_edges: Array  # sorted lower latitude edges of the rings
    keys: Array  # sorted ring * 8 + lon0 of the cells (lon0 < 2 pi < 8)
    order: Array  # the cell of each key
    #: (n, 3) unit vectors: the centroid of each cell's mass at the snapshot read (the file's
    #: ``rho_centroid_xyz``), or None: the cells' masses sit at their centres
    centroids: Array | None = None

    @classmethod
    def from_dataset(cls, ds: Any) -> "CellBoxes":
        """The boxes of a dataset with ``lat_bounds``, ``lon_bounds`` (cell, vertex; degrees)
        and ``weight`` (cell areas); :class:`ValueError` when they do not tile the sphere."""
        for name in ("lat_bounds", "lon_bounds", "weight"):
            if name not in ds:
                raise ValueError(f"it has no {name!r} (a mesh file needs its cells' bounds)")
        lat_b = np.radians(np.asarray(ds["lat_bounds"].values, dtype=float))
        lon_b = np.radians(np.asarray(ds["lon_bounds"].values, dtype=float))
        lat0, lat1 = lat_b.min(axis=1), lat_b.max(axis=1)
        lon0, lon1 = lon_b.min(axis=1), lon_b.max(axis=1)
        area = np.asarray(ds["weight"].values, dtype=float)
        boxes = (lon1 - lon0) * (np.sin(lat1) - np.sin(lat0))
        if not (
            np.all(lon0 >= 0.0)
            and np.all(lon1 <= 2.0 * math.pi * (1.0 + TILING_TOLERANCE))
            and abs(boxes.sum() / (4.0 * math.pi) - 1.0) <= TILING_TOLERANCE
            and np.allclose(boxes, area, rtol=TILING_TOLERANCE, atol=0.0)
        ):
            raise ValueError(
                "its cells (lat_bounds, lon_bounds) are not latitude-longitude boxes that tile "
                "the sphere with the areas of its 'weight'"
            )
        ring_edges = np.unique(lat0)
        ring = np.searchsorted(ring_edges, lat0)
        keys = ring * 8.0 + lon0
        order = np.argsort(keys, kind="stable")
        lat = np.asarray(ds["lat"].values, dtype=float)
        lon = np.asarray(ds["lon"].values, dtype=float)
        return cls(
            lat0,
            lat1,
            lon0,
            lon1,
            sphere_points_paired(lat, lon),
            area,
            ring_edges,
            keys[order],
            order,
        )

    def locate(self, x: Array) -> Array:
        """The cell holding each unit vector of ``x`` (n, 3)."""
        lat = np.arcsin(np.clip(x[..., 2], -1.0, 1.0))
        lon = np.mod(np.arctan2(x[..., 1], x[..., 0]), 2.0 * math.pi)
        ring = np.clip(np.searchsorted(self.ring_edges, lat, side="right") - 1, 0, None)
        i = np.searchsorted(self.keys, ring * 8.0 + lon, side="right") - 1
        return self.order[np.clip(i, 0, len(self.order) - 1)]

    def with_centroids(self, centroids: Array) -> "CellBoxes":
        """These boxes with the centroids (n, 3) of their masses; :class:`ValueError` unless
        they are finite vectors of that shape (normalized here)."""
        c = np.asarray(centroids, dtype=float)
        ok = c.shape == self.centres.shape and np.all(np.isfinite(c))
        norm = np.linalg.norm(c, axis=-1, keepdims=True) if ok else None
        if not ok or np.any(norm == 0.0):
            raise ValueError(
                f"its 'rho_centroid_xyz' must hold a non-zero finite vector (3) per cell at the "
                f"snapshot read, shape {self.centres.shape}; it has shape {c.shape}"
            )
        return replace(self, centroids=c / norm)

    def particles(self, values: Array) -> tuple[Array, Array, Array]:
        """Each cell as a particle: (masses rho_c |c|, positions (n, 3), shapes (n, 3, 2)): at
        the centroid of its mass where the file has them (``rho_centroid_xyz``), else at its
        centre; the shape two tangent vectors at the position spanning a parallelogram of the
        cell's area (east by |c| / (lat1 - lat0), north by lat1 - lat0; a cap: a square)."""
        at = self.centres if self.centroids is None else self.centroids
        lat, lon = (
            np.arcsin(np.clip(at[:, 2], -1.0, 1.0)),
            np.arctan2(at[:, 1], at[:, 0]),
        )
        east = np.stack([-np.sin(lon), np.cos(lon), np.zeros_like(lon)], axis=-1)
        north = np.stack(
            [-np.sin(lat) * np.cos(lon), -np.sin(lat) * np.sin(lon), np.cos(lat)], axis=-1
        )
        dlat = self.lat1 - self.lat0
        shape = np.stack([east * (self.area / dlat)[:, None], north * dlat[:, None]], axis=-1)
        cap = self.lon1 - self.lon0 >= 2.0 * math.pi * (1.0 - TILING_TOLERANCE)
        if cap.any():
            shape[cap] = tangent_frames(at[cap]) * np.sqrt(self.area[cap])[:, None, None]
        return values * self.area, at.copy(), shape


def _keep(coords: Any, values: Array) -> tuple[Any, Array]:
    return coords, values


def _piecewise_constant(boxes: CellBoxes, values: Array, x: Array) -> Array:
    return values[boxes.locate(np.asarray(x, dtype=float))]


#: domain name -> the layouts a density file may have there (``initial.name = "file"``)
DENSITY_FILES: dict[str, tuple[DensityFile, ...]] = {
    "circle": (
        DensityFile(
            ("theta",),
            True,
            lambda ds: np.asarray(ds["theta"].values, dtype=float),
            _sort_angles,
            lambda theta, values, x: np.interp(circle_angle(x), theta, values, period=2.0 * np.pi),
        ),
    ),
    "sphere": (
        DensityFile(
            ("lat", "lon"),
            False,
            lambda ds: (
                np.asarray(ds["lat"].values, dtype=float),
                np.asarray(ds["lon"].values, dtype=float),
            ),
            _sort_lat_lon,
            _interp_lat_lon,
        ),
        DensityFile(("cell",), False, CellBoxes.from_dataset, _keep, _piecewise_constant),
    ),
}


#: the variable of a mesh file holding the centroid of each cell's mass (unit vectors, as
#: ``log_sl`` and ``log_lagrangian`` write it; docs/dataset.md)
CENTROIDS = "rho_centroid_xyz"


def read_density(
    path: Path, variable: str, time: float | None, key: str, layouts: tuple[DensityFile, ...]
) -> tuple[DensityFile, Any, Array]:
    """(layout, coordinates, values) of the density ``variable`` of the netCDF file ``path`` at
    snapshot ``time`` (default: the last), in the one of ``layouts`` whose dims it has; a
    :class:`ConfigError` at ``key`` names what is wrong (missing file or variable, dims, a
    time that is not a snapshot, negative values, mass not 1, cells that do not tile)."""

    if not path.is_file():
        raise ConfigError(f"{key}.path", f"file {str(path)!r} does not exist")
    problem = netcdf_read_problem(path)
    if problem:
        raise ConfigError(f"{key}.path", f"cannot read {str(path)!r} as netCDF: {problem}")
    try:
        ds = xr.open_dataset(path)
    except Exception as exc:  # any reader failure becomes a one-line refusal
        raise ConfigError(
            f"{key}.path", f"cannot read {str(path)!r} as netCDF: {netcdf_read_problem(path, exc)}"
        ) from None
    with ds:
        if variable not in ds:
            raise ConfigError(
                f"{key}.variable",
                f"{variable!r} is not in {str(path)!r}; "
                f"variables there: {', '.join(map(str, ds.data_vars))}",
            )
        rho = ds[variable]
        snapshot: dict[str, int] = {}
        if "time" in rho.dims:
            if time is None:
                snapshot = {"time": -1}
            else:
                idx = int(np.argmin(np.abs(ds["time"].values - time)))
                if abs(float(ds["time"].values[idx]) - time) > 1e-9 * max(1.0, abs(time)):
                    raise ConfigError(
                        f"{key}.time",
                        f"= {time} is not a snapshot time of "
                        f"{str(path)!r} (it has {ds.sizes['time']} times in "
                        f"[{float(ds['time'].min())}, {float(ds['time'].max())}])",
                    )
                snapshot = {"time": idx}
            rho = rho.isel(snapshot)
        matching = [layout for layout in layouts if rho.dims == layout.dims]
        if not matching:
            raise ConfigError(
                f"{key}.variable",
                f"{variable!r} in {str(path)!r} has dims {rho.dims}; a density on this domain "
                f"needs dims {' or '.join(map(str, (lay.dims for lay in layouts)))} "
                "(after choosing a time)",
            )
        layout = matching[0]
        dims = layout.dims
        values = np.asarray(rho.values, dtype=float)
        if values.size < 2:
            raise ConfigError(
                f"{key}.variable",
                f"{variable!r} in {str(path)!r} has {values.size} "
                "values; a density needs at least 2 points",
            )
        if "weight" in ds:
            weight = np.asarray(ds["weight"].transpose(*dims).values, dtype=float)
        elif layout.uniform_weight:
            weight = np.full(values.shape, 2.0 * np.pi / values.size)
        else:
            raise ConfigError(
                f"{key}.path",
                f"{str(path)!r} has no 'weight' variable: the mass of a "
                "sphere density cannot be checked without quadrature weights",
            )
        try:
            coords = layout.coords(ds)
            if isinstance(coords, CellBoxes) and CENTROIDS in ds:
                centroids = ds[CENTROIDS]
                if "time" in centroids.dims:
                    centroids = centroids.isel(time=snapshot.get("time", -1))
                coords = coords.with_centroids(centroids.values)
        except ValueError as exc:
            raise ConfigError(f"{key}.path", f"{str(path)!r}: {exc}") from None
    if not np.all(np.isfinite(values)) or values.max() <= 0:
        raise ConfigError(
            f"{key}.variable",
            f"{variable!r} in {str(path)!r} must be finite with "
            "positive values on at least 2 points",
        )
    if values.min() < -NEGATIVE_TOLERANCE * values.max():
        raise ConfigError(
            f"{key}.variable",
            f"{variable!r} in {str(path)!r} has values down to "
            f"{values.min():.3g} (max {values.max():.3g}); a density must be non-negative "
            f"(undershoots above -{NEGATIVE_TOLERANCE:g} x max are clipped)",
        )
    if weight.shape != values.shape or not np.all(np.isfinite(weight)) or np.any(weight <= 0):
        raise ConfigError(
            f"{key}.path",
            f"the 'weight' of {str(path)!r} must be positive and finite, "
            f"with the shape {values.shape} of the density",
        )
    with np.errstate(all="ignore"):  # huge values overflow to inf: refused just below
        mass = float(np.sum(values * weight))
    values = np.maximum(values, 0.0)
    if not abs(mass - 1.0) <= 1e-6:
        raise ConfigError(
            f"{key}.path",
            f"the density {variable!r} in {str(path)!r} has mass "
            f"{mass:.10g}, not 1 (tolerance 1e-6); normalize it first",
        )
    return (layout, *layout.sort(coords, values))
