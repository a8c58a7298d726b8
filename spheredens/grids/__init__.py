"""Grids: points on S^{d-1}, quadrature weights and the coordinates a Dataset needs."""
from ._circle import CircleGrid
from ._sphere_gauss import GaussGrid, OffGridSynthesis, default_grid_size, import_shtns

__all__ = ["CircleGrid", "GaussGrid", "OffGridSynthesis", "default_grid_size", "import_shtns"]
