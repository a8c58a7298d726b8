"""Figures of runs (matplotlib is imported here only)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np


def plot_circle_run(ds: Any, path: str | Path) -> Path:
    """Space-time image of rho on the circle (log colour scale) with W2 to Pi_# rho_0 beside it.

    Parameters
    ----------
    ds : xarray.Dataset
        A circle run (schema spheredens-1).
    path : path
        PNG file to write.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import LogNorm

    rho = np.asarray(ds["rho"].values)
    if rho.ndim == 3:  # slices: plot the marginal
        rho = np.einsum("k,tkn->tn", ds["xi_weight"].values, rho)
    t = ds["time"].values
    theta = ds["theta"].values
    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(11, 4.2), gridspec_kw={"width_ratios": [1.6, 1]})
    top = float(np.nanmax(rho))
    positive = rho[rho > 0]
    floor = max(top * 1e-6, float(positive.min()) if positive.size else top * 1e-6)
    mesh = ax0.pcolormesh(t, np.degrees(theta), np.clip(rho, floor, None).T, shading="nearest",
                          norm=LogNorm(vmin=floor, vmax=top), cmap="viridis")
    fig.colorbar(mesh, ax=ax0, label="rho (per radian)")
    ax0.set_xlabel("t")
    ax0.set_ylabel("theta (degrees)")
    ax0.set_title(f"{ds.attrs.get('model')} on the circle, beta = {ds.attrs.get('beta')}, "
                  f"{ds.attrs.get('scheme')} n = {theta.size}", fontsize=9)
    w2 = ds["w2_projection"].values
    if np.any(np.isfinite(w2)):
        ax1.semilogy(t, w2, "-", color="C3")
        ax1.set_ylabel("W2(rho_t, Pi_# rho_0)  (radians)")
        ax1.set_title("distance to the zero-temperature target", fontsize=9)
    else:
        ax1.plot(t, ds["min_rho"].values, "-", color="C0")
        ax1.set_ylabel("min rho")
        ax1.set_title(ds["w2_projection"].attrs.get("comment", ""), fontsize=8)
    ax1.set_xlabel("t")
    ax1.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
