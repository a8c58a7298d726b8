"""Uniform grids on the circle S^1."""

from __future__ import annotations

from typing import Callable

import numpy as np

from .._types import Array
from ..geometry import circle_points, circle_tangents


def theta_bounds(theta: Array, h: float) -> dict[str, tuple]:
    """The CF cell bounds ``theta_bounds`` of cells of width h centred at ``theta``."""
    bounds = theta[:, None] + 0.5 * h * np.array([-1.0, 1.0])
    return {"theta_bounds": (("theta", "nv"), bounds, {"comment": "cell edges"})}


def theta_coordinate(theta: Array, long_name: str, comment: str) -> dict[str, tuple]:
    """The coordinate ``theta`` of a Dataset (radians, with its bounds): name -> (dims, values,
    attrs)."""
    attrs = {
        "long_name": long_name,
        "units": "radian",
        "axis": "X",
        "bounds": "theta_bounds",
        "comment": comment,
    }
    return {"theta": ("theta", theta, attrs)}


class CircleGrid:
    """n evenly spaced points theta_j = (j + offset) h, h = 2 pi / n, on the circle.

    With ``offset = 0.5`` the points are the centres of the cells [j h, (j + 1) h] (finite
    volumes); with ``offset = 0`` they are the nodes of the trapezoid rule (Fourier).

    Attributes
    ----------
    n : int
    h : float
        Spacing 2 pi / n (cell length, radians).
    theta : ndarray (n,)
        Angles in [0, 2 pi).
    points : ndarray (n, 2)
        Unit vectors (cos theta, sin theta).
    tangents : ndarray (n, 2)
        Unit tangents (-sin theta, cos theta).
    weight : ndarray (n,)
        Quadrature weights h (sum 2 pi): int f dtheta ~ sum(f * weight).
    """

    def __init__(self, n: int, offset: float = 0.5) -> None:
        self.n = int(n)
        self.offset = float(offset)
        self.h = 2.0 * np.pi / self.n
        self.theta = (np.arange(self.n) + self.offset) * self.h
        self.points = circle_points(self.theta)
        self.tangents = circle_tangents(self.theta)
        self.weight = np.full(self.n, self.h)
        self.shape = (self.n,)
        self.space_dims = ("theta",)  # names of the space dimensions in a Dataset (docs/dataset.md)

    def dataset_variables(self) -> dict[str, tuple]:
        """Variables describing the grid beyond its coordinates: the CF cell bounds of ``theta``
        (the cells [theta_j - h/2, theta_j + h/2] that ``weight`` measures)."""
        return theta_bounds(self.theta, self.h)

    def dataset_coords(self) -> dict[str, tuple]:
        """Coordinates for a Dataset (docs/dataset.md): name -> (dims, values, attrs)."""
        return theta_coordinate(self.theta, "angle", "x = (cos theta, sin theta)")

    #: attributes of the ``weight`` and ``rho`` variables (the circle has no CF cell measure:
    #: CF knows area and volume only, so the cell lengths are ``weight`` alone)
    weight_attrs = {
        "long_name": "quadrature weight",
        "units": "radian",
        "comment": "cell length: int f dtheta = sum(f * weight)",
    }
    rho_attrs = {
        "long_name": "density",
        "units": "radian-1",
        "comment": "density with respect to arc length",
    }

    def shifted(self, by: float) -> "CircleGrid":
        """The grid moved by ``by`` spacings (e.g. 0.5: from cell centres to right faces)."""
        return CircleGrid(self.n, self.offset + by)

    def cell_averages(self, f: Callable[[Array], Array], order: int = 4) -> Array:
        """Averages of f(x) over the cells [theta_j - h/2, theta_j + h/2] (Gauss-Legendre).

        ``order`` Gauss points per cell integrate f exactly to degree 2*order - 1: the error of
        an average is O(h^(2*order)), far below any scheme error here.
        """
        nodes, wts = np.polynomial.legendre.leggauss(order)
        theta = self.theta[:, None] + 0.5 * self.h * nodes[None, :]
        return (f(circle_points(theta)) * wts[None, :]).sum(axis=1) / 2.0

    def point_values(self, f: Callable[[Array], Array]) -> Array:
        """f evaluated at the grid points."""
        return np.asarray(f(self.points), dtype=float)
