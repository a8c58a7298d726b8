"""Grids: points on S^{d-1}, quadrature weights and the coordinates a Dataset needs."""
from ._circle import CircleGrid

__all__ = ["CircleGrid"]
