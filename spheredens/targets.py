"""Limit targets of docs/models.md, section 3, as measures: Pi_# rho_0 and the terminal subspace
of V.

Functions of the model and of the initial density *function* (not of a grid), so that the
target is exact up to a stated quadrature / sampling error:

* :func:`projection_measure`: Pi_# rho_0 for Assumption 1 (B invertible, A = V B^T symmetric,
  spectral gap): two atoms +-u (dim E_1 = 1) or equally spaced atoms on the great circle
  S cap E_1 (dim E_1 = 2, sphere) carrying the rho_0-masses of the sets Pi maps onto them.
* :func:`terminal_subspace`: the dominant eigenspace of V (the conjectured support of the
  terminal phase) and the W2 distance of a density to the measures supported on it.
* :func:`file_targets`: the sets drawn on the figures of a file (:class:`Target`), from the
  model it records.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ._types import Array
from .exceptions import SchemaError, SpheredensError
from .geometry import CIRCLE, SPHERE, NotProvided, domain_entry, domain_of_dimension
from .models import Model
from .models import projection_target as assumption_1
from .problem import Problem

#: atoms used to sample the great-circle target (dim E_1 = 2): W2 sampling error <= pi / M
CIRCLE_TARGET_ATOMS = 512


class AssumptionError(SpheredensError, ValueError):
    """The zero-temperature target is undefined because Assumption 1 fails (says which part)."""


@dataclass(frozen=True)
class TargetMeasure:
    """A discrete measure sum_k masses_k delta_{points_k} on S^{d-1}.

    Attributes
    ----------
    points : ndarray (k, d)
    masses : ndarray (k,), summing to 1
    description : str
    sampling_error : float
        Upper bound of W2 between this discrete measure and the exact target (radians; 0 for
        atoms, pi / M for a great circle sampled at M equal arcs, each atom at its arc's middle).
    """

    points: Array
    masses: Array
    description: str
    sampling_error: float


def _gauss(a: float, b: float, panels: int, order: int = 16) -> tuple[Array, Array]:
    """Composite Gauss-Legendre nodes and weights on [a, b]."""
    x, w = np.polynomial.legendre.leggauss(order)
    edges = np.linspace(a, b, panels + 1)
    lo, hi = edges[:-1, None], edges[1:, None]
    return (0.5 * (lo + hi) + 0.5 * (hi - lo) * x).reshape(-1), (0.5 * (hi - lo) * w).reshape(-1)


def _orthonormal_complement(u: Array) -> tuple[Array, Array]:
    helper = np.eye(3)[int(np.argmin(np.abs(u)))]
    e1 = np.cross(u, helper)
    e1 /= np.linalg.norm(e1)
    return e1, np.cross(u, e1)


def _sectors(edges: Array, panels_per_sector: int, order: int) -> tuple[Array, Array, Array]:
    """Gauss nodes psi, weights and sector index of every node, over the angles ``edges``."""
    psi_list, w_list, sector = [], [], []
    for j in range(len(edges) - 1):
        p, w = _gauss(edges[j], edges[j + 1], panels_per_sector, order)
        psi_list.append(p)
        w_list.append(w)
        sector.append(np.full(p.size, j))
    return np.concatenate(psi_list), np.concatenate(w_list), np.concatenate(sector)


def sector_masses(
    initial: Callable[[Array], Array],
    e1: Array,
    e2: Array,
    edges: Array,
    *,
    panels_per_sector: int = 1,
    order: int = 8,
    lunes: bool = False,
    alpha_panels: int = 8,
) -> Array:
    """rho_0-masses of the sectors between the angles ``edges`` of the plane of e1, e2.

    On S^1 (``lunes`` False) the arcs {cos psi e1 + sin psi e2 : psi in [edges_k,
    edges_{k+1})}; on S^2 (``lunes``) the lunes {x : angle of (<x, e1>, <x, e2>) in [edges_k,
    edges_{k+1})}, in coordinates x = cos(alpha) (cos(psi) e1 + sin(psi) e2) + sin(alpha)
    (e1 x e2), d sigma = cos(alpha) d alpha d psi (``alpha_panels`` panels of 16 points in
    latitude). Composite Gauss-Legendre, ``order`` points per panel of psi."""
    psi, w_psi, sector = _sectors(edges, panels_per_sector, order)
    ring = np.cos(psi)[:, None] * e1 + np.sin(psi)[:, None] * e2
    if not lunes:
        per_psi = initial(ring) * w_psi
    else:
        pole = np.cross(e1, e2)
        alpha, w_alpha = _gauss(-0.5 * np.pi, 0.5 * np.pi, alpha_panels, 16)
        x = np.cos(alpha)[:, None, None] * ring[None] + np.sin(alpha)[:, None, None] * pole
        values = initial(x.reshape(-1, 3)).reshape(alpha.size, psi.size)
        per_psi = (values * (w_alpha * np.cos(alpha))[:, None]).sum(axis=0) * w_psi
    return np.bincount(sector, weights=per_psi, minlength=len(edges) - 1)


def _two_atoms(u: Array, masses: Array) -> TargetMeasure:
    return TargetMeasure(
        np.array([u, -u]),
        masses / masses.sum(),
        "two atoms at +-u, u = (" + ", ".join(f"{c:.12g}" for c in u) + ")",
        0.0,
    )


def _circle_target(
    initial: Callable[[Array], Array], basis: Array, circle_atoms: int
) -> TargetMeasure:
    """dim E_1 = 1 on S^1: the rho_0-masses of the half circles around +-u."""
    u = basis[0]
    e1, e2 = u, np.array([-u[1], u[0]])
    masses = sector_masses(
        initial, e1, e2, np.array([-0.5, 0.5, 1.5]) * np.pi, panels_per_sector=32, order=16
    )
    return _two_atoms(u, masses)


def _sphere_target(
    initial: Callable[[Array], Array], basis: Array, circle_atoms: int
) -> TargetMeasure:
    """S^2: dim E_1 = 1, the hemispheres around +-u; dim E_1 = 2, ``circle_atoms`` equal arcs of
    the great circle S cap E_1 carrying the masses of their lunes."""
    if basis.shape[0] == 1:
        u = basis[0]
        e1, e2 = _orthonormal_complement(u)
        # hemispheres: lunes around the pole u would be awkward; use u as the pole instead
        alpha, w_alpha = _gauss(0.0, 0.5 * np.pi, 32)
        psi, w_psi = _gauss(0.0, 2 * np.pi, 64)
        ring = np.cos(psi)[:, None] * e1 + np.sin(psi)[:, None] * e2
        masses = []
        for sign in (1.0, -1.0):
            x = np.cos(alpha)[:, None, None] * ring[None] + sign * np.sin(alpha)[:, None, None] * u
            vals = initial(x.reshape(-1, 3)).reshape(alpha.size, psi.size)
            masses.append(float(((vals * w_psi).sum(axis=1) * w_alpha * np.cos(alpha)).sum()))
        return _two_atoms(u, np.array(masses))
    e1, e2 = basis
    edges = np.linspace(0.0, 2 * np.pi, circle_atoms + 1)
    masses = sector_masses(initial, e1, e2, edges, lunes=True)
    psi = 0.5 * (edges[:-1] + edges[1:])
    points = np.cos(psi)[:, None] * e1 + np.sin(psi)[:, None] * e2
    desc = (
        f"{circle_atoms} atoms on the great circle of E_1 = span(("
        + ", ".join(f"{c:.12g}" for c in e1)
        + "), ("
        + ", ".join(f"{c:.12g}" for c in e2)
        + "))"
    )
    return TargetMeasure(points, masses / masses.sum(), desc, math.pi / circle_atoms)


#: the quadrature of Pi_# rho_0 on each domain: ``(initial, basis, circle_atoms) -> TargetMeasure``
#: (basis: an orthonormal basis of E_1)
PROJECTION_TARGETS = {CIRCLE.name: _circle_target, SPHERE.name: _sphere_target}


def projection_measure(
    model: Model, initial: Callable[[Array], Array], *, circle_atoms: int = CIRCLE_TARGET_ATOMS
) -> TargetMeasure:
    """Pi_# rho_0 (docs/models.md, section 3) as a discrete measure: the quadratures of the domain's
    part ``"projection_target"`` (circle and sphere here). A mixture initial density (with
    ``components``, the von Mises-Fisher densities) is also summed over its components in the
    log domain (:func:`_by_components`), which is used when the direct quadrature differs from
    it (a component narrower than the quadrature nodes' spacing).

    Raises
    ------
    AssumptionError
        When Assumption 1 fails, naming the failing part, when E_1 is the whole space, or on a
        domain that provides no quadrature of the sets Pi maps onto the target.
    """
    target = assumption_1(model)
    if not target.holds:
        raise AssumptionError(f"Pi_# rho_0 is undefined: Assumption 1 fails ({target.reason})")
    if target.basis.shape[0] == 0 or not np.all(np.isfinite(target.basis)):
        raise AssumptionError(
            "Pi_# rho_0 is undefined: the eigenvectors of A = V B^T are not finite "
            "(its entries are beyond what float64 resolves)"
        )
    if target.basis.shape[0] >= model.d:
        raise AssumptionError(
            "Pi_# rho_0 is undefined: the top eigenspace E_1 of V B^T is the whole space"
        )
    domain = domain_of_dimension(model.d)
    try:
        build = domain_entry(
            PROJECTION_TARGETS, domain, "projection_target", "the target Pi_# rho_0"
        )
    except NotProvided as exc:
        raise AssumptionError(str(exc)) from None
    with np.errstate(invalid="ignore", divide="ignore"):  # 0 / 0 when every node underflows
        measure = build(initial, target.basis, circle_atoms)
    if model.meridian:
        return fold_to_meridian(measure)
    parts = getattr(initial, "components", None)
    if parts is None:
        return measure
    by_parts = _by_components(build, parts(), target.basis, circle_atoms)
    if np.all(np.isfinite(measure.masses)) and np.allclose(
        measure.masses, by_parts.masses, rtol=0.0, atol=COMPONENT_MASS_AGREEMENT
    ):
        return measure
    return by_parts


def fold_to_meridian(measure: TargetMeasure) -> TargetMeasure:
    """The target of a zonal density (a model with ``meridian``): the circle's measure of the
    meridian plane, computed from the even extension of the polar law, folded onto the
    half-plane sin(theta) >= 0 (the atom at -psi is the atom at psi: the same polar angle),
    atoms at the same point merged (the equator's two atoms are one, of mass 1)."""
    points = measure.points.copy()
    points[:, 1] = np.abs(points[:, 1])
    keys = np.round(points, 12)
    unique, index = np.unique(keys, axis=0, return_inverse=True)
    masses = np.bincount(index.reshape(-1), weights=measure.masses, minlength=len(unique))
    first = np.unique(index.reshape(-1), return_index=True)[1]
    merged = points[first]
    return TargetMeasure(
        merged,
        masses,
        measure.description + "; folded onto the polar angle theta = |psi| in [0, pi]",
        measure.sampling_error,
    )


#: the direct quadrature of Pi_# rho_0 of a mixture is kept when it agrees with the sum over
#: components to this (in mass); otherwise a component is narrower than the quadrature
COMPONENT_MASS_AGREEMENT = 1e-9


def _by_components(
    build: Callable[..., TargetMeasure],
    parts: list[tuple[float, Callable[[Array], Array], float]],
    basis: Array,
    circle_atoms: int,
) -> TargetMeasure:
    """Pi_# rho_0 of a mixture sum_i w_i rho_i as sum_i w_i Pi_# rho_i (Pi_# is linear), each
    component's quadrature formed in the log domain: exp(log rho_i - largest), its largest
    value at the quadrature's nodes 1, so that a component far narrower than the nodes'
    spacing (vMF kappa = 1e10) keeps its mass on the side of its mean instead of 0 / 0."""
    masses, one = None, None
    for w, log_f, _ in parts:
        largest = [-math.inf]

        def probe(
            x: Array, log_f: Callable[[Array], Array] = log_f, largest: list[float] = largest
        ) -> Array:
            largest[0] = max(largest[0], float(np.max(log_f(x))))
            return np.ones(np.shape(x)[:-1])

        build(probe, basis, circle_atoms)  # first pass: the largest log value at the nodes
        with np.errstate(under="ignore"):
            one = build(
                lambda x, log_f=log_f, top=largest[0]: np.exp(log_f(x) - top), basis, circle_atoms
            )
        masses = w * one.masses if masses is None else masses + w * one.masses
    return TargetMeasure(one.points, masses / masses.sum(), one.description, one.sampling_error)


def empirical_projection(
    model: Model, x: Array, weight: Array, *, circle_atoms: int = CIRCLE_TARGET_ATOMS
) -> TargetMeasure:
    """Pi_# of the empirical measure sum_i w_i delta_{x_i} (particles at t = 0): the target of a
    particle run, which carries its own sampling error of rho_0 (i.i.d. starts put
    O(n^-1/2) more or less mass on each side than rho_0 does; measured against Pi_# rho_0
    that imbalance alone would keep W2 near sqrt(|imbalance|) pi).

    dim E_1 = 1: two atoms +-u with the weights of the particles on each side of u^perp;
    dim E_1 = 2 (S^2): Pi(x_i) on the great circle, gathered into ``circle_atoms`` equal arcs
    (each at its arc's middle, as :func:`projection_measure`; sampling error pi / circle_atoms).
    Particles with Pi(x_i) undefined (on E_1^perp, a set of measure zero) go to the first atom.

    Raises
    ------
    AssumptionError
        As :func:`projection_measure`.
    """
    target = assumption_1(model)
    if not target.holds:
        raise AssumptionError(f"Pi_# rho_0 is undefined: Assumption 1 fails ({target.reason})")
    if target.basis.shape[0] >= model.d:
        raise AssumptionError(
            "Pi_# rho_0 is undefined: the top eigenspace E_1 of V B^T is the whole space"
        )
    x, weight = np.asarray(x, dtype=float), np.asarray(weight, dtype=float)
    coords = x @ target.basis.T
    if target.basis.shape[0] == 1:
        u = target.basis[0]
        masses = np.array([weight[coords[:, 0] >= 0].sum(), weight[coords[:, 0] < 0].sum()])
        return _two_atoms(u, masses)
    if target.basis.shape[0] != 2:
        raise AssumptionError("Pi_# of particles is implemented for dim E_1 = 1 and 2")
    e1, e2 = target.basis
    psi = np.arctan2(coords[:, 1], coords[:, 0]) % (2 * np.pi)
    arc = np.minimum((psi / (2 * np.pi / circle_atoms)).astype(int), circle_atoms - 1)
    masses = np.bincount(arc, weights=weight, minlength=circle_atoms)
    middle = (np.arange(circle_atoms) + 0.5) * 2 * np.pi / circle_atoms
    keep = masses > 0
    points = np.cos(middle[keep])[:, None] * e1 + np.sin(middle[keep])[:, None] * e2
    desc = (
        f"the particles' Pi(x_i(0)) gathered into {circle_atoms} equal arcs of the great circle of "
        "E_1 = span(("
        + ", ".join(f"{c:.12g}" for c in e1)
        + "), ("
        + ", ".join(f"{c:.12g}" for c in e2)
        + "))"
    )
    return TargetMeasure(points, masses[keep] / masses.sum(), desc, math.pi / circle_atoms)


def projection_target(config: Any) -> TargetMeasure:
    """Pi_# rho_0 for a run configuration (its model and initial density)."""

    problem = Problem.from_config(config)
    return projection_measure(problem.model, problem.initial)


@dataclass(frozen=True)
class TerminalSubspace:
    """The dominant eigenspace of V: the conjectured support of the terminal phase.

    Definition used: the eigenvalue(s) of V with the largest real part (the growth rate of
    dx/dt = P_x V x, whose solutions are e^{tV} x_0 / |e^{tV} x_0|); for a real eigenvalue its
    real eigenspace, for a complex pair the real invariant plane spanned by Re w and Im w.
    ``basis`` is orthonormal (rows); ``None`` when that space is all of R^d.
    """

    basis: Array | None
    eigenvalue: complex
    definition: str

    def distance(self, points: Array) -> Array:
        """Geodesic distance from unit vectors to S cap E: arccos |P_E x|."""
        assert self.basis is not None
        proj = np.linalg.norm(points @ self.basis.T, axis=-1)
        return np.arccos(np.clip(proj, -1.0, 1.0))

    def w2(self, points: Array, masses: Array) -> float:
        """W2 from the atoms sum_j masses_j delta_{points_j} (a density as
        :func:`spheredens.diagnostics.grid_atoms` represents it) to the set of measures
        supported on S cap E (each atom to its nearest point of S cap E):
        sqrt(sum_j masses_j d(x_j, S cap E)^2 / sum_j masses_j)."""
        return float(np.sqrt(np.sum(masses * self.distance(points) ** 2) / np.sum(masses)))


def terminal_subspace(model: Model, *, rtol: float = 1e-9) -> TerminalSubspace:
    """The dominant eigenspace of V (see :class:`TerminalSubspace` for the definition)."""
    w, vecs = np.linalg.eig(model.V)
    order = np.argsort(-w.real)
    w, vecs = w[order], vecs[:, order]
    top = w[0]
    scale = max(float(np.abs(w).max()), 1e-300)
    same = np.abs(w.real - top.real) <= rtol * scale
    if abs(top.imag) > rtol * scale:
        cols = [vecs[:, i] for i in np.flatnonzero(same)]
        span = np.concatenate([[c.real, c.imag] for c in cols])
        kind = "complex pair: the real invariant plane of its eigenvectors"
    else:
        span = np.array([vecs[:, i].real for i in np.flatnonzero(same)])
        kind = "real eigenvalue: its eigenspace"
    u, s, vt = np.linalg.svd(span)
    rank = int(np.sum(s > 1e-9 * s[0]))
    basis = vt[:rank]
    definition = (
        f"dominant eigenvalue of V (largest real part) = {complex(top):.6g} ({kind}), "
        f"dimension {rank}"
    )
    return TerminalSubspace(None if rank >= model.d else basis, complex(top), definition)


@dataclass(frozen=True)
class Target:
    """A set a density tends to, drawn on the figures.

    Attributes
    ----------
    role : str
        ``"projection"``: the support of Pi_# rho_0 (the zero-temperature target of docs/models.md
        section 3); ``"terminal"``: the dominant eigenspace of V (the terminal phase);
        ``"both"`` when the two coincide.
    basis : ndarray (k, d)
        Orthonormal rows spanning the subspace E, k < d: the set drawn is S cap E, the two
        points +-b for k = 1, a great circle for k = 2 (sphere).
    label : str
        The legend entry.
    """

    role: str
    basis: Array
    label: str

    @property
    def points(self) -> Array:
        """The points +-b of a line (k = 1), shape (2, d); empty for a plane."""
        if self.basis.shape[0] != 1:
            return np.empty((0, self.basis.shape[1]))
        return np.array([self.basis[0], -self.basis[0]])

    def curve(self, n: int = 361) -> Array:
        """The great circle S cap E of a plane (k = 2), n points (n, d); empty for a line."""
        if self.basis.shape[0] != 2:
            return np.empty((0, self.basis.shape[1]))
        psi = np.linspace(0.0, 2.0 * np.pi, n)
        return np.cos(psi)[:, None] * self.basis[0] + np.sin(psi)[:, None] * self.basis[1]


def _all_nan(ds: Any, name: str) -> bool:
    return name in ds.variables and not np.any(
        np.isfinite(np.asarray(ds[name].values, dtype=float))
    )


def _same_subspace(a: Array, b: Array) -> bool:
    return a.shape == b.shape and float(np.abs(a.T @ a - b.T @ b).max()) <= 1e-8


def file_targets(ds: Any) -> list[Target]:
    """The targets of the model a density, particle or comparison file records
    (``ds.sd.model()``); they depend on its Q, K and V only.

    * the support of Pi_# rho_0 (docs/models.md, section 3) when Assumption 1 holds (B = Q^T K
      invertible, A = V B^T symmetric with a spectral gap,
      :func:`spheredens.models.projection_target`):
      the atoms +-u (E_1 a line) or the great circle S cap E_1 (E_1 a plane, sphere); not drawn
      when the file's ``w2_projection`` is NaN throughout (the file says why in its ``comment``);
    * the dominant eigenspace of V (:func:`spheredens.targets.terminal_subspace`, the support
      conjectured for the terminal phase) when it is not all of R^d.

    A file that records no model (``ds.sd.model()``: a converted particle file) has no targets.

    Returns
    -------
    list of Target
        One entry when the two coincide (role ``"both"``), none when neither is defined.
    """
    try:
        model = ds.sd.model()
    except SchemaError:  # no model recorded (a converted particle file): no targets
        return []
    d = model.d
    out: list[Target] = []
    target = assumption_1(model)
    if target.holds and target.basis.shape[0] < d and not _all_nan(ds, "w2_projection"):
        k = target.basis.shape[0]
        out.append(
            Target(
                "projection",
                target.basis,
                "support of Pi_# rho_0: "
                + ("the atoms +-u" if k == 1 else "the great circle S cap E_1"),
            )
        )
    terminal = terminal_subspace(model)
    if (
        terminal.basis is not None
        and terminal.basis.shape[0] < d
        and not _all_nan(ds, "w2_terminal")
    ):
        basis = terminal.basis
        if out and _same_subspace(out[0].basis, basis):
            k = basis.shape[0]
            out[0] = Target(
                "both",
                out[0].basis,
                ("the atoms +-u" if k == 1 else "the great circle S cap E_1")
                + " = the top eigenspace of V",
            )
        else:
            out.append(
                Target(
                    "terminal",
                    basis,
                    "top eigenspace of V: "
                    + ("+-e_1" if basis.shape[0] == 1 else "a great circle"),
                )
            )
    return out
