"""The release of each cluster from the zero-temperature tail alone: it creeps, and is torn.

mechanism.py releases a cluster when its tail's weight log(Z_tail / Z_self) at +-u crosses 0,
the cluster held at +-u until then. plateau.py finds where the tail holds it (its equilibrium
near +-u, O(1 / beta) off). Here the cluster moves: a point mass m at c(t) with

    dc/dt = P_c V E_c[y],   E_c the average under m e^{beta <B^T c, c>} delta_c
                            + e^{beta <B^T c, y>} rho(t, y) dy (the tail),

rho(t, .) the zero-temperature tail (plateau.log_density: log rho_0 at the foot of the
backward characteristic minus the integral of div X along it) on a polar grid of the cap of
CAP rad about +-w, linear in t between samples DT_TAIL apart (wider at large beta); c(t) by
RK4, STEPS steps per sample, from its equilibrium at the start (plateau.equilibrium). As the
tail drains, the cluster's own logit pulls it off +-u, and it creeps: it moves to where its
tail still outweighs it (log(Z_tail / Z_self) stays near +2 to +3 at its position) at a speed
that falls like 1 / beta. Printed for each beta and cluster: the times its offset from +-u
passes 4, 8, 16 and 30 degrees (4 and 8: study.py's LEFT_DEGREES and JUMP_DEGREES) and its
log(Z_tail / Z_self) then, beside mechanism.py's release (the ratio's root at c = +-u). Beyond
about 8 degrees the cluster's kernel reaches the cap's edge at beta >= 1000 (4 degrees at
10^4): the later times are not to be trusted there. A reference for the runs' creep
(docs/concentration.md) that owes nothing to a scheme; what it leaves out: the tail's response
to finite beta (the tail here is the zero-temperature field's).

The cluster's own extent, which the point mass does not have, is followed to first order: two
of its particles a small distance apart move apart at the rates of the velocity's derivative
at c with the cluster's mass held at c (:func:`jacobian`: beta V Cov(z, B z) - <c, V E_c[z]> I
on the tangent plane). On the plateau both rates are negative (about -0.37: the cluster
contracts, e^-17 from t = 20 to 72 at beta = 300); from about the mechanism's release one turns
positive and grows (to +2.5 within 12 time units): the cluster is torn apart, but only once
the stretch since its formation has undone the contraction (a delayed loss of stability: the
exit comes when the log of the stretch is back to 0). Printed: when the cluster turns unstable
and when its log stretch since the start is back to each of STRETCH_LEVELS. The stretch counts
from the start, so --start 20 (the clusters' formation, at every beta) gives the whole
contraction; the default start (0.2 beta - 40 above beta = 300) leaves out the part before it.

Usage: .venv/bin/python runs/sphere_two_atoms/release.py [BETA ...] [--across DM] [--min-w2 W]
[--start T] (default 300; 1 minute; 3 minutes at 1000 with --start 20). With --min-w2 W (the
runs' min W2) it also gives when the two clusters' W2 as point masses (plus pi^2 |DM|, DM the
runs' mass across: plateau.py --across) passes study.py's departure level 2 W + 0.02.
"""

from __future__ import annotations

import argparse
import math

import numpy as np
import plateau
from mechanism import Geometry
from scipy.linalg import expm
from scipy.optimize import brentq
from scipy.special import logsumexp

#: the tail's cap about +-w (radians; up to beta = 1000, then :func:`cap`) and its polar grid:
#: wider than plateau.py's, since the cluster's look direction B^T c moves with it
CAP, RINGS, SECTORS = 0.7, 140, 160
#: when the cluster starts (at its equilibrium: the later of T_START and 0.2 beta - 40, well
#: before the creep), the tail's samples (DT_TAIL, times beta / 3000 above beta = 3000: the
#: creep's time scale grows like beta) and the cluster's RK4 steps (STEPS per sample)
T_START, DT_TAIL, STEPS = 20.0, 0.25, 5
#: the offsets reported (study.py's creep and jump)
DEGREES = (4.0, 8.0, 16.0, 30.0)
#: the cluster's stretch since the start (log) whose return marks the exit: e^0, its extent at
#: the start; e^2, the margin of that extent (the runs' clusters at t = 20: a cell or less)
STRETCH_LEVELS = (0.0, 2.0)


def schedule(beta: float, start: float | None = None) -> tuple[float, float, float]:
    """(t_start, t_end, dt_tail) for beta (the constants' comments; ``start`` instead of the
    default start: T_START from the cluster's formation, for its whole stretch)."""
    t_start = max(T_START, 0.2 * beta - 40.0) if start is None else start
    return t_start, 0.3 * beta + 100.0, DT_TAIL * max(1.0, beta / 3000.0)


def cap(beta: float) -> float:
    """The cap's radius: CAP up to beta = 1000, then shrinking like the kernel's width
    (beta |B^T u|)^(-1/2), so that RINGS and SECTORS resolve the kernel as well at every beta."""
    return CAP * min(1.0, math.sqrt(1000.0 / beta))


def tail(g: Geometry, sign: float, beta: float,
         start: float | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(points (k, 3), times (n,), log of rho(t, y) times the area (n, k)) about sign * w."""
    plateau.CAP, plateau.RINGS, plateau.SECTORS = cap(beta), RINGS, SECTORS
    points, area = plateau.cap_grid(sign * g.w)
    t_start, t_end, dt_tail = schedule(beta, start)
    times = np.arange(t_start, t_end + dt_tail / 2, dt_tail)
    return points, times, plateau.log_density(g, points, tuple(times)) + np.log(area)


def velocity(g: Geometry, beta: float, c: np.ndarray, points: np.ndarray, log_w: np.ndarray,
             mass: float) -> tuple[np.ndarray, float]:
    """(P_c V E_c[y], log(Z_tail / Z_self)) for the cluster at c (module docstring)."""
    q = beta * (g.B.T @ c)
    logits = points @ q + log_w
    own = math.log(mass) + float(q @ c)
    z_tail = logsumexp(logits)
    top = max(z_tail, own)
    a, b = math.exp(z_tail - top), math.exp(own - top)
    mean = (a * (np.exp(logits - z_tail) @ points) + b * c) / (a + b)
    v = g.V @ mean
    return v - (v @ c) * c, z_tail - own


def jacobian(g: Geometry, beta: float, c: np.ndarray, points: np.ndarray, log_w: np.ndarray,
             mass: float) -> np.ndarray:
    """The derivative at y = c of the velocity y -> P_y V E_y[z] that a particle of the cluster
    feels (E_y the softmax average over the cluster, a point mass at c, and the tail), on the
    tangent plane at c: beta V Cov_y(z, B z) - <c, V E_c[z]> I (3 x 3; apply it to tangent
    vectors). Its eigenvalues are the rates at which the cluster's own extent contracts (< 0)
    or is torn apart (> 0)."""
    q = beta * (g.B.T @ c)
    logits = np.r_[points @ q + log_w, math.log(mass) + float(q @ c)]
    z = np.vstack([points, c])
    p = np.exp(logits - logsumexp(logits))
    mean = p @ z
    bz = z @ g.B.T
    cov = (z * p[:, None]).T @ bz - np.outer(mean, p @ bz)
    return beta * g.V @ cov - float(c @ g.V @ mean) * np.eye(3)


def tangent_frame(c: np.ndarray, frame: np.ndarray | None = None) -> np.ndarray:
    """An orthonormal basis (3, 2) of the tangent plane at c: ``frame`` (the last one) projected
    onto it and orthonormalized (parallel transport to second order in the step), or any."""
    if frame is None:
        a = np.cross(c, [0.3, 0.7, 0.1])
        frame = np.stack([a, np.cross(c, a)], axis=1)
    q, r = np.linalg.qr(frame - np.outer(c, c @ frame))
    return q * np.sign(np.diag(r))


def follow(g: Geometry, beta: float, sign: float,
           start: float | None = None) -> list[tuple[float, ...]]:
    """(t, offset from sign * u in degrees, log(Z_tail / Z_self), the largest rate of
    :func:`jacobian`, the log of the cluster's stretch since the start) at every sample of the
    tail (:func:`schedule`), until the offset passes the last of DEGREES or the end. The
    stretch is the largest singular value of the linearized flow map along the cluster's path
    (d Phi / dt = J Phi on the transported tangent plane): how far apart two of the cluster's
    particles have moved, relative to their distance at the start."""
    points, times, logs = tail(g, sign, beta, start)
    mass = g.m_u if sign > 0 else 1.0 - g.m_u
    dt_tail = float(times[1] - times[0])
    dt = dt_tail / STEPS

    def log_w(t: float) -> np.ndarray:
        i = min(int((t - times[0]) / dt_tail), len(times) - 2)
        f = (t - times[i]) / dt_tail
        return (1.0 - f) * logs[i] + f * logs[i + 1]

    def rate(t: float, c: np.ndarray) -> np.ndarray:
        c = c / np.linalg.norm(c)
        return velocity(g, beta, c, points, log_w(t), mass)[0]

    c = plateau.equilibrium(g, beta, sign, points, logs[0], mass)
    frame, flow, log_stretch = tangent_frame(c), np.eye(2), 0.0
    t, out = float(times[0]), []
    for k in range(len(times) - 1):
        ratio = velocity(g, beta, c, points, logs[k], mass)[1]
        offset = math.degrees(math.acos(min(1.0, float(c @ (sign * g.u)))))
        rates = np.linalg.eigvals(frame.T @ jacobian(g, beta, c, points, logs[k], mass) @ frame)
        out.append((float(times[k]), offset, ratio, float(np.max(rates.real)), log_stretch))
        if offset > DEGREES[-1]:
            break
        for _ in range(STEPS):  # RK4; the flow map by the midpoint's exponential
            j = frame.T @ jacobian(g, beta, c, points, log_w(t + dt / 2), mass) @ frame
            flow = expm(j * dt) @ flow
            norm = np.linalg.norm(flow, 2)
            log_stretch += math.log(norm)
            flow /= norm
            k1 = rate(t, c)
            k2 = rate(t + dt / 2, c + dt / 2 * k1)
            k3 = rate(t + dt / 2, c + dt / 2 * k2)
            k4 = rate(t + dt, c + dt * k3)
            c = c + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
            c /= np.linalg.norm(c)
            frame = tangent_frame(c, frame)
            t += dt
    return out


def exit_line(path: list[tuple[float, ...]]) -> str:
    """When the cluster turns unstable (its largest rate passes 0) and when its stretch since
    the start comes back to each of STRETCH_LEVELS: the exit of the delayed loss of stability."""
    unstable = [t for t, *_, lam, _ in path if lam > 0.0]
    if not unstable:
        return f"stable to t = {path[-1][0]:g}"
    cells = []
    for level in STRETCH_LEVELS:
        back = [t for t, *_, st in path if t > unstable[0] and st > level]
        cells.append(f"e^{level:g} at t = {back[0]:g}" if back else f"below e^{level:g} to "
                     f"t = {path[-1][0]:g}")
    low = min(st for *_, st in path)
    return (f"unstable from t = {unstable[0]:g}; stretch since t = {path[0][0]:g}: least "
            f"e^{low:.1f}, back to " + ", ".join(cells))


def w2_positions(g: Geometry, paths: dict[float, list], across: float) -> tuple[list, list]:
    """(times, W2) of the two clusters as point masses at their offsets from +-u, W2^2 =
    m_+ d_+^2 + m_- d_-^2 + pi^2 |across| (d in radians; plateau.py's W2 with its mass across),
    at the times both paths reach."""
    n = min(len(paths[1.0]), len(paths[-1.0]))
    w2 = [plateau.clusters_w2(g.m_u, math.radians(paths[1.0][k][1]),
                              math.radians(paths[-1.0][k][1]), across) for k in range(n)]
    return [paths[1.0][k][0] for k in range(n)], w2


def main(betas: list[float], across: float, min_w2: float, start: float | None = None) -> None:
    g = Geometry()
    for beta in betas:
        paths = {}
        for sign, name in ((1.0, "+u"), (-1.0, "-u")):
            path = paths[sign] = follow(g, beta, sign, start)
            released = brentq(lambda t, b=beta, s=sign: g.log_ratio(t, b, s), 0.0, g.t_max)
            cells = []
            for d in DEGREES:
                hit = [(t, r) for t, off, r, *_ in path if off > d]
                cells.append(f"off by {d:g} degrees at t = {hit[0][0]:g} (ratio {hit[0][1]:+.2f})"
                             if hit else f"within {d:g} degrees to t = {path[-1][0]:g}")
            print(f"beta = {beta:g}, cluster at {name}: " + "; ".join(cells)
                  + f"; mechanism's release {released:.2f}; offset at t = {path[0][0]:g}: "
                  f"{path[0][1]:.2f} degrees")
            print("   " + exit_line(path))
            if beta == betas[0]:
                print("   t: offset (deg), log(Z_tail / Z_self), largest rate, log stretch: "
                      + "; ".join(f"{t:g}: {off:.2f}, {r:+.2f}, {lam:+.2f}, {st:+.1f}"
                                  for t, off, r, lam, st in path if t % 4 == 0))
        if min_w2 > 0.0:
            times, w2 = w2_positions(g, paths, across)
            level = 2.0 * min_w2 + 0.02
            past = [t for t, w in zip(times, w2) if w > level]
            when = f"at t = {past[0]:g}" if past else f"not by t = {times[-1]:g}"
            print(f"  W2 of the clusters (mass across {across:g}) passes 2 x {min_w2:g} + 0.02 = "
                  f"{level:.4f} (study.py's departure) {when}; W2 at t = {times[0]:g}: "
                  f"{w2[0]:.4f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("betas", nargs="*", type=float, default=[300.0], metavar="BETA")
    parser.add_argument("--across", type=float, default=0.0, metavar="DM",
                        help="the runs' mass across the hemispheres' border (study.py --table), "
                        "added to W2^2 as pi^2 |DM|")
    parser.add_argument("--min-w2", type=float, default=0.0, metavar="W",
                        help="the runs' min W2: print when the clusters' W2 passes 2 W + 0.02")
    parser.add_argument("--start", type=float, default=None, metavar="T",
                        help="start the cluster at T (default: T_START or 0.2 beta - 40) from "
                        "its equilibrium; T_START = 20 takes the stretch from the cluster's "
                        "formation at every beta (slower: the tail sampled from T on)")
    args = parser.parse_args()
    if min(args.betas) < 300.0:
        parser.error("BETA must be >= 300: the model starts at t = 20 from a formed cluster that "
                     "its tail holds (below 300 the clusters are released before that)")
    main(args.betas, args.across, args.min_w2, args.start)
