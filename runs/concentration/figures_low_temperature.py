"""Figures and table of the low-temperature study (docs/concentration.md, "Low temperature").

* ``low_temperature_w2.png``: W2 to Pi_# rho_0 against t at beta = 1000 for every n and
  tolerance that ran (runs/concentration/low_temperature/*.nc, from the two
  sweep_low_temperature_*.toml), and at beta = 3000 (runs/concentration/low_temperature_3000.nc).
* ``low_temperature_tail.png``: the mechanism. log rho against theta at several times
  (beta = 1000, the finest n), with the cluster u, the direction B^T u / |B^T u| where the
  softmax of the cluster looks, and the level beta Delta below the cluster that the tail there
  must fall to before the cluster moves.
* ``low_temperature_departure.png``: departure time against beta with the prediction
  t_dep ~ beta Delta / lambda_r (module ``prediction``).

Prints the table of every run (n, tolerance, min W2, t_min, departure, steps, wall time).

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


def runs() -> list[tuple[dict, object]]:
    found = []
    for path in sorted((HERE / "low_temperature").glob("*.nc")) + [HERE / "low_temperature_3000.nc"]:
        if not path.exists():
            continue
        ds = sd.open_run(path)
        s = curve_summary(ds["time"].values, ds["w2_projection"].values)
        found.append(({"file": path.name, "beta": float(ds.attrs["beta"]), "n": int(ds.attrs["n"]),
                       "tolerance": float(ds.attrs["tolerance"]), "status": ds.attrs["run_status"],
                       "t_end": float(ds["time"].values[-1]), "steps": int(ds.attrs["n_steps"]),
                       "wall_s": float(ds.attrs["wall_time_seconds"]), **s}, ds))
    return found


def main() -> None:
    import matplotlib.pyplot as plt

    pred = prediction()
    print(f"u at {pred['u_deg']:.2f} deg, B^T u at {pred['look_deg']:.2f} deg, Delta = {pred['delta']:.5f}, "
          f"repeller at {pred['repeller_deg']:.2f} deg with lambda_r = {pred['lambda_r']:.5f}: "
          f"t_dep ~ {pred['delta'] / pred['lambda_r']:.4f} beta")
    found = runs()
    print(f"{'beta':>6} {'n':>5} {'tol':>7} {'min W2':>10} {'t_min':>6} {'departure':>9} {'T':>5} "
          f"{'steps':>6} {'wall s':>7} status")
    for row, _ in found:
        print(f"{row['beta']:>6g} {row['n']:>5} {row['tolerance']:>7g} {row['min_w2']:>10.6f} {row['t_min']:>6g} "
              f"{row['departure_time']:>9g} {row['t_end']:>5g} {row['steps']:>6} {row['wall_s']:>7.0f} {row['status']}")

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for row, ds in found:
        ax = axes[0] if row["beta"] == 1000.0 else axes[1]
        ax.semilogy(ds["time"].values, ds["w2_projection"].values,
                    label=f"n = {row['n']}, tol {row['tolerance']:g}: min {row['min_w2']:.5f}, "
                          f"departure {row['departure_time']:g}")
    for ax, beta in zip(axes, (1000, 3000)):
        ax.set_title(f"example C, beta = {beta}, log_sl")
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
