"""The numbers of docs/high_dimension.md, "Particles in R^d" (about 5 minutes on 2 cores).

1. The representation error of n particles started at the quantiles of g_0 (uniform on
   S^{d-1}), and the sampling error of i.i.d. starts (mean and spread over 8 seeds): the exact
   1-D W2 between their theta-law and g_0, d in {3, 16, 128, 1024}, n in {250, 1000, 4000}.
2. Particles against the zonal density at d = 128 (the model of config.toml, beta = 1 and
   10): W2 of the theta-laws at t = 0, 1, 2 for quantile starts, n in {250, 1000, 4000}, beside
   the share of a particle's own term in its softmax at the uniform start,
   e^{beta b} / (e^{beta b} + (n - 1) E exp(beta b <x, y>)), E over y uniform on S^{d-1}.

Usage: OPENBLAS_NUM_THREADS=1 python runs/zonal_particles/measure.py
"""
from __future__ import annotations

import math
import tempfile
import time
from pathlib import Path

import numpy as np
from scipy import special

import spheredens as sd
from spheredens.compare import compare
from spheredens.config import load_config
from spheredens.particles import run_particles
from spheredens.problem import Problem
from spheredens.zonal_particles import (
    ZonalFrame,
    initial_representation_error,
    initial_zonal_particles,
)

HERE = Path(__file__).parent


def representation_table():
    print("| d | n | quantile W2 | i.i.d. W2 (8 seeds) |")
    print("|---:|---:|---:|---:|")
    for d in (3, 16, 128, 1024):
        axis = [float(i == 0) for i in range(d)]
        cfg = load_config(HERE / "config.toml").replace(**{"domain.d": d, "domain.axis": axis})
        problem = Problem.from_config(cfg)
        frame = ZonalFrame.of(problem)
        for n in (250, 1000, 4000):
            def error(init, seed):
                x, w = initial_zonal_particles(problem, n, init, seed)
                return initial_representation_error(problem, frame.polar_angle(x), w)
            iid = [error("iid", s) for s in range(8)]
            print(f"| {d} | {n} | {error('quantile', 0):.3g} | "
                  f"{np.mean(iid):.3g} +- {np.std(iid, ddof=1):.2g} |", flush=True)


def self_share(beta, b, d, n):
    """e^{c} / (e^{c} + (n - 1) E e^{c <x, y>}), c = beta b, y uniform on S^{d-1}:
    E e^{c <x, y>} = Gamma(d / 2) (2 / c)^{d/2 - 1} I_{d/2 - 1}(c)."""
    c, nu = beta * b, 0.5 * d - 1.0
    log_mean = special.gammaln(nu + 1) + nu * math.log(2 / c) + math.log(special.ive(nu, c)) + c
    return 1.0 / (1.0 + (n - 1) * math.exp(log_mean - c))


def particles_against_density():
    print("| beta | n | own share | W2 t = 0 | t = 1 | t = 2 | wall s |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for beta in (1.0, 10.0):
            cfg = load_config(HERE / "config.toml").replace(**{"model.beta": beta,
                                                               "time.snapshots": 3})
            density = sd.run(cfg, output=Path(tmp) / f"g{beta}.nc", progress=False)
            for n in (250, 1000, 4000):
                t0 = time.perf_counter()
                p = run_particles(cfg.replace(**{"particles.n": n}), progress=False)
                wall = time.perf_counter() - t0
                w2 = compare(density, [p])["w2"].values[0]
                print(f"| {beta:g} | {n} | {self_share(beta, 1.0, 128, n):.2g} | {w2[0]:.3g} | "
                      f"{w2[1]:.3g} | {w2[2]:.3g} | {wall:.0f} |", flush=True)


if __name__ == "__main__":
    representation_table()
    particles_against_density()
