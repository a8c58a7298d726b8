"""Geometry of S^{d-1}: embedding of angles, tangent projection, geodesic distance, area.

Functions of points only; nothing here knows about grids or files.
"""
from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

Array = NDArray[np.float64]

#: domain name -> ambient dimension d (the domain is S^{d-1} in R^d)
DOMAIN_DIMENSION = {"circle": 2, "sphere": 3}


def sphere_area(d: int) -> float:
    """Total measure |S^{d-1}|: 2*pi for the circle (d = 2), 4*pi for the sphere (d = 3)."""
    return {2: 2.0 * np.pi, 3: 4.0 * np.pi}[d]


def circle_points(theta: Array) -> Array:
    """Unit vectors x = (cos theta, sin theta), shape ``theta.shape + (2,)``."""
    theta = np.asarray(theta, dtype=float)
    return np.stack([np.cos(theta), np.sin(theta)], axis=-1)


def circle_tangents(theta: Array) -> Array:
    """Unit tangent vectors tau = (-sin theta, cos theta) (direction of increasing theta)."""
    theta = np.asarray(theta, dtype=float)
    return np.stack([-np.sin(theta), np.cos(theta)], axis=-1)


def circle_angle(x: Array) -> Array:
    """Angle in [0, 2*pi) of points x of shape (..., 2)."""
    x = np.asarray(x, dtype=float)
    return np.mod(np.arctan2(x[..., 1], x[..., 0]), 2.0 * np.pi)


def sphere_points(lat_deg: Array, lon_deg: Array) -> Array:
    """Unit vectors (nlat, nlon, 3) of a (lat, lon) grid in degrees (DATASET.md):
    x = (cos lat cos lon, cos lat sin lon, sin lat)."""
    lat, lon = np.radians(np.asarray(lat_deg))[:, None], np.radians(np.asarray(lon_deg))[None, :]
    return np.stack(np.broadcast_arrays(np.cos(lat) * np.cos(lon), np.cos(lat) * np.sin(lon),
                                        np.sin(lat)), axis=-1)


def sphere_points_paired(lat_deg: Array, lon_deg: Array) -> Array:
    """Unit vectors (n, 3) of n points given by paired (lat, lon) in degrees (cells of a mesh)."""
    lat, lon = np.radians(np.asarray(lat_deg)), np.radians(np.asarray(lon_deg))
    return np.stack([np.cos(lat) * np.cos(lon), np.cos(lat) * np.sin(lon), np.sin(lat)], axis=-1)


def dataset_sphere_points(ds) -> Array:
    """The points where a sphere Dataset gives rho: (lat, lon, 3) on a grid, (cell, 3) on a mesh."""
    lat, lon = ds["lat"], ds["lon"]
    if lat.dims == lon.dims:
        return sphere_points_paired(lat.values, lon.values)
    return sphere_points(lat.values, lon.values)


def tangent_project(x: Array, v: Array) -> Array:
    """P_x v = v - <x, v> x for unit vectors x, broadcasting over leading axes."""
    return v - np.sum(x * v, axis=-1, keepdims=True) * x


def geodesic_distance(x: Array, y: Array) -> Array:
    """Great-circle distance arccos(<x, y>) with the dot product clipped to [-1, 1]."""
    dot = np.clip(np.sum(np.asarray(x) * np.asarray(y), axis=-1), -1.0, 1.0)
    return np.arccos(dot)
