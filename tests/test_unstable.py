"""A run that has gone wrong never says ``complete``: integrators that cannot
be stable for a scheme are refused at configuration time, every step is checked against the
invariants its scheme promises (mass, positivity, growth of max |rho| against the velocity's
compression), a violation stops the run ``unstable`` in one line with the last good snapshots
kept, and a run ended by an exception says ``error`` in its file, never ``running``."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import EXAMPLE_C

import spheredens as sd
from spheredens.cli import main
from spheredens.config import MAX_STEPS
from spheredens.integrators import INTEGRATORS
from spheredens.io import FileWriter
from spheredens.problem import Problem
from spheredens.recorder import Recorder
from spheredens.schemes import FiniteVolumeScheme, FourierScheme, make_scheme
from spheredens.simulate import GROWTH_FACTOR, MASS_TOLERANCE, Invariants, simulate

#: the probe's blow-ups: fourier n = 176 (resolved at beta = 86: it needs n >= 175, even) and
#: sh_spectral at lmax 31
FOURIER_176 = {
    "model": {"name": "sa", "beta": 86.0},
    "initial": {"name": "random_smooth", "seed": 1},
    "discretization": {"scheme": "fourier", "n": 176},
    "time": {"t_end": 40.0, "snapshots": 11},
}
SPHERE_31 = {
    "model": {"name": "sa", "beta": 2.0, "K": [[1.2, 0, 0], [0, 0, -1.2], [0, 1.2, 0]]},
    "domain": {"name": "sphere"},
    "initial": {"name": "von_mises_fisher", "means": [[0, 0, 1], [1, 0, 0]], "kappas": [4.0, 4.0]},
    "discretization": {"scheme": "sh_spectral", "lmax": 31},
    "time": {"t_end": 40.0, "snapshots": 11},
}
#: a smooth circle run (example C at beta = 1), where only the integrator can go wrong
SMOOTH = {
    "model": {"name": "sa", "beta": 1.0, **EXAMPLE_C},
    "initial": {"name": "random_smooth", "seed": 2},
    "discretization": {"scheme": "fourier", "n": 256},
    "time": {"t_end": 40.0, "snapshots": 11},
}


def with_options(base, discretization=None, time=None):
    return {
        **base,
        "discretization": {**base["discretization"], **(discretization or {})},
        "time": {**base["time"], **(time or {})},
    }


def run_bypassing_config(data, integrator, path):
    """Run ``data`` as sd.run does, but with ``integrator`` swapped in after the configuration
    (which refuses it): what happened before the refusal existed."""
    cfg = sd.config_from_dict(data)
    problem = Problem.from_config(cfg)
    scheme = make_scheme(problem, cfg.discretization)
    scheme.integrator = INTEGRATORS.get(integrator)
    recorder = Recorder(problem, scheme, cfg)
    result = simulate(scheme, cfg.time, [recorder, FileWriter(recorder, path)])
    return result, sd.open_run(path)


# -- refused at configuration time -------------------------------------------------------------


def test_stability_reach_of_every_integrator_on_the_imaginary_axis():
    """|R(i s)| <= 1 for |s| <= reach: none for euler and ssprk2, sqrt(3), 2 sqrt(2)."""
    expected = {"euler": 0.0, "ssprk2": 0.0, "ssprk3": math.sqrt(3.0), "rk4": 2.0 * math.sqrt(2.0)}
    for name, reach in expected.items():
        tableau = INTEGRATORS.get(name)
        assert tableau.imaginary_axis_reach == pytest.approx(reach, abs=1e-12), name
        r = np.polynomial.Polynomial(tableau.stability_polynomial)
        inside = np.linspace(1e-3, reach, 50) if reach else np.array([])
        assert np.all(np.abs(r(1j * inside)) <= 1.0 + 1e-12), name
        assert abs(r(1j * (reach + 1e-3))) > 1.0, name  # just beyond it: unstable


@pytest.mark.parametrize(
    "data, integrator",
    [(FOURIER_176, "euler"), (FOURIER_176, "ssprk2"), (SPHERE_31, "euler"), (SPHERE_31, "ssprk2")],
    ids=["fourier-euler", "fourier-ssprk2", "sh_spectral-euler", "sh_spectral-ssprk2"],
)
def test_the_probe_blowups_are_refused_at_config_time(data, integrator):
    """Their spectrum is imaginary, and no part of that axis is stable for these methods: at
    any cfl, in one line naming the key and what is safe."""
    for cfl in (0.4, 0.05):
        with pytest.raises(sd.ConfigError) as info:
            sd.config_from_dict(with_options(data, {"integrator": integrator}, {"cfl": cfl}))
        assert info.value.key == "discretization.integrator"
        text = str(info.value)
        assert "\n" not in text and f"{integrator!r} cannot be stable for scheme" in text
        assert "'rk4' (time.cfl <= 0.9) or 'ssprk3' (time.cfl <= 0.55)" in text


@pytest.mark.parametrize("scheme, base", [("fourier", FOURIER_176), ("sh_spectral", SPHERE_31)])
def test_a_cfl_beyond_the_reach_of_the_integrator_is_refused(scheme, base):
    """pi cfl <= reach: ssprk3 up to cfl 0.5513, rk4 up to 0.9003."""
    for integrator, good, bad in (("ssprk3", 0.55, 0.56), ("rk4", 0.9, 0.91)):
        sd.config_from_dict(with_options(base, {"integrator": integrator}, {"cfl": good}))
        with pytest.raises(sd.ConfigError) as info:
            sd.config_from_dict(with_options(base, {"integrator": integrator}, {"cfl": bad}))
        assert info.value.key == "time.cfl"
        assert f"= {bad:g} is unstable with integrator {integrator!r} for scheme {scheme!r}" in str(
            info.value
        )
        assert "use 'rk4' (time.cfl <= 0.9) or 'ssprk3' (time.cfl <= 0.55)" in str(info.value)


@pytest.mark.parametrize("integrator", ["euler", "ssprk2", "ssprk3", "rk4"])
def test_finite_volumes_are_refused_with_no_integrator(integrator):
    """Upwind finite volumes have a damped spectrum (forward Euler is TVD for cfl <= 1/2 with
    the MC limiter, first order for cfl <= 1): every integrator and cfl is accepted."""
    for cfl in (0.4, 1.0):
        for data in (
            {"discretization": {"scheme": "fv", "n": 64, "integrator": integrator}},
            {
                "domain": {"name": "sphere"},
                "discretization": {"scheme": "fv", "nlat": 8, "integrator": integrator},
            },
        ):
            cfg = sd.config_from_dict({**data, "time": {"cfl": cfl}})
            assert cfg.discretization.options["integrator"] == integrator


def test_the_probe_blowups_never_complete_even_past_the_config(tmp_path):
    """What the probe ran (the configuration now refuses it): fourier n = 176 with euler blew
    up to 1e10 and beyond, sh_spectral lmax 31 with euler grew rho far above what rk4 reaches.
    Both stop ``unstable`` now, the file keeping the snapshots before."""
    result, ds = run_bypassing_config(FOURIER_176, "euler", tmp_path / "f.nc")
    assert result.stop_reason == "unstable" and ds.attrs["stop_reason"] == "unstable"
    assert ds.attrs["run_status"] == "partial" and ds.attrs["integrator"] == "euler"
    assert 0 < ds.sizes["time"] < 11 and float(ds["time"][-1]) <= result.t < 40.0
    result, ds = run_bypassing_config(SPHERE_31, "euler", tmp_path / "s.nc")
    assert result.stop_reason == "unstable" and ds.attrs["stop_reason"] == "unstable"
    assert "max |rho|" in result.message and ds.attrs["run_status"] == "partial"
    assert 0 < ds.sizes["time"] < 11 and np.all(np.isfinite(ds["rho"].values))


@pytest.mark.parametrize(
    "integrator, earliest, latest", [("euler", 3.0, 6.0), ("ssprk2", 10.0, 18.0)]
)
def test_an_unstable_integrator_is_caught_by_the_growth_of_max_rho(
    tmp_path, integrator, earliest, latest
):
    """On a smooth run the unstable methods make max |rho| grow faster than the velocity's
    compression allows. That shows once the unstable mode has grown to the size of the
    solution, long before it explodes: stopped at t = 4.6 and t = 14 (measured; the mode grows
    from round-off, so the step moves with the round-off of the initial density: a window
    here), the file's max |rho| within 3 times the stable run's. rk4 completes the run."""
    result, ds = run_bypassing_config(SMOOTH, integrator, tmp_path / "r.nc")
    assert result.stop_reason == "unstable" and earliest < result.t < latest
    assert result.message.startswith(
        f"unstable integration: step {result.n_steps + 1} (t = {result.t:.6g} to "
    )
    assert "max |rho|" in result.message and "compression allows" in result.message
    assert result.message.endswith(
        "use discretization.integrator = 'rk4' with time.cfl <= 0.2 (if it "
        "recurs: a finer grid, or scheme 'fv', which keeps rho >= 0)"
    )
    assert ds.attrs["stop_reason"] == "unstable" and float(ds.attrs["checkpoint_time"]) == result.t
    assert abs(float(ds["mass"][-1]) - 1.0) < 1e-12
    reference = sd.run(sd.config_from_dict(SMOOTH), progress=False)
    assert reference.attrs["stop_reason"] == "end"
    assert np.abs(ds["rho"].values).max() < 3.0 * np.abs(reference["rho"].values).max()


# -- each invariant, violated on purpose --------------------------------------------------------


def corrupt_from(monkeypatch, cls, step, change):
    """From the ``step``-th call of ``cls.post_step`` on (one call per attempt of a step), the
    state after the step is ``change(state)``."""
    original, calls = cls.post_step, {"n": 0}

    def post_step(self, state, dt):
        calls["n"] += 1
        out = original(self, state, dt)
        return change(np.array(out)) if calls["n"] >= step else out

    monkeypatch.setattr(cls, "post_step", post_step)
    return calls


def circle_run(tmp_path, scheme="fourier", integrator=None, **extra):
    disc = {
        "scheme": scheme,
        "n": 64,
        **({"integrator": integrator} if integrator else {}),
        **extra,
    }
    return sd.config_from_dict(
        {
            "model": {"name": "sa", "beta": 1.0},
            "initial": {"name": "random_smooth", "seed": 2},
            "discretization": disc,
            "time": {"t_end": 2.0, "snapshots": 11},
            "output": {"path": str(tmp_path / "r.nc"), "figure": False},
        }
    )


def stopped(cfg):
    with pytest.raises(sd.SimulationError) as info:
        sd.run(cfg, progress=False)
    return str(info.value), sd.open_run(cfg.output_path())


def test_a_step_that_changes_the_mass_stops_the_run(tmp_path, monkeypatch):
    corrupt_from(monkeypatch, FourierScheme, 15, lambda y: y * (1.0 + 1e-5))
    text, ds = stopped(circle_run(tmp_path))
    assert "\n" not in text and text.startswith("at t = ")
    assert ", step 14: unstable integration: step 15 (t = " in text
    assert "changed the mass to 1.00001, not 1 (to 1e-06), though the scheme conserves it" in text
    assert "use discretization.integrator = 'rk4' with time.cfl <= 0.2" in text
    assert text.endswith(f"the snapshots before it are in {str(tmp_path / 'r.nc')!r}")
    assert ds.attrs["stop_reason"] == "unstable" and ds.attrs["run_status"] == "partial"
    assert "step 15" in ds.attrs["stop_message"] and ds.attrs["n_steps"] == 14
    # the last good state: the snapshots before step 15 and the checkpoint at its start, mass 1
    assert np.all(np.abs(ds["mass"].values - 1.0) < 1e-13) and 1 <= ds.sizes["time"] < 11
    assert float(ds["time"][-1]) <= float(ds.attrs["checkpoint_time"])
    assert MASS_TOLERANCE == 1e-6


def test_a_mass_change_within_the_tolerance_goes_on(tmp_path, monkeypatch):
    """1e-9 per step for 10 steps: 1e-8, below 1e-6 (round-off never reaches it)."""
    calls = corrupt_from(
        monkeypatch, FourierScheme, 5, lambda y: y * (1.0 + 1e-9) if calls["n"] < 15 else y
    )
    ds = sd.run(circle_run(tmp_path), progress=False)
    assert ds.attrs["stop_reason"] == "end" and abs(float(ds["mass"][-1]) - 1.0 - 1e-8) < 1e-12


def _negative_cell(y):
    """Cell argmin made -1e-9, its mass spread evenly on the others (mass, max nearly kept)."""
    j = int(np.argmin(y[0]))
    amount = y[0, j] + 1e-9
    y[0] += amount / (y.shape[-1] - 1)
    y[0, j] = -1e-9
    return y


def test_a_negative_density_stops_a_scheme_that_keeps_rho_positive(tmp_path, monkeypatch):
    """fv with ssprk3 at cfl 0.4 keeps rho >= 0: a step refused for going negative is retried
    at dt / 2 (8 times), then stops the run."""
    calls = corrupt_from(monkeypatch, FiniteVolumeScheme, 12, _negative_cell)
    text, ds = stopped(circle_run(tmp_path, "fv"))
    assert ", step 11: unstable integration: step 12 (t = " in text
    assert (
        "made rho negative (min rho = -1e-09), though scheme 'fv' keeps rho >= 0 with integrator "
        "'ssprk3' at time.cfl = 0.4; use discretization.integrator = 'ssprk3' with time.cfl <= 0.2 "
        "(if it recurs: a finer grid)"
    ) in text
    assert calls["n"] == 11 + 9  # 11 good steps, then 1 + 8 retries of step 12
    assert ds.attrs["stop_reason"] == "unstable" and float(ds["min_rho"].min()) >= 0.0
    assert ds.attrs["retried_steps"] == 8


@pytest.mark.parametrize("integrator, cfl", [("rk4", 0.4), ("ssprk3", 0.6)])
def test_positivity_is_not_checked_where_it_is_not_promised(tmp_path, monkeypatch, integrator, cfl):
    """rk4 is not SSP, and cfl 0.6 is beyond 0.5: fv promises nothing there; the run goes on
    (and its file reports the negative min_rho)."""
    corrupt_from(monkeypatch, FiniteVolumeScheme, 12, _negative_cell)
    cfg = circle_run(tmp_path, "fv", integrator).replace(**{"time.cfl": cfl})
    ds = sd.run(cfg, progress=False)
    assert ds.attrs["stop_reason"] == "end" and float(ds["min_rho"].values[-1]) < 0.0


def test_promises_of_each_scheme():
    def scheme(data):
        cfg = sd.config_from_dict(data)
        return make_scheme(Problem.from_config(cfg), cfg.discretization)

    fv = scheme({"discretization": {"scheme": "fv", "n": 16}})
    assert fv.promises_positivity(0.5) and not fv.promises_positivity(0.51)
    assert not scheme(
        {"discretization": {"scheme": "fv", "n": 16, "integrator": "rk4"}}
    ).promises_positivity(0.4)
    assert scheme(
        {"discretization": {"scheme": "fv", "n": 16, "integrator": "euler"}}
    ).promises_positivity(0.5)
    assert not scheme({"discretization": {"scheme": "fourier", "n": 16}}).promises_positivity(0.1)
    # log rho is stored: rho > 0 by construction, nothing to check
    assert not scheme({"discretization": {"scheme": "log_sl", "n": 16}}).promises_positivity(0.1)
    sphere = scheme({"domain": {"name": "sphere"}, "discretization": {"scheme": "fv", "nlat": 8}})
    assert sphere.promises_positivity(0.4) and Invariants(sphere, 0.4).slack == 2.0
    assert Invariants(scheme({"discretization": {"scheme": "log_sl", "n": 16}}), 0.4).slack == 3.0


@pytest.mark.parametrize(
    "cls, scheme, change",
    [
        (FourierScheme, "fourier", lambda y: 3.0 * y - 2.0 / (2.0 * np.pi)),  # mass kept, max x ~3
        (
            FiniteVolumeScheme,
            "fv",
            lambda y: (y + 2.0 * y.max() * (y == y.max())) / (1.0 + 2.0 * y.max() * 2 * np.pi / 64),
        ),
    ],
)
def test_a_growth_the_velocity_cannot_make_stops_the_run(
    tmp_path, monkeypatch, cls, scheme, change
):
    """max |rho| x ~3 (x 2.3 for fv, keeping rho >= 0) in one step with the mass kept: more than
    growth_slack x exp(2 dt max(-div X)) allows."""
    corrupt_from(monkeypatch, cls, 7, change)
    text, ds = stopped(circle_run(tmp_path, scheme))
    assert ", step 6: unstable integration: step 7 (t = " in text
    assert (
        "took max |rho| from " in text
        and "more than the velocity's compression allows (max(-div X) = " in text
    )
    assert ds.attrs["stop_reason"] == "unstable" and GROWTH_FACTOR == 2.0


def test_the_growth_bound_is_what_the_characteristics_allow():
    """A step may take max |rho| to min(envelope, S max|rho|) exp(c dt D), not beyond."""
    cfg = sd.config_from_dict({"discretization": {"scheme": "fourier", "n": 16}})
    scheme = make_scheme(Problem.from_config(cfg), cfg.discretization)
    y = scheme.initial_state() * (1.0 + 0.05 * np.cos(scheme.grid.theta))
    top, j, n = float(y.max()), int(np.argmax(y[0])), y.shape[-1]

    def peaked(p):  # the same mass, max |rho| = p at node j
        return y + (p - top) / (1.0 - 1.0 / n) * (np.eye(n)[j] - 1.0 / n)

    limit = 2.0 * top * math.exp(GROWTH_FACTOR * 0.1 * 0.5)
    inv = Invariants(scheme, 0.4)
    inv.start(y)
    inv.check(peaked(limit * (1 - 1e-9)), 0.1, 0.5, 1, 0.0)
    assert inv.envelope == pytest.approx(limit, rel=1e-15)
    # from there, no compression: the envelope holds (not twice the new max)
    with pytest.raises(Exception, match="step 2 .* took max \\|rho\\| from"):
        inv.check(peaked(limit * (1 + 1e-9)), 0.1, 0.0, 2, 0.1)
    inv = Invariants(scheme, 0.4)
    inv.start(y)
    with pytest.raises(Exception, match="at most"):
        inv.check(peaked(limit * (1 + 1e-9)), 0.1, 0.5, 1, 0.0)


# -- a crash is recorded ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "error", [MemoryError("Unable to allocate 99.0 GiB"), RuntimeError("a bug\nin two lines")]
)
def test_a_crash_leaves_error_in_the_file_never_running(tmp_path, monkeypatch, error):
    original, calls = FourierScheme.rhs, {"n": 0}

    def rhs(self, state, t):
        calls["n"] += 1
        if calls["n"] > 30:  # step 11 of 21
            raise error
        return original(self, state, t)

    monkeypatch.setattr(FourierScheme, "rhs", rhs)
    cfg = circle_run(tmp_path)
    with pytest.raises(type(error)):
        sd.run(cfg, progress=False)
    ds = sd.open_run(cfg.output_path())
    assert ds.attrs["stop_reason"] == "error" and ds.attrs["run_status"] == "partial"
    message = str(ds.attrs["stop_message"])
    assert message.startswith(f"{type(error).__name__} at t = ") and "\n" not in message
    assert " ".join(str(error).split()) in message
    # the snapshots so far and the last good state are kept: it resumes
    assert 1 <= ds.sizes["time"] < 11 and float(ds.attrs["checkpoint_time"]) > 0.0
    monkeypatch.setattr(FourierScheme, "rhs", original)
    assert sd.run(cfg, progress=False, resume=True).attrs["run_status"] == "complete"


def test_a_crash_while_recording_a_snapshot_keeps_the_whole_ones(tmp_path, monkeypatch):
    """MemoryError in the mass of the 4th snapshot: that snapshot is half recorded; the file
    holds the 3 whole ones, says ``error``, and resumes to the same file as a run without it."""
    import spheredens.recorder as recorder_module

    original, calls = recorder_module.mass, {"n": 0}

    def mass(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 4:
            raise MemoryError("Unable to allocate 12.0 GiB")
        return original(*args, **kwargs)

    monkeypatch.setattr(recorder_module, "mass", mass)
    cfg = circle_run(tmp_path, "fv")
    with pytest.raises(MemoryError):
        sd.run(cfg, progress=False)
    ds = sd.open_run(cfg.output_path())
    assert ds.attrs["stop_reason"] == "error" and ds.attrs["run_status"] == "partial"
    assert str(ds.attrs["stop_message"]).startswith("MemoryError at t = 0.6 (step ")
    assert (
        list(ds["time"].values) == pytest.approx([0.0, 0.2, 0.4])
        and ds["w2_terminal"].sizes["time"] == 3
    )
    assert float(ds.attrs["checkpoint_time"]) == pytest.approx(0.6)
    monkeypatch.setattr(recorder_module, "mass", original)
    resumed = sd.run(cfg, progress=False, resume=True)
    reference = sd.run(cfg.replace(**{"output.path": str(tmp_path / "ref.nc")}), progress=False)
    assert resumed.attrs["run_status"] == "complete"
    np.testing.assert_array_equal(resumed["rho"].values, reference["rho"].values)


# -- horizons that take too many steps ----------------------------------------------------------


def test_a_horizon_of_more_than_1e9_steps_is_refused():
    assert MAX_STEPS == 1e9
    with pytest.raises(sd.ConfigError) as info:
        sd.config_from_dict({"time": {"t_end": 1e300}})
    assert info.value.key == "time.t_end" and "\n" not in str(info.value)
    # fv n = 256, cfl 0.4, ||V|| = 1: steps of at most 0.4 (2 pi / 256) / 0.1 = 0.0982
    assert (
        "= 1e+300 would take at least 1.02e+301 steps (each at most cfl h / (0.1 ||V||) = 0.0982), "
        "more "
        "than 1e9; use time.t_end <= 9.82e+07"
    ) in str(info.value)
    sd.config_from_dict({"time": {"t_end": 9.8e7}})
    with pytest.raises(sd.ConfigError) as info:
        sd.config_from_dict({"time": {"max_dt": 1e-300}})
    assert info.value.key == "time.max_dt"
    assert (
        "= 1e-300 would take at least t_end / max_dt = 1e+300 steps, more than 1e9; use max_dt >= "
        "1e-09" in str(info.value)
    )
    sd.config_from_dict({"time": {"t_end": 10.0, "max_dt": 1e-8}})


def test_a_huge_horizon_is_not_called_a_blow_up():
    """The zero-temperature field has no speed floor, so no bound at configuration time: at
    run time the first step names the horizon, not the velocity."""
    with pytest.raises(sd.SimulationError) as info:
        sd.run({"model": {"name": "sa_zero_temperature"}, "time": {"t_end": 1e300}}, progress=False)
    assert "time.t_end = 1e+300 would take more than 1e9 steps; use a smaller time.t_end" in str(
        info.value
    )
    assert "blew up" not in str(info.value)


# -- stable configurations still complete -------------------------------------------------------


@pytest.mark.parametrize(
    "data",
    [
        {
            "discretization": {
                "scheme": "fv",
                "n": 128,
                "integrator": "euler",
                "limiter": "first_order",
            },
            "time": {"cfl": 0.9},
        },
        {"discretization": {"scheme": "fv", "n": 128, "integrator": "euler"}, "time": {"cfl": 0.5}},
        {
            "discretization": {"scheme": "fv", "n": 128, "integrator": "ssprk2"},
            "time": {"cfl": 0.5},
        },
        {"discretization": {"scheme": "fv", "n": 128, "integrator": "rk4"}, "time": {"cfl": 1.0}},
        {
            "discretization": {"scheme": "fourier", "n": 128, "integrator": "ssprk3"},
            "time": {"cfl": 0.55},
        },
        {"discretization": {"scheme": "fourier", "n": 128}, "time": {"cfl": 0.9}},
        {"discretization": {"scheme": "log_sl", "n": 128}},
    ],
    ids=[
        "fv-euler-first_order-0.9",
        "fv-euler-0.5",
        "fv-ssprk2-0.5",
        "fv-rk4-1",
        "fourier-ssprk3-0.55",
        "fourier-rk4-0.9",
        "log_sl",
    ],
)
def test_stable_configurations_complete(data):
    """Concentrating runs (beta = 10, to t = 10) at the edge of what is accepted."""
    cfg = sd.config_from_dict(
        {
            "model": {"name": "sa", "beta": 10.0, **EXAMPLE_C},
            "initial": {"name": "random_smooth", "seed": 2},
            **data,
            "time": {"t_end": 10.0, "snapshots": 3, **data.get("time", {})},
        }
    )
    ds = sd.run(cfg, progress=False)
    assert ds.attrs["stop_reason"] == "end" and ds.attrs["run_status"] == "complete"
    assert np.all(np.abs(ds["mass"].values - 1.0) < 1e-12)


def test_the_cli_says_run_stopped_in_one_line_and_exits_1(tmp_path, monkeypatch, capsys):
    corrupt_from(monkeypatch, FourierScheme, 15, lambda y: y * (1.0 + 1e-5))
    (tmp_path / "c.toml").write_text(
        '[initial]\nname = "random_smooth"\nseed = 2\n[discretization]\n'
        'scheme = "fourier"\nn = 64\n[time]\nt_end = 2.0\n[output]\nfigure = false\n'
    )
    assert main(["run", str(tmp_path / "c.toml"), "-q"]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("spheredens: run stopped: at t = ")
    assert "unstable integration: step 15" in err and "the mass" in err and "time.cfl <= 0.2" in err
    assert sd.open_run(tmp_path / "c.nc").attrs["stop_reason"] == "unstable"
