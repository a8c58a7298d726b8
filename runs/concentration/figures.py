"""Figures of the concentration study beyond the per-sweep figures of analyze-beta
(docs/concentration.md):

* ``concentration_limits.png``: the zero-temperature run (W2 to Pi_# rho_0 against t, with the
  rate gamma / (2 |B^T w|) of the theory) and the great-circle case on S^2 with both sphere
  schemes (W2 to the great-circle target and min rho against t). Needs
  runs/concentration/zero_temperature.nc, runs/sphere_great_circle/sphere_great_circle.nc,
  runs/sphere_great_circle_fv/sphere_great_circle_fv.nc (spheredens run on their configs).
* ``concentration_large_beta.png``: the metastable plateau of example C at beta = 300 and 1000
  with n = 1024, 2048, 4096 (W2 to Pi_# rho_0 against t). Needs the case files of
  runs/concentration/sweep_circle.toml and sweep_circle_large_beta.toml.

Usage: .venv/bin/python runs/concentration/figures.py
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

import spheredens as sd
from spheredens.plot import save_figure

ROOT = Path(__file__).resolve().parents[2]
RATE = 0.277  # gamma / (2 |B^T w|) for example C (tests/test_targets.py)


def large_beta(plt) -> None:
    """W2 against t at beta = 300, 1000 for every n that ran: the plateau against the grid."""
    fig, axes = plt.subplots(2, 2, figsize=(11, 7))
    zoom = {300.0: (0.015, 0.019), 1000.0: (0.0040, 0.0060)}
    for col, beta in enumerate((300.0, 1000.0)):
        for n in (1024, 2048, 4096):
            path = ROOT / f"runs/concentration/circle/beta-{beta}_n-{n}.nc"
            if not path.exists():
                continue
            ds = sd.open_run(path)
            t, w2 = ds["time"].values, ds["w2_projection"].values
            i = int(np.nanargmin(w2))
            label = f"n = {n}: min {w2[i]:.5f} at t = {t[i]:g}"
            axes[0, col].semilogy(t, w2, label=label)
            axes[1, col].plot(t, w2, label=label)
        axes[0, col].set_title(f"example C, beta = {beta:g}: W2(rho_t, Pi_# rho_0)", fontsize=9)
        axes[1, col].set_title("the metastable plateau (zoom)", fontsize=9)
        axes[1, col].set_ylim(*zoom[beta])
        axes[1, col].set_xlim(15, 80)
        for ax in axes[:, col]:
            ax.set_xlabel("t")
            ax.legend(fontsize=7)
            ax.grid(True, which="both", alpha=0.3)
    print("wrote", save_figure(fig, ROOT / "docs/figures/concentration_large_beta.png"))


def main() -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    large_beta(plt)

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
