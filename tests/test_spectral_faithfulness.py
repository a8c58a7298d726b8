"""A scheme that does not keep rho >= 0 (``sh_spectral``, ``fourier``) says when it stops being
faithful: the first step with min rho < -1e-3 max rho is warned once, in one
line naming t, min rho, max rho and the positive schemes to use instead, and recorded in the
file (``unfaithful_from_t``, ``unfaithful_min_rho``, ``unfaithful_max_rho``); a resume that
already had it does not warn again."""

from __future__ import annotations

import logging
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest

import spheredens as sd
from spheredens.geometry import get_domain
from spheredens.problem import Problem
from spheredens.recorder import UNDERSHOOT, Recorder, positive_alternatives
from spheredens.schema import UNFAITHFUL_ATTRS
from spheredens.schemes import make_scheme
from spheredens.simulate import Observer, simulate

ROOT = Path(__file__).resolve().parents[1]
WARNING = "no longer faithful"


def great_circle(
    lmax: int = 15, beta: float = 12.0, t_end: float = 3.0, snapshots: int = 4
) -> dict:
    """The configuration of ``make demo-sphere`` (runs/sphere_great_circle), smaller: at lmax 15
    and beta 12 (resolved by the kernel's rule, lmax >= 3 sqrt(2 beta) = 14.7) its density
    rings from t = 1.598, measured."""
    raw = tomllib.loads((ROOT / "runs" / "sphere_great_circle" / "config.toml").read_text())
    raw["model"]["beta"] = beta
    raw["discretization"]["lmax"] = lmax
    raw["time"].update(t_end=t_end, snapshots=snapshots)
    raw["output"] = {"figure": False}
    return raw


def toml(raw: dict) -> str:
    """``raw`` (the nested dict of a run configuration) as TOML."""
    return sd.config_from_dict(raw).to_toml()


class EveryStep(Observer):
    """Records (t, min rho, max rho) after every step, from the density itself."""

    def __init__(self, scheme) -> None:
        self.scheme, self.rows = scheme, []

    def step(self, t, dt, state=None):
        rho = np.asarray(self.scheme.density(state))
        self.rows.append((t, float(rho.min()), float(rho.max())))


def faithfulness_records(caplog) -> list[logging.LogRecord]:
    return [r for r in caplog.records if WARNING in r.getMessage()]


def test_the_first_unfaithful_step_is_warned_once_and_recorded(caplog):
    cfg = sd.config_from_dict(great_circle())
    problem = Problem.from_config(cfg)
    scheme = make_scheme(problem, cfg.discretization)
    recorder, spy = Recorder(problem, scheme, cfg), EveryStep(scheme)
    with caplog.at_level(logging.WARNING):
        result = simulate(scheme, cfg.time, [recorder, spy])
    assert result.stop_reason == "end"
    k = next(i for i, (_, low, high) in enumerate(spy.rows) if low < -UNDERSHOOT * high)
    t, low, high = spy.rows[k]
    assert all(lo >= -UNDERSHOOT * hi for _, lo, hi in spy.rows[:k])  # faithful before it
    assert recorder.unfaithful == (t, low, high)
    assert (
        1.2 < t < 2.2 and -2e-2 < low < -UNDERSHOOT * high
    )  # measured: t = 1.598, min rho -0.0016
    assert spy.rows[-1][1] < -0.1  # and it rings on: min rho -0.137 at t = 3
    records = faithfulness_records(caplog)
    assert len(records) == 1 and records[0].levelno == logging.WARNING, caplog.text
    line = records[0].getMessage()
    assert line.startswith(
        f"sh_spectral is no longer faithful from t = {t:.6g}: min rho = {low:.3g} "
    )
    assert f"(max rho = {high:.4g})" in line and "(lmax = 15)" in line and "\n" not in line
    assert f"use scheme {positive_alternatives('sphere')}, which keeps rho >= 0" in line
    ds = recorder.dataset()
    assert [ds.attrs[name] for name in UNFAITHFUL_ATTRS] == [t, low, high]
    assert float(ds["min_rho"].values[-1]) == pytest.approx(spy.rows[-1][1], rel=1e-12)


def test_the_command_line_warns_in_one_line_and_a_resume_does_not_again(tmp_path):
    config = tmp_path / "ring.toml"
    config.write_text(toml(great_circle()))

    def run(*options: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "spheredens.cli", "run", config.name, "-q", *options],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
        )

    first = run()
    assert first.returncode == 0, first.stderr
    lines = first.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "spheredens: warning: sh_spectral is no longer faithful from t = "
    ), first.stderr
    said = float(re.search(r"from t = ([0-9.e+-]+):", lines[0]).group(1))
    attrs = sd.open_run(tmp_path / "ring.nc").attrs
    t, low, high = (float(attrs[name]) for name in UNFAITHFUL_ATTRS)
    assert said == pytest.approx(t, rel=1e-5) and 1.2 < t < 2.2 and low < -UNDERSHOOT * high
    assert f"min rho = {low:.3g} < -0.001 max rho (max rho = {high:.4g})" in lines[0]
    # extended to t = 4 (same spacing of snapshots): it went on ringing, and is not told again
    config.write_text(toml(great_circle(t_end=4.0, snapshots=5)))
    resumed = run("--resume")
    assert resumed.returncode == 0 and WARNING not in resumed.stderr, resumed.stderr
    ds = sd.open_run(tmp_path / "ring.nc")
    assert ds.attrs["run_status"] == "complete" and float(ds["time"].values[-1]) == 4.0
    assert [float(ds.attrs[name]) for name in UNFAITHFUL_ATTRS] == [t, low, high]
    assert float(ds["min_rho"].values[-1]) < -0.1  # measured -0.326 at t = 4


def test_a_resume_from_before_the_ringing_warns_when_it_comes(tmp_path, caplog):
    whole = sd.run(great_circle(), progress=False)  # uninterrupted, to t = 3
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        early = sd.run(
            great_circle(t_end=1.0, snapshots=2), output=tmp_path / "r.nc", progress=False
        )
        assert not faithfulness_records(caplog) and not set(UNFAITHFUL_ATTRS) & set(early.attrs)
        assert float(early["min_rho"].min()) > 0.01
        later = sd.run(great_circle(), output=tmp_path / "r.nc", progress=False, resume=True)
    assert len(faithfulness_records(caplog)) == 1, caplog.text
    assert [later.attrs[n] for n in UNFAITHFUL_ATTRS] == [whole.attrs[n] for n in UNFAITHFUL_ATTRS]
    assert later.attrs["n_steps"] == whole.attrs["n_steps"]


def test_a_well_resolved_run_prints_nothing_and_records_nothing(tmp_path):
    (tmp_path / "fine.toml").write_text(toml(great_circle(lmax=31, t_end=1.0, snapshots=3)))
    proc = subprocess.run(
        [sys.executable, "-m", "spheredens.cli", "run", "fine.toml", "-q"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    ds = sd.open_run(tmp_path / "fine.nc")
    assert not [name for name in ds.attrs if name.startswith("unfaithful")]
    assert float(ds["min_rho"].min()) > 0.01  # measured 0.0132 at t = 1: far from ringing


def test_the_circle_fourier_scheme_warns_too(caplog):
    raw = tomllib.loads((ROOT / "runs" / "circle_example_c" / "config.toml").read_text())
    raw["model"]["beta"] = 3.0  # n = 64 resolves the kernel: n >= 6 pi sqrt(3 ||B||) = 56
    raw["discretization"] = {"scheme": "fourier", "n": 64}
    raw["time"].update(t_end=6.0, snapshots=4)
    raw["output"] = {"figure": False}
    with caplog.at_level(logging.WARNING):
        ds = sd.run(raw, progress=False)
    records = faithfulness_records(caplog)
    assert len(records) == 1, caplog.text
    t, low, high = (ds.attrs[name] for name in UNFAITHFUL_ATTRS)
    assert 2.0 < t < 4.0 and low < -UNDERSHOOT * high < 0  # measured: t = 3.063, min rho -0.0024
    line = records[0].getMessage()
    assert (
        line.startswith(f"fourier is no longer faithful from t = {t:.6g}: ") and "(n = 64)" in line
    )
    assert "use scheme fv (or log_sl at low temperature), which keeps rho >= 0" in line


def test_a_positive_scheme_is_not_checked(caplog):
    raw = great_circle(beta=0.5, t_end=0.5, snapshots=2)  # nlat = 8 resolves beta = 0.5
    raw["discretization"] = {"scheme": "fv", "nlat": 8}
    with caplog.at_level(logging.WARNING):
        ds = sd.run(raw, progress=False)
    assert not faithfulness_records(caplog) and not set(UNFAITHFUL_ATTRS) & set(ds.attrs)
    assert float(ds["min_rho"].min()) >= 0.0


def test_the_positive_alternatives_are_the_registered_positive_schemes():
    assert positive_alternatives("circle") == "fv (or log_sl at low temperature)"
    low = [n for n in ("log_lagrangian", "log_sl") if n in get_domain("sphere").schemes]
    sphere = f" (or {' or '.join(low)} at low temperature)" if low else ""
    assert positive_alternatives("sphere") == "fv" + sphere
