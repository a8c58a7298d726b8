"""The evaluator contract, the layout a scheme asks for, and the one registry of evaluators.

A scheme describes where it holds the density and where it needs the velocity (a
:class:`Layout`); :func:`select_evaluator` picks the registered class for that layout and
model, both when a configuration is validated (an explicit ``discretization.interaction``
is checked, with a message saying why it does not apply: :meth:`Evaluator.unmet`) and when
``"auto"`` is resolved (the first class, by ``priority``, whose needs the model meets);
:func:`make_evaluator` builds it. Every class is in :data:`EVALUATORS`; the
``discretization.interaction`` values and their descriptions (:data:`INTERACTIONS`) are read
from it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Iterator, Mapping

import numpy as np

from .._types import Array
from ..exceptions import ConfigError
from ..geometry import tangent_project
from ..models import Model

#: what a scheme's state is, for an evaluator: density values at source points (with their
#: weights), log cell averages with centroid offsets (:class:`PrunedDirectQuadrature`),
#: spherical-harmonic coefficients on a Gauss grid, or the law of the polar angle of a zonal
#: density (:class:`~spheredens.interaction.ZonalSums`), or particles with log masses and shapes
#: (:class:`~spheredens.interaction._particle_flow.LogParticleSums`)
INPUTS = ("values", "log_moments", "coefficients", "polar_law", "log_particles")


@dataclass(frozen=True, eq=False)
class Layout:
    """Where a scheme holds the density and where it needs the velocity.

    Attributes
    ----------
    domain : str
        ``"circle"``, ``"sphere"`` or ``"zonal"``.
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

    A subclass declares ``name`` (the ``discretization.interaction`` value), ``domains`` (None:
    every domain), ``inputs`` (a tuple from :data:`INPUTS`), ``priority`` (lower is tried first
    by "auto") and ``description`` (for ``spheredens info``); it implements :meth:`build` and
    :meth:`vectors`, and overrides :meth:`structure` (with ``requirement``) when it needs a
    structure of the model; it is registered with :func:`register_evaluator`.
    ``selectable = False`` marks the evaluators chosen by the model itself (no interaction,
    or slices), which :meth:`refusal` explains when a configuration names another one.
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
    def serves(cls, domain: str, inputs: str | None = None) -> bool:
        """Whether the evaluator works on ``domain`` (``domains = None``: on every domain), and
        takes ``inputs`` when given."""
        return (cls.domains is None or domain in cls.domains) and (
            inputs is None or inputs in cls.inputs
        )

    #: what :meth:`unmet` says when :meth:`structure` fails (``{B}``: the matrix B = Q^T K)
    requirement: ClassVar[str] = ""
    #: the model's own evaluators: why another choice is refused (``{choice}``, ``{model}``)
    refusal_text: ClassVar[str] = "= {choice!r}: {model} has its own evaluator; remove the key"

    @staticmethod
    def structure(model: Model) -> bool:
        """Whether ``model`` has what the evaluator needs (a zonal kernel, slices, ...)."""
        return True

    @classmethod
    def unmet(cls, model: Model) -> str | None:
        """What the evaluator needs that ``model`` does not have (the :attr:`requirement`), or
        None when it serves ``model``."""
        return None if cls.structure(model) else cls.requirement.format(B=model.B.tolist())

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


class PointsEvaluator(Evaluator):
    """An evaluator of a density given by its values rho_j at source points y_j with weights
    w_j, the velocity wanted at target points x_f (the layouts of ``"values"``).

    The constructor keeps the model, the sources (n_s, d), the weights (n_s,) and the targets
    (n_t, d), then hands the evaluator's own keyword options to :meth:`setup`.
    """

    def __init__(
        self, model: Model, sources: Array, weight: Array, targets: Array, **options: Any
    ) -> None:
        self.model = model
        self.sources = np.ascontiguousarray(sources, dtype=float)
        self.weight = np.asarray(weight, dtype=float)
        self.targets = np.ascontiguousarray(targets, dtype=float)
        self._v_norm = model.V_norm
        self.setup(**options)

    def setup(self, **options: Any) -> None:
        """What the evaluator prepares from its points and its ``options``."""

    @classmethod
    def build(cls, model: Model, layout: Layout) -> "PointsEvaluator":
        """The evaluator from the layout's source points (with their weights) to its targets."""
        return cls(model, layout.sources.points, layout.sources.weight, layout.target_points)


#: what ``discretization.interaction = "auto"`` picks (``spheredens info``)
AUTO_DESCRIPTION = (
    "circle: fft where it applies, else direct; sphere: funk_hecke, "
    "else lowrank_meridian (sh_spectral) or lowrank_points (fv), else direct"
)


class EvaluatorRegistry:
    """The evaluator classes, in registration order: the one registry of evaluators.

    A name may be registered by several classes that serve different layouts (``direct`` on
    density values and on spherical-harmonic coefficients); the ``discretization.interaction``
    values are ``"auto"`` and the names of the selectable classes.
    """

    def __init__(self) -> None:
        self.classes: list[type[Evaluator]] = []

    def register(self, cls: type[Evaluator]) -> type[Evaluator]:
        """Add ``cls``, which declares its ``name``, ``domains`` and ``inputs``."""
        for attribute in ("name", "domains", "inputs"):
            if not hasattr(cls, attribute):
                raise TypeError(f"evaluator {cls.__name__} does not declare {attribute!r}")
        for other in self.classes:
            if other.name == cls.name and any(
                (
                    other.domains is None
                    or cls.domains is None
                    or set(other.domains) & set(cls.domains)
                )
                and i in other.inputs
                for i in cls.inputs
            ):
                raise RuntimeError(f"interaction evaluator {cls.name!r} registered twice")
        self.classes.append(cls)
        return cls

    def __iter__(self) -> Iterator[type[Evaluator]]:
        return iter(self.classes)

    def __contains__(self, name: object) -> bool:
        """Whether ``name`` is a ``discretization.interaction`` value."""
        return name == "auto" or any(c.selectable and c.name == name for c in self.classes)

    def names(self) -> tuple[str, ...]:
        """The ``discretization.interaction`` values: "auto", then the others sorted."""
        return ("auto", *sorted({c.name for c in self.classes if c.selectable}))

    def description(self, name: str) -> str:
        """What ``discretization.interaction = name`` is (the first class registered under it)."""
        if name == "auto":
            return AUTO_DESCRIPTION
        return next(c.description for c in self.classes if c.selectable and c.name == name)

    def candidates(self, domain: str, inputs: str) -> list[type[Evaluator]]:
        """The classes serving ``domain`` with ``inputs``, in "auto" order (by priority)."""
        return sorted(
            (c for c in self.classes if c.serves(domain, inputs)), key=lambda c: c.priority
        )

    def choices(self, domain: str, inputs: str | None = None) -> tuple[str, ...]:
        """The ``discretization.interaction`` values valid on ``domain`` (for ``inputs``)."""
        names = {c.name for c in self.classes if c.selectable and c.serves(domain, inputs)}
        return ("auto", *sorted(names))


class InteractionNames(Mapping[str, str]):
    """The ``discretization.interaction`` values and their descriptions, read from a
    registry (a view: what is registered later shows)."""

    def __init__(self, registry: EvaluatorRegistry) -> None:
        self.registry = registry

    def __getitem__(self, name: str) -> str:
        if name not in self.registry:
            raise KeyError(name)
        return self.registry.description(name)

    def __iter__(self) -> Iterator[str]:
        return iter(self.registry.names())

    def __len__(self) -> int:
        return len(self.registry.names())


#: every evaluator class, in registration order
EVALUATORS = EvaluatorRegistry()
#: the ``discretization.interaction`` values and their descriptions (``spheredens info``)
INTERACTIONS = InteractionNames(EVALUATORS)


def register_evaluator(cls: type[Evaluator]) -> type[Evaluator]:
    """Class decorator: register an evaluator class, which declares its ``name`` (a valid
    ``discretization.interaction`` value where it is ``selectable``), ``domains`` (None: every
    domain), ``inputs`` and ``priority`` ("auto" tries lower first)."""
    return EVALUATORS.register(cls)


def candidates(domain: str, inputs: str) -> list[type[Evaluator]]:
    """The evaluator classes serving ``domain`` with ``inputs``, in "auto" order."""
    return EVALUATORS.candidates(domain, inputs)


def choices(domain: str, inputs: str | None = None) -> tuple[str, ...]:
    """The ``discretization.interaction`` values valid on ``domain`` (for ``inputs``)."""
    return EVALUATORS.choices(domain, inputs)


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
    choice_within(choice, EVALUATORS.names(), key, "is not a known interaction evaluator")
    choice_within(choice, choices(domain), key, f"is not available on the {domain}")
    choice_within(choice, choices(domain, inputs), key, f"is not available with scheme {scheme!r}")
    pool = candidates(domain, inputs)
    own = [c for c in pool if not c.selectable and c.unmet(model) is None]
    if own:
        if choice != "auto":
            raise ConfigError(key, own[0].refusal(model, choice))
        return own[0]
    # a model served only by its own evaluator elsewhere (usa_av's auxiliary sums on values or
    # coefficients): no general evaluator of this layout knows its slices
    owners = [
        c for c in EVALUATORS if c.serves(domain) and not c.selectable and c.unmet(model) is None
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
    usable = [c for c in pool if c.selectable and c.unmet(model) is None]
    if choice == "auto":
        if not usable:
            general = next(c for c in pool if c.selectable)
            raise ConfigError(
                "discretization.scheme",
                f"scheme {scheme!r} cannot run model {model.name!r}: its interaction "
                f"{general.name!r} {general.requirement}; choose another scheme (spheredens "
                "info lists them)",
            )
        return usable[0]
    cls = next(c for c in pool if c.name == choice)
    reason = cls.unmet(model)
    if reason is not None:
        other = next(c.name for c in usable if c.name != choice)
        raise ConfigError(key, f"{choice!r} {reason}; use {other!r} or 'auto'")
    return cls


def choice_within(choice: Any, allowed: tuple[str, ...], key: str, refusal: str) -> None:
    """Refuse ``choice`` unless it is one of ``allowed``: a ConfigError naming ``key``,
    ``refusal`` (why), and the values allowed."""
    if not isinstance(choice, str) or choice not in allowed:
        raise ConfigError(
            key, f"{choice!r} {refusal}; choose one of {', '.join(map(repr, allowed))}"
        )


def make_evaluator(model: Model, layout: Layout, choice: str = "auto") -> Evaluator:
    """Build the evaluator :func:`select_evaluator` picks for ``layout``."""
    cls = select_evaluator(model, layout.domain, layout.inputs, choice, scheme=layout.scheme)
    evaluator = cls.build(model, layout)
    evaluator.frame = layout.frame
    return evaluator
