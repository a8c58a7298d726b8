"""The layouts of the files of the studies: comparisons (``spheredens compare``, schema
``spheredens-compare-1``), combined sweeps (``spheredens sweep``, the CF parts of
:func:`combined_grid`) and analyses in beta (``spheredens analyze-beta``, schema
``spheredens-beta-analysis-1``): their variables in :class:`~spheredens.schema.Variable`
tables, as the run files' are in :mod:`spheredens.schema`.
"""

from __future__ import annotations

from typing import Any, Sequence

from .exceptions import SchemaError
from .schema import (
    ANALYSIS_SCHEMA,
    CONVENTIONS,
    MAX_LONG_NAME,
    TIME,
    Variable,
    cf_encode,
    history,
)

#: variables of comparison files (the detail of ``w2`` and the departure times, which depends
#: on the comparison, is given as the ``comment`` of the entry)
COMPARE_VARIABLES = {
    "w2": Variable(("run", "time"), "W2 density vs particles", "radian", None),
    "w2_mean": Variable(
        ("time",), "mean W2 over runs", "radian", "mean of w2 over the particle runs"
    ),
    "w2_std": Variable(
        ("time",),
        "std of W2 over runs",
        "radian",
        "standard deviation of w2 over the particle runs (ddof = 1); NaN with a single "
        "particle run",
    ),
    "density_resolution": Variable(
        ("time",),
        "density resolution",
        "radian",
        "resolution of the density (circle: W2 between its piecewise-constant cells and their "
        "centres; sphere: W2 bound between grid and coarse atoms)",
    ),
    "seed": Variable(("run",), "seed", None, "seed of each particle run (-1: unknown)"),
    "sampling_w2": Variable(
        ("run",),
        "i.i.d. sampling level of W2",
        "radian",
        "mean W2 between n i.i.d. samples of rho_0 and rho_0 (Monte Carlo, n the run's "
        "particles; NaN for runs not started i.i.d.): below it, W2 to the density is sampling "
        "noise",
    ),
    "sampling_w2_std": Variable(
        ("run",),
        "spread of the i.i.d. sampling level",
        "radian",
        "standard deviation of that W2 over the Monte Carlo draws",
    ),
    "n_particles": Variable(
        ("run",), "number of particles", "1", "number of particles of each run"
    ),
    "density_departure_time": Variable((), "density departure time", "1", None),
    "departure_time": Variable(
        ("run",),
        "particle departure time",
        "1",
        "departure time of each particle run from Pi_# rho_0, as density_departure_time, on "
        "the run's own snapshot times, from the W2 of the particles to Pi_# of their own "
        "initial positions (particle_w2_projection); NaN: not by the run's last time",
    ),
    "particle_w2_projection": Variable(
        ("run", "time"),
        "particle W2 to own Pi_# rho_0",
        "radian",
        "W2 of each particle run to Pi_# of its initial particles, at the common times; "
        "departure_time uses every snapshot of the run",
    ),
    "w2_between_runs": Variable(
        ("run", "other_run"),
        "W2 between particle runs",
        "radian",
        "W2 between the particle runs at the last common time (the ensemble's sampling "
        "error; see spheredens.compare.ensemble_agreement)",
    ),
    "w2_slice": Variable(
        ("run", "time", "xi"),
        "W2 slice vs its particles",
        "radian",
        "W2 between slice density rho_k and the particles of slice k (each normalized)",
    ),
    "w2_slice_mean": Variable(
        ("time", "xi"),
        "mean slice W2 over runs",
        "radian",
        "mean of w2_slice over the particle runs",
    ),
}

#: variables of the comparison of runs against a reference (``spheredens compare`` of two
#: densities, two particle runs, or with ``--reference``): one pair per other run
PAIR_VARIABLES = {
    "w2": Variable(("pair", "time"), "W2 reference vs run", "radian", None),
    "reference_resolution": Variable(
        ("time",),
        "reference density resolution",
        "radian",
        "resolution of the reference's representation when it is a density (as "
        "density_resolution of a density vs particles comparison); NaN for particles",
    ),
    "resolution": Variable(
        ("pair", "time"),
        "run density resolution",
        "radian",
        "resolution of each run's representation when it is a density; NaN for particles",
    ),
}

#: variables of analysis files (dims come from the combined sweep)
ANALYSIS_VARIABLES = {
    "min_w2": Variable(
        (),
        "minimum over t of W2",
        "radian",
        "minimum over the snapshots of w2_projection (W2 to Pi_# rho_0)",
    ),
    "t_min": Variable((), "time of the minimum of W2", "1", "model time of min_w2"),
    "departure_time": Variable((), "departure time", "1"),
    "early_rate": Variable((), "early rate", "1", "exponential rate of the approach to Pi_# rho_0"),
    "rate_over_gap": Variable(
        (),
        "early rate / spectral gap",
        "1",
        "early_rate divided by the spectral gap mu_1 - mu_2 of V B^T",
    ),
    "bound": Variable((), "concentration bound", "1", "sqrt(log(beta + 1) / beta)"),
    "min_w2_over_bound": Variable(
        (), "min_w2 / bound", "radian", "min_w2 divided by sqrt(log(beta + 1) / beta)"
    ),
    "min_w2_slope": Variable(
        (), "slope of log min_w2", "1", "least-squares slope of log min_w2 against log beta"
    ),
    "t_last": Variable((), "last time with a finite W2", "1"),
    "min_at_end": Variable(
        (),
        "minimum at the last time",
        "1",
        "1: the minimum of W2 is at t_last (W2 still falling), 0: before it",
    ),
}


def analysis_attrs(analysis: Any, combined: Any) -> Any:
    """CF attributes of an analysis dataset (:func:`spheredens.analysis.analyze_beta`), in
    place, and the dataset returned: conventions and schema, the coordinates described as in
    the combined sweep, a short ``long_name`` and ``units`` on every variable (detail moved to
    ``comment``)."""
    analysis.attrs = {
        "Conventions": CONVENTIONS,
        "spheredens_schema": ANALYSIS_SCHEMA,
        "title": "spheredens analyze-beta: concentration in beta",
        "history": history(),
        **{k: combined.attrs[k] for k in ("domain", "model") if k in combined.attrs},
        **analysis.attrs,
    }
    for name in analysis.coords:
        if name in combined.coords:
            analysis[name].attrs = {**combined[name].attrs, **analysis[name].attrs}
    definitions = {
        "departure_time": analysis.attrs.get("departure_definition"),
        "early_rate": analysis.attrs.get("early_rate_definition"),
    }
    for name, var in analysis.data_vars.items():
        known = ANALYSIS_VARIABLES.get(str(name))
        old = dict(var.attrs)
        if known is None and str(name).endswith("_resolution_change"):
            known = Variable(
                (), f"relative change of {str(name)[: -len('_resolution_change')]}", "1"
            )
        if known is None:  # a variable added later: its own long name where it is short
            label = old.get("long_name") or str(name).replace("_", " ")
            known = Variable(
                (),
                label if len(label) <= MAX_LONG_NAME else str(name).replace("_", " "),
                old.get("units", "1"),
            )
        attrs = known.entry(None, comment=definitions.get(str(name)) or None)[2]
        renamed = old.get("long_name") if old.get("long_name") != attrs["long_name"] else None
        earlier = [old.get("comment"), renamed]
        comment = "; ".join(dict.fromkeys(c for c in (attrs.get("comment"), *earlier) if c))
        if comment:
            attrs["comment"] = comment
        var.attrs = {**old, **attrs}
    return cf_encode(analysis)


def validate_comparison(ds: Any, name: str = "comparison file") -> None:
    """Raise :class:`SchemaError` unless ``ds`` holds what a comparison file is drawn from:
    ``w2``, ``w2_mean``, ``w2_std`` and the coordinate ``time`` (runs against a reference, dim
    ``pair``: ``w2`` and ``time``)."""
    needs = ("w2",) if "pair" in ds.dims else ("w2", "w2_mean", "w2_std")  # runs vs a reference
    missing = [var for var in needs if var not in ds]
    if missing or "time" not in ds.coords:
        raise SchemaError(f"{name!r} is a comparison file without {', '.join(missing) or 'time'}")


def combined_grid(first: Any, combined: Any, keys: Sequence[str]) -> Any:
    """CF parts of the combined dataset of a sweep, in place, and ``combined`` returned: the
    varied keys' coordinates named (``long_name`` the key, units "1" for numbers: every numeric
    configuration value is dimensionless), ``time`` as in run files, and, where ``rho`` is
    included, the grid parts of the first case that its attributes name (auxiliary coordinates
    such as a mesh's ``lat``/``lon``, their ``bounds`` and the ``cell_measures`` variable)."""
    for key in keys:
        dim = key.rsplit(".", 1)[-1]
        if dim in combined.coords:
            attrs = {"long_name": key, "comment": f"value of {key} in each case"}
            if combined[dim].dtype.kind in "iuf":
                attrs["units"] = "1"
            combined[dim].attrs.update(attrs)
    if "time" in combined.coords:
        combined["time"].attrs = TIME.entry(None)[2]
    if "rho" in combined:
        space = [d for d in first["rho"].dims if d != "time"]
        extra = {
            name: first[name]
            for name in first.coords
            if name not in combined.coords and set(first[name].dims) <= set(space)
        }
        parents = [*extra.values(), *(first[d] for d in space if d in first.coords)]
        named = [str(v.attrs.get("bounds", "")) for v in parents]
        named += str(first["rho"].attrs.get("cell_measures", "")).split()[1::2]
        combined = combined.assign_coords(extra)
        for name in named:
            if name and name in first and name not in combined:
                combined[name] = first[name].variable.copy()
    return cf_encode(combined)
