"""Problem = model + domain + initial density + auxiliary slices: the physics, no grid."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from ._types import Array
from .config import RunConfig
from .initial import sample_normalized
from .models import Model
from .zonal import ZonalInitial


@dataclass(frozen=True)
class Problem:
    """The continuous problem of a run.

    Attributes
    ----------
    model : Model
    domain : str
        ``"circle"``, ``"sphere"`` or ``"zonal"``.
    initial : callable
        rho_0 as a function of points x (n, d) -> (n,); on the zonal domain its
        :class:`~spheredens.zonal.ZonalInitial` (the law of the polar angle).
    xi : ndarray (n_xi,)
        Auxiliary-variable slice labels (one slice, label 0, without auxiliary variables).
    xi_weight : ndarray (n_xi,)
        Mass of each slice (sums to 1).
    domain_parameters : mapping
        The domain's own parameters (the zonal domain: ``d`` and ``axis``); empty elsewhere.
    """

    model: Model
    domain: str
    initial: Any
    xi: Array
    xi_weight: Array
    domain_parameters: Mapping[str, Any] = field(default_factory=dict)

    @property
    def d(self) -> int:
        return self.model.d

    @property
    def n_xi(self) -> int:
        return len(self.xi)

    @property
    def has_auxiliary(self) -> bool:
        """Whether the model carries auxiliary variables (an xi axis in the output)."""
        return self.model.kind.sliced

    def slice_initials(self) -> list[Any]:
        """The initial density of each slice as a function of points (unnormalized for
        perturbed slices: schemes normalize each slice to unit discrete mass)."""
        aux = self.model.auxiliary
        if aux is None or aux.slice_perturbation == 0.0:
            return [self.initial] * self.n_xi
        out = []
        for k in range(self.n_xi):
            factor = aux.slice_factor(k)
            out.append(lambda x, f=factor: self.initial(x) * f(x))
        return out

    def initial_values(self, sample: Any, weight: Any) -> Any:
        """Slice initial densities sampled by ``sample(f) -> values``, each normalized to
        sum(values * weight) = 1 (:func:`~spheredens.initial.sample_normalized`: checked
        finite, a ConfigError otherwise), stacked: shape (n_xi, ...)."""
        out, cache = [], {}
        for f in self.slice_initials():
            if id(f) not in cache:  # checked finite, mass 1; very narrow vMF components kept
                cache[id(f)] = sample_normalized(f, sample, weight)
            out.append(cache[id(f)])
        return np.stack(out)

    @classmethod
    def from_config(cls, cfg: RunConfig) -> "Problem":
        """The problem of ``cfg``; on a meridian domain (zonal) the initial density is the
        :class:`~spheredens.initial.ZonalInitial` of rho_0 (its polar law)."""
        model = cfg.model.build()
        if cfg.domain.domain.meridian:
            initial = ZonalInitial(
                cfg.initial.density, cfg.domain.sphere_dimension, cfg.domain.axis
            )
            return cls(
                model, cfg.domain.name, initial, np.zeros(1), np.ones(1), cfg.domain.parameters()
            )
        if model.auxiliary is not None:
            return cls(
                model,
                cfg.domain.name,
                cfg.initial.density,
                model.auxiliary.xi,
                model.auxiliary.weight,
            )
        return cls(
            model,
            cfg.domain.name,
            cfg.initial.density,
            np.zeros(1),
            np.ones(1),
            cfg.domain.parameters(),
        )
