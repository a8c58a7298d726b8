"""The hybrid (hybrid.py) with the tail moved by a Lagrangian remap instead of ``fv``'s
CFL-limited fluxes: a first look at step (1) of docs/concentration.md's "Cost, and what is next
(after the twentieth session)" (issue 30; a prototype in the runs, not a scheme; what it
measured: the section "The tail without the CFL limit" there).

The clusters stay particles, taken in and merged as in hybrid.py. The mesh part (the tail)
keeps, per cell, its mass and its centroid (offsets in latitude and longitude from the box's
middle). A step dt:

* the velocity field is evaluated at the cell centres (``lowrank_points`` with the particles as
  atoms, as hybrid.py's faces) and interpolated bilinearly on the rings (the vector in R^3,
  projected onto the tangent plane);
* each cell is cut into S x S sub-boxes (SUBCELLS, env SUBCELLS); their masses are those of the
  log-linear profile whose centroid is the cell's (inverse Langevin function per direction),
  each at its own centroid under that profile; they move forward with RK4 sub-steps short
  enough that dt_sub max |grad X| <= SUBSTEP and are deposited into the cells their arrivals
  are in: log masses summed (log-sum-exp), the centroid the arrivals' mass-weighted mean. Mass
  is conserved to round-off, every mass stays positive, and there is no CFL limit;
* with CENTROID_SUMS=1 in the environment, the field at the centres and at the particles is
  the pruned direct sums over the cells at their centroids and the particles;
* predictor-corrector in time: the predictor takes the field at t over the whole step, the
  corrector the field linear in time between t and the predicted state at t + dt. The
  particles move with their exact velocities (pruned direct sums), the same way.

Usage (from runs/sphere_two_atoms/lagrangian):
  ../../../.venv/bin/python hybrid_sl.py RUN T0 T1 DT   (RUN a folder of cases/hybrid: the
      hybrid's snapshot at T0 is the start; prints at every 0.5 up to T1 W2, the wall time,
      and against RUN's own snapshot there: its W2, the chain's tail (median log rho - RUN's
      over the cells within 0.08 rad of L0-L4 and e*) and the heaviest particle of each
      hemisphere's angle from RUN's)
"""

from __future__ import annotations

# isort: split
import math
import os
import sys
import time

import hybrid
import numpy as np
from handover import original_target
from mechanism import Geometry

from spheredens.geometry import tangent_project
from spheredens.grids import RingMesh
from spheredens.interaction import LowRankPoints
from spheredens.interaction._interpolant import log_bincount
from spheredens.interaction._pruned import log_mass_velocity
from spheredens.schemes._circle_log_sl import inverse_langevin, langevin
from spheredens.schemes._sphere_fv import _wrap, minmod3

#: RK4 sub-steps of the trajectories: dt_sub * max |grad X| at most this
SUBSTEP = 0.5
#: sub-cells per cell side in the remap's quadrature
SUBCELLS = int(os.environ.get("SUBCELLS", "4"))
#: the sums over the cells at their centroids (pruned direct sums) rather than at their centres
CENTROID_SUMS = os.environ.get("CENTROID_SUMS", "0") == "1"
#: the predictor-corrector change is reported over the cells within this many e-folds of the top
WINDOW = 30.0


def unit(x):
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def to_latlon(p):
    return np.arcsin(np.clip(p[..., 2], -1.0, 1.0)), np.arctan2(p[..., 1], p[..., 0])


class Interpolator:
    """Bilinear interpolation of cell-centre values of a RingMesh: linear in longitude within
    the two rings whose centre latitudes bracket the point, then linear in latitude (the caps
    are rings of one value at the poles)."""

    def __init__(self, mesh: RingMesh) -> None:
        self.mesh = mesh
        self.ring_lat = mesh.lat_c[mesh.ring_start]

    def stencil(self, p: np.ndarray):
        m = self.mesh
        lat, lon = to_latlon(p)
        lon = np.mod(lon, 2.0 * math.pi)
        j = np.clip(np.searchsorted(self.ring_lat, lat, side="right") - 1, 0, m.nlat - 2)
        theta = np.clip((lat - self.ring_lat[j]) / (self.ring_lat[j + 1] - self.ring_lat[j]), 0, 1)
        idx, wts = [], []
        for r, wr in ((j, 1.0 - theta), (j + 1, theta)):
            n = m.ring_count[r]
            s = lon * n / (2.0 * math.pi) - 0.5
            k0 = np.floor(s).astype(np.int64)
            f = np.where(n > 1, s - k0, 0.0)
            idx += [m.ring_start[r] + np.mod(k0, n), m.ring_start[r] + np.mod(k0 + 1, n)]
            wts += [wr * (1.0 - f), wr * f]
        return np.stack(idx, axis=-1), np.stack(wts, axis=-1)

    def __call__(self, values: np.ndarray, p: np.ndarray, holes: bool = False):
        idx, w = self.stencil(p)
        v = values[idx]
        if not holes:
            return np.einsum("nk,nk...->n...", w, v)
        ok = np.isfinite(v)
        w = np.where(ok, w, 0.0)
        total = w.sum(axis=1)
        out = np.einsum("nk,nk->n", w, np.where(ok, v, 0.0)) / np.where(total > 0, total, 1.0)
        return np.where(total > 0, out, -np.inf)


class SubCells:
    """Each cell of a RingMesh as S x S sub-boxes in (lat, lon), the caps as S rings of 4 S
    sectors (folded into 4 rows of S^2 per cap): the cell of each row (``cell``), each
    sub-box's exact area and its centre in (lat, lon), shape (rows, S^2) each."""

    def __init__(self, mesh: RingMesh, s: int) -> None:
        cell, area, lat_c, lon_c = [], [], [], []
        for group, cols in (
            (np.flatnonzero(mesh.is_cap), 4 * s),
            (np.flatnonzero(~mesh.is_cap), s),
        ):
            lat0, lat1 = mesh.lat_bounds[group, 0], mesh.lat_bounds[group, 1]
            lon0, lon1 = mesh.lon_bounds[group, 0], mesh.lon_bounds[group, 1]
            lat = lat0[:, None] + (np.arange(s + 1) / s)[None, :] * (lat1 - lat0)[:, None]
            lon = lon0[:, None] + ((np.arange(cols) + 0.5) / cols)[None, :] * (lon1 - lon0)[:, None]
            band = np.sin(lat[:, 1:]) - np.sin(lat[:, :-1])  # (g, s)
            shape = (len(group), s, cols)
            a = band[:, :, None] * ((lon1 - lon0) / cols)[:, None, None]
            mid = 0.5 * (lat[:, 1:] + lat[:, :-1])
            rows = len(group) * s * cols // (s * s)
            cell.append(np.repeat(group, cols // s))
            area.append(np.broadcast_to(a, shape).reshape(rows, s * s))
            lat_c.append(np.broadcast_to(mid[:, :, None], shape).reshape(rows, s * s))
            lon_c.append(np.broadcast_to(lon[:, None, :], shape).reshape(rows, s * s))
        self.cell = np.concatenate(cell)
        self.area = np.concatenate(area)
        self.lat_centre = np.concatenate(lat_c)
        self.lon_centre = np.concatenate(lon_c)


class RemapHybrid(hybrid.Hybrid):
    """hybrid.Hybrid with the mesh part advanced by the backward remap (module docstring)."""

    def __init__(self, scheme, model, depth, sub, merge) -> None:
        super().__init__(scheme, model, depth, sub, merge)
        m = self.mesh
        self.centres = LowRankPoints(
            model,
            m.points,
            m.area,
            m.points,
            nthreads=int(os.environ.get("SPHEREDENS_THREADS", "1")),
        )
        for key in ("log_domain_below", "peel_levels", "peel_min_pairs"):
            setattr(self.centres, key, getattr(self.lowrank, key))
        self.subcells = SubCells(m, SUBCELLS)
        self.interp = Interpolator(m)
        self.substeps = 0
        self.change = (0.0, 0.0)

    def centroid_points(self, cen):
        """The cells' centroids as unit vectors (the caps: the poles)."""
        m = self.mesh
        lat = 0.5 * (m.lat_bounds[:, 0] + m.lat_bounds[:, 1]) + cen[0]
        lat = np.where(m.is_cap, m.lat_c, lat)
        lon = m.lon_c + cen[1]
        return np.stack([np.cos(lat) * np.cos(lon), np.cos(lat) * np.sin(lon), np.sin(lat)], -1)

    def sources(self, rho, cen, x, log_m):
        """Every occupied cell (at its centroid with CENTROID_SUMS, else at its centre) and
        every particle, in block order: points and log masses."""
        a = np.maximum(rho, 0.0) * self.mesh.area
        occ = a > 0.0
        cells = (self.centroid_points(cen) if CENTROID_SUMS else self.mesh.points)[occ]
        pts = np.concatenate([cells, x])
        log_a = np.concatenate([np.log(a[occ]), log_m])
        order = hybrid.block_order(pts)
        return pts[order], log_a[order]

    def centre_field(self, rho, cen, x, log_m):
        if CENTROID_SUMS:  # the pruned direct sums, the cells at their centroids
            pts, log_a = self.sources(rho, cen, x, log_m)
            p = self.mesh.points
            po = hybrid.block_order(p)
            v = np.empty_like(p)
            v[po] = log_mass_velocity(self.model, p[po], pts, log_a)
            return v
        order = hybrid.block_order(x)
        out = self.centres.attention_average_with_atoms(rho, x[order], log_m[order])
        return tangent_project(self.mesh.points, out)

    def gradient_bound(self, field):
        m = self.mesh
        d = np.linalg.norm(field[m.face_left] - field[m.face_right], axis=1)
        dist = np.linalg.norm(m.points[m.face_left] - m.points[m.face_right], axis=1)
        return float(np.max(d / dist))

    def trace(self, p, fields, dt, n_sub, sign):
        """RK4 on the sphere over dt in n_sub sub-steps, backward (sign -1: from t + dt to t)
        or forward; ``fields(p, theta)`` the velocity at p at time t + theta dt."""
        h = dt / n_sub
        theta0 = 1.0 if sign < 0 else 0.0
        for i in range(n_sub):
            th = theta0 + sign * i / n_sub
            dth = sign / n_sub
            k1 = fields(p, th)
            k2 = fields(unit(p + 0.5 * sign * h * k1), th + 0.5 * dth)
            k3 = fields(unit(p + 0.5 * sign * h * k2), th + 0.5 * dth)
            k4 = fields(unit(p + sign * h * k3), th + dth)
            p = unit(p + sign * h / 6.0 * (k1 + 2 * k2 + 2 * k3 + k4))
        return p

    def log_slopes(self, log_rho):
        """Limited slopes of log rho per radian of latitude and of longitude (minmod of the
        one-sided differences, as ``fv``'s; zero at the caps and the rings next to them)."""
        fv, m = self.fv, self.mesh
        L = np.where(
            np.isfinite(log_rho),
            log_rho,
            np.nanmin(np.where(np.isfinite(log_rho), log_rho, np.nan)) - 10.0,
        )
        e, w = L[fv._east], L[fv._west]
        s_lon = minmod3(e - L, L - w, L - w) / m.dlon
        n, so = m.north_average @ L, m.south_average @ L
        s_lat = minmod3((n - L) / fv._d_north, (L - so) / fv._d_south, (L - so) / fv._d_south)
        s_lat[~fv._inner] = 0.0
        s_lon[~fv._inner] = 0.0
        return s_lat, s_lon

    def centroid_remap(self, rho, cen, f0, f1, dt, n_sub):
        """As :meth:`forward_remap`, the sub-cells' masses from the log-linear profile whose
        centroid is the cell's carried centroid ``cen`` (offsets in latitude and longitude from
        the box's middle, (2, n_cells)), each sub-cell's mass at its own centroid under the
        profile; the arrival cells' centroids are their arrivals' mass-weighted mean. Returns
        rho, the new centroids, the log masses."""
        m, sub, interp = self.mesh, self.subcells, self.interp

        def field(p, th):
            f = f0 if f1 is None else (1.0 - th) * f0 + th * f1
            return tangent_project(p, interp(f, p))

        with np.errstate(divide="ignore"):
            log_cell = np.log(np.maximum(rho, 0.0) * m.area)
        half_lat = 0.5 * (m.lat_bounds[:, 1] - m.lat_bounds[:, 0])
        half_lon = 0.5 * m.dlon
        g_lat = np.where(m.is_cap, 0.0, inverse_langevin(cen[0] / half_lat) / half_lat)
        g_lon = np.where(m.is_cap, 0.0, inverse_langevin(cen[1] / half_lon) / half_lon)
        c = sub.cell[:, None]
        mid_lat = 0.5 * (m.lat_bounds[:, 0] + m.lat_bounds[:, 1])
        d_lat = sub.lat_centre - mid_lat[c]
        d_lon = sub.lon_centre - m.lon_c[c]
        log_w = np.log(sub.area) + g_lat[c] * d_lat + g_lon[c] * d_lon
        log_w = (
            log_w - log_bincount(np.repeat(sub.cell, log_w.shape[1]), log_w.ravel(), m.n_cells)[c]
        )
        log_sub = (log_cell[c] + log_w).ravel()
        # each sub-cell's centroid under the profile (sub-boxes 1 / S of the cell's width)
        s_lat = half_lat[c] / SUBCELLS
        s_lon = np.where(m.is_cap[c], half_lon[c] / (4 * SUBCELLS), half_lon[c] / SUBCELLS)
        lat = (sub.lat_centre + s_lat * langevin(g_lat[c] * s_lat)).ravel()
        lon = (sub.lon_centre + s_lon * langevin(g_lon[c] * s_lon)).ravel()
        p = np.stack([np.cos(lat) * np.cos(lon), np.cos(lat) * np.sin(lon), np.sin(lat)], -1)
        keep = np.isfinite(log_sub)
        arrive = self.trace(p[keep], field, dt, n_sub, +1.0)
        la, lo = to_latlon(arrive)
        cells = m.locate(la, lo)
        log_mass = log_bincount(cells, log_sub[keep], m.n_cells)
        w = np.exp(log_sub[keep] - log_mass[cells])
        off_lat = la - mid_lat[cells]
        off_lon = _wrap(lo - m.lon_c[cells])
        new = np.zeros((2, m.n_cells))
        new[0] = np.bincount(cells, w * off_lat, m.n_cells)
        new[1] = np.bincount(cells, w * off_lon, m.n_cells)
        new[0] = np.clip(new[0], -0.99 * half_lat, 0.99 * half_lat)
        new[1] = np.clip(new[1], -0.99 * half_lon, 0.99 * half_lon)
        new[:, m.is_cap] = 0.0
        with np.errstate(under="ignore"):
            return np.exp(log_mass) / m.area, new, log_mass

    def initial_centroids(self, rho):
        """The centroids of the limited log-linear profiles (offsets from the boxes' middles)."""
        m = self.mesh
        with np.errstate(divide="ignore"):
            s_lat, s_lon = self.log_slopes(np.log(np.maximum(rho, 0.0)))
        half_lat = 0.5 * (m.lat_bounds[:, 1] - m.lat_bounds[:, 0])
        half_lon = 0.5 * m.dlon
        cen = np.stack(
            [half_lat * langevin(s_lat * half_lat), half_lon * langevin(s_lon * half_lon)]
        )
        cen[:, m.is_cap] = 0.0
        return cen

    def particles(self, state0, state1, dt, n_sub, x):
        """The particles from x over dt, with the field linear in time between the states
        (rho, cen, x, log_m) at t and at t + dt (state1 None: frozen at t); their velocities
        the pruned direct sums."""

        def velocity(sources, p):
            po = hybrid.block_order(p)
            v = np.empty_like(p)
            v[po] = log_mass_velocity(self.model, p[po], *sources)
            return v

        s0 = self.sources(*state0)
        s1 = None if state1 is None else self.sources(*state1)

        def field(p, th):
            v0 = velocity(s0, p)
            return v0 if s1 is None else (1.0 - th) * v0 + th * velocity(s1, p)

        return self.trace(x, field, dt, n_sub, +1.0)

    def sl_step(self, rho, cen, x, log_m, t, dt):
        """One predictor-corrector step of the tail (with its centroids) and the particles."""
        f0 = self.centre_field(rho, cen, x, log_m)
        n_sub = max(1, math.ceil(dt * self.gradient_bound(f0) / SUBSTEP))
        rho_p, cen_p, lm_p = self.centroid_remap(rho, cen, f0, None, dt, n_sub)
        now = (rho, cen, x, log_m)
        x_p = self.particles(now, None, dt, n_sub, x)
        f1 = self.centre_field(rho_p, cen_p, x_p, log_m)
        n_sub = max(n_sub, math.ceil(dt * self.gradient_bound(f1) / SUBSTEP))
        rho_c, cen_c, lm_c = self.centroid_remap(rho, cen, f0, f1, dt, n_sub)
        x_c = self.particles(now, (rho_p, cen_p, x_p, log_m), dt, n_sub, x)
        sel = np.isfinite(lm_c) & np.isfinite(lm_p) & (lm_c >= np.max(lm_c) - WINDOW)
        d = np.abs(lm_c - lm_p)[sel]
        self.change = (float(np.median(d)), float(d.max()))
        self.substeps = n_sub
        return rho_c, cen_c, x_c


def main() -> None:
    run, t0, t1, dt = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
    nlat = hybrid.run_mesh(run).nlat
    depth = float(run.split("_d")[1].split("_")[0])
    sub = int(run.split("_s")[1].split("_")[0])
    merge = float(run.split("_m")[1].split("_")[0])
    problem, scheme, _, _ = hybrid.start(nlat, 12.0)
    hy = RemapHybrid(scheme, problem.model, depth, sub, merge)
    folder = hybrid.OUT / run
    s = np.load(folder / f"t{t0:08.3f}.npz")
    rho, x, log_m, t = s["rho"], s["x"], s["log_m"], float(s["t"])
    cen = hy.initial_centroids(rho)
    target = original_target(hybrid.BETA)
    g = Geometry(t_max=1.0)
    mesh = hy.mesh
    clock = time.perf_counter()
    steps = 0
    while t < t1 - 1e-9:
        next_snap = hybrid.SPACING * (math.floor(t / hybrid.SPACING + 1e-9) + 1)
        while t < next_snap - 1e-9:
            h = min(dt, next_snap - t)
            rho, cen, x = hy.sl_step(rho, cen, x, log_m, t, h)
            t = next_snap if next_snap - t - h < 1e-12 else t + h
            rho, x, log_m = hy.take_in(rho, x, log_m)
            cen[:, rho <= 0.0] = 0.0
            x, log_m = hy.merge(x, log_m)
            steps += 1
        pts, mass = hybrid.atoms(mesh, rho, x, log_m)
        w2 = hybrid.w2_to_target(target, pts, mass)
        ref_path = folder / f"t{t:08.3f}.npz"
        extra = ""
        if ref_path.exists():
            r = np.load(ref_path)
            w2r = hybrid.w2_to_target(target, *hybrid.atoms(mesh, r["rho"], r["x"], r["log_m"]))
            with np.errstate(divide="ignore"):
                log_ref = np.log(r["rho"])
            moved = [  # the heaviest particle of each hemisphere against ref's
                math.degrees(math.acos(min(1.0, float(pa @ pb))))
                for pa, pb in zip(
                    hybrid.heaviest({"x": x, "log_m": log_m}, g.u), hybrid.heaviest(r, g.u)
                )
            ]
            extra = (
                f"; ref W2 {w2r:.7f}; chain {hybrid.chain_offsets(g, mesh, rho, log_ref)}; "
                f"clusters {moved[0]:.2e}, {moved[1]:.2e} degrees from ref's"
            )
        print(
            f"t = {t:g}: W2 {w2:.7f}, {len(x)} particles, mass - 1 {mass.sum() - 1:.2e}, "
            f"substeps {hy.substeps}, change median/max "
            f"{hy.change[0]:.2e}/{hy.change[1]:.2e}, steps {steps}, wall "
            f"{time.perf_counter() - clock:.0f} s{extra}",
            flush=True,
        )


if __name__ == "__main__":
    main()
