"""``ds.sd``: the layout of a run file (schema spheredens-1) read in one place.

Every consumer of a density file (comparisons, figures, studies) asks the file, through the
xarray accessor ``ds.sd``, for what it needs instead of re-deriving it from dimension names:

* ``ds.sd.domain``: the :class:`~spheredens.geometry.Domain` of the file;
* ``ds.sd.marginal(index=None)``: the density, summed over the slices (``xi``) when there are;
* ``ds.sd.grid()``: the grid the density lives on (:class:`FileGrid`: points, weights, mesh);
* ``ds.sd.density_function(t)``: the density at snapshot ``t`` as a function of points;
* ``ds.sd.model_record()``: what a density or particle file records of its model, item by item;
* ``ds.sd.model()``: the :class:`~spheredens.models.Model` the file records.

The accessor is registered once, when xarray is imported (:func:`spheredens._lazy.when_imported`;
at once when it already is): ``import spheredens`` does not import xarray, and
``xarray.open_dataset(path).sd`` works as soon as both are imported.
"""

from __future__ import annotations

import json
import math
import tomllib
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ._lazy import when_imported
from ._lazy import xarray as xr
from ._types import Array
from .auxiliary import auxiliary_from_params
from .exceptions import SchemaError
from .geometry import (
    CIRCLE,
    DOMAINS,
    SPHERE,
    ZONAL,
    Domain,
    circle_angle,
    circle_points,
    dataset_sphere_points,
    domain_entry,
    get_domain,
)
from .grids import GaussGrid, LatLonCells, OffGridSynthesis, RingMesh
from .models import Model
from .slices import marginal

#: name of the accessor on ``xarray.Dataset``
NAME = "sd"
#: points evaluated at once by the trigonometric interpolation of ``fourier`` circle files
_CHUNK_POINTS = 4096

#: the items of a model a file records (:meth:`SpheredensAccessor.model_record`), in this order
MODEL_ITEMS = (
    "domain",
    "model",
    "beta",
    "Q",
    "K",
    "V",
    "model.*",
    "initial density",
    "slice labels",
    "slice weights",
    "auxiliary.*",
)


def register_accessor(module: Any = None) -> None:
    """Register :class:`SpheredensAccessor` as ``xarray.Dataset.sd`` (imports xarray); done
    once, when xarray is imported (see the module documentation)."""
    if not hasattr(xr.Dataset, NAME):
        xr.register_dataset_accessor(NAME)(SpheredensAccessor)


@dataclass(frozen=True, eq=False)
class FileGrid:
    """The grid the density of a run file lives on, rebuilt from the file's coordinates.

    Attributes
    ----------
    domain : Domain
        The file's domain (attribute ``domain``).
    layout : str
        ``"theta"``: coordinate ``theta`` (dim ``theta``, the circle); ``"lat_lon"``: separate
        dims ``lat``, ``lon`` (the Gauss grid of ``sh_spectral``); ``"cells"``: dim ``cell``
        with ``lat(cell)``, ``lon(cell)`` (the finite-volume ring mesh).
    space_dims : tuple of str
        The space dimensions of ``rho``, in order.
    points : ndarray
        Unit vectors shaped as the file: (theta, 2), (lat, lon, 3) or (cell, 3).
    weight : ndarray
        The file's ``weight``: quadrature weights or cell areas (sum ``domain.area``).
    theta : ndarray or None
        Circle: the angles of the file (radians).
    lat, lon : ndarray or None
        Sphere: the file's latitudes and longitudes (degrees), on their own dims or per cell.
    mesh : RingMesh, LatLonCells or None
        ``"cells"``: the ring mesh rebuilt from ``ring_count``.
    """

    domain: Domain
    layout: str
    space_dims: tuple[str, ...]
    points: Array
    weight: Array
    theta: Array | None = None
    lat: Array | None = None
    lon: Array | None = None
    mesh: RingMesh | LatLonCells | None = None

    @property
    def flat_points(self) -> Array:
        """The points as an (N, d) array, in the order of the flattened ``rho``."""
        return self.points.reshape(-1, self.domain.d)

    @property
    def flat_weight(self) -> Array:
        """The weights as an (N,) array, in the order of :attr:`flat_points`."""
        return self.weight.reshape(-1)

    def regular_view(self, rho: Array, *, nlat: int = 90) -> tuple[Array, Array, Array]:
        """(lat, lon, rho on (..., lat, lon)) of a sphere density: the stored grid, or, on the
        finite-volume mesh, its cells sampled on a regular nlat x 2 nlat grid."""
        if self.mesh is not None:
            return self.mesh.to_latlon(rho, nlat, 2 * nlat)
        if self.layout != "lat_lon":
            raise SchemaError(
                f"a regular latitude-longitude view needs a sphere file, not the {self.domain.name}"
            )
        return self.lat, self.lon, rho


def file_domain(ds: Any) -> Domain:
    """The :class:`Domain` named by the attribute ``domain`` of ``ds``."""
    name = ds.attrs.get("domain")
    if name not in DOMAINS:
        raise SchemaError(
            f"the file's attribute domain is {name!r}; expected one of {DOMAINS.quoted_names()}"
        )
    return get_domain(name)


def file_grid(ds: Any) -> FileGrid:
    """The :class:`FileGrid` of a run file (schema spheredens-1), from its coordinates, by the
    domain's part ``"file_grid"`` (``(ds, domain, dims, weight) -> FileGrid``).

    Raises
    ------
    spheredens.geometry.NotProvided
        The file's domain has no reader of its grid.
    """
    domain = file_domain(ds)
    read = domain_entry(FILE_GRIDS, domain, "file_grid", "reading the grid of a run file")
    weight = np.asarray(ds["weight"].values, dtype=float)
    dims = tuple(d for d in ds["rho"].dims if d not in ("time", "xi"))
    return read(ds, domain, dims, weight)


def _theta_grid(ds: Any, domain: Domain, dims: tuple[str, ...], weight: Array) -> FileGrid:
    """The circle: the angles ``theta``."""
    theta = np.asarray(ds["theta"].values, dtype=float)
    return FileGrid(domain, "theta", dims, circle_points(theta), weight, theta=theta)


def _sphere_grid(ds: Any, domain: Domain, dims: tuple[str, ...], weight: Array) -> FileGrid:
    """The sphere: a (lat, lon) Gauss grid, or the cells of the finite-volume ring mesh."""
    lat, lon = np.asarray(ds["lat"].values), np.asarray(ds["lon"].values)
    points = dataset_sphere_points(ds)
    if ds["lat"].dims != ds["lon"].dims:
        return FileGrid(domain, "lat_lon", dims, points, weight, lat=lat, lon=lon)
    if "ring" not in ds.sizes and "grid_pole" in ds:  # equiangular cells about a pole (log_sl)
        nlat = int(round(math.sqrt(lat.size / 2)))
        cells = LatLonCells(nlat, np.asarray(ds["grid_pole"].values, dtype=float))
        if 2 * nlat * nlat != lat.size or not np.allclose(cells.points, points, atol=1e-9):
            raise SchemaError(
                "the file's cells and grid_pole do not describe spheredens equiangular cells"
            )
        return FileGrid(domain, "cells", dims, points, weight, lat=lat, lon=lon, mesh=cells)
    if "ring" not in ds.sizes:
        raise SchemaError(
            "a sphere file with one dimension of cells needs ring_count (the ring mesh of "
            "fv) or grid_pole (the equiangular cells of log_sl)"
        )
    mesh = RingMesh(int(ds.sizes["ring"]))
    if not np.array_equal(mesh.ring_count, ds["ring_count"].values):
        raise SchemaError("the file's ring_count does not describe a spheredens ring mesh")
    return FileGrid(domain, "cells", dims, points, weight, lat=lat, lon=lon, mesh=mesh)


#: the reader of a run file's grid on each domain: ``(ds, domain, dims, weight) -> FileGrid``
FILE_GRIDS = {CIRCLE.name: _theta_grid, SPHERE.name: _sphere_grid, ZONAL.name: _theta_grid}


def config_tables(ds: Any) -> dict[str, Any]:
    """The run configuration a file records (attribute ``config``, TOML or JSON), or {}."""
    text = ds.attrs.get("config")
    if not text:
        return {}
    for parse in (tomllib.loads, json.loads):
        try:
            data = parse(str(text))
        except Exception:  # not this format (or unreadable): try the next
            continue
        return data if isinstance(data, dict) else {}
    return {}


def model_record(ds: Any) -> dict[str, Any]:
    """What a density or particle file records of its model, by item of :data:`MODEL_ITEMS`:
    ``domain``, ``model`` (name) and ``beta`` from the attributes, ``Q``, ``K``, ``V`` from the
    variables, the other keys of its configuration's ``[model]`` table, its ``[initial]`` table
    (``initial density``), the slice labels and weights (usa_av: ``xi`` and ``xi_weight`` of a
    density, ``slice_xi`` and ``slice_weight`` of particles) and the other keys of ``[auxiliary]``.
    Items a file does not record are absent (a converted particle file has only ``domain``)."""
    rec: dict[str, Any] = {}
    cfg = config_tables(ds)
    model = cfg.get("model", {}) if isinstance(cfg.get("model"), dict) else {}
    aux = cfg.get("auxiliary", {}) if isinstance(cfg.get("auxiliary"), dict) else {}
    if "domain" in ds.attrs:
        rec["domain"] = str(ds.attrs["domain"])
    if "model" in ds.attrs or "name" in model:
        rec["model"] = str(ds.attrs.get("model", model.get("name")))
    if "beta" in ds.attrs or "beta" in model:
        rec["beta"] = ds.attrs.get("beta", model.get("beta"))
    for name in ("Q", "K", "V"):
        if name in ds.variables:
            rec[name] = np.asarray(ds[name].values, dtype=float)
        elif name in model:
            rec[name] = np.asarray(model[name], dtype=float)
    rec.update(
        {f"model.{k}": v for k, v in model.items() if k not in ("name", "beta", "Q", "K", "V")}
    )
    if isinstance(cfg.get("initial"), dict):
        rec["initial density"] = cfg["initial"]
    density_labels = "xi" in ds.coords and ds["xi"].dims == ("xi",)
    labels = (
        ds["xi"].values
        if density_labels
        else ds["slice_xi"].values
        if "slice_xi" in ds.variables
        else aux.get("xi")
    )
    weights = (
        ds["xi_weight"].values
        if "xi_weight" in ds.variables
        else ds["slice_weight"].values
        if "slice_weight" in ds.variables
        else aux.get("weights")
    )
    if labels is not None:
        rec["slice labels"] = np.asarray(labels, dtype=float)
    if weights is not None:
        rec["slice weights"] = np.asarray(weights, dtype=float)
    rec.update({f"auxiliary.{k}": v for k, v in aux.items() if k not in ("xi", "weights")})
    return rec


def file_model(ds: Any) -> Model:
    """The :class:`~spheredens.models.Model` a file records (:func:`model_record`): its name,
    beta, Q, K and V, and for ``usa_av`` the auxiliary kernel of its ``[auxiliary]`` table.

    Raises
    ------
    SchemaError
        The file records no model, or only part of one (a particle file converted from another
        code without a configuration), or one that cannot be built.
    """
    rec = model_record(ds)
    missing = [item for item in ("model", "beta", "Q", "K", "V") if item not in rec]
    if missing:
        raise SchemaError(
            f"the file records no model (no {', '.join(missing)}); a particle file converted "
            "from another code gets one from spheredens convert-particles ... --config CONFIG"
        )
    Q, K, V = rec["Q"], rec["K"], rec["V"]
    if not (Q.ndim == 2 and Q.shape[0] == Q.shape[1] and Q.shape == K.shape == V.shape):
        raise SchemaError(
            f"the file's Q, K, V have shapes {Q.shape}, {K.shape}, {V.shape}; a model needs "
            "three square matrices of one size"
        )
    auxiliary = None
    try:
        if rec["model"] == "usa_av":
            aux = config_tables(ds).get("auxiliary")
            auxiliary = auxiliary_from_params(aux if isinstance(aux, dict) else {}, Q.shape[0])
        meridian = file_domain(ds).meridian  # the zonal domain's 2 x 2 reductions
        return Model(rec["model"], float(rec["beta"]), Q, K, V, auxiliary, meridian)
    except SchemaError:
        raise
    except Exception as exc:  # a name, beta or [auxiliary] table no model takes: one line
        raise SchemaError(f"the file's model cannot be built ({exc})") from None


def circle_cells(grid: FileGrid, rho: Array) -> Callable[[Array], Array]:
    """The piecewise-constant density of finite-volume cells centred on the file's angles."""
    theta0, h = float(grid.theta[0]), 2.0 * np.pi / grid.theta.size

    def cells(x: Array) -> Array:
        k = np.floor((circle_angle(x) - theta0) / h + 0.5).astype(np.int64)
        return rho[np.mod(k, grid.theta.size)]

    return cells


def circle_trigonometric(grid: FileGrid, rho: Array) -> Callable[[Array], Array]:
    """The trigonometric interpolant of point values at the file's evenly spaced angles
    (``fourier`` runs): sum_k c_k exp(i k (theta - theta_0)), c = FFT(rho) / n."""
    n = grid.theta.size
    coefficients = np.fft.fft(rho) / n
    k = np.fft.fftfreq(n, 1.0 / n)

    def trigonometric(x: Array) -> Array:
        angle = circle_angle(x) - float(grid.theta[0])
        out = np.empty(angle.shape)
        for s in range(0, angle.size, _CHUNK_POINTS):
            phase = np.exp(1j * angle[s : s + _CHUNK_POINTS, None] * k[None, :])
            out[s : s + _CHUNK_POINTS] = (phase @ coefficients).real
        return out

    return trigonometric


def sphere_cells(grid: FileGrid, rho: Array) -> Callable[[Array], Array]:
    """The piecewise-constant density of the finite-volume ring mesh (cell averages)."""

    def cells(x: Array) -> Array:
        lat = np.arcsin(np.clip(x[:, 2], -1.0, 1.0))
        return rho[grid.mesh.locate(lat, np.arctan2(x[:, 1], x[:, 0]))]

    return cells


def sphere_harmonics(lmax: int, rho: Array) -> Callable[[Array], Array]:
    """The spherical-harmonic expansion (degrees <= lmax) of values on the Gauss grid."""
    grid = GaussGrid(lmax, nlat=rho.shape[0], nphi=rho.shape[1])
    coefficients = grid.analys(rho)
    return lambda x: OffGridSynthesis(grid, x).values(coefficients)


class SpheredensAccessor:
    """``ds.sd``: the layout of a spheredens-1 run file (see the module documentation)."""

    def __init__(self, ds: Any) -> None:
        self._ds = ds

    @property
    def domain(self) -> Domain:
        """The :class:`~spheredens.geometry.Domain` of the file."""
        return file_domain(self._ds)

    def _density(self, method: str, needs: tuple[str, ...] = ("rho", "weight")) -> Any:
        """The Dataset, when it is a density file (the variables ``needs``); otherwise a
        one-line SchemaError saying what ``ds.sd.<method>()`` needs and, for a particle file,
        what to use instead."""
        ds = self._ds
        missing = [name for name in needs if name not in ds.variables]
        if not missing:
            return ds
        need = (
            f"ds.sd.{method}() needs a density file (schema spheredens-1, opened with "
            f"spheredens.open_run), with the variable{'s' if len(needs) > 1 else ''} "
            + " and ".join(map(repr, needs))
        )
        schema = ds.attrs.get("spheredens_schema")
        if "position" in ds.variables:
            raise SchemaError(
                f"{need}; this is a particle file ({schema or 'no spheredens_schema attribute'}): "
                "its particles are ds['position'] (time, particle, component) with weights "
                "ds['particle_weight'] (added by spheredens.open_particles), compared with a "
                "density by spheredens.compare"
            )
        what = f"a {schema} file" if schema else "a dataset without them"
        raise SchemaError(f"{need}; this is {what} (no {' or '.join(map(repr, missing))})")

    def grid(self) -> FileGrid:
        """The grid the file's density lives on (:class:`FileGrid`)."""
        return file_grid(self._density("grid"))

    def marginal(self, index: int | None = None) -> Array:
        """The density at snapshot ``index`` (all snapshots when None, time first); for files
        with slices (dim ``xi``) the marginal sum_k r_k rho_k (``rho_marginal`` when stored,
        else formed with ``xi_weight``).

        Raises
        ------
        SchemaError
            The dataset is no density file (a particle file: what to use instead).
        """
        ds = self._density("marginal", ("rho",))
        sliced = "xi" in ds["rho"].dims
        name = "rho_marginal" if sliced and "rho_marginal" in ds else "rho"
        values = ds[name].values
        values = np.asarray(values if index is None else values[index], dtype=float)
        if not sliced or name == "rho_marginal":
            return values
        axis = ds["rho"].dims.index("xi") - (0 if index is None else 1)  # below time
        return marginal(values, ds["xi_weight"].values, axis=axis)

    def density_function(self, t: int) -> Callable[[Array], Array]:
        """The (marginal) density at snapshot index ``t`` as a function of points x (n, d) -> (n,).

        Finite volumes (``fv``, circle and sphere): the piecewise-constant cell averages.
        ``fourier`` (circle): the trigonometric interpolant of the stored point values.
        ``sh_spectral`` (sphere): the spherical-harmonic expansion (degrees <= lmax) of the
        stored Gauss-grid values, evaluated at the points.
        """
        self._density("density_function")
        grid = self.grid()
        rho = self.marginal(t)
        scheme = self._ds.attrs.get("scheme")
        if grid.layout == "cells":
            return sphere_cells(grid, rho)
        if grid.layout == "lat_lon" and scheme == "sh_spectral":
            return sphere_harmonics(int(self._ds.attrs["lmax"]), rho)
        if grid.layout == "theta" and scheme in ("fv", "fourier"):
            return (circle_cells if scheme == "fv" else circle_trigonometric)(grid, rho)
        raise SchemaError(
            f"density_function needs a run of scheme 'fv' or 'fourier' (circle), 'fv' or "
            f"'sh_spectral' (sphere), not {scheme!r} on the {grid.domain.name}"
        )

    def model_record(self) -> dict[str, Any]:
        """What the file records of its model, by item (:func:`model_record`)."""
        return model_record(self._ds)

    def model(self) -> Model:
        """The :class:`~spheredens.models.Model` the file records (:func:`file_model`).

        Raises
        ------
        SchemaError
            The file records no model (a converted particle file), or not all of one.
        """
        return file_model(self._ds)


when_imported("xarray", register_accessor)
