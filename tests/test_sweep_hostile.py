"""Sweeps under hostile inputs and faults: a swept matrix is combined, values equal as numbers
are repeats, a failed case does not cost the combined file, the local cluster listens on
127.0.0.1 only, a worker's warnings are one ``spheredens: warning:`` line, an interrupted sweep
leaves no lock file."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlparse

import numpy as np
import pytest
import xarray as xr

import spheredens as sd
from spheredens.analysis import analyze_beta, open_combined, spectral_gap
from spheredens.cli import main
from spheredens.locking import lock_files
from spheredens.sweep import load_sweep
from spheredens.sweep._run import _local_cluster

TIMEOUT = 240  # generous: the machine may be loaded; each sweep takes seconds

BASE = """
[model]
name = "sa"
beta = 5.0
K = [[1.75, 0.866025], [0.433013, 2.5]]
V = [[1.0, 0.0], [0.0, 0.5]]
[discretization]
n = 96
[time]
t_end = {t_end}
snapshots = {snapshots}
"""
#: two values of V with V B^T symmetric (Assumption 1: w2_projection defined), spectral gaps 1 and 2
V1, V2 = [[1.0, 0.0], [0.0, 0.5]], [[2.0, 0.0], [0.0, 1.0]]


def write(
    folder: Path, vary: str, *, t_end: float = 1.0, snapshots: int = 5, base: str = BASE
) -> Path:
    """base.toml and sweep.toml (output_dir "cases") in ``folder``; ``vary``: the [vary] lines."""
    (folder / "base.toml").write_text(base.format(t_end=t_end, snapshots=snapshots))
    (folder / "sweep.toml").write_text(
        f'base = "base.toml"\noutput_dir = "cases"\n[vary]\n{vary}\n'
    )
    return folder / "sweep.toml"


def sweep_process(path: Path, *args: str) -> subprocess.Popen:
    """``spheredens sweep PATH ARGS`` in its own session (a terminal's Ctrl-C reaches the group)."""
    return subprocess.Popen(
        [sys.executable, "-m", "spheredens", "sweep", str(path), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("spheredens: error: "), err
    return lines[0]


def lock_records(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*.lock"))


# ---------------------------------------------------------------- probe 2: matrices


def test_a_sweep_varies_a_matrix_and_analyze_beta_reads_it(tmp_path, capsys):
    """Probe 2: "model.V" swept (with beta) runs and writes combined.nc: dimension V labelled by
    the values as written, the matrices in V_value (V, row, col), each case's diagnostics
    where its label says; analyze-beta gives one spectral gap per V (that of the case's own
    file) and rate_over_gap with it."""
    path = write(
        tmp_path, f'"model.beta" = [5.0, 8.0]\n"model.V" = {json.dumps([V1, V2])}', t_end=1.0
    )
    assert main(["sweep", str(path), "-q", "--workers", "2"]) == 0
    combined = xr.load_dataset(tmp_path / "cases" / "combined.nc")
    assert dict(combined["w2_projection"].sizes) == {"beta": 2, "V": 2, "time": 5}
    assert list(combined["V"].values) == ["[[1.0, 0.0], [0.0, 0.5]]", "[[2.0, 0.0], [0.0, 1.0]]"]
    assert combined["V_value"].dims == ("V", "row", "col")
    np.testing.assert_array_equal(combined["V_value"].values, np.array([V1, V2]))
    assert (
        "V" not in combined.data_vars
    )  # the constant-matrix variable would clash with the dimension
    np.testing.assert_array_equal(combined["K"].values, [[1.75, 0.866025], [0.433013, 2.5]])
    for case in load_sweep(path).cases:
        values = dict(case.values)
        run = sd.open_run(case.path)
        np.testing.assert_array_equal(run["V"].values, values["model.V"])
        sel = combined.sel(beta=values["model.beta"], V=json.dumps(values["model.V"]))
        for var in ("w2_projection", "mass", "energy"):
            np.testing.assert_array_equal(sel[var].values, run[var].values)
    analysis = analyze_beta(open_combined(tmp_path / "cases" / "combined.nc"))
    gaps = [
        spectral_gap(sd.open_run(c.path)) for c in load_sweep(path).cases if c.values[0][1] == 5.0
    ]
    np.testing.assert_allclose(analysis["spectral_gap"].values, gaps, rtol=1e-14)
    np.testing.assert_allclose(gaps, [1.0, 2.0], rtol=1e-5)
    assert np.isfinite(analysis["rate_over_gap"].values).all()
    np.testing.assert_allclose(
        analysis["rate_over_gap"].values,
        (analysis["early_rate"] / analysis["spectral_gap"]).values,
        rtol=1e-14,
    )
    capsys.readouterr()
    assert main(["analyze-beta", str(tmp_path / "cases" / "combined.nc")]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"spectral gap of V B^T: {min(gaps):.4g} to {max(gaps):.4g} over V;")
    rows = [line for line in out.splitlines() if line.startswith(("       5 ", "       8 "))]
    assert [row.split("]] ")[0] + "]]" for row in rows] == [  # one row per (beta, V), V as written
        f"{beta:8g} {v:>24}"
        for beta in (5, 8)
        for v in ("[[1.0, 0.0], [0.0, 0.5]]", "[[2.0, 0.0], [0.0, 1.0]]")
    ]


@pytest.mark.parametrize(
    "vary, words",
    [
        (
            '"time.t_end" = [1.0, 2.0]',
            [
                "sweep.vary.time.t_end: changes the snapshot times",
                "5 to t = 1",
                "5 to t = 2",
                "one sweep per value",
            ],
        ),
        ('"time.snapshots" = [5, 9]', ["sweep.vary.time.snapshots: changes the snapshot times"]),
        (
            '"output.path" = ["a.nc", "b.nc"]',
            ["sweep.vary.output.path: is set by the sweep itself"],
        ),
        (
            '"initial.time" = [0.0, 1.0]',
            [
                "sweep.vary.initial.time: would name a dimension 'time' of the combined dataset, "
                "which "
                "has a 'time' of its own"
            ],
        ),
    ],
    ids=["t_end", "snapshots", "output_path", "reserved_name"],
)
def test_what_cannot_be_combined_is_refused_before_any_case_runs(tmp_path, capsys, vary, words):
    """Probe 2: a sweep whose cases combined.nc could not hold is refused in one line, exit 2,
    before any case runs (no folder made)."""
    path = write(tmp_path, vary)
    assert main(["sweep", str(path), "-q"]) == 2
    line = one_error_line(capsys)
    for word in words:
        assert word in line, line
    assert not (tmp_path / "cases").exists()


# ---------------------------------------------------------------- probe 7: repeats


@pytest.mark.parametrize(
    "key, values, shown",
    [
        ("model.beta", "[2, 2.0]", "2 and 2.0 are equal as numbers"),
        ("model.beta", "[0.0, 3.0, -0.0]", "0.0 and -0.0 are equal as numbers"),
        ("discretization.n", "[96, 128, 96]", "96 and 96 are the same value twice"),
        (
            "model.V",
            "[[[1, 0], [0, 0.5]], [[1.0, 0.0], [0.0, 0.5]]]",
            "[[1, 0], [0, 0.5]] and [[1.0, 0.0], [0.0, 0.5]] are equal as numbers",
        ),
    ],
    ids=["2_2.0", "zero_negative_zero", "same_twice", "matrix"],
)
def test_values_equal_as_numbers_are_repeats(tmp_path, capsys, key, values, shown):
    """Probe 7: values equal as numbers but written differently are one value repeated:
    refused in one line naming the key and both values, before any case runs."""
    path = write(tmp_path, f'"{key}" = {values}')
    with pytest.raises(sd.ConfigError) as info:
        load_sweep(path)
    assert str(info.value) == f"sweep.vary.{key}: repeats a value: {shown}; list each value once"
    assert main(["sweep", str(path), "-q"]) == 2
    assert one_error_line(capsys) == f"spheredens: error: {info.value}"
    assert not (tmp_path / "cases").exists()


# ---------------------------------------------------------------- probe 8: a failed case


def test_a_failed_case_does_not_cost_the_combined_file(tmp_path):
    """Probe 8: one case fails at run time (usa at beta = 200 with this B grows like
    exp(beta ||B||)); combined.nc is written from the others, the failed one NaN there and
    named in its attributes and in a warning line; exit code 1."""
    path = write(
        tmp_path,
        '"model.name" = ["sa", "usa"]\n"model.beta" = [10.0, 200.0]',
        base=BASE.replace("n = 96", "n = 512"),
    )
    proc = sweep_process(path, "-q", "--workers", "2")
    out, err = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 1, (out, err)
    assert "Traceback" not in err, err
    assert "2 ran, 0 done earlier, 2 failed" in out
    combined = xr.load_dataset(tmp_path / "cases" / "combined.nc")
    assert combined.attrs["failed_cases"] == "name-usa_beta-10.0, name-usa_beta-200.0"
    warning = [line for line in err.splitlines() if "failed_cases" in line]
    assert warning == [
        f"spheredens: warning: {tmp_path / 'cases' / 'combined.nc'} holds 2 of 4 case(s): "
        "the failed case(s) name-usa_beta-10.0, name-usa_beta-200.0 have NaN values there "
        "(attribute failed_cases); their files are kept, and the same command runs them "
        "again"
    ], err
    for var in ("w2_projection", "mass", "rho"):
        assert np.isnan(combined[var].sel(name="usa").values).all()
    for beta in (10.0, 200.0):  # the cases that finished, as their files have them
        run = sd.open_run(tmp_path / "cases" / f"name-sa_beta-{beta}.nc")
        np.testing.assert_array_equal(
            combined["mass"].sel(name="sa", beta=beta).values, run["mass"].values
        )
    assert lock_records(tmp_path) == []


# ---------------------------------------------------------------- probe 13: the local cluster


def _listening(pids: set[int]) -> set[tuple[str, int]]:
    """(address, port) of every TCP socket in LISTEN state that one of ``pids`` holds (Linux
    /proc: a socket's inode in /proc/net/tcp{,6}, matched with the processes' open files)."""
    inodes = set()
    for pid in pids:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    found = set()
    for table, family in (("/proc/net/tcp", socket.AF_INET), ("/proc/net/tcp6", socket.AF_INET6)):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if fields[3] != "0A" or fields[9] not in inodes:  # 0A: LISTEN
                continue
            address, port = fields[1].split(":")
            raw = bytes.fromhex(address)
            if family == socket.AF_INET:
                raw = raw[::-1]
            else:  # four little-endian 32-bit words
                raw = b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4))
            found.add((socket.inet_ntop(family, raw), int(port, 16)))
    return found


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="needs Linux /proc to list sockets")
def test_the_local_cluster_listens_on_127_0_0_1_only():
    """Probe 13: the sweep's local cluster (the function that builds it): the scheduler's
    address and the dashboard link are on 127.0.0.1, and every socket its processes listen on
    (scheduler, dashboard, nannies, workers) is bound to 127.0.0.1, not 0.0.0.0."""
    import distributed

    cluster = _local_cluster(1)
    client = distributed.Client(cluster)
    try:
        assert cluster.scheduler_address.startswith("tcp://127.0.0.1:")
        dashboard = urlparse(client.dashboard_link)
        assert dashboard.hostname == "127.0.0.1"
        workers = set(client.run(os.getpid).values())
        listening = _listening({os.getpid(), *workers})
        assert ("127.0.0.1", dashboard.port) in listening
        assert ("127.0.0.1", int(cluster.scheduler_address.rsplit(":", 1)[1])) in listening
        for address in client.scheduler_info()["workers"]:
            assert address.startswith("tcp://127.0.0.1:")
        assert {host for host, _ in listening} == {"127.0.0.1"}, listening
    finally:
        client.close()
        cluster.close()


# ---------------------------------------------------------------- item 7: warnings, locks


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_a_workers_warnings_are_one_spheredens_warning_line(tmp_path):
    """Item 7: the stale lock of a case file taken over on a Dask worker, and a worker's own
    warning (an under-resolved grid run anyway), print as ``spheredens: warning: sweep case
    NAME: ...``, like every other warning of the command line."""
    base = BASE.replace("n = 96", "n = 64\nallow_underresolved = true")
    path = write(tmp_path, '"model.beta" = [5.0]', base=base, t_end=0.5, snapshots=3)
    case = tmp_path / "cases" / "beta-5.0.nc"
    case.parent.mkdir()
    pid = _dead_pid()  # as if a worker was killed while it held the lock
    lock_files(case)[1].write_text(
        json.dumps(
            {
                "host": socket.gethostname(),
                "pid": pid,
                "started": "2026-01-01 00:00:00 UTC",
                "process_start": None,
                "command": "spheredens sweep",
            }
        )
    )
    proc = sweep_process(path, "-q", "--workers", "1")
    out, err = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 0, (out, err)
    lines = err.strip().splitlines()
    took = [line for line in lines if "took over the stale lock" in line]
    assert took == [
        f"spheredens: warning: sweep case beta-5.0: took over the stale lock of {case} (its "
        f"holder is no longer running: pid {pid} on host {socket.gethostname()}, started "
        "2026-01-01 00:00:00 UTC, command: spheredens sweep)"
    ], err
    under = [line for line in lines if "does not resolve" in line]
    assert len(under) == 1 and under[0].startswith(
        "spheredens: warning: sweep case beta-5.0: discretization.n: n = 64 does not resolve"
    ), err
    assert all(line.startswith("spheredens: warning: ") for line in lines), err
    assert sd.open_run(case).attrs["run_status"] == "complete" and lock_records(tmp_path) == []


@pytest.mark.slow
@pytest.mark.parametrize("how", ["sigint_group", "sigterm"])
def test_an_interrupted_sweep_leaves_no_lock_file_and_resumes(tmp_path, how):
    """Item 7: Ctrl-C (SIGINT to the process group, as a terminal sends it) or SIGTERM to the
    sweep while a case runs: exit 130 or 143, no ``*.lock`` file left (the running case's
    worker was terminated holding its lock), the case file partial; the same command then
    finishes the sweep."""
    base = BASE.replace("n = 96", "n = 64\nallow_underresolved = true")
    # long enough that the case is still running half a second after its lock appears on a
    # fast machine (t_end = 12 had finished by then in some runs)
    path = write(tmp_path, '"model.beta" = [5.0]', base=base, t_end=48.0, snapshots=193)
    case = tmp_path / "cases" / "beta-5.0.nc"
    proc = sweep_process(path, "-q", "--workers", "1")
    deadline = time.monotonic() + TIMEOUT
    while not (case.exists() and lock_files(case)[1].exists()) and proc.poll() is None:
        assert time.monotonic() < deadline, "the case never started"
        time.sleep(0.05)
    time.sleep(0.5)
    if how == "sigint_group":
        os.killpg(proc.pid, signal.SIGINT)
    else:
        proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == (130 if how == "sigint_group" else 143), (out, err)
    assert (
        "sweep interrupted with 1 case(s) unfinished (beta-5.0)" in err and "Traceback" not in err
    )
    assert lock_records(tmp_path) == []
    with xr.open_dataset(case) as ds:
        assert ds.attrs["run_status"] == "partial"  # the interruption hit the running case
    resumed = sweep_process(path, "-q", "--workers", "1")
    out, err = resumed.communicate(timeout=TIMEOUT)
    assert resumed.returncode == 0, (out, err)
    assert "took over" not in err  # nothing stale was left to take over
    assert sd.open_run(case).attrs["run_status"] == "complete"
    assert (tmp_path / "cases" / "combined.nc").exists() and lock_records(tmp_path) == []


def test_sigterm_while_the_cluster_starts_leaves_no_lock_file(tmp_path):
    """Item 7: SIGTERM as soon as the sweep holds its lock (the local cluster still starting):
    exit 143 and the sweep's own lock record removed."""
    path = write(tmp_path, '"model.beta" = [5.0]')
    proc = sweep_process(path, "-q", "--workers", "1")
    record = lock_files(tmp_path / "cases" / "combined.nc")[1]
    deadline = time.monotonic() + TIMEOUT
    while not record.exists() and proc.poll() is None:
        assert time.monotonic() < deadline, "the sweep never took its lock"
        time.sleep(0.01)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 143, (out, err)
    assert lock_records(tmp_path) == []
