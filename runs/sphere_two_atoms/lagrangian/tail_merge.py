"""An experiment: the handover case with the deep tail merged by cells.

The flow that carries the tail into the clusters packs it into particles far smaller than the
n x n cells, so ``log_lagrangian`` carries 35 000 particles through t = 20-40 at beta = 300.
Here, every R units of time, the particles whose mean log density lies more than DEPTH below the
densest particle's, outside the look caps, are merged by the n x n cubed-sphere cells as
``merge`` merges them (log masses added exactly, the mass-weighted centroid, the second-moment
shape): the hook of ``remesh_tail`` is given this merge instead of its interpolant (a
monkeypatch of the scheme module's ``TailRemesh``). Since the fourteenth session this is the
scheme's option ``merge_tail`` (``handover.py --merge-tail W``, the same particles bit for bit:
``--cells 64`` and ``--cells 128`` are W = 0.75 and 0.4 at beta = 300); the script stays for
DEPTH and the files it wrote. The count falls
to 1 700-1 900 by t = 44 and the run to t = 44 costs a third, but the plateau changes
(docs/concentration.md, "The tail merged by the cells"); by cells of 0.7 kernel widths
(``--cells 64``) the run to t = 110 costs 2.6 times less and the departure moves by 1.9%. Not
part of the scheme until its own ladder shows it converges.

Usage:
  .venv/bin/python runs/sphere_two_atoms/lagrangian/tail_merge.py T_END R DEPTH [--cells C]
      continue cases/handover/fv512on128_t12.state.nc (``handover.py --run 512 12 32 3e-6
      --on 128``) at n = 32, tolerance 3e-6 to the absolute time T_END, into
      cases/handover/tail_merge_experiment/fv512on128_t12_tm_R{R}_D{DEPTH}[_c{C}]_n32_tol3e-06.nc
      and its .w2.csv (W2 to the original Pi_# rho_0, as handover.py writes it); --cells C
      merges by the C x C cubed sphere (a power of 2; default the scheme's n = 32: cells of
      0.049 rad, 1.4 kernel widths at beta = 300; C = 64, 128: 0.7, 0.35 widths)
  .venv/bin/python runs/sphere_two_atoms/lagrangian/tail_merge.py --table
      the table of docs/concentration.md ("The deep tail merged by the scheme"): for each run
      present and the kept run (``handover.py --run 512 12 32 3e-6 --on 128 --t-end 110``),
      the first minimum of W2, the departure, the rise, W2 at t = 40, 50, 60 and the wall time
"""

from __future__ import annotations

import argparse

import handover  # beside this script
import numpy as np
import study

import spheredens as sd
from spheredens.schemes import _sphere_lagrangian as scheme_module
from spheredens.schemes._particle_remesh import merge_tail

T0, N, TOLERANCE = 12.0, 32, 3e-6
OUT = handover.HANDOVER / "tail_merge_experiment"


class TailMerge:
    """The deep tail outside the look caps merged by the n x n cells (module docstring), in
    the place of ``remesh_tail``'s :class:`~spheredens.schemes._particle_remesh.TailRemesh`."""

    depth = 20.0
    query = None
    cells_per_edge = None

    def __init__(self, cells) -> None:
        self.n = self.cells_per_edge or cells.n
        _, _, shapes = cells.log_moments(lambda p: np.zeros(len(p)), order=1)
        longest = float(np.linalg.svd(shapes, compute_uv=False)[:, 0].max())
        self.s_max = scheme_module.SPLIT_LENGTH * longest

    def __call__(self, log_m, x, shape, log_point):
        parts = (log_m, x, shape, log_point)
        return merge_tail(*parts, self.query, self.s_max, self.n, True, self.depth)


def run(t_end: float, every: float, depth: float, cells: int | None = None) -> None:
    tag = f"_c{cells}" if cells else ""
    path = OUT / f"fv512on128_t12_tm_R{every:g}_D{depth:g}{tag}_n{N}_tol{TOLERANCE:g}.nc"
    OUT.mkdir(parents=True, exist_ok=True)
    data = study.case_config(handover.BETA, N, TOLERANCE, t_end - T0, handover.VARIANT, OUT)
    data = data.to_dict()
    data["initial"] = {"name": "file", "path": str(handover.HANDOVER / "fv512on128_t12.state.nc")}
    data["discretization"]["remesh_tail"] = every
    span = t_end - T0
    data["time"] = {"t_end": span, "snapshots": int(round(span / study.SPACING)) + 1}
    data["output"] = {"path": str(path), "figure": False}
    config = sd.config_from_dict(data, base_dir=study.HERE)
    TailMerge.depth, TailMerge.cells_per_edge = depth, cells
    TailMerge.query = sd.Problem.from_config(config).model.kernel.query
    scheme_module.TailRemesh = TailMerge
    observer = handover.OriginalTarget(path.with_suffix(".w2.csv"), T0, handover.BETA)
    sd.run(config, output=path, resume=path.exists(), progress=True, observers=[observer])


def table() -> str:
    lines = ["| tail | first min W2 (t) | departure | rise | W2 at t = 40, 50, 60 | wall |"]
    lines.append("|---|---|---:|---:|---|---|")
    runs = [(p.stem.split("_")[4], p) for p in sorted(OUT.glob("*_tm_*.nc"))]
    runs.append(("kept", handover.case_path(512, T0, N, TOLERANCE, 128, handover.BETA)))
    for tag, path in runs:
        r = handover.summary(path)
        c = r["curve"]
        at = [c["w2"][np.flatnonzero(np.isclose(c["time"], t))] for t in (40.0, 50.0, 60.0)]
        w2 = ", ".join(f"{a[0]:.4f}" if a.size else "" for a in at)
        name = path.stem.split("_tm_")[-1].rsplit("_n", 1)[0] if tag != "kept" else tag
        lines.append(
            f"| {name} | {r['minimum']} | {r['departure']:g} | {r['rise']:g} | {w2} | "
            f"{r['wall']} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("t_end", type=float, nargs="?")
    parser.add_argument("every", type=float, metavar="R", nargs="?")
    parser.add_argument("depth", type=float, metavar="DEPTH", nargs="?")
    parser.add_argument("--cells", type=int, metavar="C")
    parser.add_argument("--table", action="store_true")
    args = parser.parse_args()
    if args.table:
        print(table())
        return
    if args.depth is None:
        parser.error("T_END, R and DEPTH are needed to run (or --table)")
    run(args.t_end, args.every, args.depth, args.cells)


if __name__ == "__main__":
    main()
