"""The tail along the look chain of +w against the zero-temperature tail (docs/concentration.md,
"What opens the hole"; seconds).

A particle at y moves with the softmax mean over the tail about its look point
look(y) = B^T y / |B^T y|; from w (where the cluster about +u looks) the chain w, look(w),
look(look(w)), ... converges onto the top eigenvector e* of B^T, the point that looks at
itself. For a handover file: at each of TIMES, the recording cells within 0.08 rad of the
first five links (their number and their median log rho minus the zero-temperature tail's,
../plateau.py), and the scatter (standard deviation of that difference) of the cells within
0.1 rad of e* and of w. With a holes.py file (FILE.holes.npz) also, at every snapshot from
t = 24, the particles within 0.07 rad of +w: their log mass against the zero-temperature
tail's over the disc, the divergence of the least-squares linear fit of their velocities
against the zero-temperature field's, and the median and mean of v - X (X the
zero-temperature field; |the mean of v - X|: a drift of the whole disc).

Usage: .venv/bin/python runs/sphere_two_atoms/lagrangian/lookchain.py FILE.nc [FILE.holes.npz]
       [--minus]   (--minus: the chain of -w, where the cluster about -u looks)
"""

import math
import sys
from pathlib import Path

import numpy as np
import xarray as xr
from scipy.special import logsumexp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import plateau  # noqa: E402
from mechanism import Geometry, field_and_divergence, start_time  # noqa: E402

TIMES = (16.0, 20.0, 24.0, 28.0, 30.0, 32.0, 34.0, 36.0)
LINK, SCATTER, DISC = 0.08, 0.1, 0.07


def chain(g: Geometry, sign: float = 1.0, links: int = 5) -> list[np.ndarray]:
    points = [sign * g.w]
    for _ in range(links - 1):
        q = g.B.T @ points[-1]
        points.append(q / np.linalg.norm(q))
    return points


def top_eigenvector(g: Geometry, sign: float = 1.0) -> np.ndarray:
    values, vectors = np.linalg.eig(g.B.T)
    e = np.real(vectors[:, int(np.argmax(np.real(values)))])
    return e * np.sign(e @ (sign * g.w))


def tail_table(g: Geometry, path: str, sign: float = 1.0) -> None:
    with xr.open_dataset(path) as d:
        times = d["time"].values + start_time(path)
        log_rho = d["log_rho"].values.reshape(len(times), -1)
        centroids = d["rho_centroid_xyz"].values.reshape(len(times), -1, 3)
    links, e = chain(g, sign), top_eigenvector(g, sign)
    steps = ", ".join(f"{math.degrees(math.acos(min(1.0, a @ b))):.2f}"
                      for a, b in zip(links, links[1:]))
    print(f"look chain of {'+' if sign > 0 else '-'}w: steps of {steps} degrees; e* "
          f"{math.degrees(math.acos(e @ links[0])):.1f} degrees from it")
    for t in TIMES:
        k = int(np.argmin(np.abs(times - t)))
        if abs(times[k] - t) > 1e-9:
            continue
        y = centroids[k] / np.linalg.norm(centroids[k], axis=1, keepdims=True)
        row = []
        for i, p in enumerate(links):
            sel = (np.arccos(np.clip(y @ p, -1.0, 1.0)) < LINK) & (log_rho[k] > plateau.EMPTY)
            if not sel.any():
                row.append(f"L{i} empty")
                continue
            diff = log_rho[k][sel] - plateau.log_density(g, y[sel], (t,))[0]
            row.append(f"L{i} {int(sel.sum())} {np.median(diff):+.2f}")
        for name, p in (("e*", e), ("w", links[0])):
            sel = (np.arccos(np.clip(y @ p, -1.0, 1.0)) < SCATTER) & (log_rho[k] > plateau.EMPTY)
            if sel.sum() >= 3:
                diff = log_rho[k][sel] - plateau.log_density(g, y[sel], (t,))[0]
                row.append(f"sd at {name} {diff.std():.2f}")
        print(f"  t = {t:4g}: " + "; ".join(row))


def disc_table(g: Geometry, path: str) -> None:
    kept = np.load(path)
    times = sorted({float(name.split("_")[0]) for name in kept.files})
    w = g.w
    e1 = np.cross(w, np.eye(3)[int(np.argmin(np.abs(w)))])
    e1 /= np.linalg.norm(e1)
    e2 = np.cross(w, e1)
    points, area = plateau.cap_grid(w)
    inside = np.arccos(np.clip(points @ w, -1.0, 1.0)) < DISC
    print(f"the particles within {DISC} rad of +w (holes.py):")
    for t in (t for t in times if t >= 24.0):
        key = f"{t:.2f}"
        log_m, x, v = kept[key + "_log_m"], kept[key + "_x"], kept[key + "_velocity"]
        sel = np.arccos(np.clip(x @ w, -1.0, 1.0)) < DISC
        if sel.sum() < 5:
            print(f"  t = {t:5g}: {int(sel.sum())} particles")
            continue
        zero = logsumexp(plateau.log_density(g, points[inside], (t,))[0] + np.log(area[inside]))
        design = np.column_stack([np.ones(sel.sum()), x[sel] @ e1, x[sel] @ e2])
        fit = np.linalg.lstsq(design, np.column_stack([v[sel] @ e1, v[sel] @ e2]), rcond=None)[0]
        field = [field_and_divergence(p, g.B, g.V) for p in x[sel]]
        X = np.array([f[0] for f in field])
        gap = v[sel] - X
        mass = logsumexp(log_m[sel]) - zero
        spread = np.median(np.linalg.norm(gap, axis=1))
        print(f"  t = {t:5g}: {int(sel.sum())} particles; log mass {mass:+.2f} "
              f"from the zero-temperature tail's; divergence {fit[1, 0] + fit[2, 1]:+.3f} against "
              f"{np.mean([f[1] for f in field]):+.3f}; |v - X| {spread:.4f} "
              f"(|X| {np.median(np.linalg.norm(X, axis=1)):.3f}), |mean v - X| "
              f"{np.linalg.norm(gap.mean(axis=0)):.4f}")


def main(path: str, holes: str | None = None, sign: float = 1.0) -> None:
    g = Geometry(t_max=100.0)
    tail_table(g, path, sign)
    if holes:
        disc_table(g, holes)


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--minus"]
    main(*args[:2], sign=-1.0 if "--minus" in sys.argv else 1.0)
