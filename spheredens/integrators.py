"""Explicit Runge-Kutta methods as Butcher tableaux, and one generic step.

A new method is a table, not a class. The strong-stability-preserving (SSP) methods are convex
combinations of forward Euler steps, so they keep a forward-Euler positivity property under
the same step restriction [Gottlieb, Shu, Tadmor, SIAM Rev. 43 (2001)].
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
from numpy.typing import NDArray

from ._registry import Registry

Array = NDArray[np.float64]
RHS = Callable[[Array, float], Array]

INTEGRATORS = Registry("time integrator")


@dataclass(frozen=True)
class ButcherTableau:
    """Explicit Runge-Kutta method: stages k_i = f(y + dt sum_j a_ij k_j, t + c_i dt)."""

    name: str
    order: int
    a: tuple[tuple[float, ...], ...]
    b: tuple[float, ...]
    c: tuple[float, ...]
    description: str

    @property
    def stages(self) -> int:
        return len(self.b)

    def step(self, rhs: RHS, y: Array, t: float, dt: float, k1: Array | None = None) -> Array:
        """Advance y from t to t + dt; ``k1 = rhs(y, t)`` may be passed when already known."""
        ks: list[Array] = []
        for i in range(self.stages):
            if i == 0:
                ks.append(rhs(y, t) if k1 is None else k1)
                continue
            yi = y.copy()
            for j, aij in enumerate(self.a[i][:i]):
                if aij != 0.0:
                    yi += (dt * aij) * ks[j]
            ks.append(rhs(yi, t + self.c[i] * dt))
        out = y.copy()
        for bi, ki in zip(self.b, ks):
            if bi != 0.0:
                out += (dt * bi) * ki
        return out


def _register(tableau: ButcherTableau) -> ButcherTableau:
    INTEGRATORS.register(tableau.name)(tableau)
    return tableau


EULER = _register(ButcherTableau("euler", 1, ((0.0,),), (1.0,), (0.0,), "forward Euler"))
SSPRK2 = _register(ButcherTableau(
    "ssprk2", 2, ((0.0, 0.0), (1.0, 0.0)), (0.5, 0.5), (0.0, 1.0),
    "Heun's method, SSP with coefficient 1 [Shu & Osher, JCP 77 (1988)]"))
SSPRK3 = _register(ButcherTableau(
    "ssprk3", 3, ((0.0, 0.0, 0.0), (1.0, 0.0, 0.0), (0.25, 0.25, 0.0)),
    (1.0 / 6.0, 1.0 / 6.0, 2.0 / 3.0), (0.0, 1.0, 0.5),
    "three-stage third-order SSP Runge-Kutta [Shu & Osher, JCP 77 (1988)]"))
RK4 = _register(ButcherTableau(
    "rk4", 4, ((0.0, 0.0, 0.0, 0.0), (0.5, 0.0, 0.0, 0.0), (0.0, 0.5, 0.0, 0.0), (0.0, 0.0, 1.0, 0.0)),
    (1.0 / 6.0, 1.0 / 3.0, 1.0 / 3.0, 1.0 / 6.0), (0.0, 0.5, 0.5, 1.0),
    "classical fourth-order Runge-Kutta"))
