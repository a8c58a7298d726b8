"""Particles in R^d (domain zonal): cost of one RK4 step against n and d.

For n in {250, 1000, 4000} and d in {3, 16, 128, 1024}: model sa, beta = 10, a = 1, b = 1,
l1 = 2, l2 = 1, particles i.i.d. uniform on S^{d-1} (no pruning: below 2000 particles it is
not tried, and a uniform state in R^d has nothing to prune). Each step is 4 right-hand sides
(two n x n x d BLAS products each: the Gram matrix <beta B^T x_i, x_j> and the product with
V x_j, plus n^2 exponentials). The table gives the step's wall time and its ratio to one n x n x
d Gram matrix x @ y.T (y a copy of x, so a general product, not syrk) timed in the same run
(best of several calls): 8 is the BLAS floor of a step. Two more rows at n = 4000
time a clustered state (four tight groups about +-e, +-e_2: 0.02 / sqrt(d) spread, beta =
100), where the certified pruning pays.

Usage: OPENBLAS_NUM_THREADS=1 python benchmarks/bench_zonal_particles.py [--quick]
(writes benchmarks/results/zonal_particles.json)
"""
from __future__ import annotations

import sys

import numpy as np

from spheredens.config import config_from_dict
from spheredens.problem import Problem
from spheredens.zonal_particles import (
    ZonalParticleSystem,
    _pruning_pays,
    cluster_order,
    initial_zonal_particles,
)

from _common import fastest_call, stamp, write_rows

QUICK = "--quick" in sys.argv
NS = [250, 1000] if QUICK else [250, 1000, 4000]
DS = [3, 16, 128] if QUICK else [3, 16, 128, 1024]


def problem(d, beta):
    return Problem.from_config(config_from_dict({
        "domain": {"name": "zonal", "d": d},
        "model": {"name": "sa", "beta": beta, "a": 1.0, "b": 1.0, "l1": 2.0, "l2": 1.0},
    }))


def rk4_step(system, x, dt=0.01):
    k1 = system.velocity(x)
    k2 = system.velocity(x + 0.5 * dt * k1)
    k3 = system.velocity(x + 0.5 * dt * k2)
    k4 = system.velocity(x + dt * k3)
    y = x + dt / 6.0 * (k1 + 2 * k2 + 2 * k3 + k4)
    return system.post_step(y, dt)


def row(d, n, x, prob, state):
    system = ZonalParticleSystem(prob, x, np.full(n, 1.0 / n), 0.01)
    calls = 1 if n * n * d > 4e9 else 3
    y = x.copy()  # x @ x.T would take BLAS syrk, half the work of a general product
    gram = fastest_call(lambda: x @ y.T, 5)
    step = fastest_call(lambda: rk4_step(system, x), calls)
    frame = system.frame
    order = cluster_order(x)
    xo = x[order]
    pays = n >= 2000 and _pruning_pays(frame.query(xo, frame.along(xo)), xo,
                                        np.full(n, -np.log(n)))
    out = {"d": d, "n": n, "state": state, "gram_s": gram, "step_s": step,
           "step_over_gram": step / gram, "pruned": bool(pays), **stamp()}
    print(f"| {d} | {n} | {state} | {gram * 1e3:.3g} | {step * 1e3:.4g} | {step / gram:.3g} | "
          f"{'yes' if pays else 'no'} |", flush=True)
    return out


def main():
    rows = []
    print("| d | n | state | Gram ms | RK4 step ms | step / Gram | pruned |")
    print("|---:|---:|---|---:|---:|---:|---|")
    for d in DS:
        prob = problem(d, 10.0)
        for n in NS:
            x, _ = initial_zonal_particles(prob, n, "iid", 0)
            rows.append(row(d, n, x, prob, "uniform"))
    rng = np.random.default_rng(0)
    for d in [16, 128]:
        n = NS[-1]
        centres = np.concatenate([np.eye(d)[:2], -np.eye(d)[:2]])
        x = centres[rng.integers(0, 4, n)] + 0.02 / np.sqrt(d) * rng.standard_normal((n, d))
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        rows.append(row(d, n, x, problem(d, 100.0), "4 clusters"))
    print("wrote", write_rows("zonal_particles", rows))


if __name__ == "__main__":
    main()
