"""Cost of the circle right-hand side and of model time, direct quadrature vs FFT evaluator.

Problem: sa, Q = K = I (so B = I and both evaluators apply), V = diag(1, 0.5), beta = 30,
rho_0 a two-component von Mises-Fisher mixture, scheme fv (MC limiter, SSPRK3, cfl 0.4).

For n = 256, 1024, 4096 and each evaluator it reports
- the time of one right-hand side (best of 5, after warm-up),
- the ratio RHS / (one real FFT pair of length n) (machine-independent-ish),
- the agreement of the two evaluators' face velocities (max abs difference),
- the wall time per unit model time, measured over t in [0, t_meas] and scaled.

Usage: python benchmarks/bench_circle_rhs.py  (writes benchmarks/results/circle_rhs.json)
"""
from __future__ import annotations

import time

import numpy as np

import spheredens as sd
from spheredens.config import config_from_dict

from _common import best_time, stamp, write_rows

NS = (256, 1024, 4096)


def config(n: int, interaction: str, t_end: float):
    return config_from_dict({
        "model": {"name": "sa", "beta": 30.0, "V": [[1.0, 0.0], [0.0, 0.5]]},
        "initial": {"name": "von_mises_fisher", "means": [[1.0, 0.0], [0.0, 1.0]],
                    "kappas": [2.0, 5.0], "weights": [0.6, 0.4]},
        "discretization": {"scheme": "fv", "n": n, "interaction": interaction},
        "time": {"t_end": t_end, "times": [0.0, t_end], "cfl": 0.4},
    })


def main() -> None:
    rows = []
    base = stamp()
    sd.run(config(64, "direct", 0.1), progress=False)  # warm-up: imports (POT, xarray) happen here
    for n in NS:
        x = np.random.default_rng(0).standard_normal(n)
        fft_pair = best_time(lambda: np.fft.irfft(np.fft.rfft(x), n))
        velocities = {}
        for interaction in ("direct", "fft"):
            cfg = config(n, interaction, 1.0)
            problem = sd.Problem.from_config(cfg)
            t0 = time.perf_counter()
            scheme = sd.make_scheme(problem, cfg.discretization)
            setup = time.perf_counter() - t0
            state = scheme.initial_state()
            rhs = best_time(lambda: scheme.rhs(state, 0.0))
            velocities[interaction] = scheme.face_velocity(state)
            t_meas = 0.5 if n <= 1024 else 0.1
            ds = sd.run(config(n, interaction, t_meas), progress=False)
            per_unit = ds.attrs["wall_time_seconds"] / t_meas
            rows.append({**base, "n": n, "interaction": interaction, "setup_s": setup,
                         "rhs_s": rhs, "rhs_over_fft_pair": rhs / fft_pair,
                         "steps_per_unit_time": ds.attrs["n_steps"] / t_meas,
                         "wall_s_per_unit_time": per_unit, "measured_over": t_meas})
        diff = float(np.abs(velocities["direct"] - velocities["fft"]).max())
        for row in rows[-2:]:
            row["max_velocity_difference"] = diff
    path = write_rows("circle_rhs", rows)
    print(f"{'n':>6} {'evaluator':>9} {'setup s':>9} {'RHS ms':>9} {'RHS/FFT':>9} "
          f"{'steps/unit t':>12} {'wall s/unit t':>13} {'|v_d - v_f|':>11}")
    for r in rows:
        print(f"{r['n']:>6} {r['interaction']:>9} {r['setup_s']:9.3f} {1e3 * r['rhs_s']:9.3f} "
              f"{r['rhs_over_fft_pair']:9.1f} {r['steps_per_unit_time']:12.0f} "
              f"{r['wall_s_per_unit_time']:13.2f} {r['max_velocity_difference']:11.1e}")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
