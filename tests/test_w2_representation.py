"""One representation of a grid density for every W2.

``w2_projection`` and ``w2_terminal`` of a run and ``spheredens compare`` represent rho_t the
same way (:func:`spheredens.diagnostics.grid_atoms`): on the circle the piecewise-constant
density on the cells, for cell averages (fv) and nodal values (fourier) alike. These tests
check the numbers: a run's ``w2_projection`` equals what ``compare`` computes from the file
against the target as a particle run, and for a uniform density the value is the exact one of
the piecewise-constant density, h^2 / 12 in W2^2 above the cell-centre atoms.
"""

from __future__ import annotations

import numpy as np
import ot
import pytest
import xarray as xr

import spheredens as sd
from spheredens.compare import compare
from spheredens.io import open_run
from spheredens.targets import projection_target
from spheredens.transport import w2_circle

N = 64


def config(scheme, initial):
    return sd.config_from_dict(
        {
            "model": {
                "name": "sa",
                "beta": 4.0,
                "Q": [[1.0, 0.0], [0.0, 1.0]],
                "K": [[1.0, 0.0], [0.0, 1.0]],
                "V": [[1.0, 0.0], [0.0, 0.5]],
            },
            "domain": {"name": "circle"},
            "initial": initial,
            "discretization": {"scheme": scheme, "n": N},
            "time": {"t_end": 0.6, "snapshots": 4},
        }
    )


VMF = {"name": "von_mises_fisher", "means": [[0.6, 0.8]], "kappas": [2.0]}


def target_as_particles(cfg, times):
    """Pi_# rho_0 as a weighted particle run at the density's snapshot times."""
    target = projection_target(cfg)
    pos = np.broadcast_to(target.points, (len(times),) + target.points.shape)
    return xr.Dataset(
        {
            "position": (("time", "particle", "component"), np.array(pos)),
            "particle_weight": ("particle", target.masses),
        },
        coords={"time": np.asarray(times)},
        attrs={"domain": "circle"},
    )


@pytest.mark.parametrize("scheme", ["fv", "fourier"])
def test_w2_projection_of_a_run_file_is_what_compare_computes(scheme, tmp_path):
    cfg = config(scheme, VMF)
    sd.run(cfg, output=tmp_path / "run.nc", progress=False)
    ds = open_run(tmp_path / "run.nc")
    recorded = ds["w2_projection"].values
    assert np.all(np.isfinite(recorded)) and recorded.min() > 0.05
    with pytest.warns(
        sd.SpheredensWarning, match="carries no model"
    ):  # built here: no model recorded
        result = compare(ds, target_as_particles(cfg, ds["time"].values))
    # the file alone (its theta and weight) gives the atoms the run used: round-off only
    np.testing.assert_allclose(result["w2"].values[0], recorded, rtol=1e-12, atol=0)
    for text in (
        ds["w2_projection"].attrs["comment"],
        ds["w2_terminal"].attrs["comment"],
        result["w2"].attrs["comment"],
    ):
        assert "piecewise-constant density on the grid cells" in text
        assert "1024 equal sub-atoms per cell" in text  # 2^16 / 64


@pytest.mark.parametrize("scheme", ["fv", "fourier"])
def test_uniform_density_is_the_piecewise_constant_one(scheme, tmp_path):
    """rho = 1 / (2 pi) against +-e1 with masses 1/2 (and the terminal set {+-e1}): the distance
    to the nearer atom is uniform on [0, pi/2], W2^2 = pi^2 / 12, whatever the grid. The
    cell-centre atoms of the fv grid (cells aligned with 0 and pi/2 as n is a multiple of 4)
    give the midpoint rule of x^2 instead: pi^2 / 12 - h^2 / 12."""
    cfg = config(scheme, {"name": "uniform"})
    sd.run(cfg, output=tmp_path / "run.nc", progress=False)
    ds = open_run(tmp_path / "run.nc")
    exact = np.pi / np.sqrt(12.0)
    rho0 = ds["rho"].values[0]
    np.testing.assert_allclose(rho0, 1.0 / (2 * np.pi), rtol=1e-12)
    assert ds["w2_projection"].values[0] == pytest.approx(exact, rel=1e-9)
    assert ds["w2_terminal"].values[0] == pytest.approx(exact, rel=1e-9)
    if scheme != "fv":
        return
    h = 2 * np.pi / N
    theta, weight = ds["theta"].values, ds["weight"].values
    centres = w2_circle(theta, rho0 * weight, np.array([0.0, np.pi]), np.array([0.5, 0.5]))
    assert centres**2 == pytest.approx(np.pi**2 / 12 - h**2 / 12, rel=1e-9)
    # the two representations differ by h^2 / 12 in W2^2
    assert ds["w2_projection"].values[0] ** 2 - centres**2 == pytest.approx(h**2 / 12, rel=1e-5)


def test_log_sl_puts_each_cells_mass_at_its_centroid(tmp_path):
    """``log_sl`` carries each cell's centroid: its file has ``rho_centroid``, every W2 puts the
    cell's mass there (compare from the file gives the same numbers), and for a uniform density
    (centroids at the centres) that is the cell-centre value pi^2/12 - h^2/12 in W2^2, computed
    independently here."""
    cfg = config("log_sl", VMF)
    sd.run(cfg, output=tmp_path / "run.nc", progress=False)
    ds = open_run(tmp_path / "run.nc")
    recorded = ds["w2_projection"].values
    with pytest.warns(
        sd.SpheredensWarning, match="carries no model"
    ):  # built here: no model recorded
        result = compare(ds, target_as_particles(cfg, ds["time"].values))
    np.testing.assert_allclose(result["w2"].values[0], recorded, rtol=1e-12, atol=0)
    theta, weight = ds["theta"].values, ds["weight"].values
    for i in (0, -1):
        c = ds["rho_centroid"].values[i]
        atoms = theta + c * weight
        m = ds["rho"].values[i] * weight
        target = projection_target(cfg)
        angles = np.arctan2(target.points[:, 1], target.points[:, 0])
        assert recorded[i] == pytest.approx(
            w2_circle(atoms % (2 * np.pi), m / m.sum(), angles % (2 * np.pi), target.masses),
            rel=1e-12,
        )
    for text in (
        ds["w2_projection"].attrs["comment"],
        ds["w2_terminal"].attrs["comment"],
        result["w2"].attrs["comment"],
    ):
        assert "mass of each cell at its centroid" in text
    sd.run(config("log_sl", {"name": "uniform"}), output=tmp_path / "uniform.nc", progress=False)
    uniform = open_run(tmp_path / "uniform.nc")
    assert np.abs(uniform["rho_centroid"].values[0]).max() < 1e-12
    h = 2 * np.pi / N
    assert uniform["w2_projection"].values[0] ** 2 == pytest.approx(
        np.pi**2 / 12 - h**2 / 12, rel=1e-9
    )


@pytest.mark.parametrize("d", [2, 3])
def test_w2_to_antipodal_atoms_is_the_exact_emd(d):
    """The sorted assignment of :func:`w2_to_antipodal_atoms` equals POT's network simplex on
    the full cost matrix (random points and masses, three mass splits), to 1e-12."""
    from spheredens.transport import w2_sphere, w2_to_antipodal_atoms

    rng = np.random.default_rng(d)
    x = rng.standard_normal((700, d))
    x /= np.linalg.norm(x, axis=1)[:, None]
    a = rng.exponential(size=700)
    u = rng.standard_normal(d)
    u /= np.linalg.norm(u)
    for m_plus in (0.5, 0.3141, 0.9):
        y, b = np.stack([u, -u]), np.array([m_plus, 1.0 - m_plus])
        cost = np.arccos(np.clip(x @ y.T, -1.0, 1.0)) ** 2  # the EMD itself, not w2_sphere
        want = np.sqrt(ot.emd2(a / a.sum(), b, cost, numItermax=50_000_000))
        assert abs(w2_to_antipodal_atoms(x, a, u, m_plus) - want) <= 1e-12
        assert abs(w2_sphere(x, a, y, b) - want) <= 1e-12  # w2_sphere takes the sort here
    # every point on u: the distance is that of the mass sent to -u
    assert (
        abs(w2_to_antipodal_atoms(np.tile(u, (5, 1)), np.ones(5), u, 0.75) - np.sqrt(0.25) * np.pi)
        <= 1e-14
    )


def test_the_particles_w2_to_two_antipodal_atoms_is_the_emd():
    """``w2_projection`` of a particle scheme (:meth:`ProjectionDistance.of_atoms`, through
    :func:`w2_sphere`) takes the sort when Pi_# rho_0 is two antipodal atoms (V = diag(1, .5,
    .5): +-e_1) and equals the network simplex to 1e-12; on a great circle (two equal top
    eigenvalues) it is the EMD."""
    from spheredens.diagnostics import ProjectionDistance
    from spheredens.initial import RandomSmooth
    from spheredens.models import Model

    rng = np.random.default_rng(5)
    x = rng.standard_normal((900, 3))
    x /= np.linalg.norm(x, axis=1)[:, None]
    a = rng.exponential(size=900)
    rho0 = RandomSmooth.from_params({"seed": 3, "bandwidth": 3}, 3, None)
    for v, atoms in (((1.0, 0.5, 0.5), 2), ((1.0, 1.0, 0.5), None)):
        model = Model("sa", 1.0, np.eye(3), np.eye(3), np.diag(v))
        w2 = ProjectionDistance(model, rho0, None, particles=True)
        target = w2.target
        if atoms is not None:
            assert len(target.points) == atoms
            assert np.allclose(target.points[0], -target.points[1], rtol=0.0, atol=1e-14)
        cost = np.arccos(np.clip(x @ target.points.T, -1.0, 1.0)) ** 2
        want = np.sqrt(ot.emd2(a / a.sum(), target.masses, cost, numItermax=50_000_000))
        assert abs(w2.of_atoms(x, a) - want) <= 1e-12


@pytest.mark.parametrize("spread", [0.3, 0.95, 1.4])
def test_w2_circle_on_a_half_circle_and_beyond_is_the_exact_emd(spread):
    """:func:`w2_circle` takes the 1-D quantile formula when one arc of at most pi holds every
    atom of positive weight (atoms of zero weight elsewhere do not count), POT's circle search
    otherwise; both equal POT's network simplex on the full geodesic cost matrix to 1e-12.
    spread = 0.3 and 0.95 pi: within a half circle; 1.4 pi: beyond one."""
    rng = np.random.default_rng(7)
    for _ in range(4):
        offset = rng.uniform(0.0, 2.0 * np.pi)
        a = offset + rng.uniform(0.0, spread * np.pi, 400)
        b = offset + rng.uniform(0.0, spread * np.pi, 150)
        wa, wb = rng.exponential(size=400), rng.exponential(size=150)
        a, wa = np.append(a, offset + np.pi * 1.5), np.append(wa, 0.0)  # weightless, far
        d = np.abs(a[:, None] - b[None, :]) % (2.0 * np.pi)
        cost = np.minimum(d, 2.0 * np.pi - d) ** 2
        want = np.sqrt(ot.emd2(wa / wa.sum(), wb / wb.sum(), cost))
        assert abs(w2_circle(a, wa, b, wb) - want) <= 1e-12
