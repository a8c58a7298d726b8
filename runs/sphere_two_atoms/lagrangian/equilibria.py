"""Where each cluster's own run puts its equilibrium, snapshot by snapshot (seconds).

A cluster at c moves with P_c V E_c[y], E_c the softmax mean under e^{beta <B^T c, y>} rho(t, y)
(../plateau.py). On the plateau it follows the root c* of that velocity with the tail held
fixed, at a rate of about mu_1 - mu_2 ~ 1. Here c* is taken from the run's own recording cells
(each cell's mass at its centroid: the tail as the file has it, the cluster's own cells within
NEAR of its heaviest cell lumped at their mean) at every snapshot, beside the cluster's position
(that mean) and the zero-temperature prediction (../plateau.py, at its times). If c* moves
before the cluster does, the run's tail moved it.

Usage: .venv/bin/python runs/sphere_two_atoms/lagrangian/equilibria.py FILE.nc [T_FROM T_TO]
(times absolute: a handover file's clock plus its T0, ../mechanism.start_time)
"""

import math
import sys
from pathlib import Path

import numpy as np
import xarray as xr

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import plateau  # noqa: E402
from mechanism import Geometry, start_time  # noqa: E402

#: the radius about a cluster's heaviest cell that counts as the cluster itself
NEAR = 0.1


def main(path: str, t_from: float = 16.0, t_to: float = math.inf) -> None:
    g = Geometry(t_max=100.0)
    with xr.open_dataset(path) as d:
        beta = float(d.attrs["beta"])
        times = d["time"].values + start_time(path)
        mass = (d["rho"].values * d["cell_area"].values).reshape(len(times), -1)
        centroids = d["rho_centroid_xyz"].values.reshape(len(times), -1, 3)
    predicted = plateau.predicted(g, beta)
    print(f"{path}: beta = {beta:g}; degrees from +-u: the cluster, its equilibrium c* from the "
          "file's cells, and (at ../plateau.py's times) from the zero-temperature tail")
    for k in np.flatnonzero((times >= t_from) & (times <= t_to)):
        ok = mass[k] > 0.0
        y = centroids[k][ok] / np.linalg.norm(centroids[k][ok], axis=1, keepdims=True)
        log_m = np.log(mass[k][ok])
        row = [f"t = {times[k]:6.2f}"]
        for sign, name in ((1.0, "+u"), (-1.0, "-u")):
            side = np.where(sign * (y @ g.u) > 0.0, log_m, -np.inf)
            top = y[int(np.argmax(side))]
            near = (np.arccos(np.clip(y @ top, -1.0, 1.0)) < NEAR) & np.isfinite(side)
            m_near = np.exp(log_m[near])
            centre = m_near @ y[near]
            centre /= np.linalg.norm(centre)
            angle = math.degrees(math.acos(min(1.0, float(sign * centre @ g.u))))
            star = plateau.equilibrium(g, beta, sign, y[~near], log_m[~near], float(m_near.sum()))
            star_angle = math.degrees(math.acos(min(1.0, float(sign * star @ g.u))))
            cell = f"{name} {angle:5.2f}, c* {star_angle:5.2f}"
            i = [j for j, t in enumerate(plateau.TIMES) if abs(t - times[k]) < 1e-9]
            if i:
                cell += f" (zero temperature {math.degrees(predicted[sign][i[0]]):.2f})"
            row.append(cell)
        print("  " + "; ".join(row), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], *(float(a) for a in sys.argv[2:4]))
