"""What the per-step invariant checks cost (issue 29, item 5), as a fraction of one step.

Per scheme, timed in one run: a whole step as the time loop takes it (the first stage
``scheme.rhs``, which also measures the compression max(-div X) for the growth bound; the
integrator's step from it; ``post_step``), a first stage without the compression
(``scheme.rate``), and the check of the new state (:class:`spheredens.simulate.Invariants`:
masses, extremes, growth). The check is timed on a fresh copy of the state, so a scheme that
keeps the last synthesis for the next step's first stage (sh_spectral) pays it here too:
"overhead" is an upper bound of (rhs - rate + check) / step.

Run: .venv/bin/python benchmarks/bench_invariant_checks.py
"""
from __future__ import annotations

import numpy as np

from _common import best_time, stamp, write_rows
from spheredens.config import config_from_dict
from spheredens.problem import Problem
from spheredens.schemes import make_scheme
from spheredens.simulate import Invariants

CASES = [
    ("circle", {"scheme": "fv", "n": 1024}),
    ("circle", {"scheme": "fourier", "n": 256}),
    ("circle", {"scheme": "log_sl", "n": 1024}),
    ("sphere", {"scheme": "fv", "nlat": 64}),
    ("sphere", {"scheme": "sh_spectral", "lmax": 63}),
    ("sphere", {"scheme": "sh_spectral", "lmax": 127}),
]


def case(domain: str, discretization: dict) -> dict:
    d = 2 if domain == "circle" else 3
    mean = [0.6, 0.8] if d == 2 else [0.0, 0.6, 0.8]
    cfg = config_from_dict({
        "model": {"name": "sa", "beta": 10.0, "V": np.diag(np.linspace(1.0, 0.5, d)).tolist()},
        "domain": {"name": domain},
        "initial": {"name": "von_mises_fisher", "means": [mean], "kappas": [4.0], "weights": [1.0]},
        "discretization": discretization, "time": {"t_end": 1.0, "snapshots": 2}})
    scheme = make_scheme(Problem.from_config(cfg), cfg.discretization)
    y = scheme.initial_state()
    tendency = scheme.rhs(y, 0.0)
    dt = 1e-3
    checks = Invariants.for_scheme(scheme, cfg.time.cfl)
    checks.start(y)
    def whole_step():
        k1 = scheme.rhs(y, 0.0).rate
        return scheme.post_step(scheme.integrator.step(scheme.rate, y, 0.0, dt, k1), dt)

    step = best_time(whole_step)
    rhs = best_time(lambda: scheme.rhs(y, 0.0))
    rate = best_time(lambda: scheme.rate(y, 0.0))
    check = best_time(lambda: checks.check(y.copy(), dt, tendency.max_compression, 1, 0.0))
    return {"domain": domain, **discretization, "integrator": getattr(scheme.integrator, "name", ""),
            "step_ms": 1e3 * step, "rhs_ms": 1e3 * rhs, "rate_ms": 1e3 * rate, "check_ms": 1e3 * check,
            "overhead": (max(rhs - rate, 0.0) + check) / step}


def main() -> None:
    rows = []
    print(f"{'case':34s} {'integrator':>15s} {'step ms':>8s} {'rhs ms':>8s} {'rate ms':>8s} {'check ms':>9s} "
          f"{'overhead':>9s}")
    for domain, disc in CASES:
        row = {**case(domain, disc), **stamp()}
        rows.append(row)
        label = f"{domain} " + " ".join(f"{k}={v}" for k, v in disc.items())
        print(f"{label:34s} {row['integrator']:>15s} {row['step_ms']:8.3f} {row['rhs_ms']:8.3f} {row['rate_ms']:8.3f} "
              f"{row['check_ms']:9.3f} {100 * row['overhead']:8.1f}%")
    print("wrote", write_rows("invariant_checks", rows))


if __name__ == "__main__":
    main()
