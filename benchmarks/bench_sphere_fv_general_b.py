"""Finite volumes on S^2 with a general B: the face velocity by lowrank_points against direct
quadrature and against the Funk-Hecke face velocity of a rotation B (issue 16, item 2).

Problem: the two-atom case (runs/sphere_two_atoms/base.toml: K not orthogonal, condition number
2.2) at its initial density, beta = 30, 100 and 300, meshes nlat = 32, 64, 128, 256. For each it
times, in one run and in alternation (the fastest of 3 single calls after a warm-up):

* the fv right-hand side with ``lowrank_points`` (``auto``);
* the velocity alone with ``lowrank_points``, and with ``direct`` (log-sum-exp over cells x
  faces; only while cells x faces <= 2e9, one call);
* the fv right-hand side of the same mesh with ``funk_hecke`` for B = |B|_2 R (R a rotation:
  the zonal case at the same largest kappa), the cost of the zonal case;

and the largest difference between the lowrank and direct velocities, relative to ||V||.

Usage: python benchmarks/bench_sphere_fv_general_b.py [--nlat 32 64 ...] [--betas 30 ...]
       (writes benchmarks/results/sphere_fv_general_b.json)
"""
from __future__ import annotations

import argparse
import time
import tomllib
from pathlib import Path

import numpy as np
from scipy.spatial.transform import Rotation

import spheredens as sd
from spheredens.interaction import DirectQuadrature
from spheredens.problem import Problem
from spheredens.schemes import make_scheme

from _common import fastest_call, stamp, write_rows

BASE = Path(__file__).resolve().parents[1] / "runs" / "sphere_two_atoms" / "base.toml"
DIRECT_MAX_PAIRS = 2e9


def scheme(nlat: int, beta: float, rotation: bool = False):
    data = tomllib.loads(BASE.read_text())
    data["model"]["beta"] = beta
    if rotation:  # B = |B|_2 R: the zonal kernel of the same largest kappa
        K = np.asarray(data["model"]["K"])
        data["model"]["K"] = (np.linalg.norm(K, 2) * Rotation.from_rotvec([0.3, -0.2, 0.5]).as_matrix()).tolist()
    data["discretization"] = {"scheme": "fv", "nlat": nlat, "allow_underresolved": True}
    data.pop("output", None)
    cfg = sd.config_from_dict(data, base_dir=BASE.parent)
    problem = Problem.from_config(cfg)
    s = make_scheme(problem, cfg.discretization)
    return s, s.sample(problem.initial)[None]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nlat", type=int, nargs="+", default=[32, 64, 128, 256])
    parser.add_argument("--betas", type=float, nargs="+", default=[30.0, 100.0, 300.0])
    args = parser.parse_args()
    rows = []
    for beta in args.betas:
        for nlat in args.nlat:
            s, rho = scheme(nlat, beta)
            zs, zrho = scheme(nlat, beta, rotation=True)
            ev = s.interaction
            rhs = fastest_call(lambda: s.rhs(rho, 0.0), 3)
            vel = fastest_call(lambda: ev.velocity(rho), 3)
            zonal = fastest_call(lambda: zs.rhs(zrho, 0.0), 3)
            m = s.grid
            pairs = m.n_cells * len(m.face_point)
            row = {"beta": beta, "nlat": nlat, "cells": m.n_cells, "faces": len(m.face_point),
                   "evaluator": ev.name, **ev.attributes(), "rhs_ms": 1e3 * rhs, "velocity_ms": 1e3 * vel,
                   "zonal_evaluator": zs.interaction.name, "zonal_rhs_ms": 1e3 * zonal,
                   "rhs_over_zonal": rhs / zonal, "fallback_fraction": ev.fallback_fraction}
            if pairs <= DIRECT_MAX_PAIRS:
                direct = DirectQuadrature(ev.model, m.points, m.area, m.face_point)
                t = time.perf_counter()
                want = direct.vectors(rho)
                row["direct_ms"] = 1e3 * (time.perf_counter() - t)
                row["speed_up"] = row["direct_ms"] / row["velocity_ms"]
                row["max_dv_over_V"] = float(np.abs(ev.vectors(rho) - want).max() / ev.model.V_norm)
            rows.append(row)
            print({k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()}, flush=True)
    path = write_rows("sphere_fv_general_b", [{**stamp(), **r} for r in rows])
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
