"""Finite volumes against spherical harmonics on S^2: cost per unit model time and cost to reach
a given W2 error (issue 7, acceptance 5; also the refinement study of acceptance 4).

Problem: runs/fv_vs_spectral/config.toml (sa, beta = 2, B = 1.3 R, two von Mises-Fisher
bumps, T = 1). Reference: sh_spectral at lmax = 95 (self-convergence error ~1e-8).
For fv at nlat = 32, 64, 128 and sh_spectral at lmax = 15, 31, 63 it reports the number of
cells / grid points, steps, wall time of the integration alone (no snapshots, no diagnostics)
per unit model time, and the W2 error at T: both densities averaged over the cells of a common
ring mesh (nlat = 32: exactly for the finite volumes, whose meshes nest in it; 4 x 4 Gauss
points per cell for the smooth spectral densities), masses at the cell centres, exact W2
between the two atomic measures by POT, and the L1 error of those cell averages.

Usage: python benchmarks/bench_sphere_fv.py  (writes benchmarks/results/sphere_fv.json)
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

import spheredens as sd
from spheredens.transport import w2_sphere
from spheredens.grids import RingMesh

from _common import stamp, write_rows

CONFIG = Path(__file__).resolve().parents[1] / "runs" / "fv_vs_spectral" / "config.toml"
CASES = [("fv", {"nlat": n}) for n in (32, 64, 128)] + [
    ("sh_spectral", {"lmax": l}) for l in (15, 31, 63)
]
EVAL_NLAT = 32


def configured(scheme: str, res: dict):
    cfg = sd.load_config(CONFIG)
    disc = {"scheme": scheme, **res}
    table = cfg.to_dict()
    table["discretization"] = disc
    table["time"] = {"t_end": cfg.time.t_end, "times": [0.0, cfg.time.t_end]}
    table.pop("output", None)
    return sd.config_from_dict(table, base_dir=CONFIG.parent)


def solve(scheme_name: str, res: dict):
    """(final Dataset, seconds of integration, steps, number of unknowns, T)."""
    cfg = configured(scheme_name, res)
    problem = sd.Problem.from_config(cfg)
    scheme = sd.make_scheme(problem, cfg.discretization)
    t0 = time.perf_counter()
    result = sd.simulate(scheme, cfg.time, [])
    seconds = time.perf_counter() - t0
    recorder = sd.Recorder(problem, scheme, cfg)
    recorder.observe(cfg.time.t_end, result.state)
    recorder.finish(result)
    ds = recorder.dataset()
    size = int(np.prod(scheme.grid.shape))
    return ds, seconds, result.n_steps, size, cfg.time.t_end


def cell_averages(ds, mesh: RingMesh) -> np.ndarray:
    """Averages of the run's final density over the cells of ``mesh``."""
    if "cell" in ds["rho"].dims:
        return mesh.remap_from(RingMesh(int(ds.sizes["ring"])), ds["rho"].values[-1])
    return mesh.cell_averages(ds.sd.density_function(-1))


def main() -> None:
    base = stamp()
    mesh = RingMesh(EVAL_NLAT)
    ref_avg = cell_averages(solve("sh_spectral", {"lmax": 95})[0], mesh)
    rows = []
    for scheme, res in CASES:
        ds, seconds, steps, size, t_end = solve(scheme, res)
        avg = cell_averages(ds, mesh)
        row = {
            **base,
            "scheme": scheme,
            **res,
            "unknowns": size,
            "steps": steps,
            "wall_s_per_unit_t": seconds / t_end,
            "w2_error": w2_sphere(
                mesh.points,
                np.clip(avg, 0, None) * mesh.area,
                mesh.points,
                np.clip(ref_avg, 0, None) * mesh.area,
            ),
            "l1_error": float(np.sum(np.abs(avg - ref_avg) * mesh.area)),
            "min_rho": float(np.min(avg)),
        }
        rows.append(row)
        print(
            f"{scheme:12s} {res} unknowns {size:6d} steps {steps:5d} "
            f"wall/unit t {row['wall_s_per_unit_t']:8.3f} s  W2 {row['w2_error']:.3e}  "
            f"L1 {row['l1_error']:.3e}",
            flush=True,
        )
    print("wrote", write_rows("sphere_fv", rows))


if __name__ == "__main__":
    main()
