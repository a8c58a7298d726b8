"""Output locks (one writer per file, the holder named, stale locks taken over) and writes
that fail on a real full file system."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import filelock
import pytest
import xarray as xr
from conftest import stop_after_steps
from test_reliability import CONFIG  # the same small fv run

import spheredens as sd
import spheredens.sweep._define as sweep_definition
import spheredens.sweep._run as sweep_run
from spheredens.cli import main
from spheredens.exceptions import OutputError, OutputLocked
from spheredens.locking import OutputLock, lock_files, lock_holder
from spheredens.sweep import load_sweep

SCRIPT = Path(sys.executable).with_name("spheredens")
COMMAND = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "spheredens.cli"]
TIMEOUT = 120  # generous: the machine may be loaded; the runs themselves take seconds


def config(
    folder: Path,
    name: str = "c.toml",
    *,
    n: int = 256,
    t_end: float = 6.0,
    snapshots: int = 25,
    beta: float = 10.0,
) -> Path:
    """CONFIG with other values, written to ``folder/name``."""
    text = (
        CONFIG.replace("n = 256", f"n = {n}")
        .replace("t_end = 6.0", f"t_end = {t_end}")
        .replace("snapshots = 25", f"snapshots = {snapshots}")
        .replace("beta = 10.0", f"beta = {beta}")
    )
    (folder / name).write_text(text)
    return folder / name


def spheredens(*args: str | Path, **kwargs) -> subprocess.Popen:
    return subprocess.Popen(
        [*COMMAND, *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kwargs,
    )


def wait_for(condition, proc=None, timeout: float = TIMEOUT) -> None:
    deadline = time.time() + timeout
    while not condition():
        if proc is not None and proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"the process ended early ({proc.returncode}): {err}")
        assert time.time() < deadline, "timed out"
        time.sleep(0.01)


def stored_beta(path: Path) -> float:
    return tomllib.loads(sd.open_run(path).attrs["config"])["model"]["beta"]


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def assert_names_holder(line: str, pid: int) -> None:
    assert "is being written by another process" in line and "has ended" not in line
    assert f"pid {pid} on host {socket.gethostname()}, started " in line and " UTC" in line


# ---------------------------------------------------------------- locks


def test_two_runs_on_one_path_one_writes_the_other_refuses_at_once(tmp_path):
    """Two `spheredens run` started together on one output path, beta 10 and 11: exactly one
    writes the file, the other exits 2 without waiting for the lock, with one line naming the
    holder as a process still running."""
    a = config(tmp_path, "a.toml", t_end=2.0, snapshots=9)
    b = config(tmp_path, "b.toml", t_end=2.0, snapshots=9, beta=11.0)
    out = tmp_path / "same.nc"
    procs = {
        10.0: spheredens("run", a, "-o", out, "-q"),
        11.0: spheredens("run", b, "-o", out, "-q"),
    }
    # TIMEOUT only guards against a hang; what is checked is the refusal's content
    outputs = {beta: proc.communicate(timeout=TIMEOUT) for beta, proc in procs.items()}
    results = {beta: (procs[beta].returncode, *outputs[beta]) for beta in procs}
    assert sorted(code for code, _, _ in results.values()) == [0, 2], results
    winner = next(beta for beta, (code, _, _) in results.items() if code == 0)
    loser = 11.0 if winner == 10.0 else 10.0
    line = one_line(results[loser][2])
    assert line.startswith("spheredens: error: ") and repr(str(out)) in line
    # refused while the other held the lock (it names that process as running, not ended): the
    # loser did not wait for the lock to be released
    assert_names_holder(line, procs[winner].pid)
    assert results[winner][2] == "" and results[winner][1] == ""  # -q: no "wrote" line
    assert stored_beta(out) == winner and sd.open_run(out).attrs["run_status"] == "complete"
    assert not lock_files(out)[1].exists() and lock_holder(out) is None  # released


def _no_work(monkeypatch):
    """Any integration (density or particles), comparison or cluster fails the test: "at once"
    is shown by what did not run, not by wall time."""
    import spheredens.cli._compare
    import spheredens.particles
    import spheredens.runner

    def forbidden(*args, **kwargs):
        raise AssertionError("work started before the lock was checked")

    for module, name in (
        (spheredens.runner, "simulate"),
        (spheredens.particles, "simulate"),
        (spheredens.cli._compare, "compare"),
        (spheredens.cli._compare, "compare_runs"),
        (sweep_run, "_local_cluster"),
    ):
        monkeypatch.setattr(module, name, forbidden)


def test_particles_compare_and_run_refuse_a_locked_path_at_once(tmp_path, capsys, monkeypatch):
    cfg = config(tmp_path, t_end=0.5, snapshots=3, n=128)
    with open(cfg, "a") as fh:
        fh.write("[particles]\nn = 20\ndt = 0.05\n")
    assert main(["run", str(cfg), "-q"]) == 0
    assert main(["particles", str(cfg), "-q", "-o", str(tmp_path / "p.nc")]) == 0
    capsys.readouterr()
    locked = tmp_path / "locked.nc"
    commands = {
        "run": ["run", str(cfg), "-q", "-o", str(locked)],
        "particles": ["particles", str(cfg), "-q", "-o", str(locked)],
        "compare": [
            "compare",
            str(tmp_path / "run.nc"),
            str(tmp_path / "p.nc"),
            "--no-figure",
            "-o",
            str(locked),
        ],
    }
    _no_work(monkeypatch)
    with OutputLock(locked) as lock:  # held by this process, as by another run
        assert lock.held and lock_holder(locked)["pid"] == os.getpid()
        for name, argv in commands.items():
            assert main(argv) == 2, name  # nothing computed: _no_work
            captured = capsys.readouterr()
            line = one_line(captured.err)
            assert_names_holder(line, os.getpid())
            assert "wrote" not in captured.out and not locked.exists(), name
    assert lock_holder(locked) is None and not lock_files(locked)[1].exists()
    monkeypatch.undo()  # compare may compute again
    assert main(commands["compare"]) == 0 and locked.exists()  # free again


def test_the_lock_is_released_on_every_exit_path(tmp_path):
    cfg = sd.load_config(config(tmp_path, t_end=1.0, snapshots=5, n=128))
    out = tmp_path / "run.nc"

    def free() -> bool:
        return lock_holder(out) is None and not lock_files(out)[1].exists()

    with stop_after_steps(3, "interrupted"):  # Ctrl-C, as simulate handles it
        with pytest.raises(KeyboardInterrupt):
            sd.run(cfg, output=out, progress=False)
    assert free()
    with pytest.raises(sd.ConfigError, match="exists"):  # an error before the run
        sd.run(cfg, output=out, progress=False)
    assert free()
    blow_up = sd.config_from_dict(
        {
            "model": {"name": "usa", "beta": 400.0},
            "discretization": {"n": 512},
            "initial": {"name": "von_mises_fisher", "means": [[1.0, 0.0]], "kappas": [3.0]},
            "time": {"t_end": 1.0},
        }
    )
    with pytest.raises(sd.SimulationError):
        sd.run(blow_up, output=tmp_path / "b.nc", progress=False)
    assert lock_holder(tmp_path / "b.nc") is None and not lock_files(tmp_path / "b.nc")[1].exists()
    with OutputLock(out):  # a refusal leaves the holder's lock in place
        with pytest.raises(OutputLocked, match=f"pid {os.getpid()}"):
            sd.run(cfg, output=out, progress=False, resume=True)
        assert lock_holder(out)["pid"] == os.getpid()
    assert sd.run(cfg, output=out, progress=False, resume=True).attrs["run_status"] == "complete"
    assert free()


def test_a_lock_outliving_its_recorded_process_is_named_as_such(tmp_path):
    """The system lock held (here directly with filelock, as by a child that inherited it)
    while the process of the record has ended: refused, saying so and what to remove."""
    out = tmp_path / "run.nc"
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    pid = int(gone.stdout)
    lock_path, record = lock_files(out)
    with filelock.FileLock(str(lock_path)):
        record.write_text(f'{{"host": "{socket.gethostname()}", "pid": {pid}, "started": "then"}}')
        with pytest.raises(
            OutputLocked, match=f"pid {pid} .*has ended, yet the lock is held.*flock"
        ):
            OutputLock(out).acquire()
    with OutputLock(out) as lock:  # free now: the stale record is taken over
        assert lock.took_over["pid"] == pid
    assert not record.exists()


def test_sigterm_releases_the_lock(tmp_path):
    cfg = config(tmp_path, n=512)
    out = tmp_path / "run.nc"
    proc = spheredens("run", cfg, "-q")
    wait_for(lambda: out.exists() and lock_files(out)[1].exists(), proc)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 143, err
    assert lock_holder(out) is None and not lock_files(out)[1].exists()  # released, no stale record


def test_a_stale_lock_after_sigkill_is_taken_over(tmp_path):
    cfg = config(tmp_path, t_end=4.0, snapshots=17, n=128)
    out = tmp_path / "run.nc"
    proc = spheredens("run", cfg, "-q", "--checkpoint-seconds", "0.05")
    record = lock_files(out)[1]
    wait_for(lambda: out.exists() and record.exists(), proc)  # it holds the lock and wrote once
    assert lock_holder(out)["pid"] == proc.pid
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=TIMEOUT)
    assert record.exists() and str(proc.pid) in record.read_text()  # left behind: stale
    assert lock_holder(out) is None  # the lock itself died with its process
    (tmp_path / f".run.nc.tmp-{proc.pid}").write_bytes(b"half a file")  # as if killed mid-write
    resumed = spheredens("run", cfg, "-q", "--resume")
    _, err = resumed.communicate(timeout=TIMEOUT)
    assert resumed.returncode == 0, err
    line = one_line(err)
    assert line.startswith("spheredens: warning: took over the stale lock of ")
    assert f"pid {proc.pid} on host {socket.gethostname()}" in line and "no longer running" in line
    ds = sd.open_run(out)
    assert ds.attrs["run_status"] == "complete" and ds.sizes["time"] == 17
    assert not record.exists() and not (tmp_path / f".run.nc.tmp-{proc.pid}").exists()


SWEEP_BASE = """
[model]
name = "sa"
beta = 10.0
[discretization]
n = 64
[time]
t_end = 0.5
snapshots = 3
"""


def write_sweep(folder: Path, extra: str = "") -> Path:
    (folder / "base.toml").write_text(SWEEP_BASE)
    (folder / "sweep.toml").write_text(
        f'base = "base.toml"\noutput_dir = "cases"\n{extra}[vary]\n"model.beta" = [5.0, 10.0]\n'
    )
    return folder / "sweep.toml"


def test_sweep_cases_on_one_file_are_refused_before_any_work(tmp_path, capsys, monkeypatch):
    path = write_sweep(tmp_path, 'combined = "beta-10.0.nc"\n')  # a case's own file name
    assert main(["sweep", str(path)]) == 2
    line = one_line(capsys.readouterr().err)
    assert "sweep case beta-10.0" in line and "as the combined file does" in line
    assert not (tmp_path / "cases").exists()
    # names that coincide
    monkeypatch.setattr(sweep_definition, "_case_name", lambda values: "same")
    with pytest.raises(sd.ConfigError, match="writes .*same.nc.*, as case same .*does"):
        load_sweep(write_sweep(tmp_path))


def test_a_sweep_case_on_a_locked_file_refuses_the_sweep_at_once(tmp_path, capsys, monkeypatch):
    path = write_sweep(tmp_path)
    case = load_sweep(path).cases[1]
    (tmp_path / "cases").mkdir()
    _no_work(monkeypatch)
    with OutputLock(case.path):  # a run of this process writes the case's file
        assert main(["sweep", str(path), "-q"]) == 2  # no cluster started: _no_work
    line = one_line(capsys.readouterr().err)
    assert line.startswith(f"spheredens: error: sweep case {case.name}: ")
    assert_names_holder(line, os.getpid())
    assert not case.path.exists()


def test_two_sweeps_on_one_folder(tmp_path, capsys, monkeypatch):
    """A second sweep on the folder of a running one exits 2 at once, with one line naming
    it; the first one finishes."""
    path = write_sweep(tmp_path)
    first = spheredens("sweep", path, "-q", "--workers", "1")
    combined = tmp_path / "cases" / "combined.nc"
    wait_for(lambda: lock_files(combined)[1].exists(), first)  # it holds the sweep's lock
    with monkeypatch.context() as patch:
        patch.setattr(
            sweep_run, "_local_cluster", lambda *a, **k: pytest.fail("a cluster was started")
        )
        assert main(["sweep", str(path), "-q"]) == 2  # at once: no cluster started
    line = one_line(capsys.readouterr().err)
    assert repr(str(combined)) in line
    assert_names_holder(line, first.pid)
    out, err = first.communicate(timeout=TIMEOUT)
    assert first.returncode == 0, err
    assert "2 ran, 0 done earlier, 0 failed" in out and combined.exists()
    assert lock_holder(combined) is None


# ---------------------------------------------------------------- full disk


@pytest.fixture
def small_fs(tmp_path):
    """A real 150 KiB file system (tmpfs) mounted on a folder for the test, unmounted after.

    Needs the right to mount (root, as on CI); skipped, saying why, where it is refused."""
    folder = tmp_path / "small"
    folder.mkdir()
    if shutil.which("mount") is None or shutil.which("umount") is None:
        pytest.skip("no mount/umount command to mount a small tmpfs")
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=150k,mode=0755", "tmpfs", str(folder)],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        pytest.skip(
            f"mounting a 150 KiB tmpfs is not permitted here (uid {os.geteuid()}): "
            f"{proc.stderr.strip() or proc.returncode}"
        )

    def grow() -> None:  # "free some space": the same file system, larger
        subprocess.run(["mount", "-o", "remount,size=8m", str(folder)], check=True)

    try:
        yield folder, grow
    finally:
        if subprocess.run(["umount", str(folder)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(folder)], capture_output=True)


def check_full_disk_run(err: str, code: int, out: Path, small: Path, first_failure: str) -> int:
    """The run ended with exit 1 and, after one warning line when the writes began to fail,
    one error line; the file there is the last good write. Returns its snapshots."""
    assert code == 1 and "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 2, err
    warning, error = lines
    assert warning.startswith(f"spheredens: warning: could not write {out} ({first_failure}")
    assert warning.endswith("; the run goes on and will try again at the next snapshot")
    assert error.startswith(f"spheredens: error: could not write {str(out)!r} (")
    assert "free on its file system" in error and "--resume" in error
    ds = sd.open_run(out)  # the last good write, intact
    assert ds.attrs["run_status"] == "partial" and 1 <= ds.sizes["time"] < 33
    assert f"({ds.sizes['time']} snapshot(s), checkpoint at t = " in error
    assert not [p for p in os.listdir(small) if ".tmp-" in p]
    return ds.sizes["time"]


def test_a_full_file_system_ends_with_one_line_and_the_last_good_file_resumes(tmp_path, small_fs):
    small, grow = small_fs
    cfg = config(tmp_path, t_end=4.0, snapshots=33)
    out = small / "run.nc"
    proc = spheredens("run", cfg, "-q", "-o", out)
    _, err = proc.communicate(timeout=TIMEOUT)
    check_full_disk_run(err, proc.returncode, out, small, "No space left on device")
    grow()
    ds = sd.run(sd.load_config(cfg), output=out, progress=False, resume=True)
    assert ds.attrs["run_status"] == "complete" and ds.sizes["time"] == 33
    assert sd.open_run(out).sizes["time"] == 33


def test_the_error_netcdf4_raises_on_a_full_disk_is_caught(tmp_path, small_fs):
    """The netCDF library writing to the full disk itself (as for files above
    IN_MEMORY_WRITE_BYTES) raises ``RuntimeError: NetCDF: HDF error``: the same one-line
    warning, one-line error and exit 1, and the last good file resumes."""
    small, grow = small_fs
    cfg = config(tmp_path, t_end=4.0, snapshots=33)
    out = small / "run.nc"
    code = (
        "import sys, spheredens.io, spheredens.cli as cli; spheredens.io.IN_MEMORY_WRITE_BYTES = "
        "-1; "
        f"sys.exit(cli.main(['run', {str(cfg)!r}, '-q', '-o', {str(out)!r}]))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=TIMEOUT
    )
    check_full_disk_run(proc.stderr, proc.returncode, out, small, "RuntimeError: NetCDF: HDF error")
    grow()
    ds = sd.run(sd.load_config(cfg), output=out, progress=False, resume=True)
    assert ds.attrs["run_status"] == "complete" and ds.sizes["time"] == 33


def test_a_failed_write_is_retried_and_the_run_goes_on(tmp_path, monkeypatch, caplog):
    """Whatever the library raises (here a RuntimeError, as netCDF4) is caught; a later write
    that succeeds ends the failures, and the run ends normally with the complete file."""
    original, calls = xr.Dataset.to_netcdf, {"n": 0}

    def flaky(self, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] in (2, 3):
            raise RuntimeError("NetCDF: HDF error")
        return original(self, *args, **kwargs)

    monkeypatch.setattr(xr.Dataset, "to_netcdf", flaky)
    cfg = sd.load_config(config(tmp_path, n=128, t_end=1.0, snapshots=9))
    with caplog.at_level("WARNING"):
        ds = sd.run(cfg, progress=False)
    messages = [r.getMessage() for r in caplog.records]
    assert sum("could not write" in m for m in messages) == 1, messages  # once per failures
    assert "RuntimeError: NetCDF: HDF error" in messages[0] and "the run goes on" in messages[0]
    assert any("again, after 2 failed attempt(s)" in m for m in messages)
    assert (
        calls["n"] > 3 and sd.open_run(tmp_path / "run.nc").sizes["time"] == ds.sizes["time"] == 9
    )


def test_write_dataset_raises_one_line_output_error(tmp_path):
    class Broken:
        nbytes = 0

        def to_netcdf(self, *args, **kwargs):
            raise RuntimeError("NetCDF: HDF error\n(details)")

    with pytest.raises(OutputError) as info:
        sd.write_dataset(Broken(), tmp_path / "x.nc")
    assert "\n" not in str(info.value) and "RuntimeError: NetCDF: HDF error (details)" in str(
        info.value
    )
    assert not list(tmp_path.iterdir())
