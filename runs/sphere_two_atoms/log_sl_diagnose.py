"""Where the sphere's ``log_sl`` spends its error budget on the two-atom case (base.toml).

Per snapshot: W2 to Pi_# rho_0 (each cell's mass at its centroid), the steps so far, the
current step, how many cells are atoms (and their share of the mass), the deepest log rho, and
the three steps of the interval with the largest predictor-corrector difference: (dt, error,
ring, column) of the cell where it was, with that cell's depth below the largest cell and the
logit difference beta (<B^T x, u> - <B^T x, -u>) of the two atoms at its centroid (a sign change
between neighbours is a switch of the attention from one cluster to the other).

Usage:
.venv/bin/python runs/sphere_two_atoms/log_sl_diagnose.py BETA NLAT TOLERANCE T_END [EVERY [POLE]]
(POLE: auto, or 0, 1, 2 for the eigenvector of A = V B^T with the largest, middle, smallest
eigenvalue)

Measured (docs/numerics.md, "Velocity switches in the tails"): beta = 300, tolerance 1e-2.
nlat = 32: the largest differences sit in the polar rings 0-3 up to t ~ 8, then in ring 5 at
cells 13-20 e-folds down where the logit difference changes sign; steps 0.008 at t = 10.
nlat = 64: all in the polar ring 0 (18-24 e-folds down); steps 0.06-0.25 to t = 10.5, then
0.036 at t = 11.5 and 0.005 at t = 12.
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


def pole_vector(data: dict, which: str) -> object:
    """``auto``, or the eigenvector of the symmetric A = V B^T with the ``which``-th largest
    eigenvalue (0: the attractors +-u, 1: the saddles, 2: the repellers, as ``auto``)."""
    if which == "auto":
        return "auto"
    B = np.asarray(data["model"]["Q"]).T @ np.asarray(data["model"]["K"])
    A = np.asarray(data["model"]["V"]) @ B.T
    values, vectors = np.linalg.eigh(0.5 * (A + A.T))
    return vectors[:, np.argsort(-values)[int(which)]].tolist()


def main() -> None:
    beta, nlat, tolerance, t_end = (float(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]),
                                    float(sys.argv[4]))
    every = float(sys.argv[5]) if len(sys.argv) > 5 else 0.5
    data = tomllib.loads((HERE / "base.toml").read_text())
    data["model"]["beta"] = beta
    data["discretization"] = {"scheme": "log_sl", "nlat": nlat, "tolerance": tolerance,
                              "allow_underresolved": True}
    if len(sys.argv) > 6:  # the grid's pole: "auto", or the eigenvector of A = V B^T of rank k
        data["discretization"]["pole"] = pole_vector(data, sys.argv[6])
    data["time"] = {"t_end": t_end, "snapshots": int(round(t_end / every)) + 1}
    cfg = sd.config_from_dict(data, base_dir=HERE)
    target = projection_target(cfg)
    u, m_plus = target.points[0], float(target.masses[0])
    scheme = sd.make_scheme(sd.Problem.from_config(cfg), cfg.discretization)
    B = np.asarray(scheme.model.kernel.B)
    steps: list[tuple[float, float, int, int]] = []
    record = scheme.record_error

    def recorded(change, relevant, dt):
        worst = np.where(relevant, change, 0.0)[0]
        i, j = np.unravel_index(int(np.argmax(worst)), worst.shape)
        steps.append((dt, float(worst.max()), int(i), int(j)))
        record(change, relevant, dt)

    scheme.record_error = recorded

    class Report(Observer):
        def __init__(self) -> None:
            self.clock = time.perf_counter()
            self.count = 0

        def observe(self, t: float, state: np.ndarray) -> None:
            self.count += len(steps)
            points = scheme.centroid_points(state)[0]
            ell = state[0, 0].reshape(-1)
            masses = np.exp(ell - ell.max())
            w2 = w2_to_antipodal_atoms(points, masses, u, m_plus)
            narrow = scheme.narrow_cells(state[0]).reshape(-1)
            share = masses[narrow].sum() / masses.sum()
            print(f"t = {t:.2f}  W2 = {w2:.5f}  steps {self.count}  dt {scheme._last_dt:.3g}  "
                  f"atoms {int(narrow.sum())} ({share:.3f} of the mass)  min log rho - max "
                  f"{ell.min() - ell.max():.0f}  wall {time.perf_counter() - self.clock:.0f} s",
                  flush=True)
            for dt, error, i, j in sorted(steps, key=lambda r: -r[1])[:3]:
                x = points.reshape(scheme.grid.nlat, scheme.grid.nlon, 3)[i, j]
                depth = ell.max() - state[0, 0, i, j]
                logit = 2.0 * beta * float((B.T @ x) @ u)
                print(f"    dt {dt:.3g}  error {error:.2g}  cell ({i}, {j})  depth {depth:.1f}  "
                      f"logit difference {logit:+.1f}", flush=True)
            steps.clear()

    result = sd.simulate(scheme, cfg.time, [Report()])
    print(f"{result.n_steps} steps, {result.retried_steps} retried; stopped: "
          f"{result.stop_reason} at t = {result.t:g} ({result.message})")


if __name__ == "__main__":
    main()
