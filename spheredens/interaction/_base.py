"""The evaluator contract, the layout a scheme asks for, and the registry of evaluator classes.

A scheme describes where it holds the density and where it needs the velocity (a
:class:`Layout`); :func:`select_evaluator` picks the registered class for that layout and
model, both when a configuration is validated (an explicit ``discretization.interaction``
is checked, with a message saying why it does not apply) and when ``"auto"`` is resolved
(the first class, by ``priority``, that applies); :func:`make_evaluator` builds it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from .._registry import Registry
from .._types import Array
from ..exceptions import ConfigError
from ..geometry import tangent_project
from ..models import Model

#: what a scheme's state is, for an evaluator: density values at source points (with their
#: weights), log cell averages with centroid offsets (:class:`PrunedDirectQuadrature`), or
#: spherical-harmonic coefficients on a Gauss grid
INPUTS = ("values", "log_moments", "coefficients")


@dataclass(frozen=True, eq=False)
class Layout:
    """Where a scheme holds the density and where it needs the velocity.

    Attributes
    ----------
    domain : str
        ``"circle"`` or ``"sphere"``.
    inputs : str
        ``"values"`` (the state holds rho at ``sources.points``, quadrature weights
        ``sources.weight``) or ``"coefficients"`` (spherical-harmonic coefficients on the
        :class:`~spheredens.grids.GaussGrid` ``sources``).
    sources : grid
        Where the density lives.
    targets : grid or ndarray (n, d)
        Where the velocity is needed (a grid's ``points``, or points).
    frame : ndarray (k, *targets, d), optional
        Unit vectors onto which the velocity is projected (tangents, face normals, e_theta and
        e_phi); without it the velocity is returned as vectors of R^d.
    scheme : str
        The scheme's name, for messages.
    """

    domain: str
    inputs: str
    sources: Any
    targets: Any
    frame: Array | None = None
    scheme: str = ""

    @property
    def target_points(self) -> Array:
        return self.targets if isinstance(self.targets, np.ndarray) else self.targets.points


class Evaluator:
    """Base class of the interaction evaluators: X[rho] where a :class:`Layout` asks for it.

    Subclasses are registered with :func:`register_evaluator` (``name``, the
    ``discretization.interaction`` value; ``domains``; ``inputs``, a tuple from :data:`INPUTS`;
    ``priority``, lower is tried first by "auto"), declare ``description`` (for ``spheredens
    info``), implement :meth:`build` and :meth:`vectors`, and override :meth:`structure` (with
    ``requirement``) when they need a structure of the model. ``selectable = False`` marks the
    evaluators chosen by the model itself (no interaction, or slices), which :meth:`refusal`
    explains when a configuration names another one.
    """

    name: ClassVar[str]
    domains: ClassVar[tuple[str, ...] | None]  # None: every domain
    inputs: ClassVar[tuple[str, ...]]
    priority: ClassVar[int] = 50
    selectable: ClassVar[bool] = True
    description: ClassVar[str] = ""

    guarded_fraction: float = 0.0
    frame: Array | None = None

    @classmethod
    def serves(cls, domain: str) -> bool:
        """Whether the evaluator works on ``domain`` (``domains = None``: on every domain)."""
        return cls.domains is None or domain in cls.domains

    #: what :meth:`applies` says when :meth:`structure` fails (``{B}``: the matrix B = Q^T K)
    requirement: ClassVar[str] = ""
    #: the model's own evaluators: why another choice is refused (``{choice}``, ``{model}``)
    refusal_text: ClassVar[str] = "= {choice!r}: {model} has its own evaluator; remove the key"

    @staticmethod
    def structure(model: Model) -> bool:
        """Whether ``model`` has what the evaluator needs (a zonal kernel, slices, ...)."""
        return True

    @classmethod
    def applies(cls, model: Model) -> str:
        """Empty when the evaluator applies to ``model``; otherwise what it needs."""
        return "" if cls.structure(model) else cls.requirement.format(B=model.B.tolist())

    @classmethod
    def refusal(cls, model: Model, choice: str) -> str:
        """Why ``discretization.interaction = choice`` is refused when this evaluator is the
        model's own (``selectable = False``)."""
        return cls.refusal_text.format(choice=choice, model=model.name)

    @classmethod
    def build(cls, model: Model, layout: Layout) -> "Evaluator":
        raise NotImplementedError

    def attributes(self) -> dict[str, Any]:
        """What the output file records of this evaluator beyond its name."""
        return {}

    def vectors(self, state: Any) -> Array:
        """X[rho] as vectors of R^d at the targets, shape (n_xi, *targets, d)."""
        raise NotImplementedError

    def projected_averages(self, rho: Array) -> Array:
        """P_x A(x) for each slice, A = ``self.attention_average(rho_k)`` (N/Z or N) at the
        points ``self.targets``: the ``vectors`` of the evaluators that form A row by row,
        shape (n_xi, n_targets, d) for densities ``rho`` (n_xi, n_sources)."""
        return np.stack(
            [tangent_project(self.targets, self.attention_average(r)) for r in np.atleast_2d(rho)]
        )

    def velocity(self, state: Any) -> Array:
        """X[rho] at the targets: shape (n_xi, *targets, d), or its components along the
        layout's frame, shape (n_xi, k, *targets)."""
        vel = self.vectors(state)
        if self.frame is None:
            return vel
        return np.stack(
            [np.stack([np.einsum("...d,...d->...", v, e) for e in self.frame]) for v in vel]
        )


#: ``discretization.interaction`` names and their descriptions (``spheredens info``)
INTERACTIONS = Registry("interaction evaluator")
INTERACTIONS.register("auto")(
    "circle: fft where it applies, else direct; sphere: funk_hecke, "
    "else lowrank_meridian (sh_spectral) or lowrank_points (fv), else direct"
)
#: every registered evaluator class, in registration order
EVALUATOR_CLASSES: list[type[Evaluator]] = []


def register_evaluator(
    name: str,
    *,
    domains: tuple[str, ...] | None,
    inputs: tuple[str, ...],
    priority: int = 50,
    selectable: bool = True,
):
    """Class decorator: register an evaluator class under ``name`` (a valid
    ``discretization.interaction`` value where it is ``selectable``) for ``domains`` (None:
    every domain) and ``inputs``; "auto" tries lower ``priority`` first."""

    def decorator(cls: type[Evaluator]) -> type[Evaluator]:
        cls.name, cls.domains, cls.inputs = name, domains, inputs
        cls.priority, cls.selectable = priority, selectable
        EVALUATOR_CLASSES.append(cls)
        if selectable and name not in INTERACTIONS:
            INTERACTIONS.register(name)(cls.description)
        return cls

    return decorator


def candidates(domain: str, inputs: str) -> list[type[Evaluator]]:
    """The evaluator classes serving ``domain`` with ``inputs``, in "auto" order."""
    found = [c for c in EVALUATOR_CLASSES if c.serves(domain) and inputs in c.inputs]
    return sorted(found, key=lambda c: c.priority)


def choices(domain: str, inputs: str | None = None) -> tuple[str, ...]:
    """The ``discretization.interaction`` values valid on ``domain`` (for ``inputs``)."""
    names = {
        c.name
        for c in EVALUATOR_CLASSES
        if c.selectable and c.serves(domain) and (inputs is None or inputs in c.inputs)
    }
    return ("auto", *sorted(names))


def select_evaluator(
    model: Model,
    domain: str,
    inputs: str,
    choice: Any = "auto",
    *,
    scheme: str = "",
    key: str = "discretization.interaction",
) -> type[Evaluator]:
    """The evaluator class for ``model`` on a layout (``domain``, ``inputs``), checking
    ``choice``: a ConfigError naming ``key`` says why a named evaluator cannot serve."""
    if not isinstance(choice, str) or choice not in INTERACTIONS:
        known = ("auto", *sorted(n for n in INTERACTIONS if n != "auto"))
        raise ConfigError(
            key,
            f"{choice!r} is not a known interaction evaluator; choose one of "
            f"{', '.join(map(repr, known))}",
        )
    on_domain = choices(domain)
    if choice not in on_domain:
        raise ConfigError(
            key,
            f"{choice!r} is not available on the {domain}; choose one of "
            f"{', '.join(map(repr, on_domain))}",
        )
    allowed = choices(domain, inputs)
    if choice not in allowed:
        raise ConfigError(
            key,
            f"{choice!r} is not available with scheme {scheme!r}; choose one "
            f"of {', '.join(map(repr, allowed))}",
        )
    pool = candidates(domain, inputs)
    own = [c for c in pool if not c.selectable and not c.applies(model)]
    if own:
        if choice != "auto":
            raise ConfigError(key, own[0].refusal(model, choice))
        return own[0]
    # a model served only by its own evaluator elsewhere (usa_av's auxiliary sums on values or
    # coefficients): no general evaluator of this layout knows its slices
    owners = [
        c
        for c in EVALUATOR_CLASSES
        if c.serves(domain) and not c.selectable and not c.applies(model)
    ]
    if owners:
        served = sorted({i for c in owners for i in c.inputs})
        raise ConfigError(
            "discretization.scheme",
            f"scheme {scheme!r} cannot run model {model.name!r}: its "
            f"interaction ({owners[0].name!r}) needs the density as {' or '.join(served)}, "
            f"and this scheme gives it as {inputs}; choose another scheme (spheredens info "
            "lists them)",
        )
    usable = [c for c in pool if c.selectable and not c.applies(model)]
    if choice == "auto":
        return usable[0]
    cls = next(c for c in pool if c.name == choice)
    reason = cls.applies(model)
    if reason:
        other = next(c.name for c in usable if c.name != choice)
        raise ConfigError(key, f"{choice!r} {reason}; use {other!r} or 'auto'")
    return cls


def make_evaluator(model: Model, layout: Layout, choice: str = "auto") -> Evaluator:
    """Build the evaluator :func:`select_evaluator` picks for ``layout``."""
    cls = select_evaluator(model, layout.domain, layout.inputs, choice, scheme=layout.scheme)
    evaluator = cls.build(model, layout)
    evaluator.frame = layout.frame
    return evaluator
