"""The grid of the polar angle of a zonal density on S^{d-1}: n cells on [0, pi]."""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from .._types import Array
from ..geometry import circle_points, circle_tangents, log_sphere_area
from ._circle import theta_bounds, theta_coordinate


class ZonalGrid:
    """n cells [j h, (j + 1) h], h = pi / n, of the polar angle theta in [0, pi] of S^{d-1}.

    The state is the cell averages of g(theta), the density of theta: a density rho on
    S^{d-1} that depends on theta only has g(theta) = rho(theta) |S^{d-2}| sin^{d-2}(theta),
    and int_0^pi g dtheta = 1. The grid's points are the unit vectors (cos theta, sin theta)
    of the meridian plane spanned by the axis e and a direction omega orthogonal to it (the
    frame in which the model's matrices are diag(a, b) and diag(l1, l2)); on that half-circle
    the geodesic distance of S^{d-1} between two points of the same meridian is |theta -
    theta'|.

    Attributes
    ----------
    n : int
    dimension : int
        d, the dimension of the ambient space R^d of the sphere S^{d-1}.
    h : float
        Cell length pi / n (radians).
    theta : ndarray (n,)
        Cell centres (j + 1/2) h.
    points, tangents : ndarray (n, 2)
        (cos theta, sin theta) and (-sin theta, cos theta) in the meridian plane.
    weight : ndarray (n,)
        h: int g dtheta ~ sum(g * weight).
    faces : ndarray (n + 1,)
        The cell edges j h, j = 0..n (the poles 0 and pi are the two ends).
    """

    def __init__(self, n: int, dimension: int, offset: float = 0.5) -> None:
        self.n = int(n)
        self.dimension = int(dimension)
        self.offset = float(offset)
        self.h = math.pi / self.n
        self.theta = (np.arange(self.n) + self.offset) * self.h
        self.points = circle_points(self.theta)
        self.tangents = circle_tangents(self.theta)
        self.weight = np.full(self.n, self.h)
        self.faces = np.arange(self.n + 1) * self.h
        self.faces[-1] = math.pi
        self.shape = (self.n,)
        self.space_dims = ("theta",)

    def log_jacobian(self, theta: Array) -> Array:
        """log(|S^{d-2}| sin^{d-2}(theta)): g = rho times its exponential (-inf at the poles for
        d > 2; (d - 2) log sin(theta) is about -2355 at theta = 0.1 for d = 1024)."""
        d = self.dimension
        with np.errstate(divide="ignore"):
            return log_sphere_area(d - 1) + (d - 2) * np.log(np.sin(theta))

    def dataset_variables(self) -> dict[str, tuple]:
        """The CF cell bounds of ``theta``."""
        return theta_bounds(self.theta, self.h)

    def dataset_coords(self) -> dict[str, tuple]:
        """Coordinates for a Dataset: the polar angle theta in [0, pi]."""
        return theta_coordinate(
            self.theta,
            "polar angle to the axis",
            f"x = cos(theta) e + sin(theta) omega on S^{self.dimension - 1}",
        )

    weight_attrs = {
        "long_name": "quadrature weight",
        "units": "radian",
        "comment": "cell length: int g dtheta = sum(g * weight)",
    }
    rho_attrs = {
        "long_name": "density of the polar angle",
        "units": "radian-1",
        "comment": "g(theta) = rho(theta) |S^{d-2}| sin^{d-2}(theta): the law of theta",
    }

    def cell_log_averages(self, log_f: Callable[[Array], Array], order: int = 4) -> Array:
        """log of the averages of exp(log_f(theta)) over the cells (Gauss-Legendre, ``order``
        points per cell), formed by log-sum-exp: finite wherever a node's value is."""
        nodes, wts = np.polynomial.legendre.leggauss(order)
        theta = self.theta[:, None] + 0.5 * self.h * nodes[None, :]
        values = np.asarray(log_f(theta), dtype=float) + np.log(0.5 * wts)[None, :]
        m = values.max(axis=1)
        finite = np.isfinite(m)
        out = np.full(self.n, -np.inf)
        out[finite] = m[finite] + np.log(np.exp(values[finite] - m[finite, None]).sum(axis=1))
        return out
