"""The package reads as the data flows: lower layers never import higher ones."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "spheredens"

# module -> package modules it must not import (directly)
FORBIDDEN = {
    "models.py": {"grids", "interaction", "schemes", "recorder", "io", "config", "xarray"},
    "geometry.py": {"grids", "interaction", "schemes", "recorder", "io", "config", "models", "xarray"},
    "initial.py": {"grids", "interaction", "schemes", "recorder", "io", "config"},
    "grids/_circle.py": {"interaction", "schemes", "recorder", "io", "config", "xarray", "netCDF4"},
    "interaction/_quadrature.py": {"schemes", "recorder", "io", "config", "xarray"},
    "interaction/_fourier.py": {"schemes", "recorder", "io", "config", "xarray"},
    "schemes/_circle_fv.py": {"recorder", "io", "xarray", "simulate"},
    "schemes/_circle_fourier.py": {"recorder", "io", "xarray", "simulate"},
    "integrators.py": {"grids", "interaction", "schemes", "recorder", "io", "xarray"},
}


def imported_names(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            mod = (node.module or "").split(".")
            names |= {m for m in mod if m}
            names |= {a.name for a in node.names}
    return names


@pytest.mark.parametrize("module", sorted(FORBIDDEN))
def test_no_upward_imports(module):
    bad = imported_names(PACKAGE / module) & FORBIDDEN[module]
    assert not bad, f"{module} imports {bad}"


def test_import_is_silent_and_light():
    code = ("import sys, spheredens; "
            "print(','.join(m for m in ('shtns', 'ot', 'matplotlib', 'xarray') if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stderr == ""
    assert proc.stdout.strip() == ""  # nothing printed, no heavy library imported
