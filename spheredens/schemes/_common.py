"""Option validation shared by the schemes."""
from __future__ import annotations

from typing import Any, Mapping

from .._validate import as_str
from ..exceptions import ConfigError
from ..integrators import INTEGRATORS
from ..interaction import INTERACTIONS, fft_applies
from ..models import Model


def validate_choice(table: Mapping[str, Any], key: str, prefix: str, allowed: Mapping[str, Any],
                    default: str, what: str) -> str:
    value = as_str(table.get(key, default), f"{prefix}.{key}")
    if value not in allowed:
        raise ConfigError(f"{prefix}.{key}", f"{value!r} is not a known {what}; choose one of "
                          f"{', '.join(map(repr, allowed))}")
    return value


def validate_interaction(table: Mapping[str, Any], prefix: str, model: Model) -> str:
    """``interaction``: auto | direct | fft (fft only where B is a multiple of a rotation)."""
    value = as_str(table.get("interaction", "auto"), f"{prefix}.interaction")
    INTERACTIONS.get(value, f"{prefix}.interaction")
    if not model.kind.interacting and value != "auto":
        raise ConfigError(f"{prefix}.interaction", f"= {value!r}, but {model.name} has no "
                          "interaction (its velocity does not depend on rho); remove the key")
    if value == "fft" and not fft_applies(model):
        raise ConfigError(f"{prefix}.interaction", "'fft' needs B = Q^T K to be a positive multiple "
                          f"of a rotation, and B = {model.B.tolist()} is not; use 'direct' or 'auto'")
    return value


def validate_integrator(table: Mapping[str, Any], prefix: str, default: str) -> str:
    value = as_str(table.get("integrator", default), f"{prefix}.integrator")
    INTEGRATORS.get(value, f"{prefix}.integrator")
    return value


def speed_floor(model: Model) -> float:
    """Smallest speed used in the CFL rule: 0.1 ||V|| for interacting models, else 0.

    A density at (or near) an unstable steady state has a tiny velocity that would allow huge
    steps; the softmax velocity can grow to ||V|| within one, so steps are capped at
    10 cfl h / ||V||. The zero-temperature field is fixed, and its own maximum is exact.
    """
    return 0.1 * model.V_norm if model.kind.interacting else 0.0
