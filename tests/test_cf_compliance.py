"""CF-1.10 compliance of every file kind, checked by a real checker.

The checker is ``cfchecker`` (the CF checker of the CF community, PyPI package ``cfchecker``;
it needs the udunits2 C library, which scripts/setup.sh installs). Two things make it run here:

* it fetches the CF standard name, area type and region tables from the web: the tests give it
  local files instead (tests/data/cf: the standard name table's entries for the names the files
  use, copied verbatim from version 93, and empty area type and region lists, as spheredens
  writes neither);
* its newest release (4.1.0) knows CF up to 1.8 and reports a file that says "CF-1.10" as "not
  CF". The tests register 1.10 with it, so that it applies all its rules (those of CF <= 1.8;
  1.9 and 1.10 added groups, domain variables and other things spheredens files do not use).

The rules it does not check are checked explicitly below: no _FillValue on coordinates, bounds
and cell measures; axis attributes; cell measures in m2 equal to the weights; short long names;
the sphere mesh's cell vertices (4 per cell, counter-clockwise, tiling the sphere). Finally
cartopy draws the mesh's cells from the vertices alone.
"""

from __future__ import annotations

import os
import warnings

import netCDF4
import numpy as np
import pytest
import xarray as xr
from conftest import EXAMPLE_C

import spheredens as sd
from spheredens.analysis import analyze_beta
from spheredens.compare import compare
from spheredens.compare_pairs import compare_runs
from spheredens.convert import convert_particles
from spheredens.io import open_particles, open_run, write_dataset
from spheredens.particles import run_particles
from spheredens.schema import MAX_LONG_NAME
from spheredens.sweep import combine, load_sweep

TABLES = os.path.join(os.path.dirname(__file__), "data", "cf")


def _require(module: str):
    """Import ``module``; skipped where it is missing, except on CI (scripts/setup.sh installs
    it)."""
    if os.environ.get("CI"):
        import importlib

        return importlib.import_module(module)
    return pytest.importorskip(module)


def _quiet(call, *args, **kwargs):
    """Tiny grids: the under-resolution warnings are expected."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sd.SpheredensWarning)
        return call(*args, **kwargs)


UNDER = {"allow_underresolved": True}
CIRCLE = {
    "model": {"name": "sa", "beta": 4.0, **EXAMPLE_C},
    "domain": {"name": "circle"},
    "initial": {"name": "random_smooth", "seed": 1, "amplitude": 0.5},
    "discretization": {"scheme": "fv", "n": 32, **UNDER},
    "time": {"t_end": 0.2, "snapshots": 2},
}
GAUSS = {
    "model": {"name": "sa", "beta": 2.0, "V": [[1, 0, 0], [0, 1, 0], [0, 0, 0.5]]},
    "domain": {"name": "sphere"},
    "initial": {"name": "random_smooth", "seed": 4, "bandwidth": 3},
    "discretization": {"scheme": "sh_spectral", "lmax": 7},
    "time": {"t_end": 0.2, "snapshots": 2},
}
MESH = {**GAUSS, "discretization": {"scheme": "fv", "nlat": 6, **UNDER}}
SLICES = {
    "model": {"name": "usa_av", "beta": 1.0},
    "domain": {"name": "circle"},
    "initial": {"name": "uniform"},
    "auxiliary": {"kernel": "rope", "omega": 3.0, "slices": 3, "slice_perturbation": 0.5},
    "discretization": {"scheme": "fv", "n": 32, **UNDER},
    "time": {"t_end": 0.2, "snapshots": 2},
}
SWEEP_BASE = (
    '[model]\nname = "sa"\nbeta = 10.0\nK = [[1.75, 0.866025], [0.433013, 2.5]]\n'
    "V = [[1.0, 0.0], [0.0, 0.5]]\n[discretization]\nn = 32\nallow_underresolved = true\n"
    "[time]\nt_end = 0.5\nsnapshots = 6\n"
)
MESH_SWEEP_BASE = (
    '[model]\nname = "sa"\nbeta = 2.0\nV = [[1, 0, 0], [0, 1, 0], [0, 0, 0.5]]\n'
    '[domain]\nname = "sphere"\n[initial]\nname = "random_smooth"\nseed = 4\nbandwidth = 3\n'
    '[discretization]\nscheme = "fv"\nnlat = 6\nallow_underresolved = true\n'
    "[time]\nt_end = 0.2\nsnapshots = 2\n"
)
SWEEP = (
    'base = "base.toml"\noutput_dir = "cases"\n[vary]\n"model.beta" = [5.0, 10.0]\n'
    '"discretization.n" = [16, 32]\n'
)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A tiny file of every kind: name -> path."""
    out = tmp_path_factory.mktemp("cf")
    paths = {}

    def run(kind, data):
        paths[kind] = out / f"{kind}.nc"
        cfg = sd.config_from_dict({**data, "output": {"path": str(paths[kind])}}, base_dir=out)
        _quiet(sd.run, cfg, progress=False)

    run("circle", CIRCLE)
    run("gauss", GAUSS)
    run("mesh", MESH)
    run("usa_av", SLICES)
    paths["particles"] = out / "particles.nc"
    pcfg = sd.config_from_dict(
        {**CIRCLE, "particles": {"n": 20, "dt": 0.05, "seed": 0}}, base_dir=out
    )
    _quiet(run_particles, pcfg, output=paths["particles"], progress=False)
    np.save(out / "other_code.npy", np.tile([0.6, 0.8], (3, 5, 1)))
    paths["converted"] = write_dataset(
        convert_particles(out / "other_code.npy", domain="circle", dt=0.1), out / "converted.nc"
    )
    cmp = compare(
        open_run(paths["circle"]),
        [open_particles(paths["particles"])],
        density_file=str(paths["circle"]),
        particle_files=[str(paths["particles"])],
    )
    paths["compare"] = write_dataset(cmp, out / "compare.nc")
    # runs against a reference: two densities and a particle run (spheredens-compare-pairs-1)
    paths["compare_pairs"] = write_dataset(
        compare_runs(
            open_run(paths["circle"]),
            [open_run(paths["circle"]), open_particles(paths["particles"])],
            reference_file=str(paths["circle"]),
            run_files=[str(paths["circle"]), str(paths["particles"])],
        ),
        out / "compare_pairs.nc",
    )
    (out / "base.toml").write_text(SWEEP_BASE)
    (out / "sweep.toml").write_text(SWEEP)
    (out / "cases").mkdir()
    sweep = load_sweep(out / "sweep.toml")
    for case in sweep.cases:  # the cases of `spheredens sweep`, here without Dask
        _quiet(sd.run, case.config, progress=False)
    combined = combine(sweep)
    paths["sweep"] = write_dataset(combined, out / "combined.nc")
    paths["analysis"] = write_dataset(analyze_beta(combined), out / "combined_beta_analysis.nc")
    # usa_av: labelled particles and the comparison per slice (coordinate xi)
    paths["particles_usa_av"] = out / "particles_usa_av.nc"
    pcfg = sd.config_from_dict(
        {**SLICES, "particles": {"n": 30, "dt": 0.05, "seed": 0}}, base_dir=out
    )
    _quiet(run_particles, pcfg, output=paths["particles_usa_av"], progress=False)
    cmp = compare(
        open_run(paths["usa_av"]),
        [open_particles(paths["particles_usa_av"])],
        density_file=str(paths["usa_av"]),
        particle_files=[str(paths["particles_usa_av"])],
    )
    paths["compare_usa_av"] = write_dataset(cmp, out / "compare_usa_av.nc")
    # a sweep on the sphere mesh: the combined file carries rho with the mesh's vertices and areas
    (out / "mesh_sweep").mkdir()
    (out / "mesh_sweep" / "base.toml").write_text(MESH_SWEEP_BASE)
    (out / "mesh_sweep" / "sweep.toml").write_text(
        'base = "base.toml"\noutput_dir = "cases"\n[vary]\n"model.beta" = [2.0, 3.0]\n'
    )
    (out / "mesh_sweep" / "cases").mkdir()
    sweep = load_sweep(out / "mesh_sweep" / "sweep.toml")
    for case in sweep.cases:
        _quiet(sd.run, case.config, progress=False)
    paths["sweep_mesh"] = write_dataset(combine(sweep), out / "mesh_sweep" / "combined.nc")
    return paths


KINDS = (
    "circle",
    "gauss",
    "mesh",
    "usa_av",
    "particles",
    "converted",
    "compare",
    "compare_pairs",
    "sweep",
    "analysis",
    "particles_usa_av",
    "compare_usa_av",
    "sweep_mesh",
)


def cf_check(path) -> dict[str, list[str]]:
    """cfchecker's messages on ``path`` by category (FATAL, ERROR, WARN), "variable: message"."""
    cfchecks = _require("cfchecker.cfchecks")
    version = cfchecks.CFVersion((1, 10))
    known = list(cfchecks.cfVersions)
    if str(version) not in map(str, known):  # 4.1.0 knows CF up to 1.8 (see the module doc)
        cfchecks.cfVersions.append(version)
    try:
        checker = cfchecks.CFChecker(
            cfStandardNamesXML=os.path.join(TABLES, "cf-standard-name-table.xml"),
            cfAreaTypesXML=os.path.join(TABLES, "area-type-table.xml"),
            cfRegionNamesXML=os.path.join(TABLES, "standardized-region-list.xml"),
            version=version,
            silent=True,
        )
        results = checker.checker(str(path))
    finally:
        cfchecks.cfVersions[:] = known
    out: dict[str, list[str]] = {"FATAL": [], "ERROR": [], "WARN": []}
    for category in out:
        out[category] += [f"global: {m}" for m in results["global"].get(category, [])]
        for name, messages in results["variables"].items():
            out[category] += [f"{name}: {m}" for m in messages.get(category, [])]
    return out


#: warnings cfchecker gives on the files, and why they stay
EXPECTED_WARNINGS = {
    # cfchecker 4.1 takes bounds as intervals (vertex 0, vertex 1): for cells with 4 vertices
    # one of lat and lon always "lies outside" these two (consecutive vertices share it)
    "mesh": {"lat: (7.1): Data for variable lat lies outside cell boundaries"},
    "sweep_mesh": {"lat: (7.1): Data for variable lat lies outside cell boundaries"},
}


@pytest.mark.parametrize("kind", KINDS)
def test_cf_checker_reports_no_error(files, kind):
    messages = cf_check(files[kind])
    assert messages["FATAL"] + messages["ERROR"] == [], messages
    assert set(messages["WARN"]) <= EXPECTED_WARNINGS.get(kind, set()), messages["WARN"]


def test_the_checker_finds_what_the_files_used_to_have(tmp_path):
    """The check is not vacuous: the old time coordinate (standard_name time, units "1") and an
    area measure in steradians are errors."""
    bad = tmp_path / "old.nc"
    xr.Dataset(
        {
            "rho": (
                ("time", "lat"),
                np.ones((2, 3)),
                {"long_name": "density", "units": "1", "cell_measures": "area: cell_area"},
            ),
            "cell_area": ("lat", np.ones(3), {"units": "steradian"}),
        },
        coords={
            "time": ("time", [0.0, 1.0], {"standard_name": "time", "units": "1"}),
            "lat": ("lat", [-45.0, 0.0, 45.0], {"units": "degrees_north"}),
        },
        attrs={"Conventions": "CF-1.10"},
    ).to_netcdf(bad)
    errors = " ".join(cf_check(bad)["ERROR"])
    assert "time" in errors and "square meters" in errors


# -- the rules cfchecker does not check ----------------------------------------------------------
def _raw(path):
    return netCDF4.Dataset(path)


@pytest.mark.parametrize("kind", KINDS)
def test_no_fill_value_on_coordinates_bounds_and_measures(files, kind):
    with _raw(files[kind]) as nc:
        special = set(nc.dimensions) & set(nc.variables)
        for var in nc.variables.values():
            special.update(getattr(var, "coordinates", "").split())
            special.update([getattr(var, "bounds", "")] if hasattr(var, "bounds") else [])
            special.update(getattr(var, "cell_measures", "").split()[1::2])
        for name in special & set(nc.variables):
            assert "_FillValue" not in nc[name].ncattrs(), (kind, name)


#: variables whose values have no unit (indices, a saved solver state, seeds)
NO_UNITS = {"slice", "checkpoint_state", "checkpoint_position", "seed", "scheme"}


@pytest.mark.parametrize("kind", KINDS)
def test_short_long_names_and_units(files, kind):
    with xr.open_dataset(files[kind]) as ds:
        assert ds.attrs["Conventions"] == "CF-1.10"
        bounds = {str(ds[v].attrs.get("bounds")) for v in ds.variables if "bounds" in ds[v].attrs}
        for name, var in ds.variables.items():
            if name in bounds:  # bounds take their parent's description (CF 7.1)
                continue
            assert "long_name" in var.attrs, (kind, name)
            assert len(var.attrs["long_name"]) <= MAX_LONG_NAME, (
                kind,
                name,
                var.attrs["long_name"],
            )
            if name not in NO_UNITS and var.dtype.kind in "iuf":
                assert "units" in var.attrs, (kind, name)
        if "time" in ds.variables:
            assert "standard_name" not in ds["time"].attrs and "axis" not in ds["time"].attrs
            assert ds["time"].attrs["units"] == "1"


@pytest.mark.parametrize("kind", ["circle", "gauss", "mesh", "usa_av"])
def test_axes_bounds_and_cell_measures(files, kind):
    with xr.open_dataset(files[kind]) as ds:
        if ds.attrs["domain"] == "circle":
            assert ds["theta"].attrs["axis"] == "X"
            b = ds[ds["theta"].attrs["bounds"]].values
            np.testing.assert_allclose(b[:, 1] - b[:, 0], ds["weight"].values, rtol=1e-12)
            np.testing.assert_allclose(b[1:, 0], b[:-1, 1], rtol=0, atol=1e-13)
            assert "cell_measures" not in ds["rho"].attrs  # CF measures area and volume only
            return
        assert ds["lat"].attrs["axis"] == "Y" and ds["lon"].attrs["axis"] == "X"
        assert ds["rho"].attrs["cell_measures"] == "area: cell_area"
        area = ds["cell_area"]
        assert area.attrs["units"] == "m2" and area.attrs["standard_name"] == "cell_area"
        np.testing.assert_array_equal(area.values, ds["weight"].values)
        lat_b, lon_b = ds[ds["lat"].attrs["bounds"]].values, ds[ds["lon"].attrs["bounds"]].values
        if kind == "gauss":  # cells between the cumulative Gauss weights: areas are the weights
            assert np.all((lat_b.min(1) < ds["lat"].values) & (ds["lat"].values < lat_b.max(1)))
            cells = (
                np.radians(lon_b[:, 1] - lon_b[:, 0])[None, :]
                * np.abs(np.sin(np.radians(lat_b[:, 0])) - np.sin(np.radians(lat_b[:, 1])))[:, None]
            )
            np.testing.assert_allclose(cells, ds["weight"].values, rtol=1e-10)


def test_mesh_vertices_tile_the_sphere(files):
    """4 vertices per cell, counter-clockwise seen from outside, the centre inside; the cells of
    the quadrilaterals in (lon, lat) have the file's areas and tile the sphere (4 pi)."""
    with _raw(files["mesh"]) as nc:
        assert nc.dimensions["nv"].size == 4
        assert nc["lat"].bounds == "lat_bounds" and nc["lon"].bounds == "lon_bounds"
        assert set(nc["rho"].coordinates.split()) == {"lat", "lon"}
    with xr.open_dataset(files["mesh"]) as ds:
        lat, lon = ds["lat_bounds"].values, ds["lon_bounds"].values
        x, y = np.radians(lon), np.sin(np.radians(lat))  # equal-area coordinates (lon, sin lat)
        signed = 0.5 * np.sum(x * np.roll(y, -1, axis=1) - np.roll(x, -1, axis=1) * y, axis=1)
        assert np.all(signed > 0)  # counter-clockwise
        np.testing.assert_allclose(signed, ds["weight"].values, rtol=1e-12)
        assert abs(signed.sum() - 4 * np.pi) < 1e-12
        inside = (
            (lat.min(1) <= ds["lat"].values)
            & (ds["lat"].values <= lat.max(1))
            & (lon.min(1) <= ds["lon"].values)
            & (ds["lon"].values <= lon.max(1))
        )
        assert np.all(inside)
        # rebuilt from the file, the mesh is the solver's
        assert ds.sd.grid().layout == "cells"
    combined, mesh = xr.load_dataset(files["sweep_mesh"]), xr.load_dataset(files["mesh"])
    # the combined file of a sweep keeps the mesh
    assert combined.attrs["rho_included"] == 1
    for name in ("lat", "lon", "lat_bounds", "lon_bounds", "cell_area"):
        np.testing.assert_array_equal(combined[name].values, mesh[name].values)
    assert combined["rho"].attrs["cell_measures"] == "area: cell_area"


def test_cartopy_draws_the_mesh_cells_from_the_vertices(files, tmp_path):
    """cartopy (Agg) draws the fv cells from lat_bounds/lon_bounds alone; projected to an
    equal-area map of the unit sphere, each cell keeps its area and together they cover 4 pi."""
    _require("cartopy")
    import matplotlib

    matplotlib.use("Agg")
    import cartopy.crs as ccrs
    import matplotlib.pyplot as plt
    from shapely.geometry import Polygon

    with xr.open_dataset(files["mesh"]) as ds:
        lat, lon = ds["lat_bounds"].values, ds["lon_bounds"].values
        rho, weight = ds["rho"].values[-1], ds["weight"].values
    # a cap spans longitudes 0 to 360: cartopy takes a full-width polygon in [-180, 180]
    full = lon.max(1) - lon.min(1) >= 360.0
    lon = np.where(full[:, None], lon - 180.0, lon)
    steps = np.arange(8) / 8  # the edges follow parallels and meridians: sample them

    def polygon(la, lo):
        return Polygon(
            np.concatenate(
                [
                    np.column_stack(
                        [
                            lo[i] + steps * (lo[(i + 1) % 4] - lo[i]),
                            la[i] + steps * (la[(i + 1) % 4] - la[i]),
                        ]
                    )
                    for i in range(4)
                ]
            )
        )

    cells = [polygon(la, lo) for la, lo in zip(lat, lon)]
    unit = ccrs.Globe(semimajor_axis=1.0, semiminor_axis=1.0, ellipse=None)
    source, target = ccrs.PlateCarree(globe=unit), ccrs.Mollweide(globe=unit)
    areas = np.array([target.project_geometry(c, source).area for c in cells])
    np.testing.assert_allclose(areas, weight, rtol=1e-2)
    assert abs(areas.sum() / (4 * np.pi) - 1.0) < 1e-3
    fig = plt.figure(figsize=(4, 2.4))
    ax = fig.add_subplot(projection=ccrs.Mollweide())
    ax.add_geometries(
        cells,
        crs=ccrs.PlateCarree(),
        facecolor=plt.cm.viridis(rho / rho.max()),
        edgecolor="k",
        linewidth=0.3,
    )
    ax.set_global()
    fig.savefig(tmp_path / "mesh.png", dpi=80)
    plt.close(fig)
    assert (tmp_path / "mesh.png").stat().st_size > 5_000
