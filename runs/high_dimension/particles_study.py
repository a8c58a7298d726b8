"""Particles in R^d against the zonal density: when they part from it, and when they leave the
equator for the top eigenvector of V, against n (docs/high_dimension.md, "Particles leave the
equator").

The model is the study's equator family at beta = 1 (B = a e e^T + b P, V = l1 e e^T + l2 P
with a = 1, b = 2, l1 = 1.2, l2 = 1): l2 b > l1 a, so Pi_# rho_0 is the equator, and l1 > l2,
so the top eigenvector of V is the axis e. rho_0 is uniform on S^{d-1}, which is symmetric under
e -> -e: the zonal density then keeps E[cos theta] = 0 up to round-off, while n particles drawn
i.i.d. start with E[cos theta] of order (n d)^-1/2. beta = 1 keeps a particle's own share of its
softmax below 0.03 (docs/high_dimension.md, "How many particles the mean field needs"), so the
particles can follow the mean field at every n here.

Runs:

* the zonal density from the uniform start (``log_sl``, n = 512, tolerance 1e-2), with its
  refinement check (n = 1024; tolerance 1e-2 / 4);
* particles, d in {16, 128}, n in {250, 1000, 4000}, 8 i.i.d. seeds each, RK4 with dt = 0.2
  (checked against dt = 0.05 for seed 0 at n = 1000);
* for every particle run, the zonal density seeded with the same asymmetry: a von Mises-Fisher
  law about e whose E[cos theta] equals |E[cos theta]| of that run's start (kappa solved from
  E cos theta = I_{d/2}(kappa) / I_{d/2-1}(kappa)). This is the mean field's prediction for that
  particle run, since the odd part of the start that grows is its first moment along e.

Measured per particle run (snapshots every 0.25, linear interpolation between them):

* ``t_part``: the first time the 1-D W2 of the particles' theta-law to the symmetric density
  g_t exceeds 0.1 rad (``spheredens.compare``; the density as pieces on its cells);
* ``t_leave``: the first time |E[cos theta]| > 1/2, i.e. most of the mass has moved toward one
  end of the top eigenvector of V; ``t_leave_mf``: the same time for the seeded density.

Then per d a least-squares fit t_leave = c + s ln n over all seeds, with the standard error of s,
beside the mean field's slope: 1 / (2 lambda), lambda the rate at which the seeded densities'
t_leave falls with ln E[cos theta]_0 (t_leave = c' - ln E[cos theta]_0 / lambda).

Files: ``runs/high_dimension/particles/*.nc`` (finished runs are reused),
``particles_summary.json`` beside this script, docs/figures/high_dimension_particles_*.png.

Usage: .venv/bin/python runs/high_dimension/particles_study.py [--dims 16 128]
       [--ns 250 1000 4000] [--seeds 8] [--summarize]
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from scipy import optimize, special, stats  # noqa: E402

import spheredens as sd  # noqa: E402
from spheredens import zonal_particles  # noqa: E402
from spheredens.particles import run_particles  # noqa: E402

#: keep the vectors of R^d at every snapshot (n = 4000, d = 128: 250 MB per file), for the
#: equatorial first moment |P E[x]|
zonal_particles.FULL_POSITION_BYTES = 1 << 28

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
OUT = HERE / "particles"
FIGURES = ROOT / "docs" / "figures"
MODEL = {"name": "sa", "beta": 1.0, "a": 1.0, "b": 2.0, "l1": 1.2, "l2": 1.0}
DIMS = (16, 128)
NS = (250, 1000, 4000)
SEEDS = 8
T_END = 30.0
SNAPSHOTS = 61
DT = 0.2
DT_CHECK = 0.05
DENSITY_N = 512
TOLERANCE = 1e-2
#: W2 (rad) of the theta-laws above which the particles have parted from the density
PART = 0.1
#: |E cos theta| above which the mass has left the equator for one end of e
LEAVE = 0.5
#: |P E[x]| above which the particles have gathered about one point of the equator
CLUSTER = 0.5
#: |P E[x]| above which they move as one atom (the slide's rate and its prediction)
ONE_CLUSTER = 0.8


def config(d: int, path: Path, *, initial: dict | None = None, n: int = DENSITY_N,
           tolerance: float = TOLERANCE, particles: dict | None = None) -> sd.RunConfig:
    cfg = {
        "domain": {"name": "zonal", "d": d},
        "model": MODEL,
        "initial": initial or {"name": "uniform"},
        "discretization": {"scheme": "log_sl", "n": n, "tolerance": tolerance},
        "time": {"t_end": T_END, "snapshots": SNAPSHOTS},
        "output": {"path": str(path), "figure": False},
    }
    if particles:
        cfg["particles"] = particles
    return sd.config_from_dict(cfg)


def finished(path: Path):
    if path.exists():
        ds = (sd.open_particles if path.name.startswith("particles") else sd.open_run)(path)
        if ds.attrs.get("run_status") == "complete":
            return ds
    return None


def timed(path: Path, make) -> tuple:
    """A finished run at ``path`` (reused, with its recorded wall time) or a new one."""
    ds = finished(path)
    wall_file = path.with_suffix(".wall")
    if ds is None:
        start = time.perf_counter()
        ds = make()
        wall_file.write_text(f"{time.perf_counter() - start:.1f}\n")
    wall = float(wall_file.read_text()) if wall_file.exists() else float("nan")
    return ds, wall


def density(d: int, label: str = "base", **kw):
    path = OUT / f"density_d{d}_{label}.nc"
    return timed(path, lambda: sd.run(config(d, path, **kw), progress=False, overwrite=True))


def mean_cos(theta: np.ndarray, g: np.ndarray | None = None) -> np.ndarray:
    """E[cos theta] per snapshot: of the particles' angles (time, particle), or of the cell law
    g (time, cell) at the cell angles ``theta``."""
    if g is None:
        return np.cos(theta).mean(axis=1)
    return (g * np.cos(theta)).sum(axis=1) / g.sum(axis=1)


def first_crossing(t: np.ndarray, y: np.ndarray, level: float) -> float | None:
    """The first time y(t) > level, linear between snapshots; None when it never does."""
    above = np.nonzero(y > level)[0]
    if not above.size:
        return None
    k = int(above[0])
    if k == 0:
        return float(t[0])
    return float(t[k - 1] + (level - y[k - 1]) * (t[k] - t[k - 1]) / (y[k] - y[k - 1]))


def vmf_mean_cos(d: int, kappa: float) -> float:
    """E[cos theta] of the von Mises-Fisher law on S^{d-1}: I_{d/2}(kappa) / I_{d/2-1}(kappa)
    (scaled Bessel functions), or kappa / d (1 - kappa^2 / (d (d + 2))) where they underflow
    (kappa << sqrt(d): the series' next term is below 1e-6 of it there)."""
    nu = 0.5 * d - 1.0
    num, den = special.ive(nu + 1, kappa), special.ive(nu, kappa)
    if num > 0.0 and den > 0.0:
        return float(num / den)
    return kappa / d * (1.0 - kappa * kappa / (d * (d + 2.0)))


def kappa_for_mean_cos(d: int, m: float) -> float:
    """kappa of the von Mises-Fisher law on S^{d-1} with E[cos theta] = m (the root lies above
    m d, since E[cos theta] < kappa / d)."""
    return float(optimize.brentq(lambda k: vmf_mean_cos(d, k) - m, 0.999 * m * d,
                                 10.0 * d * m + 10.0, xtol=1e-14))


def growth_rate(t: np.ndarray, y: np.ndarray, t0: float, t1: float) -> float:
    """The least-squares rate of ln y over the snapshots in [t0, t1]."""
    keep = (t >= t0) & (t <= t1)
    return float(np.polyfit(t[keep], np.log(y[keep]), 1)[0])


def slide_rate(t: np.ndarray, ecos: np.ndarray, p_mean: np.ndarray) -> float | None:
    """The rate of ln cot(theta) of E[cos theta] (u / sqrt(1 - u^2)) once the particles are one
    cluster (|P E x| > 0.8) and before they have left (0.02 < |E cos| < 1/2): (l1 - l2) for one
    atom, whose cot theta grows like e^{(l1 - l2) t}. None when fewer than 3 snapshots qualify."""
    u = np.abs(ecos)
    keep = (p_mean > ONE_CLUSTER) & (u > 0.02) & (u < LEAVE)
    if keep.sum() < 3:
        return None
    return float(np.polyfit(t[keep], np.log(u[keep] / np.sqrt(1.0 - u[keep] ** 2)), 1)[0])


def run_tag(d: int, n: int, seed: int, dt: float = DT) -> str:
    """The name of a particle run and of its seeded density: d, n, seed (and dt if not DT)."""
    return f"d{d}_n{n}_s{seed}" + ("" if dt == DT else f"_dt{dt:g}")


def particle_run(d: int, n: int, seed: int, dt: float = DT):
    tag = run_tag(d, n, seed, dt)
    path = OUT / f"particles_{tag}.nc"
    particles = {"n": n, "initialization": "iid", "seed": seed, "dt": dt}
    return timed(path, lambda: run_particles(
        config(d, path, particles=particles), output=path, progress=False, overwrite=True))


def measure_particles(d: int, n: int, seed: int, reference, dt: float = DT) -> dict:
    p, wall = particle_run(d, n, seed, dt)
    t = p["time"].values
    theta = p["polar_angle"].values
    ecos = mean_cos(theta)
    w2_density = sd.compare(reference, [p], progress=False)["w2"].values[0]
    w2_equator = np.sqrt(((theta - 0.5 * np.pi) ** 2).mean(axis=1))
    # the equatorial first moment |P E[x]|, P = I - e e^T: 0 for any zonal law
    x = p["sphere_position"].values
    axis = p["axis"].values
    mean = x.mean(axis=1)
    along = mean @ axis
    p_mean = np.linalg.norm(mean - along[:, None] * axis[None, :], axis=1)
    t_cluster = first_crossing(p["sphere_time"].values, p_mean, CLUSTER)
    t_one = first_crossing(p["sphere_time"].values, p_mean, ONE_CLUSTER)
    slide = None
    if t_one is not None:
        # one atom at angle theta from e moves by d(cot theta)/dt = (l1 - l2) cot theta: from
        # E cos at t_one to E cos = 1/2 (cot = 1 / sqrt(3))
        u = float(np.interp(t_one, t, np.abs(ecos)))
        if u < LEAVE:
            cot = u / np.sqrt(1.0 - u * u)
            slide = t_one + np.log(1.0 / np.sqrt(3.0) / cot) / (MODEL["l1"] - MODEL["l2"])
    # the mean field's prediction: the density seeded with this start's asymmetry
    m0 = abs(float(ecos[0]))
    kappa = kappa_for_mean_cos(d, m0)
    tag = run_tag(d, n, seed, dt)
    seeded, seeded_wall = density(d, f"seeded_{tag}", initial={
        "name": "von_mises_fisher", "means": [[1.0] + [0.0] * (d - 1)], "kappas": [kappa]})
    seeded_ecos = mean_cos(seeded["theta"].values, seeded["rho"].values)
    return {
        "d": d, "n": n, "seed": seed, "dt": dt,
        "ecos0": float(ecos[0]),
        "kappa": kappa,
        "seeded_ecos0": float(seeded_ecos[0]),
        "t_part": first_crossing(t, w2_density, PART),
        "t_leave": first_crossing(t, np.abs(ecos), LEAVE),
        "t_leave_mf": first_crossing(t, np.abs(seeded_ecos), LEAVE),
        "p_mean0": float(p_mean[0]),
        "t_cluster": t_cluster,
        "t_leave_atom": None if slide is None else float(slide),
        "rate_cluster": growth_rate(p["sphere_time"].values, p_mean, 0.0, 1.0),
        "rate_slide": slide_rate(t, ecos, np.interp(t, p["sphere_time"].values, p_mean)),
        "wall": wall,
        "seeded_wall": seeded_wall,
        "time": t.tolist(),
        "w2_density": w2_density.tolist(),
        "w2_equator": w2_equator.tolist(),
        "abs_ecos": np.abs(ecos).tolist(),
        "p_mean": p_mean.tolist(),
        "seeded_abs_ecos": np.abs(seeded_ecos).tolist(),
    }


def density_summary(d: int) -> dict:
    """The symmetric density's W2 to the equator and its refinement: n -> 2n, tolerance / 4."""
    runs = {
        "base": density(d),
        "2n": density(d, "2n", n=2 * DENSITY_N),
        "tol/4": density(d, "tol4", tolerance=TOLERANCE / 4),
    }
    out = {}
    for label, (ds, wall) in runs.items():
        ecos = mean_cos(ds["theta"].values, ds["rho"].values)
        out[label] = {
            "w2_end": float(ds["w2_projection"].values[-1]),
            "w2_20": float(ds["w2_projection"].sel(time=20.0, method="nearest")),
            "w2": ds["w2_projection"].values.tolist(),
            "max_abs_ecos": float(np.abs(ecos).max()),
            "wall": wall,
        }
    return out


def fits(rows: list[dict]) -> dict:
    """Per d: t_cluster and t_leave = c + s ln n over the particle runs (s with its standard
    error), and the zonal mean field's rate lambda from t_leave_mf = c' - ln E[cos]_0 / lambda
    over the seeded densities."""
    out = {}
    for d in sorted({r["d"] for r in rows}):
        sel = [r for r in rows if r["d"] == d and r["dt"] == DT]
        fit = {}
        for key in ("t_cluster", "t_leave"):
            ok = [r for r in sel if r[key] is not None]
            if len({r["n"] for r in ok}) >= 2:
                f = stats.linregress(np.log([r["n"] for r in ok]), [r[key] for r in ok])
                fit[key] = {"slope": f.slope, "stderr": f.stderr, "intercept": f.intercept,
                            "runs": len(ok), "of": len(sel)}
        # the runs that gather into one cluster before they leave: t_leave against the start's
        # asymmetry and n together (least squares, standard errors from the residuals)
        first = [r for r in sel if r["t_cluster"] is not None and r["t_leave"] is not None
                 and r["t_cluster"] < r["t_leave"]]
        if len(first) > 3:
            design = np.column_stack([np.ones(len(first)),
                                      -np.log([abs(r["ecos0"]) for r in first]),
                                      np.log([r["n"] for r in first])])
            y = np.array([r["t_leave"] for r in first])
            coef, *_ = np.linalg.lstsq(design, y, rcond=None)
            resid = y - design @ coef
            sigma2 = resid @ resid / max(len(y) - 3, 1)
            err = np.sqrt(np.diag(sigma2 * np.linalg.inv(design.T @ design)))
            fit["t_leave_by_asymmetry"] = {
                "c": coef[0], "per_ln_inv_ecos0": coef[1], "per_ln_inv_ecos0_err": err[1],
                "per_ln_n": coef[2], "per_ln_n_err": err[2],
                "residual_std": float(np.sqrt(sigma2)), "runs": len(first), "of": len(sel)}
        mf = [r for r in sel if r["t_leave_mf"] is not None]
        if len(mf) >= 2:
            f = stats.linregress(np.log([r["seeded_ecos0"] for r in mf]),
                                 [r["t_leave_mf"] for r in mf])
            fit["lambda_mf"] = -1.0 / f.slope
        out[str(d)] = fit
    return out


def table(rows: list[dict]) -> str:
    lines = [
        "| d | n | abs E cos theta, t = 0 | rate of abs P E x, t < 1 | rate of the slide | "
        "abs P E x, t = 0 | t_part (W2 > 0.1) | t_cluster "
        "(abs P E x > 1/2) | t_leave (abs E cos > 1/2) | zonal mean field's t_leave | one "
        "atom's t_leave from abs P E x = 0.8 | wall s |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]

    def ms(values: list, digits: int = 2, none: str = "not by T") -> str:
        v = np.array([x for x in values if x is not None], dtype=float)
        if not v.size:
            return "-"
        missing = len(values) - v.size
        tail = f" ({missing} {none})" if missing else ""
        body = (f"{v.mean():.{digits}f} +- {v.std(ddof=1):.{digits}f}" if v.size > 1
                else f"{v[0]:.{digits}f}")
        return body + tail

    for d in sorted({r["d"] for r in rows}):
        for n in sorted({r["n"] for r in rows if r["d"] == d}):
            sel = [r for r in rows if r["d"] == d and r["n"] == n and r["dt"] == DT]
            if not sel:
                continue
            lines.append(
                f"| {d} | {n} | {np.mean([abs(r['ecos0']) for r in sel]):.2g} | "
                f"{ms([r['rate_cluster'] for r in sel], 3)} | "
                f"{ms([r['rate_slide'] for r in sel], 3, 'left before one cluster')} | "
                f"{np.mean([r['p_mean0'] for r in sel]):.2g} | "
                f"{ms([r['t_part'] for r in sel])} | {ms([r['t_cluster'] for r in sel])} | "
                f"{ms([r['t_leave'] for r in sel])} | {ms([r['t_leave_mf'] for r in sel])} | "
                f"{ms([r['t_leave_atom'] for r in sel])} | "
                f"{np.mean([r['wall'] for r in sel]):.0f} |"
            )
    return "\n".join(lines)


def figures(rows: list[dict], dens: dict) -> None:
    dims = sorted({r["d"] for r in rows})
    fig, axes = plt.subplots(1, len(dims), figsize=(5.5 * len(dims), 4), sharey=True,
                             squeeze=False)
    colours = dict(zip(NS, ("tab:blue", "tab:orange", "tab:green")))
    for ax, d in zip(axes[0], dims):
        t = np.array(rows[0]["time"])
        ax.semilogy(t, dens[str(d)]["base"]["w2"], "k", lw=2, label="density (symmetric start)")
        for n in NS:
            sel = [r for r in rows if r["d"] == d and r["n"] == n and r["dt"] == DT]
            if not sel:
                continue
            w2 = np.array([r["w2_equator"] for r in sel])
            lo, mid, hi = np.percentile(w2, [10, 50, 90], axis=0)
            ax.semilogy(t, mid, color=colours[n],
                        label=f"particles, n = {n} (median, 10-90% of the seeds)")
            ax.fill_between(t, lo, hi, color=colours[n], alpha=0.25, lw=0)
        ax.set_title(f"d = {d}, beta = 1, equator family")
        ax.set_xlabel("t (model time)")
        ax.legend(fontsize=8)
    axes[0][0].set_ylabel("W2 to Pi_# rho_0 = the equator (rad, theta-laws)")
    fig.tight_layout()
    fig.savefig(FIGURES / "high_dimension_particles_w2.png", dpi=110)
    plt.close(fig)

    # g(theta, t) with log colour, relative to each time's largest value: the symmetric density
    # and the density seeded like the median n = 1000 run at d = 128, that run's particles
    # (quantiles of theta) on both
    d = dims[-1]
    sel = sorted((r for r in rows if r["d"] == d and r["n"] == 1000 and r["dt"] == DT),
                 key=lambda r: abs(r["ecos0"]))
    if not sel:
        return
    r = sel[len(sel) // 2]
    tag = run_tag(d, r["n"], r["seed"])
    p = sd.open_particles(OUT / f"particles_{tag}.nc")
    theta = p["polar_angle"].values
    flip = np.sign(r["ecos0"]) < 0  # the seeded density leaves toward +e: mirror a run to -e
    if flip:
        theta = np.pi - theta
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.3), sharey=True)
    panels = (
        (f"density_d{d}_base.nc", "zonal density, symmetric (uniform) start"),
        (f"density_d{d}_seeded_{tag}.nc", "zonal density seeded with the particles' E cos theta"),
    )
    for ax, (name, title) in zip(axes, panels):
        ds = sd.open_run(OUT / name)
        g = ds["rho"].values
        with np.errstate(divide="ignore"):
            log_g = np.log10(np.maximum(g / g.max(axis=1, keepdims=True), 1e-300))
        image = ax.pcolormesh(ds["time"].values, ds["theta"].values, log_g.T, vmin=-8, vmax=0,
                              shading="auto", cmap="viridis")
        for q, style in ((50, "-"), (10, "--"), (90, "--")):
            ax.plot(p["time"].values, np.percentile(theta, q, axis=1), "w" + style, lw=1.2,
                    label={50: "particles: median theta", 10: "particles: 10% and 90%"}.get(q))
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("t (model time)")
    axes[0].set_ylabel("theta (rad)" + (" (particles mirrored: pi - theta)" if flip else ""))
    axes[0].legend(loc="lower left", fontsize=8)
    fig.colorbar(image, ax=list(axes), label="log10 g(theta, t) / max over theta")
    fig.suptitle(f"d = {d}, beta = 1, equator family: n = {r['n']} particles in R^{d} (seed "
                 f"{r['seed']}, white) against the zonal density (colour)", fontsize=11)
    fig.savefig(FIGURES / "high_dimension_particles_image.png", dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dims", type=int, nargs="*", default=list(DIMS))
    parser.add_argument("--ns", type=int, nargs="*", default=list(NS))
    parser.add_argument("--seeds", type=int, default=SEEDS)
    parser.add_argument("--summarize", action="store_true", help="only read finished runs")
    args = parser.parse_args()
    OUT.mkdir(exist_ok=True)
    start = time.perf_counter()
    rows, dens = [], {}
    for d in args.dims:
        dens[str(d)] = density_summary(d)
        reference = density(d)[0]
        jobs = [(n, s, DT) for n in args.ns for s in range(args.seeds)]
        jobs.append((1000, 0, DT_CHECK))
        for n, seed, dt in jobs:
            tag = run_tag(d, n, seed, dt)
            if args.summarize and not (OUT / f"particles_{tag}.nc").exists():
                continue
            row = measure_particles(d, n, seed, reference, dt)
            rows.append(row)
            print({k: v for k, v in row.items() if not isinstance(v, list)}, flush=True)
    summary = {"rows": rows, "density": dens, "fits": fits(rows),
               "wall_total": time.perf_counter() - start}
    (HERE / "particles_summary.json").write_text(json.dumps(summary, indent=1))
    print(table(rows))
    for d, fit in summary["fits"].items():
        for key in ("t_cluster", "t_leave"):
            if key in fit:
                f = fit[key]
                print(f"d = {d}: {key} = {f['intercept']:.2f} + ({f['slope']:.3f} +- "
                      f"{f['stderr']:.3f}) ln n ({f['runs']} of {f['of']} runs)")
        if "t_leave_by_asymmetry" in fit:
            f = fit["t_leave_by_asymmetry"]
            print(f"d = {d}: t_leave = {f['c']:.2f} + ({f['per_ln_inv_ecos0']:.2f} +- "
                  f"{f['per_ln_inv_ecos0_err']:.2f}) ln(1 / abs E cos_0) + ({f['per_ln_n']:.2f} +- "
                  f"{f['per_ln_n_err']:.2f}) ln n, residual {f['residual_std']:.2f} "
                  f"({f['runs']} of {f['of']} runs: those that gather into one cluster first)")
        if "lambda_mf" in fit:
            print(f"d = {d}: zonal mean field lambda = {fit['lambda_mf']:.3f}")
    for d, runs in dens.items():
        base = runs["base"]["w2_20"]
        print(f"density d = {d}: W2 to the equator at t = 20 {base:.4g}; n -> 2n "
              f"{abs(runs['2n']['w2_20'] - base) / runs['2n']['w2_20']:.2g}, tol / 4 "
              f"{abs(runs['tol/4']['w2_20'] - base) / runs['tol/4']['w2_20']:.2g}; at T "
              f"{runs['base']['w2_end']:.4g}; "
              f"largest abs E cos {runs['base']['max_abs_ecos']:.2g}; walls "
              + ", ".join(f"{r['wall']:.0f}" for r in runs.values()))
    for r in rows:
        if r["dt"] != DT:
            ref = next(x for x in rows if x["d"] == r["d"] and x["n"] == r["n"]
                       and x["seed"] == r["seed"] and x["dt"] == DT)
            print(f"dt check d = {r['d']}: t_leave {ref['t_leave']} (dt {DT}) against "
                  f"{r['t_leave']} (dt {r['dt']}); largest W2 difference to the equator "
                  f"{np.abs(np.subtract(ref['w2_equator'], r['w2_equator'])).max():.2g}")
    print(f"wall time: {summary['wall_total']:.0f} s")
    figures(rows, dens)


if __name__ == "__main__":
    main()
