"""Option validation shared by the schemes."""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np
from numpy.typing import NDArray

from .._validate import as_bool, as_int, as_str
from ..exceptions import ConfigError
from ..grids import CircleGrid
from ..integrators import INTEGRATORS
from ..interaction import DOMAIN_INTERACTIONS, INTERACTIONS, fft_applies, make_interaction
from ..models import Model

Array = NDArray[np.float64]


def validate_choice(table: Mapping[str, Any], key: str, prefix: str, allowed: Mapping[str, Any],
                    default: str, what: str) -> str:
    value = as_str(table.get(key, default), f"{prefix}.{key}")
    if value not in allowed:
        raise ConfigError(f"{prefix}.{key}", f"{value!r} is not a known {what}; choose one of "
                          f"{', '.join(map(repr, allowed))}")
    return value


#: the largest number of grid points accepted on the circle (direct quadrature is O(n^2))
MAX_CIRCLE_POINTS = 1 << 16


def validate_n(table: Mapping[str, Any], prefix: str, scheme: str, minimum: int, even: bool) -> int:
    """``n``: number of cells / nodes on the circle."""
    n = as_int(table.get("n", 256), f"{prefix}.n", minimum=minimum, maximum=MAX_CIRCLE_POINTS,
               what=f" for scheme {scheme!r}")
    if even and n % 2:
        raise ConfigError(f"{prefix}.n", f"= {n} must be even for scheme {scheme!r}")
    return n


def validate_allow_underresolved(table: Mapping[str, Any], prefix: str) -> dict[str, bool]:
    """``allow_underresolved``: run (with a warning) although the grid does not resolve the
    attention kernel (see :func:`spheredens.runner.resolution_problem`)."""
    if "allow_underresolved" not in table:
        return {}
    return {"allow_underresolved": as_bool(table["allow_underresolved"], f"{prefix}.allow_underresolved")}


def validate_interaction(table: Mapping[str, Any], prefix: str, model: Model,
                         domain: str = "circle") -> str:
    """``interaction``: an evaluator name valid on ``domain`` (fft only where B is a multiple
    of a rotation)."""
    value = as_str(table.get("interaction", "auto"), f"{prefix}.interaction")
    INTERACTIONS.get(value, f"{prefix}.interaction")
    if value not in DOMAIN_INTERACTIONS[domain]:
        raise ConfigError(f"{prefix}.interaction", f"{value!r} is not available on the {domain}; "
                          f"choose one of {', '.join(map(repr, DOMAIN_INTERACTIONS[domain]))}")
    if model.auxiliary is not None and value != "auto":
        raise ConfigError(f"{prefix}.interaction", f"= {value!r}: usa_av has its own spectral "
                          "evaluator (gauges and couplings of the slices); remove the key")
    if not model.kind.interacting and value != "auto":
        raise ConfigError(f"{prefix}.interaction", f"= {value!r}, but {model.name} has no "
                          "interaction (its velocity does not depend on rho); remove the key")
    if value == "fft" and not fft_applies(model):
        raise ConfigError(f"{prefix}.interaction", "'fft' needs B = Q^T K to be a positive multiple "
                          f"of a rotation, and B = {model.B.tolist()} is not; use 'direct' or 'auto'")
    return value


#: evaluators each sphere scheme can use
SPHERE_SCHEME_INTERACTIONS = {"sh_spectral": ("auto", "direct", "funk_hecke", "kappa_interpolation"),
                              "fv": ("auto", "direct", "funk_hecke")}


def validate_sphere_interaction(table: Mapping[str, Any], prefix: str, model: Model, *,
                                scheme: str) -> str:
    """``interaction`` on the sphere, checked against B = Q^T K and the scheme."""
    from ..interaction import orthogonal_multiple

    interaction = validate_interaction(table, prefix, model, domain="sphere")
    allowed = SPHERE_SCHEME_INTERACTIONS[scheme]
    if interaction not in allowed:
        raise ConfigError(f"{prefix}.interaction", f"{interaction!r} is not available with scheme "
                          f"{scheme!r}; choose one of {', '.join(map(repr, allowed))}")
    if interaction == "funk_hecke" and model.beta != 0.0 and orthogonal_multiple(model.B) is None:
        raise ConfigError(f"{prefix}.interaction", "'funk_hecke' needs B = Q^T K to be a positive "
                          "multiple of an orthogonal matrix; use "
                          f"{'kappa_interpolation' if 'kappa_interpolation' in allowed else 'direct'!r} "
                          "or 'auto'")
    if interaction == "kappa_interpolation":
        sigma = np.linalg.svd(model.B, compute_uv=False)
        if sigma[-1] <= 1e-3 * sigma[0]:
            raise ConfigError(f"{prefix}.interaction", "'kappa_interpolation' needs B = Q^T K "
                              "invertible with condition number <= 1e3; use 'direct'")
    return interaction


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


def speed_bound(model: Model) -> float:
    """Largest possible speed: ||V|| for softmax attention (N/Z is a convex combination of the
    V y) and for the zero-temperature field; none (inf) for unnormalized attention."""
    return model.V_norm if model.kind.normalized else float("inf")


class CircleScheme:
    """What the circle schemes share: grids, evaluator, integrator, CFL rule, slices.

    Subclasses set ``grid`` (where the state lives) and ``velocity_grid`` (where the
    velocity is needed) before calling :meth:`_setup`, and implement ``rhs`` and
    ``sample`` (a density function sampled on ``grid``).
    """

    grid: CircleGrid
    velocity_grid: CircleGrid

    def _setup(self, problem: Any, interaction: str, integrator: str) -> None:
        self.problem = problem
        self.interaction = make_interaction(problem.model, self.grid, self.velocity_grid, interaction)
        self.integrator = INTEGRATORS.get(integrator)
        self.last_max_speed = 0.0
        self.speed_floor = speed_floor(problem.model)
        self.speed_bound = speed_bound(problem.model)

    def sample(self, f) -> Array:
        """Values of a density function f(x) on ``grid`` (cell averages or nodal values)."""
        raise NotImplementedError

    def initial_state(self) -> Array:
        """rho_0 of each slice on the grid, renormalized to unit discrete mass."""
        return self.problem.initial_values(self.sample, self.grid.weight)

    def tangential_velocity(self, state: Array) -> Array:
        """v = <tau, X[rho]> at the points of ``velocity_grid``, shape (n_xi, n)."""
        vel = self.interaction.velocity(state)
        return np.einsum("xfd,fd->xf", vel, self.velocity_grid.tangents)

    def stable_dt(self, cfl: float, max_speed: float) -> float:
        """dt = cfl * h / max|v|."""
        return cfl * self.grid.h / max_speed

    def density(self, state: Array) -> Array:
        """The state holds density values (cell averages or nodal values) directly."""
        return state
