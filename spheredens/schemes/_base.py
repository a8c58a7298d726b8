"""The scheme contract: one base class that every scheme extends.

A scheme turns a :class:`~spheredens.problem.Problem` into a right-hand side on a grid. What
the time loop (:mod:`spheredens.simulate`) uses, and nothing else:

* ``initial_state()``: rho_0 of each slice, shape (n_xi, *space) (coefficients for spectral
  schemes);
* ``rhs(state, t) -> Tendency(rate, max_speed, max_outflow_rate)``: d state/dt and the speeds
  that bound the step, with no side effect; ``rate(state, t)`` is the rate alone (the
  integrator's later stages);
* ``stable_dt(cfl, tendency)``: the CFL step;
* ``post_step(state, dt)`` (a filter; identity by default) and ``step_ok(old, new)`` (whether
  the step keeps what the scheme promises; a refused step is retried with dt / 2);
* ``speed_floor``, ``speed_bound``: the smallest speed the CFL rule uses and the largest speed
  the model allows (a larger one means a corrupted state);
* ``masses(state)``, ``extremes(state)``, ``promises_positivity(cfl)``, ``growth_slack`` and
  the tendency's ``max_compression``: what the loop checks after every step (the invariants,
  :class:`~spheredens.simulate.Invariants`).

What the recorder uses: ``grid``, ``density(state)``, ``attributes()``, ``interaction`` and the
per-snapshot ``diagnostics`` the scheme declares. What the configuration uses, as class
methods: ``validate_options`` (the ``[discretization]`` table), ``memory_parts``, and the
scheme's :class:`~spheredens.schemes.Resolution` (``resolution.problem``: does the grid
resolve the kernel). A new scheme subclasses :class:`Scheme`,
declares its class attributes and registers itself with
:func:`~spheredens.schemes.register_scheme`.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar, Mapping, NamedTuple

import numpy as np

from .._types import Array
from .._validate import as_bool, as_str
from ..exceptions import ConfigError
from ..geometry import DOMAINS, get_domain
from ..integrators import INTEGRATORS
from ..interaction import Layout, make_evaluator, select_evaluator
from ..models import Model
from ._memory import (
    F8,
    energy_sums,
    evaluator_memory,
    particle_memory,
    slice_diagnostics,
    w2_diagnostics,
)
from ._resolution import Resolution

#: domain name -> registry of the schemes available on it (each Domain's ``schemes``)
SCHEMES = {name: get_domain(name).schemes for name in DOMAINS}


def register_scheme(cls: Any) -> Any:
    """Class decorator: register ``cls`` under ``cls.name`` for ``cls.domain``."""
    return get_domain(cls.domain).schemes.register(cls.name)(cls)


def scheme_class(name: Any, domain: str, key: str = "discretization.scheme") -> Any:
    """The scheme class called ``name`` on ``domain``; a ConfigError naming ``key`` otherwise."""
    return get_domain(domain).scheme_class(name, key)


class Tendency(NamedTuple):
    """What a right-hand side returns.

    Attributes
    ----------
    rate : ndarray
        d state / dt, the shape of the state.
    max_speed : float
        max |X[rho]| where the scheme evaluates it.
    max_outflow_rate : float
        Finite volumes: max over cells of (outflow through the faces) / (cell area), which
        bounds the step that keeps rho >= 0; 0 when it does not apply.
    max_compression : float
        max(0, max of -div X[rho]) where the scheme evaluates the velocity (for finite volumes
        the discrete divergence of each cell's face velocities): along a characteristic
        d rho / dt = -rho div X, so it bounds how fast max |rho| may grow; NaN when not computed
        (the loop then does not check the growth).
    """

    rate: Any
    max_speed: float
    max_outflow_rate: float = 0.0
    max_compression: float = math.nan


def validate_choice(
    table: Mapping[str, Any],
    key: str,
    prefix: str,
    allowed: Mapping[str, Any],
    default: str,
    what: str,
) -> str:
    """``table[key]`` (or ``default``), one of ``allowed``."""
    value = as_str(table.get(key, default), f"{prefix}.{key}")
    if value not in allowed:
        raise ConfigError(
            f"{prefix}.{key}",
            f"{value!r} is not a known {what}; choose one of {', '.join(map(repr, allowed))}",
        )
    return value


def speed_floor(model: Model) -> float:
    """Smallest speed used in the CFL rule: 0.1 ||V|| for interacting models, else 0.

    A density at (or near) an unstable steady state has a tiny velocity that would allow huge
    steps; the softmax velocity can grow to ||V|| within one, so steps are capped at
    10 cfl h / ||V||. The zero-temperature field is fixed, and its own maximum is exact.
    """
    return 0.1 * model.V_norm if model.kind.interacting else 0.0


def speed_bound(model: Model) -> float:
    """Largest possible speed: ||V|| for softmax attention (N/Z is a convex combination of the
    V y) and for the zero-temperature field; none (inf) for unnormalized attention."""
    return model.V_norm if model.kind.normalized else float("inf")


class Scheme:
    """Base class of the schemes (module docstring: the contract).

    Class attributes a scheme declares
    ----------------------------------
    name, domain : str
        Registry keys (``discretization.scheme`` and ``domain.name``).
    options : tuple of str
        The ``[discretization]`` keys it accepts, in the order the configuration writes them.
    resolution : Resolution
        The option that sets the resolution (``n``, ``lmax``, ``nlat``): its default, bounds,
        and the rule by which the grid resolves the kernel (:class:`Resolution`).
    default_integrator : str
    evaluator_inputs : str
        ``"values"``, ``"log_moments"`` (log rho and centroid offsets per cell) or
        ``"coefficients"``: what its state is for
        an interaction evaluator.
    positive : bool
        Whether it keeps rho >= 0 (with SSP integrators and ``time.cfl`` <= ``positivity_cfl``,
        default 0.5: :meth:`promises_positivity`).
    imaginary_spectrum : float
        Spectral schemes: their eigenvalues (of the linearized transport) lie on the imaginary
        axis, up to |lambda dt| = ``imaginary_spectrum`` x cfl (pi: the highest mode k = n / 2
        moving at the speed that sets the step). An integrator is then stable only for
        cfl <= its :attr:`~spheredens.integrators.ButcherTableau.imaginary_axis_reach` /
        ``imaginary_spectrum``, and one whose stability region holds no part of that axis
        (forward Euler, ssprk2) for none (:meth:`stability_problem`, refused by the
        configuration). 0 (default): upwind finite volumes, whose spectrum is damped.
    growth_slack : float
        By how much max |rho| may exceed, over any stretch of the run, what the divergence
        of the velocity allows along the characteristics (the discrete maximum moving between
        grid points or cells); the loop's growth check (:class:`~spheredens.simulate.Invariants`).
    zero_temperature_order : float
        Observed order of convergence to the exact zero-temperature solution it documents
        (``math.inf``: spectral).
    diagnostics : tuple of str
        Extra per-snapshot diagnostics (:meth:`diagnostic`) the output file carries.
    carries_centroids : bool
        Whether the state holds each cell's centroid (:meth:`centroids`): the file then has
        ``rho_centroid`` (offsets) or ``rho_centroid_xyz`` (unit vectors), and every W2 puts
        each cell's mass at its centroid.
    centroid_fields : int
        Numbers per cell of :meth:`centroids`: 1 (an offset) or d (a unit vector).
    carries_log_density : bool
        Whether the state holds log rho (:meth:`log_density`): the file then has ``log_rho``,
        which keeps the values below the smallest float64 number that ``rho`` shows as 0.
    suited_to : str
        The regime a scheme is for when it is not for every one (e.g. ``"at low temperature"``),
        said where a message proposes it; empty for a general scheme.
    """

    name: ClassVar[str]
    domain: ClassVar[str]
    options: ClassVar[tuple[str, ...]]
    resolution: ClassVar[Resolution]
    default_integrator: ClassVar[str] = "ssprk3"
    evaluator_inputs: ClassVar[str] = "values"
    positive: ClassVar[bool] = False
    positivity_cfl: ClassVar[float] = 0.5
    imaginary_spectrum: ClassVar[float] = 0.0
    growth_slack: ClassVar[float] = 2.0
    zero_temperature_order: ClassVar[float] = 1.0
    diagnostics: ClassVar[tuple[str, ...]] = ()
    carries_centroids: ClassVar[bool] = False
    centroid_fields: ClassVar[int] = 1
    carries_log_density: ClassVar[bool] = False
    suited_to: ClassVar[str] = ""

    grid: Any
    interaction: Any
    #: the smallest speed the CFL rule uses, the largest the model allows (set from the model)
    speed_floor: float = 0.0
    speed_bound: float = math.inf

    # -- configuration ---------------------------------------------------------------------
    @classmethod
    def validate_options(
        cls, table: Mapping[str, Any], prefix: str, model: Model
    ) -> dict[str, Any]:
        """The ``[discretization]`` options (without ``scheme``), validated, defaults filled in,
        in the order of :attr:`options`."""
        values = {cls.resolution.key: cls.resolution.validate(table, prefix, cls.name)}
        values.update(cls.validate_own_options(table, prefix))
        interaction = as_str(table.get("interaction", "auto"), f"{prefix}.interaction")
        select_evaluator(
            model,
            cls.domain,
            cls.evaluator_inputs,
            interaction,
            scheme=cls.name,
            key=f"{prefix}.interaction",
        )
        values["interaction"] = interaction
        if "integrator" in cls.options:
            values["integrator"] = as_str(
                table.get("integrator", cls.default_integrator), f"{prefix}.integrator"
            )
            INTEGRATORS.get(values["integrator"], f"{prefix}.integrator")
        if "allow_underresolved" in table:
            values["allow_underresolved"] = as_bool(
                table["allow_underresolved"], f"{prefix}.allow_underresolved"
            )
        return {key: values[key] for key in cls.options if key in values}

    @classmethod
    def grid_spacing(cls, options: Mapping[str, Any]) -> float | None:
        """The length h of the CFL rule dt = cfl h / max|X| for these options (radians); None
        when the scheme does not say."""
        return None

    @classmethod
    def largest_step(cls, options: Mapping[str, Any], model: Model, cfl: float) -> float:
        """The largest step the CFL rule can take, cfl h / ``speed_floor`` (inf when the model
        has no speed floor or the scheme gives no h). Also the largest first step of a scheme
        whose later steps follow an error control (``log_sl``)."""
        floor, h = speed_floor(model), cls.grid_spacing(options)
        return cfl * h / floor if floor > 0.0 and h is not None else math.inf

    @classmethod
    def stability_problem(cls, integrator: str, cfl: float) -> tuple[str, str] | None:
        """(key, message) when ``integrator`` cannot be stable for this scheme at ``time.cfl`` =
        ``cfl`` (its eigenvalues on the imaginary axis beyond the integrator's reach there:
        :attr:`imaginary_spectrum`), None when it can (always for a damped spectrum)."""
        if cls.imaginary_spectrum <= 0.0 or integrator not in INTEGRATORS:
            return None
        reach = INTEGRATORS.get(integrator).imaginary_axis_reach
        extent = cls.imaginary_spectrum * cfl
        if extent <= reach:
            return None
        safe = [
            (
                math.floor(
                    100.0 * INTEGRATORS.get(name).imaginary_axis_reach / cls.imaginary_spectrum
                )
                / 100.0,
                name,
            )
            for name in INTEGRATORS.names()
            if INTEGRATORS.get(name).imaginary_axis_reach > 0.0
        ]
        options = " or ".join(
            f"{name!r} (time.cfl <= {limit:g})" for limit, name in sorted(safe, reverse=True)
        )
        axis = (
            "its eigenvalues lie on the imaginary axis (|lambda dt| up to "
            f"{cls.imaginary_spectrum:.3g} cfl)"
        )
        if reach == 0.0:
            return (
                "discretization.integrator",
                f"{integrator!r} cannot be stable for scheme {cls.name!r} at any time.cfl: "
                f"{axis} and the stability region of {integrator!r} holds no part of that axis; "
                f"use {options}",
            )
        return (
            "time.cfl",
            f"= {cfl:g} is unstable with integrator {integrator!r} for scheme {cls.name!r}: "
            f"{axis}, here up to {extent:.3g}, beyond the {reach:.3g} that {integrator!r} "
            f"reaches on that axis; use {options}",
        )

    @classmethod
    def validate_own_options(cls, table: Mapping[str, Any], prefix: str) -> dict[str, Any]:
        """The scheme's own options (limiter, filter, ...)."""
        return {}

    @classmethod
    def memory_estimate(cls, options: Mapping[str, Any]) -> tuple[int, float]:
        """(number of points of the state, bytes of cached kernels) for these options: the
        least a scheme declares for :meth:`memory_parts` (the schemes of spheredens declare
        :meth:`memory_sizes` instead)."""
        raise NotImplementedError

    #: bytes per point and slice of one right-hand side's own work arrays (reconstructions,
    #: fluxes, the velocity and its products), measured (tests/test_bounds_and_signals.py)
    work_bytes_per_point: ClassVar[float] = 400.0
    #: bytes per point of the grid's geometry and of sampling rho_0 (quadrature points per cell)
    grid_bytes_per_point: ClassVar[float] = 400.0

    @classmethod
    def memory_sizes(cls, options: Mapping[str, Any]) -> tuple[int, int, float]:
        """(points of the state and of a snapshot, targets where the velocity is evaluated,
        bytes of one slice of the state) for these options."""
        raise NotImplementedError

    @classmethod
    def memory_parts(
        cls,
        options: Mapping[str, Any],
        model: Model,
        *,
        n_xi: int = 1,
        snapshots: int = 11,
        particles: int | None = None,
        particle_dimension: int | None = None,
    ) -> dict[str, float]:
        """Estimated peak memory of a run in bytes, by what holds it
        (:mod:`spheredens.schemes._memory`): the snapshots (kept, copied into the Dataset and
        rendered in memory when the file is written, with the checkpoint), the state and the
        integrator's stages, the work arrays of a right-hand side and the grid, the interaction
        evaluator, the per-snapshot diagnostics. ``n_xi`` slices (the state's leading axis).
        With ``particles`` (n), also ``"particles"``: what ``spheredens particles`` needs for n
        particles of this model (:func:`~spheredens.schemes._memory.particle_memory`), vectors
        of R^d for ``particle_dimension`` = d (the zonal domain's ``domain.d``).

        A scheme that declares only :meth:`memory_estimate` gets its points and kernels with
        200 work arrays per point and slice."""
        M = int(n_xi)
        extra = (
            {}
            if particles is None
            else {
                "particles": particle_memory(
                    model, particles, snapshots, M, dimension=particle_dimension
                )
            }
        )
        try:
            points, targets, state_bytes = cls.memory_sizes(options)
        except NotImplementedError:
            points, kernel = cls.memory_estimate(options)
            return {
                "snapshots": 3 * F8 * points * M * snapshots,
                "work arrays": 200 * F8 * points * M,
                "interaction": float(kernel),
                **extra,
            }
        choice = options.get("interaction", "auto")
        evaluator = select_evaluator(
            model, cls.domain, cls.evaluator_inputs, choice, scheme=cls.name
        ).name
        fields = (
            1 + cls.centroid_fields * int(cls.carries_centroids) + int(cls.carries_log_density)
        )  # rho, centroids, log rho
        kept = F8 * points * (M + (M > 1)) * fields * snapshots
        return {
            "snapshots": 3 * kept + 3 * M * state_bytes,
            "solver state": 10 * M * state_bytes,
            "work arrays": cls.work_bytes_per_point * points * M
            + cls.grid_bytes_per_point * points,
            "interaction": evaluator_memory(
                evaluator,
                model,
                points=points,
                targets=targets,
                n_xi=M,
                lmax=options.get("lmax"),
                inputs=cls.evaluator_inputs,
            ),
            "diagnostics": (
                slice_diagnostics(points, M)
                + energy_sums(model, points, cls.evaluator_inputs)
                + w2_diagnostics(model, points, centroids=cls.carries_centroids)
            ),
            **extra,
        }

    # -- construction ----------------------------------------------------------------------
    def __init__(
        self,
        problem: Any,
        grid: Any,
        *,
        interaction: str = "auto",
        integrator: str | None = None,
        allow_underresolved: bool = False,
    ) -> None:
        """The scheme for ``problem`` on ``grid`` (where the state lives), with its integrator
        and its interaction evaluator (for :meth:`layout`)."""
        self.problem = problem
        self.grid = grid
        model = problem.model
        self.integrator = self.make_integrator(integrator or self.default_integrator)
        self.interaction = make_evaluator(model, self.layout(), interaction)
        self.speed_floor = speed_floor(model)
        self.speed_bound = speed_bound(model)

    def make_integrator(self, name: str) -> Any:
        """The time integrator called ``name``: a registered Runge-Kutta tableau by default; a
        scheme with its own step (semi-Lagrangian) returns an object with the same ``step``."""
        return INTEGRATORS.get(name)

    def layout(self) -> Layout:
        """Where the state lives (``grid``) and where the velocity is needed."""
        raise NotImplementedError

    # -- stepping ---------------------------------------------------------------------------
    def initial_state(self) -> Any:
        """rho_0 of each slice on the grid, renormalized to unit discrete mass."""
        return self.problem.initial_values(self.sample, self.grid.weight)

    def sample(self, f: Any) -> Array:
        """Values of a density function f(x) on ``grid`` (cell averages or nodal values)."""
        raise NotImplementedError

    def rhs(self, state: Any, t: float) -> Tendency:
        raise NotImplementedError

    def rate(self, state: Any, t: float) -> Any:
        """d state / dt alone (the integrator's stages)."""
        return self.rhs(state, t).rate

    def stable_dt(self, cfl: float, tendency: Tendency) -> float:
        """dt = cfl h / max|X|."""
        return cfl * self.grid.h / tendency.max_speed

    def post_step(self, state: Any, dt: float) -> Any:
        return state

    def promises_positivity(self, cfl: float) -> bool:
        """Whether every step keeps rho >= 0 at ``time.cfl`` = ``cfl``: a ``positive`` scheme
        stepped by an SSP integrator with cfl <= ``positivity_cfl`` / its SSP coefficient
        (a convex combination of forward Euler steps, each non-negative under that bound)."""
        ssp = float(getattr(self.integrator, "ssp", 0.0))
        return bool(self.positive and ssp > 0.0 and cfl <= self.positivity_cfl * ssp)

    def safe_setting(self, cfl: float) -> str:
        """What to run instead after a step that broke an invariant at ``time.cfl`` = ``cfl``
        (:class:`~spheredens.simulate.Invariants`): the default integrator at half the cfl, at
        most the default 0.4 (stable for every scheme)."""
        text = (
            f"use discretization.integrator = {self.default_integrator!r} with time.cfl <= "
            f"{min(0.4, 0.5 * cfl):g}"
        )
        return text + (
            " (if it recurs: a finer grid)"
            if self.positive
            else " (if it recurs: a finer grid, or scheme 'fv', which keeps rho >= 0)"
        )

    def masses(self, state: Any) -> Array:
        """The mass of each slice, sum(rho weight), shape (n_xi,): 1 at the start, kept by every
        scheme to round-off."""
        rho = np.asarray(self.density(state))
        return np.sum((rho * self.grid.weight).reshape(len(rho), -1), axis=1)

    def extremes(self, state: Any) -> tuple[float, float]:
        """(max |rho|, min rho) over the grid and the slices."""
        rho = np.asarray(self.density(state))
        return float(np.max(np.abs(rho))), float(np.min(rho))

    def step_ok(self, old: Any, new: Any) -> bool:
        """Whether a step keeps what the scheme promises (non-negative schemes: rho >= 0)."""
        if not self.positive:
            return True
        # the step size comes from the velocity at the first stage, later stages may move faster
        return bool(new.min() >= 0.0 or old.min() < 0.0)

    def controller_state(self) -> dict[str, float]:
        """What the step control remembers between steps (e.g. the next step size), saved with
        every checkpoint so that a resumed run repeats the same steps; empty by default."""
        return {}

    def restore_controller(self, state: Mapping[str, float]) -> None:
        """Take back :meth:`controller_state` from a checkpoint."""

    # -- output -----------------------------------------------------------------------------
    def density(self, state: Any) -> Array:
        """The density on the grid, shape (n_xi, *grid.shape) (the state itself by default)."""
        return state

    def log_density(self, state: Any) -> Array:
        """log rho on the grid, shape of :meth:`density` (schemes with ``carries_log_density``)."""
        raise NotImplementedError

    def centroids(self, state: Any) -> Array:
        """The cells' centroids (schemes with ``carries_centroids``): offsets from the cells'
        centres in cell widths, the shape of :meth:`density` (the circle), or unit vectors, that
        shape and (d,) (:attr:`centroid_fields` = d, the sphere)."""
        raise NotImplementedError

    def diagnostic(self, name: str, state: Any) -> float:
        """The per-snapshot diagnostic ``name`` (one of :attr:`diagnostics`)."""
        raise KeyError(name)

    def attributes(self) -> dict[str, Any]:
        """Global attributes describing the discretization, for the output file."""
        raise NotImplementedError


class CircleScheme(Scheme):
    """What the circle schemes share: a uniform grid of n cells or nodes, the velocity's
    component along the tangent at ``velocity_grid``, the resolution rule in n.

    Subclasses pass ``grid`` (where the state lives) and ``velocity_grid`` (where the velocity
    is needed) to ``CircleScheme.__init__``, and implement ``rhs`` and ``sample``.
    """

    domain = "circle"
    #: 3 cells across the kernel width: n >= 6 pi sqrt(beta sigma_max); the largest n accepted
    #: (direct quadrature is O(n^2))
    resolution = Resolution(
        key="n",
        default=256,
        minimum=8,
        maximum=1 << 16,
        rule=(6.0 * math.pi, 1.0),
        message=(
            "n = {value} does not resolve the attention kernel width (beta sigma_max(B))^(-1/2) "
            "= {width:.3g} rad by 3 cells: needs n >= {need}"
        ),
        what=" for scheme {scheme!r}",
        cost=(
            "the set-up is instant there with fft, but the direct sums take n^2 = 4.3e9 "
            "kernel entries per right-hand side"
        ),
    )

    @classmethod
    def grid_spacing(cls, options: Mapping[str, Any]) -> float:
        return 2.0 * math.pi / cls.resolution.of(options)

    @classmethod
    def memory_sizes(cls, options: Mapping[str, Any]) -> tuple[int, int, float]:
        """n cells or nodes, the velocity at n points, n values per slice."""
        n = cls.resolution.of(options)
        return n, n, 8.0 * n

    velocity_grid: Any

    def __init__(self, problem: Any, grid: Any, velocity_grid: Any, **common: Any) -> None:
        self.velocity_grid = velocity_grid
        super().__init__(problem, grid, **common)

    #: the scheme's own option that the file records after ``n`` (its attribute of that name)
    own_option: ClassVar[str] = ""

    def attributes(self) -> dict[str, Any]:
        """``n``, the scheme's :attr:`own_option`, the evaluator and the integrator."""
        return {
            "n": self.grid.n,
            self.own_option: getattr(self, self.own_option),
            "interaction": self.interaction.name,
            "integrator": self.integrator.name,
        }

    def layout(self) -> Layout:
        return Layout(
            "circle",
            self.evaluator_inputs,
            self.grid,
            self.velocity_grid,
            frame=self.velocity_grid.tangents[None],
            scheme=self.name,
        )

    def tangential_velocity(self, state: Array) -> Array:
        """v = <tau, X[rho]> at the points of ``velocity_grid``, shape (n_xi, n)."""
        return self.interaction.velocity(state)[:, 0]

    def max_compression(self, v: Array) -> float:
        """max(0, max_j (v_j - v_{j+1}) / h) of a velocity at the points of ``velocity_grid``:
        -d v / d theta somewhere between them (for face velocities, exactly the compression of
        the cell between two faces)."""
        return max(0.0, float(np.max(v - np.roll(v, -1, axis=-1)))) / self.velocity_grid.h
