"""The log-domain faces of ``lowrank_points`` on a concentrated density: peeling against the exact
sums over all cells (issue 16; the cost that stopped the two-atom study at beta >= 100).

Problem: the two-atom case (runs/sphere_two_atoms/base.toml, K not orthogonal) with a density of
two caps at +-u (u the top eigenvector of A = V B^T, where Pi_# rho_0 puts its atoms),
rho = e^{k (<x, u> - 1)} + 0.5 e^{k (<x, -u> - 1)} + floor, k = ``--k`` (default 200: caps of
width ~0.07 rad, like the study's at its W2 minimum at beta = 100), floor 1e-12 (a drained
tail). For each beta, mesh and level ``log_domain_below`` it times, in one run (the fastest of
3 single calls after a warm-up, exact sums once when they take long):

* the face velocity with peeling (the default) and with ``peel_levels = 0`` (exact log-sum-exp
  over all cells at every log-domain face);
* one spectral evaluation (``scaled_sums``: what every level of peeling costs);

with the share of the faces that are log-domain rows, the share that still took the full direct
sum after peeling, and the largest velocity difference between the two, relative to ||V||.

Usage: python benchmarks/bench_log_domain_peeling.py [--nlat 64 128 256] [--betas 100 300]
       [--levels 1e-6 1e-9] [--k 200]   (writes benchmarks/results/log_domain_peeling.json)
"""
from __future__ import annotations

import argparse
import time
import tomllib
from pathlib import Path

import numpy as np

import spheredens as sd
from spheredens.problem import Problem
from spheredens.schemes import make_scheme

from _common import fastest_call, stamp, write_rows

BASE = Path(__file__).resolve().parents[1] / "runs" / "sphere_two_atoms" / "base.toml"


def scheme(nlat: int, beta: float):
    data = tomllib.loads(BASE.read_text())
    data["model"]["beta"] = beta
    data["discretization"] = {"scheme": "fv", "nlat": nlat, "allow_underresolved": True}
    data.pop("output", None)
    cfg = sd.config_from_dict(data, base_dir=BASE.parent)
    return make_scheme(Problem.from_config(cfg), cfg.discretization)


def two_caps(points: np.ndarray, model, k: float, floor: float = 1e-12) -> np.ndarray:
    """The density of the module docstring at ``points``."""
    A = np.asarray(model.V) @ np.asarray(model.kernel.B).T
    u = np.linalg.eigh(0.5 * (A + A.T))[1][:, -1]
    c = points @ u
    return np.exp(k * (c - 1.0)) + 0.5 * np.exp(k * (-c - 1.0)) + floor


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nlat", type=int, nargs="+", default=[64, 128, 256])
    parser.add_argument("--betas", type=float, nargs="+", default=[100.0, 300.0])
    parser.add_argument("--levels", type=float, nargs="+", default=[1e-6, 1e-9])
    parser.add_argument("--k", type=float, default=200.0, help="concentration of the two caps")
    args = parser.parse_args()
    rows = []
    for beta in args.betas:
        for nlat in args.nlat:
            s = scheme(nlat, beta)
            ev = s.interaction
            rho = two_caps(s.grid.points, ev.model, args.k)
            spectral = fastest_call(lambda: ev.scaled_sums(rho * ev.weight), 3)
            for level in args.levels:
                ev.log_domain_below = level
                ev.peel_levels = 12
                peeled_s = fastest_call(lambda: ev.attention_average(rho), 3)
                peeled = ev.attention_average(rho)
                small, direct = ev.fallback_fraction, ev.direct_fraction
                ev.peel_levels = 0
                t = time.perf_counter()
                exact = ev.attention_average(rho)
                exact_s = time.perf_counter() - t
                row = {"beta": beta, "nlat": nlat, "cells": s.grid.n_cells, "faces": len(ev.targets), "k": args.k,
                       "log_domain_below": level, "log_domain_share": small, "direct_after_peeling_share": direct,
                       "spectral_ms": 1e3 * spectral, "peeled_ms": 1e3 * peeled_s, "exact_ms": 1e3 * exact_s,
                       "speed_up": exact_s / peeled_s, "peeled_over_spectral": peeled_s / spectral,
                       "max_dv_over_V": float(np.abs(peeled - exact).max() / ev.model.V_norm)}
                rows.append(row)
                print({k: (float(f"{v:.4g}") if isinstance(v, float) else v) for k, v in row.items()}, flush=True)
    path = write_rows("log_domain_peeling", [{**stamp(), **r} for r in rows])
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
