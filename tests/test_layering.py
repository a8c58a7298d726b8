"""The package reads as the data flows: one declared list of layers, no upward import.

:data:`LAYERS` lists every module of spheredens, bottom to top. A module may import the
modules of its own layer and of the layers below, never one above; every module is in the
list (a new module must be placed); package modules are imported at the top of a file, never
inside a function; the heavy libraries are imported lazily only through
:mod:`spheredens._lazy`, whose list is the one place they are named.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "spheredens"

#: every module of the package, bottom layer first (subpackages: their private modules, then
#: the package itself). A module imports only from its own layer and the layers before it.
LAYERS: list[tuple[str, ...]] = [
    ("_version", "_types", "exceptions", "kernel", "_lazy"),
    ("_registry", "_validate", "locking", "_oneline"),
    ("geometry",),
    ("models", "integrators"),
    ("_random_field",),
    ("_density_file",),
    ("initial",),
    ("zonal",),
    ("auxiliary",),
    ("model_rules", "config_toml"),
    ("config",),
    ("problem",),
    ("targets", "references"),
    ("grids._shtns", "grids._cf"),
    ("grids._circle", "grids._sphere_gauss", "grids._sphere_rings", "grids._zonal"),
    ("grids._sphere_cells", "grids._cubed_sphere"),
    ("grids",),
    ("transport",),
    ("interaction._base",),
    ("interaction._quadrature", "interaction._zonal"),
    ("interaction._pruned", "interaction._interpolant"),
    ("interaction._clusters",),
    ("interaction._particle_flow",),
    ("interaction._fourier", "interaction._funk_hecke"),
    ("interaction._points",),
    ("interaction._lowrank",),
    ("interaction._meridians",),
    ("interaction._auxiliary",),
    ("interaction",),
    ("schemes._memory", "schemes._resolution"),
    ("schemes._base",),
    ("schemes._circle_fv", "schemes._circle_fourier", "schemes._sh_spectral"),
    ("schemes._circle_log_sl",),
    ("schemes._line_remap",),
    ("schemes._sphere_fv", "schemes._sphere_log_sl", "schemes._zonal_fv"),
    (
        "schemes._zonal_log_sl",
        "schemes._particle_remesh",
        "schemes._particle_steps",
        "schemes._lagrangian_options",
    ),
    ("schemes._sphere_lagrangian",),
    ("schemes",),
    ("simulate",),
    ("diagnostics", "slices"),
    ("accessor",),
    ("schema",),
    ("result_schema",),
    ("convert",),
    ("recorder",),
    ("io",),
    ("runner",),
    ("agreement", "analysis"),
    ("particles",),
    ("zonal_particles",),
    ("compare", "convergence"),
    ("compare_pairs",),
    ("sweep._define", "sweep._worker", "sweep._report"),
    ("sweep._combine",),
    ("sweep._run",),
    ("sweep", "verify"),
    ("plot._common",),
    ("plot._layers",),
    ("plot._density", "plot._particles", "plot._comparison", "plot._study"),
    ("plot._animation",),
    ("plot",),
    ("cli._signals",),
    ("cli._commands",),
    ("cli._compare",),
    ("cli._parser",),
    ("cli",),
    ("cli.__main__",),
    ("__init__",),
    ("__main__",),
]

LAYER = {module: i for i, layer in enumerate(LAYERS) for module in layer}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts = parts[:-1]
    return ".".join(parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imports_of(text: str, module: str, is_package: bool = False) -> list[str]:
    """The spheredens modules that the source ``text`` of ``module`` imports (anywhere)."""
    package = (
        [] if module == "__init__" else module.split(".") if is_package else module.split(".")[:-1]
    )
    out = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1] + (
                    node.module.split(".") if node.module else []
                )
            elif (node.module or "").split(".")[0] == "spheredens":
                base = node.module.split(".")[1:]
            else:
                continue
            out += [_resolve(base + [alias.name]) for alias in node.names]
        elif isinstance(node, ast.Import):
            out += [
                _resolve(a.name.split(".")[1:])
                for a in node.names
                if a.name.split(".")[0] == "spheredens"
            ]
    return out


def package_imports(module: str) -> list[str]:
    path = MODULES[module]
    return imports_of(path.read_text(), module, path.name == "__init__.py")


def _resolve(parts: list[str]) -> str:
    """The module a dotted name refers to: the longest prefix that is a module."""
    for k in range(len(parts), 0, -1):
        name = ".".join(parts[:k])
        if name in MODULES:
            return name
    return "__init__"


def test_every_module_has_a_layer():
    missing = sorted(set(MODULES) - set(LAYER))
    stale = sorted(set(LAYER) - set(MODULES))
    assert not missing, f"place these modules in LAYERS: {missing}"
    assert not stale, f"these modules in LAYERS do not exist: {stale}"


def upward(module: str, imported: list[str]) -> list[str]:
    return sorted({t for t in imported if t != module and LAYER.get(t, -1) > LAYER[module]})


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_upward_imports(module):
    if module not in LAYER:
        pytest.skip("not placed (test_every_module_has_a_layer fails)")
    bad = upward(module, package_imports(module))
    assert not bad, f"{module} (layer {LAYER[module]}) imports from higher layers: {bad}"


def test_the_check_catches_an_upward_import():
    """The checker itself: models importing the runner, or a scheme importing the recorder,
    is an upward import; grids importing geometry is not."""
    assert upward("models", imports_of("from .runner import run\n", "models")) == ["runner"]
    assert upward(
        "schemes._base", imports_of("from ..recorder import Recorder\n", "schemes._base")
    ) == ["recorder"]
    assert (
        upward(
            "grids._circle", imports_of("from ..geometry import circle_points\n", "grids._circle")
        )
        == []
    )


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_imports_inside_functions(module):
    """Package modules at the top of the file; libraries inside functions only via _lazy."""
    tree = ast.parse(MODULES[module].read_text())
    inner = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for sub in ast.walk(node):
                if isinstance(sub, (ast.Import, ast.ImportFrom)):
                    inner.append(f"line {sub.lineno}: {ast.unparse(sub)}")
    allowed = {"_lazy"}  # the one place libraries are imported on first use
    assert module in allowed or not inner, f"{module} imports inside functions: {inner}"


def test_lazy_libraries_are_listed_in_one_place():
    """Every heavy library the package uses is imported through spheredens._lazy."""
    heavy = ("xarray", "matplotlib", "ot", "shtns", "ducc0", "dask", "distributed", "tqdm")
    for module, path in MODULES.items():
        if module == "_lazy":
            continue
        for node in ast.parse(path.read_text()).body:
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and not node.level
                else []
            )
            bad = [n for n in names if n.split(".")[0] in heavy]
            assert not bad, f"{module} imports {bad} eagerly: use spheredens._lazy"


def test_import_is_silent_and_light():
    code = (
        "import sys, spheredens; "
        "print(','.join(m for m in ('shtns', 'ot', 'matplotlib', 'xarray') if m in sys.modules))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stderr == ""
    assert proc.stdout.strip() == ""  # nothing printed, no heavy library imported


def test_computation_never_imports_plotting():
    """spheredens.plot (all its modules) is imported by the command line (``cli`` and its
    modules), the package's public functions and its own modules only: no computing module
    draws."""
    drawing = {m for m in MODULES if m == "plot" or m.startswith("plot.")}
    users = {m for m in MODULES for t in package_imports(m) if t in drawing}
    callers = {m for m in MODULES if m in ("cli", "__init__") or m.startswith("cli.")}
    assert users <= drawing | callers, sorted(users - drawing - callers)


#: the most lines a module of the package may have: above it, a room holds more than one job
MAX_MODULE_LINES = 700


def test_no_module_is_over_700_lines():
    """Every module small enough to know what one may touch in it (split a larger one by job)."""
    sizes = {m: len(p.read_text().splitlines()) for m, p in MODULES.items()}
    assert max(sizes.values()) <= MAX_MODULE_LINES, sorted(
        (n, m) for m, n in sizes.items() if n > MAX_MODULE_LINES
    )
