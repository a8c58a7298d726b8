"""Interaction evaluators: the velocity X[rho] at the points a scheme asks for.

Contract: ``velocity(rho) -> ndarray (n_xi, n_targets, d)`` of tangent vectors, for densities
``rho`` of shape ``(n_xi, n_sources)`` given at the evaluator's source points.
"""
from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from .._registry import Registry
from ..grids import CircleGrid
from ..models import Model, rotation_multiple_2d
from ._fourier import FourierConvolution, aliased_multipliers
from ._quadrature import DirectQuadrature, clip_norm

__all__ = ["DirectQuadrature", "FourierConvolution", "ZeroTemperatureField", "make_interaction",
           "INTERACTIONS", "aliased_multipliers", "clip_norm"]

Array = NDArray[np.float64]

#: names accepted by ``discretization.interaction``
INTERACTIONS = Registry("interaction evaluator")
INTERACTIONS.register("auto")("fft where B = Q^T K is a positive multiple of a rotation, else direct")
INTERACTIONS.register("direct")("direct quadrature with log-sum-exp: any Q, K, V, beta <= 1e4")
INTERACTIONS.register("fft")("FFT convolution with Bessel multipliers (B a multiple of a rotation)")


class ZeroTemperatureField:
    """The fixed field X_inf(x) = P_x V B^T x / |B^T x| of ``sa_zero_temperature`` at the targets."""

    name = "zero_temperature"

    def __init__(self, model: Model, targets: Array) -> None:
        self._field = model.zero_temperature_velocity(np.asarray(targets, dtype=float))

    def velocity(self, rho: Array) -> Array:
        rho = np.atleast_2d(rho)
        return np.broadcast_to(self._field, (rho.shape[0],) + self._field.shape)


def fft_applies(model: Model) -> bool:
    """Whether the FFT evaluator applies: d = 2 and B = Q^T K = a R with a > 0, R a rotation."""
    return model.d == 2 and rotation_multiple_2d(model.B) is not None


def make_interaction(model: Model, sources: CircleGrid, targets: CircleGrid, choice: str = "auto"):
    """The interaction evaluator for ``model`` from grid ``sources`` to grid ``targets``.

    ``choice`` is ``"auto"`` (FFT where it applies, else direct), ``"direct"`` or ``"fft"``.
    The zero-temperature model ignores it: its field does not depend on rho.
    """
    if not model.kind.interacting:
        return ZeroTemperatureField(model, targets.points)
    if choice == "fft" or (choice == "auto" and fft_applies(model)):
        return FourierConvolution(model, sources, targets)
    return DirectQuadrature(model, sources.points, sources.weight, targets.points)
