"""The heavy libraries spheredens imports on first use, all in one place.

``import spheredens`` stays fast and silent (no xarray, matplotlib, POT, shtns or Dask):
modules write ``from ._lazy import xarray as xr`` at their top, and the library is imported
the first time an attribute is used (``xr.Dataset``). This is the only place where a library
is imported lazily; no module of spheredens imports anything inside a function
(tests/test_layering.py checks both). :func:`when_imported` runs code once a library is
imported, by whoever imports it (the ``ds.sd`` accessor registers itself so with xarray).
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.abc
import io
import os
import sys
import warnings
from types import ModuleType
from typing import Any, Callable, Sequence

#: module name -> why it is loaded lazily (what uses it)
LAZY_LIBRARIES = {
    "xarray": "Datasets and netCDF files (recorder, io, compare, analysis, sweep)",
    "matplotlib": "figures (plot, compare, analysis); the Agg backend is selected on first use",
    "matplotlib.pyplot": "figures",
    "matplotlib.colors": "colour scales of the figures",
    "matplotlib.patches": "shapes drawn on the figures",
    "matplotlib.animation": "animations (plot: FuncAnimation, the ffmpeg and Pillow writers)",
    "ot": "POT, exact optimal transport (transport)",
    "shtns": "spherical-harmonic transforms on Gauss grids (grids); prints a banner on import",
    "ducc0": "general spherical-harmonic transforms and rotations (interaction)",
    "dask": "sweeps (sweep)",
    "dask.distributed": "sweeps on a cluster (sweep)",
    "tqdm.auto": "progress bars of run, particles and compare (simulate); a widget in notebooks",
}


class LazyModule:
    """A module imported on the first attribute access (``setup`` runs just before)."""

    def __init__(self, name: str, setup: Callable[[], None] | None = None) -> None:
        if name not in LAZY_LIBRARIES:
            raise ValueError(f"{name!r} is not listed in LAZY_LIBRARIES")
        self._name, self._setup, self._module = name, setup, None

    def load(self) -> ModuleType:
        """The module itself (imported now if it was not yet)."""
        if self._module is None:
            if self._setup is not None:
                self._setup()
            self._module = importlib.import_module(self._name)
        return self._module

    def __getattr__(self, attr: str) -> Any:
        return getattr(self.load(), attr)

    def __repr__(self) -> str:
        state = "loaded" if self._module is not None else "not loaded yet"
        return f"<lazy module {self._name!r} ({state})>"


def _agg_backend() -> None:
    """Figures are written to files: the Agg backend, chosen before pyplot is imported."""
    importlib.import_module("matplotlib").use("Agg")


@contextlib.contextmanager
def c_stdout_closed():
    """Run a block with the C-level stdout (file descriptor 1) sent to /dev/null: shtns prints
    its banner on import and warnings on some grids there."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 1)
            with contextlib.redirect_stdout(io.StringIO()):
                yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def _quiet_shtns() -> None:
    """shtns prints a banner to the C-level stdout on import: import it with stdout closed."""
    if "shtns" in sys.modules:
        return
    with c_stdout_closed():
        importlib.import_module("shtns")


def _quiet_tqdm() -> None:
    """tqdm.auto picks the notebook widget in Jupyter and warns when ipywidgets is missing (then
    it draws the text bar, which notebooks show too): import it without that warning."""
    if "tqdm.auto" in sys.modules:
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        importlib.import_module("tqdm.auto")


#: module name -> what to call with the module once it is imported (:func:`when_imported`)
_AFTER_IMPORT: dict[str, list[Callable[[ModuleType], None]]] = {}


class _AfterImportLoader(importlib.abc.Loader):
    """The loader of a watched module: the module's own loader, then the hooks."""

    def __init__(self, loader: Any, name: str) -> None:
        self._loader, self._name = loader, name

    def create_module(self, spec: Any) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        for hook in _AFTER_IMPORT.pop(self._name, []):
            hook(module)

    def __getattr__(self, attr: str) -> Any:  # resources, source, is_package: the real loader's
        return getattr(self._loader, attr)


class _AfterImportFinder(importlib.abc.MetaPathFinder):
    """On ``sys.meta_path``: finds a watched module through the other finders and gives its
    spec the loader that calls the hooks after the module has run."""

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: Any = None) -> Any:
        if fullname not in _AFTER_IMPORT:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = _AfterImportLoader(spec.loader, fullname)
                return spec
        return None


_FINDER = _AfterImportFinder()


def when_imported(name: str, hook: Callable[[ModuleType], None]) -> None:
    """Call ``hook(module)`` once the library ``name`` is imported: now when it already is,
    else right after its import, whoever imports it. Nothing is imported here: ``import
    spheredens`` stays light, and ``xarray.open_dataset(path).sd`` works as soon as both are
    imported (:mod:`spheredens.accessor` registers itself this way)."""
    if name not in LAZY_LIBRARIES:
        raise ValueError(f"{name!r} is not listed in LAZY_LIBRARIES")
    if name in sys.modules:
        hook(sys.modules[name])
        return
    _AFTER_IMPORT.setdefault(name, []).append(hook)
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)


xarray = LazyModule("xarray")
matplotlib = LazyModule("matplotlib", _agg_backend)
pyplot = LazyModule("matplotlib.pyplot", _agg_backend)
colors = LazyModule("matplotlib.colors", _agg_backend)
patches = LazyModule("matplotlib.patches", _agg_backend)
animation = LazyModule("matplotlib.animation", _agg_backend)
ot = LazyModule("ot")
shtns = LazyModule("shtns", _quiet_shtns)
ducc0 = LazyModule("ducc0")
dask = LazyModule("dask")
distributed = LazyModule("dask.distributed")
tqdm_auto = LazyModule("tqdm.auto", _quiet_tqdm)
