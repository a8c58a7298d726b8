"""CF descriptions shared by the sphere's grids: latitude/longitude coordinates and the cell
vertices of a mesh (``(dims, values, attrs)`` triples, as ``dataset_coords`` returns them)."""

from __future__ import annotations

from typing import Any

from .._types import Array

#: CF attributes of latitude and longitude, with their bounds variables
LATITUDE = {
    "long_name": "latitude",
    "standard_name": "latitude",
    "units": "degrees_north",
    "axis": "Y",
    "bounds": "lat_bounds",
}
LONGITUDE = {
    "long_name": "longitude",
    "standard_name": "longitude",
    "units": "degrees_east",
    "axis": "X",
    "bounds": "lon_bounds",
}


def _with_comment(attrs: dict[str, str], comment: str | None) -> dict[str, str]:
    return dict(attrs) if comment is None else {**attrs, "comment": comment}


def lat_lon_coords(
    lat: tuple[Any, Array],
    lon: tuple[Any, Array],
    *,
    lat_comment: str | None = None,
    lon_comment: str | None = None,
) -> dict[str, tuple]:
    """The CF coordinates ``lat`` and ``lon``, each given as (dims, values) in degrees."""
    return {
        "lat": (*lat, _with_comment(LATITUDE, lat_comment)),
        "lon": (*lon, _with_comment(LONGITUDE, lon_comment)),
    }


def cell_vertices(lat_v: Array, lon_v: Array, order: str) -> dict[str, tuple]:
    """``lat_bounds`` and ``lon_bounds`` of a mesh: the vertices (cell, nv) of every cell in
    degrees, in the vertex order described by ``order``."""
    return {
        "lat_bounds": (
            ("cell", "nv"),
            lat_v,
            {"comment": "latitude of the cell vertices, " + order},
        ),
        "lon_bounds": (
            ("cell", "nv"),
            lon_v,
            {"comment": "longitude of the cell vertices, " + order},
        ),
    }
