"""Pseudo-spectral Fourier scheme on the circle."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, Mapping

import numpy as np

from .._types import Array
from ..grids import CircleGrid
from ._base import CircleScheme, Tendency, register_scheme, validate_choice


def spectral_filter(n: int, kind: str) -> Array:
    """Filter factors sigma(k), k = 0..n/2, applied to the flux derivative.

    ``exponential``: sigma = exp(-36 (k / (n/2))^36) (Hou & Li 2007), which leaves all but the
    top few modes untouched (sigma > 1 - 1e-15 for k < 0.37 n/2) and removes the Nyquist end;
    ``two_thirds``: Orszag's rule, modes k > n/3 set to zero; ``none``: no filter.
    """
    k = np.arange(n // 2 + 1)
    if kind == "exponential":
        return np.exp(-36.0 * (k / (n / 2)) ** 36)
    if kind == "two_thirds":
        return (k <= n / 3).astype(float)
    return np.ones(k.size)


FILTERS = ("exponential", "two_thirds", "none")


@register_scheme
class FourierScheme(CircleScheme):
    """Pseudo-spectral collocation on S^1: rho at n nodes theta_j = j h.

        d rho / dt = -d/dtheta (rho v),  v = <tau, X[rho]>,

    with the product rho v formed at the nodes and differentiated in Fourier space
    (d/dtheta -> i k sigma(k), Nyquist mode dropped). The k = 0 mode of the tendency is exactly
    zero, so sum_j rho_j h is conserved to round-off. Spectrally accurate for smooth solutions;
    it does not preserve positivity (report ``min_rho``): use ``fv`` for concentrating runs.

    Options (``[discretization]``)
    ------------------------------
    filter : ``"exponential"`` (default), ``"two_thirds"`` or ``"none"`` (:func:`spectral_filter`)
    interaction : ``"auto"`` (default), ``"direct"`` or ``"fft"``
    integrator : ``"rk4"`` (default) or any registered tableau
    """

    name = "fourier"
    own_option = "filter"
    #: as for finite volumes, with n even (rounded up to one by ``needed``)
    resolution = replace(CircleScheme.resolution, even=True)
    #: the highest mode k < n / 2 moves at up to max|v|:
    #: |lambda dt| < (n / 2) max|v| cfl h / max|v| = pi cfl
    imaginary_spectrum = math.pi
    options = ("n", "filter", "interaction", "integrator", "allow_underresolved")
    default_integrator = "rk4"
    zero_temperature_order = math.inf

    @classmethod
    def validate_own_options(cls, table: Mapping[str, Any], prefix: str) -> dict[str, Any]:
        return {
            "filter": validate_choice(
                table, "filter", prefix, dict.fromkeys(FILTERS), "exponential", "spectral filter"
            )
        }

    def __init__(
        self, problem: Any, *, n: int = 256, filter: str = "exponential", **common: Any
    ) -> None:
        grid = CircleGrid(n, offset=0.0)
        super().__init__(problem, grid, grid, **common)
        self.filter = filter
        k = np.arange(n // 2 + 1)
        self._ik = 1j * k * spectral_filter(n, filter)
        self._ik[-1] = 0.0  # Nyquist mode of an odd derivative

    def sample(self, f) -> Array:
        """A density function at the nodes."""
        return self.grid.point_values(f)

    def rhs(self, state: Array, t: float) -> Tendency:
        v = self.tangential_velocity(state)
        flux_hat = np.fft.rfft(state * v, axis=-1)
        return Tendency(
            -np.fft.irfft(self._ik * flux_hat, n=self.grid.n, axis=-1),
            float(np.abs(v).max()),
            max_compression=self.max_compression(v),
        )
