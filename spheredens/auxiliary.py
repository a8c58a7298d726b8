"""Auxiliary variables (docs/models.md section 5): slices xi_k with weights r_k, gauges G(xi)
in O(d) and couplings b(xi, zeta). Physics only: no grid.

The model ``usa_av`` moves one density rho_k per slice by

    X_k(x) = P_x sum_l r_l b_kl int exp(beta <G_k x, G_l y>) G_k^T G_l y rho_l(y) dsigma(y),

the gradient ascent of
E_h = 1/(2 beta) sum_kl r_k r_l b_kl int int exp(beta <G_k x, G_l y>) rho_k rho_l.
A kernel is the pair (G_k, b_kl) over the slices; :data:`KERNELS` builds it from the
``[auxiliary]`` table of a run configuration.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np
from scipy.linalg import expm

from ._registry import Registry
from ._types import Array
from ._validate import as_float, as_int, as_matrix, check_keys
from .exceptions import ConfigError
from .initial import RandomSmooth

#: kernel name -> builder(xi, d, params, key) -> (gauges (M, d, d), coupling (M, M), params)
KERNELS = Registry("auxiliary kernel")

#: most slices accepted
MAX_SLICES = 4096


@dataclass(frozen=True)
class AuxiliaryKernel:
    """Slices and their coupling.

    Attributes
    ----------
    name : str
        Kernel name (:data:`KERNELS`).
    xi : ndarray (M,)
        Slice labels.
    weight : ndarray (M,)
        r_k, the auxiliary marginal (sums to 1).
    gauges : ndarray (M, d, d)
        G_k = G(xi_k), orthogonal.
    coupling : ndarray (M, M)
        b_kl = b(xi_k, xi_l), symmetric.
    params : dict
        The kernel's own parameters, as written back to TOML.
    """

    name: str
    xi: Array
    weight: Array
    gauges: Array
    coupling: Array
    params: Mapping[str, Any] = field(default_factory=dict)
    slice_perturbation: float = 0.0
    slice_seed: int = 0

    def slice_factor(self, k: int) -> Callable[[Array], Array] | None:
        """x -> exp(eps f_k(x)), the factor of slice k's initial density rho_0 exp(eps f_k)
        (renormalized), f_k a random smooth field of unit variance (bandwidth 3, seed
        ``slice_seed + k``); None without perturbation."""
        if self.slice_perturbation == 0.0:
            return None

        field = RandomSmooth(self.gauges.shape[-1], self.slice_seed + k, 3, 1.0)
        eps = self.slice_perturbation
        return lambda x: np.exp(eps * field._log_unnormalized(x))

    @property
    def n_slices(self) -> int:
        return len(self.xi)

    @property
    def uniform_coupling(self) -> bool:
        """b = 1 for every pair (the gauge kernels): one combined density serves every slice."""
        return bool(np.all(self.coupling == 1.0))

    @property
    def trivial_gauge(self) -> bool:
        """G_k = I for every slice (the coupling kernels)."""
        return bool(np.all(self.gauges == np.eye(self.gauges.shape[-1])))

    @property
    def toeplitz(self) -> Array | None:
        """First column c of b when b_kl = c_{|k - l|} (equally spaced slices, b a function of
        xi - zeta, symmetric), else None: then b x is a Toeplitz product by FFT."""
        b = self.coupling
        m = len(b)
        if m < 2:
            return None
        col = b[:, 0]
        k, l = np.indices(b.shape)
        return col.copy() if np.array_equal(b, col[np.abs(k - l)]) else None

    def orbit(self, z: Array) -> Array:
        """The predicted slice modes x*(xi_k) = G_k^T z, shape (M, d)."""
        return np.einsum("kji,j->ki", self.gauges, np.asarray(z, dtype=float))

    def to_params(self) -> dict[str, Any]:
        return {
            "kernel": self.name,
            "xi": [float(v) for v in self.xi],
            "weights": [float(v) for v in self.weight],
            **dict(self.params),
            "slice_perturbation": self.slice_perturbation,
            "slice_seed": self.slice_seed,
        }


def _rotation_2d(angle: Array) -> Array:
    c, s = np.cos(angle), np.sin(angle)
    return np.stack([np.stack([c, -s], -1), np.stack([s, c], -1)], -2)


def plane_rotation(angle: Array, d: int) -> Array:
    """Rotations by ``angle`` in the (e1, e2) plane, shape (M, d, d) (d = 3: about e3)."""
    angle = np.asarray(angle, dtype=float)
    out = np.broadcast_to(np.eye(d), angle.shape + (d, d)).copy()
    out[..., :2, :2] = _rotation_2d(angle)
    return out


def _no_gauge(xi: Array, d: int) -> Array:
    return np.broadcast_to(np.eye(d), (len(xi), d, d)).copy()


@KERNELS.register("none")
def _none(xi: Array, d: int, params: Mapping[str, Any], key: str):
    """Baseline USA: G = I, b = 1 (collapse to one Dirac mass)."""
    check_keys(params, [], key)
    return _no_gauge(xi, d), np.ones((len(xi), len(xi))), {}


@KERNELS.register("rope")
def _rope(xi: Array, d: int, params: Mapping[str, Any], key: str):
    """G(xi) = rotation by omega xi in the (e1, e2) plane (about e3 on the sphere), b = 1."""
    check_keys(params, ["omega"], key)
    omega = as_float(params.get("omega", 2 * math.pi), f"{key}.omega")
    return plane_rotation(omega * xi, d), np.ones((len(xi), len(xi))), {"omega": omega}


@KERNELS.register("rope_general")
def _rope_general(xi: Array, d: int, params: Mapping[str, Any], key: str):
    """G(xi) = exp(theta(xi) Omega), theta(xi) = omega xi + amplitude sin(frequency xi), Omega the
    unit skew-symmetric generator of rotations about ``axis`` (sphere; the circle has one),
    b = 1."""
    check_keys(params, ["omega", "amplitude", "frequency", "axis"], key)
    omega = as_float(params.get("omega", 2 * math.pi), f"{key}.omega")
    amplitude = as_float(params.get("amplitude", 0.5), f"{key}.amplitude")
    frequency = as_float(params.get("frequency", 4 * math.pi), f"{key}.frequency")
    theta = omega * xi + amplitude * np.sin(frequency * xi)
    out = {"omega": omega, "amplitude": amplitude, "frequency": frequency}
    if d == 2:
        if "axis" in params:
            raise ConfigError(
                f"{key}.axis", "the circle has one rotation generator; remove the key"
            )
        return plane_rotation(theta, 2), np.ones((len(xi), len(xi))), out
    axis = np.asarray(params.get("axis", [1.0, 1.0, 1.0]), dtype=float)
    if axis.shape != (3,) or not np.all(np.isfinite(axis)) or np.linalg.norm(axis) == 0:
        raise ConfigError(f"{key}.axis", f"= {params.get('axis')!r} must be a non-zero 3-vector")
    a = axis / np.linalg.norm(axis)
    omega_mat = np.array([[0.0, -a[2], a[1]], [a[2], 0.0, -a[0]], [-a[1], a[0], 0.0]])
    gauges = np.stack([expm(t * omega_mat) for t in theta])
    return gauges, np.ones((len(xi), len(xi))), {**out, "axis": [float(v) for v in axis]}


def random_orthogonal(rng: np.random.Generator, d: int) -> Array:
    """A Haar-random orthogonal d x d matrix (QR of a Gaussian matrix, signs fixed)."""
    q, r = np.linalg.qr(rng.normal(size=(d, d)))
    return q * np.sign(np.diag(r))


@KERNELS.register("prefix")
def _prefix(xi: Array, d: int, params: Mapping[str, Any], key: str):
    """One orthogonal gauge per prompt id: slice k has prompt id int(xi_k) (0 .. K-1); the
    gauges are given (``gauges``: K matrices d x d) or Haar-random (``prompts`` = K, ``seed``)."""
    check_keys(params, ["gauges", "prompts", "seed"], key)
    ids = np.asarray(xi)
    if np.any(ids != np.round(ids)) or np.any(ids < 0):
        raise ConfigError(
            f"{key}.xi", "prefix slices are prompt ids: non-negative integers 0, 1, ..."
        )
    ids = ids.astype(int)
    if "gauges" in params:
        if not isinstance(params["gauges"], list) or not params["gauges"]:
            raise ConfigError(f"{key}.gauges", "must be a list of d x d orthogonal matrices")
        mats = np.array(
            [as_matrix(g, f"{key}.gauges[{i}]", d) for i, g in enumerate(params["gauges"])]
        )
        for i, g in enumerate(mats):
            if np.abs(g.T @ g - np.eye(d)).max() > 1e-9:
                raise ConfigError(f"{key}.gauges[{i}]", "is not orthogonal (G^T G != I to 1e-9)")
        out = {"gauges": [[list(map(float, r)) for r in g] for g in mats]}
    else:
        prompts = as_int(
            params.get("prompts", int(ids.max()) + 1),
            f"{key}.prompts",
            minimum=1,
            maximum=MAX_SLICES,
        )
        seed = as_int(params.get("seed", 0), f"{key}.seed", minimum=0)
        rng = np.random.default_rng(seed)
        mats = np.stack([random_orthogonal(rng, d) for _ in range(prompts)])
        out = {"prompts": prompts, "seed": seed}
    if ids.max() >= len(mats):
        raise ConfigError(
            f"{key}.xi", f"prompt id {ids.max()} has no gauge (there are {len(mats)})"
        )
    return mats[ids], np.ones((len(xi), len(xi))), out


@KERNELS.register("distance_bias")
def _distance_bias(xi: Array, d: int, params: Mapping[str, Any], key: str):
    """G = I, b(xi, zeta) = exp(-|xi - zeta| / ell) >= 0 (still collapses)."""
    check_keys(params, ["ell"], key)
    ell = as_float(params.get("ell", 0.5), f"{key}.ell", minimum=0.0, strict=True)
    return _no_gauge(xi, d), np.exp(-np.abs(xi[:, None] - xi[None, :]) / ell), {"ell": ell}


@KERNELS.register("cosine_toeplitz")
def _cosine_toeplitz(xi: Array, d: int, params: Mapping[str, Any], key: str):
    """G = I, b(xi, zeta) = cos(omega (xi - zeta)) (changes sign: non-collapsed maximizers)."""
    check_keys(params, ["omega"], key)
    omega = as_float(params.get("omega", 2 * math.pi), f"{key}.omega")
    return _no_gauge(xi, d), np.cos(omega * (xi[:, None] - xi[None, :])), {"omega": omega}


def auxiliary_from_params(
    table: Mapping[str, Any], d: int, key: str = "auxiliary"
) -> AuxiliaryKernel:
    """Validate an ``[auxiliary]`` table.

    Keys: ``kernel`` (default ``"none"``); the slices, either ``xi`` (labels) or ``slices`` = M
    (labels k / M, k = 0..M-1, on [0, 1); for ``prefix``: prompt ids 0..M-1); ``weights`` (r_k,
    default uniform, normalized to sum 1); ``slice_perturbation`` eps >= 0 and ``slice_seed``
    (slice k starts from rho_0 exp(eps f_k), f_k a seeded random smooth field; default 0: every
    slice starts from rho_0, which for symmetric kernels can be a steady state); and the
    kernel's own parameters.
    """
    table = dict(table)
    name = table.pop("kernel", "none")
    builder: Callable = KERNELS.get(name, f"{key}.kernel")
    if "xi" in table and "slices" in table:
        raise ConfigError(
            f"{key}.xi", "give either xi (the labels) or slices (their number), not both"
        )
    if "xi" in table:
        raw = table.pop("xi")
        if not isinstance(raw, list) or not raw:
            raise ConfigError(f"{key}.xi", f"must be a non-empty list of numbers, got {raw!r}")
        xi = np.array([as_float(v, f"{key}.xi") for v in raw])
        if len(xi) > MAX_SLICES:
            raise ConfigError(f"{key}.xi", f"has {len(xi)} slices; at most {MAX_SLICES}")
        if len(np.unique(xi)) != len(xi):
            raise ConfigError(f"{key}.xi", "has repeated labels")
    else:
        m = as_int(table.pop("slices", 16), f"{key}.slices", minimum=1, maximum=MAX_SLICES)
        xi = np.arange(m, dtype=float) if name == "prefix" else np.arange(m) / m
    eps = as_float(
        table.pop("slice_perturbation", 0.0), f"{key}.slice_perturbation", minimum=0.0, maximum=10.0
    )
    slice_seed = as_int(table.pop("slice_seed", 0), f"{key}.slice_seed", minimum=0)
    weights = table.pop("weights", None)
    if weights is None:
        r = np.full(len(xi), 1.0 / len(xi))
    else:
        if not isinstance(weights, list) or len(weights) != len(xi):
            raise ConfigError(
                f"{key}.weights", f"must be a list of {len(xi)} numbers (one per slice)"
            )
        r = np.array([as_float(w, f"{key}.weights", minimum=0.0) for w in weights])
        if r.sum() <= 0:
            raise ConfigError(f"{key}.weights", "must not all be zero")
        r = r / r.sum()
    gauges, coupling, params = builder(xi, d, table, key)
    return AuxiliaryKernel(
        name,
        xi,
        r,
        np.asarray(gauges, dtype=float),
        np.asarray(coupling, dtype=float),
        params,
        eps,
        slice_seed,
    )
