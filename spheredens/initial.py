"""Named initial densities: functions of points x in S^{d-1}, normalized to unit mass.

Each registered class validates its own parameters (``from_params``), is called on points of
shape (n, d) and returns density values with respect to the uniform measure (arc length on
the circle, area on the sphere). ``to_params`` gives back the TOML table that rebuilt it.
"""

from __future__ import annotations

import functools
import math
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ClassVar, Mapping

import numpy as np
from scipy import special

from ._density_file import DENSITY_FILES, CellBoxes, DensityFile, read_density
from ._random_field import MASS_REFINEMENTS, RANDOM_FIELDS
from ._registry import Registry
from ._types import Array
from ._validate import (
    as_float,
    as_float_list,
    as_int,
    as_str,
    as_unit_vectors,
    check_keys,
)
from .exceptions import ConfigError, SpheredensWarning
from .geometry import (
    NotProvided,
    domain_entry,
    domain_of_dimension,
    log_sphere_area,
    sphere_area,
)
from .kernel import log_bessel_i

INITIAL_DENSITIES = Registry("initial density")

#: a density read from a file may undershoot zero by this fraction of its maximum (Gibbs
#: oscillations of a spectral run); such values are clipped to 0, larger ones refused
NEGATIVE_TOLERANCE = 1e-2


def check_params(
    params: Mapping[str, Any],
    key: str,
    allowed: list[str],
    *,
    required: Mapping[str, str] | None = None,
) -> None:
    """Refuse keys of the table ``key`` not in ``allowed``, and a missing key of ``required``
    (key -> the refusal, which says what it is)."""
    check_keys(params, allowed, key)
    for name, refusal in (required or {}).items():
        if name not in params:
            raise ConfigError(f"{key}.{name}", refusal)


@INITIAL_DENSITIES.register("uniform")
@dataclass(frozen=True)
class Uniform:
    """The uniform density 1/|S^{d-1}|."""

    d: int

    @classmethod
    def from_params(
        cls, params: Mapping[str, Any], d: int, base_dir: Path, key: str = "initial"
    ) -> "Uniform":
        check_keys(params, [], key)
        return cls(d)

    def __call__(self, x: Array) -> Array:
        return np.full(np.shape(x)[:-1], 1.0 / sphere_area(self.d))

    def log_density(self, x: Array) -> Array:
        """-log |S^{d-1}|, finite for every d (|S^1023| ~ 1e-908 underflows)."""
        return np.full(np.shape(x)[:-1], -log_sphere_area(self.d))

    def to_params(self) -> dict[str, Any]:
        return {}


def von_mises_fisher_density(x: Array, mean: Array, kappa: float) -> Array:
    """Normalized von Mises-Fisher density on S^{d-1} (the domain of dimension d = len(mean)),
    stable for large kappa.

    C_d(kappa) exp(kappa <mu, x>) with C_d(kappa) = kappa^{d/2-1} / ((2 pi)^{d/2} I_{d/2-1}(kappa))
    (:func:`von_mises_fisher_normalized`; the circle: 1 / (2 pi I_0(kappa))), on the sphere its
    closed form kappa / (4 pi sinh kappa) (:func:`_sphere_von_mises_fisher`); evaluated as
    exp(kappa (<mu, x> - 1)) times a scaled constant, so kappa = 1e4 is fine.
    """
    mean = np.asarray(mean, dtype=float)
    d = mean.shape[0]
    with np.errstate(over="ignore", under="ignore"):  # kappa (<mu, x> - 1) may be -inf: g = 0
        g = np.exp(kappa * np.minimum(x @ mean - 1.0, 0.0))  # <mu, x> <= 1 (round-off: exp > 1)
    return von_mises_fisher_constant(d)(g, kappa, d)


def von_mises_fisher_log_density(x: Array, mean: Array, kappa: float) -> Array:
    """log of :func:`von_mises_fisher_density`, finite wherever the density is representable
    (kappa (<mu, x> - 1) plus the log of the scaled constant): far from the mean of a very
    concentrated density (kappa = 1e10) the density underflows to 0, its log does not."""
    mean = np.asarray(mean, dtype=float)
    d = mean.shape[0]
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        log_c = float(np.log(von_mises_fisher_constant(d)(np.ones(1), kappa, d)[0]))
    if not math.isfinite(log_c):  # large d: (2 pi)^{d/2} overflows; the constant in logs
        log_c = von_mises_fisher_log_constant(kappa, d)
    return kappa * np.minimum(x @ mean - 1.0, 0.0) + log_c


def von_mises_fisher_log_constant(kappa: float, d: int) -> float:
    """log(e^kappa C_d(kappa)) = (d/2 - 1) log kappa - (d/2) log(2 pi) - log I_{d/2-1}(kappa)
    + kappa, formed in logs (:func:`~spheredens.kernel.log_bessel_i`), for any d (-log
    |S^{d-1}| at kappa = 0)."""
    if kappa == 0.0:
        return -log_sphere_area(d)
    nu = 0.5 * d - 1.0
    log_i = float(log_bessel_i(nu, np.array([kappa]))[0])
    return nu * math.log(kappa) - 0.5 * d * math.log(2.0 * math.pi) - log_i + kappa


def von_mises_fisher_normalized(g: Array, kappa: float, d: int) -> Array:
    """g = exp(kappa (<mu, x> - 1)) times e^kappa C_d(kappa), the general normalization on S^{d-1}:
    kappa^{d/2-1} / ((2 pi)^{d/2} I_{d/2-1}(kappa) e^{-kappa}) (scaled Bessel function ``ive``);
    kappa = 0 and d > 2: 1 / |S^{d-1}|."""
    nu = 0.5 * d - 1.0
    if kappa == 0.0 and nu > 0.0:
        return g / (2.0 * np.pi ** (0.5 * d) / special.gamma(0.5 * d))
    # numpy powers: beyond float64 they are inf (the caller's errstate), not Python's OverflowError
    scale = np.power(float(kappa), nu) / np.power(2.0 * np.pi, 0.5 * d)
    return g * scale / scaled_bessel_i(nu, kappa)


#: from this kappa on, :func:`scaled_bessel_i` uses its asymptotic series (scipy's ``ive``
#: returns NaN beyond about 2e9; at 1e8 the series' first omitted term is below 1e-24)
BESSEL_ASYMPTOTIC_FROM = 1e8


def scaled_bessel_i(nu: float, kappa: float) -> float:
    """I_nu(kappa) e^{-kappa}, for every finite kappa >= 0: ``scipy.special.ive`` below
    :data:`BESSEL_ASYMPTOTIC_FROM`, above it the large-argument series
    (1 - (mu - 1) / (8 kappa) + (mu - 1)(mu - 9) / (2 (8 kappa)^2)) / sqrt(2 pi kappa),
    mu = 4 nu^2 [Abramowitz & Stegun 9.7.1], exact to round-off there."""
    if kappa < BESSEL_ASYMPTOTIC_FROM:
        return float(special.ive(nu, kappa))
    mu, z = 4.0 * nu * nu, 8.0 * kappa
    series = 1.0 - (mu - 1.0) / z + (mu - 1.0) * (mu - 9.0) / (2.0 * z * z)
    return series / (math.sqrt(2.0 * math.pi) * math.sqrt(kappa))  # no overflow at kappa = 1e308


def _sphere_von_mises_fisher(g: Array, kappa: float, d: int) -> Array:
    """The sphere's closed form: g kappa / (2 pi (1 - e^{-2 kappa})), 1 / (4 pi) at kappa = 0."""
    if kappa == 0.0:
        return g / (4.0 * np.pi)
    return g * kappa / (2.0 * np.pi * -np.expm1(-2.0 * kappa))


#: domain name -> its own normalization of the von Mises-Fisher density, where it has a closed
#: form; every other domain uses :func:`von_mises_fisher_normalized`
VON_MISES_FISHER_CONSTANTS: dict[str, Callable[[Array, float, int], Array]] = {
    "sphere": _sphere_von_mises_fisher
}


def von_mises_fisher_constant(d: int) -> Callable[[Array, float, int], Array]:
    """``(g, kappa, d) -> g e^kappa C_d(kappa)`` on the domain of dimension ``d``: its entry of
    :data:`VON_MISES_FISHER_CONSTANTS`, else the general :func:`von_mises_fisher_normalized`."""
    try:
        name = domain_of_dimension(d).name
    except ValueError:  # a sphere no domain is (the zonal domain's S^{d-1})
        return von_mises_fisher_normalized
    return VON_MISES_FISHER_CONSTANTS.get(name, von_mises_fisher_normalized)


@INITIAL_DENSITIES.register("von_mises_fisher")
@dataclass(frozen=True)
class VonMisesFisher:
    """Mixture sum_i w_i vMF(x; mu_i, kappa_i) of von Mises-Fisher densities.

    Parameters (TOML)
    -----------------
    means : list of unit vectors of R^d
    kappas : list of concentrations >= 0, one per mean (default all 1)
    weights : list of positive mixture weights (normalized to sum 1; default equal)
    """

    means: tuple[tuple[float, ...], ...]
    kappas: tuple[float, ...]
    weights: tuple[float, ...]
    #: the required key and its refusal when missing
    required: ClassVar[dict[str, str]] = {
        "means": "is required for 'von_mises_fisher' "
        "(a list of unit vectors, e.g. means = [[1.0, 0.0]])"
    }

    @classmethod
    def from_params(
        cls, params: Mapping[str, Any], d: int, base_dir: Path, key: str = "initial"
    ) -> "VonMisesFisher":
        check_params(params, key, ["means", "kappas", "weights"], required=cls.required)
        means = as_unit_vectors(params["means"], f"{key}.means", d)
        m = len(means)
        kappas = as_float_list(
            params.get("kappas", [1.0] * m), f"{key}.kappas", length=m, minimum=0.0
        )
        weights = as_float_list(
            params.get("weights", [1.0] * m), f"{key}.weights", length=m, minimum=0.0, strict=True
        )
        largest = max(weights)  # weights near 1.8e308: their sum would overflow
        total = sum(w / largest for w in weights)
        return cls(means, kappas, tuple(w / largest / total for w in weights))

    def __call__(self, x: Array) -> Array:
        out = np.zeros(np.shape(x)[:-1])
        for mu, kappa, w in zip(self.means, self.kappas, self.weights):
            out += w * von_mises_fisher_density(x, np.array(mu), kappa)
        return out

    def log_density(self, x: Array) -> Array:
        """log of the mixture, summed over its components in the log domain (finite far from
        the means of very concentrated components, and for every d)."""
        logs = [math.log(w) + log_f(x) for w, log_f, _ in self.components()]
        out = logs[0]
        for more in logs[1:]:
            out = np.logaddexp(out, more)
        return out

    def components(self) -> list[tuple[float, Callable[[Array], Array], float]]:
        """(weight, log density, width) of each component, the width 1 / sqrt(kappa) in radians
        (inf for kappa = 0): :func:`sample_normalized` samples apart, in the log domain, the
        components far narrower than the grid's cells, and
        :func:`~spheredens.targets.projection_measure` sums Pi_# over them."""
        return [
            (
                w,
                functools.partial(von_mises_fisher_log_density, mean=np.array(mu), kappa=kappa),
                math.inf if kappa == 0.0 else kappa**-0.5,
            )
            for mu, kappa, w in zip(self.means, self.kappas, self.weights)
        ]

    @property
    def dimension(self) -> int:
        """Dimension of the domain S^{d-1} of the density (1: the circle, 2: the sphere)."""
        return len(self.means[0]) - 1

    def to_params(self) -> dict[str, Any]:
        return {
            "means": [list(m) for m in self.means],
            "kappas": list(self.kappas),
            "weights": list(self.weights),
        }


#: a mixture component narrower than this fraction of the grid's largest cell (kappa h^2 above
#: 900) is sampled apart in the log domain (:func:`sample_normalized`): its samples underflow
#: or miss its peak, and only its weight, put on the cells nearest its mean, is left of it
SUBGRID_WIDTH = 1.0 / 30.0


def _sampled_from_log(
    log_f: Callable[[Array], Array], sample: Callable[[Any], Array], weight: Array
) -> Array:
    """``sample`` of exp(log_f), normalized to sum(values * weight) = 1, formed in the log
    domain: the largest log value at any sample point is found first (a first pass), then
    exp(log_f - largest) is sampled, so that its largest sample is 1 and the discrete mass
    is positive however concentrated the density is."""
    largest = [-math.inf]

    def probe(x: Array) -> Array:
        largest[0] = max(largest[0], float(np.max(log_f(x))))
        return np.zeros(np.shape(x)[:-1])

    sample(probe)
    with np.errstate(under="ignore"):
        values = np.asarray(sample(lambda x: np.exp(log_f(x) - largest[0])), dtype=float)
    return values / np.sum(values * weight)


def sample_normalized(
    f: Any, sample: Callable[[Any], Array], weight: Array, *, key: str = "initial"
) -> Array:
    """``sample(f)`` (cell averages or point values of the density f on a grid) normalized to
    unit discrete mass sum(values * weight) = 1, checked finite.

    A mixture with :meth:`~VonMisesFisher.components` of which one is narrower than
    :data:`SUBGRID_WIDTH` times the largest cell (whose samples underflow or miss its peak:
    kappa = 1e10), or whose samples have no finite positive mass, is sampled component by
    component in the log domain (:func:`_sampled_from_log`), each normalized to its weight:
    a component far narrower than a cell puts its weight on the cells nearest its mean, as
    its exact cell averages would (with a warning naming ``key.kappas``).

    Raises
    ------
    ConfigError
        Naming ``key``, when the values are not finite or their mass is not positive: nothing
        is written from such a state.
    """
    values = np.asarray(sample(f), dtype=float)
    with np.errstate(all="ignore"):
        mass = float(np.sum(values * weight))
    parts = f.components() if hasattr(f, "components") else None
    if parts is not None:
        cell = float(np.max(weight)) ** (1.0 / f.dimension)  # the largest cell's size, radians
        narrow = [width for _, _, width in parts if width < SUBGRID_WIDTH * cell]
        if narrow or not (math.isfinite(mass) and mass > 0.0):
            warnings.warn(
                f"{key}.kappas: a component of the initial density (width 1 / sqrt(kappa) = "
                f"{min(width for _, _, width in parts):.3g}) is narrower than this grid resolves "
                f"(cells of {cell:.3g}); its weight is put on the cells or nodes nearest its mean: "
                "refine the grid to resolve it",
                SpheredensWarning,
                stacklevel=2,
            )
            values = sum(w * _sampled_from_log(log_f, sample, weight) for w, log_f, _ in parts)
            with np.errstate(all="ignore"):
                mass = float(np.sum(values * weight))
    with np.errstate(all="ignore"):
        normalized = values / mass
    if not (np.isfinite(mass) and mass > 0.0 and np.all(np.isfinite(normalized))):
        bad = (
            "values that are not finite" if not np.all(np.isfinite(values)) else f"mass {mass:.3g}"
        )
        raise ConfigError(
            key,
            f"the initial density sampled on this grid has {bad}, so no initial "
            "state can be formed (nothing was written); make it wider or refine the grid",
        )
    return normalized


@INITIAL_DENSITIES.register("random_smooth")
@dataclass(frozen=True)
class RandomSmooth:
    """rho proportional to exp(amplitude * f), f a random band-limited field (seeded).

    On the circle
    f(theta) = sum_{k=1}^{bandwidth} (a_k cos k theta + b_k sin k theta) / sqrt(bandwidth)
    with a_k, b_k independent standard normal (``numpy.random.default_rng(seed)``). On the
    sphere f = sum_{l=1}^{bandwidth} sum_{j=1}^{2l+1} g_lj P_l(<x, n_lj>) / sqrt(bandwidth) with
    Legendre polynomials P_l, random directions n_lj (uniform) and g_lj standard normal: each
    degree-l term is a spherical harmonic of degree l, and f has unit variance at every point.
    The normalizing constant comes from a Gauss product quadrature fine enough to be exact to
    round-off (refined until two rules agree to round-off).

    Parameters (TOML)
    -----------------
    seed : int (default 0); bandwidth : int >= 1 (default 6); amplitude : float >= 0 (default 1)

    The domains with a field and its quadrature are those of
    :data:`~spheredens._random_field.RANDOM_FIELDS`; elsewhere the name is refused with a
    ConfigError.
    """

    d: int
    seed: int
    bandwidth: int
    amplitude: float

    @classmethod
    def from_params(
        cls, params: Mapping[str, Any], d: int, base_dir: Path, key: str = "initial"
    ) -> "RandomSmooth":
        check_keys(params, ["seed", "bandwidth", "amplitude"], key)
        part = _domain_entry(RANDOM_FIELDS, d, "random_smooth", f"{key}.name", "random_smooth")
        seed = as_int(params.get("seed", 0), f"{key}.seed", minimum=0)
        bandwidth = as_int(params.get("bandwidth", 6), f"{key}.bandwidth", minimum=1)
        if bandwidth > part.max_bandwidth:
            top = part.max_bandwidth
            raise ConfigError(
                f"{key}.bandwidth",
                f"= {bandwidth} is more than {top}, the largest on the "
                f"{domain_of_dimension(d).name}: the set-up would take about "
                f"{_duration(part.setup_seconds(bandwidth))} (about "
                f"{_duration(part.setup_seconds(top))} at {top}); use bandwidth <= {top}",
            )
        amplitude = as_float(
            params.get("amplitude", 1.0), f"{key}.amplitude", minimum=0.0, maximum=50.0
        )
        return cls(d, seed, bandwidth, amplitude)

    def _coefficients(self) -> tuple[Array, Array]:
        rng = np.random.default_rng(self.seed)
        ab = rng.standard_normal((2, self.bandwidth)) / math.sqrt(self.bandwidth)
        return ab[0], ab[1]

    def _log_unnormalized(self, x: Array) -> Array:
        return RANDOM_FIELDS[domain_of_dimension(self.d).name].field(self, x)

    def _log_mass(self) -> tuple[float, float]:
        """(shift, mass) with mass = int exp(log_unnormalized - shift), by a quadrature that is
        exact to round-off for this entire, band-limited exponent (computed once per parameters)."""
        return _random_smooth_log_mass(self)

    def _compute_log_mass(self) -> tuple[float, float]:
        """The quadrature with m = 8 bandwidth + 64 + 8 amplitude points per angle, then 1.5 times
        as many until two agree to round-off (it converges spectrally; m alone was off by 4e-8 at
        bandwidth 40, amplitude 2, and by 2e-3 at 200, 5)."""
        log_mass = RANDOM_FIELDS[domain_of_dimension(self.d).name].log_mass
        m = 8 * self.bandwidth + 64 + int(8 * self.amplitude)
        shift, mass = log_mass(self, m)
        for _ in range(MASS_REFINEMENTS):
            m = 2 * ((3 * m) // 4)  # 1.5 m, even
            finer = log_mass(self, m)
            close = abs(finer[0] + math.log(finer[1]) - shift - math.log(mass)) <= 1e-14 * (
                1.0 + abs(shift)
            )
            shift, mass = finer
            if close:
                break
        return shift, mass

    def __call__(self, x: Array) -> Array:
        shift, mass = self._log_mass()
        return np.exp(self._log_unnormalized(x) - shift) / mass

    def to_params(self) -> dict[str, Any]:
        return {"seed": self.seed, "bandwidth": self.bandwidth, "amplitude": self.amplitude}


def _domain_entry(table: Mapping[str, Any], d: int, role: str, key: str, name: str) -> Any:
    """The entry of ``table`` (domain name -> what the initial density ``name`` needs there,
    its ``role``) for the domain of dimension ``d`` (:func:`~spheredens.geometry.domain_entry`);
    a one-line ConfigError naming ``key`` on a domain that has none."""
    try:
        return domain_entry(table, domain_of_dimension(d), role, f"the initial density {name!r}")
    except NotProvided as exc:
        raise ConfigError(key, f"{exc}; choose another initial density") from None


def _duration(seconds: float) -> str:
    """'0.2 s', '40 s', '12 min', '3 h', '5 days' (for the refusals of costly parameters)."""
    if seconds < 100:
        return f"{seconds:.2g} s"
    for unit, size in (("min", 60.0), ("h", 3600.0), ("days", 86400.0)):
        if seconds < 100 * size or unit == "days":
            return f"{seconds / size:.2g} {unit}"
    return f"{seconds:.2g} s"


@functools.lru_cache(maxsize=32)
def _random_smooth_log_mass(density: RandomSmooth) -> tuple[float, float]:
    return density._compute_log_mass()


@INITIAL_DENSITIES.register("file")
@dataclass(frozen=True)
class FromFile:
    """A density read from a netCDF file in the docs/dataset.md layout, interpolated to any point.

    Parameters (TOML)
    -----------------
    path : str
        File path, relative to the configuration file's folder.
    variable : str
        Variable holding the density (default ``"rho"``).
    time : float
        Which snapshot to take when the variable has a ``time`` axis (default: the last one).

    Notes
    -----
    The density must integrate to 1 within 1e-6 with the file's own ``weight`` (or, without
    one, with uniform weights 2 pi / n on an evenly spaced circle grid; a sphere file needs its
    ``weight``). Undershoots down to -1e-2 x max (Gibbs oscillations of a spectral run) are
    clipped to 0. Values at points are interpolated linearly (periodically in theta or
    longitude, clamped beyond the extreme latitudes), which keeps them non-negative; the solver
    renormalizes the discrete mass afterwards. A sphere file on a mesh of cells (``fv``'s
    reduced mesh: dims ``("cell",)`` with ``lat_bounds``, ``lon_bounds``) is the
    piecewise-constant density of its cell averages, and ``log_lagrangian`` takes each cell
    as a particle with its mass exactly (:meth:`cells`): a run continues another run's
    snapshot, its time counted from there.
    """

    path: str
    variable: str
    time: float | None
    theta: Any  # circle: angles (n,); sphere: (lat, lon) in degrees, or the mesh's CellBoxes
    values: Array
    layout: DensityFile = field(compare=False, repr=False)
    #: the required key and its refusal when missing
    required: ClassVar[dict[str, str]] = {
        "path": "is required for 'file' (a netCDF file with the density)"
    }

    @classmethod
    def from_params(
        cls, params: Mapping[str, Any], d: int, base_dir: Path, key: str = "initial"
    ) -> "FromFile":
        check_params(params, key, ["path", "variable", "time"], required=cls.required)
        path = as_str(params["path"], f"{key}.path")
        variable = as_str(params.get("variable", "rho"), f"{key}.variable")
        time = params.get("time")
        if time is not None:
            time = as_float(time, f"{key}.time")
        full = (base_dir / path) if not Path(path).is_absolute() else Path(path)
        layouts = _domain_entry(DENSITY_FILES, d, "density_file", f"{key}.name", "file")
        layout, coords, values = read_density(full, variable, time, key, layouts)
        return cls(path, variable, time, coords, values, layout)

    def __call__(self, x: Array) -> Array:
        return self.layout.interpolate(self.theta, self.values, x)

    def cells(self) -> tuple[Array, Array, Array] | None:
        """A mesh file's cells as particles (masses, centres (n, 3), shapes (n, 3, 2):
        :meth:`~spheredens._density_file.CellBoxes.particles`); ``None`` for a file of values
        at points."""
        if isinstance(self.theta, CellBoxes):
            return self.theta.particles(self.values)
        return None

    def to_params(self) -> dict[str, Any]:
        out: dict[str, Any] = {"path": self.path, "variable": self.variable}
        if self.time is not None:
            out["time"] = self.time
        return out
