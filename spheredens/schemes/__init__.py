"""Schemes: the right-hand side of the continuity equation on a grid.

Contract (what the integrator and the loop use): ``initial_state()``, ``rhs(state, t)`` (which
also sets ``last_max_speed``), ``stable_dt(cfl, max_speed)``, ``density(state)``, ``grid``, and
``attributes()`` describing the discretization for the output file. The state is a float64
array ``(n_xi, *space)``.
"""
from __future__ import annotations

from typing import Any

from .._registry import Registry

SCHEMES = Registry("scheme")

from ._circle_fv import FiniteVolumeScheme  # noqa: E402  (registers "fv")
from ._circle_fourier import FourierScheme  # noqa: E402  (registers "fourier")
from ._sh_spectral import SHSpectralScheme  # noqa: E402  (registers "sh_spectral")

__all__ = ["SCHEMES", "FiniteVolumeScheme", "FourierScheme", "SHSpectralScheme", "make_scheme"]


def make_scheme(problem: Any, discretization: Any) -> Any:
    """Build the scheme named by ``discretization.scheme`` for ``problem``."""
    cls = SCHEMES.get(discretization.scheme, "discretization.scheme")
    return cls(problem, **dict(discretization.options))
