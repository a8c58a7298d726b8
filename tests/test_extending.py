"""Extending spheredens through its contracts (docs/architecture.md, "How to add ...").

A new evaluator or scheme is one registered class: these tests register one at run time (as
its own module would at import), and check that configuration, "auto", the runner and the
contract checks take it up with no other edit; the registries are restored afterwards.
"""

from __future__ import annotations

import numpy as np
import pytest

import spheredens as sd
from spheredens.geometry import get_domain
from spheredens.interaction import (
    EVALUATORS,
    DirectQuadrature,
    choices,
    register_evaluator,
    select_evaluator,
)
from spheredens.schemes import FiniteVolumeScheme, register_scheme

EXAMPLE_C = {
    "name": "sa",
    "beta": 10.0,
    "K": [[1.75, 0.866025], [0.433013, 2.5]],
    "V": [[1.0, 0.0], [0.0, 0.5]],
}


@pytest.fixture
def restore_registries():
    """Undo run-time registrations (registries are append-only in the package)."""
    classes = list(EVALUATORS.classes)
    schemes = dict(get_domain("circle").schemes._items)
    yield
    EVALUATORS.classes[:] = classes
    get_domain("circle").schemes._items = schemes


def run(discretization, t_end=0.5):
    cfg = sd.config_from_dict(
        {
            "model": EXAMPLE_C,
            "initial": {"name": "random_smooth", "seed": 1},
            "discretization": discretization,
            "time": {"t_end": t_end, "snapshots": 3},
        }
    )
    return sd.run(cfg, progress=False)


def test_a_registered_evaluator_is_configured_chosen_and_run(restore_registries):
    @register_evaluator
    class BlockedDirect(DirectQuadrature):
        """The direct sums formed block by block (no cached kernel): same numbers."""

        name, domains, inputs, priority = "direct_blocks", ("circle",), ("values",), 5
        description = "circle: direct quadrature, kernel rows formed on the fly"

        @classmethod
        def build(cls, model, layout):
            return cls(
                model,
                layout.sources.points,
                layout.sources.weight,
                layout.target_points,
                max_cached=0,
            )

    assert "direct_blocks" in choices("circle", "values") and "direct_blocks" not in choices(
        "sphere"
    )
    model = sd.config_from_dict({"model": EXAMPLE_C}).model.build()
    # the highest priority that applies: "auto" takes it
    assert select_evaluator(model, "circle", "values") is BlockedDirect
    ds = run({"scheme": "fv", "n": 128, "interaction": "direct_blocks"})
    reference = run({"scheme": "fv", "n": 128, "interaction": "direct"})
    assert ds.attrs["interaction"] == "direct_blocks"
    # the same sums in another order of blocks: equal to round-off (16 eps of the O(1) values)
    assert np.abs(ds["rho"].values - reference["rho"].values).max() <= 16 * np.finfo(float).eps * 10
    with pytest.raises(sd.ConfigError, match="not available on the sphere"):
        sd.config_from_dict(
            {
                "model": {"name": "sa"},
                "domain": {"name": "sphere"},
                "discretization": {"scheme": "fv", "nlat": 8, "interaction": "direct_blocks"},
            }
        )


def test_a_registered_scheme_is_configured_and_run(restore_registries):
    @register_scheme
    class FirstOrderFiniteVolumes(FiniteVolumeScheme):
        """Finite volumes with piecewise-constant reconstruction, forward Euler (first order)."""

        name = "fv1"
        default_integrator = "euler"
        zero_temperature_order = 1.0

        def __init__(self, problem, *, n=256, limiter="first_order", **common):
            super().__init__(problem, n=n, limiter="first_order", **common)

    assert "fv1" in get_domain("circle").schemes
    ds = run({"scheme": "fv1", "n": 128})
    assert ds.attrs["scheme"] == "fv1" and ds.attrs["integrator"] == "euler"
    assert ds.attrs["limiter"] == "first_order"
    assert np.abs(ds["mass"].values - 1.0).max() <= 1e-12 and float(ds["min_rho"].min()) >= 0.0
    with pytest.raises(sd.ConfigError, match="'fv1' is a scheme for the circle"):
        sd.config_from_dict({"domain": {"name": "sphere"}, "discretization": {"scheme": "fv1"}})
