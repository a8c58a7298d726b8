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

FILE may also be an fv run's file (study.py --fv-early, instability.py): its cells at their
centres, the PDE's own tail at beta = 300 to hold the particle runs' against.

With --against FV.nc the reference is that fv run's tail (the cell nearest each recording
cell, at the same absolute time; snapshots FV.nc lacks are skipped) instead of the
zero-temperature tail: where a particle run's tail leaves the PDE's.

Usage: .venv/bin/python runs/sphere_two_atoms/lagrangian/lookchain.py FILE.nc [FILE.holes.npz]
       [--minus] [--against FV.nc]   (--minus: the chain of -w, where the cluster about -u looks)
"""

import math
import sys
from pathlib import Path

import numpy as np
import xarray as xr
from scipy.spatial import cKDTree
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


def cell_points(ds: xr.Dataset) -> np.ndarray:
    """An fv file's cell centres as unit vectors (n, 3), from its lat and lon (degrees)."""
    lat, lon = np.radians(ds["lat"].values), np.radians(ds["lon"].values)
    return np.stack((np.cos(lat) * np.cos(lon), np.cos(lat) * np.sin(lon), np.sin(lat)), axis=1)


def load_cells(path: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A run file's absolute times, log rho and cell points (a particle run's recording cells
    at their mass centroids; an fv run's cells at their centres)."""
    with xr.open_dataset(path) as d:
        times = d["time"].values + start_time(path)
        if "log_rho" in d:
            log_rho = d["log_rho"].values.reshape(len(times), -1)
            points = d["rho_centroid_xyz"].values.reshape(len(times), -1, 3)
            points = points / np.linalg.norm(points, axis=2, keepdims=True)
        else:
            with np.errstate(divide="ignore"):
                log_rho = np.log(np.maximum(d["rho"].values, 0.0))
            centre = cell_points(d)
            points = np.broadcast_to(centre, (len(times), *centre.shape))
    return times, log_rho, points


def fv_reference(path: str):
    """log rho of an fv file at (points, t): the cell nearest each point, at the snapshot t
    (None where the file has no snapshot at t)."""
    times, log_rho, points = load_cells(path)
    tree = cKDTree(points[0])

    def reference(y: np.ndarray, t: float) -> np.ndarray | None:
        k = int(np.argmin(np.abs(times - t)))
        if abs(times[k] - t) > 1e-9:
            return None
        return log_rho[k][tree.query(y)[1]]

    return reference


def tail_table(g: Geometry, path: str, sign: float = 1.0, against: str | None = None) -> None:
    times, log_rho, centroids = load_cells(path)
    if against is None:

        def reference(y, t):
            return plateau.log_density(g, y, (t,))[0]
    else:
        reference = fv_reference(against)
    links, e = chain(g, sign), top_eigenvector(g, sign)
    steps = ", ".join(
        f"{math.degrees(math.acos(min(1.0, a @ b))):.2f}" for a, b in zip(links, links[1:])
    )
    print(
        f"look chain of {'+' if sign > 0 else '-'}w: steps of {steps} degrees; e* "
        f"{math.degrees(math.acos(e @ links[0])):.1f} degrees from it; log rho against "
        + ("the zero-temperature tail" if against is None else against)
    )
    for t in TIMES:
        k = int(np.argmin(np.abs(times - t)))
        if abs(times[k] - t) > 1e-9:
            continue
        y = centroids[k]
        if reference(y[:1], t) is None:
            continue
        row = []
        for i, p in enumerate(links):
            sel = (np.arccos(np.clip(y @ p, -1.0, 1.0)) < LINK) & (log_rho[k] > plateau.EMPTY)
            if not sel.any():
                row.append(f"L{i} empty")
                continue
            diff = log_rho[k][sel] - reference(y[sel], t)
            row.append(f"L{i} {int(sel.sum())} {np.median(diff):+.2f}")
        for name, p in (("e*", e), ("w", links[0])):
            sel = (np.arccos(np.clip(y @ p, -1.0, 1.0)) < SCATTER) & (log_rho[k] > plateau.EMPTY)
            if sel.sum() >= 3:
                diff = log_rho[k][sel] - reference(y[sel], t)
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
        print(
            f"  t = {t:5g}: {int(sel.sum())} particles; log mass {mass:+.2f} "
            f"from the zero-temperature tail's; divergence {fit[1, 0] + fit[2, 1]:+.3f} against "
            f"{np.mean([f[1] for f in field]):+.3f}; |v - X| {spread:.4f} "
            f"(|X| {np.median(np.linalg.norm(X, axis=1)):.3f}), |mean v - X| "
            f"{np.linalg.norm(gap.mean(axis=0)):.4f}"
        )


def main(
    path: str, holes: str | None = None, sign: float = 1.0, against: str | None = None
) -> None:
    g = Geometry(t_max=100.0)
    tail_table(g, path, sign, against)
    if holes:
        disc_table(g, holes)


if __name__ == "__main__":
    args, against = sys.argv[1:], None
    if "--against" in args:
        i = args.index("--against")
        against = args[i + 1]
        del args[i : i + 2]
    args = [a for a in args if a != "--minus"]
    main(*args[:2], sign=-1.0 if "--minus" in sys.argv else 1.0, against=against)
