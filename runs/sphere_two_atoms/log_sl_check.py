"""A first check of the sphere's ``log_sl`` on the two-atom case (base.toml), against the
finite-volume study: W2 to Pi_# rho_0 every 0.25, each cell's mass an atom at its centroid
(exact distance to the two atoms by a sort, as study.py), with the step count and wall time.

Usage: .venv/bin/python runs/sphere_two_atoms/log_sl_check.py BETA NLAT TOLERANCE T_END [POLE]
POLE: ``auto`` (default) or three numbers, e.g. ``0,0,1``.

Measured (2 cores, another process beside it): beta = 30, nlat = 32, tolerance 1e-2, pole auto:
min W2 0.20212 at t = 8.5 (fv, nlat = 128: 0.20478 at t = 8.5), 295 steps and 178 s to t = 8.5;
with the pole at e_3 the curve is the same to 1e-4 (0.34616 against 0.34613 at t = 5) but the
steps stay near 0.013 (the flow crosses that pole; docs/numerics.md). beta = 300, tolerance 1e-2:
nlat = 32 stops (dt_collapse) at t = 10.13, W2 0.105; nlat = 64 stalls at t = 12, W2 0.060
(velocity switches in the tails, not the clusters' width: log_sl_diagnose.py and docs/numerics.md,
"Velocity switches in the tails").
"""
from __future__ import annotations

import sys
import time
import tomllib
from pathlib import Path

import numpy as np

import spheredens as sd
from spheredens.simulate import Observer
from spheredens.targets import projection_target
from spheredens.transport import w2_to_antipodal_atoms

HERE = Path(__file__).resolve().parent


def main() -> None:
    beta, nlat, tolerance, t_end = float(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
    pole = sys.argv[5] if len(sys.argv) > 5 else "auto"
    data = tomllib.loads((HERE / "base.toml").read_text())
    data["model"]["beta"] = beta
    data["discretization"] = {"scheme": "log_sl", "nlat": nlat, "tolerance": tolerance, "allow_underresolved": True,
                              "pole": pole if pole == "auto" else [float(c) for c in pole.split(",")]}
    data["time"] = {"t_end": t_end, "snapshots": int(round(t_end / 0.25)) + 1}
    cfg = sd.config_from_dict(data, base_dir=HERE)
    target = projection_target(cfg)
    u, m_plus = target.points[0], float(target.masses[0])
    scheme = sd.make_scheme(sd.Problem.from_config(cfg), cfg.discretization)

    class Report(Observer):
        def __init__(self) -> None:
            self.clock = time.perf_counter()

        def observe(self, t: float, state: np.ndarray) -> None:
            points = scheme.centroid_points(state)[0]
            ell = state[0, 0].reshape(-1)
            w2 = w2_to_antipodal_atoms(points, np.exp(ell - ell.max()), u, m_plus)
            print(f"t = {t:.2f}  W2 = {w2:.5f}  wall {time.perf_counter() - self.clock:.0f} s", flush=True)

    result = sd.simulate(scheme, cfg.time, [Report()])
    print(f"{result.n_steps} steps, {result.retried_steps} retried; mass - 1 = {scheme.masses(result.state)[0] - 1:.1e}; "
          f"stopped: {result.stop_reason} at t = {result.t:g} ({result.message})")


if __name__ == "__main__":
    main()
