"""Why min W2 at beta = 300 does not converge on nlat = 128, 256, 512 (docs/concentration.md).

Three checks on the study's finite-volume runs (study.py must have run them):

1. **Cluster cores.** For the cluster at +u: its mass-weighted centre c, and the RMS angle
   from c of the mass within 0.1 rad of c (the core: 99.9% of the cluster's mass at t_min),
   at t = 10, 12, 14, 16, 17.5, on every mesh; also in cells of pi / nlat.
2. **The limiter.** nlat = 128 again with unlimited central slopes (the positivity scaling of
   the reconstruction kept, so rho >= 0 still): if the MC limiter's clipping at the cluster's
   peak set the cluster width, min W2 would move. The scheme's limiter ``minmod3(theta a, b,
   theta c)`` is replaced by its middle argument b, the central difference, *in this process
   only and for that run*; the package has no such option.
   File: ``cases/fv_nlat128_beta300_central.nc`` (resumed if partial).
3. **The velocity quadrature.** At nlat = 128, t = 15: the face velocities from the cell
   masses at the cell centres (what the scheme does) against those from 2 x 2 points per cell
   carrying the masses of the limited linear reconstruction, both by exact pruned log-sum-exp
   sums; the rho-weighted RMS of the difference in normal velocity, against that of the
   velocity itself.

Writes ``beta300_checks.json`` beside this script and prints the numbers.
Usage: .venv/bin/python runs/sphere_two_atoms/beta300_checks.py [--skip-central]
"""
from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import json
import tomllib

import numpy as np

import spheredens as sd
from spheredens.geometry import dataset_sphere_points, sphere_points_paired, tangent_project
from spheredens.interaction import pruned_logsumexp_sums, sphere_order
from spheredens.problem import Problem
from spheredens.schemes import make_scheme
from spheredens.schemes import _sphere_fv
from spheredens.targets import projection_target

import study  # noqa: E402  (beside this script)

BETA = 300.0
MESHES = (128, 256, 512)
TIMES = (10.0, 12.0, 14.0, 16.0, 17.5)
CORE = 0.1  # rad
CENTRAL_PATH = study.OUT / "fv_nlat128_beta300_central.nc"


def cores(u: np.ndarray) -> dict:
    out = {}
    for nlat in MESHES:
        ds = sd.open_run(study.case_path("fv", nlat, BETA, study.LOG_DOMAIN_BELOW))
        x = dataset_sphere_points(ds)
        side = x @ u > 0.0
        rows = []
        for t in TIMES:
            if t > float(ds["time"][-1]):
                continue
            m = (ds["rho"].sel(time=t).values * ds["weight"].values)[side]
            c = m @ x[side]
            c /= np.linalg.norm(c)
            angle = np.arccos(np.clip(x[side] @ c, -1.0, 1.0))
            core = angle < CORE
            width = float(np.sqrt(np.sum((m * angle**2)[core]) / m[core].sum()))
            rows.append({"t": t, "core_rms_width": width, "cells": width / (np.pi / nlat),
                         "core_mass_share": float(m[core].sum() / m.sum()),
                         "offset_from_u": float(np.arccos(np.clip(c @ u, -1.0, 1.0)))})
        out[nlat] = rows
    return out


def central_run() -> dict:
    data = tomllib.loads((study.HERE / "base.toml").read_text())
    data["model"]["beta"] = BETA
    data["discretization"] = {"scheme": "fv", "nlat": 128, "allow_underresolved": True,
                              "log_domain_below": study.LOG_DOMAIN_BELOW}
    t_end = 19.0
    data["time"] = {**data["time"], "t_end": t_end, "snapshots": int(round(study.SNAPSHOTS_PER_UNIT * t_end)) + 1}
    data["output"] = {"path": str(CENTRAL_PATH), "figure": False}
    cfg = sd.config_from_dict(data, base_dir=study.HERE)
    ds = sd.open_run(CENTRAL_PATH) if CENTRAL_PATH.exists() else None
    if ds is None or ds.attrs.get("run_status") != "complete":
        limiter = _sphere_fv.minmod3
        _sphere_fv.minmod3 = lambda a, central, c: central  # module docstring, check 2
        try:
            ds = sd.run(cfg, resume=CENTRAL_PATH.exists(), progress=False)
        finally:
            _sphere_fv.minmod3 = limiter
    w2 = study.exact_w2_curve(ds, projection_target(cfg))
    i = int(np.argmin(w2))
    return {"nlat": 128, "min_w2": float(w2[i]), "t_min": float(ds["time"][i]), "status": ds.attrs.get("run_status")}


def velocity_quadrature(nlat: int = 128, t: float = 15.0) -> dict:
    cfg = study.case_config("fv", nlat, BETA, study.LOG_DOMAIN_BELOW)
    problem = Problem.from_config(cfg)
    scheme = make_scheme(problem, cfg.discretization)
    model, g = problem.model, scheme.grid
    rho = sd.open_run(study.case_path("fv", nlat, BETA, study.LOG_DOMAIN_BELOW))["rho"].sel(time=t).values[None]
    s_lat, s_lon = scheme.slopes(rho)  # the scheme's own (MC) slopes
    points, masses = [], []
    lat0, lat1 = g.lat_bounds.T
    cos_sum = 2.0 * (np.cos(lat0 + 0.25 * (lat1 - lat0)) + np.cos(lat0 + 0.75 * (lat1 - lat0)))
    for fl in (0.25, 0.75):
        for fo in (0.25, 0.75):
            lat = np.where(g.is_cap, g.lat_c, lat0 + fl * (lat1 - lat0))
            lon = np.where(g.is_cap, g.lon_c, g.lon_c + (fo - 0.5) * g.dlon)
            value = np.where(g.is_cap, rho[0], rho[0] + s_lat[0] * (lat - g.lat_c) + s_lon[0] * (lon - g.lon_c))
            points.append(sphere_points_paired(np.degrees(lat), np.degrees(lon)))
            masses.append(g.area * np.where(g.is_cap, 0.25, np.cos(lat) / cos_sum) * np.clip(value, 0.0, None))
    q = model.kernel.query(g.face_point)

    def normal_velocity(src, mass):
        o = sphere_order(src)
        with np.errstate(divide="ignore"):
            z, n, _, _ = pruned_logsumexp_sums(q, src[o], np.log(mass[o]), src[o] @ model.V.T)
        return np.einsum("fd,fd->f", tangent_project(g.face_point, n / z[:, None]), g.face_normal)

    u_centres = normal_velocity(g.points, rho[0] * g.area)
    u_sub = normal_velocity(np.concatenate(points), np.concatenate(masses))
    r = 0.5 * (rho[0][g.face_left] + rho[0][g.face_right])
    rms = float(np.sqrt(np.sum(r * (u_centres - u_sub) ** 2) / r.sum()))
    return {"nlat": nlat, "t": t, "rho_weighted_rms_difference": rms,
            "rho_weighted_rms_velocity": float(np.sqrt(np.sum(r * u_centres**2) / r.sum())),
            "max_abs_difference": float(np.abs(u_centres - u_sub).max())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--skip-central", action="store_true", help="skip check 2 (a 10-minute run)")
    args = parser.parse_args()
    u = projection_target(study.case_config("fv", 128, BETA, study.LOG_DOMAIN_BELOW)).points[0]
    result = {"cores": cores(u), "velocity_quadrature": velocity_quadrature()}
    if not args.skip_central:
        result["central_slopes"] = central_run()
    (study.HERE / "beta300_checks.json").write_text(json.dumps(result, indent=1))
    for nlat, rows in result["cores"].items():
        print(f"nlat {nlat}: core RMS width " + ", ".join(f"{r['core_rms_width']:.4f} ({r['cells']:.2f} cells) at "
                                                        f"t = {r['t']:g}" for r in rows))
    v = result["velocity_quadrature"]
    print(f"velocity quadrature (nlat {v['nlat']}, t = {v['t']:g}): rho-weighted RMS difference "
          f"{v['rho_weighted_rms_difference']:.3g} against RMS velocity {v['rho_weighted_rms_velocity']:.3g}")
    if "central_slopes" in result:
        c = result["central_slopes"]
        print(f"central slopes, nlat 128: min W2 {c['min_w2']:.5f} at t = {c['t_min']:g} ({c['status']})")


if __name__ == "__main__":
    main()
