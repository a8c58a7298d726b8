"""The time loop: exact snapshot times, CFL steps, stop reasons."""

from __future__ import annotations

import numpy as np
from conftest import make_config

import spheredens as sd
from spheredens.config import TimeConfig
from spheredens.integrators import INTEGRATORS
from spheredens.schemes import Scheme, Tendency


class Decay(Scheme):
    """y' = -y with a fixed 'speed' of 1 and a grid spacing h: dt = cfl * h."""

    speed_floor, speed_bound = 0.0, float("inf")

    def __init__(self, h=0.01, fail_after=None):
        self.h = h
        self.integrator = INTEGRATORS.get("rk4")
        self.calls = 0
        self.fail_after = fail_after
        self.steps = []

    def initial_state(self):
        return np.ones((1, 3))

    def rhs(self, y, t):
        self.calls += 1
        if self.fail_after is not None and t > self.fail_after:
            return Tendency(np.full_like(y, np.nan), 1.0)
        return Tendency(-y, 1.0)

    def stable_dt(self, cfl, tendency):
        return cfl * self.h / tendency.max_speed


class Recorder:
    def __init__(self):
        self.times, self.states, self.result = [], [], None

    def start(self, info):
        pass

    def observe(self, t, y):
        self.times.append(t)
        self.states.append(y.copy())

    def step(self, t, dt, state=None):
        self.dts = getattr(self, "dts", []) + [dt]

    def finish(self, result):
        self.result = result


def test_snapshots_land_exactly_and_steps_respect_cfl():
    times = (0.0, 0.1, 1.0 / 3.0, 0.77, 1.0)
    rec = Recorder()
    scheme = Decay(h=0.013)
    res = sd.simulate(scheme, TimeConfig(1.0, times, None, 0.5), [rec])
    assert res.completed and rec.times == list(times)  # exact floats, no "nearest step"
    assert max(rec.dts) <= 0.5 * 0.013 * (1 + 1e-15)
    for t, y in zip(rec.times, rec.states):
        assert (
            abs(y[0, 0] - np.exp(-t)) < 1e-11
        )  # RK4: ~ t dt^4 / 120 per unit = 1.3e-12 at t = 1/3


def test_end_time_not_in_snapshots_is_still_reached():
    rec = Recorder()
    res = sd.simulate(Decay(), TimeConfig(0.5, (0.0, 0.2), None, 0.4), [rec])
    assert res.t == 0.5 and rec.times == [0.0, 0.2]


def test_nan_stops_with_reason_and_keeps_last_good_state():
    rec = Recorder()
    res = sd.simulate(Decay(fail_after=0.3), TimeConfig(1.0, None, 11, 0.4), [rec])
    assert res.stop_reason == "nan" and not res.completed
    # a stage at t + dt/2 > 0.3 fails: the last good state is one step before
    assert 0.3 - 0.004 - 1e-12 <= res.t <= 0.3 and np.all(np.isfinite(res.state))
    assert rec.times == [0.0, 0.1, 0.2]


def test_run_raises_simulation_error_and_keeps_file(tmp_path, monkeypatch):
    cfg = make_config(
        time={"t_end": 1.0, "snapshots": 11}, output={"path": "f.nc"}, base_dir=tmp_path
    )
    from spheredens.schemes import FiniteVolumeScheme

    original = FiniteVolumeScheme.rhs

    def failing(self, state, t):
        out = original(self, state, t)
        return out._replace(rate=out.rate * np.nan) if t > 0.45 else out

    monkeypatch.setattr(FiniteVolumeScheme, "rhs", failing)
    try:
        sd.run(cfg, progress=False)
    except sd.SimulationError as exc:
        assert "non-finite" in str(exc) and "f.nc" in str(exc)
    else:
        raise AssertionError("no SimulationError")
    ds = sd.open_run(tmp_path / "f.nc")
    assert ds.attrs["run_status"] == "partial" and ds.attrs["stop_reason"] == "nan"
    assert list(ds.time.values) == [0.0, 0.1, 0.2, 0.30000000000000004, 0.4]
