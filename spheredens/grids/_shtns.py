"""The one place that creates shtns transforms and grids.

shtns ends the process with the C function ``exit(1)`` when it is given sizes it cannot handle
(``shtns_runerr`` in its sht_init.c), printing the reason to the C-level stdout. Its rules,
read in sht_init.c of shtns 3.7 (``shtns_create``, ``shtns_set_grid_auto``, ``planFFT``):

- ``1 <= lmax < 2**16`` and ``mmax * mres <= lmax``;
- ``nlat > lmax`` (every grid) and ``nphi > 2 mmax``;
- ``nlat >= 4 VSIZE2``, where VSIZE2 is the number of doubles of the SIMD vectors the build
  uses: 8 for avx512 (nlat >= 32), 4 for avx / avx2 (16), 2 for sse2 / sse3 / neon / vsx (8),
  1 for scalar builds (4);
- ``nlat, nphi < 2**32``.

shtns is compiled on the machine that installs it (``-march=native``), so the width depends on
the CPU: a grid of 24 rings works with avx2 and ends the process with avx512. :func:`make_sht`
checks every rule before calling shtns, with the widest vectors of any build (avx512's, which
hold for every build: a grid accepted on one CPU is accepted on all, and a run gives the same
grids everywhere), and either rounds the number of rings up (where the caller says more rings
keep its method exact) or raises a ``ValueError`` naming the size and the minimum. The installed
build's width is read from its build id (:func:`build_id`, :func:`simd_width`).

Where shtns must be called with its stdout closed (the regular grid's set-up prints a warning
that the grid cannot analyse, which it only synthesizes), that stdout goes to a watcher process;
should shtns end the process meanwhile, the watcher prints what it wrote to stderr, so the
process never ends silently (:func:`shtns_output_captured`).
"""

from __future__ import annotations

import contextlib
import ctypes
import io
import os
import re
import subprocess
import sys
from typing import Any, Iterator

from .._lazy import shtns as _shtns_module

#: doubles per SIMD vector (VSIZE2 of shtns_simd.h) for each SIMD name of shtns' build id
SIMD_WIDTHS = {
    "avx512": 8,
    "avx2": 4,
    "avx": 4,
    "sse3": 2,
    "sse2": 2,
    "neon": 2,
    "vsx": 2,
    "scalar": 1,
}

#: the widest SIMD vector of any shtns build (avx512): its rules hold for every build
WIDEST = max(SIMD_WIDTHS.values())

#: the kinds of grid the package asks shtns for, and their shtns flag names
GRID_FLAGS = {"gauss": "sht_gauss", "regular": "sht_reg_fast"}

#: sizes stored by shtns in unsigned short (lmax) and unsigned int (nlat, nphi)
MAX_SHTNS_LMAX = 2**16 - 1
MAX_SHTNS_POINTS = 2**32 - 1


def import_shtns() -> Any:
    """The shtns module, imported without its banner (shtns prints to the C-level stdout on
    import; :mod:`spheredens._lazy` closes it meanwhile)."""
    return _shtns_module.load()


def build_id() -> str:
    """shtns' build information, e.g. ``[SHTns 3.7.5] built Dec 1 2026, 21:33:05, id:
    avx512,ishioka,openmp``: the ``id`` names the SIMD instructions it was compiled for."""
    return str(import_shtns().build_info())


def simd_width(build: str | None = None) -> int:
    """Doubles per SIMD vector of the shtns build described by ``build`` (default: the
    installed one, :func:`build_id`); :data:`WIDEST` when the id names no known SIMD kind."""
    text = build_id() if build is None else build
    match = re.search(r"id:\s*([^\s]+)", text)
    names = match.group(1).lower().split(",") if match else []
    for name in names:
        if name in SIMD_WIDTHS:
            return SIMD_WIDTHS[name]
    return WIDEST


def min_rings(width: int = WIDEST) -> int:
    """The fewest latitude rings shtns accepts with SIMD vectors of ``width`` doubles
    (``nlat >= 4 VSIZE2``: 32 for avx512)."""
    return 4 * int(width)


def size_problem(
    lmax: int, nlat: int, nphi: int, *, mmax: int | None = None, width: int | None = None
) -> str:
    """Why shtns would end the process for a transform of degree ``lmax`` (order ``mmax``,
    default ``lmax``) on ``nlat`` x ``nphi`` points with SIMD vectors of ``width`` doubles
    (default :data:`WIDEST`, whose rules hold for every build), or "" when it accepts them.
    The rules of every grid kind the package uses (Gauss and regular) are the same."""
    mmax = lmax if mmax is None else mmax
    width = WIDEST if width is None else int(width)
    if not 1 <= lmax <= MAX_SHTNS_LMAX:
        return f"lmax = {lmax} must be between 1 and {MAX_SHTNS_LMAX}"
    if not 0 <= mmax <= lmax:
        return f"mmax = {mmax} must be between 0 and lmax = {lmax}"
    if not 0 < nlat <= MAX_SHTNS_POINTS or not 0 < nphi <= MAX_SHTNS_POINTS:
        return (
            f"the grid {nlat} x {nphi} must have between 1 and {MAX_SHTNS_POINTS} points each way"
        )
    if nlat <= lmax:
        return f"{nlat} latitude rings are too few for lmax = {lmax}: shtns needs more than lmax"
    if nphi <= 2 * mmax:
        return (
            f"{nphi} longitudes are too few for mmax = {mmax}: "
            f"shtns needs more than 2 mmax = {2 * mmax}"
        )
    if nlat < min_rings(width):
        kind = (
            "every CPU's build (avx512's vectors of 8 doubles)"
            if width == WIDEST
            else f"a build with SIMD vectors of {width} doubles"
        )
        return (
            f"{nlat} latitude rings are too few for {kind}: shtns needs at least {min_rings(width)}"
        )
    return ""


def rings_at_least(nlat: int, width: int | None = None) -> int:
    """``nlat`` rounded up to the fewest rings shtns accepts with SIMD vectors of ``width``
    doubles (default :data:`WIDEST`: every build; :func:`min_rings`), kept even."""
    width = WIDEST if width is None else int(width)
    n = max(int(nlat), min_rings(width))
    return n + n % 2


# -- shtns' stdout ----------------------------------------------------------------------------
#: written to the captured stdout once the shtns call has returned
_RETURNED = "spheredens-shtns-call-returned"

#: the watcher of the captured stdout: at its end, without the mark of a returned call (shtns
#: ended the process), it prints what shtns wrote to stderr as one line
_WATCHER = (
    'b=$(cat); case "$b" in *' + _RETURNED + '*) ;; *) printf "spheredens: error: shtns ended '
    'the process: %s\\n" "$(printf %s "$b" | tr -s "\\n\\r\\t" "   ")" >&2 ;; esac'
)


@contextlib.contextmanager
def shtns_output_captured() -> Iterator[None]:
    """Run a block with the C-level stdout sent to a pipe read by a watcher process: shtns'
    warnings are not shown, but should shtns end the process meanwhile (C ``exit``), the watcher
    sees the pipe close without the mark of a returned call and prints what shtns wrote to
    stderr, so the process never ends silently. Where no watcher can be started, stdout stays
    open."""
    try:
        read_end, write_end = os.pipe()
        watcher = subprocess.Popen(
            ["/bin/sh", "-c", _WATCHER], stdin=read_end, stdout=subprocess.DEVNULL, close_fds=True
        )
    except OSError:
        yield
        return
    os.close(read_end)
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(write_end, 1)
        with contextlib.redirect_stdout(io.StringIO()):
            yield
    finally:
        with contextlib.suppress(Exception):
            ctypes.CDLL(None).fflush(None)
        with contextlib.suppress(OSError):
            os.write(write_end, _RETURNED.encode())
        os.dup2(saved, 1)
        os.close(saved)
        os.close(write_end)
        watcher.wait()


def make_sht(
    lmax: int,
    nlat: int,
    nphi: int,
    *,
    grid: str = "gauss",
    nthreads: int = 1,
    round_up: bool = False,
) -> Any:
    """An shtns transform (orthonormal, Condon-Shortley phase, mmax = lmax) of degree ``lmax``
    on a ``grid`` ("gauss" or "regular") of ``nlat`` x ``nphi`` points, its sizes checked
    against shtns' rules first (:func:`size_problem`, with the widest SIMD vectors, so the same
    grids are accepted on every CPU).

    Parameters
    ----------
    round_up : bool
        Whether more rings keep the caller's method exact: then ``nlat`` below shtns' minimum is
        raised to it (read the size used from the transform's ``nlat``); otherwise such a grid
        raises.

    Raises
    ------
    ValueError
        Naming the size and the minimum, when shtns would refuse the grid (and end the process).
    """
    if grid not in GRID_FLAGS:
        raise ValueError(f"unknown shtns grid {grid!r}: one of {sorted(GRID_FLAGS)}")
    lmax, nlat, nphi = int(lmax), int(nlat), int(nphi)
    if round_up:
        nlat = rings_at_least(nlat)
    problem = size_problem(lmax, nlat, nphi)
    if problem:
        raise ValueError(
            f"shtns cannot make a {grid} grid of {nlat} x {nphi} points for lmax = {lmax}: "
            f"{problem}"
        )
    shtns = import_shtns()
    sh = shtns.sht(lmax, lmax, 1, shtns.sht_orthonormal, nthreads=int(nthreads))
    flags = getattr(shtns, GRID_FLAGS[grid])
    if grid == "regular":
        # shtns warns that a regular grid of nlat <= 2 lmax cannot analyse (it only synthesizes)
        with shtns_output_captured():
            sh.set_grid(nlat, nphi, flags=flags, polar_opt=0.0)
    else:
        sh.set_grid(nlat, nphi, flags=flags, polar_opt=0.0)
    return sh
