"""Sweeps on Dask: combined dataset equals single runs bit for bit, finished cases are skipped,
partial ones resume, failures are reported, an external scheduler works."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import numpy as np
import pytest
import xarray as xr
from conftest import stop_after_steps

import spheredens as sd
from spheredens.cli import main
from spheredens.sweep import COMBINED_VARIABLES, load_sweep, run_sweep

BASE = """
[model]
name = "sa"
beta = 10.0
K = [[1.75, 0.866025], [0.433013, 2.5]]
V = [[1.0, 0.0], [0.0, 0.5]]
[discretization]
n = 192
[time]
t_end = 1.0
snapshots = 5
"""
SWEEP = """
base = "base.toml"
output_dir = "cases"
[vary]
"model.beta" = [5.0, 10.0, 20.0]
"discretization.scheme" = ["fv", "fourier"]
"""


def write(folder, sweep=SWEEP, base=BASE):
    (folder / "base.toml").write_text(base)
    (folder / "sweep.toml").write_text(sweep)
    return folder / "sweep.toml"


def test_six_cases_on_a_local_cluster(tmp_path, capsys):
    path = write(tmp_path)
    sweep = load_sweep(path)
    assert len(sweep.cases) == 6
    assert main(["sweep", str(path)]) == 0
    combined = xr.open_dataset(tmp_path / "cases" / "combined.nc")
    assert dict(combined["w2_projection"].sizes) == {"beta": 3, "scheme": 2, "time": 5}
    for case in sweep.cases:
        single = sd.run(
            case.config.replace(**{"output.path": str(tmp_path / "single.nc")}),
            progress=False,
            overwrite=True,
        )
        sel = {k.rsplit(".", 1)[-1]: v for k, v in case.values}
        for var in COMBINED_VARIABLES:
            np.testing.assert_array_equal(combined[var].sel(sel).values, single[var].values)
    # a second invocation recomputes nothing and rewrites no case file
    stamps = {c.name: c.path.stat().st_mtime_ns for c in sweep.cases}
    capsys.readouterr()
    assert main(["sweep", str(path)]) == 0
    assert "0 ran, 6 done earlier, 0 failed" in capsys.readouterr().out
    assert stamps == {c.name: c.path.stat().st_mtime_ns for c in sweep.cases}


def test_partial_case_resumes_and_failures_are_reported(tmp_path):
    sweep_text = SWEEP.replace(
        '"discretization.scheme" = ["fv", "fourier"]', '"model.name" = ["sa", "usa"]'
    ).replace("[5.0, 10.0, 20.0]", "[10.0, 200.0]")
    sweep = load_sweep(write(tmp_path, sweep_text, BASE.replace("n = 192", "n = 512")))
    # a case interrupted midway (as by a lost worker) leaves a partial file with a checkpoint
    case = next(
        c for c in sweep.cases if dict(c.values) == {"model.beta": 10.0, "model.name": "sa"}
    )
    with stop_after_steps(20, "interrupted"):
        with pytest.raises(KeyboardInterrupt):
            sd.run(case.config, progress=False, mkdir=True)  # output_dir does not exist yet
    assert sd.open_run(case.path).attrs["run_status"] == "partial"
    combined, outcome = run_sweep(sweep, progress=False)
    assert outcome[case.name] == "ran"
    failed = {k: v for k, v in outcome.items() if v.startswith("failed")}
    # usa with this B grows like exp(beta ||B||) = e^29, e^577: the CFL step collapses at once
    assert set(failed) == {"beta-10.0_name-usa", "beta-200.0_name-usa"}
    assert all("CFL step" in why for why in failed.values())
    assert outcome["beta-200.0_name-sa"] == "ran"
    # written from the cases that finished: the failed ones named, their values NaN
    assert combined.attrs["failed_cases"] == "beta-10.0_name-usa, beta-200.0_name-usa"
    assert np.isnan(combined["w2_projection"].sel(name="usa").values).all()
    assert np.isfinite(combined["mass"].sel(name="sa").values).all()
    reference = sd.run(
        case.config.replace(**{"output.path": str(tmp_path / "ref.nc")}), progress=False
    )
    np.testing.assert_array_equal(sd.open_run(case.path)["rho"].values, reference["rho"].values)


def test_external_scheduler(tmp_path):
    path = write(tmp_path, SWEEP.replace("[5.0, 10.0, 20.0]", "[5.0]"))
    sched_file = tmp_path / "scheduler.json"
    env_cmd = [sys.executable, "-m", "dask"]
    scheduler = subprocess.Popen(
        env_cmd
        + [
            "scheduler",
            "--scheduler-file",
            str(sched_file),
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--no-dashboard",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    worker = None
    try:
        deadline, address = time.time() + 60, None
        while address is None and time.time() < deadline:  # the file appears before its content
            try:
                address = json.loads(sched_file.read_text())["address"]
            except (OSError, ValueError, KeyError):
                time.sleep(0.1)
        worker = subprocess.Popen(
            env_cmd
            + ["worker", "--scheduler-file", str(sched_file), "--nthreads", "1", "--no-dashboard"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        assert main(["sweep", str(path), "--scheduler", address, "-q"]) == 0
        combined = xr.open_dataset(tmp_path / "cases" / "combined.nc")
        assert dict(combined["w2_projection"].sizes) == {"beta": 1, "scheme": 2, "time": 5}
    finally:
        for proc in (worker, scheduler):
            if proc is not None:
                proc.terminate()
                proc.wait(timeout=30)


def test_bad_sweep_files_are_refused(tmp_path, capsys):
    path = write(
        tmp_path, SWEEP.replace('"model.beta" = [5.0, 10.0, 20.0]', '"model.beta" = [5.0, -1.0]')
    )
    assert main(["sweep", str(path)]) == 2
    err = capsys.readouterr().err
    assert "sweep case beta--1.0_scheme-fv: model.beta" in err and err.count("\n") == 1
    path = write(tmp_path, 'base = "base.toml"\n[vary]\nbeta = [1.0]\n')
    assert main(["sweep", str(path)]) == 2
    assert "sweep.vary.beta: use a dotted key" in capsys.readouterr().err


def test_ctrl_c_stops_a_sweep_cleanly(tmp_path):
    """Ctrl-C (SIGINT to the whole process group, as a terminal sends it) stops the sweep: exit
    status 130, one message saying how to continue, no traceback from the sweep or its workers,
    and the running case's file is left readable (partial) for the next invocation."""
    import os
    import signal

    base = BASE.replace("t_end = 1.0", "t_end = 1000.0").replace(
        "snapshots = 5", "snapshots = 4001"
    )
    path = write(
        tmp_path, 'base = "base.toml"\noutput_dir = "cases"\n[vary]\n"model.beta" = [5.0]\n', base
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "spheredens", "sweep", str(path), "--workers", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    case = tmp_path / "cases" / "beta-5.0.nc"
    deadline = time.monotonic() + 120
    while not case.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
    assert case.exists(), proc.communicate(timeout=60)
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, (out, err)
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert "sweep interrupted with 1 case(s) unfinished (beta-5.0)" in err
    assert f"spheredens sweep {path}" in err
    with xr.open_dataset(case) as ds:
        assert ds.attrs["run_status"] == "partial"


def test_the_local_cluster_runs_cases_as_a_plain_process_would():
    """The local cluster's workers: one BLAS/OpenMP thread, no MALLOC_TRIM_THRESHOLD_ (Dask's
    65536 made every array above 128 KiB a fresh mmap: 4.7x the page faults and 3x the CPU of a
    case, benchmarks/bench_sweep.py), no statistical profiler, slow housekeeping; and this
    process keeps Dask's own configuration afterwards (distributed's defaults included)."""
    import os

    import dask
    import distributed

    from spheredens.sweep._run import _local_cluster

    cluster = _local_cluster(1)
    client = distributed.Client(cluster)
    try:

        def settings():
            return (
                {k: os.environ.get(k) for k in ("MALLOC_TRIM_THRESHOLD_", "OPENBLAS_NUM_THREADS")},
                dask.config.get("distributed.worker.profile.enabled"),
                dask.config.get("distributed.worker.memory.monitor-interval"),
            )

        (worker,) = client.run(settings).values()
    finally:
        client.close()
        cluster.close()
    # unset, unless this process's environment sets it (a value the user chose still applies)
    assert worker[0]["MALLOC_TRIM_THRESHOLD_"] == os.environ.get("MALLOC_TRIM_THRESHOLD_")
    assert worker[0]["OPENBLAS_NUM_THREADS"] == "1"
    assert worker[1:] == (False, "1s")
    assert dask.config.get("distributed.worker.profile.enabled") is True  # here: unchanged
    assert dask.config.get("distributed.nanny.pre-spawn-environ")["MALLOC_TRIM_THRESHOLD_"] == 65536
