"""Diagnostics of densities on a grid: mass, minimum, interaction energy, W2 to Pi_# rho_0.

Array-level functions (used by the recorder while a run goes, so that a file written midway
already holds them) and Dataset-level wrappers (``Dataset in, DataArray out``).
"""

from __future__ import annotations

import numpy as np

from . import transport  # registers W2 and the grid atoms of the domains
from ._types import Array
from .geometry import Domain, NotProvided, domain_of_dimension
from .interaction import funk_hecke_multipliers
from .models import Model
from .targets import AssumptionError, empirical_projection, projection_measure, terminal_subspace


def mass(rho: Array, weight: Array, xi_weight: Array) -> float:
    """sum_k xi_weight_k sum_j rho_kj weight_j for rho of shape (n_xi, *space)."""
    space = tuple(range(-np.ndim(weight), 0))
    return float(np.sum(xi_weight * np.sum(rho * weight, axis=space)))


def energy_defined(model: Model) -> str:
    """Empty string when docs/models.md defines the energy for ``model``; else the reason it does
    not."""
    if model.kind.energy == "slices":
        return ""
    if model.kind.energy is None:
        return f"the energy E_beta is defined for usa with Q = K = V = I, not for {model.name}"
    if model.meridian:
        return "the energy E_beta is not computed on the zonal domain (its kernel is M0)"
    eye = np.eye(model.d)
    if not (
        np.array_equal(model.Q, eye)
        and np.array_equal(model.K, eye)
        and np.array_equal(model.V, eye)
    ):
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
        k = np.exp(beta * (points[s : s + chunk] @ points.T - 1.0))
        total += float(a[s : s + chunk] @ (k @ a))
    with np.errstate(over="ignore"):
        return float(np.exp(beta) / (2.0 * beta) * total)


def interaction_energy_spectral(rho: Array, grid, beta: float) -> float:
    """E_beta[rho] on S^2 from spherical-harmonic coefficients (Funk-Hecke), exact for the
    band-limited density: E = e^beta / (2 beta) sum_lm s_l(beta) |rho_lm|^2, with m > 0 counted
    twice (real field) and s_l the scaled multipliers."""

    c = grid.analys(rho)
    s, _ = funk_hecke_multipliers(grid.l, beta)
    m = np.asarray(grid.sh.m)
    total = float(np.sum(np.where(m > 0, 2.0, 1.0) * s * np.abs(c) ** 2))
    with np.errstate(over="ignore"):
        return float(np.exp(beta) / (2.0 * beta) * total)


def grid_atoms(domain: Domain) -> transport.GridAtoms:
    """The one representation of a density on a grid for W2 on ``domain`` (its part
    ``"grid_atoms"``, :class:`spheredens.transport.GridAtoms`): used by ``w2_projection``,
    ``w2_terminal`` and :func:`spheredens.compare.compare` alike."""
    return domain.part("grid_atoms", "W2 of a density on a grid")


class ProjectionDistance:
    """W2(rho_t, Pi_# rho_0) for a model satisfying Assumption 1.

    The target is :func:`spheredens.targets.projection_measure` (masses from the initial
    density function, exact to quadrature round-off); rho_t is represented by
    :func:`grid_atoms` (circle: the piecewise-constant density on the cells as sub-atoms;
    sphere: the grid atoms coarsened to about ``n_points`` atoms, the same as ``spheredens
    compare``), and W2 is the domain's (:meth:`spheredens.geometry.Domain.w2`: POT's circle
    solver, the exact EMD on the sphere). With ``centroids`` (a scheme that carries the cells'
    centroids, ``log_sl``) each cell's mass is an atom at its centroid, passed to each call.

    Raises
    ------
    AssumptionError
        The target is undefined, or not implemented on the domain of ``model``.
    """

    def __init__(
        self,
        model: Model,
        initial,
        grid,
        *,
        n_points: int = transport.DENSITY_ATOMS,
        centroids: bool = False,
        particles: bool = False,
    ) -> None:
        self.centroids = centroids
        self.particles = particles
        self.target = projection_measure(model, initial)
        self.domain = domain_of_dimension(model.d)
        try:
            self.grid_atoms = grid_atoms(self.domain)
        except NotProvided as exc:
            raise AssumptionError(str(exc)) from None
        self.grid = grid
        self.n_points = n_points
        self.masses = self.target.masses

    def __call__(self, rho: Array, centroid: Array | None = None) -> float:
        atoms, masses, _ = self.grid_atoms.atoms(self.grid, rho, self.n_points, centroid)
        return self.domain.w2(atoms, masses, self.target.points, self.masses)

    def of_atoms(self, points: Array, masses: Array) -> float:
        """W2 of the measure sum_i masses_i delta_{points_i} (a particle scheme's particles)."""
        return self.domain.w2(points, masses, self.target.points, self.masses)

    def comment(self) -> str:
        atoms = (
            PARTICLE_ATOMS
            if self.particles
            else self.grid_atoms.describe(self.grid, self.n_points, self.centroids)
        )
        return (
            f"{self.grid_atoms.method}; "
            f"{atoms}; "
            f"target Pi_# rho_0: {self.target.description}, masses "
            + ", ".join(f"{m:.12g}" for m in self.masses[:4])
            + (" ..." if self.masses.size > 4 else "")
            + f"; target sampling error <= {self.target.sampling_error:.3g} rad"
        )


class ParticleProjectionDistance:
    """W2(sum_i w_i delta_{x_i(t)}, Pi_# mu_0): the particle runs' ``w2_projection``, and what
    ``compare`` uses to place the particles' departure beside the density's. The target is
    Pi_# of the run's own initial particles (:func:`spheredens.targets.empirical_projection`),
    so that an i.i.d. start is measured against the point it converges to, not against
    Pi_# rho_0 (which it misses by its sampling imbalance between the two sides).

    Raises
    ------
    AssumptionError
        The target is undefined (Assumption 1 fails).
    """

    def __init__(self, model: Model, x0: Array, weight: Array) -> None:
        self.target = empirical_projection(model, x0, weight)
        self.domain = domain_of_dimension(model.d)

    def __call__(self, x: Array, weight: Array) -> float:
        return self.domain.w2(
            np.asarray(x, dtype=float),
            np.asarray(weight, dtype=float),
            self.target.points,
            self.target.masses,
        )

    def comment(self) -> str:
        return (
            f"the particles with their weights against Pi_# of the initial particles (not of "
            f"rho_0): {self.target.description}, masses "
            + ", ".join(f"{m:.12g}" for m in self.target.masses[:4])
            + (" ..." if self.target.masses.size > 4 else "")
            + f"; target sampling error <= {self.target.sampling_error:.3g} rad"
        )


def particle_projection_distance(model: Model, x0: Array, weight: Array):
    """:class:`ParticleProjectionDistance`, or None and the reason it is undefined."""
    try:
        return ParticleProjectionDistance(model, x0, weight), ""
    except AssumptionError as exc:
        return None, str(exc)


#: how W2 represents the density of a particle scheme (``log_lagrangian``)
PARTICLE_ATOMS = "rho_t as its particles: each particle's mass at its position (no coarsening)"


class TerminalDistance:
    """W2 from rho_t to the measures supported on S cap E_V (``w2_terminal``,
    :meth:`spheredens.targets.TerminalSubspace.w2`), rho_t represented by :func:`grid_atoms`
    without coarsening (the distance is a closed form)."""

    def __init__(
        self, model: Model, grid, *, centroids: bool = False, particles: bool = False
    ) -> None:
        self.centroids = centroids
        self.particles = particles
        self.subspace = terminal_subspace(model)
        self.grid = grid
        self.grid_atoms = grid_atoms(domain_of_dimension(model.d))

    @property
    def defined(self) -> bool:
        return self.subspace.basis is not None

    def __call__(self, rho: Array, centroid: Array | None = None) -> float:
        if not self.defined:
            return np.nan
        atoms, masses, _ = self.grid_atoms.atoms(self.grid, rho, None, centroid)
        return self.subspace.w2(atoms, masses)

    def of_atoms(self, points: Array, masses: Array) -> float:
        """The distance of the measure sum_i masses_i delta_{points_i} (a particle scheme)."""
        return self.subspace.w2(points, masses) if self.defined else np.nan

    def comment(self) -> str:
        if not self.defined:
            return self.subspace.definition + "; the whole space: not defined"
        if self.particles:
            return f"{self.subspace.definition}; {PARTICLE_ATOMS}"
        atoms = self.grid_atoms.describe(self.grid, None, self.centroids)
        return f"{self.subspace.definition}; {atoms}"


def projection_distance(
    model: Model,
    grid,
    rho0: Array,
    initial=None,
    *,
    centroids: bool = False,
    particles: bool = False,
):
    """A callable rho -> W2(rho, Pi_# rho_0) on ``grid``, or None and the reason it is undefined."""

    try:
        return (
            ProjectionDistance(model, initial, grid, centroids=centroids, particles=particles),
            "",
        )
    except AssumptionError as exc:
        return None, str(exc)
