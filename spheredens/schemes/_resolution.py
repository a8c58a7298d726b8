"""The resolution of a scheme: one frozen value per scheme (:class:`Resolution`).

A scheme has one option that sets how fine its grid is (``n`` on the circle, ``lmax`` for
spherical harmonics, ``nlat`` for the sphere's meshes). Its :class:`Resolution` says which key
that is, its default and bounds, and the rule by which the grid resolves the attention kernel
exp(beta <B^T x, y>): the resolution must be at least c sqrt(s beta sigma_max(B)).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

from .._validate import as_int
from ..exceptions import ConfigError
from ..kernel import AttentionKernel
from ..models import Model


@dataclass(frozen=True)
class Resolution:
    """The option that sets a scheme's resolution, its bounds, and when it resolves the kernel.

    Attributes
    ----------
    key : str
        The ``[discretization]`` key (``"n"``, ``"lmax"``, ``"nlat"``).
    default, minimum, maximum : int
        Its default value and the bounds a configuration may give.
    rule : (float, float)
        (c, s): the grid resolves the kernel when the resolution is at least
        c sqrt(s beta sigma_max(B)) (:meth:`needed`).
    message : str
        Why a resolution does not resolve the kernel, with the fields ``value``, ``need``,
        ``width`` = (beta sigma_max)^(-1/2) and ``beta_sigma`` = beta sigma_max.
    what : str
        Said after a bound in a refusal (what the number counts); ``{scheme}`` is the scheme's
        name.
    cost : str
        What the largest resolution costs, said when a larger one is refused (measured).
    even : bool
        Whether the resolution must be even (then :meth:`needed` rounds up to an even number).
    """

    key: str
    default: int
    minimum: int
    maximum: int
    rule: tuple[float, float]
    message: str
    what: str = ""
    cost: str = ""
    even: bool = False

    def needed(self, kernel: AttentionKernel) -> int:
        """The smallest resolution that resolves ``kernel``: ceil(c sqrt(s beta sigma_max(B)))
        with (c, s) = :attr:`rule`, rounded up to an even number when :attr:`even`."""
        factor, scale = self.rule
        need = math.ceil(factor * math.sqrt(scale * kernel.beta * kernel.sigma_max))
        return need + need % 2 if self.even else need

    def text(self, kernel: AttentionKernel, value: int) -> str:
        """:attr:`message` filled in for the resolution ``value`` and ``kernel``."""
        return self.message.format(
            value=value,
            need=self.needed(kernel),
            width=kernel.width,
            beta_sigma=kernel.beta * kernel.sigma_max,
        )

    def problem(self, model: Model, options: Mapping[str, Any]) -> str:
        """Why the grid of ``options`` does not resolve the attention kernel of ``model``, or ""
        when it does.

        The kernel exp(beta <B^T x, y>) has width
        (beta |B^T x|)^(-1/2) >= (beta sigma_max(B))^(-1/2)
        (:attr:`~spheredens.kernel.AttentionKernel.width`); the zero-temperature model has no
        kernel, and beta = 0 a constant one.
        """
        if not model.kind.interacting or model.beta == 0.0:
            return ""
        value = int(options.get(self.key) or 0)
        return self.text(model.kernel, value) if value < self.needed(model.kernel) else ""

    def of(self, options: Mapping[str, Any]) -> int:
        """The resolution that ``options`` give (the default when they give none)."""
        return int(options.get(self.key) or self.default)

    def validate(self, table: Mapping[str, Any], prefix: str, scheme: str = "") -> int:
        """``table[key]`` (or the default) as an integer within the bounds; a refusal above
        :attr:`maximum` also says what the bound costs."""
        key, what = f"{prefix}.{self.key}", self.what.format(scheme=scheme)
        value = table.get(self.key, self.default)
        if isinstance(value, int) and not isinstance(value, bool) and value > self.maximum:
            cost = f"; {self.cost}" if self.cost else ""
            raise ConfigError(key, f"= {value} is too large: must be <= {self.maximum}{what}{cost}")
        value = as_int(value, key, minimum=self.minimum, maximum=self.maximum, what=what)
        if self.even and value % 2:
            raise ConfigError(key, f"= {value} must be even{what}")
        return value
