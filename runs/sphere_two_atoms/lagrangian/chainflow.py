"""The particles' velocities along the look chain against the PDE's (docs/concentration.md,
"The PDE's tail along the look chain"; about a minute).

A particle's log mass density changes along its path by minus the divergence of the velocity
there, so where a particle run's tail leaves the PDE's (lookchain.py --against), its
velocity's divergence must differ from the PDE's by about the rate it leaves at. For a
holes.py file (FILE.holes.npz: the particles within CAP rad of +-w and their velocities from
the scheme's own sums, every snapshot; --cap 0.45 reaches e*) and an fv run over the same
times (instability.py --run NLAT 0), at every snapshot from t = 16: within DISC rad of w,
look(w), look(look(w)) and e* (the chain of +w; of -w with --minus), the number of particles,
the median |v - v_fv| (v_fv the PDE's velocity at the same points: P_x V E[y], the softmax
mean over fv's cells, each cell's mass at its centre), and the divergence of the
least-squares linear fit of each field over the disc's particles (the particles', the PDE's
at the particles, and the zero-temperature field's mean); with --densities instead, the
particles' own log densities (log mass over the area of the parallelogram of their shape)
against fv's at the same points (median and standard deviation of the difference), the sum
of their areas over the disc's (1: they tile it), and the standard deviation of each
particle's own divergence (its area's rate from its shape's rate, which the scheme takes from
the sums' velocity gradient at the particle) about the zero-temperature field's there. With
--pde-masses the velocity table's divergences give way to the median |v' - v_fv|, v' the
point sums over the kept particles with each mass replaced by fv's density there times the
particle's own area: where the particles are and what area each stands for, without their
masses' errors (the kept particles alone reproduce the scheme's velocities on the chain: the
clusters weigh e^-82 of the tail there).

Usage: .venv/bin/python runs/sphere_two_atoms/lagrangian/chainflow.py FILE.holes.npz FV.nc
       [--minus] [--densities | --pde-masses]
"""

import sys
from pathlib import Path

import numpy as np
import xarray as xr
from lookchain import chain, load_cells, top_eigenvector  # beside this script
from scipy.spatial import cKDTree
from scipy.special import logsumexp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from mechanism import Geometry, field_and_divergence  # noqa: E402

BETA = 300.0
DISC = 0.07
#: points per block of the direct sums over fv's cells
BLOCK = 256


def fv_velocity(g: Geometry, x: np.ndarray, log_mass: np.ndarray, y: np.ndarray) -> np.ndarray:
    """P_x V E[y] under the weights m_j exp(beta <B^T x, y_j>) over the cells y_j (log masses
    log_mass; log-sum-exp, so any tail depth is exact)."""
    out = np.empty_like(x)
    for start in range(0, len(x), BLOCK):
        xb = x[start : start + BLOCK]
        logits = log_mass[None, :] + BETA * (xb @ g.B) @ y.T  # <B^T x, y> = x^T B y
        weights = np.exp(logits - logsumexp(logits, axis=1, keepdims=True))
        m = weights @ y
        v = m @ g.V.T
        out[start : start + BLOCK] = v - np.sum(v * xb, axis=1, keepdims=True) * xb
    return out


def divergence(x: np.ndarray, v: np.ndarray, centre: np.ndarray) -> float:
    """The divergence of the least-squares linear fit of v over the points x (tangent frame
    at ``centre``)."""
    e1 = np.cross(centre, np.eye(3)[int(np.argmin(np.abs(centre)))])
    e1 /= np.linalg.norm(e1)
    e2 = np.cross(centre, e1)
    design = np.column_stack([np.ones(len(x)), x @ e1, x @ e2])
    fit = np.linalg.lstsq(design, np.column_stack([v @ e1, v @ e2]), rcond=None)[0]
    return float(fit[1, 0] + fit[2, 1])


def main(
    holes: str, fv: str, sign: float = 1.0, densities: bool = False, pde_masses: bool = False
) -> None:
    g = Geometry(t_max=1.0)
    links = chain(g, sign)
    centres = {"w": links[0], "L1": links[1], "L2": links[2], "e*": top_eigenvector(g, sign)}
    times_fv, log_rho, points = load_cells(fv)
    tree = cKDTree(points[0])
    from_fv = {float(round(t, 6)): k for k, t in enumerate(times_fv)}
    with np.load(holes) as kept:
        arrays = dict(kept)
    times = sorted({float(name.split("_")[0]) for name in arrays})
    with xr.open_dataset(fv) as d:
        area = d["cell_area"].values
    columns = (
        "log mass / area - fv's log rho (median, sd), areas / the disc's, sd of the "
        "particles' own divergence"
        if densities
        else "median |v - v_fv|, and |v' - v_fv| with the PDE's masses"
        if pde_masses
        else "median |v - v_fv|, divergence (particles / fv at them / zero temperature)"
    )
    print(
        f"chain of {'+' if sign > 0 else '-'}w: the particles of {Path(holes).name} against "
        f"{Path(fv).name}; per disc: particles, {columns}"
    )
    for t in (t for t in times if t >= 16.0):
        k = from_fv.get(float(round(t, 6)))
        if k is None:
            continue
        key = f"{t:.2f}"
        x, v = arrays[key + "_x"], arrays[key + "_velocity"]
        y = points[k]
        ok = np.isfinite(log_rho[k])
        log_mass = log_rho[k][ok] + np.log(area[ok])
        row = []
        for name, c in centres.items():
            sel = np.arccos(np.clip(x @ c, -1.0, 1.0)) < DISC
            if sel.sum() < 5:
                row.append(f"{name}: {int(sel.sum())}")
                continue
            if densities:
                shape = arrays[key + "_shape"][sel]
                p_area = np.linalg.norm(np.cross(shape[:, :, 0], shape[:, :, 1]), axis=1)
                gap = (
                    arrays[key + "_log_m"][sel] - np.log(p_area) - log_rho[k][tree.query(x[sel])[1]]
                )
                tiled = p_area.sum() / (2.0 * np.pi * (1.0 - np.cos(DISC)))
                rate = arrays[key + "_shape_rate"][sel]
                f1, f2, r1, r2 = shape[:, :, 0], shape[:, :, 1], rate[:, :, 0], rate[:, :, 1]
                own = np.sum((np.cross(r1, f2) + np.cross(f1, r2)) * x[sel], axis=1) / np.sum(
                    np.cross(f1, f2) * x[sel], axis=1
                )
                own -= [field_and_divergence(p, g.B, g.V)[1] for p in x[sel]]
                row.append(
                    f"{name}: {int(sel.sum())}, {np.median(gap):+.2f} "
                    f"(sd {gap.std():.2f}), areas {tiled:.2f}, div sd {np.std(own):.3f}"
                )
                continue
            vf = fv_velocity(g, x[sel], log_mass, y[ok])
            gap = np.median(np.linalg.norm(v[sel] - vf, axis=1))
            if pde_masses:
                shape = arrays[key + "_shape"]
                own = np.linalg.norm(np.cross(shape[:, :, 0], shape[:, :, 1]), axis=1)
                remassed = log_rho[k][tree.query(x)[1]] + np.log(own)
                v_re = fv_velocity(g, x[sel], remassed, x)
                gap_re = np.median(np.linalg.norm(v_re - vf, axis=1))
                row.append(f"{name}: {int(sel.sum())}, {gap:.4f}, PDE masses {gap_re:.4f}")
                continue
            zero = np.mean([field_and_divergence(p, g.B, g.V)[1] for p in x[sel]])
            row.append(
                f"{name}: {int(sel.sum())}, {gap:.4f}, {divergence(x[sel], v[sel], c):+.2f}"
                f" / {divergence(x[sel], vf, c):+.2f} / {zero:+.2f}"
            )
        print(f"  t = {t:5g}: " + "; ".join(row))


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    main(
        args[0],
        args[1],
        -1.0 if "--minus" in sys.argv else 1.0,
        "--densities" in sys.argv,
        "--pde-masses" in sys.argv,
    )
