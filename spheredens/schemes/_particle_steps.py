"""Time steps of log-mass particles on S^2 with local sub-steps: the integrator of
``log_lagrangian``.

* **The step.** Bogacki-Shampine 3(2) moves every particle's centroid x and shape f over dt
  (:func:`bs3`); its embedded estimate gives each particle's error, in radians for x and
  relative (``shape_factor`` times looser) for f.
* **Local sub-steps.** On a plateau almost every particle could take long steps; a few, in
  transit between the clusters, could not, and with one step for all they set dt for
  everyone. Here the particles whose error exceeds the tolerance (F) are moved again over the
  same dt in sub-steps of their own (:func:`substeps`: BS3 with error control), while the others
  (S) keep their step. In each sub-step's sums, S sits on the cubic Hermite curve of its step
  (its positions and rates at both ends: third order, like the step) and F at its own stages.
* **Coupling.** F's first positions, which S's stages saw, were wrong by up to F's error.
  Once F has moved again, the rates of S at the step's end are evaluated anew
  (:func:`coupling_error`): dt times their change bounds what F's first error did to S. Every
  S particle whose own error plus that exceeds the tolerance joins F, and F moves again, up to
  :data:`COUPLING_ROUNDS` rounds. (At zero temperature no particle moves another: one round.)
* **Control.** The step is refused when F would hold more than :data:`MAX_REFINED` of the
  particles, when its sub-steps would be more than :data:`MAX_SUBSTEPS`, or when F still grows
  after :data:`COUPLING_ROUNDS` rounds. The next dt follows
  the error of the particle at the (1 - :data:`TARGET_REFINED`) quantile, so that steps grow
  until a few percent of the particles need sub-steps.

Everything is deterministic: the same state and dt give the same step (bit-exact resume).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from .._types import Array
from ._circle_log_sl import AdvanceStep

#: Bogacki-Shampine 3(2): stage nodes, weights of the third-order solution, and the weights of
#: the error estimate (third minus second order) of the four stages (the last at the new point)
BS3_A = (0.5, 0.75)
BS3_B = (2.0 / 9.0, 1.0 / 3.0, 4.0 / 9.0)
BS3_E = (-5.0 / 72.0, 1.0 / 12.0, 1.0 / 9.0, -1.0 / 8.0)

#: a step whose failing particles, with those they move, exceed this fraction is refused
MAX_REFINED = 0.25
#: the steps are sized so that about this fraction of the particles fail the first pass
TARGET_REFINED = 0.05
#: sub-steps of F allowed in one step before the step is refused
MAX_SUBSTEPS = 64
#: rounds of growing F by the particles its first positions moved too far
COUPLING_ROUNDS = 4

#: (positions, shapes, time within the step) of the moving particles -> their (dx/dt, df/dt)
Rate = Callable[[Array, Array, float], tuple[Array, Array]]


@dataclass
class Step:
    """One BS3 step of some particles: new positions and shapes, the rates there, and each
    particle's scaled error."""

    x: Array
    shape: Array
    rate: tuple[Array, Array]
    error: Array


def bs3(
    rate: Rate,
    x: Array,
    shape: Array,
    k1: tuple[Array, Array],
    t0: float,
    h: float,
    shape_factor: float,
) -> Step:
    """One Bogacki-Shampine 3(2) step of length h from time t0 (within the step) of particles
    at x (n, 3) with shapes (n, 3, 2) and rates ``k1`` there; the error of each particle is
    max(|error of x|, |error of f| / |f| / shape_factor)."""
    v1, s1 = k1
    v2, s2 = rate(x + BS3_A[0] * h * v1, shape + BS3_A[0] * h * s1, t0 + BS3_A[0] * h)
    v3, s3 = rate(x + BS3_A[1] * h * v2, shape + BS3_A[1] * h * s2, t0 + BS3_A[1] * h)
    b1, b2, b3 = BS3_B
    x_new = x + h * (b1 * v1 + b2 * v2 + b3 * v3)
    x_new /= np.linalg.norm(x_new, axis=1, keepdims=True)
    shape_new = shape + h * (b1 * s1 + b2 * s2 + b3 * s3)  # tangent to O(h^4)
    v4, s4 = rate(x_new, shape_new, t0 + h)
    e1, e2, e3, e4 = BS3_E
    ex = h * np.linalg.norm(e1 * v1 + e2 * v2 + e3 * v3 + e4 * v4, axis=1)
    es = (
        h
        * np.linalg.norm((e1 * s1 + e2 * s2 + e3 * s3 + e4 * s4).reshape(len(x), -1), axis=1)
        / np.linalg.norm(shape.reshape(len(x), -1), axis=1)
    )
    return Step(x_new, shape_new, (v4, s4), np.maximum(ex, es / shape_factor))


def hermite(start: Array, rate0: Array, end: Array, rate1: Array, dt: float, s: float) -> Array:
    """The cubic Hermite curve through (start, rate0) at 0 and (end, rate1) at dt, at s dt."""
    s2, s3 = s * s, s * s * s
    return (
        (2.0 * s3 - 3.0 * s2 + 1.0) * start
        + (s3 - 2.0 * s2 + s) * dt * rate0
        + (3.0 * s2 - 2.0 * s3) * end
        + (s3 - s2) * dt * rate1
    )


def substeps(
    rate: Rate,
    x: Array,
    shape: Array,
    k1: tuple[Array, Array],
    dt: float,
    first_error: float,
    tolerance: float,
    relevant: Array,
    shape_factor: float,
) -> tuple[Array, Array, float, int] | None:
    """Move particles (x, shapes, rates ``k1`` at the start) over [0, dt] in BS3 sub-steps
    with error control (the first of dt (tolerance / ``first_error``)^(1/3), safety 0.9),
    counting the error of the ``relevant`` ones. Returns (x, shapes, the largest error of an
    accepted sub-step, sub-steps taken), or None after :data:`MAX_SUBSTEPS`."""
    h = dt * min(0.5, max(0.05, 0.9 * (tolerance / first_error) ** (1.0 / 3.0)))
    t, worst = 0.0, 0.0
    for count in range(1, MAX_SUBSTEPS + 1):
        h = min(h, dt - t)
        step = bs3(rate, x, shape, k1, t, h, shape_factor)
        error = float(np.max(step.error, where=relevant, initial=0.0))
        if error <= tolerance:
            t = dt if h >= dt - t else t + h
            x, shape, k1, worst = step.x, step.shape, step.rate, max(worst, error)
            if t >= dt:
                return x, shape, worst, count
        factor = 5.0 if error == 0.0 else 0.9 * (tolerance / error) ** (1.0 / 3.0)
        h *= min(5.0, max(0.2, factor))
    return None


def coupling_error(step: Step, rate: tuple[Array, Array], dt: float, shape_factor: float) -> Array:
    """What the first positions of the sub-stepped particles did to each particle that kept its
    ``step``: dt times the change of its rates at the step's end once they are moved again
    (``rate``), |change of dx/dt| and |change of df/dt| / |f| / ``shape_factor``. Along the step
    that change grows from zero (the rates at the start are exact), so this bounds the
    displacement it caused, to the order of the step."""
    dv = np.linalg.norm(rate[0] - step.rate[0], axis=1)
    n = len(dv)
    ds = np.linalg.norm((rate[1] - step.rate[1]).reshape(n, -1), axis=1) / np.linalg.norm(
        step.shape.reshape(n, -1), axis=1
    )
    return dt * np.maximum(dv, ds / shape_factor)


def sizing_error(error: Array, relevant: Array) -> float:
    """The error the next step is sized by: the (1 - :data:`TARGET_REFINED`) quantile of the
    relevant particles' errors (the others take sub-steps)."""
    errors = error[relevant]
    return float(np.quantile(errors, 1.0 - TARGET_REFINED)) if errors.size else 0.0


class ParticleStep(AdvanceStep):
    """The time integrator of ``log_lagrangian`` in the loop's interface: one step is the
    scheme's ``advance`` (transport with error control, then split and merge)."""

    name = "bs3_particles"
    description = (
        "Bogacki-Shampine 3(2) transport of the particles' positions and shapes with error "
        "control, then split and merge"
    )
