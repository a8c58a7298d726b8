"""Figures and table of the low-temperature study (docs/concentration.md, "Low temperature").

* ``low_temperature_w2.png``: W2 to Pi_# rho_0 against t at beta = 1000 for every n and
  tolerance that ran (runs/concentration/low_temperature/*.nc, from the two
  sweep_low_temperature_*.toml), at beta = 3000 (low_temperature_3000*.nc) and at beta = 10^4
  (low_temperature_10000*.nc), one panel per beta.
* ``low_temperature_tail.png``: the mechanism. log rho against theta at several times
  (beta = 1000, the finest n), with the cluster u, the direction B^T u / |B^T u| where the
  softmax of the cluster looks, and the level beta Delta below the cluster that the tail there
  must fall to before the cluster moves.
* ``low_temperature_departure.png``: departure time against beta with the prediction
  t_dep ~ beta Delta / lambda_r (module ``prediction``).

Prints the table of every run (n, tolerance, min W2, t_min, departure, steps, wall time of the
whole run, every resumed segment added) as markdown, and the relative changes between successive
refinements (space: n -> 2n at equal tolerance; time: tolerance -> tolerance / 3 or / 10 at equal n).

Usage: .venv/bin/python runs/concentration/figures_low_temperature.py
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

import spheredens as sd
from spheredens.analysis import curve_summary
from spheredens.plot import save_figure

ROOT = Path(__file__).resolve().parents[2]
HERE = ROOT / "runs/concentration"
K = np.array([[1.75, 0.866025], [0.433013, 2.5]])
V = np.diag([1.0, 0.5])
#: departure times of the fv study (docs/concentration.md, n-to-2n table, finer n)
FV_DEPARTURES = {10.0: 17.0, 30.0: 18.0, 100.0: 29.75, 300.0: 77.5}


def prediction() -> dict[str, float]:
    """Delta = |B^T u| - <B^T u, u> (the log-weight advantage of the direction B^T u over the
    cluster u, per unit beta) and lambda_r, the expansion rate of the zero-temperature field at
    its repelling point next to B^T u (the tail there drains like e^(-lambda_r t))."""
    a = V @ K.T
    u = np.linalg.eigh((a + a.T) / 2)[1][:, -1]
    u *= np.sign(u[0])
    bu = K.T @ u
    theta = np.linspace(0.0, 2 * np.pi, 400001)
    x = np.stack([np.cos(theta), np.sin(theta)], axis=1)
    bx = x @ K
    w = (bx @ V.T) / np.linalg.norm(bx, axis=1, keepdims=True)
    v = -np.sin(theta) * w[:, 0] + np.cos(theta) * w[:, 1]
    slope = np.gradient(v, theta)
    zeros = np.flatnonzero(np.diff(np.sign(v)) != 0)
    repelling = [i for i in zeros if slope[i] > 0]
    look = math.atan2(bu[1], bu[0])
    nearest = min(repelling, key=lambda i: abs((theta[i] - look + np.pi) % (2 * np.pi) - np.pi))
    return {"u_deg": math.degrees(math.atan2(u[1], u[0])), "look_deg": math.degrees(look),
            "delta": float(np.linalg.norm(bu) - bu @ u), "lambda_r": float(slope[nearest]),
            "repeller_deg": math.degrees(theta[nearest])}


#: the single runs at beta = 3000 and 10^4 (one configuration each, next to this script)
SINGLE_RUNS = ("low_temperature_3000", "low_temperature_3000_n4096", "low_temperature_3000_tol1e-1", "low_temperature_10000",
               "low_temperature_10000_n2048", "low_temperature_10000_n2048_tol3e-2")


def runs() -> list[tuple[dict, object]]:
    found = []
    paths = sorted((HERE / "low_temperature").glob("*.nc")) + [HERE / f"{name}.nc" for name in SINGLE_RUNS]
    for path in paths:
        if not path.exists():
            continue
        ds = sd.open_run(path)
        t, w2 = ds["time"].values, ds["w2_projection"].values
        s = curve_summary(t, w2)
        # the plateau is flat to a fraction of a percent, so t_min is not stable: the first
        # snapshot within 1% of the minimum says when the plateau is reached
        s["plateau_time"] = float(t[np.argmax(w2 <= 1.01 * s["min_w2"])])
        attrs = ds.attrs
        # the whole run's wall time (segments of a resumed run added); a file written before that
        # attribute existed has only its last process's (marked with a dagger in the table)
        wall = attrs.get("wall_time_total_seconds", attrs.get("checkpoint_wall_seconds"))
        last_only = wall is None
        if last_only:
            wall = attrs.get("wall_time_seconds")
        found.append(({"file": path.name, "beta": float(attrs["beta"]), "n": int(attrs["n"]),
                       "tolerance": float(attrs["tolerance"]), "status": attrs["run_status"],
                       "t_end": float(ds["time"].values[-1]),
                       "steps": int(attrs.get("checkpoint_steps", attrs["n_steps"])),
                       "wall_s": float(wall) if wall is not None else float("nan"),
                       "wall_note": " †" if last_only else "", **s}, ds))
    return found


def refinements(found: list[dict]) -> list[tuple[dict, dict, str]]:
    """Pairs (coarse, fine, kind) of successive refinements among the runs of one beta."""
    pairs = []
    for a in found:
        for b in found:
            if a["beta"] != b["beta"] or a is b:
                continue
            if a["tolerance"] == b["tolerance"] and b["n"] == 2 * a["n"]:
                pairs.append((a, b, "space"))
            elif a["n"] == b["n"] and b["tolerance"] < a["tolerance"]:
                finer = [c["tolerance"] for c in found if c["beta"] == a["beta"] and c["n"] == a["n"]
                         and b["tolerance"] < c["tolerance"] < a["tolerance"]]
                if not finer:  # the next tolerance down
                    pairs.append((a, b, "time"))
    return pairs


def change(a: float, b: float) -> str:
    return f"{abs(a - b) / abs(b):.2%}" if np.isfinite(a) and np.isfinite(b) else "-"


def main() -> None:
    import matplotlib.pyplot as plt

    pred = prediction()
    print(f"u at {pred['u_deg']:.2f} deg, B^T u at {pred['look_deg']:.2f} deg, Delta = {pred['delta']:.5f}, "
          f"repeller at {pred['repeller_deg']:.2f} deg with lambda_r = {pred['lambda_r']:.5f}: "
          f"t_dep ~ {pred['delta'] / pred['lambda_r']:.4f} beta")
    found = runs()
    print("| beta | n | tolerance | min W2 | t_min | plateau reached | departure | T | steps | wall s | status |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for row, _ in found:
        print(f"| {row['beta']:g} | {row['n']} | {row['tolerance']:g} | {row['min_w2']:.7f} | {row['t_min']:g} | "
              f"{row['plateau_time']:g} | {row['departure_time']:g} | {row['t_end']:g} | {row['steps']} | {row['wall_s']:.0f}{row['wall_note']} | {row['status']} |")
    if any(row["wall_note"] for row, _ in found):
        print("† the last process only: a file written before wall_time_total_seconds existed, which may "
              "have been resumed")
    print("\nrefinement (coarse -> fine): change of min W2, of t_min, of the departure")
    for a, b, kind in refinements([r for r, _ in found]):
        print(f"  beta {a['beta']:g} {kind}: n {a['n']} -> {b['n']}, tolerance {a['tolerance']:g} -> "
              f"{b['tolerance']:g}: min W2 {change(a['min_w2'], b['min_w2'])}, t_min {change(a['t_min'], b['t_min'])}, "
              f"departure {change(a['departure_time'], b['departure_time'])}")

    betas = (1000.0, 3000.0, 10000.0)
    fig, axes = plt.subplots(1, 3, figsize=(17, 4.8))
    for row, ds in found:
        if row["beta"] not in betas:
            continue
        ax = axes[betas.index(row["beta"])]
        ax.semilogy(ds["time"].values, ds["w2_projection"].values,
                    label=f"n = {row['n']}, tol {row['tolerance']:g}: min {row['min_w2']:.6f}, "
                          f"departure {row['departure_time']:g}")
    for ax, beta in zip(axes, betas):
        ax.set_title(f"example C, beta = {beta:g}, log_sl")
        ax.set_xlabel("t")
        ax.set_ylabel("W2(rho_t, Pi_# rho_0) (cell masses at their centroids)")
        ax.legend(fontsize=7)
    save_figure(fig, ROOT / "docs/figures/low_temperature_w2.png")

    finest = max((r for r in found if r[0]["beta"] == 1000.0), key=lambda r: (r[0]["n"], -r[0]["tolerance"]),
                 default=None)
    if finest is not None:
        row, ds = finest
        fig, ax = plt.subplots(figsize=(9, 5))
        theta = np.degrees(ds["theta"].values)
        log_rho = ds["log_rho"].values if "log_rho" in ds else np.log(np.maximum(ds["rho"].values, 1e-320))
        for t in (5, 20, 50, 100, 150, 200, 240, 255, 260):
            i = int(np.argmin(np.abs(ds["time"].values - t)))
            ax.plot(theta, log_rho[i], lw=0.8, label=f"t = {ds['time'].values[i]:g}")
        top = float(np.max(log_rho[int(np.argmin(np.abs(ds["time"].values - 100)))]))
        ax.axvline(pred["u_deg"], color="k", ls=":", lw=0.8)
        ax.axvline(pred["look_deg"], color="r", ls="--", lw=0.8)
        ax.axhline(top - row["beta"] * pred["delta"], color="r", ls=":", lw=0.8)
        ax.set_xlim(0, 180)
        ax.set_ylim(top - 1.6 * row["beta"] * pred["delta"], top + 5)
        ax.set_xlabel("theta (degrees); dotted: cluster u, dashed: B^T u, red dotted: log rho(u) - beta Delta")
        ax.set_ylabel("log rho")
        ax.set_title(f"beta = {row['beta']:g}, n = {row['n']}: the tail at B^T u drains until it no longer "
                     "holds the cluster", fontsize=9)
        ax.legend(fontsize=7, ncol=3)
        save_figure(fig, ROOT / "docs/figures/low_temperature_tail.png")

    fig, ax = plt.subplots(figsize=(6, 4.5))
    betas = np.array(sorted(FV_DEPARTURES))
    ax.plot(betas, [FV_DEPARTURES[b] for b in betas], "s", label="fv (docs/concentration.md)")
    best = {}
    for row, _ in found:
        if np.isfinite(row["departure_time"]):
            key = row["beta"]
            if key not in best or (row["n"], -row["tolerance"]) > (best[key]["n"], -best[key]["tolerance"]):
                best[key] = row
    if best:
        b = np.array(sorted(best))
        ax.plot(b, [best[k]["departure_time"] for k in b], "o", label="log_sl (finest run)")
    grid = np.linspace(100, 10000, 200)
    ax.plot(grid, pred["delta"] / pred["lambda_r"] * grid, "k--", lw=0.8,
            label=f"beta Delta / lambda_r = {pred['delta'] / pred['lambda_r']:.3f} beta")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("beta")
    ax.set_ylabel("departure time")
    ax.legend(fontsize=8)
    save_figure(fig, ROOT / "docs/figures/low_temperature_departure.png")


if __name__ == "__main__":
    main()
