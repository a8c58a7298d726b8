"""analyze-beta on a synthetic combined dataset with known minima, rates and departures."""
from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from spheredens.analysis import analyze_beta, curve_summary
from spheredens.cli import main

T = np.round(np.arange(0, 40.0001, 0.05), 10)


def curve(w0, rate, t1, slope=0.1):
    """Exponential approach to its minimum at t1, then a linear departure."""
    low = w0 * np.exp(-rate * t1)
    return np.where(T <= t1, w0 * np.exp(-rate * T), low + slope * (T - t1))


def test_curve_summary_recovers_definitions():
    s = curve_summary(T, curve(0.9, 0.5, 10.0))
    low = 0.9 * np.exp(-5.0)
    assert s["min_w2"] == pytest.approx(low, rel=1e-12) and s["t_min"] == pytest.approx(10.0)
    assert s["early_rate"] == pytest.approx(0.5, rel=1e-9)
    expected = 10.0 + (low + 0.02) / 0.1  # first t with W2 > 2 min + 0.02
    assert expected < s["departure_time"] <= expected + 0.05 + 1e-12


def test_analyze_beta_table_slope_and_resolution_change(tmp_path, capsys):
    betas, ns = [10.0, 30.0, 100.0], [256, 512]
    rates = {10.0: 0.4, 30.0: 0.35, 100.0: 0.3}
    t1 = {10.0: 6.0, 30.0: 9.0, 100.0: 14.0}
    w2 = np.empty((3, 2, T.size))
    for i, b in enumerate(betas):
        for j, n in enumerate(ns):
            w2[i, j] = curve(0.9 * (1 + 0.01 * j), rates[b], t1[b])
    combined = xr.Dataset({"w2_projection": (("beta", "n", "time"), w2),
                           "Q": (("row", "col"), np.eye(2)),
                           "K": (("row", "col"), np.array([[1.75, 0.866025], [0.433013, 2.5]])),
                           "V": (("row", "col"), np.diag([1.0, 0.5]))},
                          coords={"beta": betas, "n": ns, "time": T})
    result = analyze_beta(combined)
    assert result.attrs["spectral_gap"] == pytest.approx(1.0, rel=1e-5)
    np.testing.assert_allclose(result["early_rate"].sel(n=512).values, [0.4, 0.35, 0.3], rtol=1e-9)
    mins = result["min_w2"].sel(n=512).values
    slope = np.polyfit(np.log(betas), np.log(mins), 1)[0]
    assert float(result["min_w2_slope"].sel(n=512)) == pytest.approx(slope)
    change = result["min_w2_resolution_change"].sel(n=256).values
    np.testing.assert_allclose(change, 0.01 / 1.01, rtol=1e-9)  # min scales with w0
    path = tmp_path / "combined.nc"
    combined.to_netcdf(path)
    assert main(["analyze-beta", str(path)]) == 0
    out = capsys.readouterr().out
    assert "slope of log min W2 against log beta" in out and (tmp_path / "combined_beta_analysis.png").exists()


def test_analyze_beta_refuses_other_files(tmp_path, capsys):
    xr.Dataset({"rho": ("x", np.ones(3))}).to_netcdf(tmp_path / "x.nc")
    assert main(["analyze-beta", str(tmp_path / "x.nc")]) == 2
    assert "needs a combined sweep dataset" in capsys.readouterr().err
