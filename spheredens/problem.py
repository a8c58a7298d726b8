"""Problem = model + domain + initial density + auxiliary slices: the physics, no grid."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .config import RunConfig
from .models import Model

Array = NDArray[np.float64]


@dataclass(frozen=True)
class Problem:
    """The continuous problem of a run.

    Attributes
    ----------
    model : Model
    domain : str
        ``"circle"`` or ``"sphere"``.
    initial : callable
        rho_0 as a function of points x (n, d) -> (n,).
    xi : ndarray (n_xi,)
        Auxiliary-variable slice labels (one slice, label 0, without auxiliary variables).
    xi_weight : ndarray (n_xi,)
        Mass of each slice (sums to 1).
    """

    model: Model
    domain: str
    initial: Any
    xi: Array
    xi_weight: Array

    @property
    def d(self) -> int:
        return self.model.d

    @property
    def n_xi(self) -> int:
        return len(self.xi)

    @property
    def has_auxiliary(self) -> bool:
        """Whether the model carries auxiliary variables (an xi axis in the output)."""
        return self.model.name == "usa_av"

    @classmethod
    def from_config(cls, cfg: RunConfig) -> "Problem":
        return cls(cfg.model.build(), cfg.domain.name, cfg.initial.density,
                   np.zeros(1), np.ones(1))
