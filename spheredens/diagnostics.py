"""Diagnostics of densities on a grid: mass, minimum, interaction energy, W2 to Pi_# rho_0.

Array-level functions (used by the recorder while a run goes, so that a file written midway
already holds them) and Dataset-level wrappers (``Dataset in, DataArray out``).
"""
from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from .geometry import circle_angle
from .models import Model, ProjectionTarget, projection_target
from .transport import w2_circle

Array = NDArray[np.float64]


def mass(rho: Array, weight: Array, xi_weight: Array) -> float:
    """sum_k xi_weight_k sum_j rho_kj weight_j for rho of shape (n_xi, n)."""
    return float(np.sum(xi_weight * np.sum(rho * weight, axis=-1)))


def energy_defined(model: Model) -> str:
    """Empty string when MODELS.md defines the energy for ``model``; else the reason it does not."""
    if model.name != "usa":
        return f"the energy E_beta is defined for usa with Q = K = V = I, not for {model.name}"
    eye = np.eye(model.d)
    if not (np.array_equal(model.Q, eye) and np.array_equal(model.K, eye) and np.array_equal(model.V, eye)):
        return "the energy E_beta is defined for usa with Q = K = V = I only"
    if model.beta == 0.0:
        return "E_beta = 1/(2 beta) int int exp(beta <x, y>) is infinite at beta = 0"
    return ""


def interaction_energy(rho: Array, points: Array, weight: Array, beta: float) -> float:
    """E_beta[rho] = 1/(2 beta) sum_ij exp(beta <x_i, x_j>) rho_i rho_j w_i w_j (one density).

    Evaluated as exp(beta) / (2 beta) * sum exp(beta (<x_i, x_j> - 1)) ..., in row chunks.
    """
    a = np.asarray(rho, dtype=float) * weight
    chunk = max(1, (1 << 22) // len(a))
    total = 0.0
    for s in range(0, len(a), chunk):
        k = np.exp(beta * (points[s:s + chunk] @ points.T - 1.0))
        total += float(a[s:s + chunk] @ (k @ a))
    with np.errstate(over="ignore"):
        return float(np.exp(beta) / (2.0 * beta) * total)


def positive_half_fraction(theta: Array, weight: Array, u: Array) -> Array:
    """Fraction of the arc [theta_j - w_j/2, theta_j + w_j/2] where <x, u> > 0."""
    phi = np.mod(theta - circle_angle(np.asarray(u)) + 0.5 * np.pi, 2.0 * np.pi)
    lo, hi = phi - 0.5 * weight, phi + 0.5 * weight
    length = np.zeros_like(phi)
    for shift in (-2.0 * np.pi, 0.0, 2.0 * np.pi):
        length += np.clip(np.minimum(hi, np.pi + shift) - np.maximum(lo, shift), 0.0, None)
    return length / weight


class ProjectionDistance:
    """W2(rho_t, Pi_# rho_0) on the circle for a model satisfying Assumption 1.

    On S^1 the top eigenspace E_1 = span(u) of A = V B^T is a line (Assumption 1 gives a gap),
    so Pi_# rho_0 = m_+ delta_u + m_- delta_{-u} with m_+ the rho_0-mass of {<x, u> > 0}.
    m_+ is computed from the initial grid density, each point carrying the arc of length
    ``weight`` centred on it, split exactly at the boundary (error O(h^2)). rho_t is treated as
    atoms at the grid points with masses rho_j w_j; W2 is exact (POT, geodesic cost).
    """

    def __init__(self, target: ProjectionTarget, theta: Array, weight: Array, rho0: Array) -> None:
        self.target = target
        u = target.basis[0]
        self.atoms = np.array([circle_angle(u), circle_angle(-u)])
        m_plus = float(np.sum(rho0 * weight * positive_half_fraction(theta, weight, u)))
        total = float(np.sum(rho0 * weight))
        self.masses = np.array([m_plus, total - m_plus]) / total
        self.theta, self.weight = theta, weight

    def __call__(self, rho: Array) -> float:
        return w2_circle(self.theta, rho * self.weight, self.atoms, self.masses)


def projection_distance(model: Model, theta: Array, weight: Array, rho0: Array
                        ) -> tuple[ProjectionDistance | None, str]:
    """A :class:`ProjectionDistance`, or None and the reason Assumption 1 fails."""
    target = projection_target(model)
    if not target.holds:
        return None, f"Assumption 1 does not hold: {target.reason}"
    return ProjectionDistance(target, theta, weight, rho0), ""
