"""Conservative semi-Lagrangian finite volumes for log rho on the circle.

At low temperature the late dynamics are decided by densities far below the smallest float64
number (e^-1460 at beta = 10^4). This scheme stores the logarithm of the cell averages,
ell_j = log rho_j, and never forms rho where it is small:

* **Remap.** One step maps cells back along the characteristics of the velocity: the new
  mass of cell j is the old mass between the feet G_j, G_{j+1} of its faces,
  m_j = int_{G_j}^{G_{j+1}} rho^n dx. The feet partition the circle, so the masses sum to the
  old mass (conserved to round-off); every piece is a positive integral of a positive
  reconstruction, so rho stays positive; all sums are log-sum-exp sums of logarithms, so a
  cell keeps its relative accuracy whatever its size.
* **Reconstruction.** The state also carries each cell's centroid c_k (offset from the centre
  in cell widths). In cell k the density is log-linear, log rho(x) = L_k + sigma_k (x - x_k),
  with sigma_k the slope whose profile has that centroid (:func:`cell_slopes`, the inverse
  Langevin function) and L_k such that the cell average is exactly exp(ell_k). Each piece of
  a remap carries its centroid forward along the exact flow, so the new cells get their new
  centroids: a cluster narrower than a cell keeps its position. Second order where log rho is
  smooth.
* **Feet.** The velocity is known at the faces and linear in between; for such a field frozen
  in time the characteristics are known in closed form (x(s) = x* + (x_0 - x*) e^{a s} in a
  cell of slope a), so the feet are exact for any step, also where the field is stiff.
  The travel times of whole cells are summed once and searched (:func:`backward_feet`),
  O(n log n) per step, no CFL limit.
* **Time.** A predictor step with the velocity of rho^n gives rho*; the corrector uses the
  face velocity (v(rho^n) + v(rho*)) / 2 frozen over the step: second order in time. The
  difference between the two, max |ell^{n+1} - ell*| and max |c^{n+1} - c*| over the cells
  that can matter
  (within 2 beta sigma_max(B) + 50 of the largest ell: no softmax weighs the others by more
  than e^-50 of it), is the error estimate: a step above ``tolerance`` is refused and retried,
  the next step is dt (tolerance / error)^(1/2) (safety 0.9, growth between 0.2 and 2).
  The step size is set by how fast the field changes where the tails are, not by the CFL
  number; the next step is part of the checkpoint (:meth:`controller_state`).

The attention sums take ell directly (inputs ``"log_moments"``): the log weights of the
sources, at the cells' centroids, are ell_k + log h
(:class:`~spheredens.interaction.PrunedDirectQuadrature`).
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np
from numpy.typing import NDArray

from .._types import Array
from .._validate import as_float
from ..geometry import circle_points
from ..grids import CircleGrid
from ._base import CircleScheme, Tendency, register_scheme

#: log densities are kept above this value: a cell at e^-1e6 of the largest is weighed by no
#: softmax (logits differ by at most 2 beta sigma_max(B), below 1e5 for any beta the
#: configuration accepts) and holds no mass a float64 sum can see
LOG_FLOOR = -1.0e6
#: default error tolerance of one step (max change of ell between predictor and corrector)
DEFAULT_TOLERANCE = 1.0e-3
#: the smallest tolerance accepted: steps grow like tolerance^-1/2 (106 steps to t = 0.2 at 1e-6,
#: about 1000 at 1e-8, 26 s at n = 32), and 1e-320 never ended
MIN_TOLERANCE = 1.0e-8


def relative_expm1(z: Array) -> Array:
    """(1 - e^{-z}) / z, with its limit 1 at z = 0, for any real z."""
    z = np.asarray(z, dtype=float)
    small = np.abs(z) < 1e-8
    safe = np.where(small, 1.0, z)
    return np.where(small, 1.0 - 0.5 * z, -np.expm1(-safe) / safe)


def log_integral_exp(slope: Array, a: Array, b: Array) -> Array:
    """log int_a^b e^{slope s} ds for a <= b, elementwise, stable for any slope (-inf when
    a = b)."""
    length = np.asarray(b, dtype=float) - a
    z = np.abs(slope) * length
    top = np.where(slope >= 0.0, b, a)
    with np.errstate(divide="ignore"):
        return slope * top + np.log(length) + np.log(relative_expm1(z))


def log_mass(ell: Array, h: float) -> float:
    """log sum_j exp(ell_j) h, the log of the mass of log cell averages (log-sum-exp)."""
    top = float(ell.max())
    with np.errstate(under="ignore"):
        return top + math.log(float(np.sum(np.exp(ell - top))) * h)


def _node_paths(u: Array, h: float, start: Array, rest: Array) -> Array:
    """Backward displacement from the nodes ``start`` (indices, u > 0 there) over the times
    ``rest`` >= 0, through whole segments as far as the time allows (module docstring)."""
    n = u.size
    longest = float(rest.max()) if rest.size else 0.0
    periods = int(math.ceil(longest * float(u.max()) / (n * h))) + 1  # enough copies to the left
    ue = np.tile(u, periods + 1)
    left, right = ue[:-1], ue[1:]
    through = (left > 0.0) & (right > 0.0)
    # time to cross segment (e - 1, e): h log(u_e / u_{e-1}) / (u_e - u_{e-1}), capped at
    # 2 max(rest) (no path crosses a longer one; the cap keeps the running sum well scaled)
    cap = 2.0 * longest + h
    tau = np.minimum(
        travel_time(h, np.where(through, left, 1.0), np.where(through, right, 1.0)), cap
    )
    cum = np.concatenate(([0.0], np.cumsum(np.where(through, tau, 0.0))))
    barrier = np.concatenate(([True], ~through))  # node e cannot be passed going left
    last_barrier = np.maximum.accumulate(np.where(barrier, np.arange(ue.size), 0))
    query = start + periods * n
    k = np.searchsorted(cum, cum[query] - rest, side="left")
    k = np.maximum(k, last_barrier[query])
    left_time = rest - (cum[query] - cum[k])
    # inside segment (k - 1, k): u linear with slope a, u = u_k e^{-a s} after time s backward
    u_k = ue[k]
    a = (u_k - ue[k - 1]) / h
    return (query - k) * h + u_k * left_time * relative_expm1(a * left_time)


def travel_time(distance: Array, u_from: Array, u_to: Array) -> Array:
    """Time to travel ``distance`` where the speed goes linearly from u_from to u_to (both > 0):
    distance log(u_to / u_from) / (u_to - u_from), the limit distance / u where they agree."""
    d = u_to / u_from - 1.0
    small = np.abs(d) < 1e-8
    with np.errstate(divide="ignore", invalid="ignore"):
        exact = distance * (np.log(u_to) - np.log(u_from)) / (u_to - u_from)
    return np.where(small, distance / u_from * (1.0 - 0.5 * d), exact)


def _backward_right_movers(x: Array, u: Array, h: float, dt: float) -> Array:
    """Backward displacement D >= 0 over time dt of the points x in [0, 2 pi) where the
    velocity (u at the nodes i h, linear between them) is positive; 0 at the others."""
    n = u.size
    i0 = np.minimum(np.floor(x / h).astype(np.int64), n - 1)
    frac = x - i0 * h
    u0, u1 = u[i0], u[(i0 + 1) % n]
    out, beyond, tau0 = backward_within_segment(frac, u0, (u1 - u0) / h, dt)
    if beyond.any():
        out[beyond] = frac[beyond] + _node_paths(u, h, i0[beyond], dt - tau0[beyond])
    return out


def backward_within_segment(
    frac: Array, u0: Array, a: Array, dt: float
) -> tuple[Array, NDArray[np.bool_], Array]:
    """Backward displacements over time dt of points at distance ``frac`` right of a node where
    the velocity is ``u0``, rising with slope ``a`` (linear between nodes), for the points that
    move right (0 at the others).

    Returns ``(out, beyond, tau0)``: ``out`` holds the displacement of the points whose
    backward path stays right of the node; ``beyond`` marks the points that reach the node
    going back, at time ``tau0`` (the caller continues their paths through the nodes)."""
    ux = u0 + a * frac
    out = np.zeros(frac.size)
    moving = ux > 0.0
    # time to reach the node going back: frac log(ux / u0) / (ux - u0); none through a zero of u
    reach = moving & (u0 > 0.0)
    tau0 = np.where(
        reach, travel_time(frac, np.where(reach, u0, 1.0), np.where(reach, ux, 1.0)), np.inf
    )
    inside = moving & (tau0 >= dt)
    out[inside] = ux[inside] * dt * relative_expm1(a[inside] * dt)
    return out, moving & (tau0 < dt), tau0


def backward_trace(x: Array, u: Array, h: float, dt: float) -> Array:
    """Feet at time t of the characteristics through the points ``x`` at time t + dt, for the
    periodic velocity u given at the nodes i h (i = 0..n-1), linear between them and frozen
    over the step: exact for that field, also where it is stiff. Continuous coordinates (a
    foot is x minus its displacement, not reduced mod 2 pi). ``backward_trace(x, -u, ...)``
    is the forward image."""
    x = np.asarray(x, dtype=float)
    period = u.size * h
    base = np.floor(x / period) * period
    xr = np.clip(x - base, 0.0, np.nextafter(period, 0.0))
    right = _backward_right_movers(xr, u, h, dt)
    # mirror x -> -x for the points moving left: node i becomes node (n - i) mod n
    mirror = (-np.arange(u.size)) % u.size
    xm = np.clip((period - xr) % period, 0.0, np.nextafter(period, 0.0))
    left = _backward_right_movers(xm, -u[mirror], h, dt)
    return x - right + left


def backward_feet(u: Array, h: float, dt: float) -> Array:
    """:func:`backward_trace` of the nodes i h themselves."""
    return backward_trace(np.arange(u.size) * h, u, h, dt)


def langevin(z: Array) -> Array:
    """L(z) = coth z - 1/z: the mean of s under e^{2 z s} on [-1/2, 1/2] is L(z) / 2."""
    z = np.asarray(z, dtype=float)
    small = np.abs(z) < 0.1
    zs = np.where(small, z, 1.0)
    with np.errstate(over="ignore"):
        big = 1.0 / np.tanh(np.where(small, 1.0, z)) - 1.0 / np.where(small, 1.0, z)
    series = z / 3.0 - z**3 / 45.0 + 2.0 * zs**5 / 945.0
    return np.where(small, series, big)


def _langevin_slope(z: Array) -> Array:
    small = np.abs(z) < 0.1
    with np.errstate(over="ignore"):
        sinh = np.sinh(np.where(small, 1.0, z))
        big = 1.0 / np.where(small, 1.0, z) ** 2 - 1.0 / sinh**2
    return np.where(small, 1.0 / 3.0 - z**2 / 15.0 + 2.0 * z**4 / 189.0, big)


#: largest |2 c| accepted for a centroid offset c (cell widths): the slope stays finite
_EDGE = 1.0 - 1e-12


def inverse_langevin(y: Array) -> Array:
    """z with L(z) = y, |y| < 1 (clipped to 1 - 1e-12): Cohen's approximation, then Newton."""
    y = np.clip(np.asarray(y, dtype=float), -_EDGE, _EDGE)
    z = y * (3.0 - y**2) / (1.0 - y**2)
    for _ in range(6):
        z = z - (langevin(z) - y) / np.maximum(_langevin_slope(z), 1e-300)
    return z


def cell_slopes(offset: Array, h: float) -> Array:
    """Log-slope (per unit length) of the log-linear profile on a cell of width h whose centroid
    sits ``offset`` cell widths from the centre."""
    return 2.0 * inverse_langevin(2.0 * offset) / h


def remap(ell: Array, offset: Array, feet: Array, h: float, forward: Any) -> tuple[Array, Array]:
    """(log cell averages, centroid offsets) after one remap: cell j receives the mass of the
    old reconstruction between feet[j] and feet[j + 1] (feet of the n + 1 faces j h,
    j = 0..n, increasing, spanning 2 pi), with its first moment.

    Old cell k is [k h, (k + 1) h] with log rho = L_k + sigma_k (x - x_k), the slope sigma_k set
    by the centroid (:func:`cell_slopes`). The interval between two feet is cut at the old
    faces; each piece brings its mass (summed in log-sum-exp form) and its centroid, carried
    to time t + dt by ``forward`` (the forward flow map of the same field)."""
    n = ell.size
    slope = cell_slopes(offset, h)
    first = math.floor(feet[0] / h)
    faces = np.arange(first + 1, math.ceil(feet[-1] / h))
    cuts = np.concatenate((feet, faces * h))
    order = np.argsort(cuts, kind="stable")
    cuts = cuts[order]
    # which piece starts at each foot: the position of foot j in the sorted cuts
    rank = np.empty(cuts.size, dtype=np.int64)
    rank[order] = np.arange(cuts.size)
    starts = rank[:n]
    # a piece lies in the cell after the faces counted so far (by index, not by its position:
    # a sliver next to a face must not take the neighbour's density), clipped to that cell
    cell = first + np.cumsum(order >= feet.size)[:-1]
    lo = np.maximum(cuts[:-1], cell * h)
    hi = np.maximum(np.minimum(cuts[1:], (cell + 1) * h), lo)
    k = cell % n
    centre = (cell + 0.5) * h
    level = ell - (log_integral_exp(slope, -0.5 * h, 0.5 * h) - math.log(h))
    piece = level[k] + log_integral_exp(slope[k], lo - centre, hi - centre)
    half = 0.5 * (hi - lo)
    image = forward(0.5 * (lo + hi) + half * langevin(slope[k] * half))
    count = np.diff(np.append(starts, piece.size))
    top = np.maximum.reduceat(piece, starts)
    # a cell whose preimage has no length in float64 (two feet equal: next to a strongly
    # repelling point over a long step) receives nothing: ell = -inf, offset 0; the step that
    # does this to a cell that matters is refused (LogSemiLagrangianScheme.advance)
    empty = top == -np.inf
    with np.errstate(under="ignore", invalid="ignore"):
        weight = np.exp(piece - np.repeat(np.where(empty, 0.0, top), count))
    total = np.add.reduceat(weight, starts)
    new_centre = (np.arange(n) + 0.5) * h
    moment = np.add.reduceat(weight * (image - np.repeat(new_centre, count)), starts)
    with np.errstate(invalid="ignore", divide="ignore"):
        new_offset = np.clip(np.where(empty, 0.0, moment / total / h), -0.5 * _EDGE, 0.5 * _EDGE)
        return np.where(empty, -np.inf, top + np.log(total) - math.log(h)), new_offset


def tolerance_option(table: Mapping[str, Any], prefix: str, cost: str = "") -> float:
    """``[discretization] tolerance`` (default :data:`DEFAULT_TOLERANCE`): the error of log rho
    allowed in one step, in [:data:`MIN_TOLERANCE`, 1]; ``cost`` is said after that in a
    refusal."""
    return as_float(
        table.get("tolerance", DEFAULT_TOLERANCE),
        f"{prefix}.tolerance",
        minimum=MIN_TOLERANCE,
        maximum=1.0,
        what=f" (the error of log rho allowed in one step{cost})",
    )


def _power(x: float, exponent: float) -> float:
    """x^exponent, by math.sqrt for 1/2 (the steps of earlier files, bit for bit)."""
    return math.sqrt(x) if exponent == 0.5 else x**exponent


class ErrorControlledSteps:
    """The step control of the ``log_sl`` schemes: the first step is the CFL step, later ones
    follow the error estimate that ``advance`` leaves in ``_last_error`` (the step ``_last_dt``):
    a step above ``tolerance`` is refused, the next is dt (tolerance / error)^(1/2) (safety
    0.9, growth between 0.2 and 2; :attr:`error_exponent` and :attr:`max_growth` for other
    orders); the next step is part of the checkpoint."""

    tolerance: float
    grid: Any
    #: the next step is dt (tolerance / error)^error_exponent (safety 0.9), grown at most
    #: max_growth times: 1/2 for a second-order error estimate
    error_exponent: float = 0.5
    max_growth: float = 2.0

    _emptied: bool

    def record_error(
        self, change: Array, relevant: Array, dt: float, sizing: float | None = None
    ) -> None:
        """The step's error estimate: the largest ``change`` (between predictor and corrector)
        over the ``relevant`` cells; infinite when a cell that matters lost its whole preimage to
        round-off (``_emptied``: the step is too long). ``sizing``, when given, is the error
        the next step is sized by (the estimate itself by default)."""
        self._last_error = float(np.max(change, where=relevant, initial=0.0))
        if self._emptied or not np.isfinite(self._last_error):
            self._last_error = math.inf
        self._sizing_error = self._last_error if sizing is None else max(sizing, 0.0)
        if not np.isfinite(self._sizing_error):
            self._sizing_error = math.inf
        self._last_dt = dt

    def init_step_control(self) -> None:
        self.dt_next: float | None = None
        self._proposed = math.inf
        self._rejected = False
        self._last_error = 0.0
        self._sizing_error = 0.0
        self._last_dt = 0.0

    def stable_dt(self, cfl: float, tendency: Tendency) -> float:
        """The step the error control asks for; the first one is the CFL step."""
        dt = self.dt_next if self.dt_next is not None else cfl * self.grid.h / tendency.max_speed
        self._proposed, self._rejected = dt, False
        return dt

    def step_ok(self, old: Array, new: Array) -> bool:
        """Accept the step when its error estimate is within ``tolerance``, and size the next."""
        error, dt, sizing = self._last_error, self._last_dt, self._sizing_error
        growth = self.max_growth
        factor = (
            growth
            if sizing == 0.0
            else min(growth, max(0.2, 0.9 * _power(self.tolerance / sizing, self.error_exponent)))
        )
        if error > self.tolerance:
            self._rejected = True
            return False
        shortened = dt < self._proposed * (1.0 - 1e-9) and not self._rejected
        # a step cut short to land on a snapshot time says nothing against the proposed one
        self.dt_next = (
            max(dt * factor, self._proposed) if shortened and factor >= 1.0 else dt * factor
        )
        return True

    def safe_setting(self, cfl: float) -> str:
        """Steps follow the error control: a smaller tolerance shortens them."""
        return (
            f"use discretization.tolerance <= {self.tolerance / 4:g} (if it recurs: a finer grid)"
        )

    def controller_state(self) -> dict[str, float]:
        return {} if self.dt_next is None else {"dt_next": self.dt_next}

    def restore_controller(self, state: Mapping[str, float]) -> None:
        if "dt_next" in state:
            self.dt_next = float(state["dt_next"])


@register_scheme
class LogSemiLagrangianScheme(ErrorControlledSteps, CircleScheme):
    """Conservative semi-Lagrangian finite volumes for log rho on S^1 (module docstring).

    The state is (ell_j, c_j) per cell, shape (n_xi, 2, n): ell_j = log rho_j, the logarithm of
    the cell average on n uniform cells, and c_j the offset of the cell's centroid from its
    centre in cell widths; ``density`` is exp(ell). Mass is conserved to round-off, rho > 0
    always, and rho keeps its relative accuracy down to e^-1e6 (:data:`LOG_FLOOR`): the scheme
    for low temperature (beta >= 1000), where the departure from the metastable plateau is
    decided by tails far below the smallest float64 number. Steps follow the dynamics, not a CFL
    number: error controlled, exact characteristics of the piecewise-linear face velocity.

    Second order in space (log-linear reconstruction with the cell's centroid, velocity linear
    between faces) and in time (predictor-corrector); the velocity is the direct log-domain
    quadrature over the cells' centroids. A cluster narrower than a cell keeps its position (the
    centroid), and every W2 of the run puts each cell's mass there. Worse than ``fv`` where rho
    has zeros (log rho is floored there) and where the dynamics is fast everywhere (two velocity
    evaluations per step, no gain from large steps).

    Options (``[discretization]``)
    ------------------------------
    tolerance : float
        Error allowed in one step, in log rho (default 1e-3); halve it to check convergence.
    interaction : ``"auto"`` (default: ``direct_pruned`` on the logs at the centroids;
        ``zero_temperature`` for that model)
    """

    name = "log_sl"
    options = ("n", "tolerance", "interaction", "allow_underresolved")
    default_integrator = "semi_lagrangian"
    evaluator_inputs = "log_moments"
    positive = True
    #: a cluster narrower than a cell, split between two cells and then moved into one, doubles
    #: the largest cell average without any compression (the remap moves masses, not values)
    growth_slack = 3.0
    zero_temperature_order = 2.0
    carries_centroids = True
    carries_log_density = True
    suited_to = "at low temperature"

    @classmethod
    def validate_own_options(cls, table: Mapping[str, Any], prefix: str) -> dict[str, Any]:
        return {
            "tolerance": tolerance_option(
                table,
                prefix,
                "; the steps grow like tolerance^-1/2: about 5000 per unit time at 1e-8, "
                "26 s at n = 32 to t = 0.2 on 2 cores",
            )
        }

    def __init__(
        self, problem: Any, *, n: int = 256, tolerance: float = DEFAULT_TOLERANCE, **common: Any
    ) -> None:
        grid = CircleGrid(n, offset=0.5)
        self.faces = grid.shifted(0.5)  # face j at (j + 1) h
        super().__init__(problem, grid, self.faces, **common)
        self.setup_steps(tolerance)

    def setup_steps(self, tolerance: float) -> None:
        """The tolerance, the window of cells that matter and the step control (also used by
        the zonal domain's ``log_sl``, which runs this scheme on the even extension)."""
        self.tolerance = float(tolerance)
        model = self.problem.model
        #: cells below max(ell) - window are weighed by no softmax (by less than e^-50)
        self.window = (
            2.0 * model.beta * model.kernel.sigma_max + 50.0 if model.kind.interacting else math.inf
        )
        self.init_step_control()
        self._emptied = False
        self._cache: tuple[Any, float, Array] | None = None

    def make_integrator(self, name: str) -> Any:
        return SemiLagrangianStep(self)

    # -- state -------------------------------------------------------------------------------
    def sample(self, f) -> Array:
        """Cell averages of a density function (4-point Gauss per cell)."""
        return self.grid.cell_averages(f)

    def initial_state(self) -> Array:
        """(log of the normalized cell averages of rho_0 (floored at :data:`LOG_FLOOR`), their
        centroid offsets in cell widths), shape (n_xi, 2, n); 8-point Gauss per cell."""
        rho0 = self.problem.initial_values(self.sample, self.grid.weight)
        nodes, wts = np.polynomial.legendre.leggauss(8)
        theta = self.grid.theta[:, None] + 0.5 * self.grid.h * nodes[None, :]
        offsets = []
        for f in self.problem.slice_initials():
            values = np.maximum(np.asarray(f(circle_points(theta)), dtype=float), 0.0) * wts
            mass = values.sum(axis=1)
            offsets.append(
                np.where(mass > 0.0, (values @ nodes) / np.where(mass > 0.0, mass, 1.0), 0.0) / 2.0
            )
        with np.errstate(divide="ignore"):
            ell = np.maximum(np.log(np.maximum(rho0, 0.0)), LOG_FLOOR)
        return np.stack([ell, np.clip(np.array(offsets), -0.5 * _EDGE, 0.5 * _EDGE)], axis=1)

    def density(self, state: Array) -> Array:
        """rho = exp(ell) (values below the smallest float64 number are 0 here, not in the
        state)."""
        with np.errstate(under="ignore"):
            return np.exp(state[:, 0])

    def log_density(self, state: Array) -> Array:
        """ell = log rho, shape (n_xi, n)."""
        return state[:, 0]

    def centroids(self, state: Array) -> Array:
        """The centroid offsets c_j (cell widths), shape (n_xi, n)."""
        return state[:, 1]

    # -- velocity --------------------------------------------------------------------------
    def face_velocity(self, state: Array, t: float) -> Array:
        """Tangential velocity at the faces, shape (n_xi, n); the last one is kept (the loop asks
        for the velocity of the same state twice: for the step size and for the step)."""
        if self._cache is not None and self._cache[0] is state and self._cache[1] == t:
            return self._cache[2]
        v = self.tangential_velocity(state)
        self._cache = (state, t, v)
        return v

    def rhs(self, state: Array, t: float) -> Tendency:
        """d ell / dt of first-order upwind fluxes in log form (for information: the step is the
        semi-Lagrangian remap; 0 for the offsets), and the largest face speed."""
        v = self.face_velocity(state, t)
        ell = state[:, 0]
        up = np.roll(ell, -1, axis=-1) - ell  # ell_{j+1} - ell_j, across face j
        with np.errstate(over="ignore"):
            out_right = np.maximum(v, 0.0) + np.minimum(v, 0.0) * np.exp(np.minimum(up, 700.0))
            flux_left = np.roll(
                np.maximum(v, 0.0) * np.exp(np.minimum(-up, 700.0)) + np.minimum(v, 0.0), 1, axis=-1
            )
        rate = np.zeros_like(state)
        rate[:, 0] = -(out_right - flux_left) / self.grid.h
        return Tendency(rate, float(np.abs(v).max()), max_compression=self.max_compression(v))

    # -- one step ----------------------------------------------------------------------------
    def feet(self, u: Array, dt: float) -> Array:
        """Feet of the n + 1 faces j h (j = 0..n) for the velocity ``u`` at the positions j h
        (of one slice), increasing (round-off ties kept in order), spanning 2 pi."""
        g = backward_feet(u, self.grid.h, dt)
        g = np.append(g, g[0] + 2.0 * np.pi)
        return np.maximum.accumulate(g)

    def remap_state(self, state: Array, v: Array, dt: float) -> Array:
        """The state after one remap along the characteristics of the face velocity ``v``
        (frozen over the step)."""
        h = self.grid.h
        out = np.empty_like(state)
        for k, ((ell, offset), vk) in enumerate(zip(state, v)):
            u = np.roll(vk, 1)  # the velocity at position j h is that of face j - 1
            new, out[k, 1] = remap(
                ell, offset, self.feet(u, dt), h, lambda x, u=u: backward_trace(x, -u, h, dt)
            )
            # the remap conserves the mass up to the round-off of its logs and exps (~1e-14
            # per step); a factor that close to 1 removes that drift without touching the
            # relative accuracy of any cell
            out[k, 0] = np.maximum(new - (log_mass(new, h) - log_mass(ell, h)), LOG_FLOOR)
            self._emptied |= bool(np.any((new == -np.inf) & (ell >= ell.max() - self.window)))
        return out

    def advance(self, state: Array, t: float, dt: float) -> Array:
        """One predictor-corrector step (module docstring); records the error estimate."""
        self._emptied = False
        v0 = self.face_velocity(state, t)
        predicted = self.remap_state(state, v0, dt)
        if not np.all(np.isfinite(predicted)):  # refused by step_ok, retried shorter
            self._last_error, self._last_dt = math.inf, dt
            return np.array(state)
        v1 = self.tangential_velocity(predicted)
        new = self.remap_state(state, 0.5 * (v0 + v1), dt)
        ell = new[:, 0]
        relevant = ell >= ell.max(axis=-1, keepdims=True) - self.window
        change = np.maximum(np.abs(ell - predicted[:, 0]), np.abs(new[:, 1] - predicted[:, 1]))
        self.record_error(change, relevant, dt)
        return new

    own_option = "tolerance"


class AdvanceStep:
    """A scheme that steps itself (its ``advance(state, t, dt)``, which records its own error
    for :class:`ErrorControlledSteps`) as a time integrator in the loop's interface; a subclass
    names it (``name``, ``description``)."""

    name = ""
    description = ""

    def __init__(self, scheme: Any) -> None:
        self.scheme = scheme

    def step(self, rate: Any, y: Array, t: float, dt: float, k1: Any = None) -> Array:
        return self.scheme.advance(y, t, dt)


class SemiLagrangianStep(AdvanceStep):
    """The time integrator of :class:`LogSemiLagrangianScheme` in the loop's interface."""

    name = "semi_lagrangian"
    description = (
        "predictor-corrector semi-Lagrangian remap of log rho, exact feet of the "
        "piecewise-linear face velocity, error controlled"
    )
