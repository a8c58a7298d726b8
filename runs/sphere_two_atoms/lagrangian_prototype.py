"""Prototype (issue 30): log-mass Lagrangian particles with split and merge on S^2.

Not a scheme of the package yet: a research script that tests whether a Lagrangian
representation, kept resolved by splitting and merging, follows the two-atom case (base.toml)
at low temperature where the sphere's `log_sl` stalls (docs/numerics.md).

* **State.** n particles, each a point x_i of S^2 (the centroid of its mass), the logarithm
  of its mass (never formed as a float where small), and its shape: two tangent vectors
  (f1, f2) spanning the parallelogram it stands for (a cell of the initial cubed-sphere mesh,
  deformed by the flow). Its mean log density is ell_i = log m_i - log |f1 x f2|.
* **Flow.** dx/dt = X[rho](x), df/dt = DX(x) f (tangent Jacobian), all particles at once:
  an ODE in R^3 (no coordinate pole), Bogacki-Shampine 3(2) with error control (absolute, on
  the positions and shapes of the particles within 2 beta sigma_max(B) + 50 e-folds of the
  heaviest); steps grow where nothing moves. X and DX are softmax averages over the particles,
  summed in the log domain with certified pruning and, between tight groups, certified Taylor
  expansions (`clustered_logsumexp_sums`, the same sums to 2^-59 of each):
  X = P_x E[V y], DX v = P_x beta Cov(V y, B y) v - <x, E[V y]> v.
* **Split.** A particle longer than `s_max` (its largest singular value) is cut in two across
  its long axis; the masses follow the log-linear profile whose slope along the axis is fitted
  to the neighbours' ell (least squares over its 10 nearest): shares 1 / (1 + e^{-+gamma/2}),
  each child at the centroid of its half, so the first moment is kept (in the tangent plane).
* **Merge.** Particles in the same cell of a fine cubed-sphere index (cells of `merge_width`
  rad) become one: log masses summed exactly, position the mass-weighted mean, areas added.
* **Conserved.** Total mass to round-off (every split and merge is a sum of log masses);
  every mass positive.

Usage: .venv/bin/python runs/sphere_two_atoms/lagrangian_prototype.py BETA N TOL T_END
[SHAPE_TOL_FACTOR [MERGE_EPS]]
(N: initial cubed-sphere cells per face edge, 6 N^2 particles; TOL: absolute tolerance of the
positions per step, in radians; the shapes' relative tolerance is SHAPE_TOL_FACTOR * TOL,
default 100; MERGE_EPS default 0.3.) Prints W2 to Pi_# rho_0 (each particle's mass at its
position) every 0.25, and stops 10 after the departure (W2 > 2 min + 0.02) or at T_END.
"""

from __future__ import annotations

import math
import sys
import time
import tomllib
from pathlib import Path

import numpy as np
from scipy.spatial import cKDTree
from scipy.special import logsumexp

import spheredens as sd
from spheredens.interaction import clustered_logsumexp_sums
from spheredens.interaction._clusters import _grid_groups, group_width
from spheredens.interaction._pruned import pruned_logsumexp_sums
from spheredens.targets import projection_target
from spheredens.transport import w2_to_antipodal_atoms

HERE = Path(__file__).resolve().parent
#: the shapes' relative tolerance per step is SHAPE_TOL_FACTOR times the positions' tolerance
SHAPE_TOL_FACTOR = 100.0
#: particles closer than MERGE_EPS / (beta sigma_max(B)) are merged (the kernel's log varies by
#: at most MERGE_EPS between them; merging at the mass-weighted mean errs by O(MERGE_EPS^2))
MERGE_EPS = 0.3
#: the expansions (clustered sums) are used when the groups hold this many particles on average
CLUSTERED_FROM = 16
SPLIT_DEPTHS: list = []  # e-folds below the heaviest of every particle split (diagnostic)
AXES = [(0, 1, 2), (1, 2, 0), (2, 0, 1)]  # (normal, a, b) of the faces


# -- cubed sphere ------------------------------------------------------------------------------
def cube_point(face: int, alpha: np.ndarray, beta: np.ndarray) -> np.ndarray:
    """Points of face ``face`` (0..5: axis face % 3, sign +- by face // 3) at equiangular
    coordinates (alpha, beta), unit vectors."""
    ax, a, b = AXES[face % 3]
    s = 1.0 if face < 3 else -1.0
    p = np.zeros(np.broadcast(alpha, beta).shape + (3,))
    p[..., ax] = s
    p[..., a] = np.tan(alpha) * s
    p[..., b] = np.tan(beta)
    return p / np.linalg.norm(p, axis=-1, keepdims=True)


def cube_index(x: np.ndarray, n: int) -> np.ndarray:
    """The cell of each point on the n x n equiangular cubed sphere, as face * n^2 + i n + j,
    with i, j interleaved (Morton order) when n is a power of two."""
    ax = np.argmax(np.abs(x), axis=1)
    sign = np.take_along_axis(x, ax[:, None], 1)[:, 0]
    face = ax + 3 * (sign < 0)
    a = np.array([AXES[k][1] for k in range(3)])[ax]
    b = np.array([AXES[k][2] for k in range(3)])[ax]
    xa = np.take_along_axis(x, a[:, None], 1)[:, 0] / sign
    xb = np.take_along_axis(x, b[:, None], 1)[:, 0] / np.abs(sign)
    i = np.clip(((np.arctan(xa) + math.pi / 4) / (math.pi / 2) * n).astype(np.int64), 0, n - 1)
    j = np.clip(((np.arctan(xb) + math.pi / 4) / (math.pi / 2) * n).astype(np.int64), 0, n - 1)
    return face.astype(np.int64) * n * n + morton(i, j)


def morton(i: np.ndarray, j: np.ndarray) -> np.ndarray:
    out = np.zeros_like(i)
    for bit in range(31):
        out |= ((i >> bit) & 1) << (2 * bit + 1)
        out |= ((j >> bit) & 1) << (2 * bit)
    return out


def initial_particles(f, n: int, order: int = 4):
    """One particle per cubed-sphere cell: log mass (Gauss rule of ``order`` per direction),
    centroid, and the cell's two edge vectors through the centroid."""
    g, w = np.polynomial.legendre.leggauss(order)
    g, w = 0.5 * g, 0.5 * w  # on [-1/2, 1/2]
    dalpha = math.pi / 2 / n
    centre = -math.pi / 4 + (np.arange(n) + 0.5) * dalpha
    logm, xs, shapes = [], [], []
    for face in range(6):
        A = centre[:, None, None, None] + g[None, None, :, None] * dalpha
        Bt = centre[None, :, None, None] + g[None, None, None, :] * dalpha
        A, Bt = np.broadcast_arrays(A, Bt)  # (n, n, order, order)
        p = cube_point(face, A, Bt)
        X, Y = np.tan(A), np.tan(Bt)
        dA = (1 + X**2) * (1 + Y**2) / (1 + X**2 + Y**2) ** 1.5 * dalpha**2
        lw = np.log(dA * w[:, None] * w[None, :])
        lf = np.log(np.asarray(f(p.reshape(-1, 3)), dtype=float)).reshape(p.shape[:-1])
        v = lf + lw
        lm = logsumexp(v, axis=(2, 3))
        wt = np.exp(v - lm[..., None, None])
        c = np.einsum("ijkl,ijklc->ijc", wt, p)
        c /= np.linalg.norm(c, axis=-1, keepdims=True)
        ca = centre[:, None] + 0 * centre[None, :]
        cb = 0 * centre[:, None] + centre[None, :]
        f1 = cube_point(face, ca + dalpha / 2, cb) - cube_point(face, ca - dalpha / 2, cb)
        f2 = cube_point(face, ca, cb + dalpha / 2) - cube_point(face, ca, cb - dalpha / 2)
        logm.append(lm.reshape(-1))
        xs.append(c.reshape(-1, 3))
        shapes.append(np.stack([f1, f2], axis=-1).reshape(-1, 3, 2))
    logm = np.concatenate(logm)
    logm -= logsumexp(logm)
    return logm, np.concatenate(xs), np.concatenate(shapes)


# -- the flow -----------------------------------------------------------------------------------
class Flow:
    def __init__(self, model) -> None:
        self.model = model
        self.B = np.asarray(model.kernel.B, dtype=float)
        self.V = np.asarray(model.V, dtype=float)
        self.beta = float(model.kernel.beta)
        self.beta_sigma = self.beta * float(np.linalg.svd(self.B, compute_uv=False)[0])
        self.evaluations = 0

    def __call__(self, x: np.ndarray, shape: np.ndarray, logm: np.ndarray):
        """(dx/dt, dshape/dt) of every particle, all particles as sources."""
        self.evaluations += 1
        x = x / np.linalg.norm(x, axis=1, keepdims=True)
        vy = x @ self.V.T
        by = x @ self.B.T
        values = np.concatenate([vy, x, (vy[:, :, None] * by[:, None, :]).reshape(-1, 9)], 1)
        q = self.model.kernel.query(x)
        starts = _grid_groups(x, group_width(self.beta_sigma))
        if len(starts) * CLUSTERED_FROM <= len(x):  # groups of CLUSTERED_FROM on average
            z, nsum, _, _ = clustered_logsumexp_sums(q, x, logm, values, self.beta_sigma, starts)
        else:
            z, nsum, _, _ = pruned_logsumexp_sums(q, x, logm, values)
        mean = nsum / z[:, None]
        ev, ey, evb = mean[:, :3], mean[:, 3:6], mean[:, 6:].reshape(-1, 3, 3)
        cov = self.beta * (evb - ev[:, :, None] * (ey @ self.B.T)[:, None, :])
        xf = np.einsum("ij,ij->i", x, ev)
        vel = ev - xf[:, None] * x
        dshape = np.einsum("nij,njk->nik", cov, shape) - xf[:, None, None] * shape
        dshape -= x[:, :, None] * np.einsum("ni,nik->nk", x, dshape)[:, None, :]
        return vel, dshape


# -- split and merge ------------------------------------------------------------------------------
def tilt_mean(c: np.ndarray) -> np.ndarray:
    """Mean of the law on [-1/2, 1/2] with density proportional to e^{c s}."""
    small = np.abs(c) < 1e-4
    cs = np.where(small, 1.0, c)
    return np.where(small, c / 12.0, 0.5 / np.tanh(cs / 2) - 1.0 / cs)


def log_area(shape: np.ndarray) -> np.ndarray:
    return np.log(np.linalg.norm(np.cross(shape[:, :, 0], shape[:, :, 1]), axis=1))


def split(logm, x, shape, s_max):
    """Cut every particle longer than s_max in two across its long axis (module docstring)."""
    total = 0
    for _ in range(6):
        u, s, vt = np.linalg.svd(shape, full_matrices=False)  # shape = u diag(s) vt
        long = s[:, 0] > s_max
        if not long.any():
            break
        total += int(long.sum())
        SPLIT_DEPTHS.append(logm.max() - logm[long])
        ell = logm - log_area(shape)
        tree = cKDTree(x)
        k = min(11, len(x))
        _, nb = tree.query(x[long], k=k)
        d = x[nb[:, 1:]] - x[long][:, None, :]
        de = ell[nb[:, 1:]] - ell[long][:, None]
        grad = np.einsum("mij,mj->mi", np.linalg.pinv(d), de)  # least squares, all at once
        axis = u[long][:, :, 0]
        length = s[long][:, 0]
        gamma = np.clip(np.einsum("ij,ij->i", grad, axis) * length, -200.0, 200.0)
        mu = tilt_mean(gamma)
        half = tilt_mean(gamma / 2) / 2
        off_r, off_l = 0.25 + half - mu, -0.25 + half - mu
        lm = logm[long]
        lm_r = lm - np.logaddexp(0.0, -gamma / 2)
        lm_l = lm - np.logaddexp(0.0, gamma / 2)
        xr = x[long] + (off_r * length)[:, None] * axis
        xl = x[long] + (off_l * length)[:, None] * axis
        xr /= np.linalg.norm(xr, axis=1, keepdims=True)
        xl /= np.linalg.norm(xl, axis=1, keepdims=True)
        sh = shape[long] - 0.5 * length[:, None, None] * axis[:, :, None] * vt[long][:, None, 0, :]
        keep = ~long
        logm = np.concatenate([logm[keep], lm_r, lm_l])
        x = np.concatenate([x[keep], xr, xl])
        shape = np.concatenate([shape[keep], sh, sh])
    return logm, x, shape, total


def merge(logm, x, shape, n_fine):
    """Merge the particles that share a cell of the n_fine cubed sphere; order by cell."""
    key = cube_index(x, n_fine)
    order = np.argsort(key, kind="stable")
    key, logm, x, shape = key[order], logm[order], x[order], shape[order]
    start = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    if len(start) == len(key):
        return logm, x, shape, 0
    group = np.cumsum(np.r_[True, key[1:] != key[:-1]]) - 1
    top = np.maximum.reduceat(logm, start)
    w = np.exp(logm - top[group])
    tot = np.add.reduceat(w, start)
    new_logm = top + np.log(tot)
    xm = np.add.reduceat(w[:, None] * x, start) / tot[:, None]
    xm /= np.linalg.norm(xm, axis=1, keepdims=True)
    area = np.exp(log_area(shape))
    first_top = np.flatnonzero(w == 1.0)  # w = 1 exactly at each group's heaviest
    heavy = first_top[np.unique(group[first_top], return_index=True)[1]]
    scale = np.sqrt(np.add.reduceat(area, start) / area[heavy])
    new_shape = shape[heavy] * scale[:, None, None]
    return new_logm, xm, new_shape, len(key) - len(start)


# -- the run ---------------------------------------------------------------------------------------
def main() -> None:
    beta, n, tol = float(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    t_end = float(sys.argv[4])
    shape_tol_factor = float(sys.argv[5]) if len(sys.argv) > 5 else SHAPE_TOL_FACTOR
    merge_eps = float(sys.argv[6]) if len(sys.argv) > 6 else MERGE_EPS
    every = 0.25
    data = tomllib.loads((HERE / "base.toml").read_text())
    data["model"]["beta"] = beta
    data["discretization"] = {"scheme": "fv", "nlat": 16}
    cfg = sd.config_from_dict(data, base_dir=HERE)
    target = projection_target(cfg)
    u, m_plus = target.points[0], float(target.masses[0])
    problem = sd.Problem.from_config(cfg)
    flow = Flow(problem.model)
    window = 2 * flow.beta_sigma + 50.0
    logm, x, shape = initial_particles(problem.slice_initials()[0], n)
    s_max = 1.05 * float(np.linalg.svd(shape, compute_uv=False)[:, 0].max())
    merge_width = merge_eps / flow.beta_sigma
    n_fine = 2 ** int(math.ceil(math.log2(math.pi / 2 / merge_width)))
    logm, x, shape, _ = merge(logm, x, shape, n_fine)
    t, dt = 0.0, 0.05 / max(1.0, flow.beta_sigma / beta)
    clock = time.perf_counter()
    steps = rejected = splits = merges = 0
    last: tuple = ()
    w2_min, t_min, departure = math.inf, 0.0, None
    k1 = flow(x, shape, logm)
    next_snap = 0.0
    a21, a32 = 0.5, 0.75
    while t < t_end - 1e-12:
        if t >= next_snap - 1e-12:
            w = np.exp(logm - logm.max())
            w2 = w2_to_antipodal_atoms(x, w, u, m_plus)
            if w2 < w2_min:
                w2_min, t_min = w2, t
            if departure is None and t > t_min and w2 > 2 * w2_min + 0.02:
                departure = t
            print(
                f"t = {t:7.2f}  W2 = {w2:.5f}  particles {len(x)}  steps {steps} (+{rejected} "
                f"refused)  dt {dt:.3g}  rhs {flow.evaluations}  wall "
                f"{time.perf_counter() - clock:.0f} s  splits {splits} merges {merges}",
                flush=True,
            )
            if SPLIT_DEPTHS:
                depth = np.concatenate(SPLIT_DEPTHS)
                SPLIT_DEPTHS.clear()
                print(
                    "    splits since the last line, by depth below the heaviest (e-folds): "
                    + "  ".join(
                        f"<{e}: {int(((depth < e) & (depth >= p)).sum())}"
                        for p, e in zip([0, 10, 20, 50, 100], [10, 20, 50, 100, 1e9])
                    ),
                    flush=True,
                )
            if last:
                print(
                    "    last step: error x %.2g shape %.2g; worst particle %.1f e-folds down, "
                    "speed %.3g, length %.2g" % last,
                    flush=True,
                )
            if departure is not None and t >= departure + 10.0:
                break
            next_snap += every
        h = min(dt, next_snap - t)
        v1, s1 = k1
        x2, sh2 = x + a21 * h * v1, shape + a21 * h * s1
        v2, s2 = flow(x2, sh2, logm)
        x3, sh3 = x + a32 * h * v2, shape + a32 * h * s2
        v3, s3 = flow(x3, sh3, logm)
        xn = x + h * (2 / 9 * v1 + 1 / 3 * v2 + 4 / 9 * v3)
        shn = shape + h * (2 / 9 * s1 + 1 / 3 * s2 + 4 / 9 * s3)
        xn /= np.linalg.norm(xn, axis=1, keepdims=True)
        k4 = flow(xn, shn, logm)
        v4, s4 = k4
        ex = h * np.linalg.norm(-5 / 72 * v1 + 1 / 12 * v2 + 1 / 9 * v3 - 1 / 8 * v4, axis=1)
        es = (
            h
            * np.linalg.norm(
                (-5 / 72 * s1 + 1 / 12 * s2 + 1 / 9 * s3 - 1 / 8 * s4).reshape(len(x), -1), axis=1
            )
            / np.linalg.norm(shape.reshape(len(x), -1), axis=1)
        )
        relevant = logm >= logm.max() - window
        err_x = float(ex[relevant].max()) / tol
        err_s = float(es[relevant].max()) / (shape_tol_factor * tol)
        err = max(err_x, err_s)
        worst = int(np.argmax(np.where(relevant, ex, -1.0)))
        last = (
            err_x,
            err_s,
            float(logm.max() - logm[worst]),
            float(np.linalg.norm(v1[worst])),
            float(np.linalg.svd(shape[worst], compute_uv=False)[0]),
        )
        factor = min(5.0, max(0.2, 0.9 * err ** (-1 / 3))) if err > 0 else 5.0
        if err > 1.0:
            rejected += 1
            dt = h * factor
            continue
        steps += 1
        t += h
        dt = max(dt, h * factor) if h < dt else h * factor
        x, shape = xn, shn
        logm, x, shape, n_split = split(logm, x, shape, s_max)
        logm, x, shape, n_merged = merge(logm, x, shape, n_fine)
        splits, merges = splits + n_split, merges + n_merged
        k1 = flow(x, shape, logm)
    print(
        f"min W2 = {w2_min:.5f} at t = {t_min:g}; departure {departure}; mass - 1 = "
        f"{math.expm1(logsumexp(logm)):.2e}; wall {time.perf_counter() - clock:.0f} s"
    )


if __name__ == "__main__":
    main()
