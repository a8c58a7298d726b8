"""Geometry of S^{d-1}: the domains, embedding of angles, tangent projection, geodesic distance.

Functions of points only, and the :class:`Domain` objects; nothing here knows about grids or
files. A domain is looked up once, by name (:func:`get_domain`), and carries what depends on
it: its dimension and area, its default scheme, its particle initializations, and the
registries that the upper layers fill (schemes, evaluators, W2).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
from numpy.typing import NDArray

from ._registry import Registry
from .exceptions import ConfigError

Array = NDArray[np.float64]


@dataclass(frozen=True, eq=False)
class Domain:
    """A domain S^{d-1} in R^d, and the registries of what is implemented on it.

    Attributes
    ----------
    name : str
        ``"circle"`` or ``"sphere"``: the string of configuration files and netCDF attributes.
    d : int
        Ambient dimension (2: the circle S^1, 3: the sphere S^2).
    area : float
        Total measure |S^{d-1}| (2 pi, 4 pi).
    default_scheme : str
        The scheme used when ``discretization.scheme`` is absent.
    particle_initializations : tuple of str
        The names ``particles.initialization`` accepts here.
    schemes : Registry
        Scheme classes on this domain (filled by :func:`spheredens.schemes.register_scheme`).
    parts : dict
        Domain-dependent functions registered by the upper layers with :meth:`provides`
        (``"w2"``: W2 between atoms on the domain, in :mod:`spheredens.transport`).
    """

    name: str
    d: int
    area: float
    default_scheme: str
    particle_initializations: tuple[str, ...]
    schemes: Registry = field(init=False, repr=False)
    parts: dict[str, Any] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "schemes", Registry(f"scheme on the {self.name}"))

    def scheme_class(self, name: Any, key: str = "discretization.scheme") -> Any:
        """The scheme class called ``name`` here; a ConfigError naming ``key`` otherwise (saying
        which domain has it, when another one does)."""
        if isinstance(name, str) and name not in self.schemes:
            other = [d for d in DOMAINS if name in DOMAINS.get(d).schemes]
            if other:
                raise ConfigError(key, f"{name!r} is a scheme for the {other[0]}, not for domain "
                                  f"{self.name!r}; choose one of {self.schemes.quoted_names()}")
        return self.schemes.get(name, key)

    def provides(self, role: str) -> Callable[[Any], Any]:
        """Decorator registering a domain-dependent function under ``role`` (e.g. ``"w2"``)."""

        def decorator(obj: Any) -> Any:
            self.parts[role] = obj
            return obj

        return decorator

    def part(self, role: str) -> Any:
        """The function registered under ``role`` for this domain."""
        if role not in self.parts:
            raise KeyError(f"nothing provides {role!r} on the {self.name}")
        return self.parts[role]


#: the domains, by name
DOMAINS = Registry("domain")
CIRCLE = DOMAINS.register("circle")(Domain("circle", 2, 2.0 * np.pi, "fv", ("iid", "quantile")))
SPHERE = DOMAINS.register("sphere")(Domain("sphere", 3, 4.0 * np.pi, "sh_spectral",
                                           ("iid", "quasi_uniform")))


def get_domain(name: Any, key: str = "domain.name") -> Domain:
    """The :class:`Domain` called ``name``; a ConfigError naming ``key`` otherwise."""
    return name if isinstance(name, Domain) else DOMAINS.get(name, key)


def domain_of_dimension(d: int) -> Domain:
    """The domain S^{d-1} whose ambient dimension is ``d``."""
    for name in DOMAINS:
        if DOMAINS.get(name).d == d:
            return DOMAINS.get(name)
    raise ValueError(f"no domain has ambient dimension {d}")


def sphere_area(d: int) -> float:
    """Total measure |S^{d-1}|: 2*pi for the circle (d = 2), 4*pi for the sphere (d = 3)."""
    return domain_of_dimension(d).area


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
