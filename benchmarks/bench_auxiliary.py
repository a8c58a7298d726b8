"""Cost of the usa_av right-hand side against the number of slices M (issue 8, acceptance 4).

For M = 8, 32, 128 slices and the kernels rope (gauges about one axis, b = 1), cosine_toeplitz
and distance_bias (G = I, Toeplitz couplings over equally spaced slices: FFT products) and, for
contrast, distance_bias with unequally spaced slices (a dense M x M product), one right-hand
side is timed on
- the circle: scheme fv, n = 256 cells (velocity at the 256 faces);
- the sphere: scheme fv, nlat = 24 rings (730 cells, ~2500 faces), beta = 2.
"per slice" is the RHS time divided by M: constant for cost ~ M, growing like log M for
M log M. The RHS of M uncoupled single-slice problems would cost M times the M = 1 figure.

Usage: python benchmarks/bench_auxiliary.py  (writes benchmarks/results/auxiliary.json)
"""
from __future__ import annotations

import numpy as np

import spheredens as sd

from _common import best_time, stamp, write_rows

SLICES = (1, 8, 32, 128)
CASES = {"circle": {"scheme": "fv", "n": 256}, "sphere": {"scheme": "fv", "nlat": 24}}
KERNELS = ("rope", "cosine_toeplitz", "distance_bias", "distance_bias_uneven")


def scheme_for(domain: str, kernel: str, m: int):
    aux = {"kernel": kernel, "slices": m, "slice_perturbation": 0.5}
    if kernel == "distance_bias_uneven":
        xi = np.sort(np.random.default_rng(m).uniform(0, 1, m))
        aux = {"kernel": "distance_bias", "xi": [float(v) for v in xi], "slice_perturbation": 0.5}
    cfg = sd.config_from_dict({"model": {"name": "usa_av", "beta": 2.0}, "domain": {"name": domain},
                               "auxiliary": aux, "discretization": CASES[domain]})
    return sd.make_scheme(sd.Problem.from_config(cfg), cfg.discretization)


def main() -> None:
    base = stamp()
    rows = []
    for domain in CASES:
        for kernel in KERNELS:
            for m in SLICES:
                scheme = scheme_for(domain, kernel, m)
                state = scheme.initial_state()
                seconds = best_time(lambda: scheme.rhs(state, 0.0), repeat=3)
                row = {**base, "domain": domain, **CASES[domain], "kernel": kernel, "slices": m,
                       "rhs_ms": 1e3 * seconds, "per_slice_ms": 1e3 * seconds / m,
                       "toeplitz": scheme.interaction.kernel.toeplitz is not None,
                       "uniform_coupling": scheme.interaction.kernel.uniform_coupling,
                       "degree": scheme.interaction.basis.L}
                rows.append(row)
                print(f"{domain:6s} {kernel:22s} M = {m:4d}  RHS {row['rhs_ms']:9.2f} ms  "
                      f"per slice {row['per_slice_ms']:7.3f} ms", flush=True)
    print("wrote", write_rows("auxiliary", rows))


if __name__ == "__main__":
    main()
