"""A density on S^{d-1} symmetric about an axis, as the zonal domain sees it: the law of its
polar angle (docs/models.md section 6)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ._types import Array
from .exceptions import ConfigError
from .geometry import log_sphere_area
from .initial import FromFile


@dataclass(frozen=True)
class ZonalInitial:
    """An initial density rho_0 on S^{d-1} symmetric about the axis e, seen by the zonal
    domain: its polar law g_0(theta) = rho_0(x(theta)) |S^{d-2}| sin^{d-2}(theta) on [0, pi]
    (:meth:`log_polar_law`, in logs: finite for any d), and, as a function of the points
    (cos psi, sin psi) of the meridian plane, the circle density g_0(|psi|) / 2 whose even
    extension carries the same law (what the circle's quadratures of Pi_# rho_0 take).

    Parameters
    ----------
    density : callable
        rho_0 on S^{d-1} (points of R^d), with ``log_density`` where it has one.
    d : int
    axis : tuple of float
        The unit vector e of R^d.
    """

    density: Any
    d: int
    axis: tuple[float, ...]

    def __post_init__(self) -> None:
        if isinstance(self.density, FromFile):
            theta = np.asarray(self.density.theta, dtype=float)
            if theta.min() < 0.0 or theta.max() > np.pi:
                raise ConfigError(
                    "initial.path",
                    f"holds theta in [{theta.min():.4g}, {theta.max():.4g}], beyond [0, pi]: "
                    "the zonal domain reads the law g of the polar angle of a zonal run's file",
                )

    def meridian_points(self, theta: Array) -> Array:
        """x = cos(theta) e + sin(theta) omega in R^d, shape ``theta.shape + (d,)``: one
        meridian of S^{d-1} (omega orthogonal to e along the coordinate where e is smallest;
        d = 2, e = e_1: omega = e_2, the circle's points)."""
        e = np.asarray(self.axis, dtype=float)
        k = int(np.argmin(np.abs(e)))
        omega = -e[k] * e
        omega[k] += 1.0
        omega /= np.linalg.norm(omega)
        theta = np.asarray(theta, dtype=float)[..., None]
        return np.cos(theta) * e + np.sin(theta) * omega

    def log_polar_law(self, theta: Array) -> Array:
        """log g_0(theta) = log rho_0(x(theta)) + log |S^{d-2}| + (d - 2) log sin(theta); a
        zonal file gives g_0 itself (interpolated linearly in theta, as the circle's files)."""
        if isinstance(self.density, FromFile):
            theta = np.asarray(theta, dtype=float)
            points = np.stack([np.cos(theta), np.sin(theta)], axis=-1)
            with np.errstate(divide="ignore"):
                return np.log(np.asarray(self.density(points), dtype=float))
        x = self.meridian_points(theta)
        log_rho = getattr(self.density, "log_density", None)
        with np.errstate(divide="ignore"):
            values = (
                log_rho(x) if log_rho is not None else np.log(np.asarray(self.density(x), float))
            )
            return (
                values
                + log_sphere_area(self.d - 1)
                + (self.d - 2) * np.log(np.sin(np.asarray(theta, dtype=float)))
            )

    def __call__(self, x: Array) -> Array:
        """g_0(|psi|) / 2 at points (cos psi, sin psi) of the meridian plane."""
        theta = np.abs(np.arctan2(x[..., 1], x[..., 0]))
        with np.errstate(under="ignore"):
            return 0.5 * np.exp(self.log_polar_law(theta))

    def to_params(self) -> dict[str, Any]:
        return self.density.to_params()
