"""The two file layouts in one place (docs/dataset.md): schema names, required attributes and
variables, variable metadata, the validators, and the builders that turn recorded arrays into
Datasets.

* density runs, schema ``spheredens-1``: :func:`density_dataset`, checked by
  :func:`validate_schema`;
* particle runs, schema ``spheredens-particles-1``: :func:`particle_dataset`, checked by
  :func:`validate_particles`.

The recorders (:class:`spheredens.recorder.Recorder`,
:class:`spheredens.particles.ParticleRecorder`) and :func:`spheredens.convert.convert_particles`
only gather the arrays; what the file looks like is decided here. xarray is imported inside
the builders only, so that ``import spheredens`` stays light.

What kind a file is (a density, particle, comparison, sweep or analysis file) is decided here
too, by :func:`file_kind`; the variables of the files of compare and analyze-beta are in
:mod:`spheredens.result_schema`.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
from numpy.typing import NDArray

from ._lazy import xarray as xr
from ._types import Array
from ._version import __version__
from .exceptions import SchemaError
from .geometry import DOMAINS, get_domain

#: schema of density runs (``spheredens_schema`` attribute)
SCHEMA = "spheredens-1"
#: schema of particle runs
PARTICLE_SCHEMA = "spheredens-particles-1"
#: schema of the files of ``spheredens compare``
COMPARE_SCHEMA = "spheredens-compare-1"
#: schema of the files of ``spheredens compare`` of runs against a reference (any two kinds)
PAIRS_SCHEMA = "spheredens-compare-pairs-1"
#: schema of the combined file of ``spheredens sweep``
SWEEP_SCHEMA = "spheredens-sweep-1"
#: schema of the files of ``spheredens analyze-beta``
ANALYSIS_SCHEMA = "spheredens-beta-analysis-1"
#: CF conventions followed by every file
CONVENTIONS = "CF-1.10"

REQUIRED_ATTRS = (
    "Conventions",
    "spheredens_schema",
    "spheredens_version",
    "model",
    "domain",
    "scheme",
    "beta",
    "config",
    "history",
    "title",
)
REQUIRED_VARS = ("rho", "weight", "Q", "K", "V", "mass", "energy", "w2_projection")
#: coordinates a density file needs on a domain, beyond ``time``
REQUIRED_COORDS = {"circle": ("theta",)}
#: particle positions may deviate from unit length by this much (files from other codes, float32)
UNIT_TOLERANCE = 1e-6

#: global attributes of a density run whose scheme does not keep rho >= 0 (``fourier``,
#: ``sh_spectral``), written once it stopped being faithful to the equation: the first time t of
#: a step with min rho < -1e-3 max rho (:data:`spheredens.recorder.UNDERSHOOT`), and min rho
#: and max rho there. Absent while it has not happened (and for positive schemes)
UNFAITHFUL_ATTRS = ("unfaithful_from_t", "unfaithful_min_rho", "unfaithful_max_rho")

#: placeholders in the variable tables: the grid's space dims, the units of ``rho``
SPACE, RHO_UNITS = "<space>", "<units of rho>"


@dataclass(frozen=True)
class Variable:
    """Dims and attributes of a variable of a file.

    ``dims`` may hold :data:`SPACE` (the grid's space dims) and ``units`` :data:`RHO_UNITS`
    (those of ``rho``); ``units=None``: no units attribute. ``long_name`` is short (it labels
    plot axes, :data:`MAX_LONG_NAME` characters at most); the detail goes in ``comment``.
    """

    dims: tuple[str, ...]
    long_name: str
    units: str | None = "1"
    comment: str | None = None

    def entry(
        self, data: Any, grid: Any = None, **extra: str
    ) -> tuple[tuple[str, ...], Any, dict[str, Any]]:
        """(dims, data, attrs) for ``xarray.Dataset``; ``extra`` attributes come after the long
        name and units. An extra ``comment`` (e.g. how the values were computed, or why they
        are not defined) comes first in the comment, the variable's own detail after it."""
        dims: tuple[str, ...] = ()
        for d in self.dims:
            dims += tuple(grid.space_dims) if d == SPACE else (d,)
        attrs: dict[str, Any] = {"long_name": self.long_name}
        if self.units is not None:
            attrs["units"] = grid.rho_attrs["units"] if self.units == RHO_UNITS else self.units
        extra = dict(extra)
        comment = "; ".join(c for c in (extra.pop("comment", None), self.comment) if c)
        if comment:
            attrs["comment"] = comment
        if SPACE in self.dims and grid is not None:
            attrs.update(space_attrs(grid))
        return dims, data, {**attrs, **extra}


#: the variables of the cells' centroids: offsets in cell widths (the circle) and unit vectors
#: (the sphere)
CENTROID_VARIABLES = ("rho_centroid", "rho_centroid_xyz")


def file_centroids(ds: Any, index: int) -> Any:
    """The marginal's cell centroids of snapshot ``index`` of a run file (offsets or unit
    vectors, :data:`CENTROID_VARIABLES`), or None when the file has none."""
    name = next((n for n in CENTROID_VARIABLES if n in ds), None)
    return None if name is None else np.asarray(ds[name].values[index], dtype=float)


def space_attrs(grid: Any) -> dict[str, str]:
    """The CF attributes of a field on the grid's cells beyond its units: ``cell_measures``
    where the grid writes a cell area variable (the sphere's grids)."""
    measures = getattr(grid, "rho_attrs", {}).get("cell_measures")
    return {"cell_measures": measures} if measures else {}


#: longest ``long_name`` written (xarray's automatic axis labels stay on one line)
MAX_LONG_NAME = 40

#: the time coordinate: model time is dimensionless, so no CF ``standard_name = "time"`` (a CF
#: time needs units "<unit> since <date>") and no ``axis = "T"``: a generic CF coordinate
TIME = Variable(("time",), "time", "1", "model time (dimensionless: t of the continuity equation)")
#: the coordinate of the slices (models with an auxiliary variable: ``usa_av``)
XI = Variable(("xi",), "auxiliary variable xi", "1", "label xi_k of each density slice")
#: Q, K, V of the model, in density and particle files
ATTENTION = {name: Variable(("row", "col"), f"attention matrix {name}") for name in ("Q", "K", "V")}

#: variables of density files besides rho, weight and the grid's own (in file order)
DENSITY_VARIABLES = {
    "xi_weight": Variable(("xi",), "slice mass r_k", "1", "mass of each slice (sums to 1)"),
    "mass": Variable(
        ("time",), "total mass", "1", "sum(rho * weight) (times xi_weight where slices exist)"
    ),
    "min_rho": Variable(("time",), "minimum of rho", RHO_UNITS, "minimum of rho over the grid"),
    "filter_effect": Variable(
        ("time",),
        "spectral filter share",
        "1",
        "share of d rho/dt removed by the spectral filter: ||(1 - sigma) d rho/dt|| / ||d rho/dt||",
    ),
    "n_particles": Variable(
        ("time",), "number of particles", "1", "particles of log_lagrangian (split and merged)"
    ),
    "energy": Variable(("time",), "interaction energy E_beta", "1", "docs/models.md section 4"),
    "w2_projection": Variable(
        ("time",),
        "W2 to Pi_# rho_0",
        "radian",
        "Wasserstein-2 distance (geodesic cost) of rho_t to the zero-temperature target Pi_# rho_0",
    ),
    "w2_terminal": Variable(
        ("time",),
        "W2 to the eigenspace of V",
        "radian",
        "W2 to the measures supported on the dominant eigenspace of V: "
        "sqrt(int d(x, S cap E_V)^2 rho)",
    ),
    "rho_centroid": Variable(
        ("time", SPACE),
        "cell mass centroid offset",
        "1",
        "offset of the centroid of each cell's mass from the cell centre, in cell "
        "widths (schemes that carry it: log_sl)",
    ),
    "rho_centroid_xyz": Variable(
        ("time", SPACE, "xyz"),
        "cell mass centroid",
        "1",
        "unit vector of the centroid of each cell's mass (schemes that carry it on the sphere: "
        "log_sl, log_lagrangian)",
    ),
    "log_rho": Variable(
        ("time", SPACE),
        "log of density",
        "1",
        "natural logarithm of rho (keeps what rho shows as 0 below the smallest "
        "float64 number; schemes that carry it: log_sl, log_lagrangian)",
    ),
    "checkpoint_state": Variable(
        ("checkpoint_part", "checkpoint_value"),
        "checkpoint solver state",
        None,
        "full solver state at checkpoint_time (real and imaginary parts for "
        "spectral coefficients), for --resume",
    ),
}
#: the time series of a density run, in file order
DIAGNOSTICS = ("mass", "min_rho", "filter_effect", "n_particles", "energy", "w2_projection")
DIAGNOSTICS += ("w2_terminal",)

#: slice diagnostics of usa_av (recorded per snapshot)
SLICE_VARIABLES = {
    "rho_marginal": Variable(
        ("time", SPACE), "marginal density", RHO_UNITS, "marginal density sum_k r_k rho_k"
    ),
    "slice_mode": Variable(
        ("time", "xi", "component"), "slice mode", "1", "mode of each slice (unit vector)"
    ),
    "slice_spread": Variable(
        ("time", "xi"),
        "slice spread",
        "radian",
        "W2 of each normalized slice to the Dirac mass at its mode",
    ),
    "marginal_mean_norm": Variable(
        ("time",), "norm of the marginal mean", "1", "|int x rho_marginal| (1 for a Dirac mass)"
    ),
    "marginal_w2_dirac": Variable(
        ("time",),
        "W2 of the marginal to a Dirac",
        "radian",
        "W2 of the marginal to the nearest Dirac mass (collapse measure)",
    ),
    "orbit_z": Variable(
        ("time", "component"), "orbit z", "1", "z of the fitted orbit x*(xi) = G(xi)^T z"
    ),
    "orbit_distance": Variable(
        ("time",),
        "distance to the orbit",
        "radian",
        "rms over slices (weights r_k) of d(slice mode, G(xi_k)^T z)",
    ),
}
#: the auxiliary kernel of usa_av
KERNEL_VARIABLES = {
    "gauge": Variable(("xi", "row", "col"), "gauge G(xi_k)"),
    "coupling": Variable(("xi", "xi_other"), "coupling b(xi_k, xi_l)"),
}

#: variables of particle files (in file order)
PARTICLE_VARIABLES = {
    "position": Variable(
        ("time", "particle", "component"), "particle position", "1", "unit vector in R^d"
    ),
    "particle_weight": Variable(("particle",), "particle weight", "1", "the weights sum to 1"),
    "xi": Variable(
        ("particle",), "auxiliary label xi", "1", "auxiliary label of each particle (frozen)"
    ),
    "slice": Variable(
        ("particle",), "slice index k", None, "slice of each particle: xi = slice_xi[k]"
    ),
    "slice_xi": Variable(("slice_index",), "slice label xi_k", "1", "label xi_k of slice k"),
    "slice_weight": Variable(
        ("slice_index",),
        "slice mass r_k",
        "1",
        "model slice mass r_k (the particle weights of slice k sum to it)",
    ),
    "w2_projection": Variable(
        ("time",),
        "W2 to Pi_# rho_0",
        "radian",
        "Wasserstein-2 distance (geodesic cost) of the particles to the "
        "zero-temperature target Pi_# rho_0",
    ),
    "checkpoint_position": Variable(
        ("particle", "component"),
        "checkpoint positions",
        None,
        "positions at checkpoint_time, for --resume",
    ),
}
#: what an array of each numpy dtype kind other than numbers holds, for messages (a complex
#: variable of netCDF reads as records)
VALUE_KINDS = {
    "c": "complex numbers",
    "U": "strings",
    "S": "bytes",
    "O": "Python objects",
    "b": "booleans",
    "V": "records",
    "M": "dates",
    "m": "time intervals",
}
#: long name of ``particle_weight`` in files converted from other codes
CONVERTED_WEIGHT_LONG_NAME = "particle weight"


#: the kinds of spheredens file, by their ``spheredens_schema``
FILE_KINDS = {
    SCHEMA: "density",
    PARTICLE_SCHEMA: "particles",
    COMPARE_SCHEMA: "comparison",
    PAIRS_SCHEMA: "comparison",
    SWEEP_SCHEMA: "sweep",
    ANALYSIS_SCHEMA: "analysis",
}
#: what a file has no schema attribute is called in messages
NO_SCHEMA = "no spheredens_schema attribute"


def file_kind(ds: Any) -> str:
    """What kind of spheredens file ``ds`` is: ``"density"``, ``"particles"``,
    ``"comparison"``, ``"sweep"``, ``"analysis"`` (:data:`FILE_KINDS`) or ``"other"``, by its
    ``spheredens_schema``; a file without one (older, or built by hand) by its variables."""
    schema = str(ds.attrs.get("spheredens_schema", ""))
    if schema in FILE_KINDS:
        return FILE_KINDS[schema]
    if "analysis" in schema or "min_w2_slope" in ds.variables or "departure_definition" in ds.attrs:
        return "analysis"
    if schema:
        return "other"
    if "rho" in ds.variables:
        return "density"
    if "position" in ds.variables:
        return "particles"
    if "w2" in ds.variables and "w2_mean" in ds.variables:
        return "comparison"
    return "other"


def file_schema(ds: Any) -> str:
    """The ``spheredens_schema`` of ``ds``, or :data:`NO_SCHEMA` (for messages)."""
    return str(ds.attrs.get("spheredens_schema", "")) or NO_SCHEMA


# -- validators ---------------------------------------------------------------------------
def validate_schema(ds: Any) -> None:
    """Raise :class:`SchemaError` listing what ``ds`` lacks of schema ``spheredens-1``."""
    problems = [f"attribute {a!r} missing" for a in REQUIRED_ATTRS if a not in ds.attrs]
    problems += [f"variable {v!r} missing" for v in REQUIRED_VARS if v not in ds.variables]
    if ds.attrs.get("spheredens_schema", SCHEMA) != SCHEMA:
        problems.append(
            f"spheredens_schema is {ds.attrs['spheredens_schema']!r}, expected {SCHEMA!r}"
        )
    if "time" not in ds.coords:
        problems.append("coordinate 'time' missing")
    domain = ds.attrs.get("domain")
    problems += [
        f"coordinate {c!r} missing (domain is {domain})"
        for c in REQUIRED_COORDS.get(domain, ())
        if c not in ds.coords
    ]
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
        raise SchemaError(
            f"{name}: 'position' has dims {pos.dims}, expected ('time', 'particle', 'component')"
        )
    if "time" not in ds.coords and "time" not in ds:
        raise SchemaError(f"{name}: coordinate 'time' missing")
    for var in (
        "position",
        "time",
        "particle_weight",
    ):  # complex, strings, dates: one line, not a traceback
        dtype = ds[var].dtype if var in ds.variables else np.dtype(float)
        if dtype.kind not in "iuf":
            raise SchemaError(
                f"{name}: {var!r} holds {VALUE_KINDS.get(dtype.kind, 'non-numbers')} (dtype "
                f"{dtype.str}), not real numbers"
            )
    d = pos.shape[-1]
    domain = ds.attrs.get("domain")
    expected = get_domain(domain).d if domain in DOMAINS else None
    if d not in _dimensions() or (expected is not None and d != expected):
        raise SchemaError(
            f"{name}: positions have {d} components; the {domain or 'circle/sphere'} "
            f"needs {expected or ' or '.join(map(str, _dimensions()))}"
        )
    x = np.asarray(pos.values, dtype=float)
    if x.shape[0] == 0 or x.shape[1] == 0:
        raise SchemaError(f"{name}: no snapshots or no particles (position has shape {x.shape})")
    if not np.all(np.isfinite(x)):
        raise SchemaError(f"{name}: 'position' holds NaN or infinite values")
    with np.errstate(all="ignore"):
        norm = np.linalg.norm(x, axis=-1)
    k, i = np.unravel_index(int(np.argmax(np.abs(norm - 1.0))), norm.shape)
    dev = abs(float(norm[k, i]) - 1.0)
    if dev > UNIT_TOLERANCE:
        raise SchemaError(
            f"{name}: positions are not unit vectors (| |x| - 1 | up to {dev:.3g}, "
            f"tolerance {UNIT_TOLERANCE:g}; the worst row: time {k}, particle {i}, norm "
            f"{float(norm[k, i]):.9g})"
        )
    t = np.asarray(ds["time"].values, dtype=float)
    if t.ndim != 1 or not np.all(np.isfinite(t)) or np.any(np.diff(t) <= 0):
        raise SchemaError(f"{name}: 'time' must be finite and strictly increasing")
    if "particle_weight" in ds:
        w = np.asarray(ds["particle_weight"].values, dtype=float)
        if (
            w.shape != (pos.shape[1],)
            or not np.all(np.isfinite(w))
            or np.any(w < 0)
            or abs(float(w.sum()) - 1.0) > 1e-9
        ):
            raise SchemaError(
                f"{name}: 'particle_weight' must be {pos.shape[1]} non-negative numbers "
                "summing to 1"
            )


# -- builders -----------------------------------------------------------------------------
def cf_encode(ds: Any) -> Any:
    """Set the netCDF encoding CF asks for, in place, and return ``ds``: no ``_FillValue`` on
    coordinates, cell bounds and cell measures (xarray writes ``_FillValue = NaN`` on every
    float variable otherwise; CF coordinates hold no missing values). Data variables keep it
    (a NaN diagnostic means "not defined")."""
    names = set(ds.coords)
    for var in ds.variables.values():
        if var.attrs.get("bounds"):
            names.add(str(var.attrs["bounds"]))
        for word in str(var.attrs.get("cell_measures", "")).split()[1::2]:
            names.add(word)
    for name in names:
        if name in ds.variables and ds.variables[name].dtype.kind in "fc":
            ds.variables[name].encoding["_FillValue"] = None
    return ds


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


def _slice_variables(
    values: Mapping[str, Sequence[Array]], n_times: int, grid: Any, kernel: Any
) -> dict[str, Any]:
    """The slice diagnostics recorded per snapshot (usa_av) and the kernel's gauges and coupling."""
    out = {}
    for name, var in SLICE_VARIABLES.items():
        recorded = values[name]
        shape = (n_times,) + (
            grid.shape if name == "rho_marginal" else np.shape(recorded[0]) if recorded else ()
        )
        data = np.array(recorded).reshape(shape) if recorded else np.zeros((0,) + shape[1:])
        comment = {}
        if name.startswith("orbit") and not kernel.uniform_coupling:
            comment["comment"] = f"not defined: kernel {kernel.name!r} has no gauge orbit (b != 1)"
        out[name] = var.entry(data, grid, **comment)
    out["gauge"] = KERNEL_VARIABLES["gauge"].entry(kernel.gauges)
    out["coupling"] = KERNEL_VARIABLES["coupling"].entry(kernel.coupling)
    return out


def _density_checkpoint(
    checkpoint: tuple[float, Array, int],
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The variable ``checkpoint_state`` and the checkpoint attributes of a density file."""
    t_c, state, steps = checkpoint
    parts = np.stack([state.real, state.imag]) if np.iscomplexobj(state) else state.real[None]
    data = {
        "checkpoint_state": DENSITY_VARIABLES["checkpoint_state"].entry(
            parts.reshape(len(parts), -1)
        )
    }
    attrs = {
        "checkpoint_time": t_c,
        "checkpoint_steps": steps,
        "checkpoint_shape": ",".join(map(str, state.shape)),
        "checkpoint_complex": int(np.iscomplexobj(state)),
    }
    return data, attrs


def density_dataset(
    problem: Any,
    grid: Any,
    config: Any,
    *,
    times: Sequence[float],
    rho: Sequence[Array],
    diagnostics: Mapping[str, Sequence[float]],
    comments: Mapping[str, str] | None = None,
    slice_values: Mapping[str, Sequence[Array]] | None = None,
    scheme_attrs: Mapping[str, Any] | None = None,
    status: Mapping[str, Any] | None = None,
    checkpoint: tuple[float, Array, int] | None = None,
    centroids: Sequence[Array] | None = None,
    log_rho: Sequence[Array] | None = None,
    unfaithful: tuple[float, float, float] | None = None,
) -> Any:
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
    unfaithful : (t, min rho, max rho), optional
        When the density of a scheme that is not positive stopped being faithful (the
        attributes :data:`UNFAITHFUL_ATTRS`); None: not written.
    """

    model = problem.model
    comments = comments or {}
    space = grid.space_dims
    rho = np.array(rho).reshape((len(rho), problem.n_xi) + grid.shape)
    if problem.has_auxiliary:
        rho_var = (("time", "xi") + space, rho)
    else:
        rho_var = (("time",) + space, rho[:, 0])
    coords = {**_time_coord(times), **grid.dataset_coords()}
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
            data_vars[name] = DENSITY_VARIABLES[name].entry(
                np.array(diagnostics[name]), grid, **comment
            )
    if centroids is not None:
        centroids = np.array(centroids)
        name = CENTROID_VARIABLES[int(centroids.ndim - 1 > len(grid.shape))]  # points: xyz
        data_vars[name] = DENSITY_VARIABLES[name].entry(
            centroids.reshape((len(times),) + grid.shape + centroids.shape[1 + len(grid.shape) :]),
            grid,
        )
    if log_rho is not None:
        data_vars["log_rho"] = DENSITY_VARIABLES["log_rho"].entry(
            np.array(log_rho).reshape((len(times),) + grid.shape), grid
        )
    if slice_values:
        data_vars.update(_slice_variables(slice_values, len(times), grid, model.auxiliary))
    attrs = _header(SCHEMA, problem.domain, model)
    attrs.update(
        {
            "scheme": config.discretization.scheme,
            "beta": float(model.beta),
            "config": config.to_toml(),
            "title": f"spheredens {model.name} on the {problem.domain}, beta = {model.beta:g}",
            "history": history(),
            "cfl": float(config.time.cfl),
            "t_end": float(config.time.t_end),
        }
    )
    attrs.update(scheme_attrs or {})
    if model.auxiliary is not None:
        attrs["auxiliary_kernel"] = model.auxiliary.name
    attrs.update(status or {})
    if unfaithful is not None:
        attrs.update(zip(UNFAITHFUL_ATTRS, map(float, unfaithful)))
    if checkpoint is not None:
        state_var, state_attrs = _density_checkpoint(checkpoint)
        data_vars.update(state_var)
        attrs.update(state_attrs)
    return cf_encode(xr.Dataset(data_vars, coords=coords, attrs=attrs))


def particle_dataset(
    times: Sequence[float],
    positions: Any,
    weight: Array,
    *,
    domain: str,
    model: Any = None,
    config: str | None = None,
    attrs: Mapping[str, Any] | None = None,
    title: str | None = None,
    status: Mapping[str, Any] | None = None,
    labels: tuple[NDArray[np.int64], Array, Array] | None = None,
    checkpoint: tuple[float, Array, int] | None = None,
    weight_long_name: str | None = None,
    w2_projection: tuple[Sequence[float], str] | None = None,
) -> Any:
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

    var = PARTICLE_VARIABLES
    data = {"position": var["position"].entry(np.asarray(positions))}
    data["particle_weight"] = var["particle_weight"].entry(
        weight, **({} if weight_long_name is None else {"long_name": weight_long_name})
    )
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
        data["w2_projection"] = var["w2_projection"].entry(
            np.asarray(values, dtype=float), comment=comment
        )
    if checkpoint is not None:
        data["checkpoint_position"] = var["checkpoint_position"].entry(checkpoint[1][0])
        header.update({"checkpoint_time": checkpoint[0], "checkpoint_steps": checkpoint[2]})
    return cf_encode(xr.Dataset(data, coords=_time_coord(times), attrs=header))
