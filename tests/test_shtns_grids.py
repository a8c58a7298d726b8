"""Every shtns grid the package asks for is one shtns accepts, on every CPU.

shtns ends the process (C ``exit(1)``) on sizes it refuses, and its rules depend on the SIMD
width of the build (the number of latitude rings must be at least 4 doubles-per-vector: 32 with
avx512, 16 with avx2). The rules below are transcribed from shtns 3.7's sht_init.c,
independently of :mod:`spheredens.grids._shtns`, and checked against it for every width; the
grids are then created in subprocesses, so that a refused grid fails a test instead of ending
the test run.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from spheredens.grids import _shtns
from spheredens.grids._sphere_gauss import MIN_NLAT, default_grid_size
from spheredens.interaction._lowrank import EXTRA_DEGREES
from spheredens.interaction._meridians import fft_friendly_rings, regular_grid_rings

#: VSIZE2 of shtns_simd.h: scalar, sse2 / sse3 / neon / vsx, avx / avx2, avx512
WIDTHS = (1, 2, 4, 8)


def shtns_exits(lmax: int, nlat: int, nphi: int, width: int) -> bool:
    """Whether shtns 3.7 calls exit(1) for sht(lmax, mmax = lmax) and set_grid(nlat, nphi) with
    SIMD vectors of ``width`` doubles: shtns_create (lmax >= 1, < 2^16), planFFT (nphi > 2 mmax),
    shtns_set_grid_auto (nlat > lmax, nlat >= 4 VSIZE2, sizes below 2^32)."""
    return (
        lmax < 1
        or lmax >= 2**16
        or nlat <= lmax
        or nphi <= 2 * lmax
        or nlat < 4 * width
        or nlat >= 2**32
        or nphi >= 2**32
    )


@pytest.mark.parametrize("width", WIDTHS)
def test_size_rule_is_shtns_rule_at_every_simd_width(width):
    checked = 0
    for lmax in (1, 2, 3, 7, 8, 15, 16, 31, 32, 63, 64, 1023, 2**16 - 1, 2**16):
        for nlat in sorted(
            {1, 2, 4, 7, 8, 15, 16, 24, 31, 32, 33, 48, lmax, lmax + 1, lmax + 2, 2 * lmax}
        ):
            for nphi in sorted({2, 8, 16, 2 * lmax, 2 * lmax + 1, 2 * nlat, 4 * lmax + 8}):
                problem = _shtns.size_problem(lmax, nlat, nphi, width=width)
                assert bool(problem) == shtns_exits(lmax, nlat, nphi, width), (
                    lmax,
                    nlat,
                    nphi,
                    width,
                    problem,
                )
                checked += 1
    assert checked > 1000


def test_installed_build_id_names_a_known_simd_width():
    build = _shtns.build_id()
    assert "id:" in build
    assert _shtns.simd_width(build) in WIDTHS
    assert _shtns.simd_width("[SHTns 3.7.5] built Dec  1 2026, id: avx512,ishioka,openmp") == 8
    assert _shtns.simd_width("[SHTns 3.7.5] built Dec  1 2026, id: avx2,ishioka,openmp") == 4
    assert _shtns.simd_width("[SHTns 3.7.5] built Dec  1 2026, id: sse2") == 2
    assert _shtns.simd_width("[SHTns 3.7.5] built Dec  1 2026, id: scalar") == 1
    assert _shtns.simd_width("something else") == _shtns.WIDEST == 8


def _regular_grids(lmax: int) -> list[tuple[int, int]]:
    """(lmax of the transform, rings) of the regular grids lowrank_meridian can ask for with
    grid degree lmax: lmax_h = max(lmax, weight degree) + EXTRA_DEGREES, the weight degree at
    most 255 (the Gauss grids of KappaLowRank.weight_degree), as low as 0."""
    return [
        (lmax, regular_grid_rings(h))
        for h in sorted({lmax + EXTRA_DEGREES, 63 + EXTRA_DEGREES, 255 + EXTRA_DEGREES})
    ]


@pytest.mark.parametrize("width", WIDTHS)
def test_every_grid_the_package_asks_for_is_accepted_at_every_width(width):
    for lmax in range(1, 65):
        nlat, nphi = default_grid_size(
            lmax
        )  # GaussGrid: sh_spectral, the auxiliary and accessor grids
        assert not shtns_exits(lmax, nlat, nphi, width), ("gauss", lmax, nlat, nphi)
        for degree, nt in _regular_grids(lmax):  # lowrank_meridian's synthesis grid
            assert not shtns_exits(degree, nt, 2 * nt, width), ("regular", lmax, nt)
    for degree in (63, 127, 255):  # KappaLowRank.weight_degree's analysis grids
        assert not shtns_exits(degree, *default_grid_size(degree), width)


def test_the_old_regular_grid_size_is_refused_by_the_rule():
    """Today's rule catches a grid that ends the process: the old ``_regular_grid`` asked for
    fft_friendly_rings(lmax_h + 1) = 24 rings at lmax 7 (lmax_h = 23: weight degree 0 + 16),
    which ends the process with avx512 (and not with avx2, where the test suite passed)."""
    old = fft_friendly_rings(7 + EXTRA_DEGREES + 1)
    assert old == 24
    assert shtns_exits(7, old, 2 * old, 8) and not shtns_exits(7, old, 2 * old, 4)
    assert _shtns.size_problem(7, old, 2 * old)  # the package refuses it on every CPU
    assert regular_grid_rings(7 + EXTRA_DEGREES) == 32 == MIN_NLAT


def test_regular_grid_rings_are_fft_friendly_and_enough():
    for h in range(1, 300):
        nt = regular_grid_rings(h)
        assert nt >= max(h + 1, 32) and nt % 2 == 0
        m = 2 * nt
        for q in (2, 3, 5):
            while m % q == 0:
                m //= q
        assert m == 1, (h, nt)


def _run(code: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_every_grid_is_created_in_a_subprocess_that_survives():
    """Gauss and regular grids for lmax 1..64 (every size the package asks for, above), and every
    sphere evaluator of sh_spectral and fv at small lmax / nlat with a general B, created for
    real; the subprocess prints each before creating it, so a death names the grid."""
    grids = [("gauss", lmax, *default_grid_size(lmax)) for lmax in range(1, 65)]
    grids += [
        ("regular", degree, nt, 2 * nt)
        for lmax in range(1, 65)
        for degree, nt in _regular_grids(lmax)
    ]
    grids += [("gauss", degree, *default_grid_size(degree)) for degree in (127, 255)]
    proc = _run(f"""
        import sys
        from spheredens.grids._shtns import make_sht
        for kind, lmax, nlat, nphi in {grids!r}:
            print(kind, lmax, nlat, nphi, flush=True)
            sh = make_sht(lmax, nlat, nphi, grid=kind)
            assert sh.nlat == nlat and sh.nphi == nphi
        print("all grids made", flush=True)
        """)
    assert proc.returncode == 0 and proc.stdout.rstrip().endswith("all grids made"), (
        proc.returncode,
        proc.stdout[-300:],
        proc.stderr[-2000:],
    )


EVALUATOR_CASES = [
    ("sh_spectral", "lmax", lmax, name)
    for name in ("funk_hecke", "kappa_interpolation", "lowrank_meridian", "direct")
    for lmax in (3, 4, 7, 8, 15)
] + [
    ("fv", "nlat", nlat, name)
    for name in ("lowrank_points", "direct", "direct_pruned")
    for nlat in (4, 8, 16)
]


def test_every_sphere_evaluator_at_small_sizes_in_a_subprocess_that_survives():
    """Each evaluator with a multiple of a rotation (which every sphere evaluator accepts) and
    with a general B (the ones that accept it): built, one right-hand side evaluated; the
    process must survive (a refusal is a Python error, printed and counted)."""
    proc = _run(f"""
        import numpy as np
        import spheredens as sd
        from spheredens.config import config_from_dict
        from spheredens.problem import Problem
        from spheredens.schemes import make_scheme
        rot = [[1.2, 0, 0], [0, 0, -1.2], [0, 1.2, 0]]
        general = [[1.2, 0.3, 0.1], [-0.2, 0.8, 0.4], [0.1, 0.2, 1.5]]
        made = refused = 0
        for scheme, key, size, name in {EVALUATOR_CASES!r}:
            for K in (rot, general):
                print(scheme, key, size, name, K is rot, flush=True)
                try:
                    cfg = config_from_dict({{
                        "model": {{"name": "sa", "beta": 2.0, "K": K}}, "domain": {{"name":
                        "sphere"}}, "initial": {{"name": "von_mises_fisher", "means": [[0.0, 0.6,
                        0.8]], "kappas": [2.0],
                                     "weights": [1.0]}},
                        "discretization": {{"scheme": scheme, key: size, "interaction": name,
                                            "allow_underresolved": True}},
                        "time": {{"t_end": 0.1, "snapshots": 2}}}})
                    s = make_scheme(Problem.from_config(cfg), cfg.discretization)
                except (ValueError, sd.SpheredensError) as exc:
                    refused += 1
                    print("  refused:", exc, flush=True)
                    continue
                y = s.initial_state()
                assert np.all(np.isfinite(s.rhs(y, 0.0).rate))
                made += 1
        print("made", made, "refused", refused, flush=True)
        """)
    assert proc.returncode == 0 and "made " in proc.stdout.splitlines()[-1], (
        proc.returncode,
        proc.stdout[-1500:],
        proc.stderr[-2000:],
    )
    made = int(proc.stdout.split()[-3])
    # refused: funk_hecke with the general B, at each of its 5 sizes (it needs a rotation)
    assert made == 2 * len(EVALUATOR_CASES) - 5, proc.stdout[-3000:]


def test_a_refused_size_is_a_python_error_naming_size_and_minimum():
    proc = _run("""
        from spheredens.grids._shtns import make_sht
        for kind in ("gauss", "regular"):
            try:
                make_sht(7, 24, 48, grid=kind)
            except ValueError as exc:
                print("refused:", exc, flush=True)
        sh = make_sht(7, 24, 48, grid="regular", round_up=True)
        print("rounded up to", sh.nlat, flush=True)
        """)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    assert len(lines) == 3
    for line in lines[:2]:
        assert "24 x 48" in line and "lmax = 7" in line and "at least 32" in line
    assert lines[2] == "rounded up to 32"


@pytest.mark.skipif(_shtns.simd_width() == 1, reason="a scalar shtns build accepts 4 rings")
def test_an_exit_inside_shtns_is_never_silent():
    """Should shtns end the process while its stdout is captured (a rule it has and the package
    does not know), its message reaches stderr as one line."""
    proc = _run("""
        from spheredens.grids import _shtns
        shtns = _shtns.import_shtns()
        sh = shtns.sht(3, 3, 1, shtns.sht_orthonormal)
        with _shtns.shtns_output_captured():  # nlat < 4 VSIZE2 (any SIMD build): exit(1)
            sh.set_grid(4, 16, flags=shtns.sht_reg_fast, polar_opt=0.0)
        print("not reached")
        """)
    assert proc.returncode == 1 and "not reached" not in proc.stdout
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("spheredens: error: shtns ended the process:"), (
        proc.stderr
    )
    assert "Run-time error" in lines[0]


def test_captured_warning_of_a_regular_grid_is_not_shown():
    proc = _run("""
        from spheredens.grids._shtns import make_sht
        sh = make_sht(31, 32, 64, grid="regular")  # nlat <= 2 lmax: shtns warns it cannot analyse
        print("ok", sh.nlat)
        """)
    assert proc.returncode == 0 and proc.stdout == "ok 32\n" and proc.stderr == "", (
        proc.stdout,
        proc.stderr,
    )
