"""Snapshots -> xarray.Dataset in schema ``spheredens-1`` (DATASET.md)."""
from __future__ import annotations

import datetime as _dt
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ._version import __version__
from .config import RunConfig
from .exceptions import SchemaError
from .diagnostics import (energy_defined, interaction_energy, interaction_energy_spectral, mass,
                          projection_distance)
from .problem import Problem
from .simulate import Observer

Array = NDArray[np.float64]

SCHEMA = "spheredens-1"

#: slice diagnostics of usa_av: name -> (long_name, units)
SLICE_VARIABLES = {
    "rho_marginal": ("marginal density sum_k r_k rho_k", ""),
    "slice_mode": ("mode of each slice (unit vector)", "1"),
    "slice_spread": ("W2 of each normalized slice to the Dirac mass at its mode", "radian"),
    "marginal_mean_norm": ("|int x rho_marginal| (1 for a Dirac mass)", "1"),
    "marginal_w2_dirac": ("W2 of the marginal to the nearest Dirac mass (collapse measure)", "radian"),
    "orbit_z": ("z of the fitted orbit x*(xi) = G(xi)^T z", "1"),
    "orbit_distance": ("rms over slices (weights r_k) of d(slice mode, G(xi_k)^T z)", "radian"),
}


class Recorder(Observer):
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
                                                    "w2_projection": [], "w2_terminal": []}
        for name in scheme.diagnostics:  # e.g. filter_effect
            self.diagnostics[name] = []
        self._stepper: Any = None  # the loop's Stepper (retried steps), from start()
        self.status: dict[str, Any] = {"run_status": "partial", "stop_reason": "running",
                                       "stop_message": "", "n_steps": 0, "wall_time_seconds": 0.0}
        self._energy_reason = energy_defined(problem.model)
        from .targets import terminal_subspace

        self._terminal = terminal_subspace(problem.model)
        pts = self.grid.points
        self._points = pts
        self._w2 = None
        self._w2_reason = ""
        self.checkpoint: tuple[float, Array, int] | None = None
        #: per-snapshot arrays of the slice diagnostics (usa_av), name -> list of arrays
        self.slice_diagnostics: dict[str, list[Array]] = (
            {name: [] for name in SLICE_VARIABLES} if problem.has_auxiliary else {})

    def set_checkpoint(self, t: float, state: Array, steps: int) -> None:
        """Remember the full solver state at a step boundary; written with the next file."""
        self.checkpoint = (float(t), np.array(state), int(steps))

    def restore(self, ds: Any) -> tuple[float, Array, int]:
        """Take over the snapshots of a partial run file and return its checkpoint
        (t, state, steps) to continue from."""
        if "checkpoint_state" not in ds:
            raise SchemaError("the file has no checkpoint to resume from")
        rho = np.asarray(ds["rho"].values)
        if not self.problem.has_auxiliary:
            rho = rho[:, None]
        self.times = [float(t) for t in ds["time"].values]
        self.rho = [r for r in rho]
        for name in self.diagnostics:
            self.diagnostics[name] = [float(v) for v in ds[name].values]
        for name in self.slice_diagnostics:
            self.slice_diagnostics[name] = [np.asarray(v) for v in ds[name].values]
        raw = np.asarray(ds["checkpoint_state"].values)
        shape = tuple(int(v) for v in str(ds.attrs["checkpoint_shape"]).split(","))
        state = (raw[0] + 1j * raw[1]) if int(ds.attrs["checkpoint_complex"]) else raw[0]
        self.checkpoint = (float(ds.attrs["checkpoint_time"]), state.reshape(shape),
                           int(ds.attrs["checkpoint_steps"]))
        return self.checkpoint

    def start(self, info: dict[str, Any]) -> None:
        self._stepper = info.get("stepper")
        # the target of w2_projection always comes from rho_0 (also when resuming)
        rho0 = self.scheme.density(self.scheme.initial_state())
        # the projection target is built from rho_0 (marginal over slices)
        marginal0 = np.tensordot(self.problem.xi_weight, rho0, axes=1)
        self._w2, self._w2_reason = projection_distance(self.problem.model, self.grid, marginal0,
                                                        self.problem.initial)

    def observe(self, t: float, state: Array) -> None:
        rho = np.array(self.scheme.density(state), dtype=float)
        xi_w = self.problem.xi_weight
        marginal = np.tensordot(xi_w, rho, axes=1)
        self.times.append(float(t))
        self.rho.append(rho)
        d = self.diagnostics
        d["mass"].append(mass(rho, self.grid.weight, xi_w))
        d["min_rho"].append(float(rho.min()))
        beta = self.problem.model.beta
        if self.slice_diagnostics:
            flat = rho.reshape(len(rho), -1)
            d["energy"].append(self.scheme.interaction.energy(flat))
            self._observe_slices(flat, marginal.reshape(-1))
        elif self._energy_reason:
            d["energy"].append(np.nan)
        elif self.scheme.evaluator_inputs == "coefficients":  # exact for the band-limited density
            d["energy"].append(interaction_energy_spectral(marginal, self.grid, beta))
        else:
            d["energy"].append(interaction_energy(marginal, self.grid.points, self.grid.weight, beta))
        for name in self.scheme.diagnostics:
            d[name].append(self.scheme.diagnostic(name, state))
        d["w2_projection"].append(np.nan if self._w2 is None else self._w2(marginal))
        d["w2_terminal"].append(np.nan if self._terminal.basis is None else
                                self._terminal.w2(marginal, self._points, self.grid.weight))

    def _observe_slices(self, rho: Array, marginal: Array) -> None:
        from . import slices

        pts = self._points.reshape(-1, self._points.shape[-1])
        w = self.grid.weight.reshape(-1)
        kernel = self.problem.model.auxiliary
        modes = slices.slice_modes(rho, pts, w)
        z, dist = slices.fit_orbit(modes, kernel.gauges, kernel.weight)
        gauge = kernel.uniform_coupling
        # in the grid's shape, as restore() reads it back from a file (resume)
        out = {"rho_marginal": marginal.reshape(self.grid.shape), "slice_mode": modes,
               "slice_spread": slices.slice_spread(rho, pts, w, modes),
               "marginal_mean_norm": np.array(slices.mean_norm(marginal, pts, w)),
               "marginal_w2_dirac": np.array(slices.w2_to_nearest_dirac(marginal, pts, w)),
               "orbit_z": z if gauge else np.full(len(z), np.nan),
               "orbit_distance": (np.array(float(np.sqrt(np.sum(kernel.weight * dist**2)))) if gauge
                                  else np.array(np.nan))}
        for name, value in out.items():
            self.slice_diagnostics[name].append(np.asarray(value, dtype=float))

    def finish(self, result: Any) -> None:
        self.status = {"run_status": "complete" if result.completed else "partial",
                       "stop_reason": result.stop_reason, "stop_message": result.message,
                       "n_steps": int(result.n_steps), "wall_time_seconds": float(result.wall_time)}

    def _slice_variables(self, space: tuple[str, ...]) -> dict[str, Any]:
        kernel = self.problem.model.auxiliary
        dims = {"rho_marginal": ("time",) + space, "slice_mode": ("time", "xi", "component"),
                "slice_spread": ("time", "xi"), "marginal_mean_norm": ("time",),
                "marginal_w2_dirac": ("time",), "orbit_z": ("time", "component"),
                "orbit_distance": ("time",)}
        out = {}
        for name, (long_name, units) in SLICE_VARIABLES.items():
            values = self.slice_diagnostics[name]
            shape = (len(self.times),) + (self.grid.shape if name == "rho_marginal" else
                                          np.shape(values[0]) if values else ())
            data = np.array(values).reshape(shape) if values else np.zeros((0,) + shape[1:])
            attrs = {"long_name": long_name,
                     "units": self.grid.rho_attrs["units"] if name == "rho_marginal" else units}
            if name.startswith("orbit") and not kernel.uniform_coupling:
                attrs["comment"] = f"not defined: kernel {kernel.name!r} has no gauge orbit (b != 1)"
            out[name] = (dims[name], data, attrs)
        out["gauge"] = (("xi", "row", "col"), kernel.gauges, {"long_name": "gauge G(xi_k)", "units": "1"})
        out["coupling"] = (("xi", "xi_other"), kernel.coupling,
                           {"long_name": "coupling b(xi_k, xi_l)", "units": "1"})
        return out

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
        coords = {"time": ("time", np.array(self.times, dtype=float),
                           {"long_name": "model time", "units": "1", "standard_name": "time"}),
                  **grid.dataset_coords()}
        if problem.has_auxiliary:
            coords["xi"] = ("xi", problem.xi, {"long_name": "auxiliary variable of each slice"})
        data_vars: dict[str, Any] = {
            "rho": rho_var + (dict(grid.rho_attrs),),
            "weight": (space, grid.weight, dict(grid.weight_attrs)),
        }
        if hasattr(grid, "dataset_variables"):  # mesh description (cell bounds)
            data_vars.update(grid.dataset_variables())
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
                                {"long_name": "minimum of rho over the grid",
                                 "units": grid.rho_attrs["units"]})
        if "filter_effect" in d:
            data_vars["filter_effect"] = ("time", np.array(d["filter_effect"]), {
                "long_name": "share of d rho/dt removed by the spectral filter "
                             "(||(1 - sigma) d rho/dt|| / ||d rho/dt||)", "units": "1"})
        energy_attrs = {"long_name": "interaction energy E_beta (MODELS.md section 4)", "units": "1"}
        if self._energy_reason:
            energy_attrs["comment"] = f"not defined: {self._energy_reason}"
        data_vars["energy"] = ("time", np.array(d["energy"]), energy_attrs)
        w2_attrs = {"long_name": "W2 distance to the zero-temperature target Pi_# rho_0",
                    "units": "radian"}
        if self._w2 is not None:
            w2_attrs["comment"] = self._w2.comment()
        else:
            w2_attrs["comment"] = f"not defined: {self._w2_reason}"
        data_vars["w2_projection"] = ("time", np.array(d["w2_projection"]), w2_attrs)
        data_vars["w2_terminal"] = ("time", np.array(d["w2_terminal"]), {
            "long_name": "W2 to the measures supported on the dominant eigenspace of V "
                         "(sqrt(int d(x, S cap E_V)^2 rho))", "units": "radian",
            "comment": self._terminal.definition + ("" if self._terminal.basis is not None else
                                                    "; the whole space: not defined")})
        if self.slice_diagnostics:
            data_vars.update(self._slice_variables(space))
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
            "cfl": float(cfg.time.cfl),
            "t_end": float(cfg.time.t_end),
        }
        attrs.update({k: v for k, v in self.scheme.attributes().items()})
        if self.scheme.positive:  # steps refused for a negative density and retried with dt / 2
            attrs["retried_steps"] = self._stepper.retried_steps if self._stepper is not None else 0
        if model.auxiliary is not None:
            attrs["auxiliary_kernel"] = model.auxiliary.name
        attrs.update(self.status)
        if self.checkpoint is not None:
            t_c, state, steps = self.checkpoint
            parts = np.stack([state.real, state.imag]) if np.iscomplexobj(state) else state.real[None]
            data_vars["checkpoint_state"] = (("checkpoint_part", "checkpoint_value"),
                                             parts.reshape(len(parts), -1),
                                             {"long_name": "full solver state at checkpoint_time "
                                                           "(real and imaginary parts for spectral "
                                                           "coefficients), for --resume"})
            attrs.update({"checkpoint_time": t_c, "checkpoint_steps": steps,
                          "checkpoint_shape": ",".join(map(str, state.shape)),
                          "checkpoint_complex": int(np.iscomplexobj(state))})
        return xr.Dataset(data_vars, coords=coords, attrs=attrs)
