"""The stored reference numbers, recomputed: refactoring changes no number.

``tests/data/reference_numbers.npz`` was written on main at 444443e by
``tests/reference_cases.py --write``: the ``make demo`` run of example C and one short run per
(domain, scheme, evaluator) combination and model family (the exact zero-temperature
references among them). Each is run again here, written to a file and read back; every
numeric variable must agree to 1e-12 of its scale, every attribute that is a finite number the
run computes (``unfaithful_min_rho``, ...) to 1e-12 of max(1, its size) (FFTs and BLAS round the
last bit differently on other CPUs: on one machine ``unfaithful_min_rho`` of
``circle_fourier_usa`` differed by 4e-16), and every other attribute but the version, history
and wall times must be identical.

``w2_projection`` and ``w2_terminal`` were regenerated (``tests/reference_cases.py --update
w2_projection w2_terminal``) for the one representation of a grid density in W2: on the
circle rho_t is the piecewise-constant density on the cells instead of atoms at the cell centres,
which moves these two variables by about h^2 / 12 in W2^2 (relative changes up to 4e-3, and 0.15 for
the demo's w2_terminal where it is small); every other variable stayed identical (the sphere's
w2_terminal moved by round-off only, 2e-16).

For CF-1.10 the files gained cell bounds and measures: ``theta_bounds`` on
the circle, ``cell_area`` and ``lat_bounds``/``lon_bounds`` on the Gauss grid, ``cell_area``
on the sphere fv mesh, whose ``lat_bounds``/``lon_bounds`` became the 4 vertices of each cell
(shape (cell, 4) instead of (cell, 2)). Those four variables were stored anew
(``tests/reference_cases.py --update theta_bounds cell_area lat_bounds lon_bounds``); before
that, every other stored variable and every attribute was recomputed and found identical to
1e-12 on every case.

A scheme that is not positive records when it stops being faithful (the
attributes ``unfaithful_from_t``, ``unfaithful_min_rho``, ``unfaithful_max_rho``). Of the
stored cases only ``circle_fourier_usa`` rings (min rho < -1e-3 max rho from t = 0.343); its
three attributes were added (``tests/reference_cases.py --update attr:unfaithful_from_t
attr:unfaithful_min_rho attr:unfaithful_max_rho``), and every other stored number and attribute
of every case was left byte for byte as it was.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from reference_cases import DATA, all_names, numbers, run_case

#: the change moves code, not arithmetic: agreement to 1e-12 of each variable's scale leaves
#: room only for a reordered sum, never for a changed formula
RTOL = 1e-12


@pytest.fixture(scope="module")
def stored():
    with np.load(DATA) as f:
        return {k: f[k] for k in f.files}


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=pytest.mark.slow) if n == "demo" else n for n in all_names()]
)
def test_the_stored_numbers_are_recomputed(name, stored, tmp_path):
    before = {k.split("|", 1)[1]: v for k, v in stored.items() if k.startswith(name + "|")}
    assert before, f"no stored numbers for {name}"
    after = numbers(run_case(name, tmp_path))
    assert sorted(after) == sorted(before)
    attrs_after, attrs_before = (json.loads(str(d.pop("attrs"))) for d in (after, before))
    assert sorted(attrs_after) == sorted(attrs_before)
    for key, ref in attrs_before.items():
        new = attrs_after[key]
        if isinstance(ref, float) and isinstance(new, (int, float)) and np.isfinite(ref):
            # a number the run computes (unfaithful_min_rho, ...): to the variables' tolerance,
            # as FFT and BLAS round differently on other CPUs
            assert abs(new - ref) <= RTOL * max(1.0, abs(ref)), (key, new, ref)
        else:
            assert new == ref, key
    for key, ref in before.items():
        new = after[key]
        assert new.shape == ref.shape, key
        if ref.dtype.kind not in "fc":
            assert np.array_equal(new, ref), key
            continue
        assert np.array_equal(np.isnan(new), np.isnan(ref)), key
        ok = ~np.isnan(ref)
        scale = max(1.0, float(np.abs(ref[ok]).max())) if ok.any() else 1.0
        err = float(np.abs(new[ok] - ref[ok]).max()) if ok.any() else 0.0
        assert err <= RTOL * scale, (key, err, scale)
