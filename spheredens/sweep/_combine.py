"""The combined dataset of a sweep: the cases' diagnostics with one dimension per varied key.

:func:`combine` reads the case files (``NaN`` for a case without a complete file when
``partial``) and gives each varied key its coordinate (:func:`_coordinate`) and, for values
that are arrays, the values themselves in ``<dim>_value``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._lazy import xarray as xr
from ..analysis import RESOLUTION_DIMS
from ..exceptions import SpheredensError
from ..io import open_run
from ..result_schema import combined_grid
from ._define import COMBINED_VARIABLES, Sweep, _dim_name, _label, _normal, case_status


def _value_array(values: tuple[Any, ...]) -> Any:
    """The values of a non-scalar key as one float64 array (value, ...), or None when they are
    not numbers of one common shape."""
    try:
        arrays = [np.asarray(v, dtype=np.float64) for v in values]
    except (TypeError, ValueError):
        return None
    if any(isinstance(x, bool) for v in values for x in np.ravel(np.asarray(v, dtype=object))):
        return None
    if len({a.shape for a in arrays}) != 1 or arrays[0].ndim == 0:
        return None
    return np.stack(arrays)


def _value_dims(key: str, ndim: int) -> tuple[str, ...]:
    """The dims of one value in ``<dim>_value``: ``row``, ``col`` for the model's matrices (as in
    run files), else ``<dim>_axis0``, ``<dim>_axis1``, ..."""
    if key in ("model.Q", "model.K", "model.V") and ndim == 2:
        return ("row", "col")
    return tuple(f"{_dim_name(key)}_axis{k}" for k in range(ndim))


def _coordinate(key: str, levels: tuple[Any, ...]) -> Any:
    """The coordinate of a varied key: its values when they are all numbers, all strings or all
    booleans; else a label per value (:func:`_label`, the value as written)."""
    kinds = {
        bool
        if isinstance(v, bool)
        else (int, float)
        if isinstance(v, (int, float))
        else str
        if isinstance(v, str)
        else object
        for v in levels
    }
    if len(kinds) == 1 and object not in kinds:
        return np.array(levels)
    return np.array([_label(v) for v in levels])


def combine(sweep: Sweep, *, partial: bool = False) -> Any:
    """The combined dataset of the cases: diagnostics with one dimension per varied key,
    ``rho`` too when every case has the same grid.

    A key whose values are not all numbers, strings or booleans (a matrix, a list) has a label
    per value as its coordinate (the value as written) and, when the values are numbers of one
    shape, the values in ``<dim>_value`` (``V_value``: dims ``V``, ``row``, ``col``); a matrix
    Q, K or V that is the same in every case is stored as ``Q`` (row, col), as in run files.

    Parameters
    ----------
    sweep : Sweep
    partial : bool
        False: None unless every case has a complete file. True: from the cases that finished
        (None when none did); the values of the others are NaN and the attribute
        ``failed_cases`` names them.
    """
    datasets, missing = {}, []
    for case in sweep.cases:
        if case_status(case) == "done":
            datasets[case.name] = open_run(case.path)
        elif partial:
            missing.append(case.name)
        else:
            return None
    if not datasets:
        return None
    first = next(iter(datasets.values()))
    times = first["time"].values
    for name, ds in datasets.items():
        if not np.array_equal(ds["time"].values, times):
            raise SpheredensError(
                f"case {name} has other snapshot times; the combined dataset "
                "needs the same times in every case"
            )
    shape = tuple(len(lv) for lv in sweep.levels)
    dims = tuple(_dim_name(k) for k in sweep.keys)
    normal_levels = [[_normal(v) for v in lv] for lv in sweep.levels]
    where = {
        case.name: tuple(nl.index(_normal(v)) for nl, (_, v) in zip(normal_levels, case.values))
        for case in sweep.cases
    }
    space = [d for d in first["rho"].dims if d != "time"]
    same_grid = (
        all(ds["rho"].shape == first["rho"].shape for ds in datasets.values())
        and all(
            all(np.array_equal(ds[c].values, first[c].values) for c in space)
            for ds in datasets.values()
        )
        and not set(dims) & (set(space) | set(first.coords))
    )
    names = [v for v in COMBINED_VARIABLES if v in first] + (["rho"] if same_grid else [])
    data = {}
    for var in names:
        dtype = np.result_type(first[var].dtype, np.float64) if missing else first[var].dtype
        arr = np.full(shape + first[var].shape, np.nan if dtype.kind in "fc" else 0, dtype=dtype)
        for name, ds in datasets.items():
            arr[where[name]] = ds[var].values
        data[var] = (dims + first[var].dims, arr, dict(first[var].attrs))
    coords = {d: (d, _coordinate(k, lv)) for d, k, lv in zip(dims, sweep.keys, sweep.levels)}
    coords["time"] = ("time", times, dict(first["time"].attrs))
    if same_grid:
        for c in space:
            if c in first.coords:
                coords[c] = (c, first[c].values, dict(first[c].attrs))
        if "weight" in first:
            data["weight"] = (
                first["weight"].dims,
                first["weight"].values,
                dict(first["weight"].attrs),
            )
    labelled = [
        (d, k, lv)
        for d, k, lv in zip(dims, sweep.keys, sweep.levels)
        if coords[d][1].dtype.kind == "U" and not all(isinstance(v, str) for v in lv)
    ]
    for dim, key, levels in labelled:  # the values themselves, along the key's dimension
        values = _value_array(levels)
        if values is not None:
            label = f"value of {key}"
            data[f"{dim}_value"] = (
                (dim,) + _value_dims(key, values.ndim - 1),
                values,
                {
                    "long_name": label if len(label) <= 40 else f"value of {dim}",
                    "units": "1",
                    "comment": f"the value of {key} in each case "
                    f"(the coordinate {dim} labels it as written in the sweep file)",
                },
            )
    for name in ("Q", "K", "V"):  # the matrices, when no case changes them
        if name not in dims and all(
            np.array_equal(ds[name].values, first[name].values) for ds in datasets.values()
        ):
            data[name] = (("row", "col"), first[name].values, dict(first[name].attrs))
    attrs = {
        "Conventions": "CF-1.10",
        "spheredens_schema": "spheredens-sweep-1",
        "varied_keys": ", ".join(sweep.keys),
        "domain": first.attrs["domain"],
        "model": first.attrs["model"],
        "cases": "\n".join(str(c.path) for c in sweep.cases),
        "rho_included": int(same_grid),
    }
    for key in RESOLUTION_DIMS:  # the grid the cases share (figures name it)
        if key not in dims and key in first.attrs:
            if all(ds.attrs.get(key) == first.attrs[key] for ds in datasets.values()):
                attrs[key] = first.attrs[key]
    if missing:
        attrs["failed_cases"] = ", ".join(missing)
    combined = combined_grid(first, xr.Dataset(data, coords=coords, attrs=attrs), sweep.keys)
    for dim, key, _ in labelled:
        combined[dim].attrs["comment"] = (
            f"value of {key} in each case, as written in the sweep file"
            + (f" (the values: {dim}_value)" if f"{dim}_value" in combined else "")
        )
    return combined
