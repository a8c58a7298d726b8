"""The models of docs/models.md: parameters and kernel formulas, independent of any grid.

Every model is a continuity equation d/dt rho + div_S(rho X[rho]) = 0 on S^{d-1}. The models
differ in the velocity X:

``sa``
    X(x) = P_x N(x)/Z(x),  N = int exp(beta <Qx, Ky>) V y rho dsigma,
    Z = int exp(beta <Qx, Ky>) rho dsigma.
``sa_zero_temperature``
    X(x) = P_x V B^T x / |B^T x|  (no dependence on rho; needs B = Q^T K invertible).
``usa``
    X(x) = P_x N(x)  (unnormalized attention).
``usa_av``
    one density rho_k per slice xi_k, X_k(x) = P_x sum_l r_l b_kl int exp(beta <G_k x, G_l y>)
    G_k^T G_l y rho_l(y) dsigma(y) (Q = K = V = I; :mod:`spheredens.auxiliary`).

Since <Qx, Ky> = <B^T x, y> with B = Q^T K, interaction code only needs B and V.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ._registry import Registry
from ._types import Array
from .geometry import tangent_project
from .kernel import AttentionKernel

#: registry of model names -> description of how the velocity is formed
MODELS = Registry("model")


@dataclass(frozen=True)
class ModelKind:
    """How a model forms its velocity.

    Attributes
    ----------
    normalized : bool
        True for softmax attention (N/Z), False for unnormalized attention (N).
    interacting : bool
        False when the velocity does not depend on rho (the zero-temperature limit).
    description : str
        One line for ``spheredens info``.
    sliced : bool
        True for one density per slice xi of an auxiliary variable (``usa_av``: Q = K = V = I,
        the gauges G(xi) carry the geometry; the ``[auxiliary]`` table).
    energy : str or None
        How the interaction energy E_beta of docs/models.md (sections 4 and 5) is formed:
        ``"pairs"`` (``usa``: pairwise sums, defined for Q = K = V = I), ``"slices"``
        (``usa_av``: over the slices), None where it is not defined.
    """

    normalized: bool
    interacting: bool
    description: str
    sliced: bool = False
    energy: str | None = None


MODELS.register("sa")(ModelKind(True, True, "softmax self-attention at inverse temperature beta"))
MODELS.register("sa_zero_temperature")(
    ModelKind(True, False, "beta -> inf limit: linear transport by X(x) = P_x V B^T x / |B^T x|")
)
MODELS.register("usa")(ModelKind(False, True, "unnormalized self-attention", energy="pairs"))
MODELS.register("usa_av")(
    ModelKind(
        False,
        True,
        "unnormalized self-attention with auxiliary "
        "variables: one density per slice xi, gauges G(xi), couplings b",
        sliced=True,
        energy="slices",
    )
)


@dataclass(frozen=True)
class Model:
    """A model of docs/models.md with its parameters.

    Parameters
    ----------
    name : str
        ``"sa"``, ``"sa_zero_temperature"`` or ``"usa"``.
    beta : float
        Inverse temperature, >= 0 (``inf`` for the zero-temperature model).
    Q, K, V : ndarray, shape (d, d)
        Query, key and value matrices.
    auxiliary : AuxiliaryKernel, optional
        Slices, gauges and couplings of ``usa_av`` (:mod:`spheredens.auxiliary`).
    meridian : bool
        The matrices are the 2 x 2 reductions diag(alpha, gamma), in the frame (e, omega) of
        a meridian plane, of a model on S^{d-1} symmetric about the axis e (the zonal domain,
        docs/models.md section 6): the velocity, the targets and W2 of the reduction are
        those of S^{d-1}, its state the law of the polar angle.
    """

    name: str
    beta: float
    Q: Array
    K: Array
    V: Array
    auxiliary: Any = None
    meridian: bool = False
    kind: ModelKind = field(init=False, repr=False)
    kernel: AttentionKernel = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", MODELS.get(self.name, "model.name"))
        for label in ("Q", "K", "V"):
            m = np.array(getattr(self, label), dtype=float)
            m.setflags(write=False)
            object.__setattr__(self, label, m)
        object.__setattr__(self, "kernel", AttentionKernel(self.beta, self.Q.T @ self.K))

    @property
    def d(self) -> int:
        """Ambient dimension d (2 for the circle, 3 for the sphere)."""
        return int(self.Q.shape[0])

    @property
    def B(self) -> Array:
        """B = Q^T K, so that <Q x, K y> = <B^T x, y>."""
        return self.kernel.B

    @property
    def V_norm(self) -> float:
        """Spectral norm ||V||_2: the bound of |X| for the softmax models."""
        return float(np.linalg.norm(self.V, 2))

    def zero_temperature_velocity(self, x: Array) -> Array:
        """X_inf(x) = P_x V B^T x / |B^T x| at points x of shape (..., d)."""
        bx = x @ self.kernel.B  # rows: (B^T x)^T = x^T B
        u = bx / np.linalg.norm(bx, axis=-1, keepdims=True)
        return tangent_project(x, u @ self.V.T)


@dataclass(frozen=True)
class ProjectionTarget:
    """The zero-temperature limit map Pi(x) = P_1 x / |P_1 x| of docs/models.md section 3.

    Attributes
    ----------
    holds : bool
        Whether Assumption 1 holds (B invertible, A = V B^T symmetric, mu_1 > mu_2).
    reason : str
        Why it does not hold (empty when it holds).
    A : ndarray (d, d)
        V B^T.
    eigenvalues : ndarray (d,)
        Eigenvalues of the symmetric part of A, decreasing.
    basis : ndarray (dim E_1, d)
        Orthonormal basis (rows) of the top eigenspace E_1.
    """

    holds: bool
    reason: str
    A: Array
    eigenvalues: Array
    basis: Array

    @property
    def spectral_gap(self) -> float:
        return float(self.eigenvalues[0] - self.eigenvalues[1])

    @property
    def projector(self) -> Array:
        """Orthogonal projector P_1 onto E_1."""
        return self.basis.T @ self.basis


#: relative tolerance under which A = V B^T counts as symmetric: matrices typed with six
#: significant digits (as in the examples of the concentration paper digest) qualify
SYMMETRY_RTOL = 1e-5


def projection_target(
    model: Model, *, rtol: float = 1e-9, symmetry_rtol: float = SYMMETRY_RTOL
) -> ProjectionTarget:
    """Check Assumption 1 for ``model`` and describe Pi_# of docs/models.md section 3.

    Parameters
    ----------
    model : Model
    rtol : float
        Relative tolerance for invertibility of B and eigenvalue multiplicity (eigenvalues
        within ``rtol * max|A_ij|`` of mu_1 belong to E_1).
    symmetry_rtol : float
        A counts as symmetric when max|A - A^T| <= symmetry_rtol * max|A_ij|; E_1 is then taken
        from the symmetric part (A + A^T) / 2.
    """
    B, V = model.B, model.V
    A = V @ B.T
    scale = max(float(np.abs(A).max()), np.finfo(float).tiny)
    sym = 0.5 * (A + A.T)
    w, U = np.linalg.eigh(sym)
    order = np.argsort(w)[::-1]
    w, U = w[order], U[:, order]
    in_top = w >= w[0] - rtol * scale
    basis = U[:, in_top].T.copy()
    reason = ""
    if model.kernel.is_singular(rtol):
        reason = "B = Q^T K is singular"
    elif np.abs(A - A.T).max() > symmetry_rtol * scale:
        reason = "A = V B^T is not symmetric"
    elif in_top.all():
        reason = "A = V B^T has no spectral gap (all eigenvalues equal)"
    return ProjectionTarget(reason == "", reason, A, w, basis)
