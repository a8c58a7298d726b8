"""Particle sums on the circle at low temperature: direct, pruned and clustered (issue 15).

Problem: example C (`runs/departure_particles/base.toml`), uniform rho_0, beta = 30, 100, 300.
The states are those of a quantile particle run with n = 1000 (RK4, dt = 0.05) at t = 0, 2, ...,
24, refined to n = 2000, 4000 and 8000 by interpolating the sorted angles (the same clusters and
stragglers, more particles). At each state the attention sums (Z, N at every particle) are
evaluated three ways, timed in alternation (fastest of 3 calls each):

- ``direct``: log-sum-exp over all n^2 pairs (:func:`spheredens.interaction.logsumexp_sums`);
- ``pruned``: source blocks of 16 certified below 2^-60 of each row skipped
  (:func:`spheredens.interaction.pruned_logsumexp_sums`, the particle sums before issue 15);
- ``clustered``: pruning plus certified Taylor expansions between tight clusters
  (:func:`spheredens.interaction.clustered_logsumexp_sums`, the particle sums from n = 2000).

Reports per (beta, n): the mean over the states of each cost (what a run to t = 24 pays per
right-hand side), the ratios direct / clustered and pruned / clustered, the cost at t = 0
(uniform) and at t = 20 (clustered), and the largest |N/Z - N/Z_direct| / ||V||.

Usage: python benchmarks/bench_particle_sums.py [--quick]   (writes results/particle_sums.json)
"""
from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import spheredens as sd
from spheredens.interaction import (circle_order, clustered_logsumexp_sums, logsumexp_sums,
                                    pruned_logsumexp_sums)
from spheredens.particles import run_particles
from spheredens.problem import Problem

from _common import stamp, write_rows

QUICK = "--quick" in sys.argv
BASE = Path(__file__).resolve().parents[1] / "runs/departure_particles/base.toml"
BETAS = (30.0,) if QUICK else (30.0, 100.0, 300.0)
NS = (2000,) if QUICK else (2000, 4000, 8000)
TIMES = (0.0, 12.0, 24.0) if QUICK else tuple(float(t) for t in range(0, 25, 2))  # evenly spaced


def states(beta: float, folder: Path) -> tuple[Problem, dict[float, np.ndarray]]:
    cfg = sd.load_config(BASE).replace(**{"model.beta": beta, "time.t_end": max(TIMES),
                                          "time.snapshots": len(TIMES), "particles.n": 1000,
                                          "particles.dt": 0.05})
    ds = run_particles(cfg, seed=0, output=folder / f"p{beta:g}.nc", progress=False)
    angles = np.arctan2(ds["position"].values[..., 1], ds["position"].values[..., 0])
    return Problem.from_config(cfg), dict(zip(TIMES, np.sort(angles, axis=1)))


def refine(angles: np.ndarray, n: int) -> np.ndarray:
    m = len(angles)
    theta = np.interp(np.linspace(0, m, n, endpoint=False), np.arange(m + 1),
                      np.append(angles, angles[0] + 2 * np.pi))
    return np.stack([np.cos(theta), np.sin(theta)], axis=1)


def fastest(fn, calls: int = 3) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(calls):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def main() -> None:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for beta in BETAS:
            problem, by_time = states(beta, Path(tmp))
            model = problem.model
            v_norm = float(np.linalg.norm(model.V, 2))
            for n in NS:
                cost = {"direct": [], "pruned": [], "clustered": []}
                err = 0.0
                for t, angles in by_time.items():
                    x = refine(angles, n)
                    x = x[circle_order(x)]
                    log_w = np.full(n, -np.log(n))
                    q, vy = model.kernel.query(x), x @ model.V.T
                    td, (z, num, _) = fastest(lambda: logsumexp_sums(q, x, log_w, vy))
                    tp, _ = fastest(lambda: pruned_logsumexp_sums(q, x, log_w, vy))
                    tc, (zc, numc, _, _) = fastest(lambda: clustered_logsumexp_sums(
                        q, x, log_w, vy, beta * model.kernel.sigma_max))
                    cost["direct"].append(td)
                    cost["pruned"].append(tp)
                    cost["clustered"].append(tc)
                    err = max(err, float(np.abs(num / z[:, None] - numc / zc[:, None]).max()) / v_norm)
                mean = {k: float(np.mean(v)) for k, v in cost.items()}
                row = {"beta": beta, "n": n, "states": len(by_time),
                       **{f"{k}_ms": 1e3 * v for k, v in mean.items()},
                       "direct_over_clustered": mean["direct"] / mean["clustered"],
                       "pruned_over_clustered": mean["pruned"] / mean["clustered"],
                       "clustered_ms_t0": 1e3 * cost["clustered"][0],
                       "clustered_ms_last": 1e3 * cost["clustered"][-1],
                       "pruned_ms_last": 1e3 * cost["pruned"][-1],
                       "max_velocity_difference": err, **stamp()}
                rows.append(row)
                print(f"beta {beta:g} n {n}: mean ms direct {row['direct_ms']:.1f}, pruned "
                      f"{row['pruned_ms']:.1f}, clustered {row['clustered_ms']:.1f} "
                      f"(direct/clustered {row['direct_over_clustered']:.1f}, pruned/clustered "
                      f"{row['pruned_over_clustered']:.1f}); clustered at t = 0: "
                      f"{row['clustered_ms_t0']:.1f}, at t = {max(TIMES):g}: {row['clustered_ms_last']:.1f} "
                      f"(pruned {row['pruned_ms_last']:.1f}); max |dv| / ||V|| {err:.1e}", flush=True)
    write_rows("particle_sums_quick" if QUICK else "particle_sums", rows)


if __name__ == "__main__":
    main()
