"""Where the two clusters of a study file sit over time (docs/concentration.md).

For each snapshot from t = 20 to 88 (every 4): the mass-weighted mean direction of the mass in
each hemisphere about u (the top eigenvector of the symmetric part of A = V B^T, B = Q^T K, as
../mechanism.py takes it), its angles from +-u and from +-w, w = B^T u / |B^T u| (where the
softmax at u looks, 0.337 rad from u), and the mass-weighted RMS angle about it (the spread,
from the recording mesh's centroids).

Usage: .venv/bin/python runs/sphere_two_atoms/lagrangian/clusters.py cases/FILE.nc
"""

import sys

import numpy as np
import xarray as xr


def main(path: str) -> None:
    with xr.open_dataset(path) as d:
        c = d["rho_centroid_xyz"].values
        m = d["rho"].values * d["cell_area"].values
        t = list(d["time"].values)
        w2 = d["w2_projection"].values
        B = d["Q"].values.T @ d["K"].values
        A = d["V"].values @ B.T
    _, vectors = np.linalg.eigh(0.5 * (A + A.T))
    u = vectors[:, -1] * np.sign(vectors[0, -1])
    w = B.T @ u / np.linalg.norm(B.T @ u)
    for tt in np.arange(20.0, 92.0, 4.0):
        if tt not in t:
            continue
        i = t.index(tt)
        x = c[i] / np.linalg.norm(c[i], axis=-1, keepdims=True)
        side = np.sign(x @ u)
        out = []
        for sign, name in ((1.0, "+u"), (-1.0, "-u")):
            mass = m[i] * (side == sign)
            mean = (mass[:, None] * x).sum(0)
            mean /= np.linalg.norm(mean)
            ang = np.arccos(np.clip(x @ mean, -1.0, 1.0))
            spread = np.sqrt((mass * ang**2).sum() / mass.sum())
            off_u = np.arccos(np.clip(sign * mean @ u, -1.0, 1.0))
            off_w = np.arccos(np.clip(sign * mean @ w, -1.0, 1.0))
            out.append(
                f"{name}: mass {mass.sum():.4f}, {off_u:.3f} from {name}, "
                f"{off_w:.3f} from {name.replace('u', 'w')}, spread {spread:.4f}"
            )
        print(f"t = {tt:5.1f}  W2 {w2[i]:.4f}  " + " | ".join(out))


if __name__ == "__main__":
    main(sys.argv[1])
