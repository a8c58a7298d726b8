"""Cost of the zonal domain's ``log_sl`` per unit model time, against the dimension d and n.

Problem: sa on S^{d-1} reduced to the polar angle (domain ``zonal``), the equator family of
docs/high_dimension.md (a = 1, b = 2, l1 = 1.2, l2 = 1), beta = 1000, rho_0 a von Mises-Fisher
law about the axis with kappa = 1, ``log_sl`` at tolerance 1e-1 (the setting of
runs/high_dimension/d1024_beta1000.toml).

For d in {3, 16, 128, 1024} and n in {512, 1024, 2048} it reports
- one velocity evaluation at rho_0 (the zonal log-sum-exp sums with certified pruning; least
  CPU time of 3),
- the steps and the CPU seconds per unit model time over t in [0, 1] (the ring forms there),
- the ratio (CPU per step) / (one velocity evaluation at rho_0): a step is two evaluations
  and two remaps; below 2 when the concentrated density lets the pruning skip more sources
  than at rho_0.

All times are CPU seconds of this process (the machine is shared: wall times are not).

The cost does not grow with d (the sums are over the polar angle; d enters through log M0's
order only), and per step it grows like n^2 (every target against every kept source).

Usage: python benchmarks/bench_zonal.py  (writes benchmarks/results/zonal.json; ~10 minutes)
"""

from __future__ import annotations

import time

import spheredens as sd
from spheredens.config import config_from_dict

from _common import fastest_call, stamp, write_rows

DIMS = (3, 16, 128, 1024)
NS = (512, 1024, 2048)
T_MEAS = 1.0


def config(d: int, n: int, t_end: float):
    return config_from_dict({
        "domain": {"name": "zonal", "d": d},
        "model": {"name": "sa", "beta": 1000.0, "a": 1.0, "b": 2.0, "l1": 1.2, "l2": 1.0},
        "initial": {"name": "von_mises_fisher", "means": [[1.0] + [0.0] * (d - 1)],
                    "kappas": [1.0]},
        "discretization": {"scheme": "log_sl", "n": n, "tolerance": 0.1},
        "time": {"t_end": t_end, "times": [0.0, t_end]},
        "output": {"figure": False},
    })


def main() -> None:
    rows = []
    base = stamp()
    sd.run(config(3, 512, 0.05), progress=False)  # warm-up: imports happen here
    for d in DIMS:
        for n in NS:
            cfg = config(d, n, T_MEAS)
            problem = sd.Problem.from_config(cfg)
            scheme = sd.make_scheme(problem, cfg.discretization)
            state = scheme.initial_state()
            velocity = fastest_call(
                lambda s=scheme, y=state: s.tangential_velocity(y), 3, time.process_time
            )
            cpu = time.process_time()
            ds = sd.run(cfg, progress=False)
            cpu = time.process_time() - cpu
            steps = int(ds.attrs["n_steps"])
            rows.append({**base, "d": d, "n": n, "velocity_s": velocity,
                         "steps_per_unit_time": steps / T_MEAS,
                         "cpu_s_per_unit_time": cpu / T_MEAS,
                         "step_over_velocity": cpu / max(steps, 1) / velocity,
                         "measured_over": T_MEAS})
            r = rows[-1]
            print(f"d {d:>5} n {n:>5}: velocity {1e3 * velocity:7.2f} ms, "
                  f"{r['steps_per_unit_time']:5.0f} steps and {r['cpu_s_per_unit_time']:6.1f} "
                  f"CPU s per unit t, step / velocity {r['step_over_velocity']:4.1f}", flush=True)
    path = write_rows("zonal", rows)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
