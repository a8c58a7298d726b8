"""The sphere's ``log_sl`` started from a state of the hybrid (hybrid.py) on the plateau: do its
error-controlled steps grow there, where ``fv``'s CFL steps are the hybrid's cost?

The state: the hybrid's mesh part as log rho, piecewise constant on its ring cells, moved onto
``log_sl``'s cells by their log-domain moments (``_log_moments``), and each particle an atom in
the cell it is in (``_atom``), merged (``merge_moments``). Then ``log_sl``'s steps, retried at
half the step when refused (as ``simulate``), for at most MAX_STEPS steps; each attempt prints
the largest change between predictor and corrector over the cells the control follows, the cell
it is in, that cell's ell (its log mass over h^2; the largest ell beside it) and its angle from
the nearest particle.

Usage (from runs/sphere_two_atoms/lagrangian):
  ../../../.venv/bin/python log_sl_from_hybrid.py [RUN] [T0] [NLAT] [TOLERANCE] [MAX_STEPS]
  (defaults: hy128_t12_d10_s2_m0.0005 40 64 1e-3 8; RUN names a folder of cases/hybrid)
"""

from __future__ import annotations

import study  # beside this script; first (puts ../ on sys.path)

# isort: split
import sys
import time
import tomllib

import hybrid
import numpy as np
import xarray as xr

import spheredens as sd
from spheredens.grids import RingMesh
from spheredens.schemes._circle_log_sl import _EDGE, LOG_FLOOR
from spheredens.schemes._sphere_log_sl import _log_total, merge_moments


def log_sl_scheme(nlat: int, tolerance: float):
    with xr.open_dataset(study.EARLY / "fv_nlat128_beta300.nc") as ds:
        data = tomllib.loads(ds.attrs["config"])
    data["output"] = {"path": "unused.nc", "figure": False}
    data["discretization"] = {"scheme": "log_sl", "nlat": nlat, "tolerance": tolerance}
    config = sd.config_from_dict(data, base_dir=study.HERE.parent)
    return sd.make_scheme(sd.Problem.from_config(config), config.discretization)


def state_from_hybrid(
    scheme, mesh: RingMesh, rho: np.ndarray, x: np.ndarray, log_m: np.ndarray
) -> np.ndarray:
    with np.errstate(divide="ignore"):
        log_rho = np.log(rho)

    def log_f(points):
        lat = np.arcsin(np.clip(points[..., 2], -1.0, 1.0))
        lon = np.arctan2(points[..., 1], points[..., 0])
        return log_rho[mesh.locate(lat.ravel(), lon.ravel())].reshape(lat.shape)

    parts = [scheme._log_moments(log_f)]
    for p, m in zip(x, log_m):
        log_a, *moments = scheme._atom(p)
        parts.append((log_a + m, *moments))
    log_mass, a, b, va, vb = merge_moments(parts)
    log_mass = log_mass - _log_total(log_mass)
    ell = np.maximum(log_mass - scheme.log_area, LOG_FLOOR)
    edge = 0.5 * _EDGE
    return np.stack([ell, np.clip(a, -edge, edge), np.clip(b, -edge, edge), va, vb])[None]


def main() -> None:
    args = sys.argv[1:]
    run = args[0] if args else "hy128_t12_d10_s2_m0.0005"
    t = float(args[1]) if len(args) > 1 else 40.0
    nlat = int(args[2]) if len(args) > 2 else 64
    tolerance = float(args[3]) if len(args) > 3 else 1e-3
    max_steps = int(args[4]) if len(args) > 4 else 8
    s = np.load(hybrid.OUT / run / f"t{t:08.3f}.npz")
    scheme = log_sl_scheme(nlat, tolerance)
    mesh = hybrid.run_mesh(run)
    state = state_from_hybrid(scheme, mesh, s["rho"], s["x"], s["log_m"])
    x = s["x"]
    record = scheme.record_error

    def report(change, relevant, dt, sizing=None):
        c = np.where(relevant, change, 0.0)[0]
        i = np.unravel_index(np.argmax(c), c.shape)
        p = scheme.centroid_points(state)[0].reshape(c.shape + (3,))[i]  # world frame
        angle = np.degrees(np.arccos(np.clip(x @ p, -1.0, 1.0))).min()
        print(
            f"  dt {dt:.3g}: largest change {c.max():.3g} at cell {tuple(int(k) for k in i)}, "
            f"ell {state[0, 0][i]:.4g} (largest {state[0, 0].max():.4g}), {angle:.1f} degrees "
            f"from the nearest particle; {(c > 10 * tolerance).sum()} cells above "
            f"{10 * tolerance:g}",
            flush=True,
        )
        return record(change, relevant, dt, sizing)

    scheme.record_error = report
    clock = time.perf_counter()
    for step in range(max_steps):
        dt = scheme.stable_dt(0.4, scheme.rhs(state, t))
        for _ in range(9):
            new = scheme.advance(state, t, dt)
            if scheme.step_ok(state, new):
                break
            dt *= 0.5
        state, t = new, t + dt
        print(
            f"step {step + 1}: t = {t:.6g}, dt = {dt:.3g}, wall {time.perf_counter() - clock:.0f} s"
        )


if __name__ == "__main__":
    main()
