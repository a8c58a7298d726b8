"""analyze-beta on a synthetic combined dataset with known minima, rates and departures."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from spheredens.analysis import analyze_beta, curve_summary, richardson_estimate
from spheredens.cli import main
from spheredens.plot import beta_study_figure, plot_beta_study

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


@pytest.mark.parametrize("order", [1.0, 1.3, 2.0])
def test_richardson_estimate_recovers_order_limit_and_error_band(order):
    """f_h = 0.03 + 0.5 h^p on h = 1/128, 1/256, 1/512: the observed order is p, the
    extrapolation is the limit, and the limit lies inside the fine value's GCI band; changes
    that do not shrink monotonically give NaN."""
    f = [0.03 + 0.5 * (1.0 / n) ** order for n in (128, 256, 512)]
    est = richardson_estimate(*f)
    assert est["order"] == pytest.approx(order, rel=1e-9)
    assert est["extrapolated"] == pytest.approx(0.03, rel=1e-9)
    assert abs(f[2] - 0.03) / f[2] == pytest.approx(est["gci_fine"] / 1.25, rel=1e-9)
    # three mesh values of the sphere's beta = 300 row (docs/concentration.md): order 1.31, limit
    # 0.03222, band 2.9%
    est = richardson_estimate(0.03687, 0.03410, 0.03298)
    assert (round(est["order"], 2), round(est["extrapolated"], 5), round(est["gci_fine"], 3)) == (
        1.31,
        0.03222,
        0.029,
    )
    for bad in ([0.03, 0.031, 0.029], [0.03, 0.031, 0.031], [0.03, 0.0301, 0.0305]):
        assert np.isnan(list(richardson_estimate(*bad).values())).all(), bad


def test_analyze_beta_table_slope_and_resolution_change(tmp_path, capsys):
    betas, ns = [10.0, 30.0, 100.0], [256, 512]
    rates = {10.0: 0.4, 30.0: 0.35, 100.0: 0.3}
    t1 = {10.0: 6.0, 30.0: 9.0, 100.0: 14.0}
    w2 = np.empty((3, 2, T.size))
    for i, b in enumerate(betas):
        for j, _n in enumerate(ns):
            w2[i, j] = curve(0.9 * (1 + 0.01 * j), rates[b], t1[b])
    combined = xr.Dataset(
        {
            "w2_projection": (("beta", "n", "time"), w2),
            "Q": (("row", "col"), np.eye(2)),
            "K": (("row", "col"), np.array([[1.75, 0.866025], [0.433013, 2.5]])),
            "V": (("row", "col"), np.diag([1.0, 0.5])),
        },
        coords={"beta": betas, "n": ns, "time": T},
    )
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
    assert (
        "slope of log min W2 against log beta" in out
        and (tmp_path / "combined_beta_analysis.png").exists()
    )


def test_analyze_beta_refuses_other_files(tmp_path, capsys):
    xr.Dataset({"rho": ("x", np.ones(3))}).to_netcdf(tmp_path / "x.nc")
    assert main(["analyze-beta", str(tmp_path / "x.nc")]) == 2
    assert "needs a combined sweep dataset" in capsys.readouterr().err


def combined_dataset(betas, ns, curves):
    """A combined sweep over (beta, n) from ``curves[(beta, n)]`` (the W2 curves on T)."""
    w2 = np.array([[curves[(b, n)] for n in ns] for b in betas])
    return xr.Dataset(
        {
            "w2_projection": (("beta", "n", "time"), w2),
            "Q": (("row", "col"), np.eye(2)),
            "K": (("row", "col"), np.eye(2)),
            "V": (("row", "col"), np.diag([1.0, 0.5])),
        },
        coords={"beta": betas, "n": ns, "time": T},
    )


def table_rows(lines, first_word):
    return [line for line in lines if line.split() and line.split()[0] == first_word]


def test_the_table_has_one_row_per_beta_and_resolution_with_the_refinement_changes(
    tmp_path, capsys
):
    """n swept: a row for every (beta, n) naming n, the n -> 2n change of min W2 and of the
    departure in percent on the coarser row ("finest" on the last), the slope per n."""
    betas, ns = [10.0, 30.0], [256, 512, 1024]
    curves = {
        (b, n): curve(0.9 * (1 + 0.01 * j), 0.4, 6.0 + b / 10)
        for b in betas
        for j, n in enumerate(ns)
    }
    path = tmp_path / "combined.nc"
    combined_dataset(betas, ns, curves).to_netcdf(path)
    assert main(["analyze-beta", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = next(line for line in lines if line.split()[:2] == ["beta", "n"])
    assert "min chg" in header and "dep chg" in header
    rows = table_rows(lines, "10") + table_rows(lines, "30")
    assert [(float(r.split()[0]), int(r.split()[1])) for r in rows] == [
        (b, n) for b in betas for n in ns
    ]
    min_change, departure_change = rows[0].split()[-2:]
    assert min_change == f"{100 * 0.01 / 1.01:.2g}%"  # min W2 scales with w0
    assert departure_change.endswith("%") and 0 < float(departure_change[:-1]) < 5
    assert rows[2].split()[-2:] == ["finest", "finest"]
    assert any("from each n to the next (256 -> 512 -> 1024)" in line for line in lines)
    slope = next(line for line in lines if line.startswith("slope of log min W2 against log beta"))
    assert all(f"(n = {n})" in slope for n in ns)


def test_a_minimum_at_t_end_and_a_missing_departure_are_said_in_words(tmp_path, capsys):
    """beta = 10 departs; beta = 30 reaches its minimum but stays there (no departure); beta =
    100 still falls at t_end: its minimum is only an upper bound."""
    betas, ns = [10.0, 30.0, 100.0], [256]
    curves = {
        (10.0, 256): curve(0.9, 0.4, 6.0),
        (30.0, 256): curve(0.9, 0.4, 9.0, slope=1e-4),
        (100.0, 256): 0.9 * np.exp(-0.2 * T),
    }
    combined = combined_dataset(betas, ns, curves)
    result = analyze_beta(combined)
    np.testing.assert_array_equal(result["min_at_end"].sel(n=256).values, [False, False, True])
    assert float(result["t_last"].max()) == pytest.approx(40.0)
    path = tmp_path / "combined.nc"
    combined.to_netcdf(path)
    assert main(["analyze-beta", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    r10, r30, r100 = (table_rows(lines, b)[0] for b in ("10", "30", "100"))
    assert "still falling" not in r10 and "no departure" not in r10
    assert "no departure by t_end = 40" in r30 and r30.split()[4] == "none"
    assert "still falling at t_end = 40" in r100
    assert any(line.startswith("1 row(s) still falling at t_end") for line in lines)


def _drawn(ax):
    """Whether a panel shows something: a line with a finite point, or a text."""
    finite = any(np.isfinite(np.asarray(line.get_ydata(), float)).any() for line in ax.get_lines())
    return finite or bool(ax.texts)


def test_the_figure_has_no_empty_panel(tmp_path):
    """No departure at all: the departure panel is drawn all the same, each beta an open
    triangle at T = 40; some departures missing: the same triangles, and the legend says "no
    departure by T = 40" (tests/test_figures_read.py checks the figure's reading)."""
    still = {(b, 256): 0.9 * np.exp(-0.2 * T) for b in (10.0, 30.0)}
    combined = combined_dataset([10.0, 30.0], [256], still)
    fig = beta_study_figure(combined, analyze_beta(combined))
    assert len(fig.axes) == 3 and all(_drawn(ax) for ax in fig.axes)
    some = {(10.0, 256): curve(0.9, 0.4, 6.0), (30.0, 256): 0.9 * np.exp(-0.2 * T)}
    combined = combined_dataset([10.0, 30.0], [256], some)
    fig = beta_study_figure(combined, analyze_beta(combined))
    assert len(fig.axes) == 3 and all(_drawn(ax) for ax in fig.axes)
    legend = [t.get_text() for t in fig.axes[2].get_legend().get_texts()]
    assert any(t.startswith("no departure by T = 40") for t in legend), legend
    (marks,) = [line for line in fig.axes[2].get_lines() if line.get_marker() == "^"][:1]
    assert np.asarray(marks.get_xdata()).tolist() == [30.0]
    assert plot_beta_study(combined, analyze_beta(combined), tmp_path / "f.png").exists()
