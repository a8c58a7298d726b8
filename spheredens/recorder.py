"""Snapshots -> xarray.Dataset in schema ``spheredens-1`` (DATASET.md)."""
from __future__ import annotations

import datetime as _dt
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ._version import __version__
from .config import RunConfig
from .diagnostics import energy_defined, interaction_energy, mass, projection_distance
from .problem import Problem

Array = NDArray[np.float64]

SCHEMA = "spheredens-1"


class Recorder:
    """Observer collecting the density and its diagnostics at every snapshot time.

    ``dataset()`` builds the Dataset at any moment (with the snapshots so far), so a file
    written midway is complete in itself.
    """

    def __init__(self, problem: Problem, scheme: Any, config: RunConfig) -> None:
        self.problem = problem
        self.scheme = scheme
        self.config = config
        self.grid = scheme.grid
        self.times: list[float] = []
        self.rho: list[Array] = []
        self.diagnostics: dict[str, list[float]] = {"mass": [], "min_rho": [], "energy": [],
                                                    "w2_projection": []}
        self.status: dict[str, Any] = {"run_status": "partial", "stop_reason": "running",
                                       "stop_message": "", "n_steps": 0, "wall_time_seconds": 0.0}
        self._energy_reason = energy_defined(problem.model)
        self._w2 = None
        self._w2_reason = ""

    def start(self, info: dict[str, Any]) -> None:
        rho0 = self.scheme.density(info["initial_state"])
        # the projection target is built from rho_0 (marginal over slices)
        marginal0 = np.sum(self.problem.xi_weight[:, None] * rho0, axis=0)
        self._w2, self._w2_reason = projection_distance(self.problem.model, self.grid.theta,
                                                        self.grid.weight, marginal0)

    def observe(self, t: float, state: Array) -> None:
        rho = np.array(self.scheme.density(state), dtype=float)
        xi_w = self.problem.xi_weight
        marginal = np.sum(xi_w[:, None] * rho, axis=0)
        self.times.append(float(t))
        self.rho.append(rho)
        d = self.diagnostics
        d["mass"].append(mass(rho, self.grid.weight, xi_w))
        d["min_rho"].append(float(rho.min()))
        d["energy"].append(np.nan if self._energy_reason else
                           interaction_energy(marginal, self.grid.points, self.grid.weight,
                                              self.problem.model.beta))
        d["w2_projection"].append(np.nan if self._w2 is None else self._w2(marginal))

    def finish(self, result: Any) -> None:
        self.status = {"run_status": "complete" if result.completed else "partial",
                       "stop_reason": result.stop_reason, "stop_message": result.message,
                       "n_steps": int(result.n_steps), "wall_time_seconds": float(result.wall_time)}

    def dataset(self):
        """The Dataset of the snapshots recorded so far."""
        import xarray as xr

        problem, grid, cfg = self.problem, self.grid, self.config
        model = problem.model
        space = grid.space_dims
        rho = np.array(self.rho).reshape((len(self.rho), problem.n_xi) + grid.shape)
        if problem.has_auxiliary:
            rho_var = (("time", "xi") + space, rho)
        else:
            rho_var = (("time",) + space, rho[:, 0])
        coords = {
            "time": ("time", np.array(self.times, dtype=float),
                     {"long_name": "model time", "units": "1", "standard_name": "time"}),
            "theta": ("theta", grid.theta,
                      {"long_name": "angle on the circle, x = (cos theta, sin theta)",
                       "units": "radian"}),
        }
        if problem.has_auxiliary:
            coords["xi"] = ("xi", problem.xi, {"long_name": "auxiliary variable of each slice"})
        data_vars: dict[str, Any] = {
            "rho": rho_var + ({"long_name": "density with respect to arc length",
                               "units": "radian-1"},),
            "weight": (space, grid.weight, {"long_name": "quadrature weight (cell length)",
                                            "units": "radian"}),
        }
        if problem.has_auxiliary:
            data_vars["xi_weight"] = ("xi", problem.xi_weight,
                                      {"long_name": "mass of each slice", "units": "1"})
        for name in ("Q", "K", "V"):
            data_vars[name] = (("row", "col"), np.asarray(getattr(model, name)),
                               {"long_name": f"attention matrix {name}", "units": "1"})
        d = self.diagnostics
        data_vars["mass"] = ("time", np.array(d["mass"]),
                             {"long_name": "total mass sum(rho * weight)", "units": "1"})
        data_vars["min_rho"] = ("time", np.array(d["min_rho"]),
                                {"long_name": "minimum of rho over the grid", "units": "radian-1"})
        energy_attrs = {"long_name": "interaction energy E_beta (MODELS.md section 4)", "units": "1"}
        if self._energy_reason:
            energy_attrs["comment"] = f"not defined: {self._energy_reason}"
        data_vars["energy"] = ("time", np.array(d["energy"]), energy_attrs)
        w2_attrs = {"long_name": "W2 distance to the zero-temperature target Pi_# rho_0",
                    "units": "radian"}
        if self._w2 is not None:
            w2_attrs["comment"] = ("exact W2 on the circle (POT wasserstein_circle, geodesic cost); "
                                   "target atoms at angles " + ", ".join(f"{a:.12g}" for a in self._w2.atoms)
                                   + " with masses " + ", ".join(f"{m:.12g}" for m in self._w2.masses))
        else:
            w2_attrs["comment"] = f"not defined: {self._w2_reason}"
        data_vars["w2_projection"] = ("time", np.array(d["w2_projection"]), w2_attrs)
        now = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        attrs: dict[str, Any] = {
            "Conventions": "CF-1.10",
            "spheredens_schema": SCHEMA,
            "spheredens_version": __version__,
            "model": model.name,
            "domain": problem.domain,
            "scheme": cfg.discretization.scheme,
            "beta": float(model.beta),
            "config": cfg.to_toml(),
            "title": f"spheredens {model.name} on the {problem.domain}, beta = {model.beta:g}",
            "history": f"{now}: written by spheredens {__version__}",
            "n": int(grid.n),
            "cfl": float(cfg.time.cfl),
            "t_end": float(cfg.time.t_end),
        }
        attrs.update({k: v for k, v in self.scheme.attributes().items()})
        attrs.update(self.status)
        return xr.Dataset(data_vars, coords=coords, attrs=attrs)
