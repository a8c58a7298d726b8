"""The two-atom case at low temperature: the early phase by ``fv``, the rest by ``log_lagrangian``.

The mass across the basins' border (dm, docs/concentration.md) is decided by t = 12, while the
density is still smooth enough for a mesh: ``fv`` converges it (nlat = 128, 256, 512: -6.63,
-6.73, -6.76e-5), the particle scheme does not (n = 32, 45, 46: -7.3, -6.0, -5.1). Here
``log_lagrangian`` continues ``fv``'s snapshot at t = T0 (``initial.name = "file"`` on fv's
reduced mesh: each cell one particle, its mass exactly), so the ladder has three refinements:
fv's nlat, the handover time T0, and the particle scheme's n and tolerance.

Each run writes its own file (time counted from T0) and, from an observer, a CSV of the
absolute time, W2 of the particles (each mass at its position) to Pi_# rho_0 of the original
rho_0 (not of the snapshot: the run's own ``w2_projection`` uses its initial density, the
snapshot) and dm at every snapshot.

Usage:
  .venv/bin/python runs/sphere_two_atoms/lagrangian/handover.py --run NLAT T0 N TOL [--t-end T]
      continue cases/early/fv_nlat{NLAT}_beta{BETA}.nc (``study.py --fv-early BETA NLAT``) at T0
      with log_lagrangian (n = N, tolerance TOL, merge 3, moments, limited, refine_look) to
      the absolute time T (default 20: past the first minimum at t = 17); resumed when its
      file is partial, extended with a larger --t-end
  .venv/bin/python runs/sphere_two_atoms/lagrangian/handover.py --table
      dm (1e-5) at t = 8, 10, 12 (absolute), the first minimum of W2 (t), the departure (W2 >
      2 min + 0.02) and the rise (W2 > min + RISE: on the jump when the cluster leaves, where
      the departure's level may fall on the slow climb before it) of every run present, with
      its wall time, and the release of each cluster (its heaviest recording cell more than
      RELEASE_DEGREES = 8 degrees from +-u, clusters.py)
  --coarsened (with --run): ``file_cells = "coarsened"``: fv's cells outside the look caps merged
      by the scheme's own n x n cells at the handover (files ..._coarsened.nc)
  --merge-tail WIDTH (with --run): ``merge_tail = 1``, ``merge_tail_width = WIDTH``: every unit
      of time the deep tail outside the look caps merged by cells of at most WIDTH kernel
      widths (0.4, the default width: the 128 x 128 cubed sphere at beta = 300, 256 at 1000;
      files ..._mt{WIDTH}.nc; the same particles bit for bit as ``tail_merge.py T 1 20 --cells
      128``, and 0.75 as ``--cells 64``)
  --beta BETA (default 300) with --run or --table: the inverse temperature; beta = 300 keeps
      its files in cases/handover/, any other in cases/handover/beta{BETA}/
  --on NLAT2 (with --run): hand over fv's state at NLAT remapped exactly (mass conserved cell by
      cell: the rings nest) onto the mesh of NLAT2 rings, so that a finer fv run hands over as
      many particles as a coarser one (nlat = 512 has 333 754 cells, 256 has 83 448)
  --follow-depth DEPTH (with --run): ``follow_depth = DEPTH``: the error control follows the
      particles within DEPTH e-folds of the heaviest mass (files ..._fd{DEPTH}.nc)
  --centroids (with --on): the remapped file also holds the centroid of fv's mass in each
      coarse cell (its exact first moment over fv's piecewise-constant cells,
      ``rho_centroid_xyz``), where each cell's particle is put instead of at the cell's centre
      (files fv{NLAT}on{NLAT2}c_...)
  --voronoi R (with --run): ``voronoi_shapes = R``: every R units of time the deep tail's
      shapes become its particles' spherical Voronoi cells, which the splits then fill (files
      ..._vo{R}.nc)
  --quadrature Q (with --run): ``quadrature = Q`` (points, the default; cells: each source
      particle's mass spread over its parallelogram; interpolant: the deep tail's sources from
      the particles' piecewise log-linear interpolant; files ..._q{Q}.nc)
  --remesh-tail R (with --run): ``remesh_tail = R``: every R units of time the deep tail put
      back on the n x n cubed sphere's cells (files ..._rt{R}.nc)
  --clock (with --run): each cluster's tail weight, speed and core from the scheme's own sums
      at every snapshot (clock.py; FILE.clock.csv beside the file, on the run's own clock:
      ``clock.py FILE`` prints it on the absolute one)
Files (beta = 300): cases/handover/fv{NLAT}[on{NLAT2}[c]]_t{T0}_n{N}_tol{TOL}.nc and .w2.csv
beside it (the remapped state: cases/handover/fv{NLAT}on{NLAT2}_t{T0}[_centroids].state.nc).
"""

from __future__ import annotations

import argparse
import csv
import math
from pathlib import Path

import numpy as np
import study  # beside this script
import xarray as xr
from clock import SchemeClock, clock_path  # beside this script (study.py imports it first)

import spheredens as sd
from spheredens.analysis import curve_summary
from spheredens.grids import RingMesh
from spheredens.schemes._sphere_lagrangian import QUADRATURES, unpack
from spheredens.simulate import Observer
from spheredens.targets import projection_target
from spheredens.transport import w2_to_antipodal_atoms

BETA = 300.0  # the default
HANDOVER = study.OUT / "handover"
VARIANT = study.Variant(merge=3.0, look=True, moments=True, limited=True)
COLUMNS = ["time", "w2", "mass_across"]
TIMES = (8.0, 10.0, 12.0)
#: the rise: the first snapshot after the minimum with W2 > min W2 + RISE
RISE = 0.1
#: a cluster is released at the first snapshot where its heaviest recording cell lies more
#: than this many degrees from +-u (``clusters.py``: it jumps from 1-7 to 11-16 degrees)
RELEASE_DEGREES = 8.0


def handover_dir(beta: float) -> Path:
    return HANDOVER if beta == BETA else HANDOVER / f"beta{beta:g}"


def original_target(beta: float):
    """Pi_# rho_0 of the case's own rho_0 (as ``study.py --across`` has it)."""
    return projection_target(study.case_config(beta, 16, 1e-4, study.SPACING))


class OriginalTarget(Observer):
    """Appends (t0 + t, W2 to the original Pi_# rho_0, dm) to ``path`` at every snapshot."""

    def __init__(self, path: Path, t0: float, beta: float) -> None:
        self.path, self.t0 = Path(path), float(t0)
        self.target = original_target(beta)

    def start(self, info: dict) -> None:
        if not self.path.exists():
            with self.path.open("w", newline="") as f:
                csv.writer(f).writerow(COLUMNS)

    def observe(self, t: float, state: np.ndarray) -> None:
        log_m, x, _, _ = unpack(state[0])
        x = x / np.linalg.norm(x, axis=1, keepdims=True)
        m = np.exp(log_m - log_m.max())
        m /= m.sum()
        w2 = w2_to_antipodal_atoms(x, m, self.target.points[0], float(self.target.masses[0]))
        dm = float(m[x @ self.target.points[0] > 0.0].sum() - self.target.masses[0])
        with self.path.open("a", newline="") as f:
            csv.writer(f).writerow([repr(self.t0 + float(t)), repr(w2), repr(dm)])


def case_path(
    nlat: int,
    t0: float,
    n: int,
    tol: float,
    on: int | None,
    beta: float,
    coarsened: bool = False,
    merge_tail: float | None = None,
    centroids: bool = False,
    follow_depth: float | None = None,
    voronoi: float | None = None,
    quadrature: str | None = None,
    remesh_tail: float | None = None,
) -> Path:
    source = f"fv{nlat}" + (f"on{on}" if on else "") + ("c" if centroids else "")
    tail = ("_coarsened" if coarsened else "") + (f"_mt{merge_tail:g}" if merge_tail else "")
    tail += f"_fd{follow_depth:g}" if follow_depth else ""
    tail += f"_vo{voronoi:g}" if voronoi else ""
    tail += f"_q{quadrature}" if quadrature else ""
    tail += f"_rt{remesh_tail:g}" if remesh_tail else ""
    return handover_dir(beta) / f"{source}_t{t0:g}_n{n}_tol{tol:g}{tail}.nc"


def remapped(
    source: Path, t0: float, nlat: int, on: int, beta: float, centroids: bool = False
) -> Path:
    """fv's snapshot at ``t0`` on ``nlat`` rings remapped exactly onto the mesh of ``on`` rings,
    written as a density file (rho, weight and the mesh's cells). With ``centroids`` the file
    has each coarse cell's centroid of fv's mass in it (``rho_centroid_xyz``: its exact first
    moment), where ``log_lagrangian`` puts the cell's particle instead of at its centre."""
    name = f"fv{nlat}on{on}_t{t0:g}" + ("_centroids" if centroids else "")
    path = handover_dir(beta) / f"{name}.state.nc"
    if path.exists():
        return path
    fine, coarse = RingMesh(nlat), RingMesh(on)
    with xr.open_dataset(source) as ds:
        rho_fine = ds["rho"].sel(time=t0).values
    rho = coarse.remap_from(fine, rho_fine)
    variables = {name: xr.Variable(*spec) for name, spec in coarse.dataset_variables().items()}
    coords = {name: xr.Variable(*spec) for name, spec in coarse.dataset_coords().items()}
    if centroids:
        moment = coarse.first_moments_from(fine, rho_fine)
        empty = np.linalg.norm(moment, axis=1) == 0.0
        moment[empty] = coarse.points[empty]
        variables["rho_centroid_xyz"] = xr.Variable(("cell", "xyz"), moment)  # normalized on read
    variables["rho"] = xr.Variable("cell", rho / np.sum(rho * coarse.area))
    variables["weight"] = xr.Variable("cell", coarse.area)
    xr.Dataset(variables, coords=coords).to_netcdf(path)
    return path


def run(
    nlat: int,
    t0: float,
    n: int,
    tol: float,
    t_end: float,
    on: int | None = None,
    beta: float = BETA,
    coarsened: bool = False,
    merge_tail: float | None = None,
    centroids: bool = False,
    follow_depth: float | None = None,
    clock: bool = False,
    voronoi: float | None = None,
    observers: list | None = None,
    quadrature: str | None = None,
    remesh_tail: float | None = None,
) -> None:
    source = study.EARLY / f"fv_nlat{nlat}_beta{beta:g}.nc"
    path = case_path(
        nlat,
        t0,
        n,
        tol,
        on,
        beta,
        coarsened,
        merge_tail,
        centroids,
        follow_depth,
        voronoi,
        quadrature,
        remesh_tail,
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    data = study.case_config(beta, n, tol, t_end - t0, VARIANT, path.parent).to_dict()
    if coarsened:
        data["discretization"]["file_cells"] = "coarsened"
    if merge_tail:
        data["discretization"].update(merge_tail=1.0, merge_tail_width=merge_tail)
    if follow_depth:
        data["discretization"]["follow_depth"] = follow_depth
    if voronoi:
        data["discretization"]["voronoi_shapes"] = voronoi
    if quadrature:
        data["discretization"]["quadrature"] = quadrature
    if remesh_tail:
        data["discretization"]["remesh_tail"] = remesh_tail
    if on:
        data["initial"] = {
            "name": "file",
            "path": str(remapped(source, t0, nlat, on, beta, centroids)),
        }
    else:
        data["initial"] = {"name": "file", "path": str(source), "time": float(t0)}
    span = t_end - t0
    data["time"] = {"t_end": span, "snapshots": int(round(span / study.SPACING)) + 1}
    data["output"] = {"path": str(path), "figure": False}
    config = sd.config_from_dict(data, base_dir=study.HERE)
    observers = [OriginalTarget(path.with_suffix(".w2.csv"), t0, beta)] + list(observers or [])
    if clock:
        observers.append(SchemeClock(clock_path(path)))
    sd.run(config, output=path, resume=path.exists(), progress=True, observers=observers)


def read_curve(path: Path) -> dict[str, np.ndarray]:
    """The observer's columns by absolute time (the last row written of each time)."""
    with path.open() as f:
        rows = {float(r["time"]): r for r in csv.DictReader(f)}
    times = sorted(rows)
    return {k: np.array([float(rows[t][k]) for t in times]) for k in COLUMNS}


def summary(path: Path) -> dict:
    """The first minimum of W2 (text), the departure (W2 > 2 min + 0.02), the rise (W2 > min +
    RISE), the wall time and the status of the run ``path`` (its .w2.csv and file), and its
    curve."""
    c = read_curve(path.with_suffix(".w2.csv"))
    # the first minimum after the handover's first snapshot (a coarse handover's W2 may rise
    # for half a unit while its cells' masses gather: 32 rings, t = 12 to 12.5)
    first = 1 + study.first_minimum(c["w2"][1:])
    s = curve_summary(c["time"], c["w2"])
    rising = first < len(c["w2"]) - 1
    minimum = f"{c['w2'][first]:.5f} ({c['time'][first]:g})" + ("" if rising else ", falling")
    risen = np.flatnonzero((c["time"] > s["t_min"]) & (c["w2"] > s["min_w2"] + RISE))
    with xr.open_dataset(path) as ds:
        wall = ds.attrs.get("wall_time_total_seconds", ds.attrs.get("checkpoint_wall_seconds"))
        status = ds.attrs.get("run_status")
    return {
        "curve": c,
        "minimum": minimum,
        "departure": s.get("departure_time", math.nan),
        "rise": c["time"][risen[0]] if risen.size else math.nan,
        "wall": f"{float(wall or math.nan):.0f} s ({status})",
    }


#: the table's words for a file name's options (by the letters each starts with)
OPTION_WORDS = {
    "co": lambda o: ", coarsened",
    "mt": lambda o: f", tail merged by {o[2:]} widths",
    "fd": lambda o: f", followed within {o[2:]} e-folds",
    "vo": lambda o: f", Voronoi shapes every {o[2:]}",
    "q": lambda o: f", sources: {o[1:]}",
    "rt": lambda o: f", tail remeshed every {o[2:]}",
}


def source_words(stem: str) -> str:
    """fv256 -> 256; fv512on128 -> 512 (onto 128); fv256on64c -> 256 (onto 64, centroids)."""
    nlat, _, on = stem[2:].partition("on")
    if not on:
        return nlat
    return f"{nlat} (onto {on.rstrip('c')}" + (", centroids)" if on.endswith("c") else ")")


def released(path: Path) -> tuple[float, float]:
    """The release of the clusters about +u and -u: the first snapshot where the heaviest
    recording cell of each hemisphere lies more than RELEASE_DEGREES from +-u (nan: never)."""
    import clusters  # beside this script; here, as it puts ../ first on sys.path (../study.py)

    series = clusters.cluster_series(str(path))
    out = []
    for j in range(2):
        far = np.flatnonzero(series["offset"][:, j] > RELEASE_DEGREES)
        out.append(float(series["time"][far[0]]) if far.size else math.nan)
    return out[0], out[1]


def table(beta: float = BETA) -> str:
    head = "| fv nlat, handover t0, n, tolerance | " + " | ".join(f"dm t = {t:g}" for t in TIMES)
    lines = [head + " | first min W2 (t) | departure | rise | +u, -u released | wall |"]
    lines.append("|" + "---|" * (len(TIMES) + 6))
    for path in sorted(handover_dir(beta).glob("fv*_t*_n*_tol*.nc")):
        r = summary(path)
        c = r["curve"]
        cells = []
        for when in TIMES:
            i = np.flatnonzero(np.isclose(c["time"], when))
            cells.append(f"{c['mass_across'][i[0]] * 1e5:+.2f}" if i.size else "")
        nlat, t0, n, tol, *options = path.stem.split("_")  # nlat: fv256 or fv512on256
        tol += "".join(
            next(words(o) for key, words in OPTION_WORDS.items() if o.startswith(key))
            for o in options
        )
        lines.append(
            f"| {source_words(nlat)}, {t0[1:]}, {n[1:]}, {tol[3:]} | "
            + " | ".join(cells)
            + f" | {r['minimum']} | {r['departure']:g} | {r['rise']:g} | "
            + "{:g}, {:g}".format(*released(path))
            + f" | {r['wall']} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", nargs=4, metavar=("NLAT", "T0", "N", "TOL"))
    parser.add_argument("--t-end", type=float, default=20.0)
    parser.add_argument("--on", type=int, metavar="NLAT2")
    parser.add_argument("--table", action="store_true")
    parser.add_argument("--beta", type=float, default=BETA)
    parser.add_argument("--coarsened", action="store_true")
    parser.add_argument("--merge-tail", type=float, metavar="WIDTH")
    parser.add_argument("--centroids", action="store_true")
    parser.add_argument("--follow-depth", type=float, metavar="DEPTH")
    parser.add_argument("--clock", action="store_true")
    parser.add_argument("--voronoi", type=float, metavar="R")
    parser.add_argument("--quadrature", choices=QUADRATURES)
    parser.add_argument("--remesh-tail", type=float, metavar="R")
    args = parser.parse_args()
    if args.run:
        nlat, t0, n, tol = args.run
        run(
            int(nlat),
            float(t0),
            int(n),
            float(tol),
            args.t_end,
            args.on,
            args.beta,
            args.coarsened,
            args.merge_tail,
            args.centroids,
            args.follow_depth,
            args.clock,
            args.voronoi,
            quadrature=args.quadrature,
            remesh_tail=args.remesh_tail,
        )
    if args.table:
        print(table(args.beta))


if __name__ == "__main__":
    main()
