"""The rules of the ``[model]`` table (and of the ``[auxiliary]`` table it may need), in one
place: which keys each model takes, the bounds of beta and of Q, K, V, and what a model needs
of B = Q^T K.

The rules follow the model's kind (:class:`~spheredens.models.ModelKind`): the model that does
not interact (``sa_zero_temperature``) has beta = inf and needs B invertible; the model with
slices (``usa_av``) has Q = K = V = I, beta > 0 and takes the ``[auxiliary]`` table; the
unnormalized models (``usa``, ``usa_av``) must keep exp(beta ||Q^T K||) within float64.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Mapping

import numpy as np

from ._validate import as_float, as_matrix, as_str, check_keys
from .auxiliary import auxiliary_from_params
from .exceptions import ConfigError, shown
from .kernel import AttentionKernel
from .models import MODELS, Model

Matrix = tuple[tuple[float, ...], ...]


@dataclass(frozen=True)
class ModelConfig:
    """``[model]``: name, inverse temperature beta and the attention matrices Q, K, V."""

    name: str
    beta: float
    Q: Matrix
    K: Matrix
    V: Matrix
    auxiliary: Any = None  # AuxiliaryKernel of usa_av (the [auxiliary] table)
    #: the matrices are the 2 x 2 reductions diag(alpha, gamma) of a model symmetric about an
    #: axis, in the frame (e, omega) of the meridian plane (the zonal domain,
    #: :func:`zonal_model_config`); the configuration then writes the scalars a, b, l1, l2
    meridian: bool = False

    def build(self) -> Model:
        """The :class:`~spheredens.models.Model` these parameters describe."""
        return Model(
            self.name,
            self.beta,
            np.array(self.Q),
            np.array(self.K),
            np.array(self.V),
            self.auxiliary,
            self.meridian,
        )


def model_config(t: dict[str, Any], d: int) -> ModelConfig:
    """The ``[model]`` table ``t`` on S^{d-1}, validated (defaults: ``sa``, beta = 1, identity
    matrices); a ConfigError naming the key that breaks a rule of the model."""
    check_keys(t, ["name", "beta", "Q", "K", "V"], "model")
    name = as_str(t.get("name", "sa"), "model.name")
    kind = MODELS.get(name, "model.name")
    eye = tuple(tuple(float(i == j) for j in range(d)) for i in range(d))
    mats = {m: as_matrix(t[m], f"model.{m}", d) if m in t else eye for m in ("Q", "K", "V")}
    check_matrix_scale(mats)
    if not kind.interacting:
        if "beta" in t:
            beta = as_float(t["beta"], "model.beta", allow_inf=True)
            if beta != math.inf:
                raise ConfigError(
                    "model.beta",
                    f"= {shown(t['beta'])}: the zero-temperature model has "
                    "beta = inf; remove the key or write beta = inf",
                )
        beta = math.inf
        kernel = AttentionKernel(beta, np.array(mats["Q"]).T @ np.array(mats["K"]))
        if kernel.is_singular(1e-12):
            raise ConfigError(
                "model.K",
                "B = Q^T K is singular (smallest singular value "
                f"{kernel.singular_values[-1]:.3g}); sa_zero_temperature needs B invertible",
            )
    else:
        beta = as_float(
            t.get("beta", 1.0),
            "model.beta",
            minimum=0.0,
            what=" (inverse temperature; inf only for sa_zero_temperature)",
        )
        if beta > 1e4:
            raise ConfigError(
                "model.beta",
                f"= {beta:g} is too large: must be <= 1e4 "
                "(use sa_zero_temperature for the beta -> inf limit)",
            )
        if 0.0 < beta < MIN_SCALE:
            raise ConfigError(
                "model.beta",
                f"= {beta!r} is below {MIN_SCALE:g}, where float64 loses its "
                "precision (1 / beta overflows): write beta = 0, the same kernel to round-off",
            )
        if kind.sliced:
            for m in ("Q", "K", "V"):
                if mats[m] != eye:
                    raise ConfigError(
                        f"model.{m}",
                        "usa_av follows docs/models.md section 5, where "
                        "Q = K = V = I (the gauges G(xi) carry the geometry); remove the key",
                    )
            if beta == 0.0:
                raise ConfigError("model.beta", "usa_av needs beta > 0 (its energy has 1/(2 beta))")
        growth = beta * AttentionKernel(beta, np.array(mats["Q"]).T @ np.array(mats["K"])).sigma_max
        if not kind.normalized and growth > 700.0:
            raise ConfigError(
                "model.beta",
                f"= {beta:g}: unnormalized attention grows like "
                f"exp(beta ||Q^T K||) = exp({growth:.4g}), beyond float64 (exp(709)); "
                "use beta ||Q^T K|| <= 700",
            )
    return ModelConfig(name, beta, mats["Q"], mats["K"], mats["V"])


#: the largest |entry| of Q, K and V: the kernel depends on beta Q^T K and the velocity is
#: linear in V, so a larger scale is a larger beta or a shorter time scale, and products of
#: entries beyond it approach the end of float64 (1.8e308)
MAX_MATRIX_ENTRY = 1e6
#: the smallest non-zero beta and norm of Q^T K: below them products underflow (1e-300 ** 2 is 0)
MIN_SCALE = 1e-300
MIN_B_NORM = 1e-100


def check_matrix_scale(mats: Mapping[str, Matrix]) -> None:
    """Refuse entries of Q, K, V beyond :data:`MAX_MATRIX_ENTRY` and a non-zero B = Q^T K of
    norm below :data:`MIN_B_NORM` (one line naming the entry, or model.K)."""
    hints = {
        "Q": "the kernel depends on beta Q^T K only: put the scale in model.beta",
        "K": "the kernel depends on beta Q^T K only: put the scale in model.beta",
        "V": "the velocity is linear in V, so a larger V is the same run on a shorter time "
        "scale: scale time.t_end instead",
    }
    for m, rows in mats.items():
        for i, row in enumerate(rows):
            for j, v in enumerate(row):
                if abs(v) > MAX_MATRIX_ENTRY:
                    raise ConfigError(
                        f"model.{m}[{i}][{j}]",
                        f"= {v:g} is too large: the entries of Q, K "
                        f"and V must be at most {MAX_MATRIX_ENTRY:g} in absolute value; {hints[m]}",
                    )
    B = np.array(mats["Q"]).T @ np.array(mats["K"])
    norm = float(np.abs(B).max())
    if 0.0 < norm < MIN_B_NORM:
        raise ConfigError(
            "model.K",
            f"B = Q^T K has entries of at most {norm:.3g}, below {MIN_B_NORM:g}: "
            "the kernel is flat to round-off and its products underflow; write K = 0 "
            "(or beta = 0) for a flat kernel, or put the scale in model.beta",
        )


def with_auxiliary(model: ModelConfig, table: dict[str, Any], given: bool, d: int) -> ModelConfig:
    """Attach the [auxiliary] table (slices, kernel) to the model with slices (``usa_av``);
    refuse it (when ``given``) for the other models."""
    if not MODELS.get(model.name).sliced:
        if given:
            raise ConfigError(
                "auxiliary",
                f"the [auxiliary] table is for model 'usa_av', not "
                f'{model.name!r}; remove it or set model.name = "usa_av"',
            )
        return model
    return replace(model, auxiliary=auxiliary_from_params(table, d))


#: the scalars of a model symmetric about an axis e: B = Q^T K = a e e^T + b P and
#: V = l1 e e^T + l2 P, P = I - e e^T (docs/models.md section 6)
ZONAL_SCALARS = ("a", "b", "l1", "l2")
#: a matrix counts as alpha e e^T + gamma P when it is that within this fraction of its largest
#: entry (matrices typed with a few digits pass; a genuinely different entry does not)
ZONAL_SYMMETRY_RTOL = 1e-9


def zonal_parts(M: np.ndarray, axis: np.ndarray, key: str) -> tuple[float, float]:
    """(alpha, gamma) with M = alpha e e^T + gamma (I - e e^T), e = ``axis``; a ConfigError
    naming ``key`` and the entry furthest from that form otherwise."""
    d = len(axis)
    alpha = float(axis @ M @ axis)
    gamma = float(np.trace(M) - alpha) / (d - 1)
    residual = M - gamma * np.eye(d) - (alpha - gamma) * np.outer(axis, axis)
    scale = max(float(np.abs(M).max()), MIN_B_NORM)
    i, j = np.unravel_index(int(np.argmax(np.abs(residual))), residual.shape)
    if abs(residual[i, j]) > ZONAL_SYMMETRY_RTOL * scale:
        raise ConfigError(
            key,
            f"is not symmetric about domain.axis: the zonal domain needs the form alpha e e^T + "
            f"gamma (I - e e^T) (e the axis), and entry [{i}][{j}] = {M[i, j]:.6g} differs from "
            f"it by {residual[i, j]:.3g}; give matrices of that form, or the scalars "
            "a, b, l1, l2",
        )
    return alpha, gamma


def zonal_model_config(t: dict[str, Any], d: int, axis: tuple[float, ...]) -> ModelConfig:
    """The ``[model]`` table of the zonal domain on S^{d-1} with axis e: either the scalars
    a, b, l1, l2 (B = a e e^T + b P, V = l1 e e^T + l2 P; default 1 each) or d x d matrices
    Q, K, V each of the form alpha e e^T + gamma P (checked: :func:`zonal_parts`). The result
    holds the 2 x 2 reductions in the frame (e, omega) (Q = I, K = diag(a, b) from the
    scalars), validated by the rules of :func:`model_config`; ``usa_av`` is refused."""
    check_keys(t, ["name", "beta", "Q", "K", "V", *ZONAL_SCALARS], "model")
    name = as_str(t.get("name", "sa"), "model.name")
    if MODELS.get(name, "model.name").sliced:
        raise ConfigError(
            "model.name",
            f"{name!r} is not available on the zonal domain (its gauges break the symmetry "
            "about the axis); choose 'sa', 'sa_zero_temperature' or 'usa'",
        )
    scalars = [k for k in ZONAL_SCALARS if k in t]
    given = [m for m in ("Q", "K", "V") if m in t]
    if scalars and given:
        raise ConfigError(
            f"model.{given[0]}",
            "give either the scalars a, b, l1, l2 or the matrices Q, K, V on the zonal domain, "
            "not both",
        )
    if given:
        e = np.array(axis)
        reduced = {}
        for m in ("Q", "K", "V"):
            M = np.array(as_matrix(t[m], f"model.{m}", d)) if m in t else np.eye(d)
            alpha, gamma = zonal_parts(M, e, f"model.{m}")
            reduced[m] = [[alpha, 0.0], [0.0, gamma]]
    else:
        v = {}
        for k in ZONAL_SCALARS:
            v[k] = as_float(t.get(k, 1.0), f"model.{k}")
            if abs(v[k]) > MAX_MATRIX_ENTRY:
                raise ConfigError(
                    f"model.{k}",
                    f"= {v[k]:g} is too large: must be at most {MAX_MATRIX_ENTRY:g} in absolute "
                    "value (put the scale in model.beta, or in time.t_end for l1, l2)",
                )
        reduced = {
            "Q": [[1.0, 0.0], [0.0, 1.0]],
            "K": [[v["a"], 0.0], [0.0, v["b"]]],
            "V": [[v["l1"], 0.0], [0.0, v["l2"]]],
        }
    table = {k: t[k] for k in ("name", "beta") if k in t}
    return replace(model_config({**table, **reduced}, 2), meridian=True)


#: domain name -> the rules of its ``[model]`` table, where they differ from
#: :func:`model_config` (a reduced model: the zonal domain)
DOMAIN_MODELS = {"zonal": zonal_model_config}


def model_config_on(t: dict[str, Any], domain: Any) -> ModelConfig:
    """The ``[model]`` table on the domain of ``domain`` (a
    :class:`~spheredens.config.DomainConfig`): its own rules (:data:`DOMAIN_MODELS`) or
    :func:`model_config` with its dimension."""
    rules = DOMAIN_MODELS.get(domain.name)
    if rules is None:
        return model_config(t, domain.d)
    return rules(t, domain.sphere_dimension, domain.axis)
