"""Grids: points on S^{d-1}, quadrature weights and the coordinates a Dataset needs."""

from ._circle import CircleGrid
from ._cubed_sphere import CubedSphereCells
from ._shtns import import_shtns
from ._sphere_cells import LatLonCells
from ._sphere_gauss import GaussGrid, OffGridSynthesis, default_grid_size
from ._sphere_rings import RingMesh
from ._zonal import ZonalGrid

__all__ = [
    "CircleGrid",
    "CubedSphereCells",
    "GaussGrid",
    "LatLonCells",
    "OffGridSynthesis",
    "RingMesh",
    "ZonalGrid",
    "default_grid_size",
    "import_shtns",
]
