"""Snapshots -> xarray.Dataset in schema ``spheredens-1`` (DATASET.md; the layout itself is
built by :func:`spheredens.schema.density_dataset`)."""
from __future__ import annotations

import json
import time as _time
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.special import logsumexp

from . import slices
from .config import RunConfig
from .diagnostics import (energy_defined, interaction_energy, interaction_energy_spectral, mass,
                          projection_distance, TerminalDistance)
from .exceptions import SchemaError
from .problem import Problem
from .schema import SCHEMA, SLICE_VARIABLES, density_dataset
from .simulate import Observer

Array = NDArray[np.float64]

__all__ = ["Recorder", "SCHEMA", "SLICE_VARIABLES"]


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
        self._centroids = bool(scheme.carries_centroids)
        self._terminal = TerminalDistance(problem.model, self.grid, centroids=self._centroids)
        #: per snapshot, the marginal's cell centroids and log density (schemes that carry them)
        self.centroids: list[Array] = []
        self.log_rho: list[Array] = []
        self._points = self.grid.points
        self._w2 = None
        self._w2_reason = ""
        self.checkpoint: tuple[float, Array, int] | None = None
        #: the scheme's step control at the checkpoint (:meth:`Scheme.controller_state`)
        self.checkpoint_controller: dict[str, float] = {}
        #: wall-clock seconds spent before this process (a resumed run's earlier segments), the
        #: clock of this segment, and the total at the checkpoint (attr checkpoint_wall_seconds)
        self._wall_before = 0.0
        self._clock: float | None = None
        self._checkpoint_wall = 0.0
        #: per-snapshot arrays of the slice diagnostics (usa_av), name -> list of arrays
        self.slice_diagnostics: dict[str, list[Array]] = (
            {name: [] for name in SLICE_VARIABLES} if problem.has_auxiliary else {})

    def set_checkpoint(self, t: float, state: Array, steps: int) -> None:
        """Remember the full solver state at a step boundary; written with the next file."""
        self.checkpoint = (float(t), np.array(state), int(steps))
        self.checkpoint_controller = dict(self.scheme.controller_state())
        self._checkpoint_wall = self._wall_before + (
            _time.perf_counter() - self._clock if self._clock is not None else 0.0)

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
        if self._centroids and "rho_centroid" in ds:
            self.centroids = [np.asarray(c, dtype=float) for c in ds["rho_centroid"].values]
        if self.scheme.carries_log_density and "log_rho" in ds:
            self.log_rho = [np.asarray(v, dtype=float) for v in ds["log_rho"].values]
        for name in self.slice_diagnostics:
            self.slice_diagnostics[name] = [np.asarray(v) for v in ds[name].values]
        raw = np.asarray(ds["checkpoint_state"].values)
        shape = tuple(int(v) for v in str(ds.attrs["checkpoint_shape"]).split(","))
        state = (raw[0] + 1j * raw[1]) if int(ds.attrs["checkpoint_complex"]) else raw[0]
        self.checkpoint = (float(ds.attrs["checkpoint_time"]), state.reshape(shape),
                           int(ds.attrs["checkpoint_steps"]))
        self.checkpoint_controller = json.loads(str(ds.attrs.get("checkpoint_controller", "{}")))
        self.scheme.restore_controller(self.checkpoint_controller)
        # files written before this attribute existed count from 0
        self._wall_before = self._checkpoint_wall = float(ds.attrs.get("checkpoint_wall_seconds", 0.0))
        return self.checkpoint

    def start(self, info: dict[str, Any]) -> None:
        self._stepper = info.get("stepper")
        self._clock = _time.perf_counter()
        # the target of w2_projection always comes from rho_0 (also when resuming)
        rho0 = self.scheme.density(self.scheme.initial_state())
        # the projection target is built from rho_0 (marginal over slices)
        marginal0 = slices.marginal(rho0, self.problem.xi_weight)
        self._w2, self._w2_reason = projection_distance(self.problem.model, self.grid, marginal0,
                                                        self.problem.initial, centroids=self._centroids)

    def observe(self, t: float, state: Array) -> None:
        rho = np.array(self.scheme.density(state), dtype=float)
        xi_w = self.problem.xi_weight
        marginal = slices.marginal(rho, xi_w)
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
        centroid = None
        if self._centroids:  # the marginal's centroid in each cell: mass-weighted over slices
            c = np.asarray(self.scheme.centroids(state), dtype=float)
            with np.errstate(invalid="ignore", divide="ignore"):
                centroid = np.nan_to_num(slices.marginal(rho * c, xi_w) / marginal)
            self.centroids.append(centroid)
        if self.scheme.carries_log_density:  # log of the marginal sum_k r_k rho_k, from the logs
            self.log_rho.append(logsumexp(np.asarray(self.scheme.log_density(state), dtype=float),
                                          axis=0, b=np.reshape(xi_w, (-1,) + (1,) * (rho.ndim - 1))))
        d["w2_projection"].append(np.nan if self._w2 is None else self._w2(marginal, centroid))
        d["w2_terminal"].append(self._terminal(marginal, centroid))

    def _observe_slices(self, rho: Array, marginal: Array) -> None:
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
                       "n_steps": int(result.n_steps), "wall_time_seconds": float(result.wall_time),
                       "wall_time_total_seconds": self._wall_before + float(result.wall_time)}

    def dataset(self) -> Any:
        """The Dataset of the snapshots recorded so far (:func:`spheredens.schema.density_dataset`)."""
        comments = {"w2_projection": (self._w2.comment() if self._w2 is not None
                                      else f"not defined: {self._w2_reason}"),
                    "w2_terminal": self._terminal.comment()}
        if self._energy_reason:
            comments["energy"] = f"not defined: {self._energy_reason}"
        scheme_attrs = self.scheme.attributes()
        if self.scheme.positive:  # steps refused for a negative density and retried with dt / 2
            scheme_attrs["retried_steps"] = self._stepper.retried_steps if self._stepper is not None else 0
        ds = density_dataset(self.problem, self.grid, self.config, times=self.times, rho=self.rho,
                               diagnostics=self.diagnostics, comments=comments,
                               slice_values=self.slice_diagnostics, scheme_attrs=scheme_attrs,
                               status=self.status, checkpoint=self.checkpoint,
                               centroids=self.centroids if self._centroids else None,
                               log_rho=self.log_rho if self.scheme.carries_log_density else None)
        if self.checkpoint is not None and self.checkpoint_controller:  # floats as repr: exact
            ds.attrs["checkpoint_controller"] = json.dumps(self.checkpoint_controller)
        if self.checkpoint is not None:
            ds.attrs["checkpoint_wall_seconds"] = self._checkpoint_wall
        return ds
