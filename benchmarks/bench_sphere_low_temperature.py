"""The cost of the two-atom case at beta = 300 through its departure: ``log_lagrangian`` against
``fv`` at nlat = 512 (issue 30, acceptance 5), measured in one run, one thread.

* ``log_lagrangian``: the whole run, t = 0 to ``--t-end`` (past the departure + 10), at the
  resolution and tolerance given (default n = 32, tolerance 3e-5, merge 3), wall seconds of this
  process; its min W2 and departure time (as ``runs/sphere_two_atoms/lagrangian/study.py``
  defines them).
* ``fv`` at nlat = 512 (the study's finest mesh, ``lowrank_points`` face velocities, log-domain
  level 1e-9, cfl 0.5): a window of ``--fv-steps`` SSPRK3 steps from rho_0, wall seconds per
  unit of model time; the whole run to the same end time is that rate times the end time. The
  scaling holds while the step stays at the CFL step of speeds near ||V|| (the study's run to
  t = 18.25 took 2 hours, 395 s per unit time; benchmarks/results/two_atoms_fine_mesh.json
  measured 283 s per unit time at t = 17): a lower bound of the fv cost, so the ratio printed
  is a lower bound too.

Usage: python benchmarks/bench_sphere_low_temperature.py [--n 32] [--tolerance 3e-5]
       [--merge 3] [--t-end 110] [--quadrature points|cells|interpolant] [--single] [--look]
       [--fv-steps 10]
       (writes benchmarks/results/sphere_low_temperature.json)
"""

from __future__ import annotations

import argparse
import sys
import time
import tomllib
from pathlib import Path

from _common import stamp, write_rows

import spheredens as sd
from spheredens.analysis import curve_summary
from spheredens.problem import Problem
from spheredens.schemes import make_scheme
from spheredens.schemes._sphere_lagrangian import DEFAULT_QUADRATURE, QUADRATURES
from spheredens.simulate import Stepper

STUDY = Path(__file__).resolve().parents[1] / "runs" / "sphere_two_atoms"
BETA, T_END, FV_NLAT = 300.0, 110.0, 512


def config(discretization: dict, t_end: float, spacing: float = 0.5) -> sd.RunConfig:
    data = tomllib.loads((STUDY / "base.toml").read_text())
    data["model"]["beta"] = BETA
    data["discretization"] = discretization
    data["time"] = {"t_end": t_end, "snapshots": int(round(t_end / spacing)) + 1, "cfl": 0.5}
    data["output"] = {"figure": False}
    return sd.config_from_dict(data, base_dir=STUDY)


def lagrangian_run(
    n: int,
    tolerance: float,
    t_end: float,
    merge: float,
    quadrature: str,
    multirate: bool,
    look: bool = False,
) -> dict:
    discretization = {
        "scheme": "log_lagrangian",
        "n": n,
        "tolerance": tolerance,
        "merge": merge,
        "quadrature": quadrature,
        "multirate": multirate,
        "refine_look": look,
        "allow_underresolved": True,
    }
    cfg = config(discretization, t_end)
    t0 = time.perf_counter()
    ds = sd.run(cfg, progress=False)
    wall = time.perf_counter() - t0
    s = curve_summary(ds["time"].values, ds["w2_projection"].values)
    return {
        "n": n,
        "tolerance": tolerance,
        "merge": merge,
        "quadrature": quadrature,
        "multirate": multirate,
        "refine_look": look,
        "wall_s": wall,
        "t_end": float(ds["time"].values[-1]),
        "min_w2": s["min_w2"],
        "t_min": s["t_min"],
        "departure": s["departure_time"],
        "particles_max": int(ds["n_particles"].values.max()),
    }


def fv_rate(steps: int) -> dict:
    cfg = config(
        {
            "scheme": "fv",
            "nlat": FV_NLAT,
            "interaction": "lowrank_points",
            "log_domain_below": 1e-9,
            "allow_underresolved": True,
        },
        T_END,
    )
    scheme = make_scheme(Problem.from_config(cfg), cfg.discretization)
    state, t = scheme.initial_state(), 0.0
    step = Stepper(scheme, cfg.time)
    step.start(state)
    state, t, _ = step.advance(state, t, T_END)  # warm-up (kernels built)
    t_start, clock = t, time.perf_counter()
    for _ in range(steps):
        state, t, _ = step.advance(state, t, T_END)
    wall = time.perf_counter() - clock
    return {
        "nlat": FV_NLAT,
        "steps": steps,
        "dt_mean": (t - t_start) / steps,
        "s_per_time_unit": wall / (t - t_start),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=32)
    parser.add_argument("--tolerance", type=float, default=3e-5)
    parser.add_argument("--fv-steps", type=int, default=10)
    parser.add_argument("--t-end", type=float, default=T_END)
    parser.add_argument("--merge", type=float, default=3.0)
    parser.add_argument("--quadrature", choices=tuple(QUADRATURES), default=DEFAULT_QUADRATURE)
    parser.add_argument(
        "--single", action="store_true", help="one step for all particles (multirate = false)"
    )
    parser.add_argument(
        "--look", action="store_true", help="refine where the heavy mass looks (refine_look)"
    )
    args = parser.parse_args()
    fv = fv_rate(args.fv_steps)
    print(
        f"fv nlat = {FV_NLAT}: {fv['s_per_time_unit']:.0f} s per unit time "
        f"(dt {fv['dt_mean']:.3g})",
        flush=True,
    )
    lag = lagrangian_run(
        args.n,
        args.tolerance,
        args.t_end,
        args.merge,
        args.quadrature,
        not args.single,
        args.look,
    )
    fv_total = fv["s_per_time_unit"] * lag["t_end"]
    ratio = fv_total / lag["wall_s"]
    print(
        f"log_lagrangian n = {args.n}, tolerance {args.tolerance:g}, merge {args.merge:g}, "
        f"{args.quadrature}, {'single steps' if args.single else 'multirate'}"
        f"{', refine_look' if args.look else ''}: "
        f"{lag['wall_s']:.0f} s to "
        f"t = {lag['t_end']:g} (min W2 {lag['min_w2']:.5f} at {lag['t_min']:g}, departure "
        f"{lag['departure']:g}); fv to the same time >= {fv_total:.0f} s: ratio >= {ratio:.1f}"
    )
    write_rows(
        "sphere_low_temperature",
        [
            {
                **stamp(),
                **fv,
                **{f"lagrangian_{k}": v for k, v in lag.items()},
                "fv_total_s_lower_bound": fv_total,
                "ratio_lower_bound": ratio,
            }
        ],
    )


if __name__ == "__main__":
    sys.exit(main())
