"""The two-atom case on S^2 at low temperature with ``log_lagrangian`` (issue 30).

The case of ../base.toml (Q = I, a general K, V = diag(1, .5, .5): Pi_# rho_0 is two atoms
+-u) at beta in {300, 1000, 3000, 1e4}, each at a ladder of resolutions n (6 n^2 initial
particles) and tolerances (``CASES``), snapshots every 0.5 (``SPACING``). From each run's own
``w2_projection`` (every particle's mass at its position: no coarsening):

* min W2 and its time; a minimum at the last snapshot is "still falling";
* the plateau time: the first snapshot with W2 <= (1 + PLATEAU) min W2;
* the departure: the first snapshot after the minimum with W2 > 2 min W2 + 0.02 (as
  ``spheredens analyze-beta`` defines it, :func:`spheredens.analysis.curve_summary`);
* the change of each from the run one refinement coarser in n (same tolerance) and in the
  tolerance (same n), |fine - coarse| / |fine|; the wall time of every run.

Usage:
  .venv/bin/python runs/sphere_two_atoms/lagrangian/study.py --run BETA N TOL [--t-end T]
          [--merge M] [--quadrature cells|points|interpolant] [--single] [--look]
          [--remesh-tail R] [--clock] [--moments] [--limited]
      run one case (resumed when its file is partial, extended with a larger --t-end); merge
      and quadrature are the scheme's options (defaults 0.3, points), --single sets
      multirate = false (one step for all particles), --look sets refine_look = true,
      --remesh-tail R sets remesh_tail = R (the deep tail put back on the cells every R),
      --clock records each cluster's tail weight from the scheme's own sums (clock.py),
      --moments sets merge_shape = "moments" (a merged particle's shape from its heavy members'
      second moment: a cluster keeps the extent the flow gave it), --limited sets split_slope =
      "limited" (a split's slope limited to the neighbours' range: a cluster cut in halves)
  .venv/bin/python runs/sphere_two_atoms/lagrangian/study.py --table [BETA ...]
      print the table of the runs present (docs/concentration.md), one block per variant
  .venv/bin/python runs/sphere_two_atoms/lagrangian/study.py --departures BETA
      the complete runs with refine_look at BETA: the first minimum, the mass across, W2 on
      the plateau and after, the departure, and which cluster leaves first, when (its offset
      from +-u stays above LEFT_DEGREES from then on: it creeps; above JUMP_DEGREES: it has
      jumped) and its log(Z_tail / Z_self) just before, from the recording cells, the
      mechanism's (clusters.py) and the scheme's own sums where recorded (clock.py)
  .venv/bin/python runs/sphere_two_atoms/lagrangian/study.py --run BETA N TOL --early T [...]
      the same case run to t = T only, into cases/early/ (the mass across settles by t = 10 at
      beta = 300: an early run measures it at a fraction of the cost)
  .venv/bin/python runs/sphere_two_atoms/lagrangian/study.py --fv-early BETA NLAT
      finite volumes (``fv``, as ../study.py runs them) at NLAT to t = 12 into cases/early/: an
      independent scheme's mass across while a mesh can still hold the density
  .venv/bin/python runs/sphere_two_atoms/lagrangian/study.py --across BETA
      the mass across (1e-5) at t = 4, 6, 8, 10, 12 of every case file at BETA, early or not
Files: cases/beta{BETA}_n{N}_tol{TOL}[_merge{M}][_cells][_single][_moments][_limited][_look]
[_remesh{R}].nc
(cases/early/ for --early; cases/early/fv_nlat{NLAT}_beta{BETA}.nc for --fv-early) beside this
script (a file written before an option existed took its sources as points, one step for all).
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import tomllib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import xarray as xr
from clock import SchemeClock, clock_path, read_clock  # beside this script
from clusters import cluster_series  # beside this script

import spheredens as sd
from spheredens.analysis import curve_summary
from spheredens.geometry import dataset_sphere_points

# the scheme's defaults of the variant options (a file name names only the others)
from spheredens.schemes._sphere_lagrangian import (
    DEFAULT_MERGE,
    DEFAULT_QUADRATURE,
    DEFAULT_REFINE_LOOK,
    DEFAULT_REMESH_TAIL,
    QUADRATURES,
)
from spheredens.targets import projection_target

HERE = Path(__file__).resolve().parent
OUT = HERE / "cases"
#: runs stopped early (--early T), e.g. at t = 12 for the mass across (--across)
EARLY = OUT / "early"
BASE = HERE.parent / "base.toml"
SPACING = 0.5
PLATEAU = 0.1
#: a cluster has left +-u from the snapshot on which its offset stays above this many degrees
#: (1-3.6 degrees on the plateau at beta = 300)
LEFT_DEGREES = 4.0
#: the offset past which a cluster has jumped away (a creeping one stays within it)
JUMP_DEGREES = 8.0
#: the snapshots at which --across prints the mass across (it settles by t = 10 at beta = 300)
ACROSS_TIMES = (4.0, 6.0, 8.0, 10.0, 12.0)
#: beta -> (n ladder, tolerance ladder, t_end): the first n and tolerance are the base
CASES = {
    100.0: ((16, 32), (1e-3, 3e-4), 45.0),  # against fv, converged there (docs/concentration.md)
    # the tolerance starts at 1e-4 (1e-3 errs by 25% at t = 14); the departure (mechanism: 83.0)
    # + 10 within t_end
    300.0: ((16, 32, 64), (1e-4, 3e-5, 1e-5), 110.0),
    1000.0: ((32, 64, 128), (1e-4, 3e-5, 1e-5), 280.0),
    3000.0: ((32, 64), (1e-4, 3e-5), 780.0),
    10000.0: ((32, 64), (1e-4, 3e-5), 2520.0),
}


@dataclass(frozen=True)
class Variant:
    """The scheme's options a case is run with beyond (beta, n, tolerance); a file name names
    those that differ from the scheme's defaults (the module docstring)."""

    merge: float = DEFAULT_MERGE
    quadrature: str = DEFAULT_QUADRATURE
    multirate: bool = True
    look: bool = DEFAULT_REFINE_LOOK
    remesh: float = DEFAULT_REMESH_TAIL
    moments: bool = False
    limited: bool = False

    def suffix(self) -> str:
        """The file name's variant part, e.g. "_merge3_moments_limited_look"."""
        variant = "" if self.merge == DEFAULT_MERGE else f"_merge{self.merge:g}"
        variant += "" if self.quadrature == DEFAULT_QUADRATURE else f"_{self.quadrature}"
        variant += "" if self.multirate else "_single"
        variant += "_moments" if self.moments else ""
        variant += "_limited" if self.limited else ""
        variant += "" if self.look == DEFAULT_REFINE_LOOK else ("_look" if self.look else "_nolook")
        variant += "" if self.remesh == DEFAULT_REMESH_TAIL else f"_remesh{self.remesh:g}"
        return variant

    def discretization(self, n: int, tol: float) -> dict:
        """The config's [discretization] table of this variant at (n, tol)."""
        table = {
            "scheme": "log_lagrangian",
            "n": int(n),
            "tolerance": float(tol),
            "merge": float(self.merge),
            "quadrature": self.quadrature,
            "multirate": bool(self.multirate),
            "refine_look": bool(self.look),
            "allow_underresolved": True,
        }
        if self.remesh != DEFAULT_REMESH_TAIL:  # files from before the option resume as they were
            table["remesh_tail"] = float(self.remesh)
        if self.moments:
            table["merge_shape"] = "moments"
        if self.limited:
            table["split_slope"] = "limited"
        return table


def case_path(
    beta: float, n: int, tol: float, variant: Variant = Variant(), out: Path = OUT
) -> Path:
    """The case file of (beta, n, tol, variant) in the folder ``out`` (``EARLY`` for runs
    stopped early)."""
    return out / f"beta{beta:g}_n{n}_tol{tol:g}{variant.suffix()}.nc"


def case_config(
    beta: float, n: int, tol: float, t_end: float, variant: Variant = Variant(), out: Path = OUT
) -> sd.RunConfig:
    data = tomllib.loads(BASE.read_text())
    data["model"]["beta"] = float(beta)
    data["discretization"] = variant.discretization(n, tol)
    data["time"] = {"t_end": float(t_end), "snapshots": int(round(t_end / SPACING)) + 1}
    data["output"] = {"path": str(case_path(beta, n, tol, variant, out)), "figure": False}
    return sd.config_from_dict(data, base_dir=HERE.parent)


def run_case(
    beta: float,
    n: int,
    tol: float,
    t_end: float,
    variant: Variant = Variant(),
    clock: bool = False,
    out: Path = OUT,
) -> None:
    path = case_path(beta, n, tol, variant, out)
    out.mkdir(exist_ok=True)
    config = case_config(beta, n, tol, t_end, variant, out)
    observers = [SchemeClock(clock_path(path))] if clock else []
    sd.run(config, output=path, resume=path.exists(), progress=True, observers=observers)


def first_minimum(w2: np.ndarray) -> int:
    """The index of the first snapshot after which W2 rises (the end of the contraction; later
    minima on the plateau are the swings of the clusters' positions)."""
    rising = np.flatnonzero(np.diff(w2) > 0.0)
    return int(rising[0]) if rising.size else len(w2) - 1


def mass_across(ds: xr.Dataset, i: int, target) -> float:
    """The mass on +u's side of the plane <x, u> = 0 at snapshot ``i`` minus the target's atom
    at +u (a log_lagrangian file's recorded cells' masses at their centroids, a finite-volume
    file's cells' at their centres: after the contraction no mass is near the plane). W2^2
    holds about pi^2 |this|: mass that an optimal plan carries from one cluster to the other."""
    if "rho_centroid_xyz" in ds:
        x = ds["rho_centroid_xyz"].isel(time=i).values
        m = (ds["rho"].isel(time=i).values * ds["cell_area"].values).ravel()
    else:
        x = dataset_sphere_points(ds)
        m = (ds["rho"].isel(time=i).values * ds["weight"].values).ravel()
    x = x.reshape(len(m), 3)
    ok = np.isfinite(m) & (m > 0.0)
    m, x = m[ok] / m[ok].sum(), x[ok]
    return float(m[x @ target.points[0] > 0.0].sum() - target.masses[0])


def run_fv_early(nlat: int, beta: float, t_end: float = max(ACROSS_TIMES)) -> None:
    """Finite volumes (``fv``, as ../study.py runs them) at ``nlat`` to ``t_end`` into
    ``EARLY``: an independent scheme's mass across, while the density is smooth enough for a
    mesh to hold it."""
    spec = importlib.util.spec_from_file_location("fv_study", HERE.parent / "study.py")
    fv_study = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fv_study)
    data = fv_study.case_config("fv", nlat, beta, fv_study.LOG_DOMAIN_BELOW).to_dict()
    path = EARLY / f"fv_nlat{nlat}_beta{beta:g}.nc"
    data["time"] = {"t_end": float(t_end), "snapshots": int(round(t_end / SPACING)) + 1}
    data["output"] = {"path": str(path), "figure": False}
    EARLY.mkdir(parents=True, exist_ok=True)
    config = sd.config_from_dict(data, base_dir=HERE.parent)
    sd.run(config, output=path, resume=path.exists(), progress=True)


def summarize(path: Path, target=None) -> dict:
    with xr.open_dataset(path) as ds:
        t, w2 = ds["time"].values, ds["w2_projection"].values
        s = curve_summary(t, w2)
        i = first_minimum(w2)
        s["first_min"], s["t_first_min"] = float(w2[i]), float(t[i])
        s["across"] = mass_across(ds, i, target) if target is not None else math.nan
        ok = np.flatnonzero(np.isfinite(w2) & (w2 <= (1.0 + PLATEAU) * s["min_w2"]))
        s["plateau_time"] = float(t[ok[0]]) if ok.size else math.nan
        s["still_falling"] = bool(s["t_min"] == s["t_last"])
        wall = ds.attrs.get("wall_time_total_seconds", ds.attrs.get("checkpoint_wall_seconds"))
        s["wall_s"] = float(wall) if wall is not None else math.nan  # a partial run: so far
        s["status"] = str(ds.attrs.get("run_status"))
        s["particles_max"] = int(np.nanmax(ds["n_particles"].values))
        # files from before the options took the sources as points, one step for all
        steps = "multirate" if int(ds.attrs.get("multirate", 0)) else "single"
        steps += ", look" if int(ds.attrs.get("refine_look", 0)) else ""
        steps += ", merged by moments" if ds.attrs.get("merge_shape") == "moments" else ""
        steps += ", split limited" if ds.attrs.get("split_slope") == "limited" else ""
        remesh = float(ds.attrs.get("remesh_tail", 0.0))
        steps += f", tail remeshed every {remesh:g}" if remesh > 0.0 else ""
        s["variant"] = (float(ds.attrs["merge"]), str(ds.attrs.get("quadrature", "points")), steps)
        s["case"] = (float(ds.attrs["beta"]), int(ds.attrs["n"]), float(ds.attrs["tolerance"]))
    return s


def change(coarse: dict | None, fine: dict, key: str) -> str:
    if coarse is None or not (np.isfinite(coarse[key]) and np.isfinite(fine[key])):
        return "-"
    return f"{abs(fine[key] - coarse[key]) / abs(fine[key]):.1%}"


def table(betas) -> str:
    """The table of every case file of ``betas`` present, grouped by variant (merge,
    quadrature); the changes are from the next coarser n and the next looser tolerance of the
    same variant."""
    head = (
        "| beta | n | tolerance | merge, sources, steps | min W2 (t) | plateau from | departure | "
        "change in n (min W2, departure) | change in tolerance (min W2, departure) | "
        "first minimum (t), its changes (n, tolerance) | mass across x 1e5 | "
        "particles (max) | wall |"
    )
    lines = [head, "|" + "---|" * 13]
    rows, targets = {}, {}
    for path in sorted(OUT.glob("beta*.nc")):
        beta = float(path.name[4:].split("_")[0])
        if beta not in betas:
            continue
        if beta not in targets:
            targets[beta] = projection_target(case_config(beta, 16, 1e-4, SPACING))
        s = summarize(path, targets[beta])
        rows[s["case"] + s["variant"]] = s
    for (beta, n, tol, merge, quad, steps), s in sorted(
        rows.items(), key=lambda r: (r[0][0], r[0][3:], r[0][1], -r[0][2])
    ):
        variant = (merge, quad, steps)
        coarser = [k for k in rows if k[0] == beta and k[2:] == (tol, *variant) and k[1] < n]
        looser = [k for k in rows if k[:2] == (beta, n) and k[3:] == variant and k[2] > tol]
        cn = rows[max(coarser)] if coarser else None
        ct = rows[min(looser, key=lambda k: k[2])] if looser else None
        lines.append(
            f"| {beta:g} | {n} | {tol:g} | {merge:g}, {quad}, {steps} | {curve_cells(s)} | "
            f"{change(cn, s, 'min_w2')}, {change(cn, s, 'departure_time')} | "
            f"{change(ct, s, 'min_w2')}, {change(ct, s, 'departure_time')} | "
            f"{s['first_min']:.5f} ({s['t_first_min']:g}), "
            f"{change(cn, s, 'first_min')}, {change(ct, s, 'first_min')} | "
            f"{s['across'] * 1e5:+.2f} | {s['particles_max']} | {wall_cell(s)} |"
        )
    return "\n".join(lines)


def first_to_leave(c: dict, clock: dict | None, degrees: float = LEFT_DEGREES) -> str:
    """Which cluster leaves +-u first, when (its offset stays above ``degrees`` from then on),
    and each one's log(Z_tail / Z_self) at the snapshot before, the recording cells', the
    mechanism's (``c``: :func:`clusters.cluster_series` of the file) and, where recorded, the
    scheme's (``clock``: clock.read_clock of the file's clock, or None)."""
    gone = c["offset"] > degrees
    stays = np.flip(np.logical_and.accumulate(np.flip(gone, 0), 0), 0)  # gone from here on
    first = [int(np.argmax(stays[:, j])) if stays[:, j].any() else len(gone) for j in (0, 1)]
    k = min(first)
    if k == len(gone) or k == 0:
        return "none left +-u" if k == len(gone) else "off +-u from the start"
    leavers = [j for j in (0, 1) if first[j] == k]
    who = " and ".join(("+u", "-u")[j] for j in leavers)
    before = [(c["ratio"][k - 1, j], c["mechanism"][k - 1, j]) for j in leavers]
    ratios = [f"{run:+.1f}; {mechanism:+.1f}" for run, mechanism in before]
    if clock is not None:  # the scheme's own sums (clock.py), where recorded
        t = c["time"][k - 1]
        for i, j in enumerate(leavers):
            side = ("+u", "-u")[j]
            row = np.flatnonzero(clock["time"] == t)
            if row.size:
                own = clock[f"log_z_tail_{side}"][row[0]] - clock[f"log_z_self_{side}"][row[0]]
                ratios[i] += f"; scheme's {own:+.1f}"
    return f"{who} at {c['time'][k]:g} ({', '.join(ratios)})"


def departures(beta: float) -> str:
    """The table of the complete runs with ``refine_look`` at ``beta`` (the module docstring,
    ``--departures``)."""
    target = projection_target(case_config(beta, 16, 1e-4, SPACING))
    head = ("| n, tolerance, sources | first minimum (t) | mass across x 1e5 | W2 at t = 20-68 | "
            "departure | first off +-u by 4 degrees, at t (log(Z_tail / Z_self) before: run's "
            "cells; mechanism; the scheme's sums where recorded) | first off by 8 degrees (the "
            "same) | W2 from t = 84 | wall |")
    lines = [head, "|" + "---|" * 9]
    for path in sorted(OUT.glob(f"beta{beta:g}_n*_look.nc")):
        if path.with_name(path.name + ".lock").exists():  # partial (or being written)
            continue
        s = summarize(path, target)
        if s["status"] != "complete":
            continue
        with xr.open_dataset(path) as ds:
            t, w2 = ds["time"].values, ds["w2_projection"].values
        if t[-1] < 84.0:  # a run ended before the departure (e.g. to t = 13 for dm)
            continue
        plateau, after = w2[(t >= 20.0) & (t <= 68.0)], w2[t >= 84.0]
        _, n, tol = s["case"]
        c = cluster_series(str(path))
        clock = read_clock(clock_path(path)) if clock_path(path).exists() else None
        lines.append(
            f"| {n}, {tol:g}, {s['variant'][1]}{variant_label(path)} | "
            f"{s['first_min']:.5f} ({s['t_first_min']:g}) | "
            f"{s['across'] * 1e5:+.2f} | {plateau.min():.4f}-{plateau.max():.4f} | "
            f"{s['departure_time']:g} | {first_to_leave(c, clock)} | "
            f"{first_to_leave(c, clock, JUMP_DEGREES)} | "
            f"{after.min():.3f}-{after.max():.3f} | {wall_cell(s)} |"
        )
    return "\n".join(lines)


def across(beta: float, times=ACROSS_TIMES) -> str:
    """The table of the mass across (:func:`mass_across`) at ``times`` in every case file at
    ``beta``, those run to the end and those stopped early (``--early``), one row per file,
    by variant, then n, then tolerance."""
    target = projection_target(case_config(beta, 16, 1e-4, SPACING))
    head = "| n, tolerance, sources, options | " + " | ".join(f"t = {t:g}" for t in times)
    lines = [head + " | wall to the last |", "|" + "---|" * (len(times) + 2)]
    rows = []
    for path in sorted(EARLY.glob(f"fv_nlat*_beta{beta:g}.nc")):
        with xr.open_dataset(path) as ds:
            cells = across_cells(ds, times, target)
            wall = ds.attrs.get("wall_time_total_seconds", ds.attrs.get("checkpoint_wall_seconds"))
            nlat, status = int(path.name.split("_")[1][4:]), ds.attrs.get("run_status")
        rows.append(((("fv",), nlat), f"| fv, nlat = {nlat} (early) | " + " | ".join(cells)
                     + f" | {float(wall or math.nan):.0f} s ({status}) |"))
    for path in sorted(OUT.glob(f"beta{beta:g}_n*.nc")) + sorted(EARLY.glob(f"beta{beta:g}_n*.nc")):
        with xr.open_dataset(path) as ds:
            cells = across_cells(ds, times, target)
            s = summarize(path)
            _, n, tol = s["case"]
            where = "early" if path.parent == EARLY else "to the end"
            key = (("lagrangian", *s["variant"]), n, -tol, where)
            options = f"{s['variant'][1]}, {s['variant'][2]}"
            rows.append((key, f"| {n}, {tol:g}, {options} ({where}) | " + " | ".join(cells)
                         + f" | {wall_cell(s)} |"))
    lines += [row for _, row in sorted(rows, key=lambda r: r[0])]
    return "\n".join(lines)


def across_table(label: str, paths, target, times=ACROSS_TIMES) -> str:
    """The table of the mass across (1e-5) at ``times`` of the files ``paths``, one row per file
    (its folder and name), headed ``label`` (the diagnostics' ``--table``)."""
    lines = [f"| {label} | " + " | ".join(f"t = {t:g}" for t in times) + " |"]
    lines.append("|" + "---|" * (len(times) + 1))
    for path in paths:
        with xr.open_dataset(path) as ds:
            cells = across_cells(ds, times, target)
        lines.append(f"| {path.parent.name}/{path.name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def across_cells(ds: xr.Dataset, times, target) -> list[str]:
    """The mass across (1e-5) at each of ``times`` written so far, as table cells."""
    t = ds["time"].values
    cells = []
    for when in times:
        i = np.flatnonzero(np.isclose(t, when))
        ok = i.size and bool(np.isfinite(ds["rho"].isel(time=int(i[0])).values).any())
        cells.append(f"{mass_across(ds, int(i[0]), target) * 1e5:+.2f}" if ok else "")
    return cells


def variant_label(path: Path) -> str:
    """The labels (", moments", ", limited") of the options the case file ``path`` names."""
    return "".join(f", {v}" for v in ("moments", "limited") if f"_{v}" in path.name)


def curve_cells(s: dict) -> str:
    """The table cells "min W2 (t) | plateau from | departure" of a :func:`summarize` result."""
    falling = " still falling" if s["still_falling"] else ""
    dep = s["departure_time"]
    dep = format(dep, "g") if np.isfinite(dep) else f"not reached by {s['t_last']:g}"
    return f"{s['min_w2']:.5f} ({s['t_min']:g}){falling} | {s['plateau_time']:g} | {dep}"


def wall_cell(s: dict) -> str:
    """The wall time cell of a :func:`summarize` result (so far, for a partial run)."""
    return f"{s['wall_s']:.0f} s ({s['status']})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--run", nargs=3, type=float, metavar=("BETA", "N", "TOL"))
    parser.add_argument("--t-end", type=float, default=None)
    parser.add_argument("--merge", type=float, default=DEFAULT_MERGE)
    parser.add_argument("--quadrature", choices=tuple(QUADRATURES), default=DEFAULT_QUADRATURE)
    parser.add_argument(
        "--single", action="store_true", help="one step for all particles (multirate = false)"
    )
    parser.add_argument(
        "--look", action="store_true", help="refine where the heavy mass looks (refine_look)"
    )
    parser.add_argument(
        "--remesh-tail",
        type=float,
        default=DEFAULT_REMESH_TAIL,
        help="put the deep tail back on the cells every this many units of time (remesh_tail)",
    )
    parser.add_argument(
        "--moments", action="store_true",
        help="merged particles take the second moment of their heavy members (merge_shape = "
        "'moments'): a cluster keeps the extent the flow gave it",
    )
    parser.add_argument(
        "--limited", action="store_true",
        help="a split divides the mass by the neighbours' slope limited so that neither half "
        "leaves their range (split_slope = 'limited'): a cluster is cut in equal halves",
    )
    parser.add_argument(
        "--clock", action="store_true",
        help="record each cluster's tail weight from the scheme's own sums at every snapshot "
        "(clock.py; beside the case file as FILE.clock.csv)",
    )
    parser.add_argument(
        "--early", type=float, metavar="T", default=None,
        help="with --run: run to t = T only, into cases/early/ (e.g. T = 12 for the mass across)",
    )
    parser.add_argument(
        "--fv-early", nargs=2, type=float, metavar=("BETA", "NLAT"),
        help="run finite volumes (fv, as ../study.py) at NLAT to t = %g into cases/early/: an "
        "independent scheme's mass across (--across)" % max(ACROSS_TIMES),
    )
    parser.add_argument(
        "--across", type=float, metavar="BETA",
        help="print the mass across (1e-5) at t = " + ", ".join(f"{t:g}" for t in ACROSS_TIMES)
        + " of every case file at BETA, those stopped early (--early) included",
    )
    parser.add_argument(
        "--table", nargs="*", type=float, metavar="BETA",
        help="print the table of the case files present (all betas if none given)",
    )
    parser.add_argument(
        "--departures", type=float, metavar="BETA",
        help="print the complete runs with refine_look at BETA through their departure: "
        "which cluster leaves +-u first, when, and its tail's weight just before",
    )
    args = parser.parse_args()
    if args.run:
        beta, n, tol = args.run
        t_end = args.t_end or CASES[beta][2]
        variant = Variant(
            args.merge,
            args.quadrature,
            not args.single,
            args.look,
            args.remesh_tail,
            args.moments,
            args.limited,
        )
        out = OUT if args.early is None else EARLY
        run_case(beta, int(n), tol, args.early or t_end, variant, args.clock, out)
    if args.fv_early:
        run_fv_early(int(args.fv_early[1]), args.fv_early[0])
    if args.table is not None:
        print(table(args.table or sorted(CASES)))
    if args.departures is not None:
        print(departures(args.departures))
    if args.across is not None:
        print(across(args.across))


if __name__ == "__main__":
    main()
