"""The options of ``log_lagrangian`` (``[discretization]``): their defaults, choices and
validation (:class:`~._sphere_lagrangian.SphereLagrangianScheme` documents what each does)."""

from __future__ import annotations

from typing import Any, Mapping

from .._validate import as_bool, as_float
from ..interaction._particle_flow import QUADRATURES  # how the sums see a source particle
from ._base import validate_choice
from ._circle_log_sl import tolerance_option

#: default of ``quadrature``
DEFAULT_QUADRATURE = "points"

#: default of ``merge``: particles closer than this / (beta sigma_max(B)) are merged
DEFAULT_MERGE = 0.3

#: default of ``refine_look``
DEFAULT_REFINE_LOOK = False

#: the shapes of a merged particle (``merge_shape``) and the default
MERGE_SHAPES = ("area", "moments")
DEFAULT_MERGE_SHAPE = "area"

#: the slopes of the profile a split divides a particle's mass by (``split_slope``), the default
SPLIT_SLOPES = ("fitted", "limited")
DEFAULT_SPLIT_SLOPE = "fitted"

#: default of ``remesh_tail`` (units of time between the tail's remeshings; 0: never)
DEFAULT_REMESH_TAIL = 0.0
#: default of ``merge_tail`` (units of time between the deep tail's merges; 0: never)
DEFAULT_MERGE_TAIL = 0.0
#: default of ``merge_tail_width``: the cells that ``merge_tail`` merges by are at most this
#: fraction of the attention kernel's width (beta sigma_max(B))^(-1/2) wide
DEFAULT_MERGE_TAIL_WIDTH = 0.4
#: default of ``follow_depth`` (0: the error control follows every particle within
#: 2 beta sigma_max(B) + 50 e-folds of the heaviest log mass, all a softmax can see)
DEFAULT_FOLLOW_DEPTH = 0.0
#: default of ``voronoi_shapes`` (units of time between the deep tail's tessellations; 0: never)
DEFAULT_VORONOI_SHAPES = 0.0
#: what a mesh file's cells become (``file_cells``, :func:`._particle_remesh.coarsen_outside`)
FILE_CELLS = ("kept", "coarsened")
DEFAULT_FILE_CELLS = "kept"


def validate_lagrangian_options(table: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    """The options of ``log_lagrangian`` (without ``n``, ``interaction`` and
    ``allow_underresolved``), validated, defaults filled in."""
    return {
        "tolerance": tolerance_option(table, prefix),
        "merge": as_float(
            table.get("merge", DEFAULT_MERGE),
            f"{prefix}.merge",
            minimum=0.0,
            maximum=3.0,
            what=" (particles closer than merge / (beta sigma_max(B)) are merged)",
        ),
        "quadrature": validate_choice(
            table,
            "quadrature",
            prefix,
            QUADRATURES,
            DEFAULT_QUADRATURE,
            "quadrature of the sources",
        ),
        "multirate": as_bool(table.get("multirate", True), f"{prefix}.multirate"),
        "refine_look": as_bool(
            table.get("refine_look", DEFAULT_REFINE_LOOK), f"{prefix}.refine_look"
        ),
        "merge_shape": validate_choice(
            table,
            "merge_shape",
            prefix,
            MERGE_SHAPES,
            DEFAULT_MERGE_SHAPE,
            "shape of a merged particle",
        ),
        "split_slope": validate_choice(
            table,
            "split_slope",
            prefix,
            SPLIT_SLOPES,
            DEFAULT_SPLIT_SLOPE,
            "slope of the profile a split divides the mass by",
        ),
        "remesh_tail": as_float(
            table.get("remesh_tail", DEFAULT_REMESH_TAIL),
            f"{prefix}.remesh_tail",
            minimum=0.0,
            what=" (units of time between the deep tail's remeshings on the cubed sphere; "
            "0: never)",
        ),
        "merge_tail": as_float(
            table.get("merge_tail", DEFAULT_MERGE_TAIL),
            f"{prefix}.merge_tail",
            minimum=0.0,
            what=" (units of time between the deep tail's merges by cells of about a kernel "
            "width; 0: never)",
        ),
        "merge_tail_width": as_float(
            table.get("merge_tail_width", DEFAULT_MERGE_TAIL_WIDTH),
            f"{prefix}.merge_tail_width",
            minimum=0.01,
            maximum=10.0,
            what=" (the width of the cells merge_tail merges by, in kernel widths "
            "(beta sigma_max(B))^(-1/2))",
        ),
        "voronoi_shapes": as_float(
            table.get("voronoi_shapes", DEFAULT_VORONOI_SHAPES),
            f"{prefix}.voronoi_shapes",
            minimum=0.0,
            what=" (units of time between the deep tail's tessellations, whose Voronoi cells "
            "become its particles' shapes; 0: never)",
        ),
        "follow_depth": as_float(
            table.get("follow_depth", DEFAULT_FOLLOW_DEPTH),
            f"{prefix}.follow_depth",
            minimum=0.0,
            what=" (e-folds below the heaviest particle's log mass within which the error "
            "control follows particles; 0: 2 beta sigma_max(B) + 50)",
        ),
        "file_cells": validate_choice(
            table, "file_cells", prefix, FILE_CELLS, DEFAULT_FILE_CELLS, "file_cells value"
        ),
    }
