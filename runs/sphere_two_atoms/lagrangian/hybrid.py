"""The hybrid of docs/concentration.md ("What is next", nineteenth session): the clusters as
particles, the tail on ``fv``'s mesh, the sums over both (issue 30; a prototype, not a scheme).

``fv`` keeps the tail right at the kernel's scale on the look chain but cannot hold a cluster
narrower than a cell; particles hold the clusters but err in the tail afresh at every step.
Here, from ``fv``'s state at t = T0 (``study.py --fv-early 300 NLAT``):

* **Particles** (positions x_i, masses m_i, no shapes): every mesh cell whose mass is within
  DEPTH e-folds of the heaviest mass (cell or particle) is turned into SUB x SUB particles, one
  per sub-cell in (lat, lon) at its centre, their masses the integrals of ``fv``'s limited
  linear reconstruction over the sub-cells (positive), scaled so that they sum to the cell's
  mass; the cell is emptied. This is done at the start and after every step (the tail that
  flows into the clusters is taken in as it arrives). Particles move with dx/dt = X[rho](x);
  those in the same cube of MERGE rad (about 0.3 / (beta sigma_max), as ``log_lagrangian``)
  are merged (masses summed, position the mass-weighted mean). Masses never change in flight.
* **The mesh**: ``fv``'s fluxes (limited linear reconstruction, upwind at the face midpoints)
  with the face velocities of the hybrid's sums. Mass is conserved to round-off on the mesh,
  by the transfers (cell to particles) and by the merges.
* **Sums**: X at the face midpoints from the mesh's spectral sums (``lowrank_points``, each
  cell's mass at its centre, as ``fv``'s own) plus the particles' exact log-sum-exp sums, with
  ``lowrank_points``' certificate and peeling (:meth:`Hybrid.face_average`); X at the
  particles by the certified pruned log-sum-exp sums over the occupied cells and the particles
  (``interaction._pruned.log_mass_velocity``).
* **Time**: SSP RK3 on (rho, x) together, dt = CFL min(h / max |X|, 1 / max outflow rate) as
  ``fv`` (CFL 0.4), the particles' speeds included in max |X|.

Each snapshot (every 0.5) appends to a CSV the absolute time, W2 to Pi_# rho_0 of the original
rho_0 (the cells' masses at their centres and the particles at theirs), dm, the number of
particles, the particles' share of the mass, mass - 1, min rho, the steps and the wall time,
and writes the state (resumable). ``--compare`` gives, at the snapshots, the median of
log rho - log rho_ref over the cells within 0.08 rad of the five links of +w's look chain and
of e*, rho_ref ``fv``'s run on REF rings (instability.py --run REF 0) remapped exactly onto the
run's mesh (cell averages against cell averages).

Usage (from runs/sphere_two_atoms/lagrangian):
  ../../../.venv/bin/python hybrid.py --run NLAT [--source NLAT2] [--t0 12] [--t-end 36]
      [--depth 10] [--sub 2] [--merge 5e-4]
      (--source: start from fv's state on NLAT2 rings, a multiple of NLAT: the particles taken
      from its cells, the rest remapped exactly onto NLAT rings)
      [--extrapolate-from T [--refresh DT]]
      (--extrapolate-from: from time T on the face velocities once per step, extrapolated
      linearly to the stages; --refresh: only every DT units of time, extrapolated linearly
      from the last two evaluations in between; the particles' velocities stay fresh)
      [--particle-step DP]   (with --refresh: the particles by their own steps of DP, the
      mesh by fv's CFL steps in between, rho interpolated in time at the particles' stages)
      [--peel-levels N] [--peel-min-gain G]   (N levels of peeled spectral sums before a
      face's exact sums, ended after a level that certified less than G of its rows)
  ../../../.venv/bin/python hybrid.py --against REF.csv FILE.csv... --times T1,T2,...
      (each run against REF on the same mesh: W2, log rho, the chain, the clusters)
  ../../../.venv/bin/python hybrid.py --face-cost FILE.csv --times T1,...   (one evaluation
      of the face velocities at the run's states, with the default peel levels and none)
  ../../../.venv/bin/python hybrid.py --table FILE.csv...   (first minimum, departure, rise,
      release of each cluster, steps and wall time of each run)
  ../../../.venv/bin/python hybrid.py --compare FILE.csv... [--ref 128]   (the chain's tail
      against fv's on REF rings at every snapshot both have, with W2 and dm)
Files: cases/hybrid/hy{NLAT}[from{NLAT2}]_t{T0}_d{DEPTH}_s{SUB}_m{MERGE}[_b{BETA}][_x{T}[_r{DT}]]
[_ps{DP}][_p{N}][_g{G}].csv, .state.npz beside it and the snapshots' states in the folder of that
name.
"""

from __future__ import annotations

import study  # beside this script; first (clusters.py and lookchain.py put ../ on sys.path)

# isort: split
import argparse
import csv
import math
import os
import sys
import time
import tomllib
from pathlib import Path

import handover
import numpy as np
import xarray as xr
from graded import PolarMesh, locate, to_world
from handover import original_target
from lookchain import chain, top_eigenvector
from mechanism import Geometry

import spheredens as sd
from spheredens.analysis import curve_summary
from spheredens.geometry import tangent_project
from spheredens.grids import RingMesh
from spheredens.interaction._lowrank import PEEL_LEVELS
from spheredens.interaction._pruned import log_mass_velocity
from spheredens.transport import w2_to_antipodal_atoms

#: the inverse temperature (``--beta``; files at other values carry ``_b{BETA}``)
BETA = 300.0
OUT = study.OUT / "hybrid"
SPACING = 0.5
CFL = 0.4
LINK = 0.08
COLUMNS = (
    "t",
    "w2",
    "dm",
    "particles",
    "particle_mass",
    "mass_error",
    "min_rho",
    "steps",
    "wall_s",
)


def unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def latlon_points(lat: np.ndarray, lon: np.ndarray) -> np.ndarray:
    return np.stack((np.cos(lat) * np.cos(lon), np.cos(lat) * np.sin(lon), np.sin(lat)), -1)


def block_order(x: np.ndarray, width: float = 0.05) -> np.ndarray:
    """An order in which consecutive points are close (the pruning's blocks): by cubes of
    ``width``."""
    k = np.floor(x / width).astype(np.int64)
    return np.lexsort((k[:, 2], k[:, 1], k[:, 0]))


class Hybrid:
    """Particles where the mass is within ``depth`` e-folds of the heaviest, ``fv`` elsewhere."""

    def __init__(self, scheme, model, depth: float, sub: int, merge: float) -> None:
        self.fv, self.mesh, self.model = scheme, scheme.grid, model
        self.depth, self.sub, self.merge_width = float(depth), int(sub), float(merge)
        self._face_velocity: tuple[np.ndarray, float] | None = None
        self.lowrank = scheme.interaction  # lowrank_points: cells' centres to faces' midpoints
        # its transforms on SPHEREDENS_THREADS threads (as the pruned sums)
        self.lowrank._nthreads = int(os.environ.get("SPHEREDENS_THREADS", "1"))
        self.direct_fraction = 0.0
        #: from this time on the face velocities are evaluated once per step (``step``)
        self.extrapolate_from = math.inf
        #: the last evaluated face velocities and their time (the extrapolation's other point)
        self.previous: tuple[np.ndarray, float] | None = None
        #: after ``extrapolate_from``: the face velocities are evaluated again once this much
        #: time has passed since the last evaluation (0: every step), extrapolated linearly in
        #: time in between from the last two evaluations
        self.refresh = 0.0
        #: the extrapolation's slope (None: not yet two evaluations), the speed of the last
        #: evaluation, and the largest |u_extrapolated - u| met at a refresh so far
        self.slope: np.ndarray | None = None
        self.speed = 0.0
        self.refresh_error = 0.0
        # fv's right-hand side with the hybrid's face velocities (set before each call)
        scheme.normal_velocity = lambda state: self._face_velocity

    # -- sums --------------------------------------------------------------------------------
    def face_average(self, rho: np.ndarray, x: np.ndarray, log_m: np.ndarray) -> np.ndarray:
        """The softmax mean of V y at the face midpoints over the mesh and the particles:
        ``lowrank_points``' spectral sums over the mesh plus the particles' exact log-sum-exp
        sums, certified and peeled
        (:meth:`~spheredens.interaction.LowRankPoints.attention_average_with_atoms`)."""
        out = self.lowrank.attention_average_with_atoms(rho, x, log_m)
        self.direct_fraction = self.lowrank.direct_fraction
        return tangent_project(self.mesh.face_point, out)

    def particle_velocity(self, rho: np.ndarray, x: np.ndarray, log_m: np.ndarray):
        """X at the particles: the certified pruned log-sum-exp sums over the occupied cells and
        the particles (in block order, for the pruning)."""
        a = np.maximum(rho, 0.0) * self.mesh.area
        occupied = a > 0.0
        order = block_order(x)
        sources = np.concatenate([self.mesh.points[occupied], x[order]])
        log_a = np.concatenate([np.log(a[occupied]), log_m[order]])
        v = np.empty_like(x)
        v[order] = log_mass_velocity(self.model, x[order], sources, log_a)
        return v

    def velocities(self, rho: np.ndarray, x: np.ndarray, log_m: np.ndarray):
        order = block_order(x)
        v_face = self.face_average(rho, x[order], log_m[order])
        v_part = self.particle_velocity(rho, x, log_m)
        speed = float(np.sqrt(max(np.max(np.sum(v * v, axis=1)) for v in (v_face, v_part))))
        return np.einsum("fd,fd->f", v_face, self.mesh.face_normal)[None], speed, v_part

    def rates(self, rho: np.ndarray, x: np.ndarray, log_m: np.ndarray, t: float):
        u, speed, v_part = self.velocities(rho, x, log_m)
        self._face_velocity = (u, speed)
        return self.fv.rhs(rho[None], t), v_part

    def stage_rates(self, rho, x, log_m, t: float, u, speed):
        """A later stage with the face velocities ``u`` given (extrapolated): fv's right-hand
        side with them, and fresh velocities at the particles."""
        self._face_velocity = (u, speed)
        return self.fv.rhs(rho[None], t), self.particle_velocity(rho, x, log_m)

    def face_velocities(self, rho, x, log_m, t: float):
        """The face velocities, max |X| and the extrapolation's slope at the start of a step,
        with the particles' velocities: evaluated afresh before ``extrapolate_from``, at every
        step with ``refresh`` 0, and when ``refresh`` has passed since the last evaluation;
        otherwise extrapolated linearly from the last two evaluations (the particles'
        velocities then fresh alone). The first slope comes from the evaluations at the first
        two steps after ``extrapolate_from`` (one CFL step apart): at t = 12 it errs by about
        2e-3 at the first refresh, but a run restarted from a snapshot without its slope (late
        on the plateau, where take-ins make the face velocities jump) gets a slope 70 times too
        steep and 3-4 times shorter steps; resume from the state file, which keeps it."""
        extrapolate = t >= self.extrapolate_from - 1e-9
        if extrapolate and self.refresh > 0.0 and self.slope is not None:
            u_k, t_k = self.previous
            if t < t_k + self.refresh - 1e-9:
                u = u_k + (t - t_k) * self.slope
                return u, self.speed, self.slope, self.particle_velocity(rho, x, log_m)
        u, speed, v_part = self.velocities(rho, x, log_m)
        slope = 0.0
        if extrapolate and self.previous is not None and self.previous[1] < t:
            u_k, t_k = self.previous
            if self.slope is not None and self.refresh > 0.0:
                error = float(np.max(np.abs(u_k + (t - t_k) * self.slope - u)))
                self.refresh_error = max(self.refresh_error, error)
            slope = (u - u_k) / (t - t_k)
            self.slope = slope
        self.previous, self.speed = (u, t), speed
        return u, speed, slope, v_part

    def step(self, rho, x, log_m, t: float, dt_max: float):
        """One SSP RK3 step of (rho, x) at fv's CFL step (at most dt_max). From
        ``extrapolate_from`` on, the face velocities are evaluated at most once per step
        (:meth:`face_velocities`) and extrapolated linearly to the later stages."""
        u, speed, slope, v1 = self.face_velocities(rho, x, log_m, t)
        self._face_velocity = (u, speed)
        k1 = self.fv.rhs(rho[None], t)
        extrapolate = t >= self.extrapolate_from - 1e-9
        dt = min(dt_max, self.fv.stable_dt(CFL, k1))
        r1 = rho + dt * k1.rate[0]
        x1 = unit(x + dt * v1)
        if extrapolate:
            k2, v2 = self.stage_rates(r1, x1, log_m, t + dt, u + dt * slope, speed)
        else:
            k2, v2 = self.rates(r1, x1, log_m, t + dt)
        r2 = 0.75 * rho + 0.25 * (r1 + dt * k2.rate[0])
        x2 = unit(0.75 * x + 0.25 * (x1 + dt * v2))
        if extrapolate:
            k3, v3 = self.stage_rates(r2, x2, log_m, t + 0.5 * dt, u + 0.5 * dt * slope, speed)
        else:
            k3, v3 = self.rates(r2, x2, log_m, t + 0.5 * dt)
        rho = rho / 3.0 + 2.0 / 3.0 * (r2 + dt * k3.rate[0])
        x = unit(x / 3.0 + 2.0 / 3.0 * (x2 + dt * v3))
        return rho, x, dt

    def mesh_step(self, rho, t: float, dt_max: float, u, speed, slope):
        """One SSP RK3 step of the mesh alone at fv's CFL step (at most dt_max), with the face
        velocities extrapolated linearly from ``u`` at ``t`` (the particles are not needed)."""
        self._face_velocity = (u, speed)
        k1 = self.fv.rhs(rho[None], t)
        dt = min(dt_max, self.fv.stable_dt(CFL, k1))
        r1 = rho + dt * k1.rate[0]
        self._face_velocity = (u + dt * slope, speed)
        r2 = 0.75 * rho + 0.25 * (r1 + dt * self.fv.rhs(r1[None], t + dt).rate[0])
        self._face_velocity = (u + 0.5 * dt * slope, speed)
        rho = rho / 3.0 + 2.0 / 3.0 * (r2 + dt * self.fv.rhs(r2[None], t + 0.5 * dt).rate[0])
        return rho, dt

    def split_step(self, rho, x, log_m, t: float, t_end: float):
        """The mesh and the particles over [t, t_end] each with its own steps (``--particle-step``,
        after ``extrapolate_from`` with ``refresh`` > 0, where the mesh sees the particles only
        through the face velocities of the last refresh): the face velocities at t as
        :meth:`face_velocities` gives them (refreshed if due, with the particles at t), the
        mesh to t_end at fv's CFL steps with them extrapolated, then the particles by one SSP
        RK3 step of t_end - t with rho at the stages' times interpolated linearly between
        rho(t) and rho(t_end). Returns rho, x and the number of mesh steps."""
        u, speed, slope, v1 = self.face_velocities(rho, x, log_m, t)
        start, rho0, steps = t, rho, 0
        while t < t_end - 1e-12:
            rho, dt = self.mesh_step(rho, t, t_end - t, u + (t - start) * slope, speed, slope)
            t = t_end if t_end - t - dt < 1e-12 else t + dt
            steps += 1
        h = t_end - start
        x1 = unit(x + h * v1)
        v2 = self.particle_velocity(rho, x1, log_m)
        x2 = unit(0.75 * x + 0.25 * (x1 + h * v2))
        v3 = self.particle_velocity(0.5 * (rho0 + rho), x2, log_m)
        return rho, unit(x / 3.0 + 2.0 / 3.0 * (x2 + h * v3)), steps

    # -- cells into particles, particles merged -------------------------------------------------
    def take_in(self, rho, x, log_m):
        """Cells within ``depth`` e-folds of the heaviest cell (its particles counted) become
        SUB x SUB particles (a polar cap: one particle at its pole)."""
        m = self.mesh
        with np.errstate(divide="ignore"):
            log_cell = np.log(np.maximum(rho, 0.0) * m.area)
        # the heaviest cell, the particles in it counted
        held = np.zeros(m.n_cells)
        if log_m.size:
            held = np.bincount(locate(m, x), np.exp(log_m), m.n_cells)
        top = math.log(float(np.max(np.maximum(rho, 0.0) * m.area + held)))
        cells = np.flatnonzero(log_cell >= top - self.depth)
        if cells.size == 0:
            return rho, x, log_m
        points, mass = self.subcell_masses(rho, cells, self.sub)
        keep = mass > 0.0
        rho = rho.copy()
        rho[cells] = 0.0
        x = np.concatenate([x, points[keep]])
        log_m = np.concatenate([log_m, np.log(mass[keep])])
        return rho, x, log_m

    def subcell_masses(self, rho, cells, n: int):
        """The mass of each of ``cells`` split over its n x n sub-cells in (lat, lon): each
        sub-cell's point (its centre, ordinary frame) and mass, the integral of ``fv``'s
        limited linear reconstruction over it (positive), scaled to sum to the cell's mass; a
        polar cap is one point at its pole."""
        m = self.mesh
        caps = cells[m.is_cap[cells]]
        cells = cells[~m.is_cap[cells]]
        s_lat, s_lon = (s[0, cells] for s in self.fv.slopes(rho[None]))
        f = (np.arange(n) + 0.5) / n
        lat0, lat1 = m.lat_bounds[cells, 0], m.lat_bounds[cells, 1]
        lon0, lon1 = m.lon_bounds[cells, 0], m.lon_bounds[cells, 1]
        # sub-cell edges in lat; each sub-cell's area and its value at the sub-cell's centre
        e = np.arange(n + 1) / n
        lat_e = lat0[:, None] + e[None, :] * (lat1 - lat0)[:, None]
        lat_s = 0.5 * (lat_e[:, 1:] + lat_e[:, :-1])
        band = np.sin(lat_e[:, 1:]) - np.sin(lat_e[:, :-1])
        lon_s = lon0[:, None] + f[None, :] * (lon1 - lon0)[:, None]
        value = (
            rho[cells, None, None]
            + s_lat[:, None, None] * (lat_s - m.lat_c[cells, None])[:, :, None]
            + s_lon[:, None, None] * (lon_s - m.lon_c[cells, None])[:, None, :]
        )
        weight = np.maximum(value, 0.0) * band[:, :, None]
        weight /= weight.sum(axis=(1, 2), keepdims=True)
        mass = weight * (rho[cells] * m.area[cells])[:, None, None]
        points = latlon_points(
            np.broadcast_to(lat_s[:, :, None], mass.shape),
            np.broadcast_to(lon_s[:, None, :], mass.shape),
        ).reshape(-1, 3)
        points = np.concatenate([to_world(m, points), m.points[caps]])
        return points, np.concatenate([mass.ravel(), rho[caps] * m.area[caps]])

    def remap_to(self, rho, mesh, n: int) -> np.ndarray:
        """rho moved onto another ``mesh`` by its n x n sub-cells' masses
        (:meth:`subcell_masses`), each put in the cell of ``mesh`` its point lies in: the total
        mass exactly, each mass at most half a sub-cell from where it was."""
        cells = np.flatnonzero(rho > 0.0)
        points, mass = self.subcell_masses(rho, cells, n)
        return np.bincount(locate(mesh, points), mass, mesh.n_cells) / mesh.area

    def merge(self, x, log_m):
        """Particles in the same cube of ``merge_width`` merged: log masses summed exactly,
        the position the mass-weighted mean (on the sphere)."""
        key = np.floor(x / self.merge_width).astype(np.int64)
        _, group = np.unique(key, axis=0, return_inverse=True)
        group = group.ravel()
        n = int(group.max()) + 1
        if n == len(x):
            return x, log_m
        top = np.full(n, -np.inf)
        np.maximum.at(top, group, log_m)
        w = np.exp(log_m - top[group])
        centre = np.stack([np.bincount(group, w * x[:, k], n) for k in range(3)], axis=1)
        return unit(centre), top + np.log(np.bincount(group, w, n))


def start(nlat: int, t0: float, source: int | None = None, graded: tuple | None = None):
    """fv's early run on ``source`` rings (default ``nlat``): the problem, the scheme on
    ``nlat`` rings and rho at t0 (float64) on the ``source`` mesh, with that mesh's scheme.
    With ``graded`` = (FINE, RADIUS_DEG, GROWTH[, OFFSET_DEG]) the scheme's mesh is a
    :class:`graded.PolarMesh` with its poles at +-u (or OFFSET_DEG degrees off them; a negative
    OFFSET_DEG: at the ordinary poles +-e_z, unrotated): rings of
    pi / FINE out to RADIUS_DEG degrees, growing by GROWTH per ring to pi / ``nlat`` (the
    source then always differs)."""
    source = source or nlat
    path = study.EARLY / f"fv_nlat{source}_beta{BETA:g}.nc"
    with xr.open_dataset(path) as ds:
        data = tomllib.loads(ds.attrs["config"])
        i = int(np.flatnonzero(np.isclose(ds["time"].values, t0))[0])
        rho = np.asarray(ds["rho"].values[i], dtype=float).ravel()
    data["output"] = {"path": str(path), "figure": False}
    schemes = {}
    for n in {nlat, source}:
        data["discretization"]["nlat"] = n
        config = sd.config_from_dict(data, base_dir=study.HERE.parent)
        problem = sd.Problem.from_config(config)
        schemes[n] = sd.make_scheme(problem, config.discretization)
    if graded:
        fine, radius, growth, *offset = graded
        u = Geometry(t_max=1.0).u
        if offset and offset[0] < 0.0:  # the ordinary frame's poles (a check of the hand-over)
            u = np.array([0.0, 0.0, 1.0])
        elif offset:  # the poles tilted off +-u by OFFSET degrees, toward u x e_z
            n = np.cross(u, [0.0, 0.0, 1.0])
            u = unit(u + math.tan(math.radians(offset[0])) * n / np.linalg.norm(n))
        mesh = PolarMesh(math.pi / fine, math.radians(radius), growth, math.pi / nlat, u)
        # fv's scheme on that mesh (its sums built on the mesh's cells and faces)
        fv_module = sys.modules[type(schemes[source]).__module__]
        saved, fv_module.RingMesh = fv_module.RingMesh, lambda n: mesh
        try:
            scheme = sd.make_scheme(problem, config.discretization)
        finally:
            fv_module.RingMesh = saved
        return problem, scheme, schemes[source], rho
    return problem, schemes[nlat], schemes[source], rho


def files(args) -> tuple[Path, Path]:
    source = f"from{args.source}" if args.source and args.source != args.run else ""
    if args.graded:
        g = args.graded
        source = f"g{g[0]:g}r{g[1]:g}x{g[2]:g}" + (f"o{g[3]:g}" if len(g) > 3 else "") + source
    stem = f"hy{args.run}{source}_t{args.t0:g}_d{args.depth:g}_s{args.sub}_m{args.merge:g}"
    if BETA != 300.0:
        stem += f"_b{BETA:g}"
    if args.extrapolate_from is not None:
        stem += f"_x{args.extrapolate_from:g}"
        if args.refresh:
            stem += f"_r{args.refresh:g}"
    if args.particle_step:
        stem += f"_ps{args.particle_step:g}"
    if args.peel_levels is not None:
        stem += f"_p{args.peel_levels}"
    if args.peel_min_gain:
        stem += f"_g{args.peel_min_gain:g}"
    return OUT / f"{stem}.csv", OUT / f"{stem}.state.npz"


def run_mesh(name: str | Path) -> RingMesh:
    """The mesh of a run, from its file or folder name (hy{NLAT}[from{NLAT2}]_...)."""
    return RingMesh(int(Path(name).name.split("_")[0][2:].split("from")[0]))


def snapshot_path(state_path: Path, t: float) -> Path:
    folder = state_path.with_suffix("").with_suffix("")
    folder.mkdir(exist_ok=True)
    return folder / f"t{t:08.3f}.npz"


def remapped_reference(ref: int, mesh: RingMesh):
    """log rho of fv's run on ``ref`` rings (instability.py --run REF 0) at time t, remapped
    exactly onto ``mesh`` (the rings nest: cell averages against cell averages), or None where
    that run has no snapshot at t."""
    path = study.OUT / "instability" / f"fv_nlat{ref}_beta{BETA:g}_eps0.nc"
    ds = xr.open_dataset(path)
    fine = RingMesh(ref)
    times = ds["time"].values

    def reference(t: float) -> np.ndarray | None:
        k = int(np.argmin(np.abs(times - t)))
        if abs(times[k] - t) > 1e-9:
            return None
        rho = np.asarray(ds["rho"].values[k], dtype=float).ravel()
        with np.errstate(divide="ignore"):
            return np.log(mesh.remap_from(fine, rho))

    return reference


def compare(csv_paths: list[str], ref: int) -> None:
    """For each run: the chain offsets (median log rho - log rho_ref within LINK of the five
    links and of e*, rho_ref remapped onto the run's mesh) at every snapshot the reference has,
    with W2 and dm."""
    g = Geometry(t_max=1.0)
    for name in csv_paths:
        mesh = run_mesh(name)
        reference = remapped_reference(ref, mesh)
        folder = Path(name).with_suffix("")
        print(f"{folder.name}: log rho - fv{ref}'s at L0-L4 (w, look(w), ...) and e*; W2; dm")
        rows = {round(float(r["t"]), 6): r for r in csv.DictReader(open(name))}
        for snap in sorted(folder.glob("t*.npz")):
            s = np.load(snap)
            t = float(s["t"])
            log_ref = reference(t)
            if log_ref is None:
                continue
            r = rows.get(round(t, 6), {})
            print(
                f"  t = {t:6g}: {chain_offsets(g, mesh, s['rho'], log_ref)}; W2 {r.get('w2')}; "
                f"dm {r.get('dm')}"
            )


def heaviest(s, u: np.ndarray) -> list[np.ndarray | None]:
    """The heaviest particle about +u and about -u of the state ``s`` (None: no particle on
    that side)."""
    out = []
    for sign in (1.0, -1.0):
        side = np.flatnonzero(sign * (s["x"] @ u) > 0.0)
        out.append(s["x"][side[int(np.argmax(s["log_m"][side]))]] if side.size else None)
    return out


def against(ref_csv: str, csv_paths: list[str], times: list[float]) -> None:
    """Each run against the run ``ref_csv`` (same mesh) at ``times`` (both must have the
    snapshots): W2 of both, the median and largest |log rho - log rho_ref| over the cells
    occupied in both, the chain offsets (as ``--compare``) and the angle of the heaviest
    particle about +-u from the reference's."""
    g = Geometry(t_max=1.0)
    ref = Path(ref_csv).with_suffix("")
    mesh = run_mesh(ref)
    w2 = {
        Path(name).stem: {round(float(r["t"]), 6): r["w2"] for r in csv.DictReader(open(name))}
        for name in [ref_csv, *csv_paths]
    }
    print(
        f"against {ref.name}: t, W2 (run / ref), |d log rho| median and max, chain L0-L4 e*, "
        "+u and -u clusters (degrees)"
    )
    for name in csv_paths:
        folder = Path(name).with_suffix("")
        print(f"{folder.name}:")
        for t in times:
            a = np.load(folder / f"t{t:08.3f}.npz")
            b = np.load(ref / f"t{t:08.3f}.npz")
            both = (a["rho"] > 0.0) & (b["rho"] > 0.0)
            d = np.abs(np.log(a["rho"][both]) - np.log(b["rho"][both]))
            with np.errstate(divide="ignore"):
                log_ref = np.log(b["rho"])
            angles = [
                math.degrees(math.acos(min(1.0, float(p @ q))))
                for p, q in zip(heaviest(a, g.u), heaviest(b, g.u))
            ]
            print(
                f"  t = {t:g}: W2 {w2[folder.name][round(t, 6)]} / {w2[ref.name][round(t, 6)]}; "
                f"{np.median(d):.2e}, {d.max():.2e}; {chain_offsets(g, mesh, a['rho'], log_ref)}; "
                f"{angles[0]:.1e}, {angles[1]:.1e}"
            )


def released(folder: Path, u: np.ndarray) -> tuple[float, float]:
    """The first snapshot at which the heaviest particle of each hemisphere (about +u, -u)
    lies more than RELEASE_DEGREES from it (nan: never)."""
    out = [math.nan, math.nan]
    for snap in sorted(folder.glob("t*.npz")):
        s = np.load(snap)
        for j, (sign, p) in enumerate(zip((1.0, -1.0), heaviest(s, u))):
            if not math.isnan(out[j]) or p is None:
                continue
            angle = math.degrees(math.acos(min(1.0, float(sign * (p @ u)))))
            if angle > handover.RELEASE_DEGREES:
                out[j] = float(s["t"])
    return out[0], out[1]


def table(csv_paths: list[str]) -> None:
    """Each run's first minimum of W2 (t), smallest W2 (t), departure (W2 > 2 min + 0.02, as
    study.py and handover.py), rise (W2 > min + handover.RISE), release of each cluster (its
    heaviest particle more than handover.RELEASE_DEGREES from +-u; +u the cluster of mass
    0.4584, mechanism.py's u), last time, steps, wall."""
    u = Geometry(t_max=1.0).u  # the cluster of mass 0.4584 (mechanism.py)
    print(
        "| run | first min W2 (t) | min W2 (t) | departure | rise | released: +u, -u | "
        "last t | steps | wall |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for name in csv_paths:
        rows = list(csv.DictReader(open(name)))
        t = np.array([float(r["t"]) for r in rows])
        w2 = np.array([float(r["w2"]) for r in rows])
        first = study.first_minimum(w2)
        s = curve_summary(t, w2)
        falling = ", still falling" if s["t_min"] == s["t_last"] else ""
        risen = np.flatnonzero((t > s["t_min"]) & (w2 > s["min_w2"] + handover.RISE))
        rise = float(t[risen[0]]) if risen.size else math.nan
        plus, minus = released(Path(name).with_suffix(""), u)
        print(
            f"| {Path(name).stem} | {w2[first]:.5f} ({t[first]:g}) | {s['min_w2']:.5f} "
            f"({s['t_min']:g}{falling}) | {s['departure_time']:g} | {rise:g} | {plus:g}, "
            f"{minus:g} | {t[-1]:g} | {rows[-1]['steps']} | {float(rows[-1]['wall_s']):.0f} s |"
        )


def chain_offsets(g, mesh, rho, log_ref) -> str:
    """Median log rho - log_ref over the cells within LINK of each link and of e*."""
    parts = []
    for p in [*chain(g), top_eigenvector(g)]:
        sel = (mesh.points @ p > math.cos(LINK)) & (rho > 0.0)
        parts.append(f"{np.median(np.log(rho[sel]) - log_ref[sel]):+.3f}" if sel.any() else "nan")
    return " ".join(parts)


def run(args) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    csv_path, state_path = files(args)
    if args.graded and not args.source:
        raise SystemExit("--graded needs --source NLAT2 (fv's early mesh)")
    problem, scheme, fine, rho = start(args.run, args.t0, args.source, args.graded)
    hy = Hybrid(scheme, problem.model, args.depth, args.sub, args.merge)
    if args.peel_levels is not None:
        hy.lowrank.peel_levels = args.peel_levels
    hy.lowrank.peel_min_gain = args.peel_min_gain
    if args.extrapolate_from is not None:
        hy.extrapolate_from = args.extrapolate_from
        hy.refresh = args.refresh
    elif args.refresh:
        raise SystemExit("--refresh needs --extrapolate-from T (from when on to refresh)")
    if args.particle_step and not (args.refresh and args.particle_step <= args.refresh):
        raise SystemExit("--particle-step DP needs --refresh DT with DP <= DT")
    mesh = scheme.grid
    target = original_target(BETA)
    if state_path.exists():
        s = np.load(state_path)
        rho, x, log_m, t, steps, wall = (
            s["rho"],
            s["x"],
            s["log_m"],
            float(s["t"]),
            int(s["steps"]),
            float(s["wall"]),
        )
        if "previous_u" in s:
            hy.previous = (s["previous_u"], float(s["previous_t"]))
        if "slope" in s:
            hy.slope, hy.speed = s["slope"], float(s["speed"])
            hy.refresh_error = float(s["refresh_error"])
        # rows written after the state was last saved (a run stopped between the two) go
        with csv_path.open() as f:
            rows = list(csv.reader(f))
        kept = [rows[0]] + [r for r in rows[1:] if float(r[0]) <= t + 1e-9]
        with csv_path.open("w", newline="") as f:
            csv.writer(f).writerows(kept)
    else:
        x, log_m = np.zeros((0, 3)), np.zeros(0)
        if fine is scheme:
            rho, x, log_m = hy.take_in(rho, x, log_m)
        else:  # the particles from the source's cells, the rest remapped (the rings nest)
            taker = Hybrid(fine, problem.model, args.depth, args.sub, args.merge)
            rho, x, log_m = taker.take_in(rho, x, log_m)
            if args.graded:  # sub-cells half the finest ring or smaller
                n = max(2, math.ceil(2.0 * fine.grid.h / scheme.grid.h_fine))
                rho = taker.remap_to(rho, scheme.grid, n)
            else:
                rho = scheme.grid.remap_from(fine.grid, rho)
        t, steps, wall = args.t0, 0, 0.0
        with csv_path.open("w", newline="") as f:
            csv.writer(f).writerow(COLUMNS)
    print(f"{csv_path.name}: t = {t:g}, {len(x)} particles, {int((rho > 0).sum())} cells")
    clock = time.perf_counter() - wall
    while t < args.t_end - 1e-9:
        next_snap = SPACING * (math.floor(t / SPACING + 1e-9) + 1)
        while t < next_snap - 1e-9:
            if args.particle_step and t >= hy.extrapolate_from - 1e-9:
                t_end = min(next_snap, t + args.particle_step)
                rho, x, n = hy.split_step(rho, x, log_m, t, t_end)
                t, steps = t_end, steps + n
            else:
                rho, x, dt = hy.step(rho, x, log_m, t, next_snap - t)
                t = next_snap if next_snap - t - dt < 1e-12 else t + dt
                steps += 1
            rho, x, log_m = hy.take_in(rho, x, log_m)
            x, log_m = hy.merge(x, log_m)
        wall = time.perf_counter() - clock
        record(csv_path, target, mesh, rho, x, log_m, t, steps, wall)
        if hy.refresh > 0.0:
            print(f"  largest |u_extrapolated - u| at a refresh: {hy.refresh_error:.2e}")
        for path in (state_path, snapshot_path(state_path, t)):
            tmp = path.with_suffix(".tmp.npz")
            previous = {}  # the extrapolation's other point, kept only where it is used
            if hy.previous is not None and math.isfinite(hy.extrapolate_from):
                previous = {"previous_u": hy.previous[0], "previous_t": hy.previous[1]}
            if hy.refresh > 0.0 and hy.slope is not None:
                previous |= {
                    "slope": hy.slope,
                    "speed": hy.speed,
                    "refresh_error": hy.refresh_error,
                }
            np.savez(tmp, rho=rho, x=x, log_m=log_m, t=t, steps=steps, wall=wall, **previous)
            os.replace(tmp, path)


def atoms(mesh, rho, x, log_m) -> tuple[np.ndarray, np.ndarray]:
    """The state as atoms: the occupied cells' masses at their centres, then the particles."""
    cells = rho > 0.0
    points = np.concatenate([mesh.points[cells], x])
    return points, np.concatenate([rho[cells] * mesh.area[cells], np.exp(log_m)])


def w2_to_target(target, points, mass) -> float:
    """W2 of the atoms to Pi_# rho_0 (``target``: its two antipodal atoms)."""
    return w2_to_antipodal_atoms(points, mass, target.points[0], float(target.masses[0]))


def record(csv_path, target, mesh, rho, x, log_m, t, steps, wall) -> None:
    points, mass = atoms(mesh, rho, x, log_m)
    m_part = np.exp(log_m)
    total = float(mass.sum())
    w2 = w2_to_target(target, points, mass)
    dm = float(mass[points @ target.points[0] > 0.0].sum() / total - target.masses[0])
    row = (
        f"{t:.6g}",
        f"{w2:.6g}",
        f"{dm:.6g}",
        len(x),
        f"{m_part.sum() / total:.6g}",
        f"{total - 1.0:.3g}",
        f"{rho.min():.3g}",
        steps,
        f"{wall:.1f}",
    )
    with csv_path.open("a", newline="") as f:
        csv.writer(f).writerow(row)
    print(" ".join(f"{k}={v}" for k, v in zip(COLUMNS, row)), flush=True)


def face_cost(csv_path: str, times: list[float], nlat: int) -> None:
    """One evaluation of the face velocities from the run's states at ``times``: wall time and
    share of rows that take the exact sums, with every peel level tried (the default), with
    the peeling ended by a level that certified less than a quarter of its rows and with no
    peeling, and the largest
    differences from the first (exact sums against peeled spectral ones)."""
    folder = Path(csv_path).with_suffix("")
    problem, scheme, _, _ = start(nlat, 12.0)
    hy = Hybrid(scheme, problem.model, 10.0, 2, 1.0)
    print(
        f"{folder.name}: t, [peel levels / least gain: wall s, exact rows], largest differences "
        "from the first"
    )
    for t in times:
        s = np.load(folder / f"t{t:08.3f}.npz")
        order = block_order(s["x"])
        out, parts = [], []
        for levels, gain in ((PEEL_LEVELS, 0.0), (PEEL_LEVELS, 0.25), (0, 0.0)):
            hy.lowrank.peel_levels, hy.lowrank.peel_min_gain = levels, gain
            clock = time.perf_counter()
            out.append(hy.face_average(s["rho"], s["x"][order], s["log_m"][order]))
            wall = time.perf_counter() - clock
            parts.append(f"{levels}/{gain:g}: {wall:.2f} s, {hy.direct_fraction:.1%}")
        diff = [f"{np.abs(o - out[0]).max():.1e}" for o in out[1:]]
        print(f"  t = {t:g}: {'; '.join(parts)}; {', '.join(diff)}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--run", type=int, metavar="NLAT")
    p.add_argument("--t0", type=float, default=12.0)
    p.add_argument("--t-end", type=float, default=36.0)
    p.add_argument("--depth", type=float, default=10.0)
    p.add_argument("--sub", type=int, default=2)
    p.add_argument(
        "--merge", type=float, help="merge cubes (rad; default 0.15 / beta, 5e-4 at 300)"
    )
    p.add_argument(
        "--beta",
        type=float,
        default=300.0,
        help="inverse temperature (fv's early run at it: study.py --fv-early BETA NLAT)",
    )
    p.add_argument("--ref", type=int, default=128)
    p.add_argument("--source", type=int, metavar="NLAT2", help="start from fv on NLAT2 rings")
    p.add_argument(
        "--graded",
        type=lambda v: tuple(float(x) for x in v.split(",")),
        metavar="FINE,RADIUS,GROWTH[,OFFSET]",
        help="the hybrid's mesh graded toward its poles at +-u (graded.py): rings of pi / FINE "
        "out to RADIUS degrees from each pole, growing by GROWTH per ring up to pi / NLAT "
        "(--run NLAT); the poles OFFSET degrees off +-u if given (negative: at +-e_z, unrotated); "
        "needs --source",
    )
    p.add_argument(
        "--extrapolate-from",
        type=float,
        metavar="T",
        help="from time T on, the face velocities once per step, extrapolated to the stages",
    )
    p.add_argument(
        "--refresh",
        type=float,
        default=0.0,
        metavar="DT",
        help="with --extrapolate-from: the face velocities evaluated again only every DT "
        "units of time, extrapolated linearly from the last two evaluations in between",
    )
    p.add_argument(
        "--particle-step",
        type=float,
        default=0.0,
        metavar="DP",
        help="with --refresh DT (DP <= DT): the particles by their own SSP RK3 steps of DP, "
        "the mesh by fv's CFL steps in between (Hybrid.split_step); 0: one step for both",
    )
    p.add_argument(
        "--peel-levels",
        type=int,
        metavar="N",
        help="levels of peeled spectral sums before the exact sums take a face's row "
        "(lowrank_points' peel_levels, 13 by default; 0: the exact sums right after the first "
        "spectral level: late on the plateau at beta = 1000 almost every row ends there)",
    )
    p.add_argument(
        "--peel-min-gain",
        type=float,
        default=0.0,
        metavar="G",
        help="end the peeling after a level that certified less than this share of its rows "
        "(lowrank_points' peel_min_gain; 0: every level; 0.25 is 4x cheaper late at beta = 1000 "
        "on 128 rings, 3x dearer at beta = 300 on 256)",
    )
    p.add_argument(
        "--face-cost",
        metavar="FILE.csv",
        help="time one evaluation of the face velocities at the run's states at --times, "
        "with the default peel levels and with none",
    )
    p.add_argument("--compare", nargs="+", metavar="FILE.csv")
    p.add_argument("--table", nargs="+", metavar="FILE.csv")
    p.add_argument(
        "--against",
        nargs="+",
        metavar="FILE.csv",
        help="REF.csv RUN.csv...: the runs against REF at the --times (same mesh)",
    )
    p.add_argument("--times", type=lambda v: [float(x) for x in v.split(",")], default=[45.0])
    args = p.parse_args()
    global BETA
    BETA = args.beta
    if args.merge is None:
        args.merge = 0.15 / BETA
    if args.run:
        run(args)
    if args.compare:
        compare(args.compare, args.ref)
    if args.table:
        table(args.table)
    if args.against:
        against(args.against[0], args.against[1:], args.times)
    if args.face_cost:
        face_cost(args.face_cost, args.times, int(run_mesh(args.face_cost).nlat))


if __name__ == "__main__":
    main()
