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
    """sum_k xi_weight_k sum_j rho_kj weight_j for rho of shape (n_xi, *space)."""
    space = tuple(range(-np.ndim(weight), 0))
    return float(np.sum(xi_weight * np.sum(rho * weight, axis=space)))


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


def interaction_energy_spectral(rho: Array, grid, beta: float) -> float:
    """E_beta[rho] on S^2 from spherical-harmonic coefficients (Funk-Hecke), exact for the
    band-limited density: E = e^beta / (2 beta) sum_lm s_l(beta) |rho_lm|^2, with m > 0 counted
    twice (real field) and s_l the scaled multipliers."""
    from .interaction import funk_hecke_multipliers

    c = grid.analys(rho)
    s, _ = funk_hecke_multipliers(grid.l, beta)
    m = np.asarray(grid.sh.m)
    total = float(np.sum(np.where(m > 0, 2.0, 1.0) * s * np.abs(c) ** 2))
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

    def comment(self) -> str:
        return ("exact W2 on the circle (POT wasserstein_circle, geodesic cost); target atoms at "
                "angles " + ", ".join(f"{a:.12g}" for a in self.atoms) + " with masses "
                + ", ".join(f"{m:.12g}" for m in self.masses))


def projection_distance(model: Model, grid, rho0: Array, initial=None):
    """A callable rho -> W2(rho, Pi_# rho_0) for ``grid``, or None and the reason it is undefined."""
    target = projection_target(model)
    if not target.holds:
        return None, f"Assumption 1 does not hold: {target.reason}"
    if hasattr(grid, "theta"):
        return ProjectionDistance(target, grid.theta, grid.weight, rho0), ""
    if target.basis.shape[0] > 2:
        return None, "E_1 is the whole space (no target)"
    return SphereProjectionDistance(target, initial, grid), ""


def _aligned_quadrature(pole: Array, e1: Array, e2: Array, psi_edges: Array, n_alpha: int = 96,
                        n_psi: int = 8) -> tuple[Array, Array, Array]:
    """Points, weights and sector index of a product quadrature in coordinates
    x = cos(alpha) (cos(psi) e1 + sin(psi) e2) + sin(alpha) pole, d sigma = cos(alpha) d alpha d psi:
    Gauss-Legendre in alpha on each half [-pi/2, 0], [0, pi/2] and in psi on each sector."""
    ga, wa = np.polynomial.legendre.leggauss(n_alpha)
    alpha = np.concatenate([(ga - 1) * np.pi / 4, (ga + 1) * np.pi / 4])
    w_alpha = np.concatenate([wa, wa]) * np.pi / 4 * np.cos(alpha)
    gp, wp = np.polynomial.legendre.leggauss(n_psi)
    lo, hi = psi_edges[:-1], psi_edges[1:]
    psi = (0.5 * (lo + hi)[:, None] + 0.5 * (hi - lo)[:, None] * gp).reshape(-1)
    w_psi = (0.5 * (hi - lo)[:, None] * wp).reshape(-1)
    sector = np.repeat(np.arange(len(lo)), n_psi)
    ca, sa = np.cos(alpha)[:, None, None], np.sin(alpha)[:, None, None]
    ring = np.cos(psi)[:, None] * e1 + np.sin(psi)[:, None] * e2
    x = ca * ring[None] + sa * pole
    w = w_alpha[:, None] * w_psi[None, :]
    return x.reshape(-1, 3), w.reshape(-1), np.broadcast_to(sector, w.shape).reshape(-1), alpha


class SphereProjectionDistance:
    """W2(rho_t, Pi_# rho_0) on S^2 (exact EMD, geodesic cost) for Assumption 1 with dim E_1 <= 2.

    Target: dim E_1 = 1, E_1 = span(u): atoms at +-u with the rho_0-masses of the two
    hemispheres; dim E_1 = 2: the great circle S cap E_1 sampled at ``circle_points`` equally
    spaced atoms, each carrying the rho_0-mass of the lune of directions that Pi maps to its
    arc. The masses are computed from the initial density function by a product Gauss
    quadrature aligned with E_1 (spectrally accurate for smooth rho_0).

    rho_t is coarsened before the EMD: the Gauss grid is cut into blocks of about
    N / ``n_points`` cells; each block becomes one atom at its mass-weighted centroid
    (renormalized to the sphere) carrying the block's mass (negative values clipped).
    """

    def __init__(self, target: ProjectionTarget, initial, grid, *, n_points: int = 2048,
                 circle_points: int = 256) -> None:
        self.target = target
        self.grid = grid
        basis = target.basis
        if basis.shape[0] == 1:
            u = basis[0]
            e1, e2 = _orthonormal_complement(u)
            x, w, _, alpha = _aligned_quadrature(u, e1, e2, np.array([0.0, 2 * np.pi]), n_psi=256)
            values = initial(x) * w
            upper = np.repeat(alpha > 0, w.size // alpha.size)
            m_plus = float(values[upper].sum())
            self.atoms = np.array([u, -u])
            self.masses = np.array([m_plus, float(values.sum()) - m_plus])
            self.description = "two atoms at +-u, u = " + ", ".join(f"{c:.12g}" for c in u)
        else:
            e1, e2 = basis[0], basis[1]
            pole = np.cross(e1, e2)
            edges = np.linspace(0.0, 2 * np.pi, circle_points + 1)
            x, w, sector, _ = _aligned_quadrature(pole, e1, e2, edges)
            masses = np.bincount(sector, weights=initial(x) * w, minlength=circle_points)
            psi = 0.5 * (edges[:-1] + edges[1:])
            self.atoms = np.cos(psi)[:, None] * e1 + np.sin(psi)[:, None] * e2
            self.masses = masses
            self.description = (f"{circle_points} atoms on the great circle of E_1 spanned by "
                                + "(" + ", ".join(f"{c:.12g}" for c in e1) + ") and ("
                                + ", ".join(f"{c:.12g}" for c in e2) + ")")
        self.masses = self.masses / self.masses.sum()
        block = max(1, int(np.ceil(np.sqrt(grid.nlat * grid.nphi / n_points))))
        self._lat_edges = np.arange(0, grid.nlat, block)
        self._lon_edges = np.arange(0, grid.nphi, block)
        self.n_points = len(self._lat_edges) * len(self._lon_edges)
        self.description += f"; rho_t coarsened to {self.n_points} atoms (blocks of {block} x {block} cells)"

    def comment(self) -> str:
        return ("exact W2 on the sphere (POT emd2, squared geodesic cost); target: "
                + self.description)

    def coarsen(self, rho: Array) -> tuple[Array, Array]:
        """Atoms (k, 3) and masses (k,) of the block-coarsened density."""
        a = np.clip(rho, 0.0, None) * self.grid.weight
        ax = a[..., None] * self.grid.points
        def blocks(f):
            return np.add.reduceat(np.add.reduceat(f, self._lat_edges, axis=0), self._lon_edges, axis=1)
        m = blocks(a).reshape(-1)
        c = blocks(ax).reshape(-1, 3)
        norm = np.linalg.norm(c, axis=1)
        keep = (m > 0) & (norm > 0)
        return c[keep] / norm[keep, None], m[keep] / m[keep].sum()

    def __call__(self, rho: Array) -> float:
        import ot

        atoms, masses = self.coarsen(rho)
        cost = np.arccos(np.clip(atoms @ self.atoms.T, -1.0, 1.0)) ** 2
        return float(np.sqrt(max(ot.emd2(masses, self.masses, cost, numItermax=10_000_000), 0.0)))


def _orthonormal_complement(u: Array) -> tuple[Array, Array]:
    helper = np.eye(3)[int(np.argmin(np.abs(u)))]
    e1 = np.cross(u, helper)
    e1 /= np.linalg.norm(e1)
    return e1, np.cross(u, e1)
