"""Density solver versus particles: W2 rates and the cost of a given W2 accuracy.

Circle: sa, example-C matrices, beta = 1, rho_0 vMF(kappa = 2), t = 2. Reference density:
`fourier` n = 512, cfl 0.05. Sphere: sa, beta = 1, V general, rho_0 a vMF mixture, t = 1;
reference `sh_spectral` lmax = 63.

Reports
- W2(reference, particles) at the final time against n for i.i.d. particles (mean over seeds),
  the fitted slope of log W2 against log n, and the same for quantile (circle) / quasi-uniform
  (sphere) particles;
- the W2 error of the density solver itself (fv on the circle at n = 64..1024; sh_spectral at
  lmax = 15, 31 on the sphere) against the reference, with its wall time;
- for target accuracies, the cheapest run of each method reaching it and the cost ratio.

Usage: python benchmarks/bench_particles.py [--quick]  (writes benchmarks/results/particles.json)
"""
from __future__ import annotations

import sys
import time

import numpy as np

import spheredens as sd
from spheredens.compare import compare
from spheredens.config import config_from_dict
from spheredens.particles import run_particles

from _common import stamp, write_rows

QUICK = "--quick" in sys.argv
CIRCLE = {"model": {"name": "sa", "beta": 1.0, "K": [[1.75, 0.866025], [0.433013, 2.5]],
                    "V": [[1.0, 0.0], [0.0, 0.5]]},
          "initial": {"name": "von_mises_fisher", "means": [[0.6, 0.8]], "kappas": [2.0]},
          "time": {"t_end": 2.0, "times": [0.0, 2.0]}}
SPHERE = {"model": {"name": "sa", "beta": 1.0, "V": [[1, 0.2, 0], [0.1, 0.7, -0.3], [0, 0.4, 0.5]]},
          "domain": {"name": "sphere"},
          "initial": {"name": "von_mises_fisher", "means": [[0.0, 0.6, 0.8], [1.0, 0.0, 0.0]],
                      "kappas": [3.0, 2.0], "weights": [0.6, 0.4]},
          "time": {"t_end": 1.0, "times": [0.0, 1.0]}}


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def density(base, disc, cfl=0.4):
    cfg = config_from_dict({**base, "discretization": disc, "time": {**base["time"], "cfl": cfl}})
    return timed(lambda: sd.run(cfg, progress=False))


def particle_w2(reference, base, n, init, seed, n_points):
    cfg = config_from_dict({**base, "particles": {"n": int(n), "initialization": init, "seed": seed,
                                                  "dt": 0.1}})
    p, seconds = timed(lambda: run_particles(cfg))
    return float(compare(reference, p, n_points=n_points)["w2"].values[0, -1]), seconds


def study(label, base, reference, ns, seeds, deterministic, solver_runs, n_points):
    rows = []
    for init in ("iid", deterministic):
        for n in ns:
            runs = [particle_w2(reference, base, n, init, s, n_points)
                    for s in (seeds(n) if init == "iid" else [0])]
            w2 = float(np.mean([r[0] for r in runs]))
            cost = float(np.mean([r[1] for r in runs]))
            rows.append({"domain": label, "method": f"particles_{init}", "size": int(n),
                         "w2": w2, "seconds": cost, "seeds": len(runs)})
            print(f"{label:6s} particles {init:13s} n = {n:6d}  W2 = {w2:.3e}  {cost:7.2f} s", flush=True)
    for disc in solver_runs:
        ds, seconds = density(base, disc)
        w2 = density_error(ds, reference)
        size = disc.get("n", disc.get("lmax"))
        rows.append({"domain": label, "method": f"density_{disc['scheme']}", "size": int(size),
                     "w2": w2, "seconds": seconds, "seeds": 1})
        print(f"{label:6s} density {disc['scheme']:13s} size {size:6d}  W2 = {w2:.3e}  {seconds:7.2f} s",
              flush=True)
    for init in ("iid", deterministic):
        sub = [r for r in rows if r["method"] == f"particles_{init}"]
        slope = np.polyfit(np.log([r["size"] for r in sub]), np.log([r["w2"] for r in sub]), 1)[0]
        print(f"{label:6s} slope of log W2 vs log n, {init}: {slope:.3f}")
        for r in sub:
            r["slope"] = float(slope)
    return rows


def density_error(ds, reference):
    """W2 between a density run and the reference at the final time, without representation
    offsets: on the circle both piecewise-constant densities as 2^16 sub-atoms each (exact W2 of
    the two densities); on the sphere both as atoms at the points of the coarser Gauss grid (the
    reference evaluated there from its coefficients)."""
    from spheredens.grids import GaussGrid, OffGridSynthesis
    from spheredens.transport import circle_density_atoms, w2_circle, w2_sphere

    if ds.attrs["domain"] == "circle":
        a = circle_density_atoms(ds["theta"].values, ds["weight"].values, ds["rho"].values[-1])
        b = circle_density_atoms(reference["theta"].values, reference["weight"].values,
                                 reference["rho"].values[-1])
        return w2_circle(a[0], a[1], b[0], b[1])
    grid, fine = GaussGrid(int(ds.attrs["lmax"])), GaussGrid(int(reference.attrs["lmax"]))
    ref_here = OffGridSynthesis(fine, grid.points).values(fine.analys(reference["rho"].values[-1]))
    pts = grid.points.reshape(-1, 3)
    w = grid.weight.reshape(-1)
    a = np.clip(ds["rho"].values[-1].reshape(-1), 0, None) * w
    b = np.clip(ref_here, 0, None) * w
    return w2_sphere(pts, a, pts, b)


def cost_table(rows, targets):
    out = []
    for domain in sorted({r["domain"] for r in rows}):
        for target in targets[domain]:
            best = {}
            for method in sorted({r["method"] for r in rows if r["domain"] == domain}):
                ok = [r for r in rows if r["domain"] == domain and r["method"] == method and r["w2"] <= target]
                best[method] = min(ok, key=lambda r: r["seconds"]) if ok else None
            dens = [v for k, v in best.items() if k.startswith("density") and v]
            for k, v in best.items():
                ratio = (v["seconds"] / dens[0]["seconds"]) if (v and dens) else float("nan")
                out.append({"domain": domain, "target_w2": target, "method": k,
                            "size": v["size"] if v else None, "seconds": v["seconds"] if v else None,
                            "cost_over_density": ratio})
                print(f"{domain:6s} W2 <= {target:.0e}: {k:22s} "
                      + (f"size {v['size']:6d}  {v['seconds']:8.2f} s  x{ratio:8.1f} the density solver"
                         if v else "not reached"))
    return out


def main() -> None:
    base = stamp()
    rows = []
    ref_c, _ = density(CIRCLE, {"scheme": "fourier", "n": 512}, cfl=0.05)
    rows += study("circle", CIRCLE, ref_c, [100, 300, 1000, 3000] + ([] if QUICK else [10000]),
                  lambda n: range(8 if n < 1000 else 4 if n < 10000 else 1), "quantile",
                  [{"scheme": "fv", "n": n} for n in (64, 128, 256, 512, 1024)], 4096)
    ref_s, _ = density(SPHERE, {"scheme": "sh_spectral", "lmax": 63})
    rows += study("sphere", SPHERE, ref_s, [100, 300, 1000] + ([] if QUICK else [3000]),
                  lambda n: range(4 if n < 1000 else 2 if n < 3000 else 1), "quasi_uniform",
                  [{"scheme": "sh_spectral", "lmax": l} for l in (15, 31)], 4096)
    table = cost_table(rows, {"circle": [1e-2, 3e-3], "sphere": [1e-1, 5e-2]})
    write_rows("particles", [{**base, **r} for r in rows] + [{**base, **r} for r in table])


if __name__ == "__main__":
    main()
