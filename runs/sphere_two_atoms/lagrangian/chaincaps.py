"""The look caps extended down the look chain: a trial of what `refine_look` would need
(docs/concentration.md, "The PDE's tail along the look chain"; a prototype, not an option).

`refine_look` splits the particles within LOOK_RADIUS kernel widths of where the clusters look
(+-w) down to half a width, and `merge_tail` leaves those caps alone. The particles at w look
at look(w), those at look(w) at look(look(w)), and so on to e* (9.3, 4.2, 1.9, 0.9 degrees);
the caps about +-w reach look(w) but not the chain's far end, where the particles lie about a
kernel width apart (7-11 per kernel area) and their sums err. Here every cap is followed by
caps about its look chain (at most LINKS, until a link moves less than a tenth of a width),
with the same radius and length. The run is handover.py's (``--run 256 12 32 TOL --on NLAT2
--merge-tail 0.4 --centroids``) into cases/handover/chain/, with holes.py's observer (the
particles within 0.45 rad of +-w every snapshot: chainflow.py reads them).

Usage: .venv/bin/python runs/sphere_two_atoms/lagrangian/chaincaps.py TOL NLAT2 T
"""

import sys

import handover  # beside this script
import holes  # beside this script
import numpy as np

from spheredens.schemes import _particle_remesh, _sphere_lagrangian
from spheredens.schemes._particle_remesh import (
    LOOK_LENGTH,
    LOOK_RADIUS,
    look_caps,
    look_lengths,
)

#: the links followed beyond each cap
LINKS = 8


def chain_caps(log_m: np.ndarray, x: np.ndarray, query) -> list[tuple[np.ndarray, float]]:
    """(centre, kernel width) of every cap of look_caps and of the links of its look chain."""
    caps = []
    for centre, width in zip(*look_caps(log_m, x, query)):
        caps.append((centre, float(width)))
        for _link in range(LINKS):
            q = np.asarray(query(centre[None]), dtype=float)[0]
            link = q / np.linalg.norm(q)
            if np.arccos(np.clip(link @ centre, -1.0, 1.0)) < 0.1 * width:
                break
            centre, width = link, float(np.linalg.norm(q)) ** -0.5
            caps.append((centre, width))
    return caps


def chain_look_lengths(log_m: np.ndarray, x: np.ndarray, query, s_max: float) -> np.ndarray:
    """_particle_remesh.look_lengths with every cap of look_caps followed down its look chain."""
    lengths = look_lengths(log_m, x, query, s_max)  # the package's own, bound before the patch
    for centre, width in chain_caps(log_m, x, query):
        inside = np.arccos(np.clip(x @ centre, -1.0, 1.0)) <= LOOK_RADIUS * width + s_max
        lengths[inside] = np.minimum(lengths[inside], LOOK_LENGTH * width)
    return lengths


def run(folder: str, tol: float, on: int, t_end: float) -> None:
    """handover.py's run with the chain's caps (for the splits and merge_tail's caps) and
    holes.py's observer at 0.45 rad, into cases/handover/FOLDER/."""
    _sphere_lagrangian.look_lengths = chain_look_lengths  # the splits
    _particle_remesh.look_lengths = chain_look_lengths  # merge_tail's caps
    out = handover.HANDOVER / folder
    out.mkdir(parents=True, exist_ok=True)
    handover.handover_dir = lambda beta: out
    path = handover.case_path(
        256, 12.0, 32, tol, on, handover.BETA, merge_tail=holes.WIDTH, centroids=True
    )
    keep = holes.KeepAboutW(path.with_suffix(".holes.npz"), 12.0, 0.45)
    handover.run(
        256, 12.0, 32, tol, t_end, on, merge_tail=holes.WIDTH, centroids=True, observers=[keep]
    )


def main(tol: float, on: int, t_end: float) -> None:
    run("chain", tol, on, t_end)


if __name__ == "__main__":
    a = sys.argv[1:]
    main(float(a[0]), int(a[1]), float(a[2]))
