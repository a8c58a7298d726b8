"""The time steps of ``log_lagrangian`` (spheredens/schemes/_particle_steps.py): BS3 on moving
particles, the Hermite curves the settled particles sit on during sub-steps, the sub-steps
themselves against an exact rotation, and the whole multirate step against single steps."""

from __future__ import annotations

import math

import numpy as np
import pytest

import spheredens as sd
from spheredens.schemes._particle_steps import (
    TARGET_REFINED,
    Step,
    bs3,
    coupling_error,
    hermite,
    sizing_error,
    substeps,
)

SHAPE_FACTOR = 100.0


def _rotation(omega: float):
    """The rate of a rigid rotation about the z axis at angular speed omega, for positions and
    shapes alike (the field omega e_z x y is linear: its Jacobian turns the shapes too)."""
    axis = np.array([0.0, 0.0, omega])

    def rate(x, shape, t):
        return np.cross(axis, x), np.cross(axis[None, :, None], shape, axisa=1, axisb=1, axisc=1)

    return rate


def _rotate(x: np.ndarray, angle: float) -> np.ndarray:
    c, s = math.cos(angle), math.sin(angle)
    return x @ np.array([[c, s, 0.0], [-s, c, 0.0], [0.0, 0.0, 1.0]])


def _particles(n: int, seed: int = 1):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 3))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    shape = 0.01 * rng.normal(size=(n, 3, 2))
    shape -= x[:, :, None] * np.einsum("ni,nik->nk", x, shape)[:, None, :]
    return x, shape


def test_the_hermite_curve_is_exact_for_cubics():
    """Through the values and slopes of a cubic at 0 and dt, the curve is the cubic itself."""
    rng = np.random.default_rng(0)
    a, b, c, d = rng.normal(size=(4, 5, 3))
    dt = 0.7

    def p(t):
        return a + b * t + c * t**2 + d * t**3

    def dp(t):
        return b + 2 * c * t + 3 * d * t**2

    for s in (0.0, 0.25, 0.5, 0.9, 1.0):
        got = hermite(p(0.0), dp(0.0), p(dt), dp(dt), dt, s)
        assert np.abs(got - p(s * dt)).max() < 1e-14


def test_bs3_errs_at_third_order_and_estimates_its_error():
    """A rotation by omega dt: the step's error falls by 2^4 per halving (local order 4 of a
    third-order method), and the embedded estimate (of the second-order solution) falls by 2^3
    and stays above it (measured 1.4e-3, 1.7e-4, 2.1e-5 against 5.6e-4, 3.3e-5, 2.0e-6)."""
    rate = _rotation(2.0)
    x, shape = _particles(20)
    errors, estimates = [], []
    for dt in (0.2, 0.1, 0.05):
        step = bs3(rate, x, shape, rate(x, shape, 0.0), 0.0, dt, SHAPE_FACTOR)
        errors.append(np.linalg.norm(step.x - _rotate(x, 2.0 * dt), axis=1).max())
        estimates.append(step.error.max())
    orders = np.log2(np.array(errors[:-1]) / np.array(errors[1:]))
    assert np.all(orders > 3.8), orders
    assert np.all(np.array(estimates) > 2 * np.array(errors)), (estimates, errors)
    assert 2.9 < math.log2(estimates[0] / estimates[1]) < 3.3


def test_substeps_follow_a_rotation_to_the_tolerance():
    """Particles that one step of dt = 1 would move with an error of 0.1 rad reach the exactly
    rotated positions within the tolerance in sub-steps of their own."""
    rate = _rotation(3.0)
    x, shape = _particles(50)
    k1 = rate(x, shape, 0.0)
    first = bs3(rate, x, shape, k1, 0.0, 1.0, SHAPE_FACTOR).error.max()
    assert first > 1e-2
    tolerance = 1e-5
    out = substeps(rate, x, shape, k1, 1.0, first, tolerance, np.ones(len(x), bool), SHAPE_FACTOR)
    assert out is not None
    x_new, shape_new, worst, count = out
    assert count > 10 and worst <= tolerance
    assert np.linalg.norm(x_new - _rotate(x, 3.0), axis=1).max() < 10 * tolerance
    exact_shape = np.stack([_rotate(shape[:, :, k], 3.0) for k in range(2)], axis=-1)
    assert np.abs(shape_new - exact_shape).max() < 10 * tolerance * 0.01 * SHAPE_FACTOR


def test_too_many_substeps_are_refused():
    """A rate that no step can follow to the tolerance: None, not a wrong answer."""
    rate = _rotation(3.0)
    x, shape = _particles(5)
    out = substeps(
        rate, x, shape, rate(x, shape, 0.0), 1e6, 1.0, 1e-12, np.ones(5, bool), SHAPE_FACTOR
    )
    assert out is None


def test_the_coupling_error_is_dt_times_the_change_of_the_rates():
    x, shape = _particles(4)
    v = np.zeros((4, 3))
    rate_shape = np.zeros((4, 3, 2))
    step = Step(x, shape, (v, rate_shape), np.zeros(4))
    moved_v = v.copy()
    moved_v[1] = [0.0, 2e-3, 0.0]
    moved_shape = rate_shape.copy()
    moved_shape[2] = 3.0 * shape[2]
    got = coupling_error(step, (moved_v, moved_shape), 0.5, SHAPE_FACTOR)
    assert got[0] == 0.0 and got[3] == 0.0
    assert got[1] == pytest.approx(1e-3, rel=1e-14)
    assert got[2] == pytest.approx(0.5 * 3.0 / SHAPE_FACTOR, rel=1e-14)


def test_steps_are_sized_by_a_quantile_of_the_errors():
    error = np.linspace(0.0, 1.0, 1001)
    relevant = np.ones(1001, bool)
    assert sizing_error(error, relevant) == pytest.approx(1.0 - TARGET_REFINED, rel=1e-12)
    relevant[900:] = False
    assert sizing_error(error, relevant) == pytest.approx(0.9 * (1.0 - TARGET_REFINED), rel=1e-2)


# -- the whole step ------------------------------------------------------------------------------
K_TWO_ATOMS = [[1.75, 0.866026, 0.4], [0.433013, 2.5, 0.2], [0.2, 0.2, 2.0]]
V_TWO_ATOMS = [[1.0, 0.0, 0.0], [0.0, 0.5, 0.0], [0.0, 0.0, 0.5]]


def _two_atom_run(
    multirate: bool, tolerance: float, beta: float = 30.0, n: int = 8, T: float = 3.0
):
    cfg = sd.config_from_dict(
        {
            "model": {"name": "sa", "beta": beta, "K": K_TWO_ATOMS, "V": V_TWO_ATOMS},
            "domain": {"name": "sphere"},
            "initial": {"name": "random_smooth", "seed": 7, "bandwidth": 3, "amplitude": 0.8},
            "discretization": {
                "scheme": "log_lagrangian",
                "n": n,
                "tolerance": tolerance,
                "allow_underresolved": True,
                "multirate": multirate,
            },
            "time": {"t_end": T, "times": [0.0, T]},
        }
    )
    scheme = sd.make_scheme(sd.Problem.from_config(cfg), cfg.discretization)
    result = sd.simulate(scheme, cfg.time)
    x, m = scheme.atoms(result.state)
    moments = np.concatenate([m @ x, np.einsum("i,ij,ik->jk", m, x, x).ravel()])
    return scheme, result, moments


def test_local_substeps_agree_with_single_steps_in_fewer_steps():
    """The two-atom model at beta = 30 (n = 8, T = 3, tolerance 1e-4): with local sub-steps the
    first and second moments of the particles are as close to a reference (single steps,
    tolerance 1e-5) as those of single steps at the same tolerance (measured 1.0e-5, 6.9e-5
    against 6.5e-6, 4.3e-5 for single steps), in fewer steps (13 against 19), every step with
    sub-steps; mass 1 to 1e-12."""
    _, _, reference = _two_atom_run(False, 1e-5)
    single_scheme, single, single_moments = _two_atom_run(False, 1e-4)
    scheme, result, moments = _two_atom_run(True, 1e-4)
    assert scheme.refined_steps > 0 and scheme.substeps > scheme.refined_steps
    assert result.n_steps < single.n_steps
    single_error = np.abs(single_moments - reference).max()
    error = np.abs(moments - reference).max()
    assert error < 3.0 * single_error and error < 2e-4, (error, single_error)
    assert abs(scheme.masses(result.state)[0] - 1.0) < 1e-12
    assert single_scheme.refined_steps == 0
