"""Explicit Runge-Kutta methods as Butcher tableaux, and one generic step.

A new method is a table, not a class. The strong-stability-preserving (SSP) methods are convex
combinations of forward Euler steps, so they keep a forward-Euler positivity property under
the same step restriction [Gottlieb, Shu, Tadmor, SIAM Rev. 43 (2001)].
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Callable

import numpy as np

from ._registry import Registry
from ._types import Array

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
    #: SSP coefficient: a convex combination of forward Euler steps of at most this times dt
    #: (0: not SSP); such a method keeps what forward Euler keeps (rho >= 0) under the same
    #: step restriction divided by it
    ssp: float = 0.0

    @property
    def stages(self) -> int:
        return len(self.b)

    @cached_property
    def stability_polynomial(self) -> tuple[float, ...]:
        """Coefficients (constant first) of R(z) = 1 + sum_k z^k b^T A^(k-1) 1: one step of
        y' = lambda y multiplies y by R(lambda dt)."""
        a, b = np.array(self.a, dtype=float), np.array(self.b, dtype=float)
        coefficients, power = [1.0], np.ones(self.stages)
        for _ in range(self.stages):
            coefficients.append(float(b @ power))
            power = a @ power
        return tuple(coefficients)

    @cached_property
    def imaginary_axis_reach(self) -> float:
        """The largest y such that every z = i s with |s| <= y lies in the stability region
        |R(z)| <= 1: 0 when no part of the imaginary axis does (forward Euler: |1 + i s|^2 =
        1 + s^2; Heun / ssprk2: 1 + s^4 / 4), sqrt(3) for ssprk3, 2 sqrt(2) for rk4.

        |R(i s)|^2 - 1 is a polynomial in s^2; its lowest non-zero coefficient decides small
        s, its smallest positive root ends the segment."""
        r = np.polynomial.Polynomial(self.stability_polynomial)
        squared = r(np.polynomial.Polynomial([0.0, 1j])) * r(np.polynomial.Polynomial([0.0, -1j]))
        p = np.real(squared.coef)
        p[0] -= 1.0
        p[np.abs(p) < 1e-12] = 0.0  # round-off of the tableau's sums
        nonzero = np.flatnonzero(p)
        if nonzero.size == 0:
            return math.inf  # |R(i s)| = 1: the exact exponential's modulus
        if p[nonzero[0]] > 0.0:
            return 0.0  # |R(i s)| > 1 for every small s != 0
        roots = np.polynomial.Polynomial(p).roots()
        positive = [float(z.real) for z in roots if abs(z.imag) < 1e-9 and z.real > 1e-9]
        return min(positive) if positive else math.inf

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


EULER = _register(ButcherTableau("euler", 1, ((0.0,),), (1.0,), (0.0,), "forward Euler", ssp=1.0))
SSPRK2 = _register(
    ButcherTableau(
        "ssprk2",
        2,
        ((0.0, 0.0), (1.0, 0.0)),
        (0.5, 0.5),
        (0.0, 1.0),
        "Heun's method, SSP with coefficient 1 [Shu & Osher, JCP 77 (1988)]",
        ssp=1.0,
    )
)
SSPRK3 = _register(
    ButcherTableau(
        "ssprk3",
        3,
        ((0.0, 0.0, 0.0), (1.0, 0.0, 0.0), (0.25, 0.25, 0.0)),
        (1.0 / 6.0, 1.0 / 6.0, 2.0 / 3.0),
        (0.0, 1.0, 0.5),
        "three-stage third-order SSP Runge-Kutta [Shu & Osher, JCP 77 (1988)]",
        ssp=1.0,
    )
)
RK4 = _register(
    ButcherTableau(
        "rk4",
        4,
        ((0.0, 0.0, 0.0, 0.0), (0.5, 0.0, 0.0, 0.0), (0.0, 0.5, 0.0, 0.0), (0.0, 0.0, 1.0, 0.0)),
        (1.0 / 6.0, 1.0 / 3.0, 1.0 / 3.0, 1.0 / 6.0),
        (0.0, 0.5, 0.5, 1.0),
        "classical fourth-order Runge-Kutta",
    )
)
