"""Is the mass across set by the emptying band about the plane <x, u> = 0? (docs/concentration.md)

A diagnostic, not a scheme option: the study's case (study.py, beta = 300, ``--merge 3 --look
--moments --limited``) to t = 12 with one change, made here at run time: besides the caps of
``refine_look``, every particle within ``--band`` (default 0.2) of the plane <x, u> = 0 (u the
target's atom) is cut down to half the kernel's width there (``LOOK_LENGTH`` |beta B^T x|^-1/2,
as ``refine_look`` cuts about the look directions), so the band the plane's particles take
their velocity from is held at the kernel's scale. The plane is this case's separatrix, given
by hand: a general criterion would have to find it.

Usage:
  .venv/bin/python runs/sphere_two_atoms/lagrangian/band_check.py --run N [--band B]
          [--length L] [--tol T]
      run (or resume) the case at n = N into cases/band_test/ (cases/band_test_B_L/ for a
      band or a length other than 0.2 and 0.5 kernel widths)
  .venv/bin/python runs/sphere_two_atoms/lagrangian/band_check.py --table
      the mass across (1e-5) at t = 4 ... 12 of the runs there, with study.py's runs to compare
      (study.py --across 300)
"""

from __future__ import annotations

import argparse

import numpy as np
import study  # beside this script

import spheredens.schemes._sphere_lagrangian as lagrangian
from spheredens.schemes._particle_remesh import LOOK_LENGTH, look_lengths
from spheredens.targets import projection_target

BETA = 300.0
OUT = study.OUT / "band_test"
VARIANT = study.Variant(merge=3.0, look=True, moments=True, limited=True)


def banded(u: np.ndarray, band: float, length: float = LOOK_LENGTH):
    """``look_lengths`` with the particles within ``band`` of the plane <x, u> = 0 cut to
    ``length`` kernel widths."""

    def lengths(log_m, x, query, s_max):
        out = look_lengths(log_m, x, query, s_max)
        near = np.flatnonzero(np.abs(x @ u) < band)
        if near.size:
            width = np.linalg.norm(np.asarray(query(x[near]), dtype=float), axis=1) ** -0.5
            out[near] = np.minimum(out[near], length * width)
        return out

    return lengths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--run", type=int, metavar="N")
    parser.add_argument("--band", type=float, default=0.2)
    parser.add_argument(
        "--length", type=float, default=LOOK_LENGTH,
        help="the band's particles are cut to this many kernel widths (default %(default)g)",
    )
    parser.add_argument("--tol", type=float, default=3e-6)
    parser.add_argument("--table", action="store_true")
    args = parser.parse_args()
    target = projection_target(study.case_config(BETA, 16, 1e-4, study.SPACING))
    if args.run:
        lagrangian.look_lengths = banded(target.points[0], args.band, args.length)
        out = OUT
        if (args.band, args.length) != (0.2, LOOK_LENGTH):
            out = OUT.with_name(f"band_test_{args.band:g}_{args.length:g}")
        study.run_case(BETA, args.run, args.tol, 12.0, VARIANT, False, out)
    if args.table:
        print(study.across_table("band run", sorted(OUT.parent.glob("band_test*/*.nc")), target))


if __name__ == "__main__":
    main()
