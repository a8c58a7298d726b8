"""What one more refinement of the two-atom study at beta = 300 costs (issue 16, acceptance 4).

The state: the study's nlat = 512 finite-volume density at t = 17 (near its W2 minimum,
runs/sphere_two_atoms/cases/fv_nlat512_beta300_ld1e-09.nc, made by
``runs/sphere_two_atoms/study.py --one fv 512 300``), injected into each mesh (every cell takes
the value of the nlat = 512 cell holding its centre, renormalized to mass 1). For each nlat it
measures, in one run and one thread: the fastest of 3 right-hand sides after a warm-up (the
face velocities by ``lowrank_points`` with the study's log-domain level 1e-9, and the fluxes),
the stable step at the study's CFL number 0.5, the cost of one SSPRK3 step (3 right-hand sides)
and the hours to t = 18 at that step (a lower bound of the wall time: the runs' steps shrink as
the clusters sharpen).

Usage: python benchmarks/bench_two_atoms_fine_mesh.py [--nlat 512 1024]
       (writes benchmarks/results/two_atoms_fine_mesh.json)
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

import spheredens as sd
from spheredens.grids import RingMesh
from spheredens.problem import Problem
from spheredens.schemes import make_scheme

from _common import fastest_call, stamp, write_rows

STUDY = Path(__file__).resolve().parents[1] / "runs" / "sphere_two_atoms"
SOURCE = STUDY / "cases" / "fv_nlat512_beta300_ld1e-09.nc"
BETA, T_STATE, T_TARGET, CFL = 300.0, 17.0, 18.0, 0.5


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nlat", type=int, nargs="+", default=[512, 1024], help="meshes to time")
    args = parser.parse_args()
    if not SOURCE.exists():
        raise SystemExit(f"{SOURCE} is missing: make it with "
                         ".venv/bin/python runs/sphere_two_atoms/study.py --one fv 512 300")
    sys.path.insert(0, str(STUDY))
    import study  # the study's case configurations

    ds = sd.open_run(SOURCE)
    rho_source = ds["rho"].sel(time=T_STATE).values
    source_mesh = RingMesh(512)
    rows = []
    for nlat in args.nlat:
        cfg = study.case_config("fv", nlat, BETA, study.LOG_DOMAIN_BELOW)
        scheme = make_scheme(Problem.from_config(cfg), cfg.discretization)
        mesh = scheme.grid
        rho = rho_source[source_mesh.locate(mesh.lat_c, mesh.lon_c)]
        state = (rho / np.sum(rho * mesh.area))[None]
        rhs_s = fastest_call(lambda: scheme.rhs(state, T_STATE), 3)
        dt = scheme.stable_dt(CFL, scheme.rhs(state, T_STATE))
        step_s = 3.0 * rhs_s
        rows.append({**stamp(), "nlat": nlat, "cells": int(mesh.n_cells), "rhs_s": rhs_s, "dt": dt,
                     "step_s": step_s, "hours_to_t18_at_this_dt": T_TARGET / dt * step_s / 3600.0})
        print(f"nlat {nlat}: {mesh.n_cells} cells, right-hand side {rhs_s:.2f} s, dt {dt:.4g}, "
              f"step {step_s:.2f} s, {rows[-1]['hours_to_t18_at_this_dt']:.1f} h to t = {T_TARGET:g} "
              "at this dt", flush=True)
    print(f"wrote {write_rows('two_atoms_fine_mesh', rows)}")


if __name__ == "__main__":
    main()
