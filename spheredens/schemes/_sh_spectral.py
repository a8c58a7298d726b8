"""Spherical-harmonic (pseudo-spectral) scheme on S^2, transforms by shtns."""

from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np
from numpy.typing import NDArray

from .._types import Array
from .._validate import as_int
from ..grids import GaussGrid
from ..grids._sphere_gauss import MAX_LMAX, default_grid_size
from ..interaction import Layout
from ._base import Scheme, Tendency, register_scheme, validate_choice
from ._resolution import Resolution

FILTERS = ("exponential", "none")


def sphere_filter(l: Array, lmax: int, kind: str) -> Array:
    """Filter factors sigma(l) applied to the state after every step: exp(-36 (l / lmax)^36) or 1.

    The exponential filter (Hou & Li 2007) leaves degrees l < 0.37 lmax untouched to
    round-off (sigma > 1 - 1e-15) and removes the top few degrees, where the ringing of
    concentrating densities accumulates. l = 0 (the mass) is never touched. ``filter_effect``
    in the output reports ||(1 - sigma) rho_lm|| / ||rho_lm|| per snapshot.
    """
    if kind == "exponential":
        return np.exp(-36.0 * (np.asarray(l) / lmax) ** 36)
    return np.ones(len(l))


@register_scheme
class SHSpectralScheme(Scheme):
    """Pseudo-spectral spherical-harmonic scheme on S^2.

    The state is the array of coefficients rho_lm (l <= lmax) of each slice. A right-hand side:

    1. rho on the Gauss grid (synthesis; the grid de-aliases quadratic products);
    2. the velocity X[rho] on the grid (:mod:`spheredens.interaction`: Funk-Hecke multipliers
       when B is a multiple of an orthogonal matrix, interpolation in kappa for a general B,
       direct quadrature on request);
    3. the flux rho X, its spheroidal potential s_lm (vector analysis), and
       d rho_lm / dt = l (l + 1) s_lm  (= -[div_S(rho X)]_lm);

    after each step the filter multiplies rho_lm by sigma(l) (:func:`sphere_filter`). Where the
    spectral density has negative Gibbs lobes, the interaction sees max(rho, 0) (re-analysed),
    so that N/Z stays a convex combination of the V y and the velocity stays meaningful.

    The l = 0 coefficient never changes, so the mass sqrt(4 pi) rho_00 is conserved to
    round-off. RK4 by default; dt = cfl (pi / (lmax + 1)) / max|X|.

    Options (``[discretization]``)
    ------------------------------
    lmax : int, 3..1023 (default 31); the grid is 2 ceil(3 (lmax + 1) / 4) (>= 32) latitudes by
        twice as many longitudes
    filter : ``"exponential"`` (default) or ``"none"`` (:func:`sphere_filter`)
    interaction : ``"auto"`` (funk_hecke where B is a multiple of an orthogonal matrix, else
        lowrank_meridian), ``"funk_hecke"``, ``"lowrank_meridian"``, ``"kappa_interpolation"``,
        ``"direct"``
    integrator : ``"rk4"`` (default) or any registered tableau
    nthreads : threads of shtns (default 1; its OpenMP default was ~50x slower on 2 cores)
    """

    name = "sh_spectral"
    domain = "sphere"
    options = ("lmax", "filter", "interaction", "integrator", "nthreads", "allow_underresolved")
    #: the multipliers reach degree ~ sqrt(2 kappa ln(1/eps)): lmax >= 3 sqrt(2 beta sigma_max)
    resolution = Resolution(
        key="lmax",
        default=31,
        minimum=3,
        maximum=MAX_LMAX,
        rule=(3.0, 2.0),
        message=(
            "lmax = {value} does not resolve the attention kernel (beta sigma_max(B) = "
            "{beta_sigma:.3g}): needs lmax >= 3 sqrt(2 beta sigma_max(B)) = {need}"
        ),
        cost=(
            "at 1023 the Gauss grid has 1536 x 3072 points: about 5 s of set-up, 2 s per "
            "right-hand side and 5 GiB (funk_hecke, measured on one core)"
        ),
    )
    default_integrator = "rk4"
    #: degree l <= lmax moves at up to max|X|:
    #: |lambda dt| <= lmax max|X| cfl pi / ((lmax + 1) max|X|) < pi cfl
    imaginary_spectrum = math.pi
    evaluator_inputs = "coefficients"
    zero_temperature_order = math.inf
    diagnostics = ("filter_effect",)

    @classmethod
    def validate_own_options(cls, table: Mapping[str, Any], prefix: str) -> dict[str, Any]:
        return {
            "filter": validate_choice(
                table, "filter", prefix, dict.fromkeys(FILTERS), "exponential", "spectral filter"
            ),
            "nthreads": as_int(
                table.get("nthreads", 1), f"{prefix}.nthreads", minimum=1, maximum=256
            ),
        }

    @classmethod
    def grid_spacing(cls, options: Mapping[str, Any]) -> float:
        """pi / (lmax + 1), the grid's ``h``."""
        return math.pi / (cls.resolution.of(options) + 1)

    #: per grid point and slice: rho, the velocity's components, the flux and its pieces
    work_bytes_per_point = 200.0

    @classmethod
    def memory_sizes(cls, options: Mapping[str, Any]) -> tuple[int, int, float]:
        """The Gauss grid's points (sources, targets and snapshots), (lmax + 1)(lmax + 2) / 2
        complex coefficients per slice."""
        lmax = int(options.get("lmax") or 31)
        nlat, nphi = default_grid_size(lmax)
        return nlat * nphi, nlat * nphi, 16.0 * (lmax + 1) * (lmax + 2) / 2

    def __init__(
        self,
        problem: Any,
        *,
        lmax: int = 31,
        filter: str = "exponential",
        nthreads: int = 1,
        **common: Any,
    ) -> None:
        super().__init__(problem, GaussGrid(lmax, nthreads=nthreads), **common)
        self.filter = filter
        self._sigma = sphere_filter(self.grid.l, lmax, filter)
        self._l_factor = self.grid.l * (self.grid.l + 1.0)
        self.clip_negative = True
        self._synth_cache: tuple[Any, list[Array]] | None = None

    def layout(self) -> Layout:
        g = self.grid
        return Layout(
            "sphere", "coefficients", g, g, frame=np.stack([g.e_theta, g.e_phi]), scheme=self.name
        )

    def initial_state(self) -> NDArray[np.complex128]:
        """Coefficients of each slice's rho_0 (Gauss-grid analysis), renormalized to unit mass."""
        values = self.problem.initial_values(self.grid.point_values, self.grid.weight)
        c = np.stack([self.grid.analys(v) for v in values])
        return c / (np.sqrt(4.0 * np.pi) * c[:, :1].real)

    def rhs(self, state: NDArray[np.complex128], t: float) -> Tendency:
        """-[div_S(rho X[rho])]_lm before filtering, shape (n_xi, nlm), max |X| and the largest
        compression max(0, -div_S X) on the grid."""
        return self._tendency(state, divergence=True)

    def rate(self, state: NDArray[np.complex128], t: float) -> NDArray[np.complex128]:
        """The rate alone (the integrator's later stages: no compression of X, two transforms
        fewer)."""
        return self._tendency(state, divergence=False).rate

    def _tendency(self, state: NDArray[np.complex128], *, divergence: bool) -> Tendency:
        g = self.grid
        rho_grid = self._synthesized(state)
        attention_state = state
        if self.clip_negative and any(r.min() < 0.0 for r in rho_grid):
            # attention weights of a density are non-negative: Gibbs lobes are clipped before
            # the interaction so that N/Z remains a convex combination of the V y
            attention_state = np.stack([g.analys(np.maximum(r, 0.0)) for r in rho_grid])
        vel = self.interaction.velocity(attention_state)
        out = np.empty_like(state)
        for k, rho in enumerate(rho_grid):
            out[k] = -g.divergence_coefficients(rho * vel[k, 0], rho * vel[k, 1])
        compression = (
            max(0.0, -min(float(g.synth(g.divergence_coefficients(v[0], v[1])).min()) for v in vel))
            if divergence
            else math.nan
        )
        return Tendency(
            out,
            float(np.sqrt(np.max(vel[:, 0] ** 2 + vel[:, 1] ** 2))),
            max_compression=compression,
        )

    def _synthesized(self, state: NDArray[np.complex128]) -> list[Array]:
        """rho of each slice on the grid; the last state's values are kept (the loop's check
        of a step and the next step's first stage ask for the same state)."""
        if self._synth_cache is not None and self._synth_cache[0] is state:
            return self._synth_cache[1]
        rho = [self.grid.synth(c) for c in state]
        self._synth_cache = (state, rho)
        return rho

    def masses(self, state: NDArray[np.complex128]) -> Array:
        """sqrt(4 pi) Re rho_00 of each slice (the l = 0 coefficient is the mass)."""
        return np.sqrt(4.0 * np.pi) * np.asarray(state)[:, 0].real

    def extremes(self, state: NDArray[np.complex128]) -> tuple[float, float]:
        rho = self._synthesized(state)
        return max(float(np.abs(r).max()) for r in rho), min(float(r.min()) for r in rho)

    def post_step(self, state: NDArray[np.complex128], dt: float) -> NDArray[np.complex128]:
        """Apply the filter to the state after each step (l = 0, the mass, is untouched)."""
        return state if self.filter == "none" else self._sigma * state

    def filter_effect(self, state: NDArray[np.complex128]) -> float:
        """||(1 - sigma) rho_lm|| / ||rho_lm|| (coefficient 2-norm): the relative change one
        application of the filter (one step) makes to this state; 0 without filter."""
        norm = float(np.linalg.norm(state))
        return float(np.linalg.norm((1.0 - self._sigma) * state)) / norm if norm > 0 else 0.0

    def diagnostic(self, name: str, state: NDArray[np.complex128]) -> float:
        if name == "filter_effect":
            return self.filter_effect(state)
        return super().diagnostic(name, state)

    def density(self, state: NDArray[np.complex128]) -> Array:
        """rho on the Gauss grid, shape (n_xi, nlat, nphi)."""
        return np.stack([self.grid.synth(c) for c in np.atleast_2d(state)])

    def attributes(self) -> dict[str, Any]:
        return {
            "lmax": self.grid.lmax,
            "nlat": self.grid.nlat,
            "nphi": self.grid.nphi,
            "filter": self.filter,
            "interaction": self.interaction.name,
            "integrator": self.integrator.name,
            "shtns_threads": self.grid.nthreads,
            **self.interaction.attributes(),
        }
