"""The release's clock as the scheme itself has it (docs/concentration.md).

clusters.py takes log(Z_tail / Z_self) of each cluster from the file's recording cells, whose
cells about +-w are 2-3 kernel widths across. Here the same ratio is taken from the scheme's
own sources at every snapshot of a run, as its right-hand side sums them (the two agree to
0.05 e-folds but for a few snapshots, docs/concentration.md): the particles (points) or, with
the interpolant, the particles' remaining mass and the sub-triangles' centroids. For the
cluster on each side of the plane
<x, u> = 0: its centre c (the mass-weighted mean of the particles within NEAR of the side's
heaviest particle), its offset from +-u, the log of sum_sources m e^{beta <c, B y>} over the
sources within NEAR of c (self) and over the rest (tail), and over those within AT_W of +-w
(the tail where the softmax at +-u looks), the speed of c under the scheme's velocity
P_c E_c[V y] (degrees per unit time), and how many particles lie within NEAR of c and within
LOOK_REACH kernel widths of its look direction B^T c / |B^T c| (and how many of the scheme's
sources: with the interpolant, the sub-triangles' centroids too).

study.py --run ... --clock records it beside the case file (FILE.clock.csv, one row per
snapshot, appended as the run goes; a resumed run appends from its checkpoint on, and a reader
keeps the last row of each time). Usage: clock.py cases/FILE.nc [EVERY] prints it beside the
mechanism's ratio (../mechanism.py).
"""

from __future__ import annotations

import csv
import math
import sys
from pathlib import Path

import numpy as np
import xarray as xr
from scipy.special import logsumexp

from spheredens.schemes._sphere_lagrangian import unpack
from spheredens.simulate import Observer

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from mechanism import Geometry, start_time  # noqa: E402

#: the radius about a cluster's centre that counts as the cluster itself (as clusters.py)
NEAR = 0.1
#: the radius about +-w that counts as the tail the softmax at +-u looks at
AT_W = 0.3
SIDES = ("+u", "-u")
#: the reach about a cluster's look direction B^T c / |B^T c| whose particles are counted, in
#: kernel widths (beta |B^T c|)^(-1/2)
LOOK_REACH = 3.0
#: the columns per cluster, in the order written (the counts were added in the seventh session:
#: a file without them is rewritten with them blank, its rows kept)
PER_SIDE = ("offset_deg", "log_z_self", "log_z_tail", "log_z_at_w", "speed_deg")
COUNTS = ("particles_near", "particles_look", "sources_look")
#: the cluster's core (added in the eighth session): the particles within CORE rad of the
#: side's heaviest, how many, the log of their mass-weighted spread about their mean (rad),
#: the log of the heaviest particle's shape's long and short half-axes (its singular
#: values): what the scheme keeps of the cluster's own extent, which contracts on the plateau
#: and is torn from the release on (../release.py: the stretch); and the log of the heaviest's
#: share of the mass within NEAR of it (0 while the cluster is one particle; a split that
#: tears it shows as a drop)
CORE = 0.01
CORE_COLUMNS = ("core_particles", "log_core_spread", "log_length", "log_width",
                "log_heaviest_share")
COLUMNS = ["time"] + [f"{name}_{side}" for side in SIDES for name in PER_SIDE] + [
    f"{name}_{side}" for side in SIDES for name in COUNTS
] + [f"{name}_{side}" for side in SIDES for name in CORE_COLUMNS]


def clock_path(case: Path) -> Path:
    return case.with_name(case.stem + ".clock.csv")


def scheme_sources(scheme, x: np.ndarray, log_m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The points and log masses the scheme's sums take as sources for these particles."""
    if scheme.quadrature != "interpolant":
        return x, log_m
    at_vertex, points, log_a = scheme.interaction.reconstruction(x, log_m).parts(x, log_m)
    kept = np.isfinite(at_vertex)
    return np.concatenate([x[kept], points]), np.concatenate([at_vertex[kept], log_a])


def core_row(x: np.ndarray, log_m: np.ndarray, shape: np.ndarray, top: int,
             near: np.ndarray) -> list[float]:
    """:data:`CORE_COLUMNS` about the particle ``top`` (the side's heaviest; ``near``: the
    particles within NEAR of it)."""
    core = x @ x[top] > np.cos(CORE)
    p = np.exp(log_m[core] - log_m[core].max())
    p /= p.sum()
    mean = p @ x[core]
    spread = math.sqrt(max(float(p @ np.sum((x[core] - mean) ** 2, axis=1)), 1e-300))
    axes = np.linalg.svd(shape[top], compute_uv=False)
    share = float(log_m[top] - logsumexp(log_m[near]))
    return [int(core.sum()), math.log(spread), math.log(axes[0]), math.log(axes[1]), share]


def cluster_row(scheme, g: Geometry, x: np.ndarray, log_m: np.ndarray,
                shape: np.ndarray) -> list[float]:
    """The row of :data:`COLUMNS` (without the time) for particles x (unit), log masses and
    shapes."""
    y, log_w = scheme_sources(scheme, x, log_m)
    beta, B, V = scheme.interaction.beta, scheme.interaction.B, scheme.interaction.V
    row, counts, cores = [], [], []
    for sign in (1.0, -1.0):
        side = sign * (x @ g.u) > 0.0
        top = int(np.argmax(np.where(side, log_m, -np.inf)))
        heaviest = x[top]
        near = side & (x @ heaviest > np.cos(NEAR))
        c = np.exp(log_m[near] - log_m[near].max()) @ x[near]
        c /= np.linalg.norm(c)
        logit = beta * (y @ (B.T @ c)) + log_w
        own = y @ c > np.cos(NEAR)
        at_w = sign * (y @ g.w) > np.cos(AT_W)
        p = np.exp(logit - logit.max())
        mean = (p / p.sum()) @ (y @ V.T)
        velocity = mean - (mean @ c) * c
        row += [
            float(np.degrees(np.arccos(min(1.0, sign * float(c @ g.u))))),
            float(logsumexp(logit[own])),
            float(logsumexp(logit[~own])) if (~own).any() else -np.inf,
            float(logsumexp(logit[at_w])) if at_w.any() else -np.inf,
            float(np.degrees(np.linalg.norm(velocity))),
        ]
        q = B.T @ c
        look = q / np.linalg.norm(q)
        reach = np.cos(LOOK_REACH / np.sqrt(beta * np.linalg.norm(q)))
        counts += [int(near.sum()), int((x @ look > reach).sum()), int((y @ look > reach).sum())]
        cores += core_row(x, log_m, shape, top, near)
    return row + counts + cores


class SchemeClock(Observer):
    """Appends a row of :data:`COLUMNS` to ``path`` at every snapshot (module docstring)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.geometry = Geometry()
        self.scheme = None

    def start(self, info: dict) -> None:
        self.scheme = info["scheme"]
        rows = []
        if self.path.exists():
            with self.path.open(newline="") as f:
                rows = list(csv.reader(f))
            if rows and rows[0] == COLUMNS:
                return
        with self.path.open("w", newline="") as f:  # new, or of an older version: padded
            out = csv.writer(f)
            out.writerow(COLUMNS)
            for row in rows[1:]:
                out.writerow(row + ["nan"] * (len(COLUMNS) - len(row)))

    def observe(self, t: float, state: np.ndarray) -> None:
        log_m, x, shape, _ = unpack(state[0])
        x = x / np.linalg.norm(x, axis=1, keepdims=True)
        row = [t] + cluster_row(self.scheme, self.geometry, x, log_m, shape)
        with self.path.open("a", newline="") as f:
            csv.writer(f).writerow([repr(float(v)) for v in row])


def read_clock(path: Path) -> dict[str, np.ndarray]:
    """The columns of a clock file, one row per time (the last written of each); columns that
    a file of an older version lacks are nan."""
    with Path(path).open() as f:
        rows = {float(r["time"]): r for r in csv.DictReader(f)}
    times = sorted(rows)
    return {k: np.array([float(rows[t].get(k) or "nan") for t in times]) for k in COLUMNS}


def main(case: str, every: float = 4.0) -> None:
    c = read_clock(clock_path(Path(case)))
    c["time"] = c["time"] + start_time(case)  # absolute (a handover run's clock starts at T0)
    g = Geometry()
    with xr.open_dataset(case) as d:
        beta = float(d.attrs["beta"])
    print(f"the scheme's own sums at each cluster, beta = {beta:g} (mechanism in brackets):")
    print("t | " + " | ".join(
        f"{s}: offset deg, log Z_tail/Z_self (mech.), log Z_at_w/Z_self, speed deg/unit, "
        "particles near / at its look, sources at its look; core: particles, log spread, "
        "log half-axes of the heaviest, log of its share" for s in SIDES))
    for k, t in enumerate(c["time"]):
        if t % every:
            continue
        cells = []
        for sign, s in zip((1.0, -1.0), SIDES):
            self_ = c[f"log_z_self_{s}"][k]
            cells.append(
                f"{c[f'offset_deg_{s}'][k]:5.2f}, {c[f'log_z_tail_{s}'][k] - self_:7.2f} "
                f"({g.log_ratio(float(t), beta, sign):7.2f}), "
                f"{c[f'log_z_at_w_{s}'][k] - self_:7.2f}, {c[f'speed_deg_{s}'][k]:.3g}, "
                + " / ".join(f"{c[f'{n}_{s}'][k]:.0f}" for n in COUNTS)
                + f"; {c[f'core_particles_{s}'][k]:.0f}, {c[f'log_core_spread_{s}'][k]:.1f}, "
                f"{c[f'log_length_{s}'][k]:.1f} / {c[f'log_width_{s}'][k]:.1f}, "
                f"{c[f'log_heaviest_share_{s}'][k]:.2g}"
            )
        print(f"{t:6.1f} | " + " | ".join(cells))


if __name__ == "__main__":
    main(sys.argv[1], *(float(a) for a in sys.argv[2:3]))
