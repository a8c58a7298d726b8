"""Is the tail where the look chain ends unstable at the kernel's scale? (issue 30; ``fv``, the
PDE itself, not the particle scheme; docs/concentration.md, "Is the tail at e* unstable").

The top eigenvector e* of B^T looks at itself: a point near it moves with the softmax mean over
the tail about its own neighbourhood, and a bump of the tail there pulls its neighbours in (the
attention's own clustering, inside the tail, where the tail outweighs the clusters in the
softmax). Linearized with the Laplace approximation (the kernel a Gaussian of width
sigma = 1 / sqrt(kappa), kappa = beta |B^T e*|), a perturbation exp(i k.x) of log rho moves
the softmax mean by sigma^2 grad(G * delta log rho) and grows at up to
|V| (sigma k)^2 exp(-(sigma k)^2 / 2) per unit time, while the flow X carries it away from
e* (|X(e*)| = 0.17) and down the look chain toward w.

This script continues ``fv``'s early run (``study.py --fv-early 300 NLAT``, the state at
t = 12) twice with the same configuration: as it is (EPS = 0), and with log rho perturbed by
EPS phi, phi(x) = exp(-theta^2 / (2 s^2)) cos(k xi) (theta the angle from e*, xi the tangent
coordinate at e* toward w, s = ENVELOPE rad, k = 1 / sigma), the mass renormalized. ``fv`` is
deterministic and smooth, so the difference of the two runs, delta = log rho_EPS - log rho_0
cell by cell, is the PDE's answer to the perturbation (for small EPS its linear answer, plus
the scheme's numerical diffusion, which only damps it).

Usage:
  .venv/bin/python runs/sphere_two_atoms/lagrangian/instability.py --run NLAT EPS [--t-end T]
  .venv/bin/python runs/sphere_two_atoms/lagrangian/instability.py --table NLAT EPS
  .venv/bin/python runs/sphere_two_atoms/lagrangian/instability.py --departure NLAT EPS...
  .venv/bin/python runs/sphere_two_atoms/lagrangian/instability.py --cluster-cells NLAT EPS T...
      (each cluster's heaviest cell at the times T: its mass, the rates at which the scheme's
      face velocities carry mass out of it and into it, the cluster's centroid and spread, and
      where near the cell the point sums over the cells give the least |X|)
With --chain T0 (each of the three): the unperturbed run's snapshot at T0 perturbed instead on
+w's look chain (a bump of the same form on w, look(w) and e*: where the particle runs'
tails leave the PDE's), in cases/instability/fv_nlat{NLAT}_beta300_chain{T0}_
eps{EPS}.nc, compared with the unperturbed run.
Files: cases/instability/fv_nlat{NLAT}_beta300_eps{EPS}.nc. The table: at each snapshot, the
largest |delta| over all cells with where it sits (degrees from e* and from w), the largest
within 0.15 rad of e*, 0.08 rad of the look chain's links look(w), look(look(w)) and of w,
and the clusters' shift (the mass centroid within 0.1 rad of +-u, degrees), with |delta|'s
growth rate between snapshots.
"""

from __future__ import annotations

import argparse
import math
import shutil
import sys
import tomllib
from pathlib import Path

import study  # beside this script; first, before clusters.py puts ../ (its study.py) on sys.path

# isort: split
import clusters  # beside this script
import handover
import numpy as np
import xarray as xr
from lookchain import cell_points, chain, top_eigenvector  # beside this script

import spheredens as sd
from spheredens.analysis import curve_summary
from spheredens.interaction._pruned import log_mass_velocity
from spheredens.recorder import checkpoint_digest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from mechanism import Geometry  # noqa: E402

BETA = 300.0
OUT = study.OUT / "instability"
#: the perturbation's envelope about e* (rad)
ENVELOPE = 0.1
NEAR_E, LINK, CLUSTER = 0.15, 0.08, 0.1


def copy_path(nlat: int, eps: float) -> Path:
    return OUT / f"fv_nlat{nlat}_beta{BETA:g}_eps{eps:g}.nc"


def bump(g: Geometry, x: np.ndarray, centre: np.ndarray, toward: np.ndarray) -> np.ndarray:
    """exp(-theta^2 / (2 ENVELOPE^2)) cos(sqrt(kappa) xi) at the points x: theta the angle from
    ``centre``, xi the tangent coordinate there toward ``toward``, kappa = beta |B^T centre|."""
    kappa = BETA * float(np.linalg.norm(g.B.T @ centre))
    t1 = toward - (toward @ centre) * centre
    t1 /= np.linalg.norm(t1)
    theta = np.arccos(np.clip(x @ centre, -1.0, 1.0))
    return np.exp(-(theta**2) / (2.0 * ENVELOPE**2)) * np.cos(math.sqrt(kappa) * (x @ t1))


def perturbation(g: Geometry, x: np.ndarray) -> np.ndarray:
    """phi at the points x (module docstring)."""
    return bump(g, x, top_eigenvector(g), g.w)


def chain_perturbation(g: Geometry, x: np.ndarray) -> np.ndarray:
    """The sum of :func:`bump` on +w's look chain at w, look(w) (each toward the next) and e*
    (toward w; 9.3 and 7.9 degrees apart, look^2(w) and beyond lie within 3.7 degrees of e*):
    where the particle runs' tails leave the PDE's (docs/concentration.md, seventeenth and
    eighteenth sessions)."""
    links = [*chain(g, links=2), top_eigenvector(g)]
    ahead = [*links[1:], g.w]
    return sum(bump(g, x, p, q) for p, q in zip(links, ahead))


def chain_path(nlat: int, t0: float, eps: float) -> Path:
    return OUT / f"fv_nlat{nlat}_beta{BETA:g}_chain{t0:g}_eps{eps:g}.nc"


def start_chain(nlat: int, t0: float, eps: float) -> Path:
    """The unperturbed run's snapshot at t0 (its rho, float64: the whole state of ``fv``) as the
    checkpoint of a new file, log rho perturbed by EPS :func:`chain_perturbation` and the mass
    renormalized (written once)."""
    target = chain_path(nlat, t0, eps)
    if target.exists():
        return target
    with xr.open_dataset(copy_path(nlat, 0.0)) as ds:
        ds = ds.load()
    i = int(np.flatnonzero(np.isclose(ds["time"].values, t0))[0])
    ds = ds.isel(time=slice(0, i + 1))
    rho = np.asarray(ds["rho"].values[i], dtype=float)
    rho = rho * np.exp(eps * chain_perturbation(Geometry(t_max=1.0), cell_points(ds)))
    ds["checkpoint_state"].values[0] = rho / float(np.sum(rho * ds["cell_area"].values))
    ds.attrs["checkpoint_time"] = float(ds["time"].values[i])
    return write_start(ds, target)


def write_start(ds: xr.Dataset, target: Path) -> Path:
    """``ds`` (its checkpoint changed) written to ``target`` with a new checksum, atomically."""
    ds.attrs["checkpoint_sha256"] = checkpoint_digest(ds)
    tmp = target.with_suffix(".tmp")
    ds.to_netcdf(tmp)
    shutil.move(tmp, target)
    return target


def start_copy(nlat: int, eps: float) -> Path:
    """The early run's file with its checkpoint perturbed (written once)."""
    target = copy_path(nlat, eps)
    if target.exists():
        return target
    OUT.mkdir(parents=True, exist_ok=True)
    with xr.open_dataset(study.EARLY / f"fv_nlat{nlat}_beta{BETA:g}.nc") as ds:
        ds = ds.load()
    rho = np.asarray(ds["checkpoint_state"].values[0], dtype=float)
    area = ds["cell_area"].values
    rho = rho * np.exp(eps * perturbation(Geometry(t_max=1.0), cell_points(ds)))
    ds["checkpoint_state"].values[0] = rho / float(np.sum(rho * area))
    return write_start(ds, target)


def run(nlat: int, eps: float, t_end: float, target: Path | None = None) -> None:
    target = target or start_copy(nlat, eps)
    with xr.open_dataset(target) as ds:
        data = tomllib.loads(ds.attrs["config"])
    data["time"] = {
        "t_end": float(t_end),
        "cfl": data["time"].get("cfl", 0.4),
        "snapshots": int(round(t_end / study.SPACING)) + 1,
    }
    data["output"] = {"path": str(target), "figure": False}
    config = sd.config_from_dict(data, base_dir=study.HERE.parent)
    sd.run(config, output=target, resume=True, progress=True)


def perturbed_path(nlat: int, eps: float, chain_t0: float | None) -> Path:
    """The run perturbed at t = 12 about e* (``chain_t0`` None) or at chain_t0 on the chain;
    EPS = 0 the unperturbed run."""
    return (
        copy_path(nlat, eps) if chain_t0 is None or eps == 0.0 else chain_path(nlat, chain_t0, eps)
    )


def table(nlat: int, eps: float, chain_t0: float | None = None) -> None:
    g = Geometry(t_max=1.0)
    e = top_eigenvector(g)
    links = chain(g)
    start = 12.0 if chain_t0 is None else chain_t0
    with (
        xr.open_dataset(copy_path(nlat, 0.0)) as a,
        xr.open_dataset(perturbed_path(nlat, eps, chain_t0)) as b,
    ):
        times = np.intersect1d(a["time"].values, b["time"].values)
        x = cell_points(a)
        area = a["cell_area"].values
        print(f"fv, nlat = {nlat}, beta = {BETA:g}, eps = {eps:g}: delta = log rho_eps - log rho_0")
        print(
            "   t | max|delta| (deg from e*, w) | e* | look^2(w) | look(w) | w | "
            "+u, -u shift (deg) | rate"
        )
        previous = None
        for t in times[times > start + 1e-9]:  # the snapshot at start predates the perturbation
            ra = a["rho"].sel(time=t).values
            rb = b["rho"].sel(time=t).values
            delta = np.log(rb) - np.log(ra)
            k = int(np.argmax(np.abs(delta)))
            big = abs(float(delta[k]))
            where = [math.degrees(math.acos(min(1.0, float(x[k] @ p)))) for p in (e, g.w)]
            row = [f"{t:5.1f} | {big:.2e} ({where[0]:.1f}, {where[1]:.1f})"]
            for p, r in ((e, NEAR_E), (links[2], LINK), (links[1], LINK), (links[0], LINK)):
                sel = x @ p > math.cos(r)
                row.append(f"{np.max(np.abs(delta[sel])):.2e}")
            shifts = []
            for c in (g.u, -g.u):
                sel = x @ c > math.cos(CLUSTER)
                ca = (ra[sel] * area[sel]) @ x[sel]
                cb = (rb[sel] * area[sel]) @ x[sel]
                ca, cb = ca / np.linalg.norm(ca), cb / np.linalg.norm(cb)
                shifts.append(math.degrees(np.linalg.norm(cb - ca)))
            row.append(f"{shifts[0]:.1e}, {shifts[1]:.1e}")
            rate = (
                ""
                if previous is None
                else f"{math.log(big / previous[1]) / (t - previous[0]):+.2f}"
            )
            row.append(rate)
            previous = (t, big)
            print(" | ".join(row))


def departure(nlat: int, eps_values: list[float], chain_t0: float | None = None) -> None:
    """The departure of each run of the pair: the first minimum of W2 (t), the smallest W2 (t;
    "still falling" when it is the last snapshot), the departure (W2 > 2 min W2 + 0.02, as
    ``study.py`` and ``handover.py --table`` have it), the rise (W2 > min W2 + RISE), each
    cluster's release (its heaviest cell more than RELEASE_DEGREES from +-u, and where its
    log(Z_tail / Z_self) from the file's cells first falls below 0, ``clusters.py``) and the
    wall time so far."""
    print(
        f"fv, nlat = {nlat}, beta = {BETA:g}, from t = 12 (study.py --fv-early), perturbed by EPS"
    )
    print(
        "| EPS | first min W2 (t) | min W2 (t) | departure | rise | released: +u, -u "
        f"(> {handover.RELEASE_DEGREES:g} deg) | log Z ratio < 0: +u, -u | last t | wall |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for eps in eps_values:
        path = perturbed_path(nlat, eps, chain_t0)
        with xr.open_dataset(path) as ds:
            t, w2 = ds["time"].values, ds["w2_projection"].values
            wall = float(
                ds.attrs.get("wall_time_total_seconds", ds.attrs["checkpoint_wall_seconds"])
            )
            status = ds.attrs.get("run_status")
        first = study.first_minimum(w2)
        s = curve_summary(t, w2)
        falling = ", still falling" if s["t_min"] == s["t_last"] else ""
        risen = np.flatnonzero((t > s["t_min"]) & (w2 > s["min_w2"] + handover.RISE))
        rise = float(t[risen[0]]) if risen.size else math.nan
        series = clusters.cluster_series(str(path))
        crossed = []
        for j in range(2):
            below = np.flatnonzero(series["ratio"][:, j] < 0.0)
            crossed.append(float(series["time"][below[0]]) if below.size else math.nan)
        print(
            f"| {eps:g} | {w2[first]:.5f} ({t[first]:g}) | {s['min_w2']:.5f} ({s['t_min']:g}"
            f"{falling}) | {s['departure_time']:g} | {rise:g} | "
            + "{:g}, {:g}".format(*handover.released(path))
            + " | {:g}, {:g}".format(*crossed)
            + f" | {s['t_last']:g} | {wall:.0f} s ({status}) |"
        )


def slowest_point(
    model, x: np.ndarray, mass: np.ndarray, centre: np.ndarray
) -> tuple[float, float]:
    """Where |X| is least on an 81 x 81 tangent grid of +-0.04 rad about ``centre``, X the point
    sums over the cells (each cell's mass at its centre, certified log-sum-exp): its distance
    from ``centre`` (rad), and |X| at ``centre``."""
    east = np.cross(centre, [0.0, 0.0, 1.0])
    east /= np.linalg.norm(east)
    north = np.cross(centre, east)
    s = np.linspace(-0.04, 0.04, 81)
    grid = centre + s[:, None, None] * east + s[None, :, None] * north
    grid = (grid / np.linalg.norm(grid, axis=-1, keepdims=True)).reshape(-1, 3)
    ok = mass > 0.0
    speed = np.linalg.norm(log_mass_velocity(model, grid, x[ok], np.log(mass[ok])), axis=1)
    k = int(np.argmin(speed))
    return math.acos(min(1.0, float(grid[k] @ centre))), float(speed[len(grid) // 2])


def cluster_cells(nlat: int, eps: float, times: list[float], chain_t0: float | None) -> None:
    """Each cluster on ``fv``'s mesh at the snapshots ``times``: the mass of its heaviest cell
    (in the hemisphere about +-u), the rates at which the scheme's face velocities carry mass
    out of and into that cell (sum over its faces of |f| max(+-u_f, 0) / |c|, per unit of time),
    and the centroid (degrees from +-u) and RMS spread (rad) of the mass within 0.3 rad."""
    path = perturbed_path(nlat, eps, chain_t0)
    g = Geometry(t_max=1.0)
    with xr.open_dataset(path) as ds:
        ds = ds.load()
    data = tomllib.loads(ds.attrs["config"])
    data["output"] = {"path": str(path), "figure": False}
    config = sd.config_from_dict(data, base_dir=study.HERE.parent)
    problem = sd.Problem.from_config(config)
    scheme = sd.make_scheme(problem, config.discretization)
    mesh = scheme.grid
    x, area = cell_points(ds), ds["cell_area"].values
    print(f"fv, nlat = {nlat}, beta = {BETA:g}, {path.name}: each cluster's heaviest cell")
    print(
        "| t | cluster | cell mass | out of it (per unit time) | into it | centroid (deg) | "
        "RMS (rad) | least |X| from the cell's centre (rad) | |X| there |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for t in times:
        rho = ds["rho"].sel(time=t).values[None, :]
        u = scheme.normal_velocity(rho)[0][0] * mesh.face_length
        for sign, name in ((1.0, "+u"), (-1.0, "-u")):
            c = int(np.argmax(rho[0] * area * (sign * (x @ g.u) > 0.0)))
            left, right = mesh.face_left == c, mesh.face_right == c
            out = np.maximum(u[left], 0.0).sum() - np.minimum(u[right], 0.0).sum()
            into = np.maximum(u[right], 0.0).sum() - np.minimum(u[left], 0.0).sum()
            near = x @ (sign * g.u) > math.cos(0.3)
            mass = rho[0, near] * area[near]
            centre = mass @ x[near]
            centre /= np.linalg.norm(centre)
            offset = math.degrees(math.acos(min(1.0, float(centre @ (sign * g.u)))))
            spread = math.sqrt(
                mass @ np.arccos(np.clip(x[near] @ centre, -1.0, 1.0)) ** 2 / mass.sum()
            )
            still, speed = slowest_point(problem.model, x, rho[0] * area, x[c])
            print(
                f"| {t:g} | {name} | {rho[0, c] * area[c]:.4f} | {out / area[c]:.3f} | "
                f"{into / area[c]:.3f} | {offset:.2f} | {spread:.4f} | {still:.4f} | "
                f"{speed:.1e} |"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", nargs=2, type=float, metavar=("NLAT", "EPS"))
    parser.add_argument("--t-end", type=float, default=30.0)
    parser.add_argument("--table", nargs=2, type=float, metavar=("NLAT", "EPS"))
    parser.add_argument("--departure", nargs="+", type=float, metavar="NLAT EPS")
    parser.add_argument("--chain", type=float, metavar="T0")
    parser.add_argument("--cluster-cells", nargs="+", type=float, metavar="NLAT EPS T")
    args = parser.parse_args()
    if args.run:
        nlat, eps = int(args.run[0]), args.run[1]
        target = None if args.chain is None else start_chain(nlat, args.chain, eps)
        run(nlat, eps, args.t_end, target)
    if args.table:
        table(int(args.table[0]), args.table[1], args.chain)
    if args.departure:
        departure(int(args.departure[0]), args.departure[1:], args.chain)
    if args.cluster_cells:
        nlat, eps, *times = args.cluster_cells
        cluster_cells(int(nlat), eps, times, args.chain)


if __name__ == "__main__":
    main()
