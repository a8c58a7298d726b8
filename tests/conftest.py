from __future__ import annotations

import numpy as np
import pytest

#: "example C" of the concentration paper digest (A = V B^T symmetric, eigenvalues 2 and 1)
EXAMPLE_C = {
    "Q": [[1.0, 0.0], [0.0, 1.0]],
    "K": [[1.75, 0.866025], [0.433013, 2.5]],
    "V": [[1.0, 0.0], [0.0, 0.5]],
}


def pytest_report_header(config):
    """The shtns build (its SIMD id: the CPU the tests run on) in the header of every run."""
    from spheredens.grids._shtns import build_id

    return f"shtns: {build_id()}"


@pytest.fixture(autouse=True)
def _floating_point_errors_raise():
    """Overflow, invalid operations and division by zero are errors in tests (py-pde)."""
    old = np.seterr(all="raise", under="ignore")
    yield
    np.seterr(**old)


@pytest.fixture
def rng():
    return np.random.default_rng(0)


def make_config(
    *, model=None, initial=None, discretization=None, time=None, output=None, base_dir="."
):
    """A validated RunConfig from partial tables (circle, defaults elsewhere)."""
    from spheredens.config import config_from_dict

    model = {"name": "sa", **(model or {})}
    if model["name"] != "sa_zero_temperature":
        model.setdefault("beta", 1.0)
    data = {
        "model": model,
        "domain": {"name": "circle"},
        "initial": initial or {"name": "uniform"},
        "discretization": discretization or {"scheme": "fv", "n": 64},
        "time": time or {"t_end": 1.0, "snapshots": 3},
    }
    if output:
        data["output"] = output
    return config_from_dict(data, base_dir=base_dir)


class stop_after_steps:
    """Context manager: the next simulation stops (as on a signal) after ``steps`` steps."""

    def __init__(self, steps, reason="interrupted"):
        self.steps, self.reason = steps, reason

    def __enter__(self):
        import sys

        sim = sys.modules["spheredens.simulate"]  # the package exports the function of that name
        self._sim, self._original, count = sim, sim.Progress.step, {"n": 0}
        original, steps, reason = self._original, self.steps, self.reason

        def step(progress, t, dt, state=None):
            count["n"] += 1
            if count["n"] == steps:
                sim.request_stop(reason)
            return original(progress, t, dt, state)

        sim.Progress.step = step
        return self

    def __exit__(self, *exc):
        self._sim.Progress.step = self._original


def assert_resumes_bit_for_bit(cfg, tmp_path, full, names, steps=2):
    """A run of ``cfg`` stopped after ``steps`` steps and resumed completes, and its variables
    ``names`` equal those of the uninterrupted run ``full`` bit for bit."""
    import spheredens as sd

    with stop_after_steps(steps), pytest.raises(KeyboardInterrupt):
        sd.run(cfg, output=tmp_path / "cut.nc", progress=False)
    resumed = sd.run(cfg, output=tmp_path / "cut.nc", progress=False, resume=True)
    assert resumed.attrs["run_status"] == "complete"
    for name in names:
        assert np.array_equal(resumed[name].values, full[name].values, equal_nan=True), name
