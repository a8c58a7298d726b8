"""Named initial densities: functions of points x in S^{d-1}, normalized to unit mass.

Each registered class validates its own parameters (``from_params``), is called on points of
shape (n, d) and returns density values with respect to the uniform measure (arc length on
the circle, area on the sphere). ``to_params`` gives back the TOML table that rebuilt it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import numpy as np
from numpy.typing import NDArray
from scipy import special

from ._registry import Registry
from ._validate import as_float, as_float_list, as_int, as_str, as_unit_vectors, check_keys
from .exceptions import ConfigError
from .geometry import circle_angle, sphere_area

Array = NDArray[np.float64]

INITIAL_DENSITIES = Registry("initial density")


@INITIAL_DENSITIES.register("uniform")
@dataclass(frozen=True)
class Uniform:
    """The uniform density 1/|S^{d-1}|."""

    d: int

    @classmethod
    def from_params(cls, params: Mapping[str, Any], d: int, base_dir: Path, key: str = "initial"
                    ) -> "Uniform":
        check_keys(params, [], key)
        return cls(d)

    def __call__(self, x: Array) -> Array:
        return np.full(np.shape(x)[:-1], 1.0 / sphere_area(self.d))

    def to_params(self) -> dict[str, Any]:
        return {}


def von_mises_fisher_density(x: Array, mean: Array, kappa: float) -> Array:
    """Normalized von Mises-Fisher density on S^{d-1}, d = 2 or 3, stable for large kappa.

    Circle: exp(kappa <mu, x>) / (2 pi I_0(kappa)); sphere: kappa exp(kappa <mu, x>) / (4 pi sinh kappa).
    Both are evaluated as exp(kappa (<mu, x> - 1)) times a scaled constant, so kappa = 1e4 is fine.
    """
    mean = np.asarray(mean, dtype=float)
    d = mean.shape[0]
    g = np.exp(kappa * (x @ mean - 1.0))
    if d == 2:
        return g / (2.0 * np.pi * special.ive(0, kappa))
    if kappa == 0.0:
        return g / (4.0 * np.pi)
    return g * kappa / (2.0 * np.pi * -np.expm1(-2.0 * kappa))


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

    @classmethod
    def from_params(cls, params: Mapping[str, Any], d: int, base_dir: Path, key: str = "initial"
                    ) -> "VonMisesFisher":
        check_keys(params, ["means", "kappas", "weights"], key)
        if "means" not in params:
            raise ConfigError(f"{key}.means", "is required for 'von_mises_fisher' "
                              "(a list of unit vectors, e.g. means = [[1.0, 0.0]])")
        means = as_unit_vectors(params["means"], f"{key}.means", d)
        m = len(means)
        kappas = as_float_list(params.get("kappas", [1.0] * m), f"{key}.kappas", length=m, minimum=0.0)
        weights = as_float_list(params.get("weights", [1.0] * m), f"{key}.weights", length=m,
                                minimum=0.0, strict=True)
        total = sum(weights)
        return cls(means, kappas, tuple(w / total for w in weights))

    def __call__(self, x: Array) -> Array:
        out = np.zeros(np.shape(x)[:-1])
        for mu, kappa, w in zip(self.means, self.kappas, self.weights):
            out += w * von_mises_fisher_density(x, np.array(mu), kappa)
        return out

    def to_params(self) -> dict[str, Any]:
        return {"means": [list(m) for m in self.means], "kappas": list(self.kappas),
                "weights": list(self.weights)}


@INITIAL_DENSITIES.register("random_smooth")
@dataclass(frozen=True)
class RandomSmooth:
    """rho proportional to exp(amplitude * f), f a random band-limited field (seeded).

    On the circle f(theta) = sum_{k=1}^{bandwidth} (a_k cos k theta + b_k sin k theta) / sqrt(bandwidth)
    with a_k, b_k independent standard normal (``numpy.random.default_rng(seed)``).

    Parameters (TOML)
    -----------------
    seed : int (default 0); bandwidth : int >= 1 (default 6); amplitude : float >= 0 (default 1)
    """

    d: int
    seed: int
    bandwidth: int
    amplitude: float

    @classmethod
    def from_params(cls, params: Mapping[str, Any], d: int, base_dir: Path, key: str = "initial"
                    ) -> "RandomSmooth":
        check_keys(params, ["seed", "bandwidth", "amplitude"], key)
        if d != 2:
            raise ConfigError(f"{key}.name", "'random_smooth' is only available on the circle so far")
        seed = as_int(params.get("seed", 0), f"{key}.seed", minimum=0)
        bandwidth = as_int(params.get("bandwidth", 6), f"{key}.bandwidth", minimum=1, maximum=4096)
        amplitude = as_float(params.get("amplitude", 1.0), f"{key}.amplitude", minimum=0.0,
                             maximum=50.0)
        return cls(d, seed, bandwidth, amplitude)

    def _coefficients(self) -> tuple[Array, Array]:
        rng = np.random.default_rng(self.seed)
        ab = rng.standard_normal((2, self.bandwidth)) / math.sqrt(self.bandwidth)
        return ab[0], ab[1]

    def _log_unnormalized(self, theta: Array) -> Array:
        a, b = self._coefficients()
        k = np.arange(1, self.bandwidth + 1)
        phase = np.multiply.outer(theta, k)
        return self.amplitude * (np.cos(phase) @ a + np.sin(phase) @ b)

    def __call__(self, x: Array) -> Array:
        # normalization by the trapezoid rule on 8 * bandwidth + 64 points per period is exact
        # to round-off for this entire, band-limited exponent (geometric convergence)
        m = 8 * self.bandwidth + 64 + int(8 * self.amplitude)
        fine = self._log_unnormalized(2.0 * np.pi * np.arange(m) / m)
        shift = fine.max()
        mass = 2.0 * np.pi * np.mean(np.exp(fine - shift))
        return np.exp(self._log_unnormalized(circle_angle(x)) - shift) / mass

    def to_params(self) -> dict[str, Any]:
        return {"seed": self.seed, "bandwidth": self.bandwidth, "amplitude": self.amplitude}


@INITIAL_DENSITIES.register("file")
@dataclass(frozen=True)
class FromFile:
    """A density read from a netCDF file in the DATASET.md layout, interpolated to any point.

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
    one, with uniform weights 2 pi / n on an evenly spaced circle grid). Values are
    interpolated linearly and periodically in theta, which keeps them non-negative; the solver
    renormalizes the discrete mass afterwards.
    """

    path: str
    variable: str
    time: float | None
    theta: Array
    values: Array

    @classmethod
    def from_params(cls, params: Mapping[str, Any], d: int, base_dir: Path, key: str = "initial"
                    ) -> "FromFile":
        check_keys(params, ["path", "variable", "time"], key)
        if "path" not in params:
            raise ConfigError(f"{key}.path", "is required for 'file' (a netCDF file with the density)")
        path = as_str(params["path"], f"{key}.path")
        variable = as_str(params.get("variable", "rho"), f"{key}.variable")
        time = params.get("time")
        if time is not None:
            time = as_float(time, f"{key}.time")
        if d != 2:
            raise ConfigError(f"{key}.name", "'file' is only available on the circle so far")
        full = (base_dir / path) if not Path(path).is_absolute() else Path(path)
        theta, values = _read_circle_density(full, variable, time, f"{key}")
        return cls(path, variable, time, theta, values)

    def __call__(self, x: Array) -> Array:
        return np.interp(circle_angle(x), self.theta, self.values, period=2.0 * np.pi)

    def to_params(self) -> dict[str, Any]:
        out: dict[str, Any] = {"path": self.path, "variable": self.variable}
        if self.time is not None:
            out["time"] = self.time
        return out


def _read_circle_density(path: Path, variable: str, time: float | None, key: str
                         ) -> tuple[Array, Array]:
    import xarray as xr

    if not path.is_file():
        raise ConfigError(f"{key}.path", f"file {str(path)!r} does not exist")
    try:
        ds = xr.open_dataset(path)
    except Exception as exc:  # any reader failure becomes a one-line refusal
        raise ConfigError(f"{key}.path", f"cannot read {str(path)!r} as netCDF: {exc}") from None
    with ds:
        if variable not in ds:
            raise ConfigError(f"{key}.variable", f"{variable!r} is not in {str(path)!r}; "
                              f"variables there: {', '.join(map(str, ds.data_vars))}")
        rho = ds[variable]
        if "time" in rho.dims:
            if time is None:
                rho = rho.isel(time=-1)
            else:
                idx = int(np.argmin(np.abs(ds["time"].values - time)))
                if abs(float(ds["time"].values[idx]) - time) > 1e-9 * max(1.0, abs(time)):
                    raise ConfigError(f"{key}.time", f"= {time} is not a snapshot time of "
                                      f"{str(path)!r} (it has {ds.sizes['time']} times in "
                                      f"[{float(ds['time'].min())}, {float(ds['time'].max())}])")
                rho = rho.isel(time=idx)
        if rho.dims != ("theta",):
            raise ConfigError(f"{key}.variable", f"{variable!r} in {str(path)!r} has dims {rho.dims}; "
                              "a circle density needs dims ('theta',) (after choosing a time)")
        theta = np.asarray(ds["theta"].values, dtype=float)
        values = np.asarray(rho.values, dtype=float)
        n = theta.size
        weight = (np.asarray(ds["weight"].values, dtype=float) if "weight" in ds
                  else np.full(n, 2.0 * np.pi / n))
    if n < 2 or not np.all(np.isfinite(values)) or np.any(values < 0):
        raise ConfigError(f"{key}.variable", f"{variable!r} in {str(path)!r} must be finite and "
                          "non-negative on at least 2 points")
    mass = float(np.sum(values * weight))
    if abs(mass - 1.0) > 1e-6:
        raise ConfigError(f"{key}.path", f"the density {variable!r} in {str(path)!r} has mass "
                          f"{mass:.10g}, not 1 (tolerance 1e-6); normalize it first")
    order = np.argsort(np.mod(theta, 2.0 * np.pi))
    return np.mod(theta, 2.0 * np.pi)[order], values[order]
