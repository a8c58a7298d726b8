"""Density versus particles: W2 at every common snapshot time (``spheredens compare``); for runs
with slices (``usa_av``) the marginal and every slice against the particles of that slice; the
spread of an ensemble of particle runs (:func:`w2_between_runs`, :func:`ensemble_agreement`).

The inputs are checked first: their kinds (:func:`check_argument_kinds`), and that the particles
come from the density's model (:mod:`spheredens.agreement`); the departures from the
zero-temperature target are those of :mod:`spheredens.analysis`
(:func:`~spheredens.analysis.departures`)."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any, Sequence

import numpy as np
from numpy.typing import NDArray

from ._lazy import xarray as xr
from ._types import Array
from ._validate import input_file_problem
from .accessor import config_tables
from .agreement import check_models, model_check_attrs, unchecked_notice
from .analysis import DEPARTURE_FACTOR, DEPARTURE_OFFSET, TIME_TOLERANCE, departures
from .config import config_from_dict
from .exceptions import SchemaError, SpheredensWarning
from .geometry import domain_of_dimension
from .particles import initial_particles
from .problem import Problem
from .result_schema import COMPARE_VARIABLES
from .schema import (
    ATTENTION,
    CENTROID_VARIABLES,
    COMPARE_SCHEMA,
    CONVENTIONS,
    PARTICLE_SCHEMA,
    SCHEMA,
    TIME,
    XI,
    cf_encode,
    file_centroids,
    file_kind,
    file_schema,
)
from .simulate import Progress, progress_bar
from .transport import DENSITY_ATOMS
from .zonal_particles import marginal_parts

#: the first seed of the draws of :func:`sampling_level` (apart from the runs' usual seeds)
SAMPLING_SEED = 1_000_003
#: draws of the i.i.d. sampling level: its spread is the standard deviation over them
SAMPLING_DRAWS = 20


def common_times(
    t_density: Array, t_particles: Array, names: tuple[str, str] | None = None
) -> tuple[Array, Array]:
    """Index pairs of the snapshot times present in both (within 1e-9); never interpolated.
    ``names``: the two files, for the message (default: "the density and particle files")."""
    pairs = [(i, int(np.argmin(np.abs(t_particles - t)))) for i, t in enumerate(t_density)]
    pairs = [
        (i, j)
        for i, j in pairs
        if abs(t_particles[j] - t_density[i]) <= TIME_TOLERANCE * max(1.0, abs(t_density[i]))
    ]
    if not pairs:
        a, b = names or ("density", "particles")
        raise SchemaError(
            ("the density and particle files have" if names is None else f"{a} and {b} have")
            + f" no snapshot time in common ({a}: {_list(t_density)}; {b}: {_list(t_particles)}); "
            "rerun one of them with the other's times (time.times)"
        )
    i, j = np.array(pairs).T
    return i, j


def partial_time_notes(
    shared: int, counts: Sequence[int], names: Sequence[str], every: str = "every particle file"
) -> list[str]:
    """One sentence per file of which only some snapshots are compared: ``counts`` and ``names``
    are of the density, then of each particle run (or of a reference run, then of the others:
    ``every`` names them), and ``shared`` the number of times common to all of them (the times
    compared), e.g. "p.nc: compared at the 41 times it shares with d.nc, of its 1000". Files
    compared at all their snapshots are not named."""
    density, runs = names[0] or "the density", len(counts) - 1
    many = "s" if shared != 1 else ""
    out = []
    for k, (name, count) in enumerate(zip(names, counts)):
        if count <= shared:
            continue
        if k == 0:
            others = names[1] if runs == 1 else every
            out.append(
                f"{density}: compared at the {shared} time{many} it shares with {others}, "
                f"of its {count}"
            )
        elif runs == 1:
            out.append(
                f"{name}: compared at the {shared} time{many} it shares with {density}, "
                f"of its {count}"
            )
        else:
            out.append(
                f"{name}: compared at the {shared} time{many} common to {density} and {every}, "
                f"of its {count}"
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


#: how the command is called, in the messages about its arguments
USAGE = "spheredens compare DENSITY PARTICLES..."
#: words for each kind of file (:func:`spheredens.schema.file_kind`) in the messages
KIND_WORDS = {
    "density": "a density file",
    "particles": "a particle file",
    "comparison": "a comparison file",
    "sweep": "a sweep's combined file",
}


def _kind_words(kind: str, schema: str) -> str:
    if kind == "analysis":
        return f"an analysis file of analyze-beta ({schema})"
    if kind == "other":
        return (
            f"not a file of spheredens ({schema})"
            if schema.startswith("no ")
            else f"a {schema} file, neither a density nor a particle file"
        )
    return f"{KIND_WORDS.get(kind, 'a ' + kind + ' file')} ({schema})"


def path_kind(path: str | Path) -> tuple[str, str]:
    """The kind of the netCDF file ``path`` (:func:`spheredens.schema.file_kind`) and its
    schema (:func:`spheredens.schema.file_schema`), read without loading it, or
    ``("not netcdf", why)`` (``why`` e.g. "is not a netCDF file").

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
            return file_kind(ds), file_schema(ds)
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
        :func:`path_kind` (or ``file_kind`` and ``file_schema`` of :mod:`spheredens.schema`)
        of the density, then of each particle run.
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


def compare(
    density: Any,
    particles: Any | Sequence[Any],
    *,
    n_points: int = DENSITY_ATOMS,
    density_file: str = "",
    particle_files: Sequence[str] = (),
    allow_mismatch: bool = False,
    progress: bool | None = None,
    sampling_draws: int = SAMPLING_DRAWS,
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
    sampling_draws : int
        Draws of the i.i.d. sampling level (:func:`sampling_level`) recorded for particle runs
        started i.i.d. (default 20); 0 records none (each draw costs one W2 like the runs').

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

    runs = [particles] if isinstance(particles, xr.Dataset) else list(particles)
    names = [density_file] + [
        particle_files[k] if k < len(particle_files) and particle_files[k] else f"particle run {k}"
        for k in range(len(runs))
    ]
    check_argument_kinds(
        [(file_kind(ds), file_schema(ds)) for ds in [density, *runs]],
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

    distance, represent = marginal_parts(grid.domain, density, runs)  # zonal: theta-marginal

    centroids = any(n in density for n in CENTROID_VARIABLES)  # the cells' centroids (log_sl)
    bar = progress_bar(
        len(shared) * len(runs),
        enabled=progress,
        delay=Progress.DELAY,
        desc="compare",
        bar_format="{desc}: {n}/{total} (snapshot, file) |{bar}| {percentage:3.0f}%  "
        "{elapsed} elapsed, ~{remaining} left",
    )
    for col, i in enumerate(shared):
        centroid = file_centroids(density, i)
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
    var = COMPARE_VARIABLES
    std = w2.std(axis=0, ddof=1) if len(runs) > 1 else np.full(len(shared), np.nan)
    ds = xr.Dataset(
        {
            "w2": var["w2"].entry(w2, comment=method),
            "w2_mean": var["w2_mean"].entry(w2.mean(axis=0)),
            "w2_std": var["w2_std"].entry(std),
            "density_resolution": var["density_resolution"].entry(resolution),
            "seed": var["seed"].entry(np.array([int(p.attrs.get("seed", -1)) for p in runs])),
            "n_particles": var["n_particles"].entry(np.array([p.sizes["particle"] for p in runs])),
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
    ds.attrs.update(model_check_attrs(models))  # model_mismatch, model_not_checked
    if partial:  # files with snapshots that were not compared, one line each
        ds.attrs["times_not_compared"] = "\n".join(partial)
    dep = departures(density, runs)
    ds["density_departure_time"] = var["density_departure_time"].entry(
        dep["density"]["departure_time"],
        comment="departure time of the density from Pi_# rho_0: first snapshot after the "
        f"minimum of w2_projection with W2 > {DEPARTURE_FACTOR:g} min + {DEPARTURE_OFFSET:g} "
        f"(analyze-beta); NaN: not by t = {dep['density']['t_end']:g}",
    )
    ds["departure_time"] = var["departure_time"].entry(
        np.array([r["departure_time"] for r in dep["runs"]])
    )
    at_common = [
        [curve[int(pj[list(di).index(i)])] for i in shared]
        for curve, (di, pj) in zip(dep["w2"], index)
    ]
    ds["particle_w2_projection"] = var["particle_w2_projection"].entry(
        np.array(at_common, dtype=float)
    )
    ds.attrs["departure_verdict"] = dep["verdict"]
    if len(runs) > 1:  # the ensemble's own spread at the last common time
        last = [int(pj[list(di).index(shared[-1])]) for di, pj in index]
        ds["w2_between_runs"] = var["w2_between_runs"].entry(
            w2_between_runs(runs, last), time=float(times[-1])
        )
    if sliced:
        ds = ds.assign_coords(xi=XI.entry(xi))
        ds["w2_slice"] = var["w2_slice"].entry(w2_slice)
        ds["w2_slice_mean"] = var["w2_slice_mean"].entry(w2_slice.mean(axis=0))
        ds["w2"].attrs["long_name"] = "W2 marginal vs particles"
        ds["w2"].attrs["comment"] = (
            f"W2 distance between the marginal density sum_k r_k rho_k and all particles; {method}"
        )
        ds.attrs["slices"] = (
            "w2: marginal vs all particles; w2_slice: each slice vs its particles "
            "(labels: " + ", ".join("none" if lab is None else "yes" for lab in labels) + ")"
        )
    iid = [k for k, p in enumerate(runs) if p.attrs.get("initialization") == "iid"]
    if iid and sampling_draws > 1 and density["time"].values[0] == 0.0:
        base = Path(density_file).parent if density_file else None
        level = np.full((2, len(runs)), np.nan)
        for n in sorted({int(runs[k].sizes["particle"]) for k in iid}):
            mean_std = sampling_level(
                density, n, n_points=n_points, draws=sampling_draws, base_dir=base
            )
            for k in iid:
                if int(runs[k].sizes["particle"]) == n:
                    level[:, k] = mean_std
        ds["sampling_w2"] = var["sampling_w2"].entry(level[0])
        ds["sampling_w2_std"] = var["sampling_w2_std"].entry(level[1])
    record_model(ds, density)
    return cf_encode(ds)


def sampling_level(
    density: Any,
    n: int,
    *,
    n_points: int = DENSITY_ATOMS,
    draws: int = SAMPLING_DRAWS,
    base_dir: str | Path | None = None,
) -> tuple[float, float]:
    """The W2 that n i.i.d. samples of rho_0 have from rho_0 itself: the level below which the
    W2 between a density and a particle run started i.i.d. is sampling noise, not departure.

    Monte Carlo over ``draws`` sets of n samples of the initial density the density file
    records (its configuration, as ``spheredens particles`` draws them with
    ``initialization = "iid"``), each against the density's first snapshot represented as
    :func:`compare` represents it. Returns (mean, standard deviation over the draws); the
    standard error of the mean is the deviation / sqrt(draws).
    """
    data = config_tables(density)
    if not data:
        raise SchemaError("the density file records no configuration: no rho_0 to sample")
    where = {} if base_dir is None else {"base_dir": base_dir}  # a file rho_0 is found there
    problem = Problem.from_config(config_from_dict(data, **where))
    grid = density.sd.grid()
    distance, represent = marginal_parts(grid.domain, density)
    atoms, masses, _ = represent.atoms(
        grid, density.sd.marginal(0), n_points, file_centroids(density, 0)
    )
    values = [
        distance(atoms, masses, *initial_particles(problem, n, "iid", SAMPLING_SEED + k))
        for k in range(draws)
    ]
    return float(np.mean(values)), float(np.std(values, ddof=1))


def record_model(ds: Any, density: Any) -> None:
    """Write in ``ds``, in place, the model of the density as its file records it: the
    attributes ``model``, ``beta`` and ``config`` and the variables Q, K, V (so that
    ``ds.sd.model()`` of a comparison file is the model compared)."""
    for name, var in ATTENTION.items():
        if name in density.variables:
            ds[name] = var.entry(np.asarray(density[name].values))
    ds.attrs.update(
        {k: density.attrs[k] for k in ("model", "beta", "config") if k in density.attrs}
    )


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
