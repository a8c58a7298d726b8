"""The accessor ``ds.sd``: marginal, grid, domain, the density as a function of points and the
recorded model, on every kind of file; registered as soon as xarray and spheredens are both
imported."""

from __future__ import annotations

import subprocess
import sys
import tomllib

import numpy as np
import pytest

import spheredens as sd
from spheredens.geometry import get_domain
from spheredens.io import write_dataset
from spheredens.particles import run_particles
from spheredens.schema import SCHEMA, validate_schema

ROPE = {
    "kernel": "rope",
    "slices": 4,
    "omega": 6.283185307179586,
    "slice_perturbation": 0.5,
    "slice_seed": 0,
}
VMF_2D = {
    "name": "von_mises_fisher",
    "means": [[0.0, 1.0], [1.0, 0.0]],
    "kappas": [2.0, 4.0],
    "weights": [0.7, 0.3],
}
SMOOTH_3D = {"name": "random_smooth", "seed": 7, "bandwidth": 3, "amplitude": 0.8}
V_3D = [[1.0, 0.2, 0.0], [0.1, 0.7, -0.3], [0.0, 0.4, 0.5]]


def run(domain, disc, *, model=None, initial=None, auxiliary=None, t_end=0.2):
    data = {
        "model": model
        or {"name": "sa", "beta": 2.0, **({"V": V_3D} if domain == "sphere" else {})},
        "domain": {"name": domain},
        "initial": initial or (VMF_2D if domain == "circle" else SMOOTH_3D),
        "discretization": disc,
        "time": {"t_end": t_end, "snapshots": 3},
    }
    if auxiliary is not None:
        data["auxiliary"] = auxiliary
    return sd.run(sd.config_from_dict(data), progress=False)


@pytest.fixture(scope="module")
def files():
    return {
        "circle_fv": run("circle", {"scheme": "fv", "n": 64}),
        "circle_fourier": run("circle", {"scheme": "fourier", "n": 64}),
        "circle_usa_av": run(
            "circle",
            {"scheme": "fv", "n": 64},
            model={"name": "usa_av", "beta": 1.0},
            initial={"name": "uniform"},
            auxiliary=ROPE,
        ),
        "sphere_sh_spectral": run("sphere", {"scheme": "sh_spectral", "lmax": 15}),
        "sphere_fv": run("sphere", {"scheme": "fv", "nlat": 16}),
        "sphere_fv_usa_av": run(
            "sphere",
            {"scheme": "fv", "nlat": 12},
            model={"name": "usa_av", "beta": 1.0},
            initial={"name": "uniform"},
            auxiliary=ROPE,
        ),
    }


NAMES = [
    "circle_fv",
    "circle_fourier",
    "circle_usa_av",
    "sphere_sh_spectral",
    "sphere_fv",
    "sphere_fv_usa_av",
]


@pytest.mark.parametrize("name", NAMES)
def test_files_follow_the_schema_and_know_their_domain(files, name):
    ds = files[name]
    validate_schema(ds)
    assert ds.attrs["spheredens_schema"] == SCHEMA
    assert ds.sd.domain is get_domain(ds.attrs["domain"])


@pytest.mark.parametrize("name", NAMES)
def test_grid_weights_sum_to_the_area_and_points_are_unit_vectors(files, name):
    ds = files[name]
    grid = ds.sd.grid()
    assert abs(float(grid.weight.sum()) - grid.domain.area) <= 1e-12 * grid.domain.area
    assert grid.points.shape[:-1] == ds["weight"].shape and grid.points.shape[-1] == grid.domain.d
    assert np.abs(np.linalg.norm(grid.flat_points, axis=-1) - 1.0).max() <= 1e-14
    assert grid.flat_points.shape[0] == grid.flat_weight.shape[0] == ds["weight"].size
    assert grid.space_dims == ds["weight"].dims


@pytest.mark.parametrize("name", NAMES)
def test_marginal_has_unit_mass_at_every_snapshot(files, name):
    ds = files[name]
    weight = ds.sd.grid().weight
    every = ds.sd.marginal()
    assert every.shape == (ds.sizes["time"],) + weight.shape
    for i in range(ds.sizes["time"]):
        assert abs(float(np.sum(ds.sd.marginal(i) * weight)) - 1.0) <= 1e-12
        np.testing.assert_array_equal(every[i], ds.sd.marginal(i))


@pytest.mark.parametrize("name", ["circle_usa_av", "sphere_fv_usa_av"])
def test_marginal_of_slices_is_the_sum_with_the_slice_masses(files, name):
    ds = files[name]
    expected = np.einsum("k,tk...->t...", ds["xi_weight"].values, ds["rho"].values)
    np.testing.assert_allclose(ds.sd.marginal(), expected, rtol=0, atol=1e-14)
    formed = ds.drop_vars("rho_marginal")  # files without the stored marginal: formed from rho
    np.testing.assert_allclose(formed.sd.marginal(), expected, rtol=0, atol=1e-14)
    np.testing.assert_allclose(formed.sd.marginal(1), expected[1], rtol=0, atol=1e-14)


@pytest.mark.parametrize(
    "name", ["circle_fv", "circle_fourier", "sphere_sh_spectral", "sphere_fv", "sphere_fv_usa_av"]
)
def test_density_function_reproduces_rho_at_the_grid_points(files, name):
    ds = files[name]
    grid = ds.sd.grid()
    for t in (0, -1):
        f = ds.sd.density_function(t)
        values = f(grid.flat_points).reshape(grid.weight.shape)
        np.testing.assert_allclose(values, ds.sd.marginal(t), rtol=0, atol=1e-12)


def test_density_function_is_piecewise_constant_on_finite_volume_cells(files):
    circle = files["circle_fv"]
    grid = circle.sd.grid()
    h = 2.0 * np.pi / grid.theta.size
    inside = np.stack([np.cos(grid.theta + 0.49 * h), np.sin(grid.theta + 0.49 * h)], axis=-1)
    np.testing.assert_array_equal(circle.sd.density_function(-1)(inside), circle.sd.marginal(-1))
    sphere = files["sphere_fv"]
    mesh = sphere.sd.grid().mesh
    lat = 0.5 * (mesh.lat_bounds[:, 0] + mesh.lat_bounds[:, 1])
    lon = mesh.lon_bounds[:, 0] + 0.3 * (mesh.lon_bounds[:, 1] - mesh.lon_bounds[:, 0])
    x = np.stack([np.cos(lat) * np.cos(lon), np.cos(lat) * np.sin(lon), np.sin(lat)], axis=-1)
    np.testing.assert_array_equal(sphere.sd.density_function(-1)(x), sphere.sd.marginal(-1))


def test_regular_view_of_the_finite_volume_mesh_keeps_the_cell_values(files):
    ds = files["sphere_fv"]
    lat, lon, view = ds.sd.grid().regular_view(ds.sd.marginal())
    assert view.shape == (ds.sizes["time"], 90, 180) and lat.shape == (90,) and lon.shape == (180,)
    assert set(np.unique(view[-1])) <= set(ds.sd.marginal(-1))


def test_model_is_the_one_the_file_was_run_with(files):
    """ds.sd.model() rebuilds the Model of the configuration from what the file records."""
    for name in ("circle_fv", "sphere_fv", "circle_usa_av"):
        ds = files[name]
        model = ds.sd.model()
        expected = sd.Problem.from_config(sd.config_from_dict(tomllib.loads(ds.attrs["config"])))
        assert model.name == expected.model.name and model.beta == expected.model.beta
        for m in ("Q", "K", "V"):
            np.testing.assert_array_equal(getattr(model, m), getattr(expected.model, m))
        assert ds.sd.model_record()["model"] == model.name
    aux = files["circle_usa_av"].sd.model().auxiliary
    np.testing.assert_array_equal(aux.xi, files["circle_usa_av"]["xi"].values)


def test_a_file_without_a_model_says_so_in_one_line(files):
    bare = files["circle_fv"].drop_vars(["Q", "K", "V"])
    bare.attrs = {k: v for k, v in bare.attrs.items() if k != "config"}
    with pytest.raises(sd.SchemaError, match="records no model"):
        bare.sd.model()


def test_the_accessor_works_right_after_import_spheredens(tmp_path):
    """xarray.open_dataset(path).sd.model() in a fresh process that imported only spheredens
    and xarray (in either order): on a run file, a particle file and a comparison file."""
    data = {
        "model": {"name": "sa", "beta": 2.0},
        "initial": VMF_2D,
        "discretization": {"scheme": "fv", "n": 32},
        "time": {"t_end": 0.2, "snapshots": 3},
        "particles": {"n": 20, "dt": 0.1},
    }
    cfg = sd.config_from_dict(data)
    density = sd.run(cfg, output=tmp_path / "run.nc", progress=False)
    particles = run_particles(cfg, output=tmp_path / "particles.nc", progress=False)
    write_dataset(sd.compare(density, particles, progress=False), tmp_path / "compare.nc")
    for first in ("import spheredens, xarray as xr", "import xarray as xr, spheredens"):
        code = (
            f"{first}; "
            "print(*(xr.open_dataset(p).sd.model().name for p in ('run.nc', 'particles.nc', "
            "'compare.nc')))"
        )
        proc = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=120
        )
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.split() == ["sa", "sa", "sa"]
