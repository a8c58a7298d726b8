"""convert-particles checks what it is given.

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
from spheredens.convert import convert_particles
from spheredens.io import UNIT_TOLERANCE, open_particles

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


# -- degrees ---------------------------------------------------------------------
def test_degrees_are_refused_in_one_line_naming_degrees(theta, tmp_path, capsys):
    np.save(tmp_path / "deg.npy", np.rad2deg(theta))
    out = tmp_path / "deg.nc"
    lo, hi = np.rad2deg(theta).min(), np.rad2deg(theta).max()
    line = one_line_error(
        capsys,
        [
            "convert-particles",
            str(tmp_path / "deg.npy"),
            str(out),
            "--domain",
            "circle",
            "--times",
            *map(str, TIMES),
        ],
    )
    assert line == (
        f"spheredens: error: {str(tmp_path / 'deg.npy')!r}: angles range over [{lo:.6g}, "
        f"{hi:.6g}], "
        "outside [-pi, pi] and [0, 2 pi]: angles in degrees need --degrees; unwrapped radians must "
        "be wrapped into [0, 2 pi) first (theta % (2 pi))"
    )
    assert not out.exists()
    with pytest.raises(sd.SchemaError, match=r"angles in degrees need degrees=True;"):
        convert_particles(tmp_path / "deg.npy", domain="circle", times=TIMES)


@pytest.mark.parametrize("interval", ["[-180, 180]", "[0, 360]"])
def test_degrees_option_gives_the_radian_measure(theta, tmp_path, capsys, interval):
    rad = theta if interval == "[-180, 180]" else np.mod(theta, 2 * np.pi)
    np.savez(tmp_path / "rad.npz", theta=rad, t=TIMES)
    np.savez(tmp_path / "deg.npz", theta=np.rad2deg(rad), t=TIMES)
    a = convert(capsys, tmp_path / "rad.npz", tmp_path / "rad.nc", "--domain", "circle")
    b = convert(
        capsys, tmp_path / "deg.npz", tmp_path / "deg.nc", "--domain", "circle", "--degrees"
    )
    assert_same_measure(a, b)
    assert_same_measure(a, convert_particles(tmp_path / "deg.npz", domain="circle", degrees=True))


def test_angles_in_either_interval_are_accepted_and_outside_both_refused(tmp_path, capsys):
    """[-pi, pi] and [0, 2 pi] hold (with float32 rounding of their ends: 8.7e-8 above pi); a set
    in neither ([-1, 4]: inside [-pi, 2 pi], but not of one convention) is refused."""
    ends = np.array([[-np.pi, np.pi], [0.0, 2 * np.pi]])
    for lo, hi in ends:
        for dtype in (np.float64, np.float32):
            np.save(tmp_path / "a.npy", np.linspace(lo, hi, 3 * N).reshape(3, N).astype(dtype))
            ds = convert_particles(tmp_path / "a.npy", domain="circle", dt=1.0)
            assert ds.sizes["particle"] == N
    np.save(tmp_path / "b.npy", np.linspace(-1.0, 4.0, 3 * N).reshape(3, N))
    line = one_line_error(
        capsys,
        [
            "convert-particles",
            str(tmp_path / "b.npy"),
            str(tmp_path / "b.nc"),
            "--domain",
            "circle",
            "--dt",
            "1",
        ],
    )
    assert (
        "angles range over [-1, 4], outside [-pi, pi] and [0, 2 pi]: angles in degrees need "
        "--degrees" in line
    )
    # in degrees, the same rule in degrees
    np.save(tmp_path / "c.npy", np.linspace(-90.0, 300.0, 3 * N).reshape(3, N))
    line = one_line_error(
        capsys,
        [
            "convert-particles",
            str(tmp_path / "c.npy"),
            str(tmp_path / "c.nc"),
            "--domain",
            "circle",
            "--dt",
            "1",
            "--degrees",
        ],
    )
    assert line.endswith(
        "angles range over [-90, 300] degrees, outside [-180, 180] and [0, 360]; wrap them "
        "into [0, 360) first"
    )


def test_degrees_on_positions_is_refused(tmp_path, capsys):
    np.save(tmp_path / "x.npy", unit_vectors((3, N, 2)))
    line = one_line_error(
        capsys,
        [
            "convert-particles",
            str(tmp_path / "x.npy"),
            str(tmp_path / "x.nc"),
            "--domain",
            "circle",
            "--dt",
            "1",
            "--degrees",
        ],
    )
    assert line == (
        f"spheredens: error: {str(tmp_path / 'x.npy')!r} holds positions (shape (3, {N}, 2)); "
        "--degrees is for angles (time, n) on the circle"
    )


# -- non-unit vectors ------------------------------------------------------------
def test_non_unit_vectors_are_refused_naming_the_worst_row(tmp_path, capsys):
    x = unit_vectors((3, N, 3))
    x[1, 7] *= 1 + 3 * UNIT_TOLERANCE  # above the tolerance, not the worst
    x[2, 11] *= 1 + 1e-3  # the worst
    x[0, 2] *= 1 + UNIT_TOLERANCE / 2  # within the tolerance
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "x.nc"
    norm = np.linalg.norm(x[2, 11])
    line = one_line_error(
        capsys,
        [
            "convert-particles",
            str(tmp_path / "x.npy"),
            str(out),
            "--domain",
            "sphere",
            "--dt",
            "0.1",
        ],
    )
    assert line == (
        f"spheredens: error: {str(tmp_path / 'x.npy')!r}: positions are not unit vectors to 1e-06: "
        f"the worst row is [2, 11] (time 2, particle 11), of norm {norm:.9g}"
    )
    assert f"{norm:.9g}" == "1.001"
    assert not out.exists()
    # the index is the one of the array as given: (n, time, d) with --axes n,time,d
    np.save(tmp_path / "y.npy", np.transpose(x, (1, 0, 2)))
    line = one_line_error(
        capsys,
        [
            "convert-particles",
            str(tmp_path / "y.npy"),
            str(out),
            "--domain",
            "sphere",
            "--dt",
            "0.1",
            "--axes",
            "n,time,d",
        ],
    )
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
    ds = xr.Dataset(
        {"position": (("time", "particle", "component"), x)}, coords={"time": [0.0, 1.0, 2.0]}
    )
    ds.to_netcdf(tmp_path / "p.nc")
    with pytest.raises(
        sd.SchemaError,
        match=r"up to 0\.5, tolerance 1e-06; the worst row: time 1, particle 5, "
        r"norm 1\.5\)$",
    ):
        open_particles(tmp_path / "p.nc")


# -- transposed arrays -----------------------------------------------------------
def test_transposed_array_is_refused_naming_the_shapes(tmp_path, capsys):
    """The probe's case: (n, time, d) where (time, n, d) is expected."""
    x = unit_vectors((len(TIMES), N, 2))
    np.save(tmp_path / "x.npy", np.transpose(x, (1, 0, 2)))  # (40, 4, 2)
    src = repr(str(tmp_path / "x.npy"))
    out = tmp_path / "x.nc"
    line = one_line_error(
        capsys,
        [
            "convert-particles",
            str(tmp_path / "x.npy"),
            str(out),
            "--domain",
            "circle",
            "--times",
            *map(str, TIMES),
        ],
    )
    assert line == (
        f"spheredens: error: 4 times for {N} snapshots: {src} of shape ({N}, 4, 2) is read as "
        "(time, n, d); with 4 times (--times) expected (4, n, 2); if the array is (n, time, d), "
        "give "
        "--axes n,time,d"
    )
    # the times of the file
    np.savez(tmp_path / "x.npz", x=np.transpose(x, (1, 0, 2)), t=TIMES)
    npz = repr(str(tmp_path / "x.npz"))
    line = one_line_error(
        capsys, ["convert-particles", str(tmp_path / "x.npz"), str(out), "--domain", "circle"]
    )
    assert line == (
        f"spheredens: error: 4 times for {N} snapshots: 'x' of {npz} of shape ({N}, 4, 2) is read "
        "as "
        f"(time, n, d); with 4 times ('t' of {npz}) expected (4, n, 2); if the array is (n, time, "
        "d), "
        "give --axes n,time,d"
    )
    # --dt gives no count of times: the weights' count of particles is checked instead
    np.savez(tmp_path / "w.npz", x=np.transpose(x, (1, 0, 2)), weight=np.full(N, 1.0 / N))
    w = repr(str(tmp_path / "w.npz"))
    line = one_line_error(
        capsys,
        [
            "convert-particles",
            str(tmp_path / "w.npz"),
            str(out),
            "--domain",
            "circle",
            "--dt",
            "0.5",
        ],
    )
    assert line == (
        f"spheredens: error: {N} weights ('weight' of {w}) for 4 particles: 'x' of {w} of shape "
        f"({N}, 4, 2) is read as (time, n, d); with {N} weights expected (time, {N}, 2); if the "
        "array "
        "is (n, time, d), give --axes n,time,d"
    )
    # angles (n, time)
    np.save(tmp_path / "a.npy", np.arctan2(x[..., 1], x[..., 0]).T)
    line = one_line_error(
        capsys,
        [
            "convert-particles",
            str(tmp_path / "a.npy"),
            str(out),
            "--domain",
            "circle",
            "--times",
            *map(str, TIMES),
        ],
    )
    assert line.endswith(
        f"of shape ({N}, 4) is read as (time, n); with 4 times (--times) expected (4, n); if the "
        "array is (n, time), give --axes n,time"
    )
    assert not out.exists()
    with pytest.raises(
        sd.SchemaError,
        match=r"with 4 times \(times=\[\.\.\.\]\) expected \(4, n, 2\); if the "
        r"array is \(n, time, d\), give axes n,time,d$",
    ):
        convert_particles(tmp_path / "x.npy", domain="circle", times=TIMES)


def test_wrong_components_name_the_shapes(tmp_path, capsys):
    np.save(
        tmp_path / "x.npy", np.transpose(unit_vectors((len(TIMES), N, 3)), (0, 2, 1))
    )  # (4, 3, 40)
    line = one_line_error(
        capsys,
        [
            "convert-particles",
            str(tmp_path / "x.npy"),
            str(tmp_path / "x.nc"),
            "--domain",
            "sphere",
            "--dt",
            "1",
        ],
    )
    assert line == (
        f"spheredens: error: positions have d = {N} components, the sphere needs 3: "
        f"{str(tmp_path / 'x.npy')!r} of shape (4, 3, {N}) is read as (time, n, d), expected "
        "(time, n, 3); if the array is (time, d, n), give --axes time,d,n"
    )


@pytest.mark.parametrize(
    "layout, axes", [((1, 0, 2), "n,time,d"), ((2, 1, 0), "d,n,time"), ((0, 2, 1), "time,d,n")]
)
@pytest.mark.parametrize("domain", ["circle", "sphere"])
def test_axes_option_gives_the_time_n_d_measure(tmp_path, capsys, layout, axes, domain):
    d = 2 if domain == "circle" else 3
    x = unit_vectors((len(TIMES), N, d))
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", np.transpose(x, layout))
    times = ["--times", *map(str, TIMES)]
    a = convert(capsys, tmp_path / "x.npy", tmp_path / "x.nc", "--domain", domain, *times)
    b = convert(
        capsys, tmp_path / "y.npy", tmp_path / "y.nc", "--domain", domain, *times, "--axes", axes
    )
    np.testing.assert_array_equal(
        a["position"].values, b["position"].values
    )  # a transpose moves, not rounds
    if domain == "circle":  # POT's exact circle W2 of a measure to itself is 0
        assert_same_measure(a, b)
    c = convert_particles(tmp_path / "y.npy", domain=domain, times=TIMES, axes=axes.split(","))
    np.testing.assert_array_equal(a["position"].values, c["position"].values)


def test_axes_option_for_angles(theta, tmp_path, capsys):
    np.save(tmp_path / "a.npy", theta)
    np.save(tmp_path / "b.npy", theta.T)
    a = convert(capsys, tmp_path / "a.npy", tmp_path / "a.nc", "--domain", "circle", "--dt", "0.5")
    b = convert(
        capsys,
        tmp_path / "b.npy",
        tmp_path / "b.nc",
        "--domain",
        "circle",
        "--dt",
        "0.5",
        "--axes",
        "n,time",
    )
    np.testing.assert_array_equal(a["position"].values, b["position"].values)
    assert_same_measure(a, b)


@pytest.mark.parametrize(
    "axes, words",
    [
        (
            "n,t,d",
            "--axes: 'n,t,d' must name each axis of the array once, in the array's order: time, n "
            "and d for "
            "positions (e.g. n,time,d), time and n for angles (e.g. n,time)",
        ),
        ("n,n,d", "--axes: 'n,n,d' must name each axis"),
        ("time,n", "--axes: time,n names 2 axes; {src} has 3 (shape (4, 40, 2))"),
    ],
)
def test_axes_option_is_checked(tmp_path, capsys, axes, words):
    np.save(tmp_path / "x.npy", unit_vectors((len(TIMES), N, 2)))
    line = one_line_error(
        capsys,
        [
            "convert-particles",
            str(tmp_path / "x.npy"),
            str(tmp_path / "x.nc"),
            "--domain",
            "circle",
            "--dt",
            "1",
            "--axes",
            axes,
        ],
    )
    assert line.startswith("spheredens: error: " + words.format(src=repr(str(tmp_path / "x.npy"))))


# -- the times: named options, no conflicting sources -----------------------------------------
def test_no_times_names_the_options(tmp_path, capsys):
    np.save(tmp_path / "x.npy", unit_vectors((3, N, 2)))
    src = repr(str(tmp_path / "x.npy"))
    line = one_line_error(
        capsys,
        [
            "convert-particles",
            str(tmp_path / "x.npy"),
            str(tmp_path / "x.nc"),
            "--domain",
            "circle",
        ],
    )
    assert line == (
        f"spheredens: error: no times: {src} has none (keys 'time', 't'); give the snapshot times "
        "with --times or their spacing with --dt"
    )
    with pytest.raises(
        sd.SchemaError,
        match=r"give the snapshot times with times=\[\.\.\.\] or their spacing "
        r"with dt=\.\.\.$",
    ):
        convert_particles(tmp_path / "x.npy", domain="circle")


def test_times_from_two_sources_are_refused(tmp_path, capsys):
    np.savez(tmp_path / "x.npz", x=unit_vectors((3, N, 2)), t=[0.0, 1.0, 2.0])
    base = [
        "convert-particles",
        str(tmp_path / "x.npz"),
        str(tmp_path / "x.nc"),
        "--domain",
        "circle",
    ]
    assert one_line_error(capsys, [*base, "--dt", "1"]) == (
        f"spheredens: error: --dt: {str(tmp_path / 'x.npz')!r} holds its own times ('t' of "
        f"{str(tmp_path / 'x.npz')!r}); give no --times or --dt"
    )
    np.save(tmp_path / "y.npy", unit_vectors((3, N, 2)))
    assert one_line_error(
        capsys,
        [
            "convert-particles",
            str(tmp_path / "y.npy"),
            str(tmp_path / "x.nc"),
            "--domain",
            "circle",
            "--dt",
            "1",
            "--times",
            "0",
            "1",
            "2",
        ],
    ) == (
        "spheredens: error: --dt: give the snapshot times (--times) or their spacing (--dt), not "
        "both"
    )
    with pytest.raises(
        sd.ConfigError, match=r"^dt=\.\.\.: must be a finite number > 0, got -1\.0$"
    ):
        convert_particles(tmp_path / "y.npy", domain="circle", dt=-1.0)


# -- the probe: strings, complex numbers, unknown models, 0 particles, n + 1 weights ------------
@pytest.mark.parametrize(
    "dtype, words",
    [
        (str, "strings (dtype <U"),
        (complex, "complex numbers (dtype complex128)"),
        (bool, "booleans (dtype bool)"),
    ],
)
def test_positions_that_are_not_real_numbers_are_refused(tmp_path, capsys, dtype, words):
    np.save(tmp_path / "x.npy", unit_vectors((3, N, 2)).astype(dtype))
    line = one_line_error(
        capsys,
        [
            "convert-particles",
            str(tmp_path / "x.npy"),
            str(tmp_path / "x.nc"),
            "--domain",
            "circle",
            "--dt",
            "1",
        ],
    )
    assert line.startswith(f"spheredens: error: {str(tmp_path / 'x.npy')!r} holds {words}")
    assert line.endswith("), not real numbers")
    np.savez(tmp_path / "w.npz", x=unit_vectors((3, N, 2)), t=np.array(["0", "1", "2"]))
    with pytest.raises(
        sd.SchemaError, match=r"^'t' of .* holds strings \(dtype <U1\), not real numbers$"
    ):
        convert_particles(tmp_path / "w.npz", domain="circle")


def test_unknown_model_is_refused(tmp_path, capsys):
    np.save(tmp_path / "x.npy", unit_vectors((3, N, 2)))
    out = tmp_path / "x.nc"
    assert one_line_error(
        capsys,
        [
            "convert-particles",
            str(tmp_path / "x.npy"),
            str(out),
            "--domain",
            "circle",
            "--dt",
            "1",
            "--model",
            "bogus",
        ],
    ) == (
        "spheredens: error: --model: 'bogus' is not a known model; choose one of 'sa', "
        "'sa_zero_temperature', "
        "'usa', 'usa_av'"
    )
    assert not out.exists()
    with pytest.raises(sd.ConfigError, match=r"^attrs\['model'\]: 'bogus' is not a known model"):
        convert_particles(tmp_path / "x.npy", domain="circle", dt=1.0, attrs={"model": "bogus"})
    assert (
        convert(
            capsys, tmp_path / "x.npy", out, "--domain", "circle", "--dt", "1", "--model", "usa"
        ).attrs["model"]
        == "usa"
    )


def test_zero_particles_and_wrong_weights_are_one_line(tmp_path, capsys):
    out = tmp_path / "x.nc"
    np.savez(tmp_path / "z.npz", position=np.zeros((3, 0, 2)), t=[0.0, 1.0, 2.0])
    z = repr(str(tmp_path / "z.npz"))
    assert one_line_error(
        capsys, ["convert-particles", str(tmp_path / "z.npz"), str(out), "--domain", "circle"]
    ) == (
        f"spheredens: error: no snapshots or no particles: 'position' of {z} of shape (3, 0, 2) is "
        "read as "
        "(time, n, d): 3 times, 0 particles"
    )
    np.savez(
        tmp_path / "w.npz",
        position=unit_vectors((3, 5, 2)),
        t=[0.0, 1.0, 2.0],
        weight=np.full(6, 1 / 6),
    )
    w = repr(str(tmp_path / "w.npz"))
    assert one_line_error(
        capsys, ["convert-particles", str(tmp_path / "w.npz"), str(out), "--domain", "circle"]
    ) == (
        f"spheredens: error: 6 weights ('weight' of {w}) for 5 particles: 'position' of {w} of "
        "shape (3, 5, 2) is "
        "read as (time, n, d); with 6 weights expected (time, 6, 2)"
    )
    np.savez(tmp_path / "s.npz", theta=np.zeros((0, 4)))
    with pytest.raises(
        sd.SchemaError,
        match=r"^no snapshots or no particles: .* of shape \(0, 4\) is read as "
        r"\(time, n\): 0 times, 4 particles$",
    ):
        convert_particles(tmp_path / "s.npz", domain="circle", dt=1.0)
    assert not out.exists()


@pytest.fixture(scope="module")
def density(tmp_path_factory):
    """A tiny circle run (3 snapshots at t = 0, 1, 2)."""
    path = tmp_path_factory.mktemp("density") / "d.nc"
    cfg = sd.config_from_dict(
        {
            "model": {"name": "sa", "beta": 2.0},
            "initial": {"name": "uniform"},
            "discretization": {"scheme": "fv", "n": 32},
            "time": {"t_end": 2.0, "times": [0.0, 1.0, 2.0]},
        }
    )
    sd.run(cfg, output=path, progress=False)
    return path


def _particle_file(path, position, **variables):
    data = {"position": (("time", "particle", "component"), position), **variables}
    ds = xr.Dataset(
        data,
        coords={"time": [0.0, 1.0, 2.0]},
        attrs={"spheredens_schema": "spheredens-particles-1", "domain": "circle"},
    )
    ds.to_netcdf(
        path,
        **({"engine": "h5netcdf", "invalid_netcdf": True} if np.iscomplexobj(position) else {}),
    )
    return path


@pytest.mark.parametrize(
    "case, words",
    [
        ("zero_particles", "no snapshots or no particles (position has shape (3, 0, 2))"),
        ("weights_n_plus_1", "'particle_weight' must be 5 non-negative numbers summing to 1"),
        ("string_weights", "'particle_weight' holds strings (dtype <U1), not real numbers"),
        ("string_positions", "'position' holds strings (dtype <U"),
        (
            "complex_positions",
            "'position' holds records (dtype |V16), not real numbers",
        ),  # complex, as netCDF4 reads it
    ],
)
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


# -- --dt alone: nothing counts the axes ----------------
# An (n, time, d) array given with --dt, without weights, has no count of times to be checked
# against. No layout is guessed from the shape: with --config the times k dt must end by its
# t_end (refused in one line naming the shapes and the --axes that fits); without, a time axis
# longer than the particle axis is told in one note line; the "wrote" line and the attribute
# source_layout say how the array was read. compare says when it uses only some snapshots.
CIRCLE_RUN = {
    "model": {"name": "sa", "beta": 2.0},
    "initial": {"name": "uniform"},
    "discretization": {"scheme": "fv", "n": 32},
    "time": {"t_end": 1.5, "times": TIMES},
}


@pytest.fixture
def run_toml(tmp_path):
    """The configuration of a circle run to t_end = 1.5 (snapshots at TIMES)."""
    path = tmp_path / "run.toml"
    path.write_text(sd.config_from_dict(CIRCLE_RUN).to_toml())
    return path


def convert_lines(capsys, *argv):
    """Run convert-particles, which must succeed: (stdout, stderr) as lists of lines."""
    assert main(["convert-particles", *map(str, argv)]) == 0, capsys.readouterr().err
    captured = capsys.readouterr()
    return captured.out.splitlines(), captured.err.splitlines()


def test_transposed_array_with_dt_and_config_is_refused_naming_the_shapes(
    tmp_path, capsys, run_toml
):
    """(n, time, d) = (40, 4, 2) with --dt 0.5 reads as 40 times, t = 0 .. 19.5, past the
    configuration's t_end = 1.5 (at most 4 times k 0.5 fit): one line, the --axes that fits."""
    x = unit_vectors((len(TIMES), N, 2))
    np.save(tmp_path / "x.npy", np.transpose(x, (1, 0, 2)))
    src, out = repr(str(tmp_path / "x.npy")), tmp_path / "x.nc"
    line = one_line_error(
        capsys,
        [
            "convert-particles",
            str(tmp_path / "x.npy"),
            str(out),
            "--config",
            str(run_toml),
            "--dt",
            "0.5",
        ],
    )
    assert line == (
        f"spheredens: error: {N} times of spacing 0.5 (--dt) end at t = 19.5, after t_end = 1.5 of "
        "the "
        f"configuration {run_toml}: {src} of shape ({N}, 4, 2) is read as (time, n, d); up to "
        "t_end fit "
        "at most 4 times, expected (<= 4, n, 2); if the array is (n, time, d), give --axes "
        "n,time,d "
        "(--axes time,n,d keeps this reading)"
    )
    assert not out.exists()
    # angles (n, time)
    np.save(tmp_path / "a.npy", np.arctan2(x[..., 1], x[..., 0]).T)
    line = one_line_error(
        capsys,
        [
            "convert-particles",
            str(tmp_path / "a.npy"),
            str(out),
            "--config",
            str(run_toml),
            "--dt",
            "0.5",
        ],
    )
    assert line.endswith(
        f"of shape ({N}, 4) is read as (time, n); up to t_end fit at most 4 times, expected "
        "(<= 4, n); if the array is (n, time), give --axes n,time (--axes time,n keeps this "
        "reading)"
    )
    assert not out.exists()
    # the Python API names its keyword arguments and a RunConfig as "the given configuration"
    with pytest.raises(
        sd.SchemaError,
        match=r"^40 times of spacing 0\.5 \(dt=\.\.\.\) end at t = 19\.5, after "
        r"t_end = 1\.5 of the given configuration: .* give axes n,time,d "
        r"\(axes time,n,d keeps this reading\)$",
    ):
        convert_particles(tmp_path / "x.npy", dt=0.5, config=sd.config_from_dict(CIRCLE_RUN))


def test_with_config_the_axes_option_converts_or_keeps_the_reading(tmp_path, capsys, run_toml):
    x = unit_vectors((len(TIMES), N, 2))
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", np.transpose(x, (1, 0, 2)))
    config = ["--config", run_toml, "--dt", "0.5"]
    a = convert(
        capsys, tmp_path / "x.npy", tmp_path / "x.nc", *config
    )  # (time, n, d): t = 0 .. 1.5 fits
    b = convert(capsys, tmp_path / "y.npy", tmp_path / "y.nc", *config, "--axes", "n,time,d")
    assert_same_measure(a, b)
    np.testing.assert_array_equal(a["time"].values, TIMES)
    assert (
        a.attrs["model"] == "sa"
        and a.attrs["source_layout"] == f"shape (4, {N}, 2) read as (time, n, d)"
    )
    assert b.attrs["source_layout"] == f"shape ({N}, 4, 2) read as (n, time, d)"
    # --axes stating the layout lifts the check: 40 times past t_end, as the user says
    c = convert(capsys, tmp_path / "y.npy", tmp_path / "z.nc", *config, "--axes", "time,n,d")
    assert c.sizes["time"] == N and c.sizes["particle"] == 4 and float(c["time"].values[-1]) == 19.5


def test_times_past_t_end_by_one_step_are_refused_and_round_off_is_not(tmp_path, capsys, run_toml):
    """5 times of spacing 0.5 end at 2 > 1.5: refused, and no other order fits (no hint). Times
    k 0.1 that end at t_end up to round-off (3 x 0.1 = 0.30000000000000004 > 0.3) fit."""
    np.save(tmp_path / "x.npy", unit_vectors((5, N, 2)))
    line = one_line_error(
        capsys,
        [
            "convert-particles",
            str(tmp_path / "x.npy"),
            str(tmp_path / "x.nc"),
            "--config",
            str(run_toml),
            "--dt",
            "0.5",
        ],
    )
    assert line.endswith(
        f"5 times of spacing 0.5 (--dt) end at t = 2, after t_end = 1.5 of the configuration "
        f"{run_toml}: {str(tmp_path / 'x.npy')!r} of shape (5, {N}, 2) is read as (time, n, d); up "
        "to "
        "t_end fit at most 4 times, expected (<= 4, n, 2) (--axes time,n,d keeps this reading)"
    )
    short = tmp_path / "short.toml"
    short.write_text(
        sd.config_from_dict({**CIRCLE_RUN, "time": {"t_end": 0.3, "snapshots": 4}}).to_toml()
    )
    np.save(tmp_path / "y.npy", unit_vectors((4, N, 2)))
    assert 3 * 0.1 > 0.3
    ds = convert(capsys, tmp_path / "y.npy", tmp_path / "y.nc", "--config", short, "--dt", "0.1")
    assert ds.sizes["time"] == 4
    np.save(tmp_path / "z.npy", unit_vectors((5, N, 2)))
    assert "up to t_end fit at most 4 times" in one_line_error(
        capsys,
        [
            "convert-particles",
            str(tmp_path / "z.npy"),
            str(tmp_path / "z.nc"),
            "--config",
            str(short),
            "--dt",
            "0.1",
        ],
    )


def test_without_config_a_time_axis_longer_than_the_particle_axis_is_noted_once(tmp_path, capsys):
    x = unit_vectors((len(TIMES), N, 2))
    np.save(tmp_path / "y.npy", np.transpose(x, (1, 0, 2)))  # (40, 4, 2), read as 40 times
    src, out = repr(str(tmp_path / "y.npy")), tmp_path / "y.nc"
    stdout, stderr = convert_lines(
        capsys, tmp_path / "y.npy", out, "--domain", "circle", "--dt", "0.5"
    )
    assert stderr == [
        f"spheredens: note: {src} of shape ({N}, 4, 2) is read as (time, n, d): {N} times x 4 "
        "particles, more times than particles (--dt gives no count of times to check); give --axes "
        "if "
        "the array is another layout, e.g. --axes n,time,d"
    ]
    assert stdout == [
        f"wrote {out.resolve()}  ({N} times, t = 0 .. 19.5, dt 0.5; 4 particles; d = 2; shape "
        f"({N}, 4, "
        "2) read as (time, n, d))"
    ]
    assert open_particles(out).sizes["time"] == N  # a note: converted as read
    # (time, n, d) with more particles than times, --axes given, weights or times given: no note
    np.save(tmp_path / "x.npy", x)
    np.savez(tmp_path / "w.npz", x=np.transpose(x, (1, 0, 2)), weight=np.full(4, 0.25))
    for argv in (
        [tmp_path / "x.npy", "--dt", "0.5"],
        [tmp_path / "y.npy", "--dt", "0.5", "--axes", "n,time,d"],
        [tmp_path / "y.npy", "--dt", "0.5", "--axes", "time,n,d"],
        [tmp_path / "w.npz", "--dt", "0.5"],
        [tmp_path / "y.npy", "--times", *map(str, 0.5 * np.arange(N))],
    ):
        stdout, stderr = convert_lines(
            capsys, argv[0], tmp_path / "o.nc", "--domain", "circle", "--overwrite", *argv[1:]
        )
        assert stderr == [] and len(stdout) == 1 and stdout[0].startswith("wrote "), (argv, stderr)
    # as many times as particles: no note (the rule is "longer than")
    np.save(tmp_path / "s.npy", unit_vectors((6, 6, 2)))
    assert (
        convert_lines(
            capsys, tmp_path / "s.npy", tmp_path / "s.nc", "--domain", "circle", "--dt", "1"
        )[1]
        == []
    )


def test_the_wrote_line_says_what_was_read(theta, tmp_path, capsys):
    np.save(tmp_path / "a.npy", theta)
    out = tmp_path / "a.nc"
    assert convert_lines(
        capsys, tmp_path / "a.npy", out, "--domain", "circle", "--times", "0", "0.5", "2", "3"
    ) == (
        [
            f"wrote {out.resolve()}  (4 times, t = 0 .. 3; {N} particles; d = 2; shape (4, {N}) "
            "read as (time, n))"
        ],
        [],
    )
    np.save(tmp_path / "b.npy", theta[:1])
    assert convert_lines(
        capsys, tmp_path / "b.npy", tmp_path / "b.nc", "--domain", "circle", "--dt", "1"
    )[0] == [
        f"wrote {(tmp_path / 'b.nc').resolve()}  (1 time, t = 0; {N} particles; d = 2; shape (1, "
        f"{N}) read as "
        "(time, n))"
    ]


def test_python_api_tells_notify_or_the_log(tmp_path, caplog):
    np.save(tmp_path / "y.npy", unit_vectors((N, 4, 3)))
    told = []
    ds = convert_particles(
        tmp_path / "y.npy", domain="sphere", dt=1.0, notify=lambda *a: told.append(a)
    )
    assert told == [
        (
            "layout",
            f"{str(tmp_path / 'y.npy')!r} of shape ({N}, 4, 3) is read as (time, n, d): {N} "
            "times x 4 particles, more times than particles (dt=... gives no count of times to "
            "check); give axes if the array is another layout, e.g. axes n,time,d",
        )
    ]
    assert ds.attrs["source_layout"] == f"shape ({N}, 4, 3) read as (time, n, d)"
    with caplog.at_level("INFO", logger="spheredens.convert"):
        convert_particles(tmp_path / "y.npy", domain="sphere", dt=1.0)
    assert [r.getMessage() for r in caplog.records if r.name == "spheredens.convert"] == [
        told[0][1]
    ]
    told.clear()
    convert_particles(
        tmp_path / "y.npy",
        domain="sphere",
        dt=1.0,
        axes="n,time,d",
        notify=lambda *a: told.append(a),
    )
    assert told == []


def _converted(tmp_path, name, n_t, seed=1):
    """A converted circle particle file of n_t snapshots at t = 0, 1, ... (the density's
    spacing)."""
    np.save(tmp_path / f"{name}.npy", unit_vectors((n_t, N, 2), seed))
    path = tmp_path / f"{name}.nc"
    convert_particles(tmp_path / f"{name}.npy", domain="circle", dt=1.0).to_netcdf(path)
    return str(path)


def test_compare_notes_the_snapshots_it_does_not_use(density, tmp_path, capsys):
    """The density has t = 0, 1, 2. A particle file of 5 snapshots (t = 0 .. 4) is compared at 3
    of them, and one of 2 snapshots uses 2 of the density's 3: each file is named once, in one
    note line, recorded in times_not_compared; the times compared are the file's time coordinate."""
    d = str(density)
    long, short = _converted(tmp_path, "long", 5), _converted(tmp_path, "short", 2, seed=2)
    same = _converted(tmp_path, "same", 3, seed=3)
    out = tmp_path / "c.nc"
    warning = "spheredens: warning: {} carr{} no model (converted from another code)"

    def notes(*particles):
        assert main(["compare", d, *particles, "--no-figure", "-o", str(out), "--overwrite"]) == 0
        err = capsys.readouterr().err.splitlines()
        assert len(err) == 1 + sum(line.startswith("spheredens: note: ") for line in err), err
        assert err[0].startswith(
            warning.format(", ".join(particles), "ies" if len(particles) == 1 else "y")
        ), err
        return err[1:], xr.open_dataset(out)

    lines, cmp = notes(long)
    assert lines == [
        f"spheredens: note: {long}: compared at the 3 times it shares with {d}, of its 5"
    ]
    assert cmp.attrs["times_not_compared"] == lines[0].removeprefix("spheredens: note: ")
    np.testing.assert_array_equal(cmp["time"].values, [0.0, 1.0, 2.0])
    lines, cmp = notes(short)
    assert lines == [
        f"spheredens: note: {d}: compared at the 2 times it shares with {short}, of its 3"
    ]
    np.testing.assert_array_equal(cmp["time"].values, [0.0, 1.0])
    lines, cmp = notes(same)  # every snapshot of both: no note, no attribute
    assert lines == [] and "times_not_compared" not in cmp.attrs
    lines, cmp = notes(long, short, same)
    assert lines == [
        f"spheredens: note: {d}: compared at the 2 times it shares with every particle file, of "
        "its 3",
        f"spheredens: note: {long}: compared at the 2 times common to {d} and every particle file, "
        "of "
        "its 5",
        f"spheredens: note: {same}: compared at the 2 times common to {d} and every particle file, "
        "of "
        "its 3",
    ]
    assert cmp.attrs["times_not_compared"].splitlines() == [
        line.removeprefix("spheredens: note: ") for line in lines
    ]


def test_compare_at_one_common_time_notes_it_and_at_none_refuses(density, tmp_path, capsys):
    d = str(density)
    one = _converted(tmp_path, "one", 1)
    out = tmp_path / "c.nc"
    assert main(["compare", d, one, "--no-figure", "-o", str(out)]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err[1:] == [
        f"spheredens: note: {d}: compared at the 1 time it shares with {one}, of its 3"
    ]
    x = unit_vectors((2, N, 2))
    np.savez(tmp_path / "late.npz", x=x, t=[5.0, 6.0])
    late = str(tmp_path / "late.nc")
    convert_particles(tmp_path / "late.npz", domain="circle").to_netcdf(late)
    line = one_line_error(
        capsys, ["compare", d, late, "--no-figure", "-o", str(tmp_path / "c2.nc")]
    )
    assert line.startswith(
        "spheredens: error: the density and particle files have no snapshot time in common "
        "(density: 0, 1, 2; particles: 5, 6)"
    )
    assert not (tmp_path / "c2.nc").exists()
