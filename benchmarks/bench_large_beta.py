"""Cost of example C at beta = 1000 through its departure: ``log_sl`` against ``fv`` n = 4096.

Problem: example C (runs/concentration/base_circle.toml: sa, Q = I, K = [[1.75, 0.866025],
[0.433013, 2.5]], V = diag(1, 0.5), rho_0 uniform) at beta = 1000, to T = 270 (the departure is
at t ~ 256, the run passes it by more than 10).

* ``log_sl``: the whole run, measured (wall time, steps, min W2, t_min, departure time), at the
  resolution and tolerance given (default n = 1024, tolerance 1e-2: see docs/concentration.md
  for the refinement that shows it converged).
* ``fv`` with n = 4096 and direct quadrature, today's method (SSPRK3, cfl 0.4, MC limiter):
  too slow to run to T here (about 30 s of wall time per unit of model time), so its cost is
  measured over windows of model time and scaled to T. Its step is set by the CFL number, so
  its steps per unit time do not depend on the state; its cost per step does a little (rows of
  the direct quadrature that fall back to log-sum-exp as the density concentrates). Two
  windows stand for the run: one from rho_0 (t in [0, w]) and one from a plateau state at
  t = 100 (the ``log_sl`` state there, its cell averages split onto the n = 4096 cells). The
  larger of the two costs per unit time is scaled to T.

The ratio (fv scaled cost) / (log_sl measured cost) is the acceptance figure of issue 14 (>= 20).

Usage: python benchmarks/bench_large_beta.py [--n 1024] [--tolerance 1e-2] [--window 0.25]
(writes benchmarks/results/large_beta.json; about 4 minutes on the 2-core machine)
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import spheredens as sd
from spheredens.analysis import curve_summary
from spheredens.config import config_from_dict
from spheredens.simulate import Observer

from _common import stamp, write_rows

BETA, T_END, T_PLATEAU = 1000.0, 270.0, 100.0
MODEL = {"name": "sa", "beta": BETA, "Q": [[1.0, 0.0], [0.0, 1.0]],
         "K": [[1.75, 0.866025], [0.433013, 2.5]], "V": [[1.0, 0.0], [0.0, 0.5]]}


def config(discretization: dict, t_end: float, **time_keys):
    return config_from_dict({"model": MODEL, "domain": {"name": "circle"}, "initial": {"name": "uniform"},
                             "discretization": discretization,
                             "time": {"t_end": t_end, **time_keys}})


class StateAt(Observer):
    """Keeps the state at one snapshot time."""

    def __init__(self, when: float) -> None:
        self.when, self.state = when, None

    def observe(self, t: float, state) -> None:
        if t == self.when:
            self.state = np.array(state)


def log_sl_run(n: int, tolerance: float):
    cfg = config({"scheme": "log_sl", "n": n, "tolerance": tolerance}, T_END,
                 snapshots=int(4 * T_END) + 1, max_dt=1.0)
    problem = sd.Problem.from_config(cfg)
    scheme = sd.make_scheme(problem, cfg.discretization)
    recorder = sd.Recorder(problem, scheme, cfg)
    keep = StateAt(T_PLATEAU)
    t0 = time.perf_counter()
    result = sd.simulate(scheme, cfg.time, [recorder, keep])
    wall = time.perf_counter() - t0
    ds = recorder.dataset()
    summary = curve_summary(ds["time"].values, ds["w2_projection"].values)
    return {"method": "log_sl", "n": n, "tolerance": tolerance, "t_end": T_END, "wall_s": wall,
            "steps": result.n_steps, "retried_steps": result.retried_steps,
            "measured": "whole run", **{k: float(v) for k, v in summary.items()},
            "w2_representation": ds["w2_projection"].attrs.get("comment", "")}, keep.state, scheme


def fv_window(state, t_start: float, window: float) -> dict:
    cfg = config({"scheme": "fv", "n": 4096, "interaction": "direct"}, t_start + window,
                 times=[t_start, t_start + window], cfl=0.4)
    scheme = sd.make_scheme(sd.Problem.from_config(cfg), cfg.discretization)
    t0 = time.perf_counter()
    result = sd.simulate(scheme, cfg.time, state=state, t_start=t_start)
    wall = time.perf_counter() - t0
    return {"from": t_start, "window": window, "wall_s": wall, "steps": result.n_steps,
            "wall_s_per_unit_time": wall / window, "steps_per_unit_time": result.n_steps / window}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=1024, help="log_sl cells (default 1024)")
    parser.add_argument("--tolerance", type=float, default=1e-2, help="log_sl step tolerance (1e-2)")
    parser.add_argument("--window", type=float, default=0.25, help="fv window of model time (0.25)")
    args = parser.parse_args()
    base = stamp()
    row, plateau, scheme = log_sl_run(args.n, args.tolerance)
    print(f"log_sl n = {args.n}, tolerance {args.tolerance:g}: {row['wall_s']:.0f} s, {row['steps']} steps; "
          f"min W2 {row['min_w2']:.6g} at t = {row['t_min']:g}, departure {row['departure_time']:g}")
    # the plateau state on the fv grid: exp(ell) of each cell on its two halves
    rho = np.repeat(scheme.density(plateau), 4096 // args.n, axis=-1)
    fv_cfg = config({"scheme": "fv", "n": 4096, "interaction": "direct"}, 1.0)
    start = sd.make_scheme(sd.Problem.from_config(fv_cfg), fv_cfg.discretization).initial_state()
    windows = [fv_window(start, 0.0, args.window), fv_window(rho, T_PLATEAU, args.window)]
    per_unit = max(w["wall_s_per_unit_time"] for w in windows)
    fv = {"method": "fv", "n": 4096, "interaction": "direct", "t_end": T_END,
          "wall_s": per_unit * T_END, "measured": "windows, scaled to t_end", "windows": windows}
    for w in windows:
        print(f"fv n = 4096 direct, t in [{w['from']:g}, {w['from'] + w['window']:g}]: "
              f"{w['wall_s_per_unit_time']:.1f} s per unit time, {w['steps_per_unit_time']:.0f} steps per unit time")
    ratio = fv["wall_s"] / row["wall_s"]
    print(f"fv scaled to T = {T_END:g}: {fv['wall_s']:.0f} s; ratio fv / log_sl = {ratio:.1f}")
    path = write_rows("large_beta", [{**base, **row}, {**base, **fv, "ratio_to_log_sl": ratio}])
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
