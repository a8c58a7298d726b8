"""Figures of the concentration study that are not per-beta sweeps (docs/concentration.md):
the zero-temperature run (W2 to Pi_# rho_0 against t, with the rate gamma / (2 |B^T w|) of the
theory) and the great-circle case on S^2 with both sphere schemes (W2 to the great-circle target
and min rho against t).

Needs: runs/concentration/zero_temperature.nc, runs/sphere_great_circle/sphere_great_circle.nc,
runs/sphere_great_circle_fv/sphere_great_circle_fv.nc (spheredens run on their configs).
Usage: .venv/bin/python runs/concentration/figures.py  (writes docs/figures/concentration_limits.png)
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

import spheredens as sd
from spheredens.plot import save_figure

ROOT = Path(__file__).resolve().parents[2]
RATE = 0.277  # gamma / (2 |B^T w|) for example C (tests/test_targets.py)


def main() -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    zt = sd.open_run(ROOT / "runs/concentration/zero_temperature.nc")
    sh = sd.open_run(ROOT / "runs/sphere_great_circle/sphere_great_circle.nc")
    fv = sd.open_run(ROOT / "runs/sphere_great_circle_fv/sphere_great_circle_fv.nc")
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    t, w2 = zt["time"].values, zt["w2_projection"].values
    window = (t >= 12) & (t <= 20)
    slope = np.polyfit(t[window], np.log(w2[window]), 1)[0]
    ax = axes[0]
    ax.semilogy(t, w2, "-", label="fv n = 2048")
    ax.semilogy(t, w2[window][0] * np.exp(-RATE * (t - t[window][0])), "k--", lw=0.8,
                label=f"theory: rate {RATE}")
    ax.set_title(f"zero temperature, example C: fitted rate {-slope:.3f} on [12, 20]", fontsize=9)
    ax.set_xlabel("t")
    ax.set_ylabel("W2(rho_t, Pi_# rho_0)")
    ax.legend(fontsize=7)
    ax.grid(True, which="both", alpha=0.3)
    ax = axes[1]
    for ds, label in ((sh, "sh_spectral lmax = 63"), (fv, "fv nlat = 64")):
        ax.semilogy(ds["time"].values, ds["w2_projection"].values, label=label)
    ax.set_title("S^2, beta = 30: W2 to the great-circle target", fontsize=9)
    ax.set_xlabel("t")
    ax.legend(fontsize=7)
    ax.grid(True, which="both", alpha=0.3)
    ax = axes[2]
    for ds, label in ((sh, "sh_spectral lmax = 63"), (fv, "fv nlat = 64")):
        top = ds["rho"].values.reshape(len(ds["time"]), -1).max(axis=1)
        ax.plot(ds["time"].values, ds["min_rho"].values / top, label=label)
    ax.set_title("min rho / max rho (Gibbs undershoot of the spectral run)", fontsize=9)
    ax.set_xlabel("t")
    ax.legend(fontsize=7)
    ax.grid(True, alpha=0.3)
    out = save_figure(fig, ROOT / "docs/figures/concentration_limits.png")
    print("wrote", out, "fitted zero-temperature rate", -slope)
    for ds, label in ((sh, "sh"), (fv, "fv")):
        w = ds["w2_projection"].values
        i = int(np.nanargmin(w))
        print(label, "min W2", w[i], "at t", float(ds["time"][i]), "min rho", ds["min_rho"].values.min())


if __name__ == "__main__":
    main()
