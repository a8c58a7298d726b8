"""When do finite-n particle runs part from the mean field at low temperature? (issue 15)

Example C from the uniform density (``base.toml``), beta in {30, 100, 300}:

* the density with ``log_sl`` at n = 1024 and 2048 (its departure time, checked under refinement);
* particle runs with the quantile start (one run) and i.i.d. starts (seeds 0..7) for
  n = 250, 500, 1000, 2000, 4000, 8000, RK4 with the step ``DT`` per beta (the largest step
  that leaves the departure time unchanged, ``--dt-check``), each to 10 time units after its
  own departure (``particles.stop_after_departure``), at most to a horizon per beta (a run
  that has not departed by then is flagged in the table);
* the departure time of every run as ``analyze-beta`` defines it (first snapshot after the
  minimum of W2 to Pi_# rho_0 with W2 > 2 min + 0.02), from the runs' ``w2_projection``;
* a fit t_dep = a + b ln n per beta and start on n <= 4000, checked against n = 8000;
* figures: departure time against n (with the density's as a line), and the density's tail
  in the direction of B^T u over time against the level 1/n that n particles can carry.

Files go under ``runs/departure_particles/out/`` (one per run; finished runs are reused,
partial ones resume); ``summary.json`` and ``summary.md`` (the table of
docs/particles_low_temperature.md) beside this script, figures in docs/figures/.

Usage: .venv/bin/python runs/departure_particles/study.py [--workers 2] [--quick | --dt-check | --summarize]
       (--quick: beta = 30, n = 250 and 500, 2 seeds: a check of the pipeline;
        --dt-check: the departure time against the RK4 step at n = 1000, which sets DT)
"""
from __future__ import annotations

import os

# one process per core (--workers): BLAS threads on top of them only contend (2x slower sums)
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import json
import math
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

import numpy as np

import spheredens as sd
from spheredens.analysis import curve_summary
from spheredens.io import open_particles
from spheredens.particles import run_particles
from spheredens.plot import save_figure

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
OUT = HERE / "out"
BETAS = (30.0, 100.0, 300.0)
NS = (250, 500, 1000, 2000, 4000, 8000)
IID_SEEDS = 8
#: the density runs: n (refinement pair) and horizon per beta (its departure + more than 10)
DENSITY_NS = (1024, 2048)
DENSITY_T = {30.0: 40.0, 100.0: 50.0, 300.0: 100.0}
#: the particle horizon per beta, an upper bound: each run stops 10 after its departure
#: (particles.stop_after_departure; the particles depart before the density)
PARTICLE_T = {30.0: 32.0, 100.0: 45.0, 300.0: 45.0}
#: RK4 steps checked by --dt-check (n = DT_CHECK_N, quantile start); the study uses, per beta,
#: the largest step whose departure time equals that of the smallest step (DT below)
DT_CHECK = (0.005, 0.01, 0.02, 0.05)
DT_CHECK_N = 1000
#: the step of the study per beta (from --dt-check; --dt overrides it). Measured (n = 1000,
#: quantile, snapshots every 0.25): the departure time is the same for dt = 0.005 ... 0.05 at
#: every beta (14.5, 15.5, 14.75 for beta = 30, 100, 300), and W2 at dt = 0.05 differs from
#: dt = 0.005 by at most 7e-8, 1.1e-7 and 2.0e-6 over the whole run (RK4: x16 per halving)
DT = {30.0: 0.05, 100.0: 0.05, 300.0: 0.05}
#: the fit uses n up to this; larger n check it
FIT_MAX_N = 4000
SNAPSHOTS_PER_UNIT = 4


def config(beta: float, t_end: float, **changes):
    cfg = sd.load_config(HERE / "base.toml")
    return cfg.replace(**{"model.beta": beta, "time.t_end": t_end,
                          "time.snapshots": int(round(SNAPSHOTS_PER_UNIT * t_end)) + 1, **changes})


def density_run(beta: float, n: int) -> dict:
    out = OUT / f"density_beta{beta:g}_n{n}.nc"
    cfg = config(beta, DENSITY_T[beta], **{"discretization.n": n, "output.path": str(out),
                                           "output.figure": False})
    ds = sd.open_run(out) if out.exists() else None
    if ds is None or ds.attrs.get("run_status") != "complete":
        ds = sd.run(cfg, resume=out.exists(), progress=False)
    s = curve_summary(ds["time"].values, ds["w2_projection"].values)
    return {"beta": beta, "n": n, "t_end": float(ds["time"].values[-1]),
            "wall_s": float(ds.attrs.get("wall_time_total_seconds", np.nan)), **s}


def particle_run(beta: float, n: int, start: str, seed: int, dt: float, compute: bool = True) -> dict | None:
    """One particle run's row (made or resumed; with ``compute=False`` None unless complete)."""
    out = OUT / f"particles_beta{beta:g}_n{n}_{start}_seed{seed}_dt{dt:g}.nc"
    cfg = config(beta, PARTICLE_T[beta], **{"particles.n": n, "particles.initialization": start,
                                            "particles.dt": dt, "particles.stop_after_departure": 10.0})
    ds = open_particles(out) if out.exists() else None
    t0 = time.perf_counter()
    if ds is None or ds.attrs.get("run_status") != "complete":
        if not compute:
            return None
        ds = run_particles(cfg, seed=seed, output=out, progress=False, resume=out.exists())
    s = curve_summary(ds["time"].values, ds["w2_projection"].values)
    t_end = float(ds["time"].values[-1])
    # W2 to Pi_# of the start 5 and 10 time units after the departure (the run ends at + 10)
    after = {}
    for lag in (5, 10):
        k = np.flatnonzero(ds["time"].values >= s["departure_time"] + lag - 1e-9)
        after[f"w2_after_{lag}"] = float(ds["w2_projection"].values[k[0]]) if k.size else np.nan
    return {**after, "beta": beta, "n": n, "start": start, "seed": seed, "dt": dt, "t_end": t_end, "file": str(out),
            "passed_by_10": bool(np.isfinite(s["departure_time"]) and t_end - s["departure_time"] >= 10.0),
            "wall_s": float(ds.attrs.get("wall_time_seconds", time.perf_counter() - t0)), **s}


def fit_log_n(ns, times) -> dict:
    """Least squares t = a + b ln n with the standard errors of a, b and their covariance."""
    x, y = np.log(np.asarray(ns, float)), np.asarray(times, float)
    design = np.stack([np.ones_like(x), x], axis=1)
    coef, *_ = np.linalg.lstsq(design, y, rcond=None)
    resid = y - design @ coef
    dof = max(len(y) - 2, 1)
    cov = np.linalg.inv(design.T @ design) * float(resid @ resid) / dof
    return {"a": float(coef[0]), "b": float(coef[1]), "se_a": float(math.sqrt(cov[0, 0])),
            "se_b": float(math.sqrt(cov[1, 1])), "cov_ab": float(cov[0, 1]), "dof": dof}


def predict(fit: dict, n: int) -> tuple[float, float]:
    """The fit's value at n and its standard error (from the covariance of a, b)."""
    x = math.log(n)
    var = fit["se_a"] ** 2 + x * x * fit["se_b"] ** 2 + 2 * x * fit["cov_ab"]
    return fit["a"] + fit["b"] * x, math.sqrt(max(var, 0.0))


def summarize(densities: list[dict], particles: list[dict], windows: dict | None = None) -> dict:
    groups: dict = {}
    for row in particles:
        groups.setdefault((row["beta"], row["start"], row["n"]), []).append(row)
    table = []
    for (beta, start, n), rows in sorted(groups.items()):
        dep = np.array([r["departure_time"] for r in rows])
        done = dep[np.isfinite(dep)]
        table.append({"beta": beta, "start": start, "n": n, "runs": len(rows), "departed": int(done.size),
                      "mean": float(done.mean()) if done.size else np.nan,
                      "std": float(done.std(ddof=1)) if done.size > 1 else np.nan,
                      "min": float(done.min()) if done.size else np.nan,
                      "max": float(done.max()) if done.size else np.nan,
                      "min_w2": float(np.mean([r["min_w2"] for r in rows])),
                      "w2_after_5": float(np.nanmean([r.get("w2_after_5", np.nan) for r in rows])),
                      "w2_after_10": float(np.nanmean([r.get("w2_after_10", np.nan) for r in rows])),
                      "all_passed_by_10": all(r["passed_by_10"] for r in rows),
                      "wall_s": float(sum(r["wall_s"] for r in rows))})
    fits = {}
    for beta in sorted({r["beta"] for r in table}):
        for start in ("quantile", "iid"):
            rows = [r for r in table if r["beta"] == beta and r["start"] == start and np.isfinite(r["mean"])]
            inside = [r for r in rows if r["n"] <= FIT_MAX_N]
            if len(inside) < 3:
                continue
            fit = fit_log_n([r["n"] for r in inside], [r["mean"] for r in inside])
            fit["checks"] = []
            for r in rows:
                if r["n"] > FIT_MAX_N:
                    value, se = predict(fit, r["n"])
                    fit["checks"].append({"n": r["n"], "predicted": value, "se": se, "measured": r["mean"]})
            fits[f"{beta:g}/{start}"] = fit
    dens = {}
    for beta in sorted({r["beta"] for r in densities}):
        rows = sorted((r for r in densities if r["beta"] == beta), key=lambda r: r["n"])
        coarse, fine = rows[0], rows[-1]
        dens[f"{beta:g}"] = {"departure_time": fine["departure_time"], "min_w2": fine["min_w2"],
                             "n": fine["n"], "coarse_n": coarse["n"],
                             "coarse_departure_time": coarse["departure_time"],
                             "change": abs(fine["departure_time"] - coarse["departure_time"])
                             / fine["departure_time"] if len(rows) > 1 else np.nan}
    windows = {f"{beta:g}": {k: w[k] for k in ("rate", "crossing", "width_deg", "angle_deg", "delta")}
               for beta, w in (windows or {}).items()}
    return {"table": table, "fits": fits, "density": dens, "window": windows}


def markdown(summary: dict) -> str:
    lines = ["| beta | start | n | runs | particle departure: mean | spread (std; min-max) | "
             "density departure | min W2 (mean) | W2 at departure + 5 / + 10 (mean) | passed by 10 | wall s |",
             "|---:|---|---:|---:|---:|---|---:|---:|---|---|---:|"]
    for r in summary["table"]:
        d = summary["density"].get(f"{r['beta']:g}", {}).get("departure_time", np.nan)
        spread = (f"{r['std']:.2f}; {r['min']:g}-{r['max']:g}" if r["runs"] > 1 else "-")
        lines.append(f"| {r['beta']:g} | {r['start']} | {r['n']} | {r['runs']} | {r['mean']:.2f} | {spread} | "
                     f"{d:g} | {r['min_w2']:.4f} | {r['w2_after_5']:.3f} / {r['w2_after_10']:.3f} | {'yes' if r['all_passed_by_10'] else 'no'} | {r['wall_s']:.0f} |")
    lines.append("")
    for key, fit in summary["fits"].items():
        window = summary.get("window", {}).get(key.split("/")[0])
        mechanism = (f"; the window's mass decays at rate {window['rate']:.3f}, so the mechanism predicts "
                     f"a slope 1 / rate = {1 / window['rate']:.3f}" if window else "")
        lines.append(f"* beta = {key.replace('/', ', ')}: t_dep = {fit['a']:.2f} (+- {fit['se_a']:.2f}) + "
                     f"{fit['b']:.3f} (+- {fit['se_b']:.3f}) ln n, fitted on n <= {FIT_MAX_N}{mechanism}")
        for c in fit["checks"]:
            lines.append(f"  * n = {c['n']}: predicted {c['predicted']:.2f} +- {c['se']:.2f}, measured {c['measured']:.2f}")
    for beta, w in summary.get("window", {}).items():
        lines.append(f"* beta = {beta}: B^T u is {w['angle_deg']:.1f} degrees from u; Delta = {w['delta']:.4f}, "
                     f"beta Delta / rate = {float(beta) * w['delta'] / w['rate']:.1f}; window {w['width_deg']:.1f} "
                     "degrees wide; mass below 1/n first at " + ", ".join(f"t = {v:g} (n = {n})" for n, v in w["crossing"].items()))
    for beta, d in summary["density"].items():
        lines.append(f"* density, beta = {beta}: departure {d['departure_time']:g} at n = {d['n']} "
                     f"({d['coarse_departure_time']:g} at n = {d['coarse_n']}, change {d['change']:.2%}), "
                     f"min W2 {d['min_w2']:.5f}")
    return "\n".join(lines) + "\n"


def figures(summary: dict, betas) -> None:
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter

    fig, axes = plt.subplots(1, len(betas), figsize=(5.2 * len(betas), 4.2), squeeze=False)
    for ax, beta in zip(axes[0], betas):
        for start, marker in (("quantile", "o"), ("iid", "s")):
            rows = [r for r in summary["table"] if r["beta"] == beta and r["start"] == start]
            if not rows:
                continue
            n = np.array([r["n"] for r in rows])
            mean = np.array([r["mean"] for r in rows])
            err = np.array([r["std"] if np.isfinite(r["std"]) else 0.0 for r in rows])
            ax.errorbar(n, mean, yerr=err, fmt=marker, capsize=3, label=f"particles, {start}")
            fit = summary["fits"].get(f"{beta:g}/{start}")
            if fit:
                grid = np.geomspace(n.min(), n.max(), 50)
                ax.plot(grid, fit["a"] + fit["b"] * np.log(grid), "--", lw=0.8,
                        label=f"{fit['a']:.1f} + {fit['b']:.2f} ln n ({start})")
        window = summary.get("window", {}).get(f"{beta:g}")
        if window:
            ns = np.array([int(n) for n in window["crossing"]])
            ax.plot(ns, list(window["crossing"].values()), "k:", lw=1.0,
                    label="density's window mass falls below 1/n")
        dens = summary["density"].get(f"{beta:g}")
        if dens:
            ax.axhline(dens["departure_time"], color="k", lw=1.0,
                       label=f"density (log_sl n = {dens['n']}): {dens['departure_time']:g}")
        ax.set_xscale("log")
        ax.set_xticks(NS, [str(n) for n in NS])
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("n (particles)")
        ax.set_ylabel("departure time from Pi_# rho_0")
        ax.set_title(f"example C, beta = {beta:g}", fontsize=10)
        ax.legend(fontsize=7)
    save_figure(fig, ROOT / "docs/figures/particles_low_temperature_departure.png")


def holding_window(beta: float) -> dict:
    """The density's mass near B^T u over time (the tail that holds the cluster at u).

    u is the top eigenvector of the symmetric part of A = V B^T (the cluster's atom); the window
    is the arc where the softmax weight of a target at u, exp(beta <B^T u, y>), is within e^-1
    of its largest value. Returns its log mass (log-sum-exp of the cells' log rho, so that
    masses far below 1e-300 are kept) against t, the decay rate lambda of that log mass
    (least squares on t in [10, 0.8 t_departure of the density]) and, for each n of the study,
    the first time the mass is below 1/n (fewer than one particle expected in the window)."""
    from scipy.special import logsumexp

    ds = sd.open_run(OUT / f"density_beta{beta:g}_n{DENSITY_NS[-1]}.nc")
    B = ds["Q"].values.T @ ds["K"].values
    a = ds["V"].values @ B.T  # A = V B^T
    u = np.linalg.eigh((a + a.T) / 2)[1][:, -1]
    bu = B.T @ u
    theta = ds["theta"].values
    score = beta * (np.cos(theta) * bu[0] + np.sin(theta) * bu[1])
    window = score >= score.max() - 1.0
    t = ds["time"].values
    log_mass = logsumexp(ds["log_rho"].values[:, window], axis=1) + math.log(2 * np.pi / theta.size)
    dep = curve_summary(t, ds["w2_projection"].values)["departure_time"]
    fit = (t >= 10.0) & (t <= 0.8 * dep)
    rate = -float(np.polyfit(t[fit], log_mass[fit], 1)[0])
    crossing = {}
    for n in NS:
        below = np.flatnonzero(log_mass < -math.log(n))
        crossing[str(n)] = float(t[below[0]]) if below.size else np.nan
    return {"t": t, "log_mass": log_mass, "rate": rate, "crossing": crossing,
            "width_deg": float(np.degrees(np.ptp(theta[window]))), "departure_time": dep,
            "angle_deg": float(np.degrees(math.acos(bu @ u / np.linalg.norm(bu)))),
            # the softmax advantage of the peak direction over the cluster, per unit beta
            "delta": float(np.linalg.norm(bu) - bu @ u)}


def tail_figure(beta: float, window: dict) -> None:
    """log10 of the density's mass in the holding window against t, with the levels 1/n below
    which n particles carry none of it."""
    import matplotlib.pyplot as plt

    t = window["t"]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.plot(t, window["log_mass"] / math.log(10),
            label=f"density (log_sl n = {DENSITY_NS[-1]}): mass within the window at B^T u")
    ax.axhspan(-math.log10(max(NS)), -math.log10(min(NS)), color="0.85",
               label=f"1/n for n = {min(NS)} ... {max(NS)} (the study's particle runs)")
    ax.axvline(window["departure_time"], color="k", lw=0.8, ls="--", label="the density departs")
    ax.set_xlabel("t")
    ax.set_ylabel("log10 mass")
    ax.set_title(f"beta = {beta:g}: the tail that holds the cluster (decay rate {window['rate']:.3f}); "
                 "n particles carry none of it below 1/n", fontsize=8)
    ax.legend(fontsize=7)
    save_figure(fig, ROOT / f"docs/figures/particles_low_temperature_tail_beta{beta:g}.png")


def run_cases(cases: list[tuple], workers: int) -> list[dict]:
    """Particle runs (beta, n, start, seed, dt) on a pool of processes: the runs of the fit
    (n <= FIT_MAX_N) first, largest first; then its check (n > FIT_MAX_N) seed by seed, every
    beta at each seed (the quantile start first), so that a study cut short has the check at
    every beta."""
    def key(c):
        check = c[1] > FIT_MAX_N
        return (check, (c[3] if c[2] == "iid" else -1) if check else 0, -c[1] ** 2 * PARTICLE_T[c[0]] / c[4])
    cases = sorted(cases, key=key)
    rows = []
    with ProcessPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(particle_run, *case) for case in cases]
        for k, future in enumerate(as_completed(futures), 1):
            row = future.result()
            rows.append(row)
            print(f"[{k}/{len(cases)}] beta {row['beta']:g} n {row['n']} {row['start']} seed {row['seed']} "
                  f"dt {row['dt']:g}: departure {row['departure_time']:g} ({row['wall_s']:.0f} s)", flush=True)
    return rows


def dt_check(betas, workers: int) -> dict:
    """Departure time against the RK4 step (n = DT_CHECK_N, quantile start) per beta."""
    rows = run_cases([(beta, DT_CHECK_N, "quantile", 0, dt) for beta in betas for dt in DT_CHECK], workers)
    out = {}
    for beta in betas:
        mine = {r["dt"]: r for r in rows if r["beta"] == beta}
        by_dt = {dt: r["departure_time"] for dt, r in mine.items()}
        reference = by_dt[min(by_dt)]
        agree = [dt for dt in sorted(by_dt) if by_dt[dt] == reference]
        # the W2 curve against the smallest step's, over the common snapshots
        w_ref = open_particles(mine[min(mine)]["file"])["w2_projection"].values
        deviation = {}
        for dt, r in sorted(mine.items()):
            w = open_particles(r["file"])["w2_projection"].values
            k = min(len(w), len(w_ref))
            deviation[f"{dt:g}"] = float(np.max(np.abs(w[:k] - w_ref[:k])))
        out[f"{beta:g}"] = {"departure_by_dt": {f"{dt:g}": by_dt[dt] for dt in sorted(by_dt)},
                            "largest_agreeing_dt": max(agree), "max_w2_deviation": deviation}
        print(f"beta {beta:g}: departure by dt " + ", ".join(f"{dt:g}: {by_dt[dt]:g}" for dt in sorted(by_dt))
              + "; largest |W2 - W2(dt = " + f"{min(mine):g})| " + ", ".join(f"{k}: {v:.2g}" for k, v in deviation.items()))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=2, help="processes for the particle runs")
    parser.add_argument("--dt", type=float, default=None, help="RK4 step of every particle run "
                        "(default: DT per beta, chosen by --dt-check)")
    parser.add_argument("--dt-check", action="store_true",
                        help=f"only the departure time against the step, n = {DT_CHECK_N}, dt in {DT_CHECK}")
    parser.add_argument("--quick", action="store_true", help="beta = 30, n = 250, 500, 2 seeds")
    parser.add_argument("--ns", type=int, nargs="+", default=None, metavar="N",
                        help=f"run only these particle numbers (default: {' '.join(map(str, NS))}); "
                        "the summary and figures then cover these n only")
    parser.add_argument("--summarize", action="store_true",
                        help="run nothing more: the table and figures of the complete runs so far")
    args = parser.parse_args()
    betas, ns, seeds = (((30.0,), (250, 500), 2) if args.quick else (BETAS, NS, IID_SEEDS))
    if args.ns:
        ns = tuple(args.ns)
    OUT.mkdir(exist_ok=True)
    clock = time.perf_counter()
    if args.dt_check:
        result = dt_check(betas, args.workers)
        result["wall_s"] = time.perf_counter() - clock
        (HERE / "dt_check.json").write_text(json.dumps(result, indent=1, default=float))
        print(f"wall time: {result['wall_s']:.0f} s")
        return
    dt = {beta: args.dt or DT[beta] for beta in betas}
    densities = [density_run(beta, n) for beta in betas for n in DENSITY_NS]
    windows = {beta: holding_window(beta) for beta in betas} if not args.quick else {}
    cases = [(beta, n, "quantile", 0, dt[beta]) for beta in betas for n in ns]
    cases += [(beta, n, "iid", seed, dt[beta]) for beta in betas for n in ns for seed in range(seeds)]
    if args.summarize:
        particles = [row for case in cases if (row := particle_run(*case, compute=False)) is not None]
        print(f"{len(particles)} of {len(cases)} particle runs are complete", flush=True)
    else:
        particles = run_cases(cases, args.workers)
    summary = summarize(densities, particles, windows)
    summary["wall_s"] = time.perf_counter() - clock
    summary["dt"] = {f"{beta:g}": dt[beta] for beta in betas}
    name = "summary_quick" if args.quick else "summary"
    (HERE / f"{name}.json").write_text(json.dumps(summary, indent=1, default=float))
    text = markdown(summary)
    (HERE / f"{name}.md").write_text(text)
    print(text)
    print(f"wall time of this invocation: {summary['wall_s']:.0f} s")
    if not args.quick:
        figures(summary, betas)
        for beta in betas:
            tail_figure(beta, windows[beta])


if __name__ == "__main__":
    main()
