"""compare of any runs of one model against a reference: two densities, two particle runs, a mix.

The W2 of :func:`spheredens.compare_pairs.compare_runs` is checked against POT called here on
atoms built here from the files alone (not through spheredens.transport): on the circle the
piecewise-constant cells as k = ceil(2^16 / n) equal sub-atoms each, and the circle's W2 as the
minimum over the shift theta of the line's W2 between the quantile functions F^-1(t) and
G^-1(t + theta) (Delon, Salomon and Sobolevski 2010; ``ot.emd2_1d`` on the line); on the sphere
the grid atoms and ``ot.emd2`` with the squared geodesic cost. The runs are small (circle 256
and 512 cells, sphere 14 rings and lmax 15, three snapshots).
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import astuple

import matplotlib
import numpy as np
import ot
import pytest
from scipy.optimize import minimize_scalar

import spheredens as sd
from spheredens.cli import main
from spheredens.compare import compare
from spheredens.compare_pairs import compare_runs, comparison_plan
from spheredens.exceptions import ModelMismatchError
from spheredens.io import open_particles, open_run, read_netcdf, write_dataset
from spheredens.particles import run_particles
from spheredens.plot._comparison import circle_density_and_particles

matplotlib.use("Agg")
plt = pytest.importorskip("matplotlib.pyplot")

CIRCLE = {
    "model": {"name": "sa", "beta": 5.0, "V": [[1.0, 0.0], [0.0, 0.5]]},
    "initial": {"name": "von_mises_fisher", "means": [[0.6, 0.8]], "kappas": [2.0]},
    "discretization": {"scheme": "fv", "n": 256},
    "time": {"t_end": 0.2, "times": [0.0, 0.1, 0.2]},
    "particles": {"n": 16, "dt": 0.1, "initialization": "quantile"},
}
SPHERE = {
    "model": {"name": "sa", "beta": 2.0, "V": [[1.0, 0.2, 0.0], [0.1, 0.7, -0.3], [0.0, 0.4, 0.5]]},
    "domain": {"name": "sphere"},
    "initial": {"name": "random_smooth", "seed": 7, "bandwidth": 3, "amplitude": 0.8},
    "discretization": {"scheme": "fv", "nlat": 14},
    "time": {"t_end": 0.2, "times": [0.0, 0.1, 0.2]},
    "particles": {"n": 40, "dt": 0.1},
}
HINT = "; pass --allow-mismatch to compare anyway\n"


def config(base, **changes):
    cfg = sd.config_from_dict(base)
    return cfg.replace(**changes) if changes else cfg


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Circle: fv on 256 and 512 cells, log_sl on 256, fv at beta = 30, particles (16 at the
    quantiles, 24 i.i.d.); sphere: fv (14 rings) and sh_spectral (lmax 15), 40 and 60
    particles. Paths by name."""
    root = tmp_path_factory.mktemp("pairs")
    out = {name: root / f"{name}.nc" for name in ("d256", "d512", "log_sl", "beta30", "p", "q")}
    sd.run(config(CIRCLE), output=out["d256"], progress=False)
    sd.run(config(CIRCLE, **{"discretization.n": 512}), output=out["d512"], progress=False)
    log_sl = dict(CIRCLE, discretization={"scheme": "log_sl", "n": 256})
    sd.run(config(log_sl), output=out["log_sl"], progress=False)
    sd.run(config(CIRCLE, **{"model.beta": 30.0}), output=out["beta30"], progress=False)
    run_particles(config(CIRCLE), output=out["p"], progress=False)
    iid = {"particles.n": 24, "particles.initialization": "iid"}
    run_particles(config(CIRCLE, **iid), output=out["q"], seed=1, progress=False)
    for name in ("s_fv", "s_sh", "s_p", "s_q"):
        out[name] = root / f"{name}.nc"
    sd.run(config(SPHERE), output=out["s_fv"], progress=False)
    spectral = dict(SPHERE, discretization={"scheme": "sh_spectral", "lmax": 15})
    sd.run(config(spectral), output=out["s_sh"], progress=False)
    run_particles(config(SPHERE), output=out["s_p"], progress=False)
    run_particles(config(SPHERE, **{"particles.n": 60}), output=out["s_q"], seed=1, progress=False)
    # p with unequal weights (a file as another code might weigh its particles)
    weighted = open_particles(out["p"])
    w = np.linspace(1.0, 3.0, weighted.sizes["particle"])
    weighted["particle_weight"].values[:] = w / w.sum()
    out["p_weighted"] = write_dataset(weighted, root / "p_weighted.nc")
    return out


# -- independent references: atoms from the files, POT on them ------------------------------
def circle_cells_as_atoms(ds, index):
    """The piecewise-constant density of snapshot ``index`` as k = ceil(2^16 / n) equal
    sub-atoms per cell; angles in radians, masses summing to 1."""
    theta, width = ds["theta"].values, ds["weight"].values
    rho = np.clip(ds["rho"].values[index], 0.0, None)
    k = -(-(1 << 16) // theta.size)
    offsets = (np.arange(k) + 0.5) / k - 0.5
    angles = (theta[:, None] + offsets[None, :] * width[:, None]).ravel()
    masses = np.repeat(rho * width / k, k)
    return angles, masses / masses.sum()


def particle_angles(ds, index):
    x = ds["position"].values[index]
    return np.arctan2(x[:, 1], x[:, 0]), ds["particle_weight"].values


def circle_w2(x, a, y, b):
    """W2 on the circle of circumference 2 pi: min over theta of the line's W2^2 between
    F^-1(t) and G^-1(t + theta), G^-1 extended by G^-1(s + 1) = G^-1(s) + 1 (ot.emd2_1d)."""
    x, y = np.mod(x / (2 * np.pi), 1.0), np.mod(y / (2 * np.pi), 1.0)
    order = np.argsort(y)
    y, b = y[order], b[order] / b.sum()
    a = a / a.sum()
    upto = np.concatenate([[0.0], np.cumsum(b)])

    def shifted(theta):  # nu on the line as G^-1(t + theta), t in (0, 1)
        lift = np.floor(theta)
        frac = min(theta - lift, 1.0)
        # the atom split at quantile frac
        cut = min(int(np.searchsorted(upto, frac, side="right")) - 1, b.size - 1)
        head = upto[cut + 1] - frac  # its mass above frac
        points = np.concatenate([[y[cut]], y[cut + 1 :], y[: cut + 1] + 1.0]) + lift
        masses = np.concatenate([[head], b[cut + 1 :], b[:cut], [b[cut] - head]])
        return points, masses

    def cost(theta):
        points, masses = shifted(theta)
        keep = masses > 0
        return float(ot.emd2_1d(x, points[keep], a, masses[keep], metric="sqeuclidean"))

    # convex in theta (ibid.): a scan brackets the minimum, Brent finds it, and a second Brent
    # around it (whose tolerance is then absolute) polishes theta to round-off
    scan = np.linspace(-1.0, 1.0, 21)
    k = int(np.argmin([cost(t) for t in scan]))
    bracket = (scan[max(k - 1, 0)], scan[min(k + 1, scan.size - 1)])
    best = minimize_scalar(cost, bounds=bracket, method="bounded", options={"xatol": 1e-12})
    polish = minimize_scalar(
        lambda s: cost(best.x + s), bounds=(-1e-6, 1e-6), method="bounded", options={"xatol": 1e-16}
    )
    return 2 * np.pi * np.sqrt(min(cost(scan[k]), best.fun, polish.fun))


def sphere_atoms(ds, index):
    """A sphere density's grid atoms (unit vectors from lat, lon) with masses rho_j w_j."""
    lat, lon = np.radians(ds["lat"].values), np.radians(ds["lon"].values)
    if ds["rho"].ndim == 3:  # a (lat, lon) grid
        lat, lon = np.meshgrid(lat, lon, indexing="ij")
    x = np.stack([np.cos(lat) * np.cos(lon), np.cos(lat) * np.sin(lon), np.sin(lat)], axis=-1)
    a = np.clip(ds["rho"].values[index], 0.0, None) * ds["weight"].values
    return x.reshape(-1, 3), (a / a.sum()).ravel()


def sphere_w2(x, a, y, b):
    cost = np.arccos(np.clip(x @ y.T, -1.0, 1.0)) ** 2
    return float(np.sqrt(ot.emd2(a / a.sum(), b / b.sum(), cost, numItermax=10**7)))


def test_the_circle_reference_is_the_circle_w2():
    """The test's own circle W2: two atoms pi / 2 apart, and a wrap across 0 (W2 = the short
    way round, 0.2, not 2 pi - 0.2)."""
    one = np.array([1.0])
    assert circle_w2(np.array([0.0]), one, np.array([np.pi / 2]), one) == pytest.approx(np.pi / 2)
    assert circle_w2(np.array([0.1]), one, np.array([2 * np.pi - 0.1]), one) == pytest.approx(0.2)
    half = np.array([0.5, 0.5])
    a, b = np.array([0.0, np.pi]), np.array([np.pi / 2, 3 * np.pi / 2])
    assert circle_w2(a, half, b, half) == pytest.approx(np.pi / 2)


# -- density against density ----------------------------------------------------------------
def test_two_circle_densities_on_two_grids_give_the_pot_w2(files):
    d512, d256 = open_run(files["d512"]), open_run(files["d256"])
    result = compare_runs(
        d512, [d256], reference_file=str(files["d512"]), run_files=[str(files["d256"])]
    )
    assert result.sizes["pair"] == 1 and result.sizes["time"] == 3
    w2 = result["w2"].values[0]
    expected = [
        circle_w2(*circle_cells_as_atoms(d512, i), *circle_cells_as_atoms(d256, i))
        for i in range(3)
    ]
    np.testing.assert_allclose(w2, expected, rtol=0, atol=1e-6)
    assert w2.min() > 3e-5  # two grids: not the same measure (6.3e-5 at t = 0)
    assert result.attrs["reference_file"] == str(files["d512"])
    assert result.attrs["run_files"] == str(files["d256"])
    assert result.attrs["run_kinds"] == "density"
    rep = result.attrs["reference_representation"]
    assert "piecewise-constant density on the grid cells" in rep and "128 equal sub-atoms" in rep
    assert "256 equal sub-atoms" in result.attrs["run_representations"]
    # each density's resolution: h / sqrt(12) of its own cells
    np.testing.assert_allclose(result["reference_resolution"], 2 * np.pi / 512 / np.sqrt(12))
    np.testing.assert_allclose(result["resolution"][0], 2 * np.pi / 256 / np.sqrt(12))


def test_log_sl_is_read_at_its_centroids(files):
    """A log_sl density is its cells' masses at their centroids: the POT W2 to those atoms."""
    d512, log_sl = open_run(files["d512"]), open_run(files["log_sl"])
    w2 = compare_runs(d512, log_sl)["w2"].values[0]
    for i in range(3):
        rho, width = log_sl["rho"].values[i], log_sl["weight"].values
        at = log_sl["theta"].values + log_sl["rho_centroid"].values[i] * width
        expected = circle_w2(*circle_cells_as_atoms(d512, i), at, rho * width)
        assert w2[i] == pytest.approx(expected, abs=1e-6)


def test_sphere_fv_against_sh_spectral_gives_the_pot_w2(files):
    sh, fv = open_run(files["s_sh"]), open_run(files["s_fv"])
    result = compare_runs(sh, [fv])
    expected = [sphere_w2(*sphere_atoms(sh, i), *sphere_atoms(fv, i)) for i in range(3)]
    np.testing.assert_allclose(result["w2"].values[0], expected, rtol=0, atol=1e-6)
    assert result["w2"].values.min() > 1e-3
    assert "exact W2 on the sphere (POT emd2" in result.attrs["method"]


# -- particles against particles ------------------------------------------------------------
@pytest.mark.parametrize("weighted", [False, True], ids=["equal", "weighted"])
def test_two_circle_particle_runs_give_the_pot_w2(files, weighted):
    p = open_particles(files["p_weighted" if weighted else "p"])
    q = open_particles(files["q"])
    w2 = compare_runs(p, q)["w2"].values[0]
    expected = [circle_w2(*particle_angles(p, i), *particle_angles(q, i)) for i in range(3)]
    np.testing.assert_allclose(w2, expected, rtol=0, atol=1e-6)
    # and the exact EMD on these few atoms with the squared geodesic cost
    for i in range(3):
        x, a = p["position"].values[i], p["particle_weight"].values
        y, b = q["position"].values[i], q["particle_weight"].values
        assert w2[i] == pytest.approx(sphere_w2(x, a, y, b), abs=1e-6)


def test_circle_w2_is_the_exact_emd_when_the_optimal_shift_is_zero(files):
    """POT's circle solver, when the optimal shift is 0 and the weights do not sum to exactly
    1 in floating point, evaluated its cost at theta = -1e-16 wrongly (W2 = 5.70 rad for 16
    against 24 equal weights, more than pi); spheredens.transport.w2_circle sorts the points
    and makes the cumulative weights end at exactly 1. Checked against the EMD on those files
    and on 300 random weighted sets (6 of 3000 such sets were wrong before, by up to 5 rad)."""
    p, q = open_particles(files["p"]), open_particles(files["q"])
    x, a = p["position"].values[0], p["particle_weight"].values
    y, b = q["position"].values[0], q["particle_weight"].values
    assert sd.compare_runs(p, q)["w2"].values[0, 0] == pytest.approx(
        sphere_w2(x, a, y, b), abs=1e-12
    )
    rng = np.random.default_rng(0)
    for k in range(300):
        n, m = rng.integers(1, 30, 2)
        ta, tb = rng.uniform(-np.pi, np.pi, n), rng.uniform(-np.pi, np.pi, m)
        if k % 3 == 0 and m <= n:
            tb = ta[:m]
        a = rng.uniform(0.1, 1.0, n) if k % 2 else np.full(n, 1.0 / n)
        b = rng.uniform(0.1, 1.0, m) if k % 2 else np.full(m, 1.0 / m)
        gap = np.abs(ta[:, None] - tb[None, :])
        exact = np.sqrt(ot.emd2(a / a.sum(), b / b.sum(), np.minimum(gap, 2 * np.pi - gap) ** 2))
        x = np.stack([np.cos(ta), np.sin(ta)], axis=-1)
        y = np.stack([np.cos(tb), np.sin(tb)], axis=-1)
        assert sd.geometry.get_domain("circle").w2(x, a, y, b) == pytest.approx(exact, abs=1e-12)


def test_weights_are_used(files):
    q = open_particles(files["q"])
    equal = compare_runs(open_particles(files["p"]), q)["w2"].values[0]
    weighted = compare_runs(open_particles(files["p_weighted"]), q)["w2"].values[0]
    assert np.min(np.abs(equal - weighted)) > 1e-3


def test_two_sphere_particle_runs_give_the_pot_w2(files):
    p, q = open_particles(files["s_p"]), open_particles(files["s_q"])
    w2 = compare_runs(p, q)["w2"].values[0]
    for i in range(3):
        x, a = p["position"].values[i], p["particle_weight"].values
        y, b = q["position"].values[i], q["particle_weight"].values
        assert w2[i] == pytest.approx(sphere_w2(x, a, y, b), abs=1e-6)
    assert w2.min() > 0.05


# -- the guards ------------------------------------------------------------------------------
def test_a_model_mismatch_between_densities_is_refused_in_one_line(files, tmp_path, capsys):
    ref, other = str(files["d512"]), str(files["beta30"])
    expect = f"{other} is not a run of the model of {ref}: beta is 30 in {other} but 5 in {ref}"
    with pytest.raises(ModelMismatchError) as info:
        compare_runs(open_run(ref), open_run(other), reference_file=ref, run_files=[other])
    assert str(info.value) == expect + "; pass allow_mismatch=True to compare anyway"
    out = tmp_path / "c.nc"
    assert main(["compare", ref, other, "--no-figure", "-o", str(out)]) == 2
    assert capsys.readouterr().err == f"spheredens: error: {expect}{HINT}"
    assert not out.exists()
    # the program itself: exit status 2, one line, no traceback
    proc = subprocess.run(
        [sys.executable, "-m", "spheredens", "compare", ref, other, "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and proc.stderr == f"spheredens: error: {expect}{HINT}"
    assert "Traceback" not in proc.stdout + proc.stderr
    # --allow-mismatch compares and records the difference
    assert main(["compare", ref, other, "--no-figure", "-o", str(out), "--allow-mismatch"]) == 0
    recorded = read_netcdf(out)
    assert recorded.attrs["model_mismatch"] == f"{other}: beta is 30 in {other} but 5 in {ref}"


def test_other_mismatches_are_named(files, tmp_path, capsys):
    """Particles against a density of another model, and two domains, in one line each."""
    out = ["--no-figure", "-o", str(tmp_path / "c.nc")]
    ref, p = str(files["beta30"]), str(files["q"])
    assert main(["compare", ref, str(files["d512"]), p, *out]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "beta is 5 in" in err and err.endswith(HINT)
    assert main(["compare", str(files["d256"]), str(files["s_fv"]), *out]) == 2
    assert capsys.readouterr().err == (
        f"spheredens: error: {files['s_fv']} is not a run of the model of {files['d256']}: "
        f"domain is 'sphere' in {files['s_fv']} but 'circle' in {files['d256']}; W2 needs both "
        "on one domain\n"
    )


def test_files_of_other_kinds_and_a_run_twice_are_refused(files, tmp_path, capsys):
    d, p = str(files["d256"]), str(files["p"])
    text = tmp_path / "text.nc"
    text.write_text("not a netCDF file\n")
    out = ["--no-figure", "-o", str(tmp_path / "c.nc")]
    assert main(["compare", d, str(files["d512"]), str(text), *out]) == 2
    assert capsys.readouterr().err == (
        f"spheredens: error: {text} (run 2) is not a netCDF file, neither a density "
        "(spheredens-1) nor a particle file (spheredens-particles-1); compare measures runs "
        "against a reference: spheredens compare RUN RUN... [--reference RUN]\n"
    )
    assert main(["compare", p, "--reference", p, *out]) == 2
    assert "needs another run to measure against it" in capsys.readouterr().err
    assert main(["compare", d, *out]) == 2
    assert "compare needs two runs at least, or --reference RUN" in capsys.readouterr().err


# -- which file is the reference -----------------------------------------------------------------
def test_the_plan(files):
    d256, d512, p, q = (str(files[n]) for n in ("d256", "d512", "p", "q"))
    assert astuple(comparison_plan([d512, p, q])) == (
        d512,
        (p, q),
        False,
    )  # a density, then particles
    assert astuple(comparison_plan([p, q])) == (p, (q,), True)  # the first is the reference
    assert astuple(comparison_plan([d256, d512])) == (d256, (d512,), True)
    assert astuple(comparison_plan([d256, p, d512], d512)) == (d512, (d256, p), True)
    assert astuple(comparison_plan([p, q], d512)) == (d512, (p, q), False)  # density vs particles
    with pytest.raises(sd.SchemaError, match="^the arguments are swapped"):
        comparison_plan([p, d256])


def test_reference_measures_every_run_against_it(files, tmp_path, capsys):
    """Three runs with --reference: each W2 is that of the pair alone; the density-particles
    pair is compare's (density against particles) to round-off."""
    d256, d512, p = (str(files[n]) for n in ("d256", "d512", "p"))
    out = tmp_path / "ref.nc"
    assert main(["compare", d256, d512, p, "--reference", d512, "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"  reference {d512} (density, resolution <= 0.0035)" in printed
    assert f"  run 1: {d256} (density, resolution <= 0.0071)" in printed
    assert f"  run 2: {p} (particles)" in printed
    assert (tmp_path / "ref.png").stat().st_size > 10_000
    result = read_netcdf(out)
    assert result.attrs["spheredens_schema"] == "spheredens-compare-pairs-1"
    assert result.attrs["reference_file"] == d512
    assert result.attrs["run_files"].split("\n") == [d256, p]
    assert result.attrs["run_kinds"].split("\n") == ["density", "particles"]
    reference = open_run(d512)
    alone = compare_runs(reference, open_run(d256))["w2"].values[0]
    np.testing.assert_allclose(result["w2"].values[0], alone, rtol=1e-12, atol=0)
    with_particles = compare(reference, open_particles(p))["w2"].values[0]
    np.testing.assert_allclose(result["w2"].values[1], with_particles, rtol=1e-12, atol=0)
    np.testing.assert_allclose(result["resolution"].values[1], np.nan)
    # the file draws again (spheredens plot) and is opened as a comparison file
    assert main(["plot", str(out), "-o", str(tmp_path / "again.png")]) == 0


# -- the figure of compare: particle histograms on the density's cells -----------------------
def test_the_particle_histogram_is_on_the_density_cells(files):
    """Particles at the cell centres carrying each cell's mass rho_j w_j: their histogram on
    the density's cells is rho itself (a 0.1-radian bin would lower a one-cell cluster)."""
    density = open_run(files["d256"])
    particles = open_particles(files["p"]).isel(time=[0])
    theta, width = density["theta"].values, density["weight"].values
    rho = density["rho"].values[0]
    particles = particles.isel(particle=np.zeros(theta.size, dtype=int))
    particles["position"].values[0] = np.stack([np.cos(theta), np.sin(theta)], axis=-1)
    particles["particle_weight"].values[:] = rho * width / np.sum(rho * width)
    fig, ax = plt.subplots()
    try:
        _, hist = circle_density_and_particles(density, particles, ax, [])
        np.testing.assert_allclose(hist.bins[:-1] + width / 2, theta, atol=1e-12)
        np.testing.assert_allclose(hist._histogram(0), rho / np.sum(rho * width), rtol=1e-12)
    finally:
        plt.close(fig)
