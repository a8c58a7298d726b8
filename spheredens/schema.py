"""The two file layouts in one place (docs/dataset.md): schema names, required attributes and
variables, variable metadata, the validators, and the builders that turn recorded arrays into
Datasets.

* density runs, schema ``spheredens-1``: :func:`density_dataset`, checked by
  :func:`validate_schema`;
* particle runs, schema ``spheredens-particles-1``: :func:`particle_dataset`, checked by
  :func:`validate_particles`.

The recorders (:class:`spheredens.recorder.Recorder`,
:class:`spheredens.particles.ParticleRecorder`) and :func:`spheredens.io.convert_particles`
only gather the arrays; what the file looks like is decided here. xarray is imported inside
the builders only, so that ``import spheredens`` stays light.
"""
from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
from numpy.typing import NDArray

from ._lazy import xarray as xr
from ._version import __version__
from .accessor import register_accessor
from .exceptions import SchemaError
from .geometry import DOMAINS, get_domain

Array = NDArray[np.float64]

#: schema of density runs (``spheredens_schema`` attribute)
SCHEMA = "spheredens-1"
#: schema of particle runs
PARTICLE_SCHEMA = "spheredens-particles-1"
#: schema of the files of ``spheredens compare``
COMPARE_SCHEMA = "spheredens-compare-1"
#: CF conventions followed by every file
CONVENTIONS = "CF-1.10"

REQUIRED_ATTRS = ("Conventions", "spheredens_schema", "spheredens_version", "model", "domain",
                  "scheme", "beta", "config", "history", "title")
REQUIRED_VARS = ("rho", "weight", "Q", "K", "V", "mass", "energy", "w2_projection")
#: coordinates a density file needs on a domain, beyond ``time``
REQUIRED_COORDS = {"circle": ("theta",)}
#: particle positions may deviate from unit length by this much (files from other codes, float32)
UNIT_TOLERANCE = 1e-6

#: placeholders in the variable tables: the grid's space dims, the units of ``rho``
SPACE, RHO_UNITS = "<space>", "<units of rho>"


@dataclass(frozen=True)
class Variable:
    """Dims and attributes of a variable of a file.

    ``dims`` may hold :data:`SPACE` (the grid's space dims) and ``units`` :data:`RHO_UNITS`
    (those of ``rho``); ``units=None``: no units attribute.
    """

    dims: tuple[str, ...]
    long_name: str
    units: str | None = "1"

    def entry(self, data: Any, grid: Any = None, **extra: str) -> tuple[tuple[str, ...], Any, dict[str, Any]]:
        """(dims, data, attrs) for ``xarray.Dataset``; ``extra`` attributes (e.g. a comment)
        come after the long name and units."""
        dims: tuple[str, ...] = ()
        for d in self.dims:
            dims += tuple(grid.space_dims) if d == SPACE else (d,)
        attrs: dict[str, Any] = {"long_name": self.long_name}
        if self.units is not None:
            attrs["units"] = grid.rho_attrs["units"] if self.units == RHO_UNITS else self.units
        return dims, data, {**attrs, **extra}


#: the time coordinate (density files add ``standard_name``)
TIME = Variable(("time",), "model time")
#: the coordinate of the slices (models with an auxiliary variable: ``usa_av``)
XI = Variable(("xi",), "auxiliary variable of each slice", None)
#: Q, K, V of the model, in density and particle files
ATTENTION = {name: Variable(("row", "col"), f"attention matrix {name}") for name in ("Q", "K", "V")}

#: variables of density files besides rho, weight and the grid's own (in file order)
DENSITY_VARIABLES = {
    "xi_weight": Variable(("xi",), "mass of each slice"),
    "mass": Variable(("time",), "total mass sum(rho * weight)"),
    "min_rho": Variable(("time",), "minimum of rho over the grid", RHO_UNITS),
    "filter_effect": Variable(("time",), "share of d rho/dt removed by the spectral filter "
                                         "(||(1 - sigma) d rho/dt|| / ||d rho/dt||)"),
    "energy": Variable(("time",), "interaction energy E_beta (MODELS.md section 4)"),
    "w2_projection": Variable(("time",), "W2 distance to the zero-temperature target Pi_# rho_0",
                              "radian"),
    "w2_terminal": Variable(("time",), "W2 to the measures supported on the dominant eigenspace of V "
                                       "(sqrt(int d(x, S cap E_V)^2 rho))", "radian"),
    "rho_centroid": Variable(("time", SPACE), "offset of the centroid of each cell's mass from the cell "
                                              "centre, in cell widths (schemes that carry it: log_sl)"),
    "log_rho": Variable(("time", SPACE), "natural logarithm of rho (keeps what rho shows as 0 below "
                                         "the smallest float64 number; schemes that carry it: log_sl)"),
    "checkpoint_state": Variable(("checkpoint_part", "checkpoint_value"),
                                 "full solver state at checkpoint_time (real and imaginary parts "
                                 "for spectral coefficients), for --resume", None),
}
#: the time series of a density run, in file order
DIAGNOSTICS = ("mass", "min_rho", "filter_effect", "energy", "w2_projection", "w2_terminal")

#: slice diagnostics of usa_av (recorded per snapshot)
SLICE_VARIABLES = {
    "rho_marginal": Variable(("time", SPACE), "marginal density sum_k r_k rho_k", RHO_UNITS),
    "slice_mode": Variable(("time", "xi", "component"), "mode of each slice (unit vector)"),
    "slice_spread": Variable(("time", "xi"), "W2 of each normalized slice to the Dirac mass at its mode",
                             "radian"),
    "marginal_mean_norm": Variable(("time",), "|int x rho_marginal| (1 for a Dirac mass)"),
    "marginal_w2_dirac": Variable(("time",), "W2 of the marginal to the nearest Dirac mass "
                                             "(collapse measure)", "radian"),
    "orbit_z": Variable(("time", "component"), "z of the fitted orbit x*(xi) = G(xi)^T z"),
    "orbit_distance": Variable(("time",), "rms over slices (weights r_k) of d(slice mode, G(xi_k)^T z)",
                               "radian"),
}
#: the auxiliary kernel of usa_av
KERNEL_VARIABLES = {
    "gauge": Variable(("xi", "row", "col"), "gauge G(xi_k)"),
    "coupling": Variable(("xi", "xi_other"), "coupling b(xi_k, xi_l)"),
}

#: variables of particle files (in file order)
PARTICLE_VARIABLES = {
    "position": Variable(("time", "particle", "component"), "particle position (unit vector)"),
    "particle_weight": Variable(("particle",), "particle weight (sums to 1)"),
    "xi": Variable(("particle",), "auxiliary label xi of each particle (frozen)"),
    "slice": Variable(("particle",), "slice index k of each particle: xi = slice_xi[k]", None),
    "slice_xi": Variable(("slice_index",), "label xi_k of slice k"),
    "slice_weight": Variable(("slice_index",), "model slice mass r_k (the particle weights of slice k "
                                               "sum to it)"),
    "w2_projection": Variable(("time",), "W2 distance of the particles to the zero-temperature target "
                                         "Pi_# rho_0", "radian"),
    "checkpoint_position": Variable(("particle", "component"), "positions at checkpoint_time, for --resume",
                                    None),
}
#: long name of ``particle_weight`` in files converted from other codes
CONVERTED_WEIGHT_LONG_NAME = "particle weight"


# -- validators ---------------------------------------------------------------------------
def validate_schema(ds: Any) -> None:
    """Raise :class:`SchemaError` listing what ``ds`` lacks of schema ``spheredens-1``."""
    problems = [f"attribute {a!r} missing" for a in REQUIRED_ATTRS if a not in ds.attrs]
    problems += [f"variable {v!r} missing" for v in REQUIRED_VARS if v not in ds.variables]
    if ds.attrs.get("spheredens_schema", SCHEMA) != SCHEMA:
        problems.append(f"spheredens_schema is {ds.attrs['spheredens_schema']!r}, expected {SCHEMA!r}")
    if "time" not in ds.coords:
        problems.append("coordinate 'time' missing")
    domain = ds.attrs.get("domain")
    problems += [f"coordinate {c!r} missing (domain is {domain})"
                 for c in REQUIRED_COORDS.get(domain, ()) if c not in ds.coords]
    if problems:
        raise SchemaError(f"not a {SCHEMA} file: " + "; ".join(problems))


def _dimensions() -> list[int]:
    """The ambient dimensions of the domains (2, 3)."""
    return [get_domain(name).d for name in DOMAINS]


def validate_particles(ds: Any, *, name: str = "particle file") -> None:
    """Raise :class:`SchemaError` unless ``ds`` follows spheredens-particles-1 with sane values:
    ``position`` (time, particle, component) finite unit vectors with 2 or 3 components matching
    ``domain``, ``particle_weight`` (particle) non-negative summing to 1, increasing ``time``."""
    if "position" not in ds:
        raise SchemaError(f"{name}: variable 'position' (time, particle, component) missing")
    pos = ds["position"]
    if pos.dims != PARTICLE_VARIABLES["position"].dims:
        raise SchemaError(f"{name}: 'position' has dims {pos.dims}, expected ('time', 'particle', 'component')")
    if "time" not in ds.coords and "time" not in ds:
        raise SchemaError(f"{name}: coordinate 'time' missing")
    d = pos.shape[-1]
    domain = ds.attrs.get("domain")
    expected = get_domain(domain).d if domain in DOMAINS else None
    if d not in _dimensions() or (expected is not None and d != expected):
        raise SchemaError(f"{name}: positions have {d} components; the {domain or 'circle/sphere'} "
                          f"needs {expected or ' or '.join(map(str, _dimensions()))}")
    x = np.asarray(pos.values, dtype=float)
    if x.shape[0] == 0 or x.shape[1] == 0:
        raise SchemaError(f"{name}: no snapshots or no particles (position has shape {x.shape})")
    if not np.all(np.isfinite(x)):
        raise SchemaError(f"{name}: 'position' holds NaN or infinite values")
    with np.errstate(all="ignore"):
        dev = float(np.abs(np.linalg.norm(x, axis=-1) - 1.0).max())
    if dev > UNIT_TOLERANCE:
        raise SchemaError(f"{name}: positions are not unit vectors (| |x| - 1 | up to {dev:.3g}, "
                          f"tolerance {UNIT_TOLERANCE:g})")
    t = np.asarray(ds["time"].values, dtype=float)
    if t.ndim != 1 or not np.all(np.isfinite(t)) or np.any(np.diff(t) <= 0):
        raise SchemaError(f"{name}: 'time' must be finite and strictly increasing")
    if "particle_weight" in ds:
        w = np.asarray(ds["particle_weight"].values, dtype=float)
        if w.shape != (pos.shape[1],) or not np.all(np.isfinite(w)) or np.any(w < 0) \
                or abs(float(w.sum()) - 1.0) > 1e-9:
            raise SchemaError(f"{name}: 'particle_weight' must be {pos.shape[1]} non-negative numbers "
                              "summing to 1")


# -- builders -----------------------------------------------------------------------------
def history() -> str:
    """The ``history`` attribute of a file written now."""
    now = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return f"{now}: written by spheredens {__version__}"


def _header(schema: str, domain: str, model: Any = None) -> dict[str, Any]:
    """The first attributes of a file: conventions, schema, (version and model,) domain."""
    out: dict[str, Any] = {"Conventions": CONVENTIONS, "spheredens_schema": schema}
    if model is not None:
        out.update({"spheredens_version": __version__, "model": model.name})
    out["domain"] = domain
    return out


def _attention(model: Any) -> dict[str, Any]:
    """The variables Q, K, V of ``model``."""
    return {name: var.entry(np.asarray(getattr(model, name))) for name, var in ATTENTION.items()}


def _time_coord(times: Sequence[float], **extra: str) -> dict[str, Any]:
    return {"time": TIME.entry(np.array(times, dtype=float), **extra)}


def _slice_variables(values: Mapping[str, Sequence[Array]], n_times: int, grid: Any,
                     kernel: Any) -> dict[str, Any]:
    """The slice diagnostics recorded per snapshot (usa_av) and the kernel's gauges and coupling."""
    out = {}
    for name, var in SLICE_VARIABLES.items():
        recorded = values[name]
        shape = (n_times,) + (grid.shape if name == "rho_marginal" else
                              np.shape(recorded[0]) if recorded else ())
        data = np.array(recorded).reshape(shape) if recorded else np.zeros((0,) + shape[1:])
        comment = {}
        if name.startswith("orbit") and not kernel.uniform_coupling:
            comment["comment"] = f"not defined: kernel {kernel.name!r} has no gauge orbit (b != 1)"
        out[name] = var.entry(data, grid, **comment)
    out["gauge"] = KERNEL_VARIABLES["gauge"].entry(kernel.gauges)
    out["coupling"] = KERNEL_VARIABLES["coupling"].entry(kernel.coupling)
    return out


def _density_checkpoint(checkpoint: tuple[float, Array, int]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The variable ``checkpoint_state`` and the checkpoint attributes of a density file."""
    t_c, state, steps = checkpoint
    parts = np.stack([state.real, state.imag]) if np.iscomplexobj(state) else state.real[None]
    data = {"checkpoint_state": DENSITY_VARIABLES["checkpoint_state"].entry(parts.reshape(len(parts), -1))}
    attrs = {"checkpoint_time": t_c, "checkpoint_steps": steps,
             "checkpoint_shape": ",".join(map(str, state.shape)),
             "checkpoint_complex": int(np.iscomplexobj(state))}
    return data, attrs


def density_dataset(problem: Any, grid: Any, config: Any, *, times: Sequence[float],
                    rho: Sequence[Array], diagnostics: Mapping[str, Sequence[float]],
                    comments: Mapping[str, str] | None = None,
                    slice_values: Mapping[str, Sequence[Array]] | None = None,
                    scheme_attrs: Mapping[str, Any] | None = None, status: Mapping[str, Any] | None = None,
                    checkpoint: tuple[float, Array, int] | None = None,
                    centroids: Sequence[Array] | None = None,
                    log_rho: Sequence[Array] | None = None) -> Any:
    """The Dataset (schema spheredens-1) of the snapshots of a density run.

    Parameters
    ----------
    problem : Problem
        The model, domain and slices (``xi``, ``xi_weight``) of the run.
    grid : grid
        The scheme's grid (``shape``, ``space_dims``, ``dataset_coords``, ``weight``, ...).
    config : RunConfig
        The configuration (attributes ``config``, ``scheme``, ``cfl``, ``t_end``).
    times, rho : sequences
        Snapshot times and the densities (n_xi, *grid.shape) at them.
    diagnostics : mapping
        Time series by name (:data:`DIAGNOSTICS`; those present are written).
    comments : mapping, optional
        ``comment`` attribute of some diagnostics (e.g. why the energy is not defined).
    slice_values : mapping, optional
        The slice diagnostics per snapshot (:data:`SLICE_VARIABLES`), for models with slices.
    scheme_attrs, status : mappings, optional
        The scheme's attributes and the run status (run_status, stop_reason, ...).
    checkpoint : (t, state, steps), optional
        The full solver state at a step boundary, for ``--resume``.
    centroids : sequence, optional
        Per snapshot, the centroid offsets of the cells of the marginal density, in cell widths
        (``rho_centroid``; schemes that carry them).
    log_rho : sequence, optional
        Per snapshot, log of the marginal density (``log_rho``; schemes that carry it).
    """

    register_accessor()
    model = problem.model
    comments = comments or {}
    space = grid.space_dims
    rho = np.array(rho).reshape((len(rho), problem.n_xi) + grid.shape)
    if problem.has_auxiliary:
        rho_var = (("time", "xi") + space, rho)
    else:
        rho_var = (("time",) + space, rho[:, 0])
    coords = {**_time_coord(times, standard_name="time"), **grid.dataset_coords()}
    if problem.has_auxiliary:
        coords["xi"] = XI.entry(problem.xi)
    data_vars: dict[str, Any] = {
        "rho": rho_var + (dict(grid.rho_attrs),),
        "weight": (space, grid.weight, dict(grid.weight_attrs)),
    }
    data_vars.update(grid.dataset_variables())  # e.g. a mesh's cell bounds
    if problem.has_auxiliary:
        data_vars["xi_weight"] = DENSITY_VARIABLES["xi_weight"].entry(problem.xi_weight)
    data_vars.update(_attention(model))
    for name in DIAGNOSTICS:
        if name in diagnostics:
            comment = {"comment": comments[name]} if name in comments else {}
            data_vars[name] = DENSITY_VARIABLES[name].entry(np.array(diagnostics[name]), grid, **comment)
    if centroids is not None:
        data_vars["rho_centroid"] = DENSITY_VARIABLES["rho_centroid"].entry(
            np.array(centroids).reshape((len(times),) + grid.shape), grid)
    if log_rho is not None:
        data_vars["log_rho"] = DENSITY_VARIABLES["log_rho"].entry(
            np.array(log_rho).reshape((len(times),) + grid.shape), grid)
    if slice_values:
        data_vars.update(_slice_variables(slice_values, len(times), grid, model.auxiliary))
    attrs = _header(SCHEMA, problem.domain, model)
    attrs.update({
        "scheme": config.discretization.scheme,
        "beta": float(model.beta),
        "config": config.to_toml(),
        "title": f"spheredens {model.name} on the {problem.domain}, beta = {model.beta:g}",
        "history": history(),
        "cfl": float(config.time.cfl),
        "t_end": float(config.time.t_end),
    })
    attrs.update(scheme_attrs or {})
    if model.auxiliary is not None:
        attrs["auxiliary_kernel"] = model.auxiliary.name
    attrs.update(status or {})
    if checkpoint is not None:
        state_var, state_attrs = _density_checkpoint(checkpoint)
        data_vars.update(state_var)
        attrs.update(state_attrs)
    return xr.Dataset(data_vars, coords=coords, attrs=attrs)


def particle_dataset(times: Sequence[float], positions: Any, weight: Array, *, domain: str,
                     model: Any = None, config: str | None = None, attrs: Mapping[str, Any] | None = None,
                     title: str | None = None, status: Mapping[str, Any] | None = None,
                     labels: tuple[NDArray[np.int64], Array, Array] | None = None,
                     checkpoint: tuple[float, Array, int] | None = None,
                     weight_long_name: str | None = None,
                     w2_projection: tuple[Sequence[float], str] | None = None) -> Any:
    """The Dataset (schema spheredens-particles-1) of a particle run.

    Parameters
    ----------
    times : sequence of float
        Snapshot times.
    positions : array (time, particle, component) or sequence of (particle, component) arrays
        Unit vectors.
    weight : ndarray (particle,)
        Particle weights summing to 1.
    domain : str
        ``"circle"`` or ``"sphere"``.
    model, config : optional
        The model (``Q``, ``K``, ``V`` and the attributes ``model``, ``beta``) and the
        configuration as TOML text, for runs of spheredens; absent for converted files.
    attrs : mapping, optional
        Further attributes (after ``beta`` and ``config``), e.g. the initialization and seed.
    title : str, optional
        The ``title`` attribute; with it a ``history`` attribute is written.
    status : mapping, optional
        The run status (run_status, stop_reason, ...).
    labels : (slices, xi, xi_weight), optional
        usa_av: the slice index of every particle, and the labels and masses of the slices.
    checkpoint : (t, state (1, particle, component), steps), optional
        The positions at a step boundary, for ``--resume``.
    weight_long_name : str, optional
        Long name of ``particle_weight`` instead of the default
        (:data:`CONVERTED_WEIGHT_LONG_NAME` for converted files).
    w2_projection : (values per time, comment), optional
        W2 of the particles to Pi_# rho_0 at every snapshot
        (:class:`spheredens.diagnostics.ParticleProjectionDistance`) and how it was computed.
    """

    register_accessor()
    var = PARTICLE_VARIABLES
    data = {"position": var["position"].entry(np.asarray(positions))}
    data["particle_weight"] = var["particle_weight"].entry(
        weight, **({} if weight_long_name is None else {"long_name": weight_long_name}))
    header = _header(PARTICLE_SCHEMA, domain, model)
    if model is not None:
        data.update(_attention(model))
        header.update({"beta": float(model.beta), "config": config})
    if labels is not None:
        slices, xi, xi_weight = labels
        data["xi"] = var["xi"].entry(xi[slices])
        data["slice"] = var["slice"].entry(slices.astype(np.int32))
        data["slice_xi"] = var["slice_xi"].entry(xi)
        data["slice_weight"] = var["slice_weight"].entry(xi_weight)
    header.update(attrs or {})
    if title is not None:
        header.update({"title": title, "history": history()})
    header.update(status or {})
    if w2_projection is not None:
        values, comment = w2_projection
        data["w2_projection"] = var["w2_projection"].entry(np.asarray(values, dtype=float), comment=comment)
    if checkpoint is not None:
        data["checkpoint_position"] = var["checkpoint_position"].entry(checkpoint[1][0])
        header.update({"checkpoint_time": checkpoint[0], "checkpoint_steps": checkpoint[2]})
    return xr.Dataset(data, coords=_time_coord(times), attrs=header)
