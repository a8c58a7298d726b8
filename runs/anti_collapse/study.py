"""The anti-collapse study (issue 8): densities and particles of usa_av for the kernels none,
rope, rope_general and prefix on S^2 and S^1, beta = 1, T = 20.

For every configuration here (``*.toml``) it runs (or resumes / reuses) the density, the labelled
particle runs with n = 64, 128, 256 and seeds 0..3 (under ``particles/``), compares them, and
writes ``summary.json``, ``summary.md`` (the table of docs/anti_collapse.md) and the figures:
``<case>.png`` (marginal density), ``<case>_slices.png`` (slice modes over xi, energy of the density
and of the n = 256 particle runs, collapse measures) and ``energy.png`` (all cases).

Agreement check (acceptance 5): at T = 20, the W2 distance between the density's marginal and the
n = 256 particle runs is compared with the sampling error measured by the ensemble: the W2
distances between the particle runs of different seeds. The density, the mean-field limit, should
be no farther from the runs than they are from each other.

Usage: .venv/bin/python runs/anti_collapse/study.py [--quick]   (--quick: seeds 0..1, n = 64 only)
"""
from __future__ import annotations

import itertools
import json
import sys
from pathlib import Path

import numpy as np

import spheredens as sd
from spheredens.compare import compare
from spheredens.geometry import circle_angle
from spheredens.io import open_particles
from spheredens.particles import auxiliary_particle_energy, run_particles
from spheredens.plot import plot_run, plot_slices, save_figure
from spheredens.transport import w2_circle, w2_sphere

HERE = Path(__file__).resolve().parent
SIZES = (64, 128, 256)
SEEDS = (0, 1, 2, 3)


def density(cfg_path: Path):
    cfg = sd.load_config(cfg_path)
    path = cfg.output_path()
    if path.exists():
        ds = sd.open_run(path)
        if ds.attrs.get("run_status") == "complete":
            return cfg, ds
    return cfg, sd.run(cfg, resume=path.exists(), progress=False)


def particles(cfg, name: str, n: int, seed: int):
    out = HERE / "particles" / f"{name}_n{n}_s{seed}.nc"
    if out.exists():
        ds = open_particles(out)
        if ds.attrs.get("run_status") == "complete":
            return ds
    return run_particles(cfg.replace(**{"particles.n": n}), seed=seed, output=out, progress=False,
                         resume=out.exists())


def particle_energy(cfg, p) -> np.ndarray:
    model = cfg.model.build()
    w, s = p["particle_weight"].values, p["slice"].values
    return np.array([auxiliary_particle_energy(model, x, w, s) for x in p["position"].values])


def w2_runs(a, b, domain: str) -> float:
    """W2 between the last snapshots of two particle runs (all particles, their weights)."""
    xa, xb = a["position"].values[-1], b["position"].values[-1]
    wa, wb = a["particle_weight"].values, b["particle_weight"].values
    if domain == "circle":
        return w2_circle(circle_angle(xa), wa, circle_angle(xb), wb)
    return w2_sphere(xa, wa, xb, wb)


def main(quick: bool = False) -> None:
    sizes, seeds = ((64,), (0, 1)) if quick else (SIZES, SEEDS)
    summary = []
    energy_curves = {}
    for cfg_path in sorted(HERE.glob("*.toml")):
        name = cfg_path.stem
        cfg, ds = density(cfg_path)
        domain = cfg.domain.name
        plot_run(ds, HERE / f"{name}.png")
        row = {"case": name, "kernel": cfg.model.auxiliary.name, "domain": domain,
               "slices": int(ds.sizes["xi"]),
               "w2_dirac_T": float(ds["marginal_w2_dirac"].values[-1]),
               "w2_dirac_0": float(ds["marginal_w2_dirac"].values[0]),
               "orbit_distance_T": float(ds["orbit_distance"].values[-1]),
               "energy_0": float(ds["energy"].values[0]), "energy_T": float(ds["energy"].values[-1]),
               "energy_min_increment": float(np.diff(ds["energy"].values).min())}
        curves = []
        for n in sizes:
            runs = [particles(cfg, name, n, s) for s in seeds]
            cmp = compare(ds.isel(time=[-1]), runs)  # T = 20 only (W2 on the circle uses 65k atoms)
            w2_T = cmp["w2"].values[:, -1]
            between = [w2_runs(a, b, domain) for a, b in itertools.combinations(runs, 2)]
            row[f"n{n}"] = {"w2_density_particles_mean": float(w2_T.mean()),
                            "w2_density_particles_max": float(w2_T.max()),
                            "w2_between_runs_mean": float(np.mean(between)),
                            "w2_slice_mean": float(np.nanmean(cmp["w2_slice"].values[:, -1]))}
            if n == sizes[-1]:
                curves = [(f"particles n = {n}, seed {s}", r["time"].values, particle_energy(cfg, r))
                          for s, r in zip(seeds, runs)]
            print(f"{name:24s} n = {n:4d}: W2(density, particles) at T = {w2_T.mean():.3f} "
                  f"(max {w2_T.max():.3f}); between runs {np.mean(between):.3f}", flush=True)
        plot_slices(ds, HERE / f"{name}_slices.png", particles=curves)
        energy_curves[name] = (ds["time"].values, ds["energy"].values)
        summary.append(row)
    (HERE / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    lines = ["| case | W2 marginal to nearest Dirac, t = 0 -> 20 | orbit distance at 20 | E_h 0 -> 20 "
             "| W2(density, particles n = 256) | W2 between particle runs | W2 per slice |",
             "|---|---|---:|---|---:|---:|---:|"]
    n = sizes[-1]
    for r in summary:
        p = r[f"n{n}"]
        lines.append(f"| {r['case']} | {r['w2_dirac_0']:.2f} -> {r['w2_dirac_T']:.3f} | "
                     f"{r['orbit_distance_T']:.3f} | {r['energy_0']:.3f} -> {r['energy_T']:.3f} | "
                     f"{p['w2_density_particles_mean']:.3f} (max {p['w2_density_particles_max']:.3f}) | "
                     f"{p['w2_between_runs_mean']:.3f} | {p['w2_slice_mean']:.3f} |")
    (HERE / "summary.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    for name, (t, e) in energy_curves.items():
        ax = axes[0 if name.startswith("sphere") else 1]
        ax.plot(t, e, label=name.split("_", 1)[1])
    for ax, title in zip(axes, ("S^2", "S^1")):
        ax.set_xlabel("t")
        ax.set_ylabel("E_h")
        ax.set_title(f"energy of the density, {title}", fontsize=9)
        ax.legend(fontsize=7)
        ax.grid(True, alpha=0.3)
    save_figure(fig, HERE / "energy.png")


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
