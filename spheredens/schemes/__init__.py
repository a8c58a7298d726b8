"""Schemes: the right-hand side of the continuity equation on a grid.

Contract (what the integrator and the loop use): ``initial_state()``, ``rhs(state, t)`` (which
also sets ``last_max_speed``), ``stable_dt(cfl, max_speed)``, ``density(state)``, ``grid``, and
``attributes()`` describing the discretization for the output file. The state is a float64
array ``(n_xi, *space)`` (complex coefficients ``(n_xi, nlm)`` for ``sh_spectral``).

A scheme name means one method per domain: ``fv`` is finite volumes on the circle and on the
sphere; the registry is therefore kept per domain (:data:`SCHEMES`).
"""
from __future__ import annotations

from typing import Any

from ..exceptions import ConfigError
from ..geometry import DOMAINS, get_domain

#: domain name -> registry of the schemes available on it (each Domain's ``schemes``)
SCHEMES = {name: get_domain(name).schemes for name in DOMAINS}


def register_scheme(cls: Any) -> Any:
    """Class decorator: register ``cls`` under ``cls.name`` for ``cls.domain``."""
    return get_domain(cls.domain).schemes.register(cls.name)(cls)


def scheme_class(name: Any, domain: str, key: str = "discretization.scheme") -> Any:
    """The scheme class called ``name`` on ``domain``; a ConfigError naming ``key`` otherwise."""
    registry = get_domain(domain).schemes
    if isinstance(name, str) and name not in registry:
        other = [d for d, r in SCHEMES.items() if name in r]
        if other:
            raise ConfigError(key, f"{name!r} is a scheme for the {other[0]}, not for domain "
                              f"{domain!r}; choose one of {registry.quoted_names()}")
    return registry.get(name, key)


from ._circle_fv import FiniteVolumeScheme  # noqa: E402  (registers circle "fv")
from ._circle_fourier import FourierScheme  # noqa: E402  (registers "fourier")
from ._sh_spectral import SHSpectralScheme  # noqa: E402  (registers "sh_spectral")
from ._sphere_fv import SphereFiniteVolumeScheme  # noqa: E402  (registers sphere "fv")

__all__ = ["SCHEMES", "FiniteVolumeScheme", "FourierScheme", "SHSpectralScheme",
           "SphereFiniteVolumeScheme", "make_scheme", "register_scheme", "scheme_class"]


def make_scheme(problem: Any, discretization: Any) -> Any:
    """Build the scheme named by ``discretization.scheme`` for ``problem`` (on its domain)."""
    cls = scheme_class(discretization.scheme, problem.domain)
    return cls(problem, **dict(discretization.options))
