"""Density versus particles: W2 at every common snapshot time (``spheredens compare``); for runs
with slices (``usa_av``) the marginal and every slice against the particles of that slice."""

from __future__ import annotations

import json
import tomllib
import warnings
from pathlib import Path
from typing import Any, Sequence

import numpy as np
from numpy.typing import NDArray

from ._lazy import xarray as xr
from ._types import Array
from ._validate import input_file_problem
from .accessor import register_accessor
from .analysis import DEPARTURE_FACTOR, DEPARTURE_OFFSET, curve_summary
from .config import config_from_dict
from .diagnostics import grid_atoms, particle_projection_distance
from .exceptions import ModelMismatchError, SchemaError, SpheredensWarning
from .geometry import domain_of_dimension
from .plot import plot_comparison_snapshots
from .problem import Problem
from .schema import COMPARE_SCHEMA, CONVENTIONS, PARTICLE_SCHEMA, SCHEMA, TIME, XI, cf_encode
from .simulate import Progress, progress_bar
from .transport import DENSITY_ATOMS

#: two snapshot times are the same when they differ by less than this (relative to max(1, |t|))
TIME_TOLERANCE = 1e-9


def common_times(t_density: Array, t_particles: Array) -> tuple[Array, Array]:
    """Index pairs of the snapshot times present in both (within 1e-9); never interpolated."""
    pairs = [(i, int(np.argmin(np.abs(t_particles - t)))) for i, t in enumerate(t_density)]
    pairs = [
        (i, j)
        for i, j in pairs
        if abs(t_particles[j] - t_density[i]) <= TIME_TOLERANCE * max(1.0, abs(t_density[i]))
    ]
    if not pairs:
        raise SchemaError(
            "the density and particle files have no snapshot time in common "
            f"(density: {_list(t_density)}; particles: {_list(t_particles)}); "
            "rerun one of them with the other's times (time.times)"
        )
    i, j = np.array(pairs).T
    return i, j


def partial_time_notes(shared: int, counts: Sequence[int], names: Sequence[str]) -> list[str]:
    """One sentence per file of which only some snapshots are compared: ``counts`` and ``names``
    are of the density, then of each particle run, and ``shared`` the number of times common
    to all of them (the times compared), e.g. "p.nc: compared at the 41 times it shares with
    d.nc, of its 1000". Files compared at all their snapshots are not named."""
    density, runs = names[0] or "the density", len(counts) - 1
    many = "s" if shared != 1 else ""
    out = []
    for k, (name, count) in enumerate(zip(names, counts)):
        if count <= shared:
            continue
        if k == 0:
            others = names[1] if runs == 1 else "every particle file"
            out.append(
                f"{density}: compared at the {shared} time{many} it shares with {others}, of its {count}"
            )
        elif runs == 1:
            out.append(
                f"{name}: compared at the {shared} time{many} it shares with {density}, of its {count}"
            )
        else:
            out.append(
                f"{name}: compared at the {shared} time{many} common to {density} and every particle "
                f"file, of its {count}"
            )
    return out


def _list(t: Array) -> str:
    t = np.asarray(t)
    shown = ", ".join(f"{v:g}" for v in t[:8])
    return shown + (f", ... ({t.size} times)" if t.size > 8 else "")


def particle_slices(
    particles: Any, xi: Array, *, name: str = "particle run"
) -> NDArray[np.int64] | None:
    """Slice index (into the density's labels ``xi``) of every particle: from the particles'
    ``xi`` labels when present (matched to within 1e-9), else from their ``slice`` indices;
    None when the file carries neither (unlabelled particles).

    Raises
    ------
    SchemaError
        A label that is not among ``xi``, or a slice index out of range.
    """
    xi = np.asarray(xi, dtype=float)
    if "xi" in particles and particles["xi"].dims == ("particle",):
        labels = np.asarray(particles["xi"].values, dtype=float)
        values, inverse = np.unique(labels, return_inverse=True)
        nearest = np.abs(values[:, None] - xi[None, :]).argmin(axis=1)
        bad = np.abs(xi[nearest] - values) > 1e-9 * np.maximum(1.0, np.abs(values))
        if np.any(bad):
            raise SchemaError(
                f"{name}: particle label xi = {values[bad][0]:g} is not a slice of the "
                f"density (xi: {_list(xi)})"
            )
        index = nearest[inverse.reshape(-1)]
        return index.astype(np.int64)
    if "slice" in particles and particles["slice"].dims == ("particle",):
        index = np.asarray(particles["slice"].values).astype(np.int64)
        if index.size and (index.min() < 0 or index.max() >= len(xi)):
            raise SchemaError(
                f"{name}: slice indices must lie in 0..{len(xi) - 1} (the density's slices)"
            )
        return index
    return None


#: relative tolerance of the numbers (beta, Q, K, V, initial parameters, slice labels and weights)
#: compared between a density and its particle runs
MODEL_TOLERANCE = 1e-12
#: how the command is called, in the messages about its arguments
USAGE = "spheredens compare DENSITY PARTICLES..."
#: the file kinds by ``spheredens_schema``: words for the messages
KINDS = {
    SCHEMA: "a density file",
    PARTICLE_SCHEMA: "a particle file",
    COMPARE_SCHEMA: "a comparison file",
    "spheredens-sweep-1": "a sweep's combined file",
}
#: the items of a model that compare checks, in this order
MODEL_ITEMS = (
    "domain",
    "model",
    "beta",
    "Q",
    "K",
    "V",
    "model.*",
    "initial density",
    "slice labels",
    "slice weights",
    "auxiliary.*",
)


def dataset_kind(ds: Any) -> tuple[str, str]:
    """What kind of spheredens file ``ds`` is: ``(kind, schema)`` with kind one of ``density``,
    ``particles``, ``comparison``, ``sweep``, ``analysis`` or ``other``, and the schema name
    (its ``spheredens_schema``, or a description when it has none)."""
    schema = str(ds.attrs.get("spheredens_schema", ""))
    kind = {
        SCHEMA: "density",
        PARTICLE_SCHEMA: "particles",
        COMPARE_SCHEMA: "comparison",
        "spheredens-sweep-1": "sweep",
    }.get(schema)
    if kind is not None:
        return kind, schema
    if "analysis" in schema or "min_w2_slope" in ds.variables or "departure_definition" in ds.attrs:
        return "analysis", schema or "no spheredens_schema attribute"
    if schema:
        return "other", schema
    if "rho" in ds.variables:  # files without the attribute (older, or built by hand)
        return "density", "no spheredens_schema attribute"
    if "position" in ds.variables:
        return "particles", "no spheredens_schema attribute"
    return "other", "no spheredens_schema attribute"


def _kind_words(kind: str, schema: str) -> str:
    if kind == "analysis":
        return f"an analysis file of analyze-beta ({schema})"
    if kind == "other":
        return (
            f"not a file of spheredens ({schema})"
            if schema.startswith("no ")
            else f"a {schema} file, neither a density nor a particle file"
        )
    return f"{KINDS.get(schema, 'a ' + kind + ' file')} ({schema})"


def file_kind(path: str | Path) -> tuple[str, str]:
    """:func:`dataset_kind` of the netCDF file ``path``, or ``("not netcdf", why)`` (``why``
    e.g. "is not a netCDF file").

    Raises
    ------
    SchemaError
        The file does not exist or is no regular file (one line: a directory, a device, a loop
        of symbolic links, a name too long).
    """
    path = Path(path)
    problem = input_file_problem(path, "a netCDF file")
    if problem:  # missing, a directory or device, a link loop, a name too long
        raise SchemaError(f"{str(path)!r} {problem}")
    with path.open("rb") as fh:
        head = fh.read(8)
    if not (head.startswith(b"CDF") or head.startswith(b"\x89HDF\r\n\x1a\n")):
        return "not netcdf", "is not a netCDF file"
    try:
        with xr.open_dataset(path) as ds:
            return dataset_kind(ds)
    except Exception as exc:  # any reader failure: one line, the first of the reader's message
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return "not netcdf", f"cannot be read as netCDF ({first[:200]})"


def check_argument_kinds(
    kinds: Sequence[tuple[str, str]],
    names: Sequence[str],
    *,
    usage: str = USAGE,
    first: str = "the first argument",
) -> None:
    """Refuse swapped or wrong-kind inputs of compare in one line.

    Parameters
    ----------
    kinds : sequence of (kind, schema)
        :func:`dataset_kind` (or :func:`file_kind`) of the density, then of each particle run.
    names : sequence of str
        Their names in the message (file names).
    usage : str
        The call to show, e.g. :data:`USAGE`.
    first : str
        What the density argument is called.

    Raises
    ------
    SchemaError
        The density is not a density file, or a particle run not a particle file.
    """
    how = f"compare takes the density file first: {usage}"

    def said(kind: str, schema: str) -> str:  # "is a particle file (...)", "is not a netCDF file"
        return schema if kind == "not netcdf" else f"is {_kind_words(kind, schema)}"

    (kind, schema), rest = kinds[0], list(kinds[1:])
    who = f"{first}, {names[0]}," if names[0] else first
    if kind == "particles":
        densities = [k for k, (kd, _) in enumerate(rest) if kd == "density"]
        if len(densities) == 1:  # swapped: say the order that works
            j = densities[0]
            order = [names[j + 1]] + [names[0]] + [n for k, n in enumerate(names[1:]) if k != j]
            fixed = "spheredens compare " + " ".join(order) if usage == USAGE else usage
            raise SchemaError(
                f"the arguments are swapped: {who} {said(kind, schema)} and {names[j + 1]} "
                f"is a density file; compare takes the density file first: {fixed}"
            )
        raise SchemaError(f"{who} {said(kind, schema)}; {how}")
    if kind == "not netcdf":
        raise SchemaError(f"{who} {schema}; {how}")
    if kind != "density":
        raise SchemaError(f"{who} {said(kind, schema)}, not a density file ({SCHEMA}); {how}")
    how = f"compare takes one density file, then particle files: {usage}"
    for k, (kind, schema) in enumerate(rest):
        if kind == "not netcdf":
            raise SchemaError(f"{names[k + 1]} (particle argument {k + 1}) {schema}; {how}")
        if kind != "particles":
            raise SchemaError(
                f"{names[k + 1]} (particle argument {k + 1}) {said(kind, schema)}, not a "
                f"particle file ({PARTICLE_SCHEMA}); {how}"
            )


def check_compare_files(density: str | Path, particles: Sequence[str | Path]) -> None:
    """Refuse, before reading them, a density path and particle paths of the wrong kinds
    (swapped, a comparison, sweep or analysis file, a file that is not netCDF), in one line
    (:func:`check_argument_kinds`)."""
    paths = [density, *particles]
    check_argument_kinds([file_kind(p) for p in paths], [str(p) for p in paths])


def _config_tables(ds: Any) -> dict[str, Any]:
    """The run configuration a file records (attribute ``config``, TOML or JSON), or {}."""
    text = ds.attrs.get("config")
    if not text:
        return {}
    for parse in (tomllib.loads, json.loads):
        try:
            data = parse(str(text))
        except Exception:  # not this format (or unreadable): try the next
            continue
        return data if isinstance(data, dict) else {}
    return {}


def model_record(ds: Any) -> dict[str, Any]:
    """What a density or particle file records of its model, by item of :data:`MODEL_ITEMS`:
    ``domain``, ``model`` (name) and ``beta`` from the attributes, ``Q``, ``K``, ``V`` from the
    variables, the other keys of its configuration's ``[model]`` table, its ``[initial]`` table
    (``initial density``), the slice labels and weights (usa_av: ``xi`` and ``xi_weight`` of a
    density, ``slice_xi`` and ``slice_weight`` of particles) and the other keys of ``[auxiliary]``.
    Items a file does not record are absent (a converted particle file has only ``domain``)."""
    rec: dict[str, Any] = {}
    cfg = _config_tables(ds)
    model = cfg.get("model", {}) if isinstance(cfg.get("model"), dict) else {}
    aux = cfg.get("auxiliary", {}) if isinstance(cfg.get("auxiliary"), dict) else {}
    if "domain" in ds.attrs:
        rec["domain"] = str(ds.attrs["domain"])
    if "model" in ds.attrs or "name" in model:
        rec["model"] = str(ds.attrs.get("model", model.get("name")))
    if "beta" in ds.attrs or "beta" in model:
        rec["beta"] = ds.attrs.get("beta", model.get("beta"))
    for name in ("Q", "K", "V"):
        if name in ds.variables:
            rec[name] = np.asarray(ds[name].values, dtype=float)
        elif name in model:
            rec[name] = np.asarray(model[name], dtype=float)
    rec.update(
        {f"model.{k}": v for k, v in model.items() if k not in ("name", "beta", "Q", "K", "V")}
    )
    if isinstance(cfg.get("initial"), dict):
        rec["initial density"] = cfg["initial"]
    density_labels = "xi" in ds.coords and ds["xi"].dims == ("xi",)
    labels = (
        ds["xi"].values
        if density_labels
        else ds["slice_xi"].values
        if "slice_xi" in ds.variables
        else aux.get("xi")
    )
    weights = (
        ds["xi_weight"].values
        if "xi_weight" in ds.variables
        else ds["slice_weight"].values
        if "slice_weight" in ds.variables
        else aux.get("weights")
    )
    if labels is not None:
        rec["slice labels"] = np.asarray(labels, dtype=float)
    if weights is not None:
        rec["slice weights"] = np.asarray(weights, dtype=float)
    rec.update({f"auxiliary.{k}": v for k, v in aux.items() if k not in ("xi", "weights")})
    return rec


def _shown_value(value: Any, other: Any = None) -> str:
    """A value for a message: numbers with %g (more digits when that hides the difference),
    lists as lists, strings quoted."""

    def show(v: Any, fmt: str) -> str:
        if isinstance(v, str):
            return repr(v)
        if isinstance(v, dict):
            return "{" + ", ".join(f"{k} = {show(x, fmt)}" for k, x in v.items()) + "}"
        if isinstance(v, (list, tuple, np.ndarray)):
            return (
                "["
                + ", ".join(show(x, fmt) for x in (v.tolist() if isinstance(v, np.ndarray) else v))
                + "]"
            )
        if isinstance(v, (bool, np.bool_)):
            return str(bool(v)).lower()
        if isinstance(v, (int, float, np.integer, np.floating)):
            return format(float(v), fmt)
        return str(v)

    text = show(value, "g")
    if other is not None and text == show(other, "g"):
        text = show(value, ".17g")
    return text


def _numbers(value: Any) -> Array | None:
    """``value`` as a float array when it is a number or a (nested) list of numbers."""
    if isinstance(value, (str, bool, np.bool_, dict)) or value is None:
        return None
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        return None
    return arr


def _difference(item: str, ours: Any, theirs: Any, p: str, d: str) -> str:
    """The difference in words between a particle file's value ``ours`` and the density's
    ``theirs`` of ``item`` ("" when they agree to :data:`MODEL_TOLERANCE`)."""
    if isinstance(ours, dict) and isinstance(theirs, dict):  # a table: its first differing key
        prefix = "initial" if item == "initial density" else item
        for key in list(theirs) + [k for k in ours if k not in theirs]:
            if key not in ours or key not in theirs:
                where, there = (p, d) if key in ours else (d, p)
                value = ours.get(key, theirs.get(key))
                return (
                    f"the initial density differs: {prefix}.{key} is {_shown_value(value)} in {where} "
                    f"and not given in {there}"
                )
            if _difference(key, ours[key], theirs[key], p, d):
                return (
                    f"the initial density differs: {prefix}.{key} is "
                    f"{_shown_value(ours[key], theirs[key])} in {p} but "
                    f"{_shown_value(theirs[key], ours[key])} in {d}"
                )
        return ""
    a, b = _numbers(ours), _numbers(theirs)
    if a is None or b is None:
        same = (
            (str(ours) == str(theirs))
            if type(ours) is type(theirs) or (a is None and b is None)
            else False
        )
        return (
            ""
            if same
            else (
                f"{item} is {_shown_value(ours, theirs)} in {p} but "
                f"{_shown_value(theirs, ours)} in {d}"
            )
        )
    label = {"slice labels": "xi", "slice weights": "weight"}.get(item, item)
    if a.shape != b.shape:
        if item in ("slice labels", "slice weights"):
            return f"the {item} differ: {a.size} slices in {p} but {b.size} in {d}"
        return f"{item} has shape {a.shape} in {p} but {b.shape} in {d}"
    with np.errstate(invalid="ignore"):
        gap = np.where(np.isnan(a) & np.isnan(b), 0.0, np.where(a == b, 0.0, np.abs(a - b)))
        scale = max(
            float(np.nanmax(np.abs(a), initial=0.0)), float(np.nanmax(np.abs(b), initial=0.0))
        )
    gap = np.where(np.isnan(gap), np.inf, gap)
    if not a.size or float(gap.max()) <= MODEL_TOLERANCE * scale:
        return ""
    if a.ndim == 0:
        return f"{item} is {_shown_value(float(a), float(b))} in {p} but {_shown_value(float(b), float(a))} in {d}"
    at = np.unravel_index(int(np.argmax(gap)), a.shape)
    entry = f"{label}[{', '.join(map(str, at))}] is {_shown_value(a[at], b[at])} in {p} but {_shown_value(b[at], a[at])} in {d}"
    if item in ("slice labels", "slice weights"):
        return f"the {item} differ: {entry}"
    return f"{item} differs: {entry}"


def _item_order(record: dict[str, Any]) -> list[str]:
    """The keys of a model record in the order of :data:`MODEL_ITEMS`."""
    order = []
    for item in MODEL_ITEMS:
        if item.endswith(".*"):
            order += [k for k in record if k.startswith(item[:-1])]
        elif item in record:
            order.append(item)
    return order


def model_differences(
    density: Any,
    run: Any,
    *,
    density_name: str = "the density",
    particle_name: str = "the particles",
) -> tuple[list[str], list[str]]:
    """The differences between the model of a density and of a particle run, in words, in the
    order of :data:`MODEL_ITEMS`, and the items the density records that the particle run does
    not (not checked).

    Numbers agree when they differ by at most :data:`MODEL_TOLERANCE` relative to the larger
    magnitude (of the matrix, for Q, K, V and lists).
    """
    ours, theirs = model_record(run), model_record(density)
    differences, missing = [], []
    for item in _item_order(theirs) + [k for k in _item_order(ours) if k not in theirs]:
        if item not in ours or item not in theirs:
            if item in theirs:
                missing.append(item)
            continue
        diff = _difference(item, ours[item], theirs[item], particle_name, density_name)
        if diff:
            differences.append(diff)
    return differences, missing


def check_models(
    density: Any,
    runs: Sequence[Any],
    *,
    density_file: str = "",
    particle_files: Sequence[str] = (),
    allow_mismatch: bool = False,
) -> dict[str, Any]:
    """Check that every particle run comes from the model of the density (:data:`MODEL_ITEMS`).

    Returns
    -------
    dict
        ``mismatches`` ((file name, its differences) per run, when ``allow_mismatch``),
        ``unchecked`` ((file name, the items it does not record) per run), ``checked`` (names of the runs whose
        model was checked and agrees) and ``summary`` (one sentence, for the ``model_check``
        attribute and the printed verdict).

    Raises
    ------
    ModelMismatchError
        A particle run from another model (the first difference of the first such run); on
        another domain even with ``allow_mismatch``.
    """
    d = density_file or "the density"
    out: dict[str, Any] = {"mismatches": [], "unchecked": [], "checked": []}
    for k, run in enumerate(runs):
        named = k < len(particle_files) and particle_files[k]
        p = particle_files[k] if named else f"particle run {k}"
        differences, missing = model_differences(density, run, density_name=d, particle_name=p)
        if differences:
            head = (
                f"particles {p} do not belong to density {d}"
                if named and density_file
                else f"particles {p} do not belong to {d}"
                if named
                else f"{p} does not belong to density {d}"
                if density_file
                else f"{p} does not belong to {d}"
            )
            if differences[0].startswith("domain "):
                raise ModelMismatchError(f"{head}: {differences[0]}; W2 needs both on one domain")
            if not allow_mismatch:
                raise ModelMismatchError(
                    f"{head}: {differences[0]}", hint="pass allow_mismatch=True to compare anyway"
                )
            out["mismatches"].append((p, differences))
        elif missing:
            out["unchecked"].append((p, missing))
        else:
            out["checked"].append(p)
    parts = []
    if out["mismatches"]:
        parts.append(
            "models differ, compared anyway (allow_mismatch): "
            + "; ".join(diff for _, diffs in out["mismatches"] for diff in diffs)
        )
    if out["unchecked"]:
        parts.append(unchecked_notice(out["unchecked"]))
    if out["checked"]:
        every = not parts
        parts.append(
            f"same model in {d} and {'every particle run' if every else ', '.join(out['checked'])} "
            "(model, beta, Q, K, V, domain, initial density"
            + (", slice labels and weights" if "slice labels" in model_record(density) else "")
            + ")"
        )
    out["summary"] = ". ".join(parts)
    return out


def unchecked_notice(unchecked: Sequence[tuple[str, list[str]]]) -> str:
    """The one-line notice about particle runs whose model could not be checked."""
    bare = [p for p, items in unchecked if {"model", "beta", "Q", "K", "V"} <= set(items)]
    partial = [(p, items) for p, items in unchecked if p not in bare]
    parts = []
    if bare:
        parts.append(
            f"{', '.join(bare)} {'carries' if len(bare) == 1 else 'carry'} no model (converted "
            "from another code): the model was not checked"
        )
    for p, items in partial:
        parts.append(f"{p} does not record {', '.join(items)}: those were not checked")
    them = "it" if len(unchecked) == 1 else "them"
    return (
        "; ".join(parts) + f"; stamp {them} with spheredens convert-particles ... --config CONFIG"
    )


def compare(
    density: Any,
    particles: Any | Sequence[Any],
    *,
    n_points: int = DENSITY_ATOMS,
    density_file: str = "",
    particle_files: Sequence[str] = (),
    allow_mismatch: bool = False,
    progress: bool | None = None,
) -> Any:
    """W2 between a density run and particle runs: ``spheredens compare DENSITY PARTICLES...``.

    At every snapshot time the files share (never interpolated in time), the Wasserstein-2
    distance with the geodesic cost between rho_t and each particle measure: exact on the
    circle (the density as its piecewise-constant cells), on the sphere the exact EMD after
    coarsening the density to ``n_points`` atoms (``density_resolution`` bounds that step).

    Parameters
    ----------
    density : xarray.Dataset
        A density run (:func:`spheredens.run`, :func:`spheredens.open_run`), schema
        spheredens-1. With slices (``usa_av``: dim ``xi``) ``w2`` compares the marginal
        sum_k r_k rho_k with all particles (their weights), and ``w2_slice`` each slice.
    particles : Dataset or list of Datasets
        Particle runs (:func:`spheredens.run_particles`, :func:`spheredens.open_particles`),
        schema spheredens-particles-1, same domain; for a density with slices, particles
        labelled by ``xi`` or ``slice`` (particle) (see :func:`particle_slices`).
    n_points : int
        Sphere: the density is coarsened to about this many atoms before the exact EMD (default
        4096, that of the runs' ``w2_projection``).
    density_file, particle_files : str, sequence of str
        The file names, recorded in the result and used in messages.
    allow_mismatch : bool
        Compare particle runs of another model than the density's (beta, Q, K, V, initial
        density, slice labels and weights: :func:`check_models`) anyway, recording the
        differences in the attribute ``model_mismatch``; otherwise they are refused in one line
        naming the first difference. Particle runs that record no model (converted from other
        codes) are compared with a :class:`SpheredensWarning`.
    progress : bool, optional
        A progress bar on stderr (tqdm) of the snapshots and particle files done: True always,
        False never, None (default) on a terminal or in a notebook only
        (:func:`spheredens.simulate.progress_wanted`).

    Returns
    -------
    xarray.Dataset
        ``w2`` (run, time) in radians, ``w2_mean`` and ``w2_std`` over runs (time; NaN with a
        single run), and
        ``density_resolution`` (time): on the circle h / sqrt(12) for uniform cells, the W2 between
        the piecewise-constant density and its cell-centre atoms (the grid's resolution); on the
        sphere the coarsening bound (see :func:`spheredens.transport.sphere_density_atoms`). The
        density is represented as for the runs' ``w2_projection``
        (:func:`spheredens.diagnostics.grid_atoms`, stated in the ``comment`` of ``w2``). With
        several runs also ``w2_between_runs`` (run, other_run): W2 between the runs at the last
        common time, the ensemble's sampling error (:func:`ensemble_agreement`). The departure
        times and the verdict are in ``attrs["departure_verdict"]``. With slices also
        ``w2_slice`` (run, time, xi): W2 between rho_k (normalized) and the particles of slice k
        (weights renormalized; NaN where a run has no particle of slice k or no labels) and
        ``w2_slice_mean`` (time, xi) over runs. The attribute ``model_check`` says whether
        the models agree (``model_mismatch``: the differences accepted by ``allow_mismatch``;
        ``model_not_checked``: the runs that record no model). The coordinate ``time`` holds
        the times compared, those common to the density and every run; ``times_not_compared``
        (present when a file has other snapshots) names each such file, one line each
        (:func:`partial_time_notes`), and the command line prints those lines as notes.

    Raises
    ------
    SchemaError
        Swapped or wrong-kind inputs (:func:`check_argument_kinds`), no common time, labels
        that are not slices of the density.
    ModelMismatchError
        A particle run of another model (:func:`check_models`), unless ``allow_mismatch``.

    Example
    -------
    With the files of the examples of :func:`spheredens.run` and
    :func:`spheredens.run_particles`:

    >>> import spheredens as sd
    >>> result = sd.compare(sd.open_run("example_c.nc"),
    ...                     [sd.open_particles("example_c_particles.nc")])
    >>> w2 = result["w2"].sel(run=0).values      # W2(rho_t, mu_t) at the common times
    >>> verdict = result.attrs["departure_verdict"]
    """

    register_accessor()
    runs = [particles] if isinstance(particles, xr.Dataset) else list(particles)
    names = [density_file] + [
        particle_files[k] if k < len(particle_files) and particle_files[k] else f"particle run {k}"
        for k in range(len(runs))
    ]
    check_argument_kinds(
        [dataset_kind(density)] + [dataset_kind(p) for p in runs],
        names,
        usage="compare(density, particles)",
        first="the density argument",
    )
    models = check_models(
        density,
        runs,
        density_file=density_file,
        particle_files=particle_files,
        allow_mismatch=allow_mismatch,
    )
    if models["unchecked"]:
        warnings.warn(unchecked_notice(models["unchecked"]), SpheredensWarning, stacklevel=2)
    grid = density.sd.grid()
    domain = grid.domain.name
    for k, p in enumerate(runs):
        if p.attrs.get("domain", domain) != domain:
            raise SchemaError(
                f"particle run {k} is on the {p.attrs.get('domain')}, the density on the {domain}"
            )
        d = p["position"].shape[-1]
        if d != grid.domain.d:
            raise SchemaError(
                f"particle run {k} has {d}-component positions; the {domain} needs {grid.domain.d}"
            )
    t_den = density["time"].values
    index = [common_times(t_den, p["time"].values) for p in runs]
    shared = sorted(set.intersection(*[set(i.tolist()) for i, _ in index]))
    if not shared:
        raise SchemaError("no snapshot time is common to the density and every particle run")
    times = t_den[shared]
    partial = partial_time_notes(len(shared), [t_den.size] + [p.sizes["time"] for p in runs], names)
    sliced = "xi" in density["rho"].dims
    xi = density["xi"].values if sliced else np.zeros(0)
    labels = [
        particle_slices(p, xi, name=f"particle run {k}") if sliced else None
        for k, p in enumerate(runs)
    ]
    w2 = np.full((len(runs), len(shared)), np.nan)
    w2_slice = np.full((len(runs), len(shared), len(xi)), np.nan)
    resolution = np.zeros(len(shared))

    distance = grid.domain.w2
    represent = grid_atoms(grid.domain)

    centroids = "rho_centroid" in density  # the marginal's cell centroids (log_sl)
    bar = progress_bar(
        len(shared) * len(runs),
        enabled=progress,
        delay=Progress.DELAY,
        desc="compare",
        bar_format="{desc}: {n}/{total} (snapshot, file) |{bar}| {percentage:3.0f}%  "
        "{elapsed} elapsed, ~{remaining} left",
    )
    for col, i in enumerate(shared):
        centroid = np.asarray(density["rho_centroid"].values[i], dtype=float) if centroids else None
        atoms, masses, bound = represent.atoms(grid, density.sd.marginal(i), n_points, centroid)
        resolution[col] = represent.resolution(grid, density.sd.marginal(i), bound)
        slice_atoms = [
            represent.atoms(grid, np.asarray(density["rho"].values[i, m], dtype=float), n_points)[
                :2
            ]
            for m in range(len(xi))
        ]
        for k, (p, (di, pj)) in enumerate(zip(runs, index)):
            j = int(pj[list(di).index(i)])
            x = np.asarray(p["position"].values[j])
            w = np.asarray(p["particle_weight"].values)
            w2[k, col] = distance(atoms, masses, x, w)
            if bar is not None:  # a (snapshot, file) pair done (its slices below are quick)
                bar.update(1)
            if labels[k] is None:
                continue
            for m, (a, ma) in enumerate(slice_atoms):
                sel = labels[k] == m
                if np.any(sel) and w[sel].sum() > 0 and ma.sum() > 0:
                    w2_slice[k, col, m] = distance(a, ma, x[sel], w[sel])
    if bar is not None:
        bar.close()
    method = f"{represent.method}; {represent.describe(grid, n_points, centroids)}"
    ds = xr.Dataset(
        {
            "w2": (
                ("run", "time"),
                w2,
                {"long_name": "W2 density vs particles", "units": "radian", "comment": method},
            ),
            "w2_mean": (
                "time",
                w2.mean(axis=0),
                {
                    "long_name": "mean W2 over runs",
                    "units": "radian",
                    "comment": "mean of w2 over the particle runs",
                },
            ),
            "w2_std": (
                "time",
                w2.std(axis=0, ddof=1) if len(runs) > 1 else np.full(len(shared), np.nan),
                {
                    "long_name": "std of W2 over runs",
                    "units": "radian",
                    "comment": "standard deviation of w2 over the particle runs (ddof = 1); NaN with "
                    "a single particle run",
                },
            ),
            "density_resolution": (
                "time",
                resolution,
                {
                    "long_name": "density resolution",
                    "units": "radian",
                    "comment": "resolution of the density (circle: W2 between its piecewise-constant cells "
                    "and their centres; sphere: W2 bound between grid and coarse atoms)",
                },
            ),
            "seed": (
                "run",
                np.array([int(p.attrs.get("seed", -1)) for p in runs]),
                {"long_name": "seed", "comment": "seed of each particle run (-1: unknown)"},
            ),
            "n_particles": (
                "run",
                np.array([p.sizes["particle"] for p in runs]),
                {
                    "long_name": "number of particles",
                    "units": "1",
                    "comment": "number of particles of each run",
                },
            ),
        },
        coords={"time": TIME.entry(times)},
        attrs={
            "Conventions": CONVENTIONS,
            "spheredens_schema": COMPARE_SCHEMA,
            "density_file": density_file,
            "particle_files": "\n".join(particle_files),
            "domain": domain,
            "method": method,
            "initialization": ", ".join(
                sorted({str(p.attrs.get("initialization", "unknown")) for p in runs})
            ),
            "model_check": models["summary"],
        },
    )
    if models["mismatches"]:
        ds.attrs["model_mismatch"] = "; ".join(
            f"{p}: {diff}" for p, diffs in models["mismatches"] for diff in diffs
        )
    if partial:  # files with snapshots that were not compared, one line each
        ds.attrs["times_not_compared"] = "\n".join(partial)
    if models["unchecked"]:
        ds.attrs["model_not_checked"] = "; ".join(
            f"{p}: {', '.join(items)}" for p, items in models["unchecked"]
        )
    dep = departures(density, runs)
    ds["density_departure_time"] = (
        (),
        dep["density"]["departure_time"],
        {
            "long_name": "density departure time",
            "units": "1",
            "comment": "departure time of the density from Pi_# rho_0: "
            f"first snapshot after the minimum of w2_projection with W2 > {DEPARTURE_FACTOR:g} min + "
            f"{DEPARTURE_OFFSET:g} (analyze-beta); NaN: not by t = {dep['density']['t_end']:g}",
        },
    )
    ds["departure_time"] = (
        "run",
        np.array([r["departure_time"] for r in dep["runs"]]),
        {
            "long_name": "particle departure time",
            "units": "1",
            "comment": "departure time of each particle run from Pi_# rho_0, as density_departure_time, "
            "on the run's own snapshot times, from the W2 of the "
            "particles to Pi_# of their own initial positions (particle_w2_projection); NaN: "
            "not by the run's last time",
        },
    )
    at_common = [
        [curve[int(pj[list(di).index(i)])] for i in shared]
        for curve, (di, pj) in zip(dep["w2"], index)
    ]
    ds["particle_w2_projection"] = (
        ("run", "time"),
        np.array(at_common, dtype=float),
        {
            "long_name": "particle W2 to own Pi_# rho_0",
            "units": "radian",
            "comment": "W2 of each particle run to Pi_# of its initial particles, at the common times; "
            "departure_time uses every snapshot of the run",
        },
    )
    ds.attrs["departure_verdict"] = dep["verdict"]
    if len(runs) > 1:  # the ensemble's own spread at the last common time
        last = [int(pj[list(di).index(shared[-1])]) for di, pj in index]
        ds["w2_between_runs"] = (
            ("run", "other_run"),
            w2_between_runs(runs, last),
            {
                "long_name": "W2 between particle runs",
                "units": "radian",
                "comment": "W2 between the particle runs at the last common time (the ensemble's "
                "sampling error; see spheredens.compare.ensemble_agreement)",
                "time": float(times[-1]),
            },
        )
    if sliced:
        ds = ds.assign_coords(xi=XI.entry(xi))
        ds["w2_slice"] = (
            ("run", "time", "xi"),
            w2_slice,
            {
                "long_name": "W2 slice vs its particles",
                "units": "radian",
                "comment": "W2 between slice density rho_k and the particles of slice k (each normalized)",
            },
        )
        ds["w2_slice_mean"] = (
            ("time", "xi"),
            w2_slice.mean(axis=0),
            {
                "long_name": "mean slice W2 over runs",
                "units": "radian",
                "comment": "mean of w2_slice over the particle runs",
            },
        )
        ds["w2"].attrs["long_name"] = "W2 marginal vs particles"
        ds["w2"].attrs["comment"] = (
            f"W2 distance between the marginal density sum_k r_k rho_k and all particles; {method}"
        )
        ds.attrs["slices"] = (
            "w2: marginal vs all particles; w2_slice: each slice vs its particles "
            "(labels: " + ", ".join("none" if lab is None else "yes" for lab in labels) + ")"
        )
    return cf_encode(ds)


def density_model(density: Any):
    """The model of the density run ``density`` (rebuilt from its ``config``), or None and the
    reason it could not be."""
    text = density.attrs.get("config")
    if not text:
        return None, "the density file has no config attribute (not written by spheredens run)"
    try:
        return Problem.from_config(config_from_dict(tomllib.loads(str(text)))).model, ""
    except Exception as exc:  # any failure to rebuild the model: say so, do not stop compare
        return None, f"the density's configuration could not be rebuilt ({exc})"


def particle_projection_curve(model: Any, run: Any) -> tuple[Array, str]:
    """W2 of a particle run to Pi_# of its own particles at t = 0 at each of its snapshots
    (:class:`spheredens.diagnostics.ParticleProjectionDistance`, the ``w2_projection`` that
    spheredens particle runs record), and the reason when it is undefined (NaN then)."""
    t = np.asarray(run["time"].values, dtype=float)
    positions = np.asarray(run["position"].values, dtype=float)
    weight = np.asarray(run["particle_weight"].values, dtype=float)
    if abs(t[0]) > TIME_TOLERANCE:
        return np.full(t.size, np.nan), f"the particle file starts at t = {t[0]:g}, not 0"
    distance, reason = particle_projection_distance(model, positions[0], weight)
    if distance is None:
        return np.full(t.size, np.nan), reason
    return np.array([distance(x, weight) for x in positions]), ""


def departures(density: Any, runs: Sequence[Any]) -> dict[str, Any]:
    """When the density and each particle run leave the zero-temperature target, by the
    definition of ``analyze-beta`` (:func:`spheredens.analysis.curve_summary`: the first
    snapshot after the minimum of W2 to the target with W2 > 2 min + 0.02), each on its own
    snapshot times.

    The density's W2 is its ``w2_projection`` (to Pi_# rho_0); each particle run's is to
    Pi_# of its own initial particles (:func:`particle_projection_curve`, with the density's
    model), computed from the positions so that files converted from other codes are treated
    alike.

    Returns
    -------
    dict
        ``density`` (curve summary and ``t_end``, the density's last time), ``runs`` (one per
        particle run, the same keys), ``w2`` (per run, its W2 curve at each of its times),
        ``verdict`` (a sentence: who departs when, and what W2 between them means after that)
        and ``reason`` (why no departure could be computed, else empty).
    """
    t_den = np.asarray(density["time"].values, dtype=float)
    den_w2 = (
        np.asarray(density["w2_projection"].values, dtype=float)
        if "w2_projection" in density
        else np.full(t_den.size, np.nan)
    )
    dens = {**curve_summary(t_den, den_w2), "t_end": float(t_den[-1])}
    model, reason = density_model(density)
    rows, curves = [], []
    for p in runs:
        t_p = np.asarray(p["time"].values, dtype=float)
        w, why = (
            (np.full(t_p.size, np.nan), reason)
            if model is None
            else particle_projection_curve(model, p)
        )
        reason = reason or why
        curves.append(w)
        rows.append({**curve_summary(t_p, w), "t_end": float(t_p[-1])})
    if not np.isfinite(dens["min_w2"]):
        reason = reason or "the density file has no finite w2_projection"
    verdict = (
        f"departure from Pi_# rho_0 not compared: {reason}"
        if reason
        else departure_verdict(dens, rows)
    )
    return {"density": dens, "runs": rows, "w2": curves, "verdict": verdict, "reason": reason}


def departure_verdict(density: dict[str, float], runs: Sequence[dict[str, float]]) -> str:
    """The sentence ``compare`` prints about the departures (see :func:`departures`)."""
    rule = (
        f"departure: first time after the minimum with W2 to the target > {DEPARTURE_FACTOR:g} min + "
        f"{DEPARTURE_OFFSET:g}; targets Pi_# rho_0 and Pi_# of each run's initial particles"
    )
    t_d = density["departure_time"]
    dep = np.array([r["departure_time"] for r in runs])
    gone = dep[np.isfinite(dep)]
    ends = np.array([r["t_end"] for r in runs])
    if gone.size:
        spread = (
            f"at t = {gone.min():g}"
            if gone.size == 1 or gone.min() == gone.max()
            else f"at t = {gone.min():g} to {gone.max():g} (mean {gone.mean():.4g})"
        )
        parts = f"{gone.size} of {len(runs)} particle run(s) depart {spread}"
        if gone.size < len(runs):
            parts += f", the others not by t = {ends[~np.isfinite(dep)].min():g}"
    else:
        parts = f"the particles have not departed by t = {ends.min():g}"
    dens = (
        f"the density departs at t = {t_d:g}"
        if np.isfinite(t_d)
        else f"the density has not departed by t = {density['t_end']:g}"
    )
    if np.isfinite(t_d) and gone.size:
        first = min(t_d, float(gone.min()))
        who = "the particles" if gone.min() < t_d else "the density"
        tail = (
            f"; from t = {first:g} on they are in different phases ({who} first), so W2 between "
            "them measures the gap between the departures, not an error of either code"
        )
        if abs(t_d - gone.min()) <= 0 and abs(t_d - gone.max()) <= 0:
            tail = "; they depart together"
    elif np.isfinite(t_d):
        tail = (
            f"; the density has left Pi_# rho_0 and the particles have not: after t = {t_d:g} "
            "W2 between them measures the departure, not an error of either code"
        )
    elif gone.size:
        tail = (
            f"; the particles have left Pi_# rho_0 and the density has not: after t = {gone.min():g} "
            "W2 between them measures the departure, not an error of either code (at low "
            "temperature n particles leave early: they carry no mass below ~1/n, "
            "docs/particles_low_temperature.md)"
        )
    else:
        tail = "; neither has departed"
    return f"{dens}; {parts}{tail} ({rule})"


def w2_between_runs(runs: Sequence[Any], index: int | Sequence[int] = -1) -> Array:
    """Pairwise W2 between particle runs at snapshot ``index``, a symmetric (R, R) matrix.

    ``index`` is one snapshot index for all runs or one per run. All particles of each run
    with their weights (on the circle the exact W2 of POT's ``wasserstein_circle``, on the
    sphere the exact EMD with squared geodesic cost).
    """
    runs = list(runs)
    idx = [index] * len(runs) if np.ndim(index) == 0 else list(index)
    out = np.zeros((len(runs), len(runs)))
    for i in range(len(runs)):
        xa, wa = runs[i]["position"].values[idx[i]], runs[i]["particle_weight"].values
        for j in range(i + 1, len(runs)):
            xb, wb = runs[j]["position"].values[idx[j]], runs[j]["particle_weight"].values
            out[i, j] = domain_of_dimension(xa.shape[-1]).w2(xa, wa, xb, wb)
            out[j, i] = out[i, j]
    return out


def ensemble_agreement(to_density: Array, between: Array) -> dict[str, Any]:
    """Is a density within the sampling error of an ensemble of particle runs?

    Parameters
    ----------
    to_density : ndarray (R,)
        W2 from the density to each of R particle runs (same n, different seeds).
    between : ndarray (R, R)
        W2 between the runs (:func:`w2_between_runs`).

    Returns
    -------
    dict
        ``density_mean``: mean W2 from the density to the runs; ``between_mean``: mean W2 over
        pairs of runs; ``run_means``: for each run its mean W2 to the other runs;
        ``rank``: how many runs have a smaller ``run_means`` than ``density_mean`` (0..R);
        ``quantile`` = rank / R; ``no_farther_than_average``: density_mean <= between_mean;
        ``within_spread``: rank < R, i.e. some run is farther from the others than the density
        is from the runs.

    Notes
    -----
    Two readings of "the density agrees with the particles to within their sampling error".
    ``within_spread`` asks whether the density could pass for one more member of the ensemble:
    its mean distance to the runs is not larger than every run's mean distance to the others
    (with R runs, a density drawn like a run fails by chance with probability 1 / (R + 1)).
    ``no_farther_than_average`` is stricter: the mean-field limit of unbiased fluctuations sits
    at the ensemble's centre, closer to the runs than they are to each other (by sqrt 2 for
    independent Gaussian fluctuations), and fails when the runs share a bias, e.g. mass that
    is smaller than one particle's.
    """
    to_density = np.asarray(to_density, dtype=float)
    between = np.asarray(between, dtype=float)
    r = len(to_density)
    if r < 2 or between.shape != (r, r):
        raise ValueError(
            f"need at least 2 runs and an ({r}, {r}) matrix of distances between them, "
            f"got {r} runs and shape {between.shape}"
        )
    run_means = between.sum(axis=1) / (r - 1)
    density_mean = float(to_density.mean())
    between_mean = float(between[np.triu_indices(r, 1)].mean())
    rank = int(np.sum(run_means < density_mean))
    return {
        "density_mean": density_mean,
        "between_mean": between_mean,
        "run_means": run_means,
        "rank": rank,
        "quantile": rank / r,
        "no_farther_than_average": density_mean <= between_mean,
        "within_spread": rank < r,
    }


def compare_output_path(density_path: str | Path, output: str | Path | None = None) -> Path:
    """The comparison file of ``spheredens compare``: ``output`` when given, else
    ``<density>_compare.nc`` beside the density file (named after the density: a name like the
    particle files' would match their glob next time)."""
    if output:
        return Path(output)
    density_path = Path(density_path)
    return density_path.with_name(density_path.stem + "_compare.nc")


def comparison_summary(cmp: Any) -> dict[str, Any]:
    """What ``spheredens compare`` reports about a result of :func:`compare` besides W2 per time.

    Returns
    -------
    dict
        ``ensemble``: :func:`ensemble_agreement` of the density and the runs at the last common
        time (None with a single run); ``slices`` (None without slices): for every time a dict
        with ``mean`` and ``max`` of ``w2_slice_mean`` over the slices with particle labels and
        their ``count`` (0, and NaN mean and max, when the runs have no labels).
    """
    ensemble = None
    if "w2_between_runs" in cmp:
        ensemble = ensemble_agreement(cmp["w2"].values[:, -1], cmp["w2_between_runs"].values)
    slices = None
    if "w2_slice" in cmp:  # usa_av: w2 is the marginal's
        slices = []
        for row in cmp["w2_slice_mean"].values:
            if np.all(np.isnan(row)):
                slices.append({"mean": np.nan, "max": np.nan, "count": 0})
                continue
            slices.append(
                {
                    "mean": float(np.nanmean(row)),
                    "max": float(np.nanmax(row)),
                    "count": int(np.sum(~np.isnan(row))),
                }
            )
    return {"ensemble": ensemble, "slices": slices}


def plot_comparison(
    cmp: Any, density: Any, particles: Any, path: str | Path, *, times: Any = None
) -> Path:
    """W2 against time with the ensemble band (mean +- std and min to max over the runs), and the
    density with the particles of ``particles`` and the targets at a few common snapshots, in
    radians: :func:`spheredens.plot.plot_comparison_snapshots`."""
    return plot_comparison_snapshots(cmp, density, particles, path, times=times)


def density_function(ds: Any, index: int) -> Any:
    """rho (the marginal with slices) at snapshot ``index`` of a run as a function of points
    x (n, d) -> (n,): ``ds.sd.density_function(index)``
    (:meth:`spheredens.accessor.SpheredensAccessor.density_function`)."""
    register_accessor()
    return ds.sd.density_function(index)
