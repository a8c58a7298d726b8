"""Resume, checkpoints and output files: one test per defect of the
probe, each failing on the code before the fix.

* a checkpoint carries a checksum (``checkpoint_sha256``) and its invariants are checked before
  a resume: a damaged file is refused in one line and left as it is; a file of an older version
  (no checksum) still resumes, bit for bit;
* ``--resume`` on a complete run says so and runs nothing; on a missing file it says that it
  starts from scratch;
* a refused resume names the first difference (key, the file's value, the configuration's);
* file modes are kept by ``--resume`` and ``--overwrite``;
* no command writes over one of its own inputs;
* plot, animate and analyze-beta refuse an existing output without ``--overwrite``;
* ``--quiet`` prints no "wrote" lines;
* an output that cannot be replaced (read-only, immutable) is refused before any work;
* ``run(observers=...)`` tells more observers of every snapshot, from the checkpoint on when
  resumed, and refuses what is not an observer before any work.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from conftest import stop_after_steps

import spheredens as sd
from spheredens.cli import main
from spheredens.io import write_dataset
from spheredens.simulate import Observer

CONFIG = """\
[model]
beta = 2.0
[initial]
name = "random_smooth"
seed = 1
[discretization]
n = 64
[time]
t_end = 1.0
snapshots = 5
[output]
path = "run.nc"
figure = false
[particles]
n = 20
dt = 0.05
"""
#: the variables a resumed run must reproduce bit for bit
COMPARED = ("rho", "mass", "min_rho", "w2_projection", "energy")


def write_config(folder: Path, text: str = CONFIG, name: str = "c.toml") -> Path:
    path = folder / name
    path.write_text(text)
    return path


def partial_run(folder: Path) -> Path:
    """run.nc of :data:`CONFIG`, interrupted after 3 steps (of about 10): partial, with its
    checkpoint between two snapshots."""
    cfg = sd.load_config(write_config(folder))
    with stop_after_steps(3), pytest.raises(KeyboardInterrupt):
        sd.run(cfg, progress=False)
    out = folder / "run.nc"
    assert sd.open_run(out).attrs["run_status"] == "partial"
    return out


def complete_run(folder: Path, text: str = CONFIG) -> Path:
    sd.run(sd.load_config(write_config(folder, text)), progress=False)
    return folder / "run.nc"


def rewrite(path: Path, change) -> None:
    """Open ``path``, let ``change(ds)`` alter it, write it back (as a damaged file would be)."""
    with xr.open_dataset(path) as ds:
        ds = ds.load()
    change(ds)
    ds.to_netcdf(path)


def contents(path: Path) -> tuple[bytes, int]:
    return path.read_bytes(), stat.S_IMODE(path.stat().st_mode)


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert (
        err.count("\n") == 1 and err.startswith("spheredens: error: ") and "Traceback" not in err
    ), err
    return err.strip()


@pytest.fixture
def no_work(monkeypatch):
    """``no_work()``: from then on, any integration, comparison, analysis or drawing fails the
    test (a refusal must come first)."""
    import spheredens.cli._commands
    import spheredens.cli._compare
    import spheredens.particles
    import spheredens.runner

    def forbidden(*args, **kwargs):
        raise AssertionError("work started before the refusal")

    def activate() -> None:
        for module, name in (
            (spheredens.runner, "simulate"),
            (spheredens.particles, "simulate"),
            (spheredens.cli._compare, "compare"),
            (spheredens.cli._compare, "compare_runs"),
            (spheredens.cli._commands, "analyze_beta"),
            (spheredens.cli._commands, "plot_run"),
            (spheredens.cli._commands, "animate_run"),
        ):
            monkeypatch.setattr(module, name, forbidden)

    return activate


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The uninterrupted run of :data:`CONFIG` (no file)."""
    folder = tmp_path_factory.mktemp("reference")
    data = sd.load_config(write_config(folder)).to_dict()
    data.pop("output")
    return sd.run(sd.config_from_dict(data, base_dir=folder), progress=False)


# -- 1. checksum and invariants of the checkpoint --------------------------------------------------
def test_the_checkpoint_carries_a_checksum_and_a_file_without_one_still_resumes_bit_for_bit(
    tmp_path, reference
):
    from spheredens.recorder import checkpoint_digest

    out = partial_run(tmp_path)
    ds = sd.open_run(out)
    digest = str(ds.attrs["checkpoint_sha256"])
    assert len(digest) == 64 and int(digest, 16) >= 0 and digest == checkpoint_digest(ds)
    # one ulp in one value of the checkpoint, or of a stored snapshot, changes it
    for name in ("checkpoint_state", "rho"):
        changed = ds.copy(deep=True)
        values = changed[name].values
        values.flat[5] = np.nextafter(values.flat[5], np.inf)
        assert checkpoint_digest(changed) != digest, name
    # a file of an older version has no checksum: it resumes (after the invariant checks)
    rewrite(out, lambda d: d.attrs.pop("checkpoint_sha256"))
    resumed = sd.run(sd.load_config(tmp_path / "c.toml"), progress=False, resume=True)
    assert (
        resumed.attrs["run_status"] == "complete"
        and resumed.attrs["n_steps"] == reference.attrs["n_steps"]
    )
    for name in COMPARED:
        np.testing.assert_array_equal(resumed[name].values, reference[name].values)


def test_a_file_written_before_an_option_existed_resumes_bit_for_bit(tmp_path, reference):
    """A file whose stored configuration lacks an option added since (here the limiter, as an
    older version would have written it) resumes: the option counts with its default on both
    sides, and the run completes as the uninterrupted one; a value that differs from the
    default is still a difference."""
    out = partial_run(tmp_path)

    def older(ds):
        text = str(ds.attrs["config"])
        assert 'limiter = "mc"\n' in text
        ds.attrs["config"] = text.replace('limiter = "mc"\n', "")

    rewrite(out, older)
    resumed = sd.run(sd.load_config(tmp_path / "c.toml"), progress=False, resume=True)
    assert resumed.attrs["run_status"] == "complete"
    for name in COMPARED:
        np.testing.assert_array_equal(resumed[name].values, reference[name].values)
    other = tmp_path / "other"
    other.mkdir()
    out = partial_run(other)
    rewrite(out, older)
    text = (other / "c.toml").read_text().replace("n = 64\n", 'n = 64\nlimiter = "minmod"\n')
    write_config(other, text)
    with pytest.raises(sd.SchemaError, match='discretization.limiter is "mc" in the file'):
        sd.run(sd.load_config(other / "c.toml"), progress=False, resume=True)


def _scale_checkpoint(ds):
    ds["checkpoint_state"] = ds["checkpoint_state"] * 2.0


def _nan_in_last_snapshot(ds):
    rho = ds["rho"].values.copy()
    rho[-1, 7] = np.nan
    ds["rho"] = (ds["rho"].dims, rho, ds["rho"].attrs)


def _scale_rho(ds):
    ds["rho"] = ds["rho"] * 2.0


def _drop_checksum(change):
    def changed(ds):
        change(ds)
        del ds.attrs["checkpoint_sha256"]

    return changed


#: name: (change, what the error says, given the file's last time t and checkpoint time t_c)
DAMAGES = {
    "checkpoint_scaled": (
        _scale_checkpoint,
        lambda t, t_c: (
            "its checksum (checkpoint_sha256) does not match "
            "its checkpoint and snapshots: the file was changed after spheredens wrote it"
        ),
    ),
    "nan_in_a_snapshot": (
        _nan_in_last_snapshot,
        lambda t, t_c: "its checksum (checkpoint_sha256) does not match",
    ),
    "old_file_checkpoint_scaled": (
        _drop_checksum(_scale_checkpoint),
        lambda t, t_c: f"the mass of its checkpoint (t = {t_c:g}) is 2, not 1 (to 1e-06)",
    ),
    "old_file_nan_in_a_snapshot": (
        _drop_checksum(_nan_in_last_snapshot),
        lambda t, t_c: f"rho holds non-finite values (NaN or inf) at t = {t:g}",
    ),
    "old_file_rho_scaled": (
        _drop_checksum(_scale_rho),
        lambda t, t_c: "the mass of rho at t = 0 is 2, not 1",
    ),
}


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_damaged_checkpoint_is_refused_in_one_line_and_the_file_is_left_as_it_is(
    damage, tmp_path, capsys, no_work
):
    out = partial_run(tmp_path)
    change, said = DAMAGES[damage]
    rewrite(out, change)
    before = contents(out)
    ds = sd.open_run(out)
    t_last, t_c = float(ds["time"].values[-1]), float(ds.attrs["checkpoint_time"])
    no_work()
    assert main(["run", str(tmp_path / "c.toml"), "--resume", "-q"]) == 2
    line = one_error_line(capsys)
    assert line.startswith(f"spheredens: error: cannot resume {str(out)!r}: {said(t_last, t_c)}"), (
        line
    )
    assert line.endswith(
        "the file is left as it is: start again with --overwrite, or choose another output path"
    )
    assert contents(out) == before


# -- 2. resume of a complete run, of a missing file ------------------------------------------------
def test_resume_of_a_complete_run_says_so_and_runs_nothing(tmp_path, capsys, monkeypatch):
    out = complete_run(tmp_path)
    before = contents(out)
    steps = int(sd.open_run(out).attrs["n_steps"])
    import spheredens.runner

    def forbidden(*args, **kwargs):
        raise AssertionError("a complete run was run again")

    monkeypatch.setattr(spheredens.runner, "simulate", forbidden)
    monkeypatch.setattr(spheredens.runner, "make_scheme", forbidden)  # not even set up
    assert main(["run", str(tmp_path / "c.toml"), "--resume"]) == 0
    captured = capsys.readouterr()
    assert captured.out == ""  # neither "wrote" nor the old run's summary
    assert captured.err == (
        f"spheredens: note: {str(out)!r} is already complete (t = 1, {steps} steps): "
        "nothing was run; pass --overwrite to run it again\n"
    )
    assert contents(out) == before


def test_resume_of_a_missing_file_says_it_starts_from_scratch(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_config(tmp_path)
    assert main(["run", "c.toml", "--resume"]) == 0
    captured = capsys.readouterr()
    assert captured.err == (
        f"spheredens: note: {str(tmp_path / 'run.nc')!r} does not exist, so there is "
        "nothing to resume; starting from scratch\n"
    )
    assert captured.out.startswith("wrote run.nc\nt = 1, ")
    assert sd.open_run(tmp_path / "run.nc").attrs["run_status"] == "complete"
    # in Python, the same is told to notify (and nothing is printed)
    notes = []
    sd.run(
        sd.load_config(tmp_path / "c.toml"),
        output=tmp_path / "other.nc",
        resume=True,
        progress=False,
        notify=lambda kind, message: notes.append(kind),
    )
    sd.run(
        sd.load_config(tmp_path / "c.toml"),
        output=tmp_path / "other.nc",
        resume=True,
        progress=False,
        notify=lambda kind, message: notes.append(kind),
    )
    assert notes == ["missing", "complete"] and capsys.readouterr() == ("", "")


# -- 3. a refused resume names the first difference ------------------------------------------------
DIFFERENCES = {  # name: (file's configuration, this configuration, the difference said)
    "beta": (
        CONFIG,
        CONFIG.replace("beta = 2.0", "beta = 2.1"),
        "model.beta is 2.0 in the file, 2.1 in the configuration",
    ),
    "integrator": (
        CONFIG,
        CONFIG.replace("n = 64\n", 'n = 64\nintegrator = "rk4"\n'),
        'discretization.integrator is "ssprk3" in the file, "rk4" in the configuration',
    ),
    "snapshot_spacing": (
        CONFIG.replace("t_end = 1.0", "t_end = 0.5").replace("snapshots = 5", "snapshots = 3"),
        CONFIG.replace("snapshots = 5", "snapshots = 3"),
        "time.t_end is 0.5 in the file, 1.0 in the configuration, which moves the snapshots "
        "already written (snapshot 1 is at t = 0.25 in the file, t = 0.5 in the configuration)",
    ),
    "end_before_the_checkpoint": (
        CONFIG,
        CONFIG.replace("t_end = 1.0", "t_end = 0.5").replace("snapshots = 5", "snapshots = 3"),
        "time.t_end is 1.0 in the file, 0.5 in the configuration, and the file's "
        "checkpoint at t = 1 is not before the new t_end = 0.5",
    ),
}


@pytest.mark.parametrize("name", DIFFERENCES)
def test_a_refused_resume_names_the_first_difference(name, tmp_path, capsys, no_work):
    written, changed, said = DIFFERENCES[name]
    out = complete_run(tmp_path, written)
    before = contents(out)
    write_config(tmp_path, changed)
    no_work()
    assert main(["run", str(tmp_path / "c.toml"), "--resume", "-q"]) == 2
    line = one_error_line(capsys)
    assert line.startswith(
        f"spheredens: error: {str(out)!r} was written by a different configuration: "
        f"{said}; resume needs the same one"
    ), line
    assert contents(out) == before


# -- 4. file modes are kept ------------------------------------------------------------------------
def test_resume_and_overwrite_keep_the_file_mode(tmp_path):
    out = partial_run(tmp_path)
    os.chmod(out, 0o600)
    assert (
        sd.run(sd.load_config(tmp_path / "c.toml"), progress=False, resume=True).attrs["run_status"]
        == "complete"
    )
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    os.chmod(out, 0o640)
    sd.run(sd.load_config(tmp_path / "c.toml"), progress=False, overwrite=True)
    assert stat.S_IMODE(out.stat().st_mode) == 0o640
    # the atomic rewrite itself: a replaced file keeps its mode, a new one follows the umask
    ds = xr.Dataset({"x": ("i", np.arange(3.0))})
    kept, new = tmp_path / "kept.nc", tmp_path / "new.nc"
    kept.write_text("old")
    os.chmod(kept, 0o604)
    write_dataset(ds, kept)
    write_dataset(ds, new)
    umask = os.umask(0)
    os.umask(umask)
    assert (
        stat.S_IMODE(kept.stat().st_mode) == 0o604
        and stat.S_IMODE(new.stat().st_mode) == 0o666 & ~umask
    )
    assert xr.open_dataset(kept)["x"].values.tolist() == [0.0, 1.0, 2.0]


# -- 5. no command writes over one of its own inputs -----------------------------------------------
@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """A density run d.nc, a particle run p.nc of it, a synthetic combined sweep combined.nc."""
    folder = tmp_path_factory.mktemp("inputs")
    cfg = sd.load_config(write_config(folder))
    sd.run(cfg, output=folder / "d.nc", progress=False)
    sd.run_particles(cfg, output=folder / "p.nc", progress=False)
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
    ).to_netcdf(folder / "combined.nc")
    return folder


FROM_FILE = CONFIG.replace('name = "random_smooth"\nseed = 1', 'name = "file"\npath = "d.nc"')
#: name: (argv in the folder of the inputs, the input written over, what it is called)
OWN_INPUTS = {
    "compare_density": (
        ["compare", "d.nc", "p.nc", "-o", "d.nc", "--overwrite"],
        "d.nc",
        "the density file",
    ),
    "compare_particles": (
        ["compare", "d.nc", "p.nc", "-o", "p.nc", "--overwrite"],
        "p.nc",
        "a particle file",
    ),
    "analyze_beta": (
        ["analyze-beta", "combined.nc", "-o", "combined.nc", "--overwrite"],
        "combined.nc",
        "the combined file",
    ),
    "run_initial_path": (
        ["run", "f.toml", "-o", "d.nc", "--overwrite"],
        "d.nc",
        "the initial density file (initial.path)",
    ),
    "run_initial_path_resume": (
        ["run", "f.toml", "-o", "d.nc", "--resume"],
        "d.nc",
        "the initial density file (initial.path)",
    ),
    "particles_initial_path": (
        ["particles", "f.toml", "-o", "d.nc", "--overwrite"],
        "d.nc",
        "the initial density file (initial.path)",
    ),
}


@pytest.mark.parametrize("name", OWN_INPUTS)
def test_no_command_writes_over_its_own_input(name, inputs, tmp_path, capsys, monkeypatch, no_work):
    for file in ("d.nc", "p.nc", "combined.nc"):
        shutil.copy(inputs / file, tmp_path / file)
    write_config(tmp_path, FROM_FILE, "f.toml")
    monkeypatch.chdir(tmp_path)
    argv, victim, what = OWN_INPUTS[name]
    before = {p.name: contents(p) for p in tmp_path.iterdir()}
    no_work()
    assert main(argv) == 2
    line = one_error_line(capsys)
    shown = str(tmp_path / victim) if argv[0] == "run" else victim  # run resolves its output path
    assert (
        f"{shown!r} is {what}, an input of this command: a command never writes over its own "
        "input; "
        "choose another output path" in line
    ), line
    assert {p.name: contents(p) for p in tmp_path.iterdir()} == before


# -- 6. plot, animate and analyze-beta refuse existing outputs; --quiet ---------------------------
EXISTING = {  # name: (argv, the existing output)
    "plot": (["plot", "d.nc"], "d.png"),
    "animate": (["animate", "d.nc", "-o", "d.gif", "--frames", "2"], "d.gif"),
    "analyze-beta": (["analyze-beta", "combined.nc"], "combined_beta_analysis.nc"),
    "analyze-beta figure": (["analyze-beta", "combined.nc"], "combined_beta_analysis.png"),
}


@pytest.mark.parametrize("name", EXISTING)
def test_plot_animate_and_analyze_beta_refuse_an_existing_output_without_overwrite(
    name, inputs, tmp_path, capsys, monkeypatch
):
    for file in ("d.nc", "combined.nc"):
        shutil.copy(inputs / file, tmp_path / file)
    monkeypatch.chdir(tmp_path)
    argv, existing = EXISTING[name]
    (tmp_path / existing).write_text("keep")
    assert main(argv) == 2
    assert capsys.readouterr().err == (
        f"spheredens: error: {existing!r} exists; choose another name (--output) "
        "or pass --overwrite\n"
    )
    assert (tmp_path / existing).read_text() == "keep"
    assert main([*argv, "--overwrite"]) == 0
    assert f"wrote {existing}" in capsys.readouterr().out
    assert (tmp_path / existing).read_bytes()[:4] in (b"\x89PNG", b"GIF8", b"\x89HDF")


def test_quiet_prints_no_wrote_lines(tmp_path, capsys):
    write_config(tmp_path)
    assert main(["run", str(tmp_path / "c.toml"), "-q", "-o", str(tmp_path / "d.nc")]) == 0
    assert main(["particles", str(tmp_path / "c.toml"), "-q", "-o", str(tmp_path / "p.nc")]) == 0
    assert capsys.readouterr() == ("", "")
    assert main(["compare", str(tmp_path / "d.nc"), str(tmp_path / "p.nc"), "-q"]) == 0
    out = capsys.readouterr().out
    assert (
        not [line for line in out.splitlines() if line.startswith("wrote")] and "W2 = " in out
    )  # results
    assert (tmp_path / "d_compare.nc").is_file() and (tmp_path / "d_compare.png").is_file()


# -- 7. an output that cannot be replaced is found before any work ---------------------------------
def _protect(path: Path) -> str:
    """Make ``path`` unreplaceable: immutable (``chattr +i``) for root, for whom permissions do
    not count; read-only otherwise. Returns how, or "" when it cannot be done here."""
    if os.geteuid() != 0:
        os.chmod(path, 0o444)
        return "read-only"
    if shutil.which("chattr") is None:
        return ""
    done = subprocess.run(["chattr", "+i", str(path)], capture_output=True)
    return "immutable" if done.returncode == 0 else ""


def _unprotect(path: Path) -> None:
    if os.geteuid() == 0 and shutil.which("chattr"):
        subprocess.run(["chattr", "-i", str(path)], capture_output=True)
    os.chmod(path, 0o644)


def test_an_output_that_cannot_be_replaced_is_refused_before_any_work(
    inputs, tmp_path, capsys, no_work
):
    out = tmp_path / "run.nc"
    shutil.copy(inputs / "d.nc", out)
    png = tmp_path / "d.png"
    png.write_bytes(b"\x89PNG keep")
    write_config(tmp_path)
    shutil.copy(inputs / "d.nc", tmp_path / "d.nc")
    how = _protect(out) and _protect(png)
    no_work()
    try:
        if not how:
            pytest.skip("no way to make a file unreplaceable here (root without chattr)")
        for argv, path in (
            (["run", str(tmp_path / "c.toml"), "--overwrite", "-q"], out),
            (["run", str(tmp_path / "c.toml"), "--resume", "-q"], out),
            (["plot", str(tmp_path / "d.nc"), "--overwrite"], png),
        ):
            assert main(argv) == 2, argv
            line = one_error_line(capsys)
            assert (
                f"{str(path)!r} exists and cannot be replaced: it is read-only or immutable; make "
                "it "
                "writable (chmod u+w; chattr -i) or choose another path" in line
            ), line
    finally:
        _unprotect(out)
        _unprotect(png)


# -- run(observers=...) ------------------------------------------------------------------------
class _Snapshots(Observer):
    """The times and masses of the states it is shown at snapshots, and how it was started."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self.masses: list[float] = []
        self.started: dict = {}

    def start(self, info: dict) -> None:
        self.started = info

    def observe(self, t: float, state) -> None:
        self.times.append(t)
        self.masses.append(float(self.started["scheme"].masses(state)[0]))


def test_more_observers_see_every_snapshot_and_a_resume_from_its_checkpoint_on(tmp_path, reference):
    whole = _Snapshots()
    data = sd.load_config(write_config(tmp_path)).to_dict()
    data.pop("output")
    ds = sd.run(sd.config_from_dict(data, base_dir=tmp_path), progress=False, observers=[whole])
    assert whole.times == list(ds["time"].values) == [0.0, 0.25, 0.5, 0.75, 1.0]
    np.testing.assert_allclose(whole.masses, ds["mass"].values, rtol=1e-13)

    out = partial_run(tmp_path)
    t_checkpoint = float(sd.open_run(out).attrs["checkpoint_time"])
    later = _Snapshots()
    resumed = sd.run(sd.load_config(tmp_path / "c.toml"), resume=True, progress=False,
                     observers=[later])
    assert later.started["t_start"] == t_checkpoint > 0.0
    assert later.times == [t for t in whole.times if t > t_checkpoint]
    for name in COMPARED:
        np.testing.assert_array_equal(resumed[name].values, reference[name].values)


def test_run_refuses_an_observer_that_is_not_one_before_any_work(tmp_path, no_work):
    no_work()
    with pytest.raises(TypeError, match="not a spheredens.simulate.Observer"):
        sd.run(sd.load_config(write_config(tmp_path)), progress=False, observers=[print])
    assert not (tmp_path / "run.nc").exists()
