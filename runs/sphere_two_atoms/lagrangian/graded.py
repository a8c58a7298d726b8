"""A ring mesh graded toward its poles, its poles on the two clusters (issue 30, a prototype
for the hybrid, ``hybrid.py --graded``).

The clusters of the two-atom case sit within about 2 degrees of +-u (mechanism.py's u) from
t = 12 to the departure, at every beta measured (300, 1000). A uniform mesh spends its cells
everywhere at the resolution the clusters' neighbourhood needs. This mesh has its north pole at
u and its south pole at -u (``spheredens.grids.RingMesh`` with ``lat_edges``, rotated): rings
of height ``h_fine`` out to ``fine_radius`` from each pole, then heights growing by ``growth``
per ring up to ``h_coarse``, equal rings of at most ``h_coarse`` across the belt between the
clusters. Each ring keeps about square cells. Within ``fine_radius`` the rings are equal, as
on a uniform mesh; beyond it the cells grow with the distance from the pole (with
``--graded 256,12,1.1 --run 64``: 105 cells on the first growing ring, 73 where the heights
reach pi / 64).

The hybrid builds ``fv``'s scheme on this mesh by handing it to ``SphereFV`` in place of
``RingMesh(nlat)`` while the scheme is made (``hybrid.start``): a shortcut of the prototype;
in the package the scheme would take the mesh (or its ``lat_edges`` and pole) from its
configuration.
"""

from __future__ import annotations

import math

import numpy as np

from spheredens.grids import RingMesh
from spheredens.grids._sphere_cells import rotation_to


def graded_colatitudes(h_fine: float, fine_radius: float, growth: float, h_coarse: float):
    """Ring edges in colatitude from a pole to the equator (0 ... pi/2): the cap of radius
    h_fine, rings of h_fine out to fine_radius, then heights times ``growth`` per ring up to
    h_coarse, then equal rings of at most h_coarse to the equator."""
    if not 0.0 < h_fine <= h_coarse or growth <= 1.0:
        raise ValueError("needs 0 < h_fine <= h_coarse and growth > 1")
    edges, h = [0.0, h_fine], h_fine
    while edges[-1] < fine_radius - 1e-12:
        edges.append(edges[-1] + h_fine)
    while h * growth < h_coarse and edges[-1] + h * growth < 0.5 * math.pi - h_coarse:
        h *= growth
        edges.append(edges[-1] + h)
    rest = 0.5 * math.pi - edges[-1]
    n = max(1, math.ceil(rest / h_coarse - 1e-9))
    return np.concatenate([edges, edges[-1] + rest * np.arange(1, n + 1) / n])


class PolarMesh(RingMesh):
    """:class:`~spheredens.grids.RingMesh` graded toward its poles (module docstring), north
    pole at ``pole``: ``points``, ``face_point`` and ``face_normal`` in the ordinary frame, the
    rest (lat/lon of cells and faces) in the mesh's own (:meth:`to_grid`)."""

    def __init__(
        self, h_fine: float, fine_radius: float, growth: float, h_coarse: float, pole: np.ndarray
    ) -> None:
        north = graded_colatitudes(h_fine, fine_radius, growth, h_coarse)
        lat = 0.5 * math.pi - north  # pi/2 ... 0
        edges = np.concatenate([-lat, lat[::-1][1:]])
        super().__init__(len(edges) - 1, edges)
        self.rotation = rotation_to(pole)
        self.h_fine = h_fine
        self.points = self.to_world(self.points)
        self.face_point = self.to_world(self.face_point)
        self.face_normal = self.to_world(self.face_normal)

    def to_world(self, x: np.ndarray) -> np.ndarray:
        return x @ self.rotation.T

    def to_grid(self, x: np.ndarray) -> np.ndarray:
        return x @ self.rotation


def to_grid(mesh, x: np.ndarray) -> np.ndarray:
    """Points from the ordinary frame to the mesh's (the identity for an unrotated mesh)."""
    return mesh.to_grid(x) if hasattr(mesh, "rotation") else x


def to_world(mesh, x: np.ndarray) -> np.ndarray:
    """Points from the mesh's frame to the ordinary one (the identity unrotated)."""
    return mesh.to_world(x) if hasattr(mesh, "rotation") else x


def locate(mesh, x: np.ndarray) -> np.ndarray:
    """The cell of each point x (ordinary frame, unit vectors)."""
    g = to_grid(mesh, x)
    return mesh.locate(np.arcsin(np.clip(g[:, 2], -1.0, 1.0)), np.arctan2(g[:, 1], g[:, 0]))
