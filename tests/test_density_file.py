"""A run that continues another run's snapshot on a mesh of cells (``initial.name = "file"`` on
``fv``'s reduced mesh): the cells' averages are taken as the piecewise-constant density they are,
and ``log_lagrangian`` takes each cell as one particle with its mass exactly."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

import spheredens as sd
from spheredens.exceptions import ConfigError
from spheredens.grids import RingMesh
from spheredens.grids._cubed_sphere import cube_index
from spheredens.initial import FromFile
from spheredens.schemes._particle_remesh import LOOK_LENGTH, LOOK_RADIUS

MODEL = {"name": "sa", "beta": 2.0, "V": [[1, 0, 0], [0, 1, 0], [0, 0, 0.5]]}
NLAT = 16


def _config(tmp_path, initial, discretization, output, t_end=0.5, model=MODEL):
    return sd.config_from_dict(
        {
            "model": model,
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


def _tilted(centres, angle):
    """Each centre moved by ``angle`` towards (0, 0, 1) or its antipode, a unit vector."""
    t = np.cross(np.cross(centres, [0.0, 0.0, 1.0]), centres)
    t /= np.maximum(np.linalg.norm(t, axis=1, keepdims=True), 1e-300)
    return np.cos(angle) * centres + np.sin(angle) * t


def test_a_mesh_files_centroids_place_its_particles(fv_file, tmp_path):
    """A mesh file with ``rho_centroid_xyz`` (time, cell, xyz) hands each cell's mass over at
    the centroid of the snapshot read, its shape tangent there with the cell's area."""
    with xr.open_dataset(fv_file) as ds:
        ds = ds.load()
    centres = np.stack(
        [np.cos(np.radians(ds["lat"])) * np.cos(np.radians(ds["lon"])),
         np.cos(np.radians(ds["lat"])) * np.sin(np.radians(ds["lon"])),
         np.sin(np.radians(ds["lat"]))], axis=-1,
    )
    at = {0.0: _tilted(centres, 0.01), 0.5: 3.0 * _tilted(centres, -0.02)}  # not yet unit
    ds["rho_centroid_xyz"] = (("time", "cell", "xyz"), np.stack([at[0.0], at[0.5]]))
    ds.to_netcdf(tmp_path / "with_centroids.nc")
    area = ds["cell_area"].values
    for time, expected in at.items():
        f = FromFile.from_params(
            {"path": "with_centroids.nc", "time": time}, 3, tmp_path
        )
        masses, x, shapes = f.cells()
        np.testing.assert_array_equal(masses, ds["rho"].sel(time=time).values * area)
        expected = expected / np.linalg.norm(expected, axis=1, keepdims=True)
        np.testing.assert_allclose(x, expected, rtol=0.0, atol=1e-15)
        assert np.abs(np.linalg.norm(x - centres, axis=1)).min() >= 0.009  # not the centres
        spanned = np.linalg.norm(np.cross(shapes[:, :, 0], shapes[:, :, 1]), axis=1)
        np.testing.assert_allclose(spanned, area, rtol=1e-13)
        assert np.abs(np.einsum("ni,nia->na", x, shapes)).max() <= 1e-15  # tangent at x
    # the file's values and the piecewise-constant density are unchanged by the centroids
    plain = FromFile.from_params({"path": str(fv_file), "time": 0.5}, 3, fv_file.parent)
    np.testing.assert_array_equal(f(centres), plain(centres))


def test_a_mesh_files_bad_centroids_are_refused(fv_file, tmp_path):
    with xr.open_dataset(fv_file) as ds:
        ds = ds.load()
    zeros = np.zeros((ds.sizes["time"], ds.sizes["cell"], 3))
    ds["rho_centroid_xyz"] = (("time", "cell", "xyz"), zeros)
    ds.to_netcdf(tmp_path / "bad_centroids.nc")
    with pytest.raises(ConfigError, match="rho_centroid_xyz.*non-zero finite vector"):
        FromFile.from_params({"path": "bad_centroids.nc"}, 3, tmp_path)


def test_the_first_moments_of_a_finer_meshs_cells_are_exact():
    """``RingMesh.first_moments_from``: the first moment int x rho dA over each cell of 8
    rings of a random piecewise-constant density on 32 rings, against a Gauss-Legendre
    quadrature (6 x 6 nodes) of every piece where a fine cell meets a coarse one (each a
    latitude-longitude box, found here from the fine ring edges and both meshes' longitude
    edges, cut to at most 2 pi / 64), to 1e-14; its norm is at most the cell's mass (remap_from);
    for a constant density each centroid lies at its box's middle longitude (caps: on the
    axis)."""
    fine, coarse = RingMesh(32), RingMesh(8)
    rho = np.random.default_rng(2).random(fine.n_cells)
    moment = coarse.first_moments_from(fine, rho)
    nodes, weights = np.polynomial.legendre.leggauss(6)
    expected = np.zeros_like(moment)
    for jf in range(fine.nlat):
        a, b = fine.lat_edges[jf], fine.lat_edges[jf + 1]
        lat = 0.5 * (a + b) + 0.5 * (b - a) * nodes
        edges = np.unique(np.concatenate([
            2 * np.pi * np.arange(fine.ring_count[jf]) / fine.ring_count[jf],
            2 * np.pi * np.arange(coarse.ring_count[jf // 4]) / coarse.ring_count[jf // 4],
            2 * np.pi * np.arange(65) / 64,  # no piece wider than 2 pi / 64 (the caps)
        ]))
        for w0, w1 in zip(edges[:-1], edges[1:]):
            lon = 0.5 * (w0 + w1) + 0.5 * (w1 - w0) * nodes
            la, lo = np.meshgrid(lat, lon, indexing="ij")
            x = np.stack([np.cos(la) * np.cos(lo), np.cos(la) * np.sin(lo), np.sin(la)], -1)
            w = np.outer(weights, weights) * np.cos(la) * 0.25 * (b - a) * (w1 - w0)
            mid = (0.5 * (a + b), 0.5 * (w0 + w1))
            f, c = fine.locate(*mid), coarse.locate(*mid)
            expected[c] += rho[f] * np.einsum("ij,ijk->k", w, x)
    np.testing.assert_allclose(moment, expected, rtol=0.0, atol=1e-14 * np.abs(expected).max())
    mass = coarse.remap_from(fine, rho) * coarse.area
    assert np.all(np.linalg.norm(moment, axis=1) <= mass * (1.0 + 1e-14))
    uniform = coarse.first_moments_from(fine, np.ones(fine.n_cells))
    lon = np.arctan2(uniform[:, 1], uniform[:, 0])
    ring = coarse.ring_count[np.searchsorted(coarse.ring_start, np.arange(coarse.n_cells),
                                             side="right") - 1]
    offset = np.angle(np.exp(1j * (lon - coarse.lon_c)))  # the box's middle longitude
    assert np.abs(offset[ring > 1]).max() < 1e-13
    assert np.abs(uniform[ring == 1][:, :2]).max() < 1e-15  # the caps: on the axis


def _cluster_file(folder, nlat=48, kappa=3000.0):
    """A mesh file of ``nlat`` rings: a von Mises-Fisher cluster (kappa) on 1e-3 of uniform."""
    mesh = RingMesh(nlat)
    u = np.array([np.cos(0.3) * np.cos(1.0), np.cos(0.3) * np.sin(1.0), np.sin(0.3)])
    rho = mesh.cell_averages(lambda p: kappa / (2 * np.pi) * np.exp(kappa * (p @ u - 1)) + 1e-3)
    variables = {k: xr.Variable(*v) for k, v in mesh.dataset_variables().items()}
    coords = {k: xr.Variable(*v) for k, v in mesh.dataset_coords().items()}
    variables["rho"] = xr.Variable("cell", rho / np.sum(rho * mesh.area))
    variables["weight"] = xr.Variable("cell", mesh.area)
    xr.Dataset(variables, coords=coords).to_netcdf(folder / "cluster.nc")
    return u


def test_coarsened_file_cells_merge_by_the_cubed_cells_outside_the_look_caps(tmp_path):
    u = _cluster_file(tmp_path)
    model = {**MODEL, "beta": 50.0}
    disc = {"scheme": "log_lagrangian", "n": 8, "tolerance": 1e-4, "file_cells": "coarsened"}
    cfg = _config(tmp_path, {"name": "file", "path": "cluster.nc"}, disc, "p.nc", 0.05, model)
    scheme = sd.make_scheme(sd.Problem.from_config(cfg), cfg.discretization)
    scheme.initial_state()
    f = scheme.problem.slice_initials()[0]
    log_m, x, _, log_point = scheme._slice_particles(f)
    m0, x0, _ = f.cells()
    m0 = m0 / m0.sum()
    assert abs(np.exp(log_m).sum() - 1.0) <= 1e-13
    # the cells kept as they are, and those merged: by an independent binning of the rest
    kept = np.isin(x0.view("f8,f8,f8"), x.view("f8,f8,f8")).ravel()
    merged = ~np.isin(x.view("f8,f8,f8"), x0.view("f8,f8,f8")).ravel()
    assert kept.sum() + merged.sum() == len(log_m) and merged.sum() <= 6 * 8**2
    key = cube_index(x0[~kept], 8)
    cells, slot = np.unique(key, return_inverse=True)
    mass = np.zeros(len(cells))
    np.add.at(mass, slot, m0[~kept])
    mean = np.zeros((len(cells), 3))
    np.add.at(mean, slot, m0[~kept, None] * x0[~kept])
    mean /= np.linalg.norm(mean, axis=1, keepdims=True)
    order = np.argsort(cube_index(x[merged], 8))
    assert np.array_equal(np.sort(cube_index(x[merged], 8)), cells)
    np.testing.assert_allclose(np.exp(log_m[merged][order]), mass, rtol=1e-12)
    np.testing.assert_allclose(x[merged][order], mean, atol=1e-12)
    # the cap about the cluster's look direction keeps its cells (to LOOK_RADIUS widths)
    q = scheme.problem.model.kernel.query(u[None])[0]
    look, width = q / np.linalg.norm(q), np.linalg.norm(q) ** -0.5
    inside = np.arccos(np.clip(x0 @ look, -1, 1)) <= LOOK_RADIUS * width
    assert inside.sum() > 20 and kept[inside].all()
    assert len(log_m) < len(m0) / 2  # the 48 rings' 2 920 cells: most merged
    assert LOOK_LENGTH * width < scheme.s_max  # the cap's cells are finer than the n x n cells
    ds = sd.run(cfg, progress=False)
    assert ds.attrs["file_cells"] == "coarsened"
    assert np.abs(ds["mass"].values - 1.0).max() <= 1e-13


def test_an_unknown_file_cells_is_refused(fv_file):
    disc = {"scheme": "log_lagrangian", "n": 8, "file_cells": "merged"}
    with pytest.raises(ConfigError, match="'kept', 'coarsened'"):
        _config(fv_file.parent, {"name": "file", "path": "fv.nc"}, disc, "bad.nc")


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
