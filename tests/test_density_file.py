"""A run that continues another run's snapshot on a mesh of cells (``initial.name = "file"`` on
``fv``'s reduced mesh): the cells' averages are taken as the piecewise-constant density they are,
and ``log_lagrangian`` takes each cell as one particle with its mass exactly."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

import spheredens as sd
from spheredens.exceptions import ConfigError
from spheredens.initial import FromFile

MODEL = {"name": "sa", "beta": 2.0, "V": [[1, 0, 0], [0, 1, 0], [0, 0, 0.5]]}
NLAT = 16


def _config(tmp_path, initial, discretization, output, t_end=0.5):
    return sd.config_from_dict(
        {
            "model": MODEL,
            "domain": {"name": "sphere"},
            "initial": initial,
            "discretization": {**discretization, "allow_underresolved": True},
            "time": {"t_end": t_end, "times": [0.0, t_end]},
            "output": {"path": output, "figure": False},
        },
        base_dir=tmp_path,
    )


@pytest.fixture(scope="module")
def fv_file(tmp_path_factory):
    """An ``fv`` run on the reduced mesh of 16 rings to t = 0.5 (snapshots at 0 and 0.5)."""
    folder = tmp_path_factory.mktemp("fv")
    initial = {"name": "random_smooth", "seed": 4, "bandwidth": 3, "amplitude": 0.8}
    sd.run(_config(folder, initial, {"scheme": "fv", "nlat": NLAT}, "fv.nc"), progress=False)
    return folder / "fv.nc"


def _ring_masses(ds: xr.Dataset, i: int) -> np.ndarray:
    """Mass per latitude band of NLAT equal bands, from the cells' (or bins') masses at their
    latitudes."""
    rho = ds["rho"].isel(time=i)
    area = ds["cell_area"] if "cell_area" in ds else ds["weight"]
    lat = ds["lat"].broadcast_like(rho).values.ravel()
    band = np.clip(((lat + 90.0) / (180.0 / NLAT)).astype(int), 0, NLAT - 1)
    return np.bincount(band, weights=(rho * area).values.ravel(), minlength=NLAT)


def test_a_mesh_file_is_its_cells_piecewise_constant_density(fv_file):
    f = FromFile.from_params({"path": str(fv_file), "time": 0.5}, 3, fv_file.parent)
    with xr.open_dataset(fv_file) as ds:
        rho = ds["rho"].isel(time=-1).values
        lat0 = np.radians(ds["lat_bounds"].values.min(axis=1))
        lat1 = np.radians(ds["lat_bounds"].values.max(axis=1))
        lon0 = np.radians(ds["lon_bounds"].values.min(axis=1))
        lon1 = np.radians(ds["lon_bounds"].values.max(axis=1))
    rng = np.random.default_rng(1)
    for _ in range(3):  # a point anywhere inside each cell reads that cell's average
        s = rng.uniform(np.sin(lat0), np.sin(lat1))
        lon = rng.uniform(lon0, lon1)
        x = np.stack([np.sqrt(1 - s**2) * np.cos(lon), np.sqrt(1 - s**2) * np.sin(lon), s], -1)
        np.testing.assert_array_equal(f(x), rho)
    masses, centres, shapes = f.cells()
    with xr.open_dataset(fv_file) as ds:
        area = ds["cell_area"].values
    np.testing.assert_array_equal(masses, rho * area)
    spanned = np.linalg.norm(np.cross(shapes[:, :, 0], shapes[:, :, 1]), axis=1)
    np.testing.assert_allclose(spanned, area, rtol=1e-13)
    assert np.abs(np.einsum("ni,nia->na", centres, shapes)).max() <= 1e-15  # tangent
    # an fv run on the same mesh starts from the snapshot's cell averages to round-off
    cfg = _config(
        fv_file.parent,
        {"name": "file", "path": "fv.nc", "time": 0.5},
        {"scheme": "fv", "nlat": NLAT},
        "fv_again.nc",
        t_end=0.1,
    )
    again = sd.run(cfg, progress=False)
    np.testing.assert_allclose(again["rho"].values[0], rho, rtol=1e-12, atol=0.0)


def test_log_lagrangian_takes_each_cell_as_a_particle_with_its_mass(fv_file):
    cfg = _config(
        fv_file.parent,
        {"name": "file", "path": "fv.nc", "time": 0.5},
        {"scheme": "log_lagrangian", "n": NLAT // 2, "tolerance": 1e-4},
        "particles.nc",
    )
    scheme = sd.make_scheme(sd.Problem.from_config(cfg), cfg.discretization)
    log_m, x, shape, log_point = scheme._slice_particles(scheme.problem.slice_initials()[0])
    with xr.open_dataset(fv_file) as fv:
        m = fv["rho"].isel(time=-1).values * fv["cell_area"].values
        ring_fv = _ring_masses(fv, -1)
    m = m / m.sum()
    np.testing.assert_allclose(np.exp(log_m), m, rtol=1e-13, atol=0.0)
    np.testing.assert_array_equal(log_point, log_m)  # mean density x area at the centre: m
    # the record's bins on 2 n = 16 rings nest with fv's rings: each ring keeps its mass
    ds = sd.run(cfg, progress=False)
    np.testing.assert_allclose(_ring_masses(ds, 0), ring_fv / ring_fv.sum(), rtol=1e-12)
    assert np.abs(ds["mass"].values - 1.0).max() <= 1e-13


@pytest.mark.parametrize(
    "damage, words",
    [
        (lambda ds: ds.drop_vars("lon_bounds"), "no 'lon_bounds'"),
        (lambda ds: ds.assign(lat_bounds=ds["lat_bounds"] * 0.99), "tile the sphere"),
        (lambda ds: ds.assign(weight=ds["weight"] * 1.001), "tile the sphere"),
    ],
)
def test_a_mesh_file_whose_cells_do_not_tile_the_sphere_is_refused(
    fv_file, tmp_path, damage, words
):
    with xr.open_dataset(fv_file) as ds:
        bad = damage(ds.load())
    bad = bad.assign(rho=bad["rho"] / (bad["rho"] * bad.get("weight", 1.0)).sum("cell"))
    bad.to_netcdf(tmp_path / "bad.nc")
    with pytest.raises(ConfigError, match=words):
        FromFile.from_params({"path": "bad.nc"}, 3, tmp_path)
