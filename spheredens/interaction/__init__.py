"""Interaction evaluators: the velocity X[rho] at the points a scheme asks for.

Contract (:class:`~spheredens.interaction._base.Evaluator`): a class declares its ``name``,
the ``domains`` it serves, the ``inputs`` it takes (density values at source points, or
spherical-harmonic coefficients), ``unmet(model) -> reason | None`` and ``build(model, layout)``;
an instance answers ``velocity(state)``: X[rho] at the layout's targets, as vectors
(n_xi, *targets, d) or as components along the layout's frame (n_xi, k, *targets).
:func:`select_evaluator` is the one rule for validation and for ``"auto"``;
:func:`make_evaluator` builds the choice. A new evaluator is a module with a registered
class, imported below.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._types import Array
from ..kernel import log_bessel_i, log_m0, m1_over_m0, orthogonal_multiple
from ..models import Model
from ._auxiliary import AuxiliaryInteraction
from ._base import (
    EVALUATORS,
    INTERACTIONS,
    Evaluator,
    EvaluatorRegistry,
    Layout,
    candidates,
    choices,
    make_evaluator,
    register_evaluator,
    select_evaluator,
)
from ._clusters import circle_order, clustered_logsumexp_sums, sphere_order
from ._fourier import FourierConvolution, aliased_multipliers
from ._funk_hecke import (
    FunkHeckeInteraction,
    KappaInterpolation,
    SphereDirectQuadrature,
    funk_hecke_multipliers,
)
from ._lowrank import KappaLowRank, LowRankPoints, lowrank_multipliers
from ._meridians import LowRankMeridianInteraction
from ._particle_flow import LogParticleSums, zero_temperature_flow  # registers "particle_sums"
from ._points import FunkHeckePoints
from ._pruned import PrunedDirectQuadrature, pruned_logsumexp_sums
from ._quadrature import DirectQuadrature, clip_norm, logsumexp_sums
from ._zonal import LogM0Table, ZonalLogSums, ZonalSums

__all__ = [
    "AuxiliaryInteraction",
    "AuxiliaryOnGaussGrid",
    "DirectQuadrature",
    "Evaluator",
    "EVALUATORS",
    "EvaluatorRegistry",
    "FourierConvolution",
    "FunkHeckeInteraction",
    "FunkHeckePoints",
    "INTERACTIONS",
    "KappaInterpolation",
    "KappaLowRank",
    "Layout",
    "LogM0Table",
    "LogParticleSums",
    "ZonalLogSums",
    "ZonalSums",
    "log_bessel_i",
    "log_m0",
    "m1_over_m0",
    "LowRankMeridianInteraction",
    "LowRankPoints",
    "PrunedDirectQuadrature",
    "SphereDirectQuadrature",
    "ZeroTemperatureField",
    "aliased_multipliers",
    "candidates",
    "choices",
    "circle_order",
    "clip_norm",
    "clustered_logsumexp_sums",
    "fft_applies",
    "funk_hecke_multipliers",
    "logsumexp_sums",
    "lowrank_multipliers",
    "pruned_logsumexp_sums",
    "make_evaluator",
    "make_interaction",
    "make_sphere_interaction",
    "orthogonal_multiple",
    "register_evaluator",
    "select_evaluator",
    "sphere_choice",
    "sphere_order",
]


@register_evaluator
class ZeroTemperatureField(Evaluator):
    """The fixed field X_inf(x) = P_x V B^T x / |B^T x| of ``sa_zero_temperature`` at the
    targets."""

    name = "zero_temperature"
    domains = None  # a formula of the points: any domain (zonal: of the meridian plane's)
    inputs = ("values", "log_moments", "coefficients", "polar_law", "log_particles")
    priority = 0
    selectable = False

    requirement = "is the field of sa_zero_temperature"
    refusal_text = (
        "= {choice!r}, but {model} has no interaction (its velocity does not depend on "
        "rho); remove the key"
    )

    @staticmethod
    def structure(model: Model) -> bool:
        return not model.kind.interacting

    @classmethod
    def build(cls, model: Model, layout: Layout) -> "ZeroTemperatureField":
        return cls(model, layout.target_points)

    def __init__(self, model: Model, targets: Array) -> None:
        self.model = model
        self._field = model.zero_temperature_velocity(np.asarray(targets, dtype=float))
        self._velocity: Array | None = None  # the field in the layout's frame, computed once

    def vectors(self, rho: Array) -> Array:
        n_xi = len(rho) if np.ndim(rho) > 1 else 1
        return np.broadcast_to(self._field, (n_xi,) + self._field.shape)

    def flow(
        self,
        x: Array,
        log_m: Array,
        shape: Array,
        quadrature: str = "points",
        rows: Any = None,
        reconstruction: Any = None,
    ) -> tuple[Array, Array]:
        """The field and the rate of the shapes at moving particles (``log_lagrangian``; the
        masses ``log_m``, the sources' ``quadrature`` and ``reconstruction`` do not enter: no
        sums), at the particles ``rows`` (default all): :func:`zero_temperature_flow`."""
        if rows is not None:
            x, shape = x[rows], shape[rows]
        return zero_temperature_flow(self.model, x, shape)

    def reconstruction(self, x: Array, log_m: Array) -> None:
        """No sums, so no sources to reconstruct (``log_lagrangian``'s ``interpolant``)."""
        return None

    def velocity(self, state: Array) -> Array:
        """The fixed field (in the layout's frame), projected once and reused at every call."""
        if self._velocity is None:
            self._velocity = super().velocity(np.zeros((1, 1)))[0]
        n_xi = len(state) if np.ndim(state) > 1 else 1
        return np.broadcast_to(self._velocity, (n_xi,) + self._velocity.shape)


@register_evaluator
class AuxiliaryOnGaussGrid(Evaluator):
    """:class:`AuxiliaryInteraction` for the spherical-harmonic scheme: slices given by their
    coefficients, densities synthesized on the Gauss grid (nodes with Gauss weights as sources
    and targets)."""

    name = AuxiliaryInteraction.name
    domains = ("sphere",)
    inputs = ("coefficients",)
    priority = 0
    selectable = False

    requirement = AuxiliaryInteraction.requirement
    refusal_text = AuxiliaryInteraction.refusal_text
    structure = AuxiliaryInteraction.structure

    @classmethod
    def build(cls, model: Model, layout: Layout) -> "AuxiliaryOnGaussGrid":
        return cls(model, layout.sources)

    def __init__(self, model: Model, grid) -> None:
        self.grid = grid
        pts = grid.points.reshape(-1, 3)
        self.points = AuxiliaryInteraction(model, pts, grid.weight.reshape(-1), pts)

    def vectors(self, state: Array) -> Array:
        rho = np.stack([self.grid.synth(c).reshape(-1) for c in np.atleast_2d(state)])
        return self.points.vectors(rho).reshape((len(rho),) + self.grid.shape + (3,))

    def energy(self, rho: Array) -> float:
        """E_h for slice values on the Gauss grid, shape (M, nlat * nphi)."""
        return self.points.energy(rho)


def fft_applies(model: Model) -> bool:
    """Whether the FFT evaluator applies: d = 2 and B = Q^T K = a R with a > 0, R a rotation."""
    return FourierConvolution.unmet(model) is None


def sphere_choice(model: Model) -> str:
    """The evaluator ``auto`` picks on the sphere's Gauss grid for ``model``."""
    return select_evaluator(model, "sphere", "coefficients").name


def make_interaction(model: Model, sources, targets, choice: str = "auto") -> Evaluator:
    """The evaluator for ``model`` from the circle grid ``sources`` to the circle grid
    ``targets`` (velocity as vectors)."""
    return make_evaluator(model, Layout("circle", "values", sources, targets), choice)


def make_sphere_interaction(model: Model, grid, choice: str = "auto") -> Evaluator:
    """The evaluator on a :class:`~spheredens.grids.GaussGrid` (input: coefficients; velocity
    as vectors)."""
    return make_evaluator(model, Layout("sphere", "coefficients", grid, grid), choice)
