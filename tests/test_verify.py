"""``spheredens verify``: the exact references on the user's machine.

The command runs every check of :func:`spheredens.verify.checks` and passes on this install; a
broken scheme or a bound it cannot meet makes it fail with exit status 1, naming the check.
"""

from __future__ import annotations

import importlib

from spheredens.cli import main
from spheredens.schemes import FiniteVolumeScheme

# the module (``sd.verify`` may name the function: import the module by its full name)
verify_module = importlib.import_module("spheredens.verify")


def test_verify_passes_with_one_line_per_check(capsys):
    assert main(["verify"]) == 0
    lines = capsys.readouterr().out.splitlines()
    names = [name for name, _ in verify_module.checks()]
    assert len(lines) == len(names) + 1, lines
    for name, line in zip(names, lines):
        assert line.startswith(f"PASS  {name} "), line
        assert "documented:" in line, line
    assert any("observed order" in line for line in lines)
    assert lines[-1].startswith(f"verify: all {len(names)} checks passed in "), lines[-1]
    # every family of checks is there: beta = 0 on both domains, zero temperature for every
    # scheme of both domains, the linear growth rates
    for part in (
        "beta = 0, circle",
        "beta = 0, sphere",
        "zero temperature, circle",
        "zero temperature, sphere",
        "linear growth",
    ):
        assert any(name.startswith(part) for name in names), part
    # the last line gives the wall time, which depends on the machine: only its presence is
    # checked (the line's start above)


def test_a_bound_the_scheme_cannot_meet_fails(monkeypatch, capsys):
    bound = verify_module.BETA_ZERO_CIRCLE["fv"]
    monkeypatch.setitem(
        verify_module.BETA_ZERO_CIRCLE,
        "fv",
        verify_module.BetaZeroBound(bound.ns, 1e-8, bound.order),
    )
    assert main(["verify", "--only", "beta = 0, circle fv"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and lines[0].startswith("FAIL  beta = 0, circle fv "), lines
    assert lines[-1].startswith("verify: 1 of 1 checks FAILED in ") and lines[-1].endswith(
        ": beta = 0, circle fv"
    )


def test_a_broken_scheme_fails(monkeypatch, capsys):
    """Circle finite volumes moving mass 5% too fast: no longer converges to characteristics."""
    rhs = FiniteVolumeScheme.rhs

    def too_fast(self, state, t):
        tendency = rhs(self, state, t)
        return tendency._replace(rate=1.05 * tendency.rate)

    monkeypatch.setattr(FiniteVolumeScheme, "rhs", too_fast)
    assert main(["verify", "--only", "zero temperature, circle fv", "--quiet"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("FAIL  zero temperature, circle fv ") and "FAILED" in lines[-1], (
        lines
    )


def test_python_rows_and_a_check_that_cannot_run(monkeypatch):
    rows = verify_module.verify(only=["beta = 0, sphere"])
    assert [r.name for r in rows] == [
        "beta = 0, sphere sh_spectral",
        "beta = 0, sphere fv",
        "beta = 0, sphere log_sl",
        "beta = 0, sphere log_lagrangian",
    ]
    assert all(isinstance(r, verify_module.CheckResult) and r.passed for r in rows)
    assert all(r.errors[0] <= 1e-12 and r.source.startswith("tests/") for r in rows)
    # log_sl: its cells' masses at their centroids, against the mean field of those atoms
    # (measured 4.4e-16 at nlat = 16); log_lagrangian: its particles (4.4e-16 at n = 8)
    assert rows[-2].errors[0] <= 1e-14 and rows[-1].errors[0] <= 1e-14

    def fails(*args, **kwargs):
        raise RuntimeError("no solver here")

    monkeypatch.setattr(verify_module, "linear_growth_errors", fails)
    rows = verify_module.verify(only=["linear growth"])
    assert rows and not any(r.passed for r in rows)
    assert "could not run: RuntimeError: no solver here" in rows[0].line()


def test_only_without_a_match_is_one_line(capsys):
    assert main(["verify", "--only", "no such check"]) == 2
    err = capsys.readouterr().err.strip()
    assert (
        err.startswith("spheredens: error: no check name contains 'no such check'")
        and "\n" not in err
    )
