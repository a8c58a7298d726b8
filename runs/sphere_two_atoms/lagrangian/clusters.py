"""Where the two clusters of a study file sit over time (docs/concentration.md).

For each snapshot from t = 20 on (every 4; absolute times: a handover file's clock plus its T0,
../mechanism.start_time): the mass-weighted mean direction of the mass in
each hemisphere about u (the top eigenvector of the symmetric part of A = V B^T, B = Q^T K, as
../mechanism.py takes it), its angles from +-u and from +-w, w = B^T u / |B^T u| (where the
softmax at u looks, 0.337 rad from u), and the mass-weighted RMS angle about it (the spread,
from the recording mesh's centroids). Then, for each cluster c (the heaviest recording cell of
its hemisphere), log(Z_tail / Z_self) as the run has it, the log of sum_cells m e^{beta <c, B y>}
over the cells farther than 0.1 rad from c against the same sum over those within, beside the
mechanism's prediction (../mechanism.py, Geometry.log_ratio): the cluster is released when it
crosses 0.

Usage: .venv/bin/python runs/sphere_two_atoms/lagrangian/clusters.py cases/FILE.nc [EVERY]
(EVERY: the spacing of the rows of the second table, default 4)
"""

import sys
from pathlib import Path

import numpy as np
import xarray as xr
from scipy.special import logsumexp

from spheredens.geometry import dataset_sphere_points

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from mechanism import Geometry, start_time  # noqa: E402

#: the radius about a cluster's heaviest cell that counts as the cluster itself
NEAR = 0.1


def positions(d: xr.Dataset) -> np.ndarray:
    """Where each recorded cell's mass sits, (time, ..., 3): a particle run's recording cells at
    their mass centroids, an ``fv`` file's cells (one axis, ``cell``) at their centres."""
    if "rho_centroid_xyz" in d:
        return d["rho_centroid_xyz"].values
    x = dataset_sphere_points(d)
    return np.broadcast_to(x, (d.sizes["time"], *x.shape))


def cluster_series(path: str) -> dict:
    """Each cluster's log(Z_tail / Z_self) from the file's cells, the mechanism's, and its
    offset from +-u in degrees, at every snapshot from t = 16 (docstring): arrays "ratio",
    "mechanism", "offset" of shape (snapshots, 2), columns the clusters at +u and -u, with
    "time" (absolute: a handover file's own clock plus its T0, mechanism.start_time) and
    "beta"."""
    g = Geometry()
    with xr.open_dataset(path) as d:
        beta = float(d.attrs["beta"])
        times = d["time"].values + start_time(path)
        mass = (d["rho"].values * d["cell_area"].values).reshape(len(times), -1)
        centroids = positions(d).reshape(len(times), -1, 3)
    keep = np.flatnonzero(times >= 16.0)
    ratio, mechanism, offset = (np.empty((len(keep), 2)) for _ in range(3))
    for k, i in enumerate(keep):
        ok = mass[i] > 0
        y = centroids[i][ok] / np.linalg.norm(centroids[i][ok], axis=1, keepdims=True)
        log_m = np.log(mass[i][ok])
        for j, sign in enumerate((1.0, -1.0)):
            c = y[np.argmax(np.where(sign * (y @ g.u) > 0, log_m, -np.inf))]
            near = np.arccos(np.clip(y @ c, -1.0, 1.0)) < NEAR
            logit = beta * (y @ (g.B.T @ c)) + log_m
            ratio[k, j] = logsumexp(logit[~near]) - logsumexp(logit[near])
            mechanism[k, j] = g.log_ratio(float(times[i]), beta, sign)
            offset[k, j] = np.degrees(np.arccos(min(1.0, float(sign * c @ g.u))))
    return {
        "time": times[keep],
        "beta": beta,
        "ratio": ratio,
        "mechanism": mechanism,
        "offset": offset,
    }


def release(path: str, every: float = 4.0) -> None:
    """log(Z_tail / Z_self) of each cluster in the file against the mechanism's (docstring)."""
    s = cluster_series(path)
    print(
        f"log(Z_tail / Z_self), the file's and (in brackets) the mechanism's, beta = {s['beta']:g}:"
    )
    for k, t in enumerate(s["time"]):
        if t % every:
            continue
        out = [
            f"{name}: {s['ratio'][k, j]:7.2f} ({s['mechanism'][k, j]:7.2f}), "
            f"{s['offset'][k, j]:5.2f} deg from {name}"
            for j, name in enumerate(("+u", "-u"))
        ]
        print(f"t = {t:6.1f}  " + " | ".join(out))


def main(path: str) -> None:
    with xr.open_dataset(path) as d:
        c = positions(d)
        m = d["rho"].values * d["cell_area"].values
        t = list(d["time"].values + start_time(path))
        w2 = d["w2_projection"].values
        B = d["Q"].values.T @ d["K"].values
        A = d["V"].values @ B.T
    _, vectors = np.linalg.eigh(0.5 * (A + A.T))
    u = vectors[:, -1] * np.sign(vectors[0, -1])
    w = B.T @ u / np.linalg.norm(B.T @ u)
    for tt in np.arange(20.0, t[-1] + 1e-9, 4.0):
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
    release(sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 4.0)
