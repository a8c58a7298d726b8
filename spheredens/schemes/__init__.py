"""Schemes: the right-hand side of the continuity equation on a grid.

Contract: :class:`~spheredens.schemes._base.Scheme` (its docstring lists what the loop, the
recorder and the configuration use). The state is a float64 array ``(n_xi, *space)``
(complex coefficients ``(n_xi, nlm)`` for ``sh_spectral``). A new scheme is a module with a
registered subclass of :class:`Scheme`, imported below.

A scheme name means one method per domain: ``fv`` is finite volumes on the circle and on the
sphere; the registry is therefore kept per domain (:data:`SCHEMES`).
"""

from __future__ import annotations

from typing import Any

from ._base import SCHEMES, Scheme, Tendency, register_scheme, scheme_class
from ._circle_fourier import FourierScheme  # registers "fourier"

# registration order is the order configuration messages list the schemes in
from ._circle_fv import FiniteVolumeScheme  # registers circle "fv"
from ._circle_log_sl import LogSemiLagrangianScheme  # registers circle "log_sl"
from ._resolution import Resolution
from ._sh_spectral import SHSpectralScheme  # registers "sh_spectral"
from ._sphere_fv import SphereFiniteVolumeScheme  # registers sphere "fv"
from ._sphere_lagrangian import SphereLagrangianScheme  # registers sphere "log_lagrangian"
from ._sphere_log_sl import SphereLogSemiLagrangianScheme  # registers sphere "log_sl"
from ._zonal_fv import ZonalFiniteVolumeScheme  # registers zonal "fv"
from ._zonal_log_sl import ZonalLogSemiLagrangianScheme  # registers zonal "log_sl"

__all__ = [
    "SCHEMES",
    "Resolution",
    "Scheme",
    "Tendency",
    "FiniteVolumeScheme",
    "FourierScheme",
    "LogSemiLagrangianScheme",
    "SHSpectralScheme",
    "SphereLagrangianScheme",
    "SphereLogSemiLagrangianScheme",
    "SphereFiniteVolumeScheme",
    "ZonalFiniteVolumeScheme",
    "ZonalLogSemiLagrangianScheme",
    "make_scheme",
    "register_scheme",
    "scheme_class",
]


def make_scheme(problem: Any, discretization: Any) -> Any:
    """Build the scheme named by ``discretization.scheme`` for ``problem`` (on its domain)."""
    cls = scheme_class(discretization.scheme, problem.domain)
    return cls(problem, **dict(discretization.options))
