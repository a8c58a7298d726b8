"""The look chain's particles put back on a regular lattice every so often: a trial of the
seventeenth session's first next step (docs/concentration.md, "The look chain's tail on a
lattice, and the PDE's own growth on the chain"; a prototype, not an option).

Until t = 16 the handover's particles on the look chain lie as the mesh put them, and the sums
over them are exact to 1e-4; after, they lose that arrangement, their sums err, their own
densities scatter, and the error grows by about 0.3 per unit of time. Here, every INTERVAL units
of time (after an accepted step that crosses a multiple of it), the light particles in the
look chain's caps (chaincaps.py's caps: refine_look's caps followed down each look chain) are
replaced by one particle per cell of the N_R x N_R cubed sphere they fall in: at the cell's
centre, with the cell's shape, and the log density of the least-squares quadratic through the
K nearest old particles' mean log densities (in the tangent plane at the centre), the log
masses shifted by one constant so that the replaced mass is kept exactly (in the log domain).
Cells are left out where a heavy particle (within KEEP_DEPTH of the densest: the clusters and
their flanks) is the nearest, and within a coarse particle's length (one not yet split to the
look length: its mean log density across a steep flank is not the value at its centre); the fit
is held within its neighbours' range (a quadratic extrapolated toward a cluster, with one
constant shift for the whole region, took 1.3 e-folds off the disc about w in a first trial).
A point sum of a kernel of width sigma over a lattice of spacing h < sigma is exact to
exp(-2 pi^2 sigma^2 / h^2); over scattered points it is not.

The run is handover.py's (``--run 256 12 32 TOL --on NLAT2 --merge-tail 0.4 --centroids``)
into cases/handover/relattice{INTERVAL}_n{N_R}/, with holes.py's observer (the particles within
0.45 rad of +-w every snapshot: chainflow.py and lookchain.py read them). With --reach F the
caps' radius (LOOK_RADIUS widths plus the split length) is F times as large and the coarse
particles are replaced too, each mean log density read as the value at its centre (folder
..._r{F}).

With --check FILE.holes.npz FV.nc T... (seconds, no run): at each time T, the point sums on
chainflow.py's discs of the chain of +w, at the kept particles of a holes.py file: the scheme's,
over the lattice (N_R = 128) of the particles within CHECK_RADIUS of the links with the log
densities fitted to theirs, and over the same lattice with fv's log densities: how much of the
sums' error is the particles' arrangement, and how much their densities.

Usage: .venv/bin/python runs/sphere_two_atoms/lagrangian/relattice.py TOL NLAT2 T INTERVAL N_R
       [--reach F]
       .venv/bin/python runs/sphere_two_atoms/lagrangian/relattice.py --check FILE.holes.npz
       FV.nc T...
"""

import math
import sys

import chaincaps  # beside this script (first: it imports handover, and study beside it)
import chainflow  # beside this script
import numpy as np
from lookchain import chain, load_cells, top_eigenvector  # beside this script
from scipy.spatial import cKDTree
from scipy.special import logsumexp

from spheredens.geometry import tangent_frames
from spheredens.grids import CubedSphereCells
from spheredens.grids._cubed_sphere import cube_index
from spheredens.schemes import _sphere_lagrangian
from spheredens.schemes._particle_remesh import (
    LOOK_RADIUS,
    crosses,
    log_area,
    merge,
    tangent_shapes,
)

#: --check: the radius about each link whose particles the lattice replaces
CHECK_RADIUS = 0.25
#: the old particles the quadratic at a new centre is fitted to
K = 24
#: a particle longer than this many lattice spacings keeps the cells within its length
COARSE = 1.5
#: particles within this many e-folds of the densest are never replaced (the clusters)
KEEP_DEPTH = 10.0


def fitted(centres: np.ndarray, x: np.ndarray, values: np.ndarray) -> np.ndarray:
    """The least-squares quadratic through the K nearest of ``x`` (their ``values``), in the
    tangent plane at each of ``centres``, read at the centre (within the neighbours' range)."""
    k = min(K, len(x))
    _, near = cKDTree(x).query(centres, k=k)
    frame = tangent_frames(centres)
    d = np.einsum("mkj,mji->mki", x[near] - centres[:, None, :], frame)
    h = np.sqrt(np.mean(np.sum(d * d, axis=2), axis=1))
    u = d / h[:, None, None]
    u1, u2 = u[..., 0], u[..., 1]
    basis = np.stack([np.ones_like(u1), u1, u2, u1 * u1, u1 * u2, u2 * u2], axis=-1)
    coefficients = np.einsum("mik,mk->mi", np.linalg.pinv(basis, rcond=1e-8), values[near])
    low, high = values[near].min(axis=1), values[near].max(axis=1)
    return np.clip(coefficients[:, 0], low, high)  # never beyond the neighbours' range


class Lattice:
    """The N_R x N_R cubed sphere's centres and shapes, by cube_index."""

    def __init__(self, n: int) -> None:
        cells = CubedSphereCells(n)
        self.n, self.h = n, cells.h
        #: particles longer than this are not left out (--reach: the tail's own particles)
        self.coarse_from = 0.0
        _, centre, shape = cells.log_moments(lambda p: np.zeros(len(p)), order=1)
        index = cube_index(centre, n)
        self.centre = np.empty((cells.n_cells, 3))
        self.shape = np.empty((cells.n_cells, 3, 2))
        self.centre[index], self.shape[index] = centre, shape

    def replace(self, log_m, x, shape, log_point, caps, keep_depth=KEEP_DEPTH):
        """The particles in the cells whose centres lie in the ``caps`` ((centre, radius)
        pairs) replaced, one particle per such cell (module docstring): (log masses,
        positions, shapes, log point masses, replaced, residual spread)."""
        density = log_m - log_area(shape)
        light = density < density.max() - keep_depth
        within = np.zeros(len(self.centre), dtype=bool)
        for centre, radius in caps:
            within |= self.centre @ centre > np.cos(radius)
        # not where a heavy particle is the nearest (the clusters and their flanks stay)
        within[np.flatnonzero(within)[~light[cKDTree(x).query(self.centre[within])[1]]]] = False
        # not where a coarse particle (not yet split to the look length) still lies: the mean
        # log density of a particle across a steep flank is not the log density at its centre
        length = np.linalg.svd(shape, compute_uv=False)[:, 0]
        coarse = light & (length > COARSE * self.h) & (length > self.coarse_from)
        if coarse.any():
            gap, which = cKDTree(x[coarse]).query(self.centre[within])
            covered = gap < length[coarse][which]
            within[np.flatnonzero(within)[covered]] = False
        old = light & within[cube_index(x, self.n)]
        used = np.flatnonzero(within)
        if old.sum() < K:
            return log_m, x, shape, log_point, 0, 0.0
        centre = self.centre[used]
        new_shape = tangent_shapes(centre, self.shape[used])
        fit = fitted(centre, x[light], density[light])
        new_log_m = fit + log_area(new_shape)
        new_log_m += logsumexp(log_m[old]) - logsumexp(new_log_m)
        residual = density[old] - fitted(x[old], x[light], density[light])
        keep = ~old
        return (
            np.concatenate([log_m[keep], new_log_m]),
            np.concatenate([x[keep], centre]),
            np.concatenate([shape[keep], new_shape]),
            np.concatenate([log_point[keep], new_log_m]),
            int(old.sum()),
            float(np.std(residual)),
        )


def patch(interval: float, n_r: int, reach: float = 1.0) -> None:
    """SphereLagrangianScheme.advance followed by the lattice's replacement every ``interval``."""
    lattice = Lattice(n_r)
    if reach != 1.0:
        lattice.coarse_from = math.inf
    advance = _sphere_lagrangian.SphereLagrangianScheme.advance

    def advance_on_lattice(self, state, t, dt):
        out = advance(self, state, t, dt)
        if self._last_error > self.tolerance or not crosses(t, dt, interval):
            return out
        slices = []
        for s in out:
            log_m, x, shape, log_point = _sphere_lagrangian.unpack(s)
            x = x / np.linalg.norm(x, axis=1, keepdims=True)
            caps = [
                (centre, reach * (LOOK_RADIUS * width + self.s_max))
                for centre, width in chaincaps.chain_caps(log_m, x, self._query())
            ]
            total = logsumexp(log_m)
            log_m, x, shape, log_point, count, spread = lattice.replace(
                log_m, x, shape, log_point, caps
            )
            merged = merge(log_m, x, shape, log_point, self.n_fine, self.merge_moments)
            print(
                f"lattice at t = {t + dt:.3f}: {count} particles -> "
                f"{len(log_m) - len(s[0]) + count}"
                f" (residual spread {spread:.3f} e-fold, {merged[4]} merged,"
                f" mass change {logsumexp(merged[0]) - total:.1e})",
                flush=True,
            )
            slices.append(_sphere_lagrangian.pack(*merged[:4]))
        return np.stack(slices)

    _sphere_lagrangian.SphereLagrangianScheme.advance = advance_on_lattice


def main(tol: float, on: int, t_end: float, interval: float, n_r: int, reach: float) -> None:
    patch(interval, n_r, reach)
    name = f"relattice{interval:g}_n{n_r}" + (f"_r{reach:g}" if reach != 1.0 else "")
    chaincaps.run(name, tol, on, t_end)


def check(holes: str, fv: str, times: list[float], n_r: int = 128) -> None:
    """The point sums on the chain's discs (chainflow.py's) at the kept particles of a
    holes.py file: the scheme's; over the lattice of the particles within CHECK_RADIUS of w,
    L1, L2 and e*, its log densities fitted to the particles' (``replace``); and over the same
    lattice with fv's log densities (its nearest cell's) instead: the arrangement's error and
    the densities' apart."""
    g = chainflow.Geometry(t_max=1.0)
    links = chain(g, 1.0)
    centres = {"w": links[0], "L1": links[1], "L2": links[2], "e*": top_eigenvector(g, 1.0)}
    times_fv, log_rho, points = load_cells(fv)
    tree = cKDTree(points[0])
    with chainflow.xr.open_dataset(fv) as d:
        area = d["cell_area"].values
    with np.load(holes) as kept:
        arrays = dict(kept)
    lattice = Lattice(n_r)
    lattice.coarse_from = math.inf
    caps = [(c, CHECK_RADIUS) for c in centres.values()]
    print("median |v - v_fv| per disc: the scheme's / the lattice's, fitted / with fv's densities")
    for t in times:
        key, k = f"{t:.2f}", int(np.argmin(np.abs(times_fv - t)))
        ok = np.isfinite(log_rho[k])
        y, fv_log_m = points[k][ok], log_rho[k][ok] + np.log(area[ok])
        x, log_m, shape = arrays[key + "_x"], arrays[key + "_log_m"], arrays[key + "_shape"]
        new_log_m, new_x, new_shape, _, count, _ = lattice.replace(
            log_m, x, shape, log_m.copy(), caps, keep_depth=-math.inf
        )
        kept_count = len(log_m) - count  # the lattice's particles come after the kept
        exact = new_log_m.copy()
        exact[kept_count:] = log_rho[k][tree.query(new_x[kept_count:])[1]] + log_area(
            new_shape[kept_count:]
        )
        row = []
        for name, c in centres.items():
            sel = np.arccos(np.clip(x @ c, -1.0, 1.0)) < chainflow.DISC
            v_fv = chainflow.fv_velocity(g, x[sel], fv_log_m, y)
            gaps = [
                np.median(np.linalg.norm(v - v_fv, axis=1))
                for v in (
                    arrays[key + "_velocity"][sel],
                    chainflow.fv_velocity(g, x[sel], new_log_m, new_x),
                    chainflow.fv_velocity(g, x[sel], exact, new_x),
                )
            ]
            row.append(f"{name}: {gaps[0]:.5f} / {gaps[1]:.5f} / {gaps[2]:.5f}")
        print(f"  t = {t:5g}: " + "; ".join(row))


if __name__ == "__main__":
    if sys.argv[1] == "--check":
        check(sys.argv[2], sys.argv[3], [float(t) for t in sys.argv[4:]])
        sys.exit()

    a, reach = sys.argv[1:], 1.0
    if "--reach" in a:
        i = a.index("--reach")
        reach = float(a[i + 1])
        del a[i : i + 2]
    main(float(a[0]), int(a[1]), float(a[2]), float(a[3]), int(a[4]), reach)
