"""Where the two clusters sit on the plateau, from the zero-temperature tail: a reference for
the plateau's W2 that owes nothing to a scheme.

On the plateau (after the contraction, before the release) each cluster's softmax is held by
the tail it looks at (log(Z_tail / Z_self) is 10-30 at beta = 300, mechanism.py), and the tail
there follows the zero-temperature field X(x) = P_x V B^T x / |B^T x| (its log density at w is
that of the characteristics to 0.2-0.7 e-fold in the runs). A cluster at c moves with
X(c) = P_c V E_c[y], E_c the average under e^{beta <B^T c, y>} rho(t, y) (the tail) plus its
own mass m e^{beta <B^T c, c>} at c. Its equilibrium is not u: the tail's log density has a
gradient g about w (about 10 per radian), which moves the kernel's mean by about g / kappa
(kappa = beta |B^T c|), and the cluster follows. This offset is O(1 / beta), and it is what
W2(rho_t, Pi_# rho_0) measures on the plateau (the clusters' spread and the tail's mass are
far smaller there): W2 ~ sqrt(m_+ d_+^2 + m_- d_-^2), d the clusters' angles from +-u.
That is the positions' part of W2. A run's W2^2 adds pi^2 |dm|, dm the mass that the early,
smooth phase of the dynamics sent to the other cluster than the hemisphere rule of Pi (about
-7.5e-5 at beta = 300: 40-65% of W2^2 on the plateau; study.py's column "mass across"). It is
settled by t ~ 12, before the plateau, and this script does not predict it.

How: log rho(t, y) = log rho_0(x_0) - int_0^t div X along the backward characteristic from y
(DOP853, rtol 1e-10, all points of the quadrature at once), on a polar grid of the cap of
0.4 rad about +-w (the kernel's weight at its edge is e^-35 at beta = 300); the cluster's
position c(t) is the root of P_c V E_c[y] = 0 near +-u (scipy.optimize.root in the tangent
plane). Valid while the tail outweighs the cluster by many e-folds and the cluster follows its
equilibrium (the zero-temperature field relaxes it at rate mu_1 - mu_2 ~ 1 per unit time,
faster than the equilibrium moves).

Usage: .venv/bin/python runs/sphere_two_atoms/plateau.py [BETA ...] [--across DM]
                                                       (default 300; seconds)
       .venv/bin/python runs/sphere_two_atoms/plateau.py --compare FILE.nc
The second form reads a beta = 300 study file (or a handover file: its times are read as
absolute, its own clock plus its T0, mechanism.start_time) and prints, at the times above, each
cluster's angle from +-u (the mass-weighted mean of the recording cells within 0.1 rad of its
heaviest cell) beside its predicted equilibrium, and the least-squares plane of log rho over
the populated recording cells within 0.25 rad of +-w (level at w and gradient in the tangent
plane, per radian) beside the zero-temperature tail's: what the prediction rests on.
"""

from __future__ import annotations

import argparse
import math

import numpy as np
import xarray as xr
from mechanism import Geometry, start_time
from scipy.integrate import solve_ivp
from scipy.optimize import root
from scipy.special import logsumexp

TIMES = (16.0, 20.0, 24.0, 28.0, 32.0, 36.0, 40.0, 48.0, 56.0, 64.0)
#: the recording cells about +-w whose log rho is compared with the zero-temperature tail's, and
#: the radius about a cluster's heaviest cell that counts as the cluster (radians)
TAIL_RADIUS = 0.25
NEAR = 0.1
#: recording cells with log rho below this hold no particle
EMPTY = -1000.0
#: fewer populated cells than this about +-w: no plane is fitted
MIN_CELLS = 10
#: the cap about +-w (radians) and its polar grid
CAP = 0.4
RINGS, SECTORS = 80, 160


def cap_grid(centre: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Points (k, 3) of a polar grid of the cap of radius CAP about ``centre`` and their areas
    (midpoint rule in the polar angle)."""
    e1 = np.cross(centre, np.eye(3)[int(np.argmin(np.abs(centre)))])
    e1 /= np.linalg.norm(e1)
    e2 = np.cross(centre, e1)
    theta = (np.arange(RINGS) + 0.5) * CAP / RINGS
    phi = (np.arange(SECTORS) + 0.5) * 2.0 * math.pi / SECTORS
    th, ph = np.meshgrid(theta, phi, indexing="ij")
    points = (np.cos(th)[..., None] * centre + np.sin(th)[..., None]
              * (np.cos(ph)[..., None] * e1 + np.sin(ph)[..., None] * e2)).reshape(-1, 3)
    area = (np.sin(th) * (CAP / RINGS) * (2.0 * math.pi / SECTORS)).ravel()
    return points, area


def log_density(g: Geometry, points: np.ndarray, times: tuple[float, ...]) -> np.ndarray:
    """log rho(t, y) at ``points`` (k, 3) for each t of ``times``: (len(times), k)."""
    B, V = g.B, g.V
    M, C = V @ B.T, B.T
    k = len(points)

    def backward(_s, flat):
        y = flat.reshape(4, k)
        x = y[:3] / np.linalg.norm(y[:3], axis=0)
        cx = C @ x
        r = np.linalg.norm(cx, axis=0)
        mx = M @ x
        w = mx / r
        X = w - np.sum(w * x, axis=0) * x
        div = (np.trace(M) / r - np.sum((C.T @ cx) * mx, axis=0) / r**3
               - 2.0 * np.sum(x * mx, axis=0) / r)
        return np.concatenate([-X, div[None]]).ravel()

    start = np.concatenate([points.T, np.zeros((1, k))]).ravel()
    sol = solve_ivp(backward, (0.0, max(times)), start, t_eval=times, method="DOP853",
                    rtol=1e-10, atol=1e-12)
    out = []
    for i in range(len(times)):
        y = sol.y[:, i].reshape(4, k)
        foot = (y[:3] / np.linalg.norm(y[:3], axis=0)).T
        out.append(np.log(g.rho_0(foot)) - y[3])
    return np.array(out)


def equilibrium(g: Geometry, beta: float, sign: float, points: np.ndarray, log_w: np.ndarray,
                mass: float) -> np.ndarray:
    """The root c near sign * u of P_c V E_c[y] = 0 (module docstring); ``log_w`` the log of
    rho(t, y) times the area at ``points``."""
    u = sign * g.u
    e1 = np.cross(u, np.eye(3)[int(np.argmin(np.abs(u)))])
    e1 /= np.linalg.norm(e1)
    e2 = np.cross(u, e1)

    def position(a):
        c = u + a[0] * e1 + a[1] * e2
        return c / np.linalg.norm(c)

    def residual(a):
        c = position(a)
        q = beta * (g.B.T @ c)
        logits = np.append(points @ q + log_w, math.log(mass) + q @ c)
        weights = np.exp(logits - logsumexp(logits))
        mean = weights[:-1] @ points + weights[-1] * c
        v = g.V @ mean
        v -= (v @ c) * c
        return [v @ e1, v @ e2]

    return position(root(residual, [0.0, 0.0], tol=1e-12).x)


def predicted(g: Geometry, beta: float) -> dict[float, list[float]]:
    """The predicted angles (radians) of the clusters at +u and -u from +-u at each of TIMES."""
    masses = {1.0: g.m_u, -1.0: 1.0 - g.m_u}
    out: dict[float, list[float]] = {1.0: [], -1.0: []}
    for s in (1.0, -1.0):
        points, area = cap_grid(s * g.w)
        logs = log_density(g, points, TIMES)
        for i in range(len(TIMES)):
            c = equilibrium(g, beta, s, points, logs[i] + np.log(area), masses[s])
            out[s].append(math.acos(min(1.0, float(c @ (s * g.u)))))
    return out


def clusters_w2(mass_u: float, angle_u: float, angle_minus_u: float, across: float = 0.0) -> float:
    """W2 to Pi_# rho_0 of the two clusters as point masses mass_u and 1 - mass_u at the angles
    (radians) from +u and -u, with pi^2 |across| added to W2^2 (a run's mass across the plane
    <x, u> = 0, module docstring)."""
    return math.sqrt(mass_u * angle_u**2 + (1.0 - mass_u) * angle_minus_u**2
                     + math.pi**2 * abs(across))


def _plane(points: np.ndarray, values: np.ndarray, centre: np.ndarray) -> np.ndarray:
    """(level at ``centre``, gradient along e1, e2) of the least-squares plane through values."""
    e1 = np.cross(centre, np.eye(3)[int(np.argmin(np.abs(centre)))])
    e1 /= np.linalg.norm(e1)
    design = np.column_stack([np.ones(len(points)), points @ e1, points @ np.cross(centre, e1)])
    return np.linalg.lstsq(design, values, rcond=None)[0]


def compare(path: str) -> None:
    """The file's clusters and tails against the prediction (module docstring)."""
    g = Geometry(t_max=100.0)
    with xr.open_dataset(path) as d:
        beta = float(d.attrs["beta"])
        times = d["time"].values + start_time(path)
        log_rho = d["log_rho"].values.reshape(len(times), -1)
        mass = (d["rho"].values * d["cell_area"].values).reshape(len(times), -1)
        centroids = d["rho_centroid_xyz"].values.reshape(len(times), -1, 3)
    angles = predicted(g, beta)
    print(f"{path}: beta = {beta:g}; angles in degrees (file / predicted), log rho about +-w as "
          "level, gradient (file / zero temperature)")
    for i, t in enumerate(TIMES):
        k = int(np.argmin(np.abs(times - t)))
        if abs(times[k] - t) > 1e-9:
            continue
        c = centroids[k] / np.linalg.norm(centroids[k], axis=1, keepdims=True)
        row = [f"t = {t:4g}"]
        for s, name in ((1.0, "+u"), (-1.0, "-u")):
            side = np.where(c @ (s * g.u) > 0.0, mass[k], 0.0)
            top = c[int(np.argmax(side))]
            near = np.arccos(np.clip(c @ top, -1.0, 1.0)) < NEAR
            mean = side[near] @ c[near]
            angle = math.acos(min(1.0, float(mean @ (s * g.u)) / float(np.linalg.norm(mean))))
            row.append(f"{name} {math.degrees(angle):.2f} / {math.degrees(angles[s][i]):.2f}")
        for s, name in ((1.0, "+w"), (-1.0, "-w")):
            w = s * g.w
            cells = (np.arccos(np.clip(c @ w, -1.0, 1.0)) < TAIL_RADIUS) & (log_rho[k] > EMPTY)
            if cells.sum() < MIN_CELLS:
                row.append(f"{name}: {int(cells.sum())} cells")
                continue
            run = _plane(c[cells], log_rho[k][cells], w)
            zero = _plane(c[cells], log_density(g, c[cells], (t,))[0], w)
            row.append(f"{name} ({int(cells.sum())} cells) {run[0]:.1f} ({run[1]:.1f}, "
                       f"{run[2]:.1f}) / {zero[0]:.1f} ({zero[1]:.1f}, {zero[2]:.1f})")
        print("  " + "; ".join(row))


def main() -> None:
    parser = argparse.ArgumentParser(
        description="Where the two clusters sit on the plateau (their equilibria from the "
        "zero-temperature tail) and the W2 of their positions, for each BETA; or, with "
        "--compare, a beta = 300 study file's clusters and tail beside the prediction.",
    )
    parser.add_argument("beta", nargs="*", type=float, default=[300.0], metavar="BETA")
    parser.add_argument("--compare", metavar="FILE.nc", help="a beta = 300 study file")
    parser.add_argument(
        "--across",
        type=float,
        metavar="DM",
        help="also print W2 with the term pi^2 DM of a run's mass across the plane <x, u> = 0 "
        "(the size of study.py --table's column 'mass across', divided by 1e5; e.g. 7.55e-5)",
    )
    args = parser.parse_args()
    if args.compare:
        compare(args.compare)
        return
    betas = args.beta
    g = Geometry(t_max=100.0)
    for beta in betas:
        angles = predicted(g, beta)
        print(f"beta = {beta:g}: the clusters' equilibria on the plateau (angles from +-u, "
              "degrees) and the W2 they make with Pi_# rho_0")
        for i, t in enumerate(TIMES):
            w2 = clusters_w2(g.m_u, angles[1.0][i], angles[-1.0][i])
            across = ""
            if args.across is not None:
                full = clusters_w2(g.m_u, angles[1.0][i], angles[-1.0][i], args.across)
                across = f", with the mass across {full:.5f}"
            print(f"  t = {t:5g}: +u {math.degrees(angles[1.0][i]):.3f}, "
                  f"-u {math.degrees(angles[-1.0][i]):.3f}; W2 = {w2:.5f}{across}")


if __name__ == "__main__":
    main()
