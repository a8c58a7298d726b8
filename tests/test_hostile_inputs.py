"""Hostile inputs: every hostile input is refused in one line with exit code 2 (or runs
correctly, with the exit code given), and no file that existed before the command is changed
(content and mode).

A new case is one line of :data:`CASES`:

    (id, files, argv, exit codes accepted, words the error line must contain)

- ``files`` maps names (relative to a fresh working directory) to their content: a str (text),
  bytes, or a callable ``f(path)`` that creates the file (e.g. an npz); names ending in ``/``
  are folders.
- ``argv`` are the arguments of ``python -m spheredens``; ``{tmp}`` is the working directory.
- with exit code 2, stderr must be exactly one line starting ``spheredens: error:``, and contain
  every one of the words (case-insensitive).

Every command runs in a subprocess (an exit() of a C library, a traceback or a wrong exit code
is seen as the user sees it) with a timeout, and an address space of 16 GiB
(:data:`ADDRESS_SPACE`), so that what is refused for memory is the same on every machine.
"""

from __future__ import annotations

import hashlib
import os
import resource
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

CONFIG = """\
[model]
name = "sa"
beta = {beta}
{model}
[domain]
name = "{domain}"
[initial]
{initial}
[discretization]
{discretization}
[time]
t_end = {t_end}
snapshots = 3
{time}
"""


def circle(
    model: str = "",
    initial: str = 'name = "uniform"',
    discretization: str = 'scheme = "fv"\nn = 32',
    t_end: str = "0.5",
    time: str = "",
    beta: str = "2.0",
) -> str:
    """A small circle configuration with one part replaced."""
    return CONFIG.format(
        domain="circle",
        model=model,
        initial=initial,
        discretization=discretization,
        t_end=t_end,
        time=time,
        beta=beta,
    )


def sphere(
    model: str = "",
    initial: str = 'name = "uniform"',
    discretization: str = 'scheme = "fv"\nnlat = 16',
    t_end: str = "0.5",
    time: str = "",
    beta: str = "2.0",
) -> str:
    """A small sphere configuration with one part replaced."""
    return CONFIG.format(
        domain="sphere",
        model=model,
        initial=initial,
        discretization=discretization,
        t_end=t_end,
        time=time,
        beta=beta,
    )


def _npz(**arrays):
    def make(path: Path) -> None:
        np.savez(path, **arrays)

    return make


def _density_run(text: str, *, t_end: float = 0.25, snapshots: int = 2, corrupt: str = ""):
    """A file maker: the complete run of the configuration ``text`` with the horizon ``t_end``,
    ``snapshots`` (a shorter one of the same spacing, which ``--resume`` extends), then damaged:
    ``"scale"`` multiplies the checkpoint by 2 (its checksum kept), ``"scale_old"`` too without a
    checksum (a file of an older version), ``"nan"`` puts a NaN in the last stored snapshot (no
    checksum)."""

    def make(path: Path) -> None:
        import tomllib

        import xarray as xr

        import spheredens as sd

        data = tomllib.loads(text)
        data["time"].update(t_end=float(t_end), snapshots=int(snapshots))
        data.pop("particles", None)
        data.setdefault("output", {})["figure"] = False
        sd.run(sd.config_from_dict(data, base_dir=path.parent), output=path, progress=False)
        if not corrupt:
            return
        with xr.open_dataset(path) as ds:
            ds = ds.load()
        if corrupt.startswith("scale"):
            ds["checkpoint_state"] = ds["checkpoint_state"] * 2.0
        else:
            rho = ds["rho"].values.copy()
            rho[-1, 0] = np.nan
            ds["rho"] = (ds["rho"].dims, rho, ds["rho"].attrs)
        if corrupt != "scale":
            del ds.attrs["checkpoint_sha256"]
        ds.to_netcdf(path)

    return make


def _particle_run(text: str):
    """A file maker: the particle run of the configuration ``text`` (with a [particles] table)."""

    def make(path: Path) -> None:
        import tomllib

        import spheredens as sd

        sd.run_particles(
            sd.config_from_dict(tomllib.loads(text), base_dir=path.parent),
            output=path,
            progress=False,
        )

    return make


def _combined(path: Path) -> None:
    """A synthetic combined sweep over beta, as analyze-beta reads it."""
    import xarray as xr

    t = np.linspace(0.0, 4.0, 41)
    w2 = np.array([0.9 * np.exp(-r * t) + 0.05 * t for r in (0.5, 0.4)])
    xr.Dataset(
        {
            "w2_projection": (("beta", "time"), w2),
            "Q": (("row", "col"), np.eye(2)),
            "K": (("row", "col"), np.eye(2)),
            "V": (("row", "col"), np.diag([1.0, 0.5])),
        },
        coords={"beta": [10.0, 30.0], "time": t},
    ).to_netcdf(path)


PARTICLES = "[particles]\nn = 20\ndt = 0.05\n"

# (id, files, argv, exit codes accepted, words the one error line contains)
CASES: list[tuple] = [
    # -- shtns grids: a grid shtns refuses ends in one line, never silently --
    (
        "lowrank_meridian_lmax7",
        {
            "c.toml": sphere(
                model="Q = [[1.0, 0, 0], [0, 1.0, 0], [0, 0, 1.0]]\n"
                "K = [[1.2, 0, 0], [0, 0, -1.2], [0, 1.2, 0]]",
                discretization='scheme = "sh_spectral"\nlmax = 7\ninteraction = "lowrank_meridian"',
            )
        },
        ["run", "c.toml", "--no-figure"],
        (0,),
        (),
    ),  # completes (32 rings; it exited silently at 24)
    # -- convert-particles (item 4) --
    (
        "convert_transposed_dt_config",
        {"c.toml": circle(), "x.npy": lambda p: np.save(p, np.tile([0.6, 0.8], (5, 3, 1)))},
        ["convert-particles", "x.npy", "o.nc", "--config", "c.toml", "--dt", "0.25"],
        (2,),
        (
            "5 times of spacing 0.25 (--dt) end at t = 1",
            "after t_end = 0.5 of the configuration c.toml",
            "shape (5, 3, 2)",
            "expected (<= 3, n, 2)",
            "--axes n,time,d",
        ),
    ),
    (
        "convert_transposed_dt_config_axes",
        {"c.toml": circle(), "x.npy": lambda p: np.save(p, np.tile([0.6, 0.8], (5, 3, 1)))},
        [
            "convert-particles",
            "x.npy",
            "o.nc",
            "--config",
            "c.toml",
            "--dt",
            "0.25",
            "--axes",
            "n,time,d",
        ],
        (0,),
        (),
    ),
    (
        "convert_transposed_dt_note",
        {"x.npy": lambda p: np.save(p, np.tile([0.6, 0.8], (5, 3, 1)))},
        ["convert-particles", "x.npy", "o.nc", "--domain", "circle", "--dt", "0.25"],
        (0,),
        (),
    ),
    (
        "convert_degrees",
        {"a.npy": lambda p: np.save(p, np.linspace(-170.0, 170.0, 12).reshape(3, 4))},
        ["convert-particles", "a.npy", "o.nc", "--domain", "circle", "--dt", "1"],
        (2,),
        ("outside [-pi, pi] and [0, 2 pi]", "--degrees"),
    ),
    (
        "convert_degrees_option",
        {"a.npy": lambda p: np.save(p, np.linspace(-170.0, 170.0, 12).reshape(3, 4))},
        ["convert-particles", "a.npy", "o.nc", "--domain", "circle", "--dt", "1", "--degrees"],
        (0,),
        (),
    ),
    (
        "convert_not_unit",
        {"x.npz": _npz(x=np.full((3, 4, 2), 0.8), t=[0.0, 1.0, 2.0])},
        ["convert-particles", "x.npz", "o.nc", "--domain", "circle"],
        (2,),
        ("not unit vectors to 1e-06", "worst row is [0, 0]", "norm 1.13137085"),
    ),
    (
        "convert_transposed_times",
        {"x.npy": lambda p: np.save(p, np.tile([0.6, 0.8], (5, 3, 1)))},
        ["convert-particles", "x.npy", "o.nc", "--domain", "circle", "--times", "0", "1", "2"],
        (2,),
        ("3 times for 5 snapshots", "shape (5, 3, 2)", "expected (3, n, 2)", "--axes n,time,d"),
    ),
    (
        "convert_transposed_file_t",
        {"x.npz": _npz(x=np.tile([0.6, 0.8], (5, 3, 1)), t=[0.0, 1.0, 2.0])},
        ["convert-particles", "x.npz", "o.nc", "--domain", "circle"],
        (2,),
        ("3 times for 5 snapshots", "--axes n,time,d"),
    ),
    (
        "convert_axes_option",
        {"x.npy": lambda p: np.save(p, np.tile([0.6, 0.8], (5, 3, 1)))},
        [
            "convert-particles",
            "x.npy",
            "o.nc",
            "--domain",
            "circle",
            "--times",
            "0",
            "1",
            "2",
            "--axes",
            "n,time,d",
        ],
        (0,),
        (),
    ),
    (
        "convert_bad_axes",
        {"x.npy": lambda p: np.save(p, np.tile([0.6, 0.8], (5, 3, 1)))},
        [
            "convert-particles",
            "x.npy",
            "o.nc",
            "--domain",
            "circle",
            "--dt",
            "1",
            "--axes",
            "n,t,d",
        ],
        (2,),
        ("--axes", "'n,t,d'", "n,time,d"),
    ),
    (
        "convert_string_positions",
        {"s.npy": lambda p: np.save(p, np.tile(["0.6", "0.8"], (3, 4, 1)))},
        ["convert-particles", "s.npy", "o.nc", "--domain", "circle", "--dt", "1"],
        (2,),
        ("strings", "not real numbers"),
    ),
    (
        "convert_complex_positions",
        {"c.npy": lambda p: np.save(p, np.tile([0.6 + 0j, 0.8], (3, 4, 1)))},
        ["convert-particles", "c.npy", "o.nc", "--domain", "circle", "--dt", "1"],
        (2,),
        ("complex numbers", "not real numbers"),
    ),
    (
        "convert_model_bogus",
        {"x.npy": lambda p: np.save(p, np.tile([0.6, 0.8], (3, 4, 1)))},
        [
            "convert-particles",
            "x.npy",
            "o.nc",
            "--domain",
            "circle",
            "--dt",
            "1",
            "--model",
            "bogus",
        ],
        (2,),
        ("--model", "'bogus' is not a known model", "'sa'"),
    ),
    (
        "convert_zero_particles",
        {"z.npz": _npz(position=np.zeros((3, 0, 2)), t=[0.0, 1.0, 2.0])},
        ["convert-particles", "z.npz", "o.nc", "--domain", "circle"],
        (2,),
        ("no particles", "(3, 0, 2)"),
    ),
    (
        "convert_weights_n_plus_1",
        {
            "w.npz": _npz(
                position=np.tile([0.6, 0.8], (3, 4, 1)), t=[0.0, 1.0, 2.0], weight=np.full(5, 0.2)
            )
        },
        ["convert-particles", "w.npz", "o.nc", "--domain", "circle"],
        (2,),
        ("5 weights", "for 4 particles"),
    ),
    (
        "convert_no_times",
        {"x.npy": lambda p: np.save(p, np.tile([0.6, 0.8], (3, 4, 1)))},
        ["convert-particles", "x.npy", "o.nc", "--domain", "circle"],
        (2,),
        ("no times", "--times", "--dt"),
    ),
    (
        "convert_input_directory",
        {"d.npy/": None},
        ["convert-particles", "d.npy", "o.nc", "--domain", "circle", "--dt", "1"],
        (2,),
        ("is a directory, not a .npy or .npz file",),
    ),
    (
        "convert_input_dev_null",
        {},
        ["convert-particles", "/dev/null", "o.nc", "--domain", "circle", "--dt", "1"],
        (2,),
        ("is a character device, not a regular file",),
    ),
    (
        "convert_times_and_dt",
        {"x.npy": lambda p: np.save(p, np.tile([0.6, 0.8], (3, 4, 1)))},
        [
            "convert-particles",
            "x.npy",
            "o.nc",
            "--domain",
            "circle",
            "--times",
            "0",
            "1",
            "2",
            "--dt",
            "1",
        ],
        (2,),
        ("--dt", "not both"),
    ),
    # -- unstable runs (item 5) --
    (
        "fourier_176_euler",
        {
            "c.toml": circle(
                discretization='scheme = "fourier"\nn = 176\nintegrator = "euler"', t_end="40.0"
            ).replace("beta = 2.0", "beta = 86.0")
        },
        ["run", "c.toml"],
        (2,),
        (
            "discretization.integrator",
            "'euler' cannot be stable for scheme 'fourier' at any time.cfl",
            "'rk4' (time.cfl <= 0.9)",
        ),
    ),
    (
        "fourier_176_ssprk2",
        {
            "c.toml": circle(
                discretization='scheme = "fourier"\nn = 176\nintegrator = "ssprk2"', t_end="40.0"
            ).replace("beta = 2.0", "beta = 86.0")
        },
        ["run", "c.toml"],
        (2,),
        ("discretization.integrator", "'ssprk2' cannot be stable", "'ssprk3' (time.cfl <= 0.55)"),
    ),
    (
        "sh_spectral_31_euler",
        {
            "c.toml": sphere(
                discretization='scheme = "sh_spectral"\nlmax = 31\nintegrator = "euler"',
                t_end="40.0",
            )
        },
        ["run", "c.toml"],
        (2,),
        (
            "discretization.integrator",
            "'euler' cannot be stable for scheme 'sh_spectral'",
            "'rk4' (time.cfl <= 0.9)",
        ),
    ),
    (
        "fourier_ssprk3_cfl_0.8",
        {
            "c.toml": circle(
                discretization='scheme = "fourier"\nn = 32\nintegrator = "ssprk3"', time="cfl = 0.8"
            )
        },
        ["run", "c.toml"],
        (2,),
        (
            "time.cfl",
            "= 0.8 is unstable with integrator 'ssprk3' for scheme 'fourier'",
            "use 'rk4' (time.cfl <= 0.9)",
        ),
    ),
    (
        "fv_euler_cfl_0.5_runs",
        {
            "c.toml": circle(
                discretization='scheme = "fv"\nn = 32\nintegrator = "euler"', time="cfl = 0.5"
            )
        },
        ["run", "c.toml", "-q"],
        (0,),
        (),
    ),
    (
        "t_end_1e300",
        {"c.toml": circle(t_end="1e300")},
        ["run", "c.toml"],
        (2,),
        ("time.t_end", "= 1e+300 would take at least", "more than 1e9", "use time.t_end <= "),
    ),
    (
        "max_dt_1e-300",
        {"c.toml": circle(time="max_dt = 1e-300")},
        ["run", "c.toml"],
        (2,),
        (
            "time.max_dt",
            "= 1e-300 would take at least t_end / max_dt = 5e+299 steps",
            "use max_dt >= 5e-10",
        ),
    ),
    (
        "zero_temperature_t_end_1e300",
        {
            "c.toml": circle(t_end="1e300").replace(
                'name = "sa"\nbeta = 2.0', 'name = "sa_zero_temperature"'
            )
        },
        ["run", "c.toml", "-q"],
        (1,),
        (),
    ),
    # -- resume, checkpoints, outputs (items 6, 7) --
    (
        "resume_scaled_checkpoint",
        {"c.toml": circle(), "run.nc": _density_run(circle(), corrupt="scale")},
        ["run", "c.toml", "-o", "run.nc", "--resume"],
        (2,),
        ("cannot resume", "run.nc", "checksum (checkpoint_sha256) does not match", "--overwrite"),
    ),
    (
        "resume_scaled_checkpoint_old_file",
        {"c.toml": circle(), "run.nc": _density_run(circle(), corrupt="scale_old")},
        ["run", "c.toml", "-o", "run.nc", "--resume"],
        (2,),
        ("run.nc", "the mass of its checkpoint (t = 0.25) is 2,", "--overwrite"),
    ),
    (
        "resume_nan_snapshot_old_file",
        {"c.toml": circle(), "run.nc": _density_run(circle(), corrupt="nan")},
        ["run", "c.toml", "-o", "run.nc", "--resume"],
        (2,),
        ("run.nc", "rho holds non-finite values (NaN or inf) at t = 0.25", "--overwrite"),
    ),
    (
        "resume_changed_beta",
        {"c.toml": circle().replace("beta = 2.0", "beta = 1.5"), "run.nc": _density_run(circle())},
        ["run", "c.toml", "-o", "run.nc", "--resume"],
        (2,),
        ("different configuration", "model.beta is 2.0 in the file, 1.5 in the configuration"),
    ),
    (
        "resume_changed_spacing",
        {"c.toml": circle(t_end="1.0"), "run.nc": _density_run(circle())},
        ["run", "c.toml", "-o", "run.nc", "--resume"],
        (2,),
        (
            "time.t_end is 0.25 in the file, 1.0 in the configuration",
            "moves the snapshots already written",
            "the file has a snapshot at t = 0.25 that the configuration does not",
        ),
    ),
    (
        "compare_own_density_input",
        {
            "c.toml": circle() + PARTICLES,
            "d.nc": _density_run(circle()),
            "p.nc": _particle_run(circle() + PARTICLES),
        },
        ["compare", "d.nc", "p.nc", "-o", "d.nc", "--overwrite"],
        (2,),
        ("'d.nc' is the density file, an input of this command", "choose another output path"),
    ),
    (
        "compare_own_particle_input",
        {
            "c.toml": circle() + PARTICLES,
            "d.nc": _density_run(circle()),
            "p.nc": _particle_run(circle() + PARTICLES),
        },
        ["compare", "d.nc", "p.nc", "-o", "p.nc", "--overwrite"],
        (2,),
        ("'p.nc' is a particle file", "input"),
    ),
    (
        "analyze_own_input",
        {"combined.nc": _combined},
        ["analyze-beta", "combined.nc", "-o", "combined.nc", "--overwrite"],
        (2,),
        ("'combined.nc' is the combined file", "input"),
    ),
    (
        "run_initial_path_is_the_output",
        {
            "run.nc": _density_run(circle()),
            "c.toml": circle(initial='name = "file"\npath = "run.nc"'),
        },
        ["run", "c.toml", "-o", "run.nc", "--overwrite"],
        (2,),
        ("output.path", "initial density file (initial.path)", "input"),
    ),
    (
        "particles_initial_path_is_the_output",
        {
            "run.nc": _density_run(circle()),
            "c.toml": circle(initial='name = "file"\npath = "run.nc"') + PARTICLES,
        },
        ["particles", "c.toml", "-o", "run.nc", "--overwrite"],
        (2,),
        ("initial density file (initial.path)", "input"),
    ),
    (
        "plot_existing_output",
        {"d.nc": _density_run(circle()), "d.png": b"keep"},
        ["plot", "d.nc"],
        (2,),
        ("'d.png' exists", "--overwrite"),
    ),
    (
        "animate_existing_output",
        {"d.nc": _density_run(circle()), "d.gif": b"keep"},
        ["animate", "d.nc", "-o", "d.gif"],
        (2,),
        ("'d.gif' exists", "--overwrite"),
    ),
    (
        "analyze_existing_output",
        {"combined.nc": _combined, "combined_beta_analysis.nc": b"keep"},
        ["analyze-beta", "combined.nc"],
        (2,),
        ("'combined_beta_analysis.nc' exists", "--overwrite"),
    ),
    (
        "analyze_existing_figure",
        {"combined.nc": _combined, "combined_beta_analysis.png": b"keep"},
        ["analyze-beta", "combined.nc"],
        (2,),
        ("'combined_beta_analysis.png' exists", "--overwrite"),
    ),
    # -- sweeps (item 6) --
    (
        "sweep_repeat_2_2.0",
        {
            "base.toml": circle(),
            "sweep.toml": 'base = "base.toml"\n[vary]\n"model.beta" = [2, 2.0]\n',
        },
        ["sweep", "sweep.toml"],
        (2,),
        ("sweep.vary.model.beta", "2 and 2.0 are equal as numbers", "list each value once"),
    ),
    (
        "sweep_repeat_zero_negzero",
        {
            "base.toml": circle(),
            "sweep.toml": 'base = "base.toml"\n[vary]\n"model.beta" = [0.0, -0.0]\n',
        },
        ["sweep", "sweep.toml"],
        (2,),
        ("sweep.vary.model.beta", "0.0 and -0.0 are equal as numbers"),
    ),
    (
        "sweep_repeat_matrix",
        {
            "base.toml": circle(),
            "sweep.toml": 'base = "base.toml"\n[vary]\n'
            '"model.V" = [[[1, 0], [0, 1]], [[1.0, 0.0], [0.0, 1.0]]]\n',
        },
        ["sweep", "sweep.toml"],
        (2,),
        ("sweep.vary.model.V", "[[1, 0], [0, 1]] and [[1.0, 0.0], [0.0, 1.0]]"),
    ),
    (
        "sweep_other_snapshot_times",
        {
            "base.toml": circle(),
            "sweep.toml": 'base = "base.toml"\n[vary]\n"time.t_end" = [0.5, 1.0]\n',
        },
        ["sweep", "sweep.toml"],
        (2,),
        ("sweep.vary.time.t_end", "changes the snapshot times"),
    ),
    (
        "sweep_vary_output_path",
        {
            "base.toml": circle(),
            "sweep.toml": 'base = "base.toml"\n[vary]\n"output.path" = ["a.nc", "b.nc"]\n',
        },
        ["sweep", "sweep.toml"],
        (2,),
        ("sweep.vary.output.path", "set by the sweep"),
    ),
    (
        "sweep_dashboard_address_bad",
        {"base.toml": circle(), "sweep.toml": 'base = "base.toml"\n[vary]\n"model.beta" = [2.0]\n'},
        ["sweep", "sweep.toml", "--dashboard-address", "nowhere"],
        (2,),
        ("--dashboard-address", "host:port"),
    ),
    (
        "sweep_dashboard_address_with_scheduler",
        {"base.toml": circle(), "sweep.toml": 'base = "base.toml"\n[vary]\n"model.beta" = [2.0]\n'},
        [
            "sweep",
            "sweep.toml",
            "--scheduler",
            "tcp://127.0.0.1:9",
            "--dashboard-address",
            "127.0.0.1:0",
        ],
        (2,),
        ("--dashboard-address", "local cluster only"),
    ),
    (
        "sweep_matrix_V_runs",
        {
            "base.toml": circle(),
            "sweep.toml": 'base = "base.toml"\n[vary]\n'
            '"model.V" = [[[1.0, 0.0], [0.0, 0.5]], [[2.0, 0.0], [0.0, 1.0]]]\n',
        },
        ["sweep", "sweep.toml", "-q", "--workers", "1"],
        (0,),
        (),
    ),
    # -- bounds, signals, one-line errors (items 6, 7) --
    (
        "bound_log_sl_tolerance_1e-320",
        {"c.toml": circle(discretization='scheme = "log_sl"\nn = 32\ntolerance = 1e-320')},
        ["run", "c.toml"],
        (2,),
        ("discretization.tolerance", ">= 1e-08", "tolerance^-1/2"),
    ),
    (
        "value_usa_av_log_sl",
        {
            "c.toml": circle(discretization='scheme = "log_sl"\nn = 32').replace(
                'name = "sa"', 'name = "usa_av"'
            )
            + "[auxiliary]\nslices = 4\n"
        },
        ["run", "c.toml"],
        (2,),
        ("discretization.scheme", "'log_sl' cannot run model 'usa_av'", "choose another scheme"),
    ),
    (
        "bound_probe_lmax255_slices4096",
        {
            "c.toml": '[model]\nname = "usa_av"\nbeta = 2.0\n[domain]\nname = "sphere"\n'
            '[auxiliary]\nkernel = "rope"\n'
            'slices = 4096\n[discretization]\nscheme = "sh_spectral"\nlmax = 255\n[time]\nt_end '
            "= 1.0\n"
        },
        ["run", "c.toml"],
        (2,),
        ("auxiliary.slices", "GiB of memory", "fewer slices (4096 now"),
    ),
    (
        "bound_bandwidth_4096_sphere",
        {"c.toml": sphere(initial='name = "random_smooth"\nbandwidth = 4096')},
        ["run", "c.toml"],
        (2,),
        ("initial.bandwidth", "more than 256", "days", "use bandwidth <= 256"),
    ),
    (
        "bound_bandwidth_257_sphere",
        {"c.toml": sphere(initial='name = "random_smooth"\nbandwidth = 257')},
        ["run", "c.toml"],
        (2,),
        ("initial.bandwidth", "more than 256", "at 256"),
    ),
    (
        "bound_bandwidth_5000_circle",
        {"c.toml": circle(initial='name = "random_smooth"\nbandwidth = 5000')},
        ["run", "c.toml"],
        (2,),
        ("initial.bandwidth", "more than 4096"),
    ),
    (
        "bound_bandwidth_64_sphere_runs",
        {"c.toml": sphere(initial='name = "random_smooth"\nbandwidth = 64', t_end="0.05")},
        ["run", "c.toml", "--no-figure"],
        (0,),
        (),
    ),
    (
        "bound_slices_5000",
        {"c.toml": '[model]\nname = "usa_av"\nbeta = 2.0\n[auxiliary]\nslices = 5000\n'},
        ["run", "c.toml"],
        (2,),
        ("auxiliary.slices", "4096"),
    ),
    (
        "bound_lmax_5000",
        {"c.toml": sphere(discretization='scheme = "sh_spectral"\nlmax = 5000')},
        ["run", "c.toml"],
        (2,),
        ("discretization.lmax", "1023"),
    ),
    (
        "bound_snapshots_memory",
        {
            "c.toml": circle(discretization='scheme = "fv"\nn = 65536', time="").replace(
                "snapshots = 3", "snapshots = 100000"
            )
        },
        ["run", "c.toml"],
        (2,),
        ("time.snapshots", "GiB", "fewer snapshots"),
    ),
    (
        "bound_times_100001",
        {
            "c.toml": "[time]\nt_end = 1.0\ntimes = ["
            + ", ".join(f"{i * 1e-6:.6f}" for i in range(100001))
            + "]\n"
        },
        ["run", "c.toml"],
        (2,),
        ("time.times", "100001 times", "more than 100000"),
    ),
    (
        "bound_particles_n_memory",
        {
            "c.toml": circle().replace("snapshots = 3", "snapshots = 20000")
            + "[particles]\nn = 100000\n"
        },
        ["particles", "c.toml"],
        (2,),
        ("particles.n", "GiB", "fewer particles"),
    ),
    (
        "bound_particles_dt_1e-12",
        {"c.toml": circle() + "[particles]\nn = 10\ndt = 1e-12\n"},
        ["particles", "c.toml"],
        (2,),
        ("particles.dt", "more than 1e9"),
    ),
    (
        "bound_seeds_1e9",
        {"c.toml": circle() + PARTICLES},
        ["particles", "c.toml", "--seeds", "0..1000000000"],
        (2,),
        ("--seeds", "1000000001 seeds", "more than 1000"),
    ),
    (
        "bound_sweep_12000_cases",
        {
            "s.toml": '[base]\n[base.time]\nt_end = 0.1\n[vary]\n"model.beta" = ['
            + ", ".join(f"{b}.0" for b in range(1, 201))
            + ']\n"time.cfl" = ['
            + ", ".join(f"{0.1 + 0.001 * i:.3f}" for i in range(60))
            + "]\n"
        },
        ["sweep", "s.toml"],
        (2,),
        ("sweep.vary", "12000 cases (200 x 60)", "more than 10000"),
    ),
    (
        "value_K_1e308",
        {"c.toml": circle(model="K = [[1e308, 0], [0, 1.0]]")},
        ["run", "c.toml"],
        (2,),
        ("model.K[0][0]", "at most 1e+06", "model.beta"),
    ),
    (
        "value_V_1e308",
        {"c.toml": circle(model="V = [[1e308, 0], [0, 1.0]]")},
        ["run", "c.toml"],
        (2,),
        ("model.V[0][0]", "at most 1e+06", "time.t_end"),
    ),
    (
        "value_K_1e308_sphere",
        {"c.toml": sphere(model="K = [[1e308, 0, 0], [0, 1.0, 0], [0, 0, 1.0]]")},
        ["run", "c.toml"],
        (2,),
        ("model.K[0][0]", "at most 1e+06"),
    ),
    (
        "value_V_1e308_sphere",
        {"c.toml": sphere(model="V = [[1.0, 1e308, 0], [0, 1.0, 0], [0, 0, 1.0]]")},
        ["run", "c.toml"],
        (2,),
        ("model.V[0][1]", "at most 1e+06"),
    ),
    (
        "value_nested_toml",
        {"c.toml": "a = " + "[" * 100_000 + "]" * 100_000 + "\n"},
        ["run", "c.toml"],
        (2,),
        ("c.toml", "nested hundreds of levels deep"),
    ),
    (
        "value_config_name_300",
        {},
        ["run", "a" * 300 + ".toml"],
        (2,),
        ("305 characters", "use a shorter name"),
    ),
    (
        "value_output_name_300",
        {"c.toml": circle()},
        ["run", "c.toml", "-o", "b" * 300 + ".nc"],
        (2,),
        ("--output", "303 characters", "use a shorter name"),
    ),
    (
        "value_config_symlink_loop",
        {"loop.toml": lambda p: os.symlink(p.name, p)},
        ["run", "loop.toml"],
        (2,),
        ("'loop.toml'", "loop of symbolic links", "fix or remove the link"),
    ),
    (
        "value_output_symlink_loop",
        {"c.toml": circle(), "out.nc": lambda p: os.symlink(p.name, p)},
        ["run", "c.toml", "-o", "out.nc"],
        (2,),
        ("--output", "'out.nc'", "loop of symbolic links"),
    ),
    (
        "value_config_directory",
        {"c.toml/": ""},
        ["run", "c.toml"],
        (2,),
        ("'c.toml'", "is a directory"),
    ),
    (
        "value_config_dev_null",
        {},
        ["run", os.devnull],
        (2,),
        (os.devnull, "character device", "regular file"),
    ),
    (
        "value_10_mb",
        {"c.toml": '[model]\nname = "' + "x" * 10_000_000 + '"\n'},
        ["run", "c.toml"],
        (2,),
        ("model.name", "...' (10000000 characters) is not a known model"),
    ),
    (
        "value_vmf_kappa_1e10",
        {
            "c.toml": circle(
                model="V = [[1.0, 0], [0, 0.5]]",
                initial='name = "von_mises_fisher"\nmeans = [[0.6, 0.8]]\nkappas = [1e10]',
            )
        },
        ["run", "c.toml", "--no-figure"],
        (0,),
        (),
    ),
    (
        "value_vmf_kappa_1e10_sphere",
        {
            "c.toml": sphere(
                initial='name = "von_mises_fisher"\nmeans = [[0.6, 0.0, 0.8]]\nkappas = [1e10]'
            )
        },
        ["run", "c.toml", "--no-figure"],
        (0,),
        (),
    ),
]


#: the address space of every command (ulimit -v): the memory refusals above (a run needing
#: tens of GiB) then do not depend on how much memory the machine has
ADDRESS_SPACE = 16 * 2**30


def _pinned_memory() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = ADDRESS_SPACE if hard == resource.RLIM_INFINITY else min(ADDRESS_SPACE, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def _snapshot(root: Path) -> dict[str, tuple[str, int]]:
    """Content hash and mode of every file under ``root``."""
    out = {}
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            out[str(path.relative_to(root))] = (
                hashlib.sha256(path.read_bytes()).hexdigest(),
                stat.S_IMODE(path.stat().st_mode),
            )
    return out


def _make_files(root: Path, files: dict) -> None:
    for name, content in files.items():
        path = root / name
        if name.endswith("/"):
            path.mkdir(parents=True, exist_ok=True)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        if callable(content):
            content(path)
        elif isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)


@pytest.mark.parametrize("case_id, files, argv, codes, words", CASES, ids=[c[0] for c in CASES])
def test_hostile_input_is_refused_in_one_line_and_changes_no_file(
    tmp_path, case_id, files, argv, codes, words
):
    _make_files(tmp_path, files)
    before = _snapshot(tmp_path)
    argv = [a.format(tmp=tmp_path) for a in argv]
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    proc = subprocess.run(
        [sys.executable, "-m", "spheredens", *argv],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
        preexec_fn=_pinned_memory,
    )
    err = proc.stderr.strip()
    assert proc.returncode in codes, (proc.returncode, err[-2000:], proc.stdout[-2000:])
    assert "Traceback" not in proc.stderr, err[-2000:]
    if proc.returncode == 2:
        lines = err.splitlines()
        assert len(lines) == 1 and lines[0].startswith("spheredens: error:"), err[-2000:]
        assert len(lines[0]) < 2000, "the error echoes too much"
        for word in words:
            assert word.lower() in lines[0].lower(), (word, lines[0])
    after = _snapshot(tmp_path)
    for name, (digest, mode) in before.items():
        assert name in after, f"{name} was removed"
        assert after[name] == (digest, mode), f"{name} was changed"
