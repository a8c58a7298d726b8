"""The particles about +-w, kept every snapshot of a handover run: what opens the hole at the
look point (docs/concentration.md, "The handovers' clock, where the clusters drift").

Runs ``handover.py --run NLAT T0 N TOL --on NLAT2 --t-end T --merge-tail WIDTH --centroids``
into cases/handover/holes/ (its own copy: the same run as handover.py's, bit for bit) and
writes, at every snapshot, the particles within CAP rad of +w and of -w (log masses,
positions, shapes, and their velocities and shape rates from the scheme's own sums) to
FILE.holes.npz beside the run's file (arrays named by the snapshot's absolute time).

With --cap R the radius kept is R (default 0.3; 0.45 reaches the chain's end e*, 0.30 rad
beyond w) and the run goes into cases/handover/holes_cap{R}/ (the same run, bit for bit);
with --no-merge the run has no merge_tail (cases/handover/holes_cap{R}_nomerge/); with
--remesh-tail R2 the deep tail is put back on the n x n cells every R2 units (folder ..._rt{R2}).

Usage: .venv/bin/python runs/sphere_two_atoms/lagrangian/holes.py NLAT T0 N TOL NLAT2 T [--cap R]
       [--no-merge] [--remesh-tail R2]
"""

import sys
from pathlib import Path

import handover  # beside this script
import numpy as np

from spheredens.schemes._sphere_lagrangian import unpack
from spheredens.simulate import Observer

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from mechanism import Geometry  # noqa: E402

#: the radius about +-w whose particles are kept (radians)
CAP = 0.3
WIDTH = 0.4


class KeepAboutW(Observer):
    """Keeps the particles within CAP of +-w at every snapshot (module docstring)."""

    def __init__(self, path: Path, t0: float, cap: float = CAP) -> None:
        self.path, self.t0, self.arrays, self.cap = Path(path), float(t0), {}, float(cap)
        self.w = Geometry().w
        self.scheme = None

    def start(self, info: dict) -> None:
        self.scheme = info["scheme"]
        if self.path.exists():
            with np.load(self.path) as kept:
                self.arrays = dict(kept)

    def observe(self, t: float, state: np.ndarray) -> None:
        log_m, x, shape, _ = unpack(state[0])
        velocity, shape_rate = self.scheme._flows(state)[0]
        x = x / np.linalg.norm(x, axis=1, keepdims=True)
        near = (x @ self.w > np.cos(self.cap)) | (-x @ self.w > np.cos(self.cap))
        key = f"{self.t0 + t:.2f}"
        for name, a in (
            ("log_m", log_m),
            ("x", x),
            ("shape", shape),
            ("velocity", velocity),
            ("shape_rate", shape_rate),
        ):
            self.arrays[f"{key}_{name}"] = a[near]
        np.savez(self.path, **self.arrays)


def main(
    nlat: int,
    t0: float,
    n: int,
    tol: float,
    on: int,
    t_end: float,
    cap: float = CAP,
    merge: bool = True,
    remesh_tail: float | None = None,
) -> None:
    name = ("holes" if cap == CAP else f"holes_cap{cap:g}") + ("" if merge else "_nomerge")
    name += f"_rt{remesh_tail:g}" if remesh_tail else ""
    out = handover.HANDOVER / name
    out.mkdir(parents=True, exist_ok=True)
    handover.handover_dir = lambda beta: out
    width = WIDTH if merge else None
    path = handover.case_path(
        nlat,
        t0,
        n,
        tol,
        on,
        handover.BETA,
        merge_tail=width,
        centroids=True,
        remesh_tail=remesh_tail,
    )
    keep = KeepAboutW(path.with_suffix(".holes.npz"), t0, cap)
    handover.run(
        nlat,
        t0,
        n,
        tol,
        t_end,
        on,
        merge_tail=width,
        centroids=True,
        observers=[keep],
        remesh_tail=remesh_tail,
    )


if __name__ == "__main__":
    a, cap, remesh = [v for v in sys.argv[1:] if v != "--no-merge"], CAP, None
    if "--remesh-tail" in a:
        i = a.index("--remesh-tail")
        remesh = float(a[i + 1])
        del a[i : i + 2]
    if "--cap" in a:
        i = a.index("--cap")
        cap = float(a[i + 1])
        del a[i : i + 2]
    main(
        int(a[0]),
        float(a[1]),
        int(a[2]),
        float(a[3]),
        int(a[4]),
        float(a[5]),
        cap,
        "--no-merge" not in sys.argv,
        remesh,
    )
