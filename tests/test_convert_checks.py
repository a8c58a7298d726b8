"""convert-particles checks what it is given (issue 29, item 4 and acceptance 4).

Angles in degrees, non-unit vectors and arrays whose axes are not (time, n, d) are refused in
one line (exit 2, one ``spheredens: error:`` line naming what to do), and ``--degrees`` and
``--axes`` convert them to the same particle measure as the radian / (time, n, d) array: the
positions agree to round-off and the W2 of compare (:func:`spheredens.compare.w2_between_runs`)
is at most 1e-12 at every snapshot. Also: string or complex positions, an unknown ``--model``,
0 particles and weights of length n + 1 are one line, in convert-particles and in compare;
the "no times" message names ``--times`` / ``--dt``. The Python API makes the same checks and
names its keyword arguments.
"""
from __future__ import annotations

import contextlib

import numpy as np
import pytest
import xarray as xr

import spheredens as sd
from spheredens.cli import main
from spheredens.compare import w2_between_runs
from spheredens.io import UNIT_TOLERANCE, convert_particles, open_particles

EPS = np.finfo(float).eps
TIMES = [0.0, 0.5, 1.0, 1.5]
N = 40


@pytest.fixture
def theta():
    """Angles (time, n) in [-pi, pi): a circle particle run of 4 snapshots and 40 particles."""
    return np.random.default_rng(0).uniform(-np.pi, np.pi, (len(TIMES), N))


def unit_vectors(shape, seed=1):
    g = np.random.default_rng(seed).standard_normal(shape)
    return g / np.linalg.norm(g, axis=-1, keepdims=True)


def one_line_error(capsys, argv):
    """Run the CLI: it must exit 2 with exactly one line on stderr. Returns that line."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("spheredens: error: "), err
    return err.rstrip("\n")


def convert(capsys, *argv):
    """Run convert-particles with the CLI, which must succeed; the file written, opened."""
    assert main(["convert-particles", *map(str, argv)]) == 0, capsys.readouterr().err
    capsys.readouterr()
    return open_particles(argv[1])


def assert_same_measure(a, b):
    """Two particle files hold the same measure: positions equal to round-off of the conversion
    (cos/sin of angles that differ by a few ulp: 8 eps) and W2, as compare computes it, at most
    1e-12 at every snapshot (exact W2 of POT's circle solver: 0 up to round-off)."""
    np.testing.assert_array_equal(a["time"].values, b["time"].values)
    np.testing.assert_array_equal(a["particle_weight"].values, b["particle_weight"].values)
    assert np.max(np.abs(a["position"].values - b["position"].values)) <= 8 * EPS
    w2 = [w2_between_runs([a, b], k)[0, 1] for k in range(a.sizes["time"])]
    assert max(w2) <= 1e-12, w2


# -- acceptance 4: degrees ---------------------------------------------------------------------
def test_degrees_are_refused_in_one_line_naming_degrees(theta, tmp_path, capsys):
    np.save(tmp_path / "deg.npy", np.rad2deg(theta))
    out = tmp_path / "deg.nc"
    lo, hi = np.rad2deg(theta).min(), np.rad2deg(theta).max()
    line = one_line_error(capsys, ["convert-particles", str(tmp_path / "deg.npy"), str(out), "--domain",
                                   "circle", "--times", *map(str, TIMES)])
    assert line == (f"spheredens: error: {str(tmp_path / 'deg.npy')!r}: angles range over [{lo:.6g}, {hi:.6g}], "
                    "outside [-pi, pi] and [0, 2 pi]: angles in degrees need --degrees; unwrapped radians must "
                    "be wrapped into [0, 2 pi) first (theta % (2 pi))")
    assert not out.exists()
    with pytest.raises(sd.SchemaError, match=r"angles in degrees need degrees=True;"):
        convert_particles(tmp_path / "deg.npy", domain="circle", times=TIMES)


@pytest.mark.parametrize("interval", ["[-180, 180]", "[0, 360]"])
def test_degrees_option_gives_the_radian_measure(theta, tmp_path, capsys, interval):
    rad = theta if interval == "[-180, 180]" else np.mod(theta, 2 * np.pi)
    np.savez(tmp_path / "rad.npz", theta=rad, t=TIMES)
    np.savez(tmp_path / "deg.npz", theta=np.rad2deg(rad), t=TIMES)
    a = convert(capsys, tmp_path / "rad.npz", tmp_path / "rad.nc", "--domain", "circle")
    b = convert(capsys, tmp_path / "deg.npz", tmp_path / "deg.nc", "--domain", "circle", "--degrees")
    assert_same_measure(a, b)
    assert_same_measure(a, convert_particles(tmp_path / "deg.npz", domain="circle", degrees=True))


def test_angles_in_either_interval_are_accepted_and_outside_both_refused(tmp_path, capsys):
    """[-pi, pi] and [0, 2 pi] hold (with float32 rounding of their ends: 8.7e-8 above pi); a set
    in neither ([-1, 4]: inside [-pi, 2 pi], but not of one convention) is refused."""
    ends = np.array([[-np.pi, np.pi], [0.0, 2 * np.pi]])
    for k, (lo, hi) in enumerate(ends):
        for dtype in (np.float64, np.float32):
            np.save(tmp_path / "a.npy", np.linspace(lo, hi, 3 * N).reshape(3, N).astype(dtype))
            ds = convert_particles(tmp_path / "a.npy", domain="circle", dt=1.0)
            assert ds.sizes["particle"] == N
    np.save(tmp_path / "b.npy", np.linspace(-1.0, 4.0, 3 * N).reshape(3, N))
    line = one_line_error(capsys, ["convert-particles", str(tmp_path / "b.npy"), str(tmp_path / "b.nc"),
                                   "--domain", "circle", "--dt", "1"])
    assert "angles range over [-1, 4], outside [-pi, pi] and [0, 2 pi]: angles in degrees need --degrees" in line
    # in degrees, the same rule in degrees
    np.save(tmp_path / "c.npy", np.linspace(-90.0, 300.0, 3 * N).reshape(3, N))
    line = one_line_error(capsys, ["convert-particles", str(tmp_path / "c.npy"), str(tmp_path / "c.nc"),
                                   "--domain", "circle", "--dt", "1", "--degrees"])
    assert line.endswith("angles range over [-90, 300] degrees, outside [-180, 180] and [0, 360]; wrap them "
                         "into [0, 360) first")


def test_degrees_on_positions_is_refused(tmp_path, capsys):
    np.save(tmp_path / "x.npy", unit_vectors((3, N, 2)))
    line = one_line_error(capsys, ["convert-particles", str(tmp_path / "x.npy"), str(tmp_path / "x.nc"),
                                   "--domain", "circle", "--dt", "1", "--degrees"])
    assert line == (f"spheredens: error: {str(tmp_path / 'x.npy')!r} holds positions (shape (3, {N}, 2)); "
                    "--degrees is for angles (time, n) on the circle")


# -- acceptance 4: non-unit vectors ------------------------------------------------------------
def test_non_unit_vectors_are_refused_naming_the_worst_row(tmp_path, capsys):
    x = unit_vectors((3, N, 3))
    x[1, 7] *= 1 + 3 * UNIT_TOLERANCE   # above the tolerance, not the worst
    x[2, 11] *= 1 + 1e-3                # the worst
    x[0, 2] *= 1 + UNIT_TOLERANCE / 2   # within the tolerance
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "x.nc"
    norm = np.linalg.norm(x[2, 11])
    line = one_line_error(capsys, ["convert-particles", str(tmp_path / "x.npy"), str(out), "--domain", "sphere",
                                   "--dt", "0.1"])
    assert line == (f"spheredens: error: {str(tmp_path / 'x.npy')!r}: positions are not unit vectors to 1e-06: "
                    f"the worst row is [2, 11] (time 2, particle 11), of norm {norm:.9g}")
    assert f"{norm:.9g}" == "1.001"
    assert not out.exists()
    # the index is the one of the array as given: (n, time, d) with --axes n,time,d
    np.save(tmp_path / "y.npy", np.transpose(x, (1, 0, 2)))
    line = one_line_error(capsys, ["convert-particles", str(tmp_path / "y.npy"), str(out), "--domain", "sphere",
                                   "--dt", "0.1", "--axes", "n,time,d"])
    assert line.endswith("the worst row is [11, 2] (time 2, particle 11), of norm 1.001")
    # within the tolerance everywhere: accepted, the positions kept as given
    x[2, 11] /= 1 + 1e-3
    x[1, 7] /= 1 + 3 * UNIT_TOLERANCE
    np.save(tmp_path / "z.npy", x)
    ds = convert_particles(tmp_path / "z.npy", domain="sphere", dt=0.1)
    np.testing.assert_array_equal(ds["position"].values, x)


def test_non_unit_netcdf_particle_file_names_the_worst_row(tmp_path):
    x = unit_vectors((3, N, 2))
    x[1, 5] *= 1.5
    ds = xr.Dataset({"position": (("time", "particle", "component"), x)}, coords={"time": [0.0, 1.0, 2.0]})
    ds.to_netcdf(tmp_path / "p.nc")
    with pytest.raises(sd.SchemaError, match=r"up to 0\.5, tolerance 1e-06; the worst row: time 1, particle 5, "
                                             r"norm 1\.5\)$"):
        open_particles(tmp_path / "p.nc")


# -- acceptance 4: transposed arrays -----------------------------------------------------------
def test_transposed_array_is_refused_naming_the_shapes(tmp_path, capsys):
    """The probe's case: (n, time, d) where (time, n, d) is expected."""
    x = unit_vectors((len(TIMES), N, 2))
    np.save(tmp_path / "x.npy", np.transpose(x, (1, 0, 2)))                 # (40, 4, 2)
    src = repr(str(tmp_path / "x.npy"))
    out = tmp_path / "x.nc"
    line = one_line_error(capsys, ["convert-particles", str(tmp_path / "x.npy"), str(out), "--domain", "circle",
                                   "--times", *map(str, TIMES)])
    assert line == (f"spheredens: error: 4 times for {N} snapshots: {src} of shape ({N}, 4, 2) is read as "
                    f"(time, n, d); with 4 times (--times) expected (4, n, 2); if the array is (n, time, d), give "
                    "--axes n,time,d")
    # the times of the file
    np.savez(tmp_path / "x.npz", x=np.transpose(x, (1, 0, 2)), t=TIMES)
    npz = repr(str(tmp_path / "x.npz"))
    line = one_line_error(capsys, ["convert-particles", str(tmp_path / "x.npz"), str(out), "--domain", "circle"])
    assert line == (f"spheredens: error: 4 times for {N} snapshots: 'x' of {npz} of shape ({N}, 4, 2) is read as "
                    f"(time, n, d); with 4 times ('t' of {npz}) expected (4, n, 2); if the array is (n, time, d), "
                    "give --axes n,time,d")
    # --dt gives no count of times: the weights' count of particles is checked instead
    np.savez(tmp_path / "w.npz", x=np.transpose(x, (1, 0, 2)), weight=np.full(N, 1.0 / N))
    w = repr(str(tmp_path / "w.npz"))
    line = one_line_error(capsys, ["convert-particles", str(tmp_path / "w.npz"), str(out), "--domain", "circle",
                                   "--dt", "0.5"])
    assert line == (f"spheredens: error: {N} weights ('weight' of {w}) for 4 particles: 'x' of {w} of shape "
                    f"({N}, 4, 2) is read as (time, n, d); with {N} weights expected (time, {N}, 2); if the array "
                    "is (n, time, d), give --axes n,time,d")
    # angles (n, time)
    np.save(tmp_path / "a.npy", np.arctan2(x[..., 1], x[..., 0]).T)
    line = one_line_error(capsys, ["convert-particles", str(tmp_path / "a.npy"), str(out), "--domain", "circle",
                                   "--times", *map(str, TIMES)])
    assert line.endswith(f"of shape ({N}, 4) is read as (time, n); with 4 times (--times) expected (4, n); if the "
                         "array is (n, time), give --axes n,time")
    assert not out.exists()
    with pytest.raises(sd.SchemaError, match=r"with 4 times \(times=\[\.\.\.\]\) expected \(4, n, 2\); if the "
                                             r"array is \(n, time, d\), give axes n,time,d$"):
        convert_particles(tmp_path / "x.npy", domain="circle", times=TIMES)


def test_wrong_components_name_the_shapes(tmp_path, capsys):
    np.save(tmp_path / "x.npy", np.transpose(unit_vectors((len(TIMES), N, 3)), (0, 2, 1)))  # (4, 3, 40)
    line = one_line_error(capsys, ["convert-particles", str(tmp_path / "x.npy"), str(tmp_path / "x.nc"),
                                   "--domain", "sphere", "--dt", "1"])
    assert line == (f"spheredens: error: positions have d = {N} components, the sphere needs 3: "
                    f"{str(tmp_path / 'x.npy')!r} of shape (4, 3, {N}) is read as (time, n, d), expected "
                    "(time, n, 3); if the array is (time, d, n), give --axes time,d,n")


@pytest.mark.parametrize("layout, axes", [((1, 0, 2), "n,time,d"), ((2, 1, 0), "d,n,time"),
                                          ((0, 2, 1), "time,d,n")])
@pytest.mark.parametrize("domain", ["circle", "sphere"])
def test_axes_option_gives_the_time_n_d_measure(tmp_path, capsys, layout, axes, domain):
    d = 2 if domain == "circle" else 3
    x = unit_vectors((len(TIMES), N, d))
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", np.transpose(x, layout))
    times = ["--times", *map(str, TIMES)]
    a = convert(capsys, tmp_path / "x.npy", tmp_path / "x.nc", "--domain", domain, *times)
    b = convert(capsys, tmp_path / "y.npy", tmp_path / "y.nc", "--domain", domain, *times, "--axes", axes)
    np.testing.assert_array_equal(a["position"].values, b["position"].values)  # a transpose moves, not rounds
    if domain == "circle":  # POT's exact circle W2 of a measure to itself is 0
        assert_same_measure(a, b)
    c = convert_particles(tmp_path / "y.npy", domain=domain, times=TIMES, axes=axes.split(","))
    np.testing.assert_array_equal(a["position"].values, c["position"].values)


def test_axes_option_for_angles(theta, tmp_path, capsys):
    np.save(tmp_path / "a.npy", theta)
    np.save(tmp_path / "b.npy", theta.T)
    a = convert(capsys, tmp_path / "a.npy", tmp_path / "a.nc", "--domain", "circle", "--dt", "0.5")
    b = convert(capsys, tmp_path / "b.npy", tmp_path / "b.nc", "--domain", "circle", "--dt", "0.5", "--axes",
                "n,time")
    np.testing.assert_array_equal(a["position"].values, b["position"].values)
    assert_same_measure(a, b)


@pytest.mark.parametrize("axes, words", [
    ("n,t,d", "--axes: 'n,t,d' must name each axis of the array once, in the array's order: time, n and d for "
              "positions (e.g. n,time,d), time and n for angles (e.g. n,time)"),
    ("n,n,d", "--axes: 'n,n,d' must name each axis"),
    ("time,n", "--axes: time,n names 2 axes; {src} has 3 (shape (4, 40, 2))"),
])
def test_axes_option_is_checked(tmp_path, capsys, axes, words):
    np.save(tmp_path / "x.npy", unit_vectors((len(TIMES), N, 2)))
    line = one_line_error(capsys, ["convert-particles", str(tmp_path / "x.npy"), str(tmp_path / "x.nc"),
                                   "--domain", "circle", "--dt", "1", "--axes", axes])
    assert line.startswith("spheredens: error: " + words.format(src=repr(str(tmp_path / "x.npy"))))


# -- the times: named options, no conflicting sources -----------------------------------------
def test_no_times_names_the_options(tmp_path, capsys):
    np.save(tmp_path / "x.npy", unit_vectors((3, N, 2)))
    src = repr(str(tmp_path / "x.npy"))
    line = one_line_error(capsys, ["convert-particles", str(tmp_path / "x.npy"), str(tmp_path / "x.nc"),
                                   "--domain", "circle"])
    assert line == (f"spheredens: error: no times: {src} has none (keys 'time', 't'); give the snapshot times "
                    "with --times or their spacing with --dt")
    with pytest.raises(sd.SchemaError, match=r"give the snapshot times with times=\[\.\.\.\] or their spacing "
                                             r"with dt=\.\.\.$"):
        convert_particles(tmp_path / "x.npy", domain="circle")


def test_times_from_two_sources_are_refused(tmp_path, capsys):
    np.savez(tmp_path / "x.npz", x=unit_vectors((3, N, 2)), t=[0.0, 1.0, 2.0])
    base = ["convert-particles", str(tmp_path / "x.npz"), str(tmp_path / "x.nc"), "--domain", "circle"]
    assert one_line_error(capsys, [*base, "--dt", "1"]) == (
        f"spheredens: error: --dt: {str(tmp_path / 'x.npz')!r} holds its own times ('t' of "
        f"{str(tmp_path / 'x.npz')!r}); give no --times or --dt")
    np.save(tmp_path / "y.npy", unit_vectors((3, N, 2)))
    assert one_line_error(capsys, ["convert-particles", str(tmp_path / "y.npy"), str(tmp_path / "x.nc"),
                                   "--domain", "circle", "--dt", "1", "--times", "0", "1", "2"]) == (
        "spheredens: error: --dt: give the snapshot times (--times) or their spacing (--dt), not both")
    with pytest.raises(sd.ConfigError, match=r"^dt=\.\.\.: must be a finite number > 0, got -1\.0$"):
        convert_particles(tmp_path / "y.npy", domain="circle", dt=-1.0)


# -- the probe: strings, complex numbers, unknown models, 0 particles, n + 1 weights ------------
@pytest.mark.parametrize("dtype, words", [(str, "strings (dtype <U"), (complex, "complex numbers (dtype complex128)"),
                                          (bool, "booleans (dtype bool)")])
def test_positions_that_are_not_real_numbers_are_refused(tmp_path, capsys, dtype, words):
    np.save(tmp_path / "x.npy", unit_vectors((3, N, 2)).astype(dtype))
    line = one_line_error(capsys, ["convert-particles", str(tmp_path / "x.npy"), str(tmp_path / "x.nc"),
                                   "--domain", "circle", "--dt", "1"])
    assert line.startswith(f"spheredens: error: {str(tmp_path / 'x.npy')!r} holds {words}")
    assert line.endswith("), not real numbers")
    np.savez(tmp_path / "w.npz", x=unit_vectors((3, N, 2)), t=np.array(["0", "1", "2"]))
    with pytest.raises(sd.SchemaError, match=r"^'t' of .* holds strings \(dtype <U1\), not real numbers$"):
        convert_particles(tmp_path / "w.npz", domain="circle")


def test_unknown_model_is_refused(tmp_path, capsys):
    np.save(tmp_path / "x.npy", unit_vectors((3, N, 2)))
    out = tmp_path / "x.nc"
    assert one_line_error(capsys, ["convert-particles", str(tmp_path / "x.npy"), str(out), "--domain", "circle",
                                   "--dt", "1", "--model", "bogus"]) == (
        "spheredens: error: --model: 'bogus' is not a known model; choose one of 'sa', 'sa_zero_temperature', "
        "'usa', 'usa_av'")
    assert not out.exists()
    with pytest.raises(sd.ConfigError, match=r"^attrs\['model'\]: 'bogus' is not a known model"):
        convert_particles(tmp_path / "x.npy", domain="circle", dt=1.0, attrs={"model": "bogus"})
    assert convert(capsys, tmp_path / "x.npy", out, "--domain", "circle", "--dt", "1", "--model",
                   "usa").attrs["model"] == "usa"


def test_zero_particles_and_wrong_weights_are_one_line(tmp_path, capsys):
    out = tmp_path / "x.nc"
    np.savez(tmp_path / "z.npz", position=np.zeros((3, 0, 2)), t=[0.0, 1.0, 2.0])
    z = repr(str(tmp_path / "z.npz"))
    assert one_line_error(capsys, ["convert-particles", str(tmp_path / "z.npz"), str(out), "--domain",
                                   "circle"]) == (
        f"spheredens: error: no snapshots or no particles: 'position' of {z} of shape (3, 0, 2) is read as "
        "(time, n, d): 3 times, 0 particles")
    np.savez(tmp_path / "w.npz", position=unit_vectors((3, 5, 2)), t=[0.0, 1.0, 2.0], weight=np.full(6, 1 / 6))
    w = repr(str(tmp_path / "w.npz"))
    assert one_line_error(capsys, ["convert-particles", str(tmp_path / "w.npz"), str(out), "--domain",
                                   "circle"]) == (
        f"spheredens: error: 6 weights ('weight' of {w}) for 5 particles: 'position' of {w} of shape (3, 5, 2) is "
        "read as (time, n, d); with 6 weights expected (time, 6, 2)")
    np.savez(tmp_path / "s.npz", theta=np.zeros((0, 4)))
    with pytest.raises(sd.SchemaError, match=r"^no snapshots or no particles: .* of shape \(0, 4\) is read as "
                                             r"\(time, n\): 0 times, 4 particles$"):
        convert_particles(tmp_path / "s.npz", domain="circle", dt=1.0)
    assert not out.exists()


@pytest.fixture(scope="module")
def density(tmp_path_factory):
    """A tiny circle run (3 snapshots at t = 0, 1, 2)."""
    path = tmp_path_factory.mktemp("density") / "d.nc"
    cfg = sd.config_from_dict({"model": {"name": "sa", "beta": 2.0}, "initial": {"name": "uniform"},
                               "discretization": {"scheme": "fv", "n": 32},
                               "time": {"t_end": 2.0, "times": [0.0, 1.0, 2.0]}})
    sd.run(cfg, output=path, progress=False)
    return path


def _particle_file(path, position, **variables):
    data = {"position": (("time", "particle", "component"), position), **variables}
    ds = xr.Dataset(data, coords={"time": [0.0, 1.0, 2.0]},
                    attrs={"spheredens_schema": "spheredens-particles-1", "domain": "circle"})
    ds.to_netcdf(path, **({"engine": "h5netcdf", "invalid_netcdf": True}
                          if np.iscomplexobj(position) else {}))
    return path


@pytest.mark.parametrize("case, words", [
    ("zero_particles", "no snapshots or no particles (position has shape (3, 0, 2))"),
    ("weights_n_plus_1", "'particle_weight' must be 5 non-negative numbers summing to 1"),
    ("string_weights", "'particle_weight' holds strings (dtype <U1), not real numbers"),
    ("string_positions", "'position' holds strings (dtype <U"),
    ("complex_positions", "'position' holds records (dtype |V16), not real numbers"),  # complex, as netCDF4 reads it
])
def test_compare_refuses_bad_particle_files_in_one_line(density, tmp_path, capsys, case, words):
    x = unit_vectors((3, 5, 2))
    p = tmp_path / "p.nc"
    warns = pytest.warns(UserWarning) if case == "complex_positions" else contextlib.nullcontext()
    with np.errstate(all="ignore"), warns:  # h5netcdf warns that complex numbers are not netCDF-4
        if case == "zero_particles":
            _particle_file(p, np.zeros((3, 0, 2)))
        elif case == "weights_n_plus_1":
            _particle_file(p, x, particle_weight=(("particle_plus_one",), np.full(6, 1 / 6)))
        elif case == "string_weights":
            _particle_file(p, x, particle_weight=(("particle",), np.array(["a"] * 5)))
        elif case == "string_positions":
            _particle_file(p, x.astype(str))
        else:
            _particle_file(p, x.astype(complex))
    out = tmp_path / "c.nc"
    line = one_line_error(capsys, ["compare", str(density), str(p), "--no-figure", "-o", str(out)])
    assert line.startswith(f"spheredens: error: {p}: {words}"), line
    assert not out.exists()
