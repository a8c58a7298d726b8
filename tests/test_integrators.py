"""Butcher tableaux: observed order on y' = -y + sin t, for every registered method."""

from __future__ import annotations

import numpy as np
import pytest

from spheredens.integrators import INTEGRATORS


def solve(tableau, steps):
    y, t, dt = np.array([1.0]), 0.0, 1.0 / steps
    rhs = lambda y, t: -y + np.sin(t)  # noqa: E731
    for _ in range(steps):
        y = tableau.step(rhs, y, t, dt)
        t += dt
    return y[0]


def exact(t):
    # y' = -y + sin t, y(0) = 1
    return 1.5 * np.exp(-t) + 0.5 * (np.sin(t) - np.cos(t))


@pytest.mark.parametrize("name", INTEGRATORS.names())
def test_observed_order(name):
    tableau = INTEGRATORS.get(name)
    errors = [abs(solve(tableau, s) - exact(1.0)) for s in (20, 40, 80)]
    orders = np.log2(np.array(errors[:-1]) / np.array(errors[1:]))
    assert abs(orders[-1] - tableau.order) < 0.15, orders


@pytest.mark.parametrize("name", INTEGRATORS.names())
def test_tableau_consistency(name):
    tab = INTEGRATORS.get(name)
    assert abs(sum(tab.b) - 1.0) < 1e-15
    for i, row in enumerate(tab.a):
        assert abs(sum(row) - tab.c[i]) < 1e-15
