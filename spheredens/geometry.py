"""Geometry of S^{d-1}: the domains, embedding of angles, tangent projection, geodesic distance.

Functions of points only, and the :class:`Domain` objects; nothing here knows about grids or
files. A domain is looked up once, by name (:func:`get_domain`), and carries what depends on
it: its dimension and area, its default scheme, its particle initializations, its
quasi-uniform points, and the registries that the upper layers fill (schemes; the parts W2,
grid atoms, Pi_# rho_0 quadratures, file grids, figures). Modules ask
their :class:`Domain` instead of comparing a name or a dimension.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np
from scipy import special

from ._registry import Registry
from ._types import Array
from .exceptions import ConfigError, SpheredensError

#: domain-generic defaults of the roles of :meth:`Domain.provides`, registered by the upper
#: layers with :func:`provides_by_default` (``"w2"``: the exact EMD with geodesic cost, in
#: :mod:`spheredens.transport`); a domain's own part wins over the default
DEFAULT_PARTS: dict[str, Any] = {}


class NotProvided(SpheredensError, KeyError):
    """Nothing implements a domain-dependent function on this domain (and there is no default)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


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
    quasi_uniform_points : callable or None
        ``n -> (n, d)`` nearly uniform unit vectors (equispaced angles on the circle, the
        Fibonacci lattice on the sphere); None: the deterministic default of
        :func:`halton_sphere` (:meth:`quasi_uniform`).
    points_of_angles : callable or None
        ``theta (...) -> points (..., d)`` where a point is given by one angle (the circle:
        (cos theta, sin theta)); None elsewhere.
    envelope_points : int
        How many quasi-uniform points bound rho_0 from above for rejection sampling
        (``particles.initialization = "iid"``).
    meridian : bool
        Whether the domain is a reduction to a meridian half-plane (``zonal``: the law of the
        polar angle of a density on S^{d-1} symmetric about an axis, any d): its points are
        (cos theta, sin theta) in the plane of the axis and one direction orthogonal to it, not
        the points of a sphere of dimension ``d``, so :func:`domain_of_dimension` never
        returns it; the dimension of its sphere is a parameter of the configuration
        (``domain.d``).
    schemes : Registry
        Scheme classes on this domain (filled by :func:`spheredens.schemes.register_scheme`).
    parts : dict
        Domain-dependent functions registered by the upper layers with :meth:`provides`
        (``"w2"`` and ``"grid_atoms"`` in :mod:`spheredens.transport`, ``"projection_target"``
        in :mod:`spheredens.targets`, ``"file_grid"`` in :mod:`spheredens.accessor`,
        ``"figure"`` in :mod:`spheredens.plot`); a role nothing registers here falls back to
        :data:`DEFAULT_PARTS`. What only one module reads is that module's own table instead
        (the initial densities' in :mod:`spheredens.initial` and
        :mod:`spheredens._random_field`).
    """

    name: str
    d: int
    area: float
    default_scheme: str
    particle_initializations: tuple[str, ...]
    quasi_uniform_points: Callable[[int], Array] | None = field(default=None, repr=False)
    points_of_angles: Callable[[Array], Array] | None = field(default=None, repr=False)
    envelope_points: int = 40000
    meridian: bool = False
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
                raise ConfigError(
                    key,
                    f"{name!r} is a scheme for the {other[0]}, not for domain "
                    f"{self.name!r}; choose one of {self.schemes.quoted_names()}",
                )
        return self.schemes.get(name, key)

    def provides(self, role: str) -> Callable[[Any], Any]:
        """Decorator registering a domain-dependent function under ``role`` (e.g. ``"w2"``)."""

        def decorator(obj: Any) -> Any:
            self.parts[role] = obj
            return obj

        return decorator

    def part(self, role: str, what: str = "") -> Any:
        """The function registered under ``role`` for this domain, else the domain-generic
        default of :data:`DEFAULT_PARTS`.

        Raises
        ------
        NotProvided
            Neither exists; the message names ``what`` (default: the role).
        """
        if role in self.parts:
            return self.parts[role]
        if role in DEFAULT_PARTS:
            return DEFAULT_PARTS[role]
        raise not_provided(self, role, what)

    def quasi_uniform(self, n: int) -> Array:
        """n nearly uniform unit vectors of R^d, shape (n, d), deterministic.

        Parameters
        ----------
        n : int
            Number of points.

        Returns
        -------
        ndarray (n, d)
            The domain's own construction (``quasi_uniform_points``), else
            :func:`halton_sphere`.
        """
        if self.quasi_uniform_points is not None:
            return self.quasi_uniform_points(n)
        return halton_sphere(n, self.d)

    def w2(self, x: Array, a: Array, y: Array, b: Array) -> float:
        """Exact W2 (geodesic cost, radians) between weighted point sets x (n, d), y (m, d)
        with weights a, b (renormalized): the part ``"w2"`` of this domain, else the default
        (registered by :mod:`spheredens.transport`)."""
        return float(self.part("w2", "W2")(x, a, y, b))


def not_provided(domain: Domain, role: str, what: str = "") -> NotProvided:
    """The one-line refusal of ``role`` (named ``what``) on ``domain``, where nothing provides
    it."""
    return NotProvided(
        f"{what or repr(role)} is not implemented on the {domain.name} "
        f"(nothing provides {role!r} there)"
    )


def domain_entry(table: Mapping[str, Any], domain: Domain, role: str, what: str = "") -> Any:
    """The entry for ``domain`` of a module's own table (domain name -> what implements
    ``role`` there), for a role only that module registers and reads.

    Raises
    ------
    NotProvided
        The table has no entry for the domain; the message names ``what`` (default: the role).
    """
    if domain.name not in table:
        raise not_provided(domain, role, what)
    return table[domain.name]


def provides_by_default(role: str) -> Callable[[Any], Any]:
    """Decorator registering the domain-generic default of ``role`` (used by every domain
    that provides nothing for it)."""

    def decorator(obj: Any) -> Any:
        DEFAULT_PARTS[role] = obj
        return obj

    return decorator


def circle_quasi_uniform(n: int) -> Array:
    """n equispaced points (cos theta_i, sin theta_i), theta_i = 2 pi i / n, on S^1."""
    return circle_points(2 * np.pi * np.arange(n) / n)


def fibonacci_sphere(n: int) -> Array:
    """n quasi-uniform points on S^2 (Fibonacci lattice): cells of nearly equal area 4 pi / n."""
    i = np.arange(n) + 0.5
    z = 1.0 - 2.0 * i / n
    phi = math.pi * (3.0 - math.sqrt(5.0)) * np.arange(n)
    r = np.sqrt(1.0 - z * z)
    return np.stack([r * np.cos(phi), r * np.sin(phi), z], axis=-1)


def halton_sphere(n: int, d: int) -> Array:
    """n deterministic, asymptotically uniform unit vectors of R^d (any d >= 2).

    The points 1..n of the Halton sequence in [0, 1)^d (radical inverses in the first d
    primes) mapped to Gaussian vectors by the inverse normal CDF and normalized: a
    low-discrepancy construction on S^{d-1} for domains without a better one (equal-area
    cells are not guaranteed).
    """
    primes: list[int] = []
    candidate = 2
    while len(primes) < d:
        if all(candidate % p for p in primes):
            primes.append(candidate)
        candidate += 1
    index = np.arange(1, n + 1)
    cube = np.empty((n, d))
    for axis, base in enumerate(primes):
        k, f, value = index.copy(), 1.0, np.zeros(n)
        while np.any(k > 0):
            f /= base
            value += f * (k % base)
            k //= base
        cube[:, axis] = value
    g = special.ndtri(cube)
    return g / np.linalg.norm(g, axis=1, keepdims=True)


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
    """Unit vectors (nlat, nlon, 3) of a (lat, lon) grid in degrees (docs/dataset.md):
    x = (cos lat cos lon, cos lat sin lon, sin lat)."""
    lat, lon = np.radians(np.asarray(lat_deg))[:, None], np.radians(np.asarray(lon_deg))[None, :]
    return np.stack(
        np.broadcast_arrays(np.cos(lat) * np.cos(lon), np.cos(lat) * np.sin(lon), np.sin(lat)),
        axis=-1,
    )


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


def tangent_frames(x: Array) -> Array:
    """An orthonormal basis (e1, e2) of the tangent plane at each unit vector of ``x`` (n, 3),
    as (n, 3, 2): e1 = x cross the coordinate axis least aligned with x (normalized),
    e2 = x cross e1."""
    x = np.asarray(x, dtype=float)
    e1 = np.cross(x, np.eye(3)[np.argmin(np.abs(x), axis=-1)])
    e1 /= np.linalg.norm(e1, axis=-1, keepdims=True)
    return np.stack([e1, np.cross(x, e1)], axis=-1)


def geodesic_distance(x: Array, y: Array) -> Array:
    """Great-circle distance arccos(<x, y>) with the dot product clipped to [-1, 1]."""
    dot = np.clip(np.sum(np.asarray(x) * np.asarray(y), axis=-1), -1.0, 1.0)
    return np.arccos(dot)


#: the domains, by name
DOMAINS = Registry("domain")
CIRCLE = DOMAINS.register("circle")(
    Domain(
        "circle",
        2,
        2.0 * np.pi,
        "fv",
        ("iid", "quantile"),
        circle_quasi_uniform,
        circle_points,
        envelope_points=8192,
    )
)
SPHERE = DOMAINS.register("sphere")(
    Domain(
        "sphere",
        3,
        4.0 * np.pi,
        "sh_spectral",
        ("iid", "quasi_uniform"),
        fibonacci_sphere,
        envelope_points=40000,
    )
)
#: a density on S^{d-1} symmetric about an axis, by the law of its polar angle on [0, pi]
#: (docs/models.md section 6); d is ``domain.d``, the points are those of the meridian
#: half-plane, and the measure of [0, pi] is pi
ZONAL = DOMAINS.register("zonal")(
    Domain(
        "zonal", 2, np.pi, "fv", ("iid", "quantile"), points_of_angles=circle_points, meridian=True
    )
)

#: the largest dimension d of the sphere S^{d-1} of the zonal domain (``domain.d``)
ZONAL_MAX_DIMENSION = 1024


def log_sphere_area(d: int) -> float:
    """log |S^{d-1}| = log(2 pi^{d/2} / Gamma(d/2)) for any d >= 1 (|S^0| = 2)."""
    return math.log(2.0) + 0.5 * d * math.log(math.pi) - math.lgamma(0.5 * d)


def get_domain(name: Any, key: str = "domain.name") -> Domain:
    """The :class:`Domain` called ``name``; a ConfigError naming ``key`` otherwise."""
    return name if isinstance(name, Domain) else DOMAINS.get(name, key)


def domain_of_dimension(d: int) -> Domain:
    """The domain S^{d-1} whose ambient dimension is ``d`` (never a meridian reduction)."""
    for name in DOMAINS:
        if DOMAINS.get(name).d == d and not DOMAINS.get(name).meridian:
            return DOMAINS.get(name)
    raise ValueError(f"no domain has ambient dimension {d}")


def sphere_area(d: int) -> float:
    """Total measure |S^{d-1}|: 2*pi for the circle (d = 2), 4*pi for the sphere (d = 3), the
    area of a registered domain of that dimension, else 2 pi^{d/2} / Gamma(d/2)."""
    try:
        return domain_of_dimension(d).area
    except ValueError:
        return math.exp(log_sphere_area(d))
