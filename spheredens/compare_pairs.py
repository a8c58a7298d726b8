"""Any runs of one model against a reference run: W2 at every common snapshot time between the
reference and each other run, whatever their kinds (``spheredens compare`` of two densities,
of two particle runs, or of any mix with ``--reference``).

A density is the measure :func:`spheredens.diagnostics.grid_atoms` makes of it on its own grid
(the representation of :func:`spheredens.compare.compare` and of the runs' ``w2_projection``:
on the circle its piecewise-constant cells as sub-atoms, on the sphere its grid atoms
coarsened to about ``n_points``; a scheme that carries the cells' centroids, ``log_sl``, the
mass of each cell at its centroid); a particle run is its particles with their weights. W2 is
the domain's (:meth:`spheredens.geometry.Domain.w2`: exact on the circle, the exact EMD with
squared geodesic cost elsewhere), so two densities on different grids, or two particle runs,
are measured exactly as a density and particles are.

:func:`comparison_plan` reads the command line's files and decides what is compared: one
density, then particle files, is the comparison of a density with its particle runs
(:func:`spheredens.compare.compare`: the ensemble, departures and sampling level); any other
list is measured against its first file or the ``--reference`` (:func:`compare_runs`).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ._lazy import xarray as xr
from ._types import Array
from .agreement import model_check_attrs, model_differences, model_summary, unchecked_notice
from .compare import (
    _kind_words,
    check_argument_kinds,
    common_times,
    partial_time_notes,
    path_kind,
    record_model,
)
from .diagnostics import grid_atoms
from .exceptions import ModelMismatchError, SchemaError, SpheredensWarning
from .result_schema import PAIR_VARIABLES
from .schema import (
    CENTROID_VARIABLES,
    CONVENTIONS,
    PAIRS_SCHEMA,
    PARTICLE_SCHEMA,
    SCHEMA,
    TIME,
    cf_encode,
    file_centroids,
    file_kind,
    file_schema,
)
from .simulate import Progress, progress_bar
from .transport import DENSITY_ATOMS

#: the kinds of file that are runs: a density (spheredens run) and particles (spheredens particles)
RUN_KINDS = ("density", "particles")
#: how the command is called with runs against a reference, in the messages
PAIRS_USAGE = "spheredens compare RUN RUN... [--reference RUN]"
#: how a particle run is represented (the words of the attributes)
PARTICLE_REPRESENTATION = "the particles with their weights (particle_weight)"


@dataclass(frozen=True)
class ComparePlan:
    """What ``spheredens compare RUN... [--reference RUN]`` compares.

    Attributes
    ----------
    reference : str
        The run every other one is measured against (a density and particles: the density).
    others : tuple of str
        The other runs, in the order given (the reference left out when it is among them).
    pairs : bool
        False: one density and its particle runs
        (:func:`spheredens.compare.compare`); True: runs against a reference
        (:func:`compare_runs`).
    """

    reference: str
    others: tuple[str, ...]
    pairs: bool


def check_run_kinds(kinds: Sequence[tuple[str, str]], names: Sequence[str]) -> None:
    """Refuse, in one line naming it, a file that is neither a density nor a particle file.

    Parameters
    ----------
    kinds : sequence of (kind, schema)
        :func:`spheredens.compare.path_kind` (or :func:`~spheredens.schema.file_kind` and
        :func:`~spheredens.schema.file_schema`) of the reference, then of each other run.
    names : sequence of str
        Their names in the message.
    """
    for k, ((kind, schema), name) in enumerate(zip(kinds, names)):
        if kind in RUN_KINDS:
            continue
        said = schema if kind == "not netcdf" else f"is {_kind_words(kind, schema)}"
        raise SchemaError(
            f"{name} ({'the reference' if k == 0 else f'run {k}'}) {said}, neither a density "
            f"({SCHEMA}) nor a particle file ({PARTICLE_SCHEMA}); compare measures runs against "
            f"a reference: {PAIRS_USAGE}"
        )


def _same_file(a: str | Path, b: str | Path) -> bool:
    return Path(a).resolve() == Path(b).resolve()


def _once(paths: Sequence[str]) -> None:
    """Refuse a run given twice (it would be measured against itself), in one line."""
    seen: set[Path] = set()
    for path in paths:
        if Path(path).resolve() in seen:
            raise SchemaError(
                f"{path} is given twice (it would be measured against itself); give each run "
                f"once: {PAIRS_USAGE}"
            )
        seen.add(Path(path).resolve())


def comparison_plan(
    paths: Sequence[str | Path], reference: str | Path | None = None
) -> ComparePlan:
    """Decide, from the files alone (read without loading them), what ``spheredens compare``
    compares; refuse in one line what it cannot.

    Without ``reference``: one density file then particle files is the comparison of a density
    with its particle runs (:func:`spheredens.compare.compare`); files of one kind, or a
    density first then any mix, are measured against the first file. A particle file first
    with a density among the others is refused as swapped, and so are files of other kinds
    (:func:`spheredens.compare.check_argument_kinds`, :func:`check_run_kinds`) and a file given
    twice.

    With ``reference``: every file given is measured against it (the reference, when also in
    ``paths``, is left out of the others); a density reference and particle files only is
    that comparison too.

    Raises
    ------
    SchemaError
        Fewer than two runs, a file of another kind, swapped arguments.
    """
    paths = [str(p) for p in paths]
    if reference is not None:
        reference = str(reference)
        ref_kind = path_kind(reference)
        others = [p for p in paths if not _same_file(p, reference)]
        if not others:
            raise SchemaError(
                f"compare --reference {reference} needs another run to measure against it: "
                f"{PAIRS_USAGE}"
            )
        kinds = [path_kind(p) for p in others]
        check_run_kinds([ref_kind, *kinds], [reference, *others])
        _once([reference, *others])
        with_particles = ref_kind[0] == "density" and all(k == "particles" for k, _ in kinds)
        return ComparePlan(reference, tuple(others), not with_particles)
    if len(paths) < 2:
        raise SchemaError(
            f"compare needs two runs at least, or --reference RUN; got {paths[0]} alone: "
            f"{PAIRS_USAGE}"
        )
    kinds = [path_kind(p) for p in paths]
    first, rest = kinds[0][0], [k for k, _ in kinds[1:]]
    if (
        first not in RUN_KINDS
        or (first == "particles" and "density" in rest)
        or (first == "density" and "density" not in rest)
    ):
        check_argument_kinds(kinds, paths)  # the refusals of one density then particle files
    if first == "density" and all(k == "particles" for k in rest):
        return ComparePlan(paths[0], tuple(paths[1:]), False)
    check_run_kinds(kinds, paths)
    _once(paths)
    return ComparePlan(paths[0], tuple(paths[1:]), True)


class RunMeasures:
    """The measures of one run file at its snapshots, as W2 reads them: a density by
    :func:`~spheredens.diagnostics.grid_atoms` of its grid, particles with their weights.

    Parameters
    ----------
    ds : xarray.Dataset
        A density file (spheredens-1) or a particle file (spheredens-particles-1).
    n_points : int
        Where the density is coarsened for the exact EMD (the sphere), about this many atoms.
    name : str
        The file's name, for messages.

    Raises
    ------
    SchemaError
        Particles with positions of another dimension than their domain's.
    """

    def __init__(self, ds: Any, n_points: int = DENSITY_ATOMS, name: str = "") -> None:
        self.ds, self.n_points, self.name = ds, n_points, name
        self.kind = file_kind(ds)
        self.time = np.asarray(ds["time"].values, dtype=float)
        if self.kind == "density":
            self.grid = ds.sd.grid()
            self.domain = self.grid.domain
            self.represent = grid_atoms(self.domain)
            return
        self.domain = ds.sd.domain
        self.represent = grid_atoms(self.domain)
        d = ds["position"].shape[-1]
        if d != self.domain.d:
            raise SchemaError(
                f"{name or 'a particle run'} has {d}-component positions; the "
                f"{self.domain.name} needs {self.domain.d}"
            )
        self.weight = np.asarray(ds["particle_weight"].values, dtype=float)

    def describe(self) -> str:
        """How the run is represented (for the attributes of the result)."""
        if self.kind != "density":
            return PARTICLE_REPRESENTATION
        centroids = any(n in self.ds for n in CENTROID_VARIABLES)
        return self.represent.describe(self.grid, self.n_points, centroids)

    def at(self, index: int) -> tuple[Array, Array, float]:
        """(points, masses, resolution) at snapshot ``index``: a density's atoms with the
        resolution of its representation (``density_resolution`` of compare), particles with
        their weights and resolution NaN."""
        if self.kind != "density":
            return np.asarray(self.ds["position"].values[index], dtype=float), self.weight, np.nan
        rho = self.ds.sd.marginal(index)
        points, masses, bound = self.represent.atoms(
            self.grid, rho, self.n_points, file_centroids(self.ds, index)
        )
        return points, masses, self.represent.resolution(self.grid, rho, bound)


def check_run_models(
    reference: Any, runs: Sequence[Any], names: Sequence[str], *, allow_mismatch: bool = False
) -> dict[str, Any]:
    """Check that every run comes from the model of the reference, item by item of
    ``ds.sd.model_record()`` (:func:`spheredens.agreement.model_differences`), whatever their
    kinds.

    Returns
    -------
    dict
        ``mismatches`` ((name, differences) per run accepted with ``allow_mismatch``),
        ``unchecked`` ((name, the items one of the two does not record) per run),
        ``summary`` (one sentence, the attribute ``model_check``).

    Raises
    ------
    ModelMismatchError
        A run of another model: one line naming the run, the reference and the first differing
        item (model, beta, Q, K, V, domain, initial density, slices), unless ``allow_mismatch``;
        on another domain always.
    """
    ref = names[0]
    out: dict[str, Any] = {"mismatches": [], "unchecked": [], "checked": []}
    for run, name in zip(runs, names[1:]):
        differences, missing = model_differences(
            reference, run, density_name=ref, particle_name=name
        )
        _, not_in_reference = model_differences(run, reference)
        head = f"{name} is not a run of the model of {ref}"
        if differences and differences[0].startswith("domain "):
            raise ModelMismatchError(f"{head}: {differences[0]}; W2 needs both on one domain")
        if differences and not allow_mismatch:
            raise ModelMismatchError(
                f"{head}: {differences[0]}", hint="pass allow_mismatch=True to compare anyway"
            )
        if differences:
            out["mismatches"].append((name, differences))
        elif missing or not_in_reference:
            out["unchecked"].append((name, missing + not_in_reference))
        else:
            out["checked"].append(name)
    slices = "slice labels" in reference.sd.model_record()
    out["summary"] = model_summary(out, ref, "every run", slices=slices)
    return out


def compare_runs(
    reference: Any,
    runs: Any | Sequence[Any],
    *,
    n_points: int = DENSITY_ATOMS,
    reference_file: str = "",
    run_files: Sequence[str] = (),
    allow_mismatch: bool = False,
    progress: bool | None = None,
) -> Any:
    """W2 between a reference run and each other run of one model, of any kinds: two densities
    (each on its own grid, scheme or resolution), two particle runs, or a mix.

    At every snapshot time the reference shares with every run (never interpolated in time),
    the Wasserstein-2 distance with the geodesic cost between the two measures: a density as
    :func:`spheredens.compare.compare` represents it (see the module documentation), a
    particle run with its weights. Exact on the circle; on the sphere the exact EMD
    (``ot.emd2``, squared geodesic cost) after coarsening each density to ``n_points`` atoms.

    Parameters
    ----------
    reference : xarray.Dataset
        The run every other is measured against (a density file, spheredens-1, or a particle
        file, spheredens-particles-1), e.g. the finest.
    runs : Dataset or list of Datasets
        The other runs, on the reference's domain, of its model.
    n_points : int
        Sphere: each density is coarsened to about this many atoms before the exact EMD
        (default 4096, that of the runs' ``w2_projection``).
    reference_file, run_files : str, sequence of str
        The file names, recorded in the result and used in messages.
    allow_mismatch : bool
        Compare runs of another model than the reference's (beta, Q, K, V, initial density,
        slice labels and weights) anyway, recording the differences in ``model_mismatch``;
        otherwise refused in one line naming the first difference (:func:`check_run_models`).
    progress : bool, optional
        A progress bar on stderr of the (snapshot, run) pairs done (as
        :func:`spheredens.compare.compare`).

    Returns
    -------
    xarray.Dataset
        Schema ``spheredens-compare-pairs-1``: ``w2`` (pair, time) in radians, W2 between the
        reference and run k; ``resolution`` (pair, time) and ``reference_resolution`` (time):
        each density's representation error (``density_resolution`` of compare; NaN for
        particles). Attributes: ``reference_file``, ``run_files`` (one line per pair, in its
        order), ``reference_kind`` and ``run_kinds``, ``reference_representation`` and
        ``run_representations`` (how each is represented), ``method`` (the W2), ``model_check``
        (and ``model_mismatch``, ``model_not_checked``), ``times_not_compared`` (as compare's).
        The coordinate ``time`` holds the times compared. The model is recorded as the
        reference records it (``model``, ``beta``, ``config``, ``Q``, ``K``, ``V``).

    Raises
    ------
    SchemaError
        A file that is no run, no common time, particles of the wrong dimension.
    ModelMismatchError
        A run of another model (:func:`check_run_models`), unless ``allow_mismatch``.

    Example
    -------
    Two circle densities of one model on 256 and 512 cells::

        import spheredens as sd
        from spheredens.compare_pairs import compare_runs
        result = compare_runs(sd.open_run("fv512.nc"), [sd.open_run("fv256.nc")],
                              reference_file="fv512.nc", run_files=["fv256.nc"])
        w2 = result["w2"].sel(pair=0).values      # W2(rho_512, rho_256) at the common times
    """
    runs = [runs] if isinstance(runs, xr.Dataset) else list(runs)
    names = [reference_file or "the reference"] + [
        run_files[k] if k < len(run_files) and run_files[k] else f"run {k + 1}"
        for k in range(len(runs))
    ]
    check_run_kinds([(file_kind(ds), file_schema(ds)) for ds in [reference, *runs]], names)
    models = check_run_models(reference, runs, names, allow_mismatch=allow_mismatch)
    if models["unchecked"]:
        warnings.warn(unchecked_notice(models["unchecked"]), SpheredensWarning, stacklevel=2)
    sides = [RunMeasures(ds, n_points, name) for ds, name in zip([reference, *runs], names)]
    ref, others = sides[0], sides[1:]
    for side in others:  # a run that records no domain of its own (the model check is silent)
        if side.domain is not ref.domain:
            raise SchemaError(
                f"{side.name} is on the {side.domain.name}, {ref.name} on the "
                f"{ref.domain.name}; W2 needs both on one domain"
            )
    index = [dict(zip(*common_times(ref.time, s.time, (ref.name, s.name)))) for s in others]
    shared = sorted(set.intersection(*[set(i) for i in index]))
    if not shared:
        raise SchemaError(f"no snapshot time is common to {ref.name} and every other run")
    partial = partial_time_notes(
        len(shared), [s.time.size for s in sides], names, every="every other run"
    )
    w2 = np.full((len(others), len(shared)), np.nan)
    resolution = np.full((len(others), len(shared)), np.nan)
    ref_resolution = np.full(len(shared), np.nan)
    bar = progress_bar(
        len(shared) * len(others),
        enabled=progress,
        delay=Progress.DELAY,
        desc="compare",
        bar_format="{desc}: {n}/{total} (snapshot, run) |{bar}| {percentage:3.0f}%  "
        "{elapsed} elapsed, ~{remaining} left",
    )
    for col, i in enumerate(shared):
        points, masses, ref_resolution[col] = ref.at(i)
        for k, side in enumerate(others):
            x, w, resolution[k, col] = side.at(int(index[k][i]))
            w2[k, col] = ref.domain.w2(points, masses, x, w)
            if bar is not None:
                bar.update(1)
    if bar is not None:
        bar.close()
    method = ref.represent.method
    var = PAIR_VARIABLES
    ds = xr.Dataset(
        {
            "w2": var["w2"].entry(
                w2,
                comment=f"W2 between the reference {names[0]} and each run (run_files, in the "
                f"order of pair); {method}",
            ),
            "resolution": var["resolution"].entry(resolution),
            "reference_resolution": var["reference_resolution"].entry(ref_resolution),
        },
        coords={"time": TIME.entry(ref.time[shared])},
        attrs={
            "Conventions": CONVENTIONS,
            "spheredens_schema": PAIRS_SCHEMA,
            "domain": ref.domain.name,
            "reference_file": reference_file,
            "run_files": "\n".join(names[1:]),
            "reference_kind": ref.kind,
            "run_kinds": "\n".join(s.kind for s in others),
            "reference_representation": ref.describe(),
            "run_representations": "\n".join(s.describe() for s in others),
            "method": method,
            "model_check": models["summary"],
        },
    )
    ds.attrs.update(model_check_attrs(models))  # model_mismatch, model_not_checked
    if partial:
        ds.attrs["times_not_compared"] = "\n".join(partial)
    record_model(ds, reference)
    return cf_encode(ds)


def pairs_report(result: Any) -> list[str]:
    """The lines ``spheredens compare`` prints about a result of :func:`compare_runs`: the
    reference and each run (its kind, and for a density the largest resolution of its
    representation), then W2 of each run to the reference at every time, one line per time."""
    runs = str(result.attrs["run_files"]).split("\n")
    kinds = str(result.attrs["run_kinds"]).split("\n")
    lines = [
        f"  reference {result.attrs['reference_file'] or 'the reference'} "
        f"({result.attrs['reference_kind']}{_worst(result['reference_resolution'].values)})"
    ]
    for k, (name, kind) in enumerate(zip(runs, kinds)):
        lines.append(f"  run {k + 1}: {name} ({kind}{_worst(result['resolution'].values[k])})")
    header = "".join(f"{f'W2 run {k + 1}':>12}" for k in range(len(runs)))
    lines.append(f"  {'t':>8}{header}   (radians)")
    for col, t in enumerate(result["time"].values):
        row = "".join(f"{v:12.4g}" for v in result["w2"].values[:, col])
        lines.append(f"  {t:8.4g}{row}")
    return lines


def _worst(resolution: Array) -> str:
    """ ", resolution <= r" of a density's representation over the times; "" for particles."""
    values = np.asarray(resolution, dtype=float)
    if not np.any(np.isfinite(values)):
        return ""
    return f", resolution <= {float(np.nanmax(values)):.2g}"
