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
from ._auxiliary import AuxiliaryInteraction
from ._fourier import FourierConvolution, aliased_multipliers
from ._funk_hecke import (FunkHeckeInteraction, KappaInterpolation, SphereDirectQuadrature,
                          funk_hecke_multipliers, orthogonal_multiple)
from ._quadrature import DirectQuadrature, clip_norm, logsumexp_sums

__all__ = ["AuxiliaryInteraction", "AuxiliaryOnGaussGrid", "DirectQuadrature", "FourierConvolution", "ZeroTemperatureField", "make_interaction",
           "INTERACTIONS", "aliased_multipliers", "clip_norm", "FunkHeckeInteraction",
           "KappaInterpolation", "SphereDirectQuadrature", "funk_hecke_multipliers",
           "orthogonal_multiple", "logsumexp_sums", "make_sphere_interaction", "DOMAIN_INTERACTIONS", "sphere_choice"]

Array = NDArray[np.float64]

#: names accepted by ``discretization.interaction``
INTERACTIONS = Registry("interaction evaluator")
INTERACTIONS.register("auto")("circle: fft where it applies, else direct; sphere: funk_hecke, "
                              "else kappa_interpolation, else direct")
INTERACTIONS.register("direct")("direct quadrature with log-sum-exp: any Q, K, V, beta <= 1e4")
INTERACTIONS.register("fft")("circle: FFT convolution with Bessel multipliers (B a multiple of a rotation)")
INTERACTIONS.register("funk_hecke")("sphere: Funk-Hecke multipliers (B a multiple of an orthogonal matrix)")
INTERACTIONS.register("kappa_interpolation")("sphere: Funk-Hecke multipliers interpolated in "
                                             "kappa = beta |B^T x| (B invertible, cond <= 1e3)")
#: evaluator names valid on each domain
DOMAIN_INTERACTIONS = {"circle": ("auto", "direct", "fft"),
                       "sphere": ("auto", "direct", "funk_hecke", "kappa_interpolation")}


class ZeroTemperatureField:
    """The fixed field X_inf(x) = P_x V B^T x / |B^T x| of ``sa_zero_temperature`` at the targets."""

    name = "zero_temperature"

    def __init__(self, model: Model, targets: Array) -> None:
        self._field = model.zero_temperature_velocity(np.asarray(targets, dtype=float))
        self.guarded_fraction = 0.0

    def velocity(self, rho: Array) -> Array:
        rho = np.atleast_2d(rho)
        return np.broadcast_to(self._field, (rho.shape[0],) + self._field.shape)

    def tangent_components(self, state: Array) -> Array:
        """Sphere: (X . e_theta, X . e_phi), shape (n_xi, 2, nlat, nphi) (set by ``for_grid``)."""
        return np.broadcast_to(self._components, (len(np.atleast_2d(state)),) + self._components.shape)

    @classmethod
    def for_grid(cls, model: Model, grid) -> "ZeroTemperatureField":
        field = cls(model, grid.points)
        field._components = np.stack([np.einsum("ijd,ijd->ij", field._field, grid.e_theta),
                                      np.einsum("ijd,ijd->ij", field._field, grid.e_phi)])
        return field


def fft_applies(model: Model) -> bool:
    """Whether the FFT evaluator applies: d = 2 and B = Q^T K = a R with a > 0, R a rotation."""
    return model.d == 2 and rotation_multiple_2d(model.B) is not None


def make_interaction(model: Model, sources: CircleGrid, targets: CircleGrid, choice: str = "auto"):
    """The interaction evaluator for ``model`` from grid ``sources`` to grid ``targets``.

    ``choice`` is ``"auto"`` (FFT where it applies, else direct), ``"direct"`` or ``"fft"``.
    The zero-temperature model ignores it: its field does not depend on rho.
    """
    if model.auxiliary is not None:
        return AuxiliaryInteraction(model, sources.points, sources.weight, targets.points)
    if not model.kind.interacting:
        return ZeroTemperatureField(model, targets.points)
    if choice == "fft" or (choice == "auto" and fft_applies(model)):
        return FourierConvolution(model, sources, targets)
    return DirectQuadrature(model, sources.points, sources.weight, targets.points)


def sphere_choice(model: Model) -> str:
    """The evaluator ``auto`` picks on the sphere for ``model``."""
    if orthogonal_multiple(model.B) is not None or model.beta == 0.0:
        return "funk_hecke"
    sigma = np.linalg.svd(model.B, compute_uv=False)
    return "kappa_interpolation" if sigma[-1] > 1e-3 * sigma[0] else "direct"


def make_sphere_interaction(model: Model, grid, choice: str = "auto"):
    """The interaction evaluator on a :class:`~spheredens.grids.GaussGrid` (input: coefficients)."""
    if model.auxiliary is not None:
        return AuxiliaryOnGaussGrid(model, grid)
    if not model.kind.interacting:
        return ZeroTemperatureField.for_grid(model, grid)
    if choice == "auto":
        choice = sphere_choice(model)
    return {"funk_hecke": FunkHeckeInteraction, "kappa_interpolation": KappaInterpolation,
            "direct": SphereDirectQuadrature}[choice](model, grid)


class AuxiliaryOnGaussGrid:
    """:class:`AuxiliaryInteraction` for the spherical-harmonic scheme: slices given by their
    coefficients, densities synthesized on the Gauss grid (nodes with Gauss weights as sources
    and targets), velocity returned as (X . e_theta, X . e_phi) on the grid."""

    name = "auxiliary_spectral"

    def __init__(self, model: Model, grid) -> None:
        self.grid = grid
        pts = grid.points.reshape(-1, 3)
        self.points = AuxiliaryInteraction(model, pts, grid.weight.reshape(-1), pts)
        self.guarded_fraction = 0.0

    def velocity(self, state: Array) -> Array:
        rho = np.stack([self.grid.synth(c).reshape(-1) for c in np.atleast_2d(state)])
        return self.points.velocity(rho).reshape((len(rho),) + self.grid.shape + (3,))

    def energy(self, rho: Array) -> float:
        """E_h for slice values on the Gauss grid, shape (M, nlat * nphi)."""
        return self.points.energy(rho)

    def tangent_components(self, state: Array) -> Array:
        g = self.grid
        vel = self.velocity(state)
        return np.stack([np.einsum("kijd,ijd->kij", vel, g.e_theta),
                         np.einsum("kijd,ijd->kij", vel, g.e_phi)], axis=1)
