"""Named initial densities: normalization, parameters, files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import make_config

import spheredens as sd
from spheredens.geometry import circle_points
from spheredens.initial import INITIAL_DENSITIES, RandomSmooth, VonMisesFisher

# 2048-point trapezoid rule: exact to round-off for these entire periodic functions
THETA = 2 * np.pi * np.arange(2048) / 2048
X = circle_points(THETA)


def integral(values):
    return float(np.sum(values) * 2 * np.pi / values.size)


@pytest.mark.parametrize(
    "params",
    [
        {"means": [[1.0, 0.0]], "kappas": [0.0]},
        {"means": [[0.6, 0.8], [-1.0, 0.0]], "kappas": [3.0, 50.0], "weights": [2.0, 1.0]},
        {"means": [[0.0, 1.0]], "kappas": [300.0]},
    ],
)
def test_von_mises_fisher_is_normalized(params):
    rho = VonMisesFisher.from_params(params, 2, Path("."))(X)
    assert abs(integral(rho) - 1.0) <= 1e-13
    assert np.all(rho >= 0) and np.all(np.isfinite(rho))


def test_von_mises_fisher_huge_kappa_is_finite():
    rho = VonMisesFisher.from_params({"means": [[1.0, 0.0]], "kappas": [1e4]}, 2, Path("."))(X)
    assert np.all(np.isfinite(rho))
    # peak value kappa-asymptotics: sqrt(kappa / (2 pi)) / (2 pi) * 2 pi ... = sqrt(kappa/(2 pi)) /
    # 1
    assert rho[0] == pytest.approx(np.sqrt(1e4 / (2 * np.pi)), rel=1e-4)


@pytest.mark.parametrize("seed", [0, 1, 7])
def test_random_smooth_normalized_seeded_positive(seed):
    f = RandomSmooth.from_params({"seed": seed, "bandwidth": 5, "amplitude": 2.0}, 2, Path("."))
    rho = f(X)
    assert abs(integral(rho) - 1.0) <= 1e-13
    assert rho.min() > 0
    np.testing.assert_array_equal(rho, RandomSmooth(2, seed, 5, 2.0)(X))
    other = RandomSmooth(2, seed + 100, 5, 2.0)(X)
    assert np.abs(other - rho).max() > 1e-3


def test_uniform():
    rho = INITIAL_DENSITIES.get("uniform").from_params({}, 2, Path("."))(X)
    assert abs(integral(rho) - 1.0) <= 1e-14


def test_discrete_initial_mass_is_one_for_both_schemes():
    for scheme in ("fv", "fourier"):
        cfg = make_config(
            initial={"name": "von_mises_fisher", "means": [[0.0, 1.0]], "kappas": [40.0]},
            discretization={"scheme": scheme, "n": 64},
            time={"t_end": 0.1, "snapshots": 2},
        )
        ds = sd.run(cfg, progress=False)
        assert abs(float((ds.rho[0] * ds.weight).sum()) - 1.0) <= 1e-14


def test_file_initial_density_interpolates_and_checks_mass(tmp_path):
    src = make_config(
        initial={"name": "von_mises_fisher", "means": [[0.0, 1.0]], "kappas": [3.0]},
        discretization={"scheme": "fourier", "n": 512},
        time={"t_end": 0.5, "snapshots": 2},
        output={"path": "src.nc"},
        base_dir=tmp_path,
    )
    first = sd.run(src, progress=False)
    cfg = make_config(
        initial={"name": "file", "path": "src.nc", "time": 0.5},
        discretization={"scheme": "fv", "n": 128},
        time={"t_end": 0.1, "times": [0.0, 0.1]},
        base_dir=tmp_path,
    )
    ds = sd.run(cfg, progress=False)
    rho0 = ds.rho[0].values
    assert abs(float(np.sum(rho0 * ds.weight.values)) - 1.0) <= 1e-14
    # linear interpolation from 512 nodes to 128 cell averages: O(h^2) ~ 1e-4 relative
    ref = np.interp(ds.theta.values, first.theta.values, first.rho[-1].values, period=2 * np.pi)
    assert np.abs(rho0 - ref).max() <= 1e-3 * ref.max()
    # same grid: values are taken exactly (up to the discrete renormalization)
    same = make_config(
        initial={"name": "file", "path": "src.nc"},
        discretization={"scheme": "fourier", "n": 512},
        time={"t_end": 0.1, "snapshots": 2},
        base_dir=tmp_path,
    )
    np.testing.assert_allclose(
        sd.run(same, progress=False).rho[0].values, first.rho[-1].values, rtol=1e-14, atol=0
    )


def test_file_with_wrong_mass_is_refused(tmp_path):
    import xarray as xr

    theta = 2 * np.pi * np.arange(16) / 16
    xr.Dataset(
        {"rho": ("theta", np.full(16, 0.5)), "weight": ("theta", np.full(16, 2 * np.pi / 16))},
        coords={"theta": theta},
    ).to_netcdf(tmp_path / "half.nc")
    with pytest.raises(sd.ConfigError, match=r"initial.path: .*mass 3.14"):
        make_config(initial={"name": "file", "path": "half.nc"}, base_dir=tmp_path)
    with pytest.raises(sd.ConfigError, match="initial.variable"):
        make_config(
            initial={"name": "file", "path": "half.nc", "variable": "density"}, base_dir=tmp_path
        )
