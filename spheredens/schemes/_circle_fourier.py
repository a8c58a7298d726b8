"""Pseudo-spectral Fourier scheme on the circle."""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np
from numpy.typing import NDArray

from ..grids import CircleGrid
from ..integrators import INTEGRATORS
from ..interaction import make_interaction
from ..models import Model
from . import SCHEMES
from ._common import speed_floor, validate_choice, validate_integrator, validate_interaction

Array = NDArray[np.float64]


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


@SCHEMES.register("fourier")
class FourierScheme:
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
    domain = "circle"
    min_n = 8
    even_n = True
    options = ("filter", "interaction", "integrator")

    @classmethod
    def validate_options(cls, table: Mapping[str, Any], prefix: str, model: Model) -> dict[str, Any]:
        return {
            "filter": validate_choice(table, "filter", prefix, dict.fromkeys(FILTERS), "exponential",
                                      "spectral filter"),
            "interaction": validate_interaction(table, prefix, model),
            "integrator": validate_integrator(table, prefix, "rk4"),
        }

    def __init__(self, problem: Any, n: int, *, filter: str = "exponential",
                 interaction: str = "auto", integrator: str = "rk4") -> None:
        self.problem = problem
        self.grid = CircleGrid(n, offset=0.0)
        self.filter = filter
        k = np.arange(n // 2 + 1)
        self._ik = 1j * k * spectral_filter(n, filter)
        self._ik[-1] = 0.0  # Nyquist mode of an odd derivative
        self.interaction = make_interaction(problem.model, self.grid, self.grid, interaction)
        self.integrator = INTEGRATORS.get(integrator)
        self.last_max_speed = 0.0
        self.speed_floor = speed_floor(problem.model)

    def initial_state(self) -> Array:
        """rho_0 at the nodes, renormalized to unit discrete (trapezoid) mass."""
        rho0 = self.grid.point_values(self.problem.initial)
        rho0 = rho0 / np.sum(rho0 * self.grid.weight)
        return np.repeat(rho0[None, :], self.problem.n_xi, axis=0)

    def node_velocity(self, state: Array) -> Array:
        vel = self.interaction.velocity(state)
        return np.einsum("xfd,fd->xf", vel, self.grid.tangents)

    def rhs(self, state: Array, t: float) -> Array:
        v = self.node_velocity(state)
        self.last_max_speed = float(np.abs(v).max())
        flux_hat = np.fft.rfft(state * v, axis=-1)
        return -np.fft.irfft(self._ik * flux_hat, n=self.grid.n, axis=-1)

    def stable_dt(self, cfl: float, max_speed: float) -> float:
        """dt = cfl * h / max|v| (RK4 is stable for spectral advection up to about 0.9)."""
        return cfl * self.grid.h / max_speed

    def density(self, state: Array) -> Array:
        return state

    def attributes(self) -> dict[str, Any]:
        return {"filter": self.filter, "interaction": self.interaction.name,
                "integrator": self.integrator.name}
