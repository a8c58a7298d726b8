"""Two-atom concentration on S^2 with a general B, both schemes, beta in {10, 30, 100, 300} (issue 16).

The case of ``base.toml`` (Q = I, K = A V^-T not orthogonal, V = diag(1, .5, .5),
A = V B^T symmetric with a simple top eigenvalue: Pi_# rho_0 is two atoms +-u), run with

* finite volumes (``fv``, ``lowrank_points`` face velocities) at two mesh sizes nlat and 2 nlat;
* spherical harmonics (``sh_spectral``, ``lowrank_meridian``) at two degrees lmax and 2 lmax + 1;

(``CASES``: the pairs per beta), snapshots every 0.25 to a horizon past the departure.

W2 to Pi_# rho_0 is computed from every snapshot **without coarsening**: each cell (fv: its
centre, with its mass) or Gauss node (sh: with rho clipped at 0 times its weight) is an atom,
and the distance to the two atoms is exact (:func:`spheredens.transport.w2_to_antipodal_atoms`,
a sort instead of an EMD). The runs' own ``w2_projection`` coarsens to 4096 atoms, which at
beta >= 100 is coarser than the clusters. min W2, its time and the departure time (as
``analyze-beta`` defines them: the first snapshot after the minimum with W2 > 2 min + 0.02) come
from that curve; the refinement change is |value(fine) - value(coarse)| / value(fine).

Checks: THRESHOLD_CHECK reruns fv cases at the default ``log_domain_below`` (1e-6), and
PEELING_CHECK with ``log_domain_peeling = false`` (files ``*_nopeel.nc``); the summary prints
the largest W2 difference of each over the common snapshots.

Files: ``runs/sphere_two_atoms/cases/*.nc`` (finished runs are reused, partial ones resume),
``summary.json`` and ``summary.md`` (the table of docs/concentration.md) beside this script,
figures in docs/figures/sphere_two_atoms_*.png.

Usage: .venv/bin/python runs/sphere_two_atoms/study.py [--workers 2] [--betas 10 30 ...]
       [--schemes fv sh_spectral] [--summarize] [--one fv 512 300]
"""
from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import json
import time
import tomllib
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

import numpy as np

import spheredens as sd
from spheredens.analysis import curve_summary, richardson_estimate
from spheredens.geometry import dataset_sphere_points
from spheredens.plot import save_figure
from spheredens.targets import projection_target
from spheredens.transport import w2_to_antipodal_atoms

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
OUT = HERE / "cases"
#: (scheme, resolution pair) per beta, and the horizon per beta (past the departure)
CASES = {
    10.0: {"fv": (32, 64), "sh_spectral": (63, 127)},
    30.0: {"fv": (64, 128), "sh_spectral": (63, 127)},
    100.0: {"fv": (128, 256), "sh_spectral": (127, 255)},
    300.0: {"fv": (128, 256, 512), "sh_spectral": (127,)},
}
#: horizons per scheme and beta: past the departure for fv (W2 > 2 min + 0.02: t ~ 16 at
#: beta = 30); the spectral density rings (min rho < -1e-3 max rho) from t ~ 4.5-9 at every
#: beta here, before its W2 minimum, and at beta >= 100 its runs stop soon after (their
#: log-domain rows, a direct sum over the whole Gauss grid each, make the rest of such a run
#: cost hours and mean nothing)
#: (beta >= 1000: the early phase only, handed over to log_lagrangian, lagrangian/handover.py,
#: or to the hybrid, lagrangian/hybrid.py)
T_END = {"fv": {10.0: 30.0, 30.0: 22.0, 100.0: 35.0, 300.0: 100.0, 1000.0: 12.0, 3000.0: 12.0,
                10000.0: 12.0},
         "sh_spectral": {10.0: 30.0, 30.0: 35.0, 100.0: 12.5, 300.0: 12.5}}
#: fv's ``log_domain_below`` in the study (the default is 1e-6): once the density concentrates,
#: 25-50% of the faces fall below 1e-6 of the maximum of e^-kappa Z (beta = 30, t = 14-15;
#: none below 1e-9), and their exact log-domain sums made the runs 20-50 times slower
#: (10 s per right-hand side at beta = 100, nlat = 256, t = 13). At 1e-9 the spectral velocity
#: there is good to ~1e-7 (tests/interaction/test_lowrank_points.py). THRESHOLD_CHECK runs
#: with the default show what the level changes (over their common snapshots)
LOG_DOMAIN_BELOW = 1e-9
THRESHOLD_CHECK = [("fv", 32, 10.0), ("fv", 64, 30.0), ("fv", 128, 100.0)]
#: fv runs repeated with ``log_domain_peeling = false`` (exact log-sum-exp over all cells at every
#: log-domain face, the only way before peeling existed): what peeling changes in W2
PEELING_CHECK = [("fv", 64, 30.0), ("fv", 128, 100.0)]
SNAPSHOTS_PER_UNIT = 4
#: a second departure measure that exists at every beta: the first snapshot after the minimum
#: with W2 > min W2 + RISE (at beta = 10, 2 min + 0.02 = 0.66 is above the terminal distance
#: 0.56, the angle between u and e_1, so analyze-beta's departure never happens there)
RISE = 0.1
#: the spectral density "rings" from the first snapshot with min rho < -RINGING max rho
RINGING = 1e-3
RESOLUTION = {"fv": "nlat", "sh_spectral": "lmax"}


def case_path(scheme: str, res: int, beta: float, log_domain_below: float | None = None,
              peeling: bool = True) -> Path:
    tag = ("" if log_domain_below is None else f"_ld{log_domain_below:.0e}") + ("" if peeling else "_nopeel")
    return OUT / f"{scheme}_{RESOLUTION[scheme]}{res}_beta{beta:g}{tag}.nc"


def case_config(scheme: str, res: int, beta: float, log_domain_below: float | None = None,
                peeling: bool = True):
    t_end = T_END[scheme][beta]
    data = tomllib.loads((HERE / "base.toml").read_text())
    data["model"]["beta"] = beta
    data["discretization"] = {"scheme": scheme, RESOLUTION[scheme]: res, "allow_underresolved": True}
    if log_domain_below is not None:
        data["discretization"]["log_domain_below"] = log_domain_below
    if not peeling:
        data["discretization"]["log_domain_peeling"] = False
    if scheme == "sh_spectral":
        data["discretization"]["filter"] = "exponential"
    data["time"] = {**data["time"], "t_end": t_end, "snapshots": int(round(SNAPSHOTS_PER_UNIT * t_end)) + 1}
    data["output"] = {"path": str(case_path(scheme, res, beta, log_domain_below, peeling)), "figure": False}
    return sd.config_from_dict(data, base_dir=HERE)


def exact_w2_curve(ds, target) -> np.ndarray:
    """W2(rho_t, Pi_# rho_0) at every snapshot from every cell / node as an atom (module doc)."""
    points = dataset_sphere_points(ds).reshape(-1, 3)  # Gauss grid (lat, lon, 3) or mesh (cell, 3)
    weight = ds["weight"].values.reshape(-1)
    u = target.points[0]
    m_plus = float(target.masses[0])
    rho = ds["rho"].values.reshape(len(ds["time"]), -1)
    return np.array([w2_to_antipodal_atoms(points, np.clip(r, 0.0, None) * weight, u, m_plus) for r in rho])


def run_case(scheme: str, res: int, beta: float, log_domain_below: float | None = None,
             peeling: bool = True) -> dict:
    out = case_path(scheme, res, beta, log_domain_below, peeling)
    cfg = case_config(scheme, res, beta, log_domain_below, peeling)
    ds = sd.open_run(out) if out.exists() else None
    if ds is None or ds.attrs.get("run_status") != "complete" or float(ds["time"][-1]) != cfg.time.t_end:
        ds = sd.run(cfg, resume=out.exists(), progress=False)
    return summarize_case(scheme, res, beta, ds, cfg, log_domain_below, peeling)


def study_cases(betas, schemes) -> list[tuple]:
    """(scheme, resolution, beta, log_domain_below, peeling) of the study and of its threshold
    and peeling checks."""
    cases = [(s, res, b, LOG_DOMAIN_BELOW if s == "fv" else None, True)
             for b in betas for s in schemes for res in CASES[b][s]]
    cases += [(s, res, b, None, True) for s, res, b in THRESHOLD_CHECK if b in betas and s in schemes]
    cases += [(s, res, b, LOG_DOMAIN_BELOW, False) for s, res, b in PEELING_CHECK if b in betas and s in schemes]
    return cases


def summarize_case(scheme, res, beta, ds, cfg, log_domain_below=None, peeling=True) -> dict:
    target = projection_target(cfg)
    t = ds["time"].values
    w2 = exact_w2_curve(ds, target)
    s = curve_summary(t, w2)
    after = np.flatnonzero((t > s["t_min"]) & (w2 > s["min_w2"] + RISE))
    s["rise_time"] = float(t[after[0]]) if after.size else np.nan
    rho = ds["rho"].values
    flat = rho.reshape(len(t), -1)
    # ringing: the first snapshot with min rho below -1e-3 max rho (never for fv: rho >= 0)
    rings = np.flatnonzero(flat.min(axis=1) < -RINGING * flat.max(axis=1))
    s["ringing_from"] = float(t[rings[0]]) if rings.size else np.nan
    # the minimum over the snapshots before the ringing, and whether W2 was still falling there
    before = np.arange(len(t)) < (rings[0] if rings.size else len(t))
    i = int(np.argmin(np.where(before, w2, np.inf)))
    s["clean_min_w2"], s["clean_t_min"] = float(w2[i]), float(t[i])
    s["clean_still_falling"] = bool(rings.size and i == rings[0] - 1)
    return {"scheme": scheme, "resolution": int(res), "beta": beta, "log_domain_below": log_domain_below,
            "peeling": peeling, **s,
            "w2_run_coarsened_min": float(np.nanmin(ds["w2_projection"].values)),
            "min_rho_min": float(np.nanmin(rho)),
            "negative_mass_max": float(np.max(np.sum(np.clip(-rho.reshape(len(t), -1), 0, None)
                                                     * ds["weight"].values.reshape(-1), axis=1))),
            "status": ds.attrs.get("run_status"), "interaction": ds.attrs.get("interaction"), "steps": int(ds.attrs.get("n_steps", -1)),
            "wall_s": float(ds.attrs.get("wall_time_total_seconds", np.nan)),
            "t": t.tolist(), "w2": w2.tolist()}


def change(a: float, b: float) -> float:
    return abs(b - a) / abs(b) if np.isfinite(a) and np.isfinite(b) and b != 0 else np.nan


def table(rows: list[dict]) -> list[dict]:
    """One line per (beta, scheme): the finest run with its change from the coarser one."""
    lines = []
    for beta in sorted({r["beta"] for r in rows}):
        for scheme in ("fv", "sh_spectral"):
            runs = sorted((r for r in rows if r["beta"] == beta and r["scheme"] == scheme
                           and r["log_domain_below"] == (LOG_DOMAIN_BELOW if scheme == "fv" else None)
                           and r.get("peeling", True)),
                          key=lambda r: r["resolution"])
            if not runs:
                continue
            fine, coarse = runs[-1], (runs[-2] if len(runs) > 1 else None)
            line = {k: fine[k] for k in ("beta", "scheme", "resolution", "min_w2", "t_min", "departure_time", "rise_time",
                                         "status", "ringing_from", "clean_min_w2", "clean_t_min", "clean_still_falling", "t_last", "min_rho_min", "negative_mass_max", "wall_s", "steps")}
            line["coarse"] = None if coarse is None else {k: coarse[k] for k in ("resolution", "min_w2", "t_min",
                                                                                  "departure_time", "rise_time", "wall_s",
                                                                                  "t_last", "status")}
            line["min_w2_change"] = change(coarse["min_w2"], fine["min_w2"]) if coarse else np.nan
            line["departure_change"] = change(coarse["departure_time"], fine["departure_time"]) if coarse else np.nan
            line["rise_change"] = change(coarse["rise_time"], fine["rise_time"]) if coarse else np.nan
            lines.append(line)
    return lines


def markdown(lines: list[dict]) -> str:
    head = ("| beta | scheme | resolution (checked against) | min W2 | change | t_min | departure | change "
            f"| W2 > min + {RISE:g} at | change | rings from | wall s (fine / coarse) |\n"
            "|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
    body = []
    for ln in lines:
        c = ln["coarse"]
        res = f"{RESOLUTION[ln['scheme']]} = {ln['resolution']}" + (f" ({c['resolution']})" if c else " (none)")
        dep = f"{ln['departure_time']:g}" if np.isfinite(ln["departure_time"]) else f"none by {ln['t_last']:g}"
        cd = f"{100 * ln['departure_change']:.1f}%" if np.isfinite(ln["departure_change"]) else "-"
        cw = f"{100 * ln['min_w2_change']:.2f}%" if np.isfinite(ln["min_w2_change"]) else "-"
        tm = f"{ln['t_min']:g}" + (f" / {c['t_min']:g}" if c else "")
        rise = f"{ln['rise_time']:g}" if np.isfinite(ln["rise_time"]) else f"none by {ln['t_last']:g}"
        cr = f"{100 * ln['rise_change']:.1f}%" if np.isfinite(ln["rise_change"]) else "-"
        ring = f"t = {ln['ringing_from']:g}" if np.isfinite(ln["ringing_from"]) else "no"
        def secs(v):
            return f"{v:.0f}" if np.isfinite(v) else "partial"

        wall = secs(ln["wall_s"]) + (f" / {secs(c['wall_s'])}" if c else "")
        mw = f"{ln['min_w2']:.5f}"
        if np.isfinite(ln["ringing_from"]):  # the spectral density rings: its W2 before that
            mw = (f"{ln['clean_min_w2']:.5f} before ringing (t = {ln['clean_t_min']:g}"
                  + (", still falling)" if ln["clean_still_falling"] else ")"))
            tm, dep, cw, cd, rise, cr = "-", "-", "-", "-", "-", "-"
        if ln["status"] != "complete":
            res += f", partial to t = {ln['t_last']:g}"
        body.append(f"| {ln['beta']:g} | {ln['scheme']} | {res} | {mw} | {cw} | {tm} | {dep} | {cd} "
                    f"| {rise} | {cr} | {ring} | {wall} |")
    return head + "\n".join(body) + "\n"


def figures(rows: list[dict]) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    betas = sorted({r["beta"] for r in rows})
    fig, axes = plt.subplots(1, len(betas), figsize=(4 * len(betas), 3.4), squeeze=False)
    for ax, beta in zip(axes[0], betas):
        for r in sorted((r for r in rows if r["beta"] == beta and r.get("peeling", True)),
                        key=lambda r: (r["scheme"], r["resolution"])):
            style = "-" if r["scheme"] == "fv" else "--"
            level = "" if r["scheme"] != "fv" else (" (log-domain level 1e-6)" if r["log_domain_below"] is None
                                                    else f" ({r['log_domain_below']:g})")
            if r["scheme"] == "fv" and r["log_domain_below"] is None:
                style = ":"
            ax.semilogy(r["t"], r["w2"], style,
                        label=f"{r['scheme']} {RESOLUTION[r['scheme']]} {r['resolution']}{level}")
        ax.set_title(f"beta = {beta:g}")
        ax.set_xlabel("t")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    axes[0][0].set_ylabel("W2(rho_t, Pi_# rho_0), every cell / node an atom")
    fig.tight_layout()
    save_figure(fig, ROOT / "docs" / "figures" / "sphere_two_atoms_w2.png")
    plt.close(fig)
    # the finest density of each scheme at the largest beta with both resolutions: t = 0, t_min, end
    for scheme in ("fv", "sh_spectral"):
        done = [r for r in rows if r["scheme"] == scheme and len(CASES[r["beta"]][scheme]) > 1
                and r["log_domain_below"] == (LOG_DOMAIN_BELOW if scheme == "fv" else None) and r.get("peeling", True)]
        if not done:
            continue
        beta = max(r["beta"] for r in done)
        r = max((r for r in done if r["beta"] == beta), key=lambda r: r["resolution"])
        ds = sd.open_run(case_path(scheme, r["resolution"], beta, r["log_domain_below"]))
        sd.plot_run(ds, ROOT / "docs" / "figures" / f"sphere_two_atoms_{scheme}_beta{beta:g}.png",
                    times=[0.0, r["t_min"], r["t_last"]])


def paired_check(a: dict, b: dict, name_a: str, name_b: str, **extra) -> dict:
    """Two runs of one case (same snapshot times; either may be partial): the largest W2
    difference over their common snapshots and each one's min W2, t_min, departure, rise."""
    n = min(len(a["t"]), len(b["t"]))
    diff = float(np.max(np.abs(np.array(a["w2"][:n]) - np.array(b["w2"][:n]))))
    keys = ("min_w2", "t_min", "departure_time", "rise_time")
    return {**extra, "common_t_end": a["t"][n - 1], "max_w2_difference": diff,
            **{f"{k}_{name_a}": a[k] for k in keys}, **{f"{k}_{name_b}": b[k] for k in keys}}


def three_mesh_estimates(rows: list[dict]) -> list[dict]:
    """Where fv has three meshes at one beta: the observed order of min W2, its Richardson
    extrapolation and the fine mesh's GCI (:func:`spheredens.analysis.richardson_estimate`)."""
    out = []
    for beta in sorted({r["beta"] for r in rows}):
        runs = sorted((r for r in rows if r["beta"] == beta and r["scheme"] == "fv" and r.get("peeling", True)
                       and r["log_domain_below"] == LOG_DOMAIN_BELOW), key=lambda r: r["resolution"])
        if len(runs) >= 3:
            f = [r["min_w2"] for r in runs[-3:]]
            out.append({"beta": beta, "nlat": [r["resolution"] for r in runs[-3:]], "min_w2": f,
                        **richardson_estimate(*f)})
    return out


def richardson_text(estimates: list[dict]) -> str:
    return "".join(
        f"\nbeta = {e['beta']:g}, fv nlat = {', '.join(map(str, e['nlat']))}: min W2 observed order "
        f"{e['order']:.2f}, Richardson limit {e['extrapolated']:.5f}, GCI of nlat = {e['nlat'][-1]} "
        f"{100 * e['gci_fine']:.1f}%\n" for e in estimates)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=2, help="processes (one run each)")
    parser.add_argument("--betas", type=float, nargs="+", default=sorted(CASES), help="betas to run")
    parser.add_argument("--schemes", nargs="+", default=["fv", "sh_spectral"], choices=["fv", "sh_spectral"])
    parser.add_argument("--summarize", action="store_true", help="only read the finished files and redraw")
    parser.add_argument("--one", nargs=3, metavar=("SCHEME", "RESOLUTION", "BETA"),
                        help="run (or resume) one case at the study's settings, also one outside CASES "
                             "(e.g. fv 512 300), print its summary, and stop")
    args = parser.parse_args()
    OUT.mkdir(exist_ok=True)
    if args.one:
        try:
            scheme, res, beta = args.one[0], int(args.one[1]), float(args.one[2])
        except ValueError:
            raise SystemExit(f"--one: RESOLUTION must be an integer and BETA a number; got {args.one}") from None
        if scheme not in RESOLUTION or beta not in T_END[scheme]:
            raise SystemExit(f"--one: scheme must be one of {sorted(RESOLUTION)} and beta one of "
                             f"{sorted(T_END.get(scheme, {}))}; got {args.one}")
        row = run_case(scheme, res, beta, LOG_DOMAIN_BELOW if scheme == "fv" else None)
        print(f"{scheme} {res} beta {beta:g}: min W2 {row['min_w2']:.5f} at {row['t_min']:g}, departure "
              f"{row['departure_time']:g}, {row['status']} to t = {row['t_last']:g}")
        return
    cases = study_cases(args.betas, args.schemes)
    # longest first (an estimate: ~14 s per unit t for fv nlat = 128, ~6 for sh lmax = 127; x8 per doubling)
    cases.sort(key=lambda c: -(14.0 if c[0] == "fv" else 6.0) * (c[1] / 128) ** 3 * T_END[c[0]][c[2]])
    rows = []
    start = time.time()
    if args.summarize:
        for s, res, b, ld, peel in cases:
            p = case_path(s, res, b, ld, peel)
            if p.exists():
                rows.append(summarize_case(s, res, b, sd.open_run(p), case_config(s, res, b, ld, peel), ld, peel))
    else:
        with ProcessPoolExecutor(max_workers=args.workers) as pool:
            futures = {pool.submit(run_case, *c): c for c in cases}
            for k, fut in enumerate(as_completed(futures), 1):
                try:
                    row = fut.result()
                except BaseException as exc:  # keep the others going; say which one failed
                    print(f"[{k}/{len(cases)}] {futures[fut]} failed: {exc}", flush=True)
                    continue
                rows.append(row)
                print(f"[{k}/{len(cases)}] {row['scheme']} {row['resolution']} beta {row['beta']:g}: min W2 "
                      f"{row['min_w2']:.5f} at {row['t_min']:g}, departure {row['departure_time']:g} "
                      f"({row['wall_s']:.0f} s)", flush=True)
    old = json.loads((HERE / "summary.json").read_text()) if (HERE / "summary.json").exists() else {"runs": []}
    def key(r):
        return r["scheme"], r["resolution"], r["beta"], r.get("log_domain_below"), r.get("peeling", True)

    done = {key(r) for r in rows}
    rows += [r for r in old["runs"] if key(r) not in done]
    if not rows:
        raise SystemExit("no finished runs to summarize")
    lines = table(rows)
    checks = []
    for scheme, res, beta in THRESHOLD_CHECK:
        pair = {r["log_domain_below"]: r for r in rows
                if (r["scheme"], r["resolution"], r["beta"]) == (scheme, res, beta) and r.get("peeling", True)}
        if None in pair and LOG_DOMAIN_BELOW in pair:  # the default run may be partial
            c = paired_check(pair[None], pair[LOG_DOMAIN_BELOW], "default", "lowered", scheme=scheme, resolution=res,
                             beta=beta, log_domain_below=LOG_DOMAIN_BELOW, default_status=pair[None]["status"],
                             default_t_last=pair[None]["t_last"])
            checks.append(c)
            print(f"threshold check {scheme} {res} beta {beta:g}, 1e-6 against {LOG_DOMAIN_BELOW:g}: W2 differs by "
                  f"at most {c['max_w2_difference']:.2e} on t <= {c['common_t_end']:g} (default run "
                  f"{c['default_status']} to {c['default_t_last']:g}); min W2 {c['min_w2_default']:.6f} / "
                  f"{c['min_w2_lowered']:.6f}")
    peel_checks = []
    for scheme, res, beta in PEELING_CHECK:
        pair = {r.get("peeling", True): r for r in rows if (r["scheme"], r["resolution"], r["beta"]) == (scheme, res, beta)
                and r["log_domain_below"] == LOG_DOMAIN_BELOW}
        if len(pair) == 2:
            c = paired_check(pair[False], pair[True], "exact", "peeled", scheme=scheme, resolution=res, beta=beta,
                             wall_s_exact=pair[False]["wall_s"], wall_s_peeled=pair[True]["wall_s"])
            peel_checks.append(c)
            print(f"peeling check {scheme} {res} beta {beta:g}: W2 differs by at most {c['max_w2_difference']:.2e} "
                  f"on t <= {c['common_t_end']:g}; min W2 {c['min_w2_exact']:.6f} / {c['min_w2_peeled']:.6f}; wall "
                  f"{c['wall_s_exact']:.0f} s exact / {c['wall_s_peeled']:.0f} s peeled")
    richardson = three_mesh_estimates(rows)
    (HERE / "summary.json").write_text(json.dumps({"runs": rows, "table": lines, "threshold_check": checks,
                                                   "peeling_check": peel_checks, "richardson": richardson,
                                                   "wall_s_this_invocation": time.time() - start}, indent=1))
    (HERE / "summary.md").write_text(markdown(lines) + richardson_text(richardson))
    figures(rows)
    print(markdown(lines) + richardson_text(richardson))


if __name__ == "__main__":
    main()
