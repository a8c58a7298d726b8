"""Do a density and its particle runs come from one model? The items each file records of its
model (``ds.sd.model_record()``: :data:`spheredens.accessor.MODEL_ITEMS`) compared one by one,
and the differences said in words (``spheredens compare`` refuses particles of another model
unless ``allow_mismatch``)."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ._types import Array
from .accessor import MODEL_ITEMS
from .exceptions import ModelMismatchError

#: relative tolerance of the numbers (beta, Q, K, V, initial parameters, slice labels and weights)
#: compared between a density and its particle runs
MODEL_TOLERANCE = 1e-12


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
                    f"the initial density differs: {prefix}.{key} is {_shown_value(value)} in "
                    f"{where} and not given in {there}"
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
        ours_shown, theirs_shown = (
            _shown_value(float(a), float(b)),
            _shown_value(float(b), float(a)),
        )
        return f"{item} is {ours_shown} in {p} but {theirs_shown} in {d}"
    at = np.unravel_index(int(np.argmax(gap)), a.shape)
    entry = (
        f"{label}[{', '.join(map(str, at))}] is {_shown_value(a[at], b[at])} in {p} but "
        f"{_shown_value(b[at], a[at])} in {d}"
    )
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
    ours, theirs = run.sd.model_record(), density.sd.model_record()
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
        ``unchecked`` ((file name, the items it does not record) per run), ``checked`` (names
        of the runs whose model was checked and agrees) and ``summary`` (one sentence, for the
        ``model_check`` attribute and the printed verdict).

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
    slices = "slice labels" in density.sd.model_record()
    out["summary"] = model_summary(out, d, "every particle run", slices=slices)
    return out


def model_summary(checks: dict[str, Any], reference: str, every: str, *, slices: bool) -> str:
    """The one sentence of the attribute ``model_check`` from the ``mismatches``, ``unchecked``
    and ``checked`` runs of a model check (:func:`check_models`): the differences accepted, the
    runs not checked, and "same model in ``reference`` and ``every``" (or the runs named, when
    some were not)."""
    parts = []
    if checks["mismatches"]:
        parts.append(
            "models differ, compared anyway (allow_mismatch): "
            + "; ".join(diff for _, diffs in checks["mismatches"] for diff in diffs)
        )
    if checks["unchecked"]:
        parts.append(unchecked_notice(checks["unchecked"]))
    if checks["checked"]:
        runs = every if not parts else ", ".join(checks["checked"])
        parts.append(
            f"same model in {reference} and {runs} (model, beta, Q, K, V, domain, initial density"
            + (", slice labels and weights" if slices else "")
            + ")"
        )
    return ". ".join(parts)


def model_check_attrs(checks: dict[str, Any]) -> dict[str, str]:
    """The attributes ``model_mismatch`` (the differences accepted) and ``model_not_checked``
    (the items some runs do not record) of a comparison file, where there are any, from a model
    check (:func:`check_models`)."""
    attrs = {}
    if checks["mismatches"]:
        attrs["model_mismatch"] = "; ".join(
            f"{p}: {diff}" for p, diffs in checks["mismatches"] for diff in diffs
        )
    if checks["unchecked"]:
        attrs["model_not_checked"] = "; ".join(
            f"{p}: {', '.join(items)}" for p, items in checks["unchecked"]
        )
    return attrs


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
