"""Weighted particles on the two-atom case at beta = 300: no shortcut past the mesh (issue 16).

The mean-field solution is the push-forward rho_t = Phi_t # rho_0 by the flow of its own
velocity, so n particles at the Fibonacci lattice with weights proportional to rho_0 (the
``quasi_uniform`` start of :func:`spheredens.run_particles`) are a discretization of the same
equation without numerical diffusion. This script checks whether they could stand in for the
finite-volume meshes where those do not converge (beta = 300, docs/concentration.md). They
cannot: like the particles of example C on the circle (docs/particles_low_temperature.md), they
leave the plateau near Pi_# rho_0 long before the density does, at a time that grows only like
ln n, so they never reach the density's minimum.

The velocities are exact log-sum-exp sums over all particles (blocks below 2^-60 of each row's
sum skipped, :func:`spheredens.particles.particle_sums`); W2 to Pi_# rho_0 is exact at every
snapshot, each particle an atom with its weight (:func:`spheredens.transport.w2_to_antipodal_atoms`).
RK4 with ``DT``, checked against DT / 2 at n = 4096 (``DT_CHECK``).

Files: ``runs/sphere_two_atoms/cases/particles_n{n}_beta{beta}_dt{dt}.nc`` (finished runs are
reused, partial ones resume) and ``particles_check.json`` beside this script.

Usage: .venv/bin/python runs/sphere_two_atoms/particles_check.py [--workers 2] [--summarize]
       [--one N BETA [DT]]
"""
from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import json
import time
import tomllib
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

import numpy as np

import spheredens as sd
from spheredens.analysis import curve_summary
from spheredens.targets import projection_target
from spheredens.transport import w2_to_antipodal_atoms

HERE = Path(__file__).resolve().parent
OUT = HERE / "cases"
#: particle numbers per beta, and the horizon (past the fv minimum, t_min = 17.5)
CASES = {300.0: (4096, 8192)}
T_END = {300.0: 19.0}
DT = 0.05
#: the step check: (n, beta) run again at DT / 2
DT_CHECK = [(4096, 300.0)]
SNAPSHOTS_PER_UNIT = 4


def case_path(n: int, beta: float, dt: float = DT) -> Path:
    return OUT / f"particles_n{n}_beta{beta:g}_dt{dt:g}.nc"


def case_config(n: int, beta: float, dt: float = DT):
    data = tomllib.loads((HERE / "base.toml").read_text())
    data["model"]["beta"] = beta
    t_end = T_END[beta]
    data["time"] = {**data["time"], "t_end": t_end, "snapshots": int(round(SNAPSHOTS_PER_UNIT * t_end)) + 1}
    data["particles"] = {"n": n, "initialization": "quasi_uniform", "dt": dt, "integrator": "rk4",
                         "path": str(case_path(n, beta, dt))}
    data["output"] = {"path": str(case_path(n, beta, dt)), "figure": False}
    return sd.config_from_dict(data, base_dir=HERE)


def run_case(n: int, beta: float, dt: float = DT) -> dict:
    cfg = case_config(n, beta, dt)
    out = case_path(n, beta, dt)
    ds = sd.open_particles(out) if out.exists() else None
    if ds is None or ds.attrs.get("run_status") != "complete":
        ds = sd.run_particles(cfg, output=out, resume=out.exists(), progress=False)
    return summarize_case(n, beta, dt, ds, cfg)


def summarize_case(n: int, beta: float, dt: float, ds, cfg) -> dict:
    target = projection_target(cfg)
    t = ds["time"].values
    weight = ds["particle_weight"].values
    w2 = np.array([w2_to_antipodal_atoms(x, weight, target.points[0], float(target.masses[0]))
                   for x in ds["position"].values])
    s = curve_summary(t, w2)
    return {"n": int(n), "beta": beta, "dt": dt, **s, "status": ds.attrs.get("run_status"),
            "wall_s": float(ds.attrs.get("wall_time_total_seconds", ds.attrs.get("wall_time_seconds", np.nan))), "t": t.tolist(), "w2": w2.tolist()}


def describe(r: dict) -> str:
    dep = f"{r['departure_time']:g}" if np.isfinite(r["departure_time"]) else f"none by {r['t_last']:g}"
    return (f"particles n {r['n']} beta {r['beta']:g} dt {r['dt']:g}: min W2 {r['min_w2']:.5f} at "
            f"t = {r['t_min']:g}, departure {dep} ({r['status']})")


def cases_for(betas) -> list[tuple[int, float, float]]:
    cases = [(n, b, DT) for b in betas for n in CASES[b]]
    return cases + [(n, b, DT / 2) for n, b in DT_CHECK if b in betas]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=2, help="processes (one run each)")
    parser.add_argument("--betas", type=float, nargs="+", default=sorted(CASES), help="betas to run")
    parser.add_argument("--summarize", action="store_true", help="only read the finished files")
    parser.add_argument("--one", nargs="+", metavar="VALUE",
                        help="N BETA [DT]: run (or resume) one case, print its summary, and stop")
    args = parser.parse_args()
    OUT.mkdir(exist_ok=True)
    if args.one:
        if len(args.one) not in (2, 3):
            raise SystemExit(f"--one takes N BETA [DT]; got {args.one}")
        try:
            n, beta = int(args.one[0]), float(args.one[1])
            dt = float(args.one[2]) if len(args.one) == 3 else DT
        except ValueError:
            raise SystemExit(f"--one: N must be an integer, BETA and DT numbers; got {args.one}") from None
        if beta not in T_END:
            raise SystemExit(f"--one: beta must be one of {sorted(T_END)}; got {beta:g}")
        row = run_case(n, beta, dt)
        print(describe(row))
        return
    cases = sorted(cases_for(args.betas), key=lambda c: -c[0] ** 2 * T_END[c[1]] / c[2])
    rows = []
    if args.summarize:
        rows = [summarize_case(n, b, dt, sd.open_particles(case_path(n, b, dt)), case_config(n, b, dt))
                for n, b, dt in cases if case_path(n, b, dt).exists()]
    else:
        with ProcessPoolExecutor(max_workers=args.workers) as pool:
            futures = {pool.submit(run_case, *c): c for c in cases}
            for fut in as_completed(futures):
                try:
                    rows.append(fut.result())
                except BaseException as exc:  # keep the others going; say which one failed
                    print(f"{futures[fut]} failed: {exc}", flush=True)
                    continue
                print(describe(rows[-1]), flush=True)
    for r in rows if args.summarize else []:
        print(describe(r))
    (HERE / "particles_check.json").write_text(json.dumps({"runs": rows}, indent=1))


if __name__ == "__main__":
    main()
