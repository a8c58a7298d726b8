"""Zonal densities on S^{d-1}: min W2 to Pi_# rho_0 against d and beta, with refinement checks.

Cases: d in {3, 16, 128, 1024}, beta in {10, 100, 1000}, two model families (the domain
``zonal``, B = a e e^T + b P, V = l1 e e^T + l2 P):

* ``poles``: a = 1, b = 1, l1 = 2, l2 = 1 (l1 a > l2 b: Pi_# rho_0 is two atoms at the poles);
* ``equator``: a = 1, b = 2, l1 = 1.2, l2 = 1 (l2 b > l1 a: Pi_# rho_0 is the equator, and
  l1 > l2, so a ring near the equator slides to a pole, docs/models.md section 6).

rho_0 is a von Mises-Fisher law about +e with kappa = 1 (not symmetric under e -> -e, so the
equator's instability is seeded by the start, not by round-off). Every case runs ``log_sl`` at
(n, tolerance) = (N[beta], 1e-2) (``N_FINER`` where the ring is narrower), and twice more: at
2n, and at tolerance 1e-2 / 4. The refinement change of a quantity is
|value(refined) - value(base)| / |value(refined)|.

Reported per case (from each run's own ``w2_projection``: the 1-D W2 in theta of the cells'
masses at their centroids against the target's atoms):

* min W2 and the time it is reached: the first snapshot below both neighbours, i.e. the
  plateau's minimum before any later departure ("still falling" when W2 only falls: then the
  value is W2 at T, not a minimum); and W2 at T;
* the first snapshot with |E[cos theta]| > 1/2: the mass is mostly near one pole (for the
  equator family, the ring has left the equator);
* the wall time of each run.

Files: ``runs/high_dimension/cases/*.nc`` (finished runs are reused), ``summary.json`` and
``summary.md`` beside this script, figures in docs/figures/high_dimension_*.png.

Usage: .venv/bin/python runs/high_dimension/study.py [--betas 10 100] [--dims 3 16]
       [--families poles equator] [--labels base 2n tol/4] [--summarize]
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import spheredens as sd  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
OUT = HERE / "cases"
DIMS = (3, 16, 128, 1024)
BETAS = (10.0, 100.0, 1000.0)
FAMILIES = {
    "poles": {"a": 1.0, "b": 1.0, "l1": 2.0, "l2": 1.0},
    "equator": {"a": 1.0, "b": 2.0, "l1": 1.2, "l2": 1.0},
}
#: base cells per beta: 3 cells or more per kernel width (beta sigma_max(B))^-1/2 (the run's
#: own check), rounded up to a power of two
N = {10.0: 128, 100.0: 256, 1000.0: 512}
#: cases whose ring is narrower than that: at d = 1024, beta = 1000 the equator family's min W2
#: (0.0045 rad) is below two cells of pi / 512, and n = 512 is 3.9% from n = 1024
N_FINER = {("equator", 1024, 1000.0): 1024}
TOLERANCE = 1e-2
T_END = 20.0
SNAPSHOTS = 81
#: (label, n factor, tolerance factor) of each case's three runs
RUNS = (("base", 1, 1.0), ("2n", 2, 1.0), ("tol/4", 1, 0.25))


def config(d: int, beta: float, family: str, n: int, tolerance: float, path: Path) -> dict:
    e = [1.0] + [0.0] * (d - 1)
    return {
        "domain": {"name": "zonal", "d": d},
        "model": {"name": "sa", "beta": beta, **FAMILIES[family]},
        "initial": {"name": "von_mises_fisher", "means": [e], "kappas": [1.0]},
        "discretization": {"scheme": "log_sl", "n": n, "tolerance": tolerance},
        "time": {"t_end": T_END, "snapshots": SNAPSHOTS},
        "output": {"path": str(path), "figure": False},
    }


def name(d: int, beta: float, family: str, label: str) -> str:
    return f"{family}_d{d}_beta{beta:g}_{label.replace('/', '')}"


def base_n(d: int, beta: float, family: str) -> int:
    return N_FINER.get((family, d, beta), N[beta])


def run_one(d: int, beta: float, family: str, label: str, nf: int, tf: float) -> dict:
    path = OUT / f"{name(d, beta, family, label)}.nc"
    n = base_n(d, beta, family) * nf
    wall = None
    ds = None
    if path.exists():
        ds = sd.open_run(path)
        if ds.attrs.get("run_status") != "complete" or ds.sizes["theta"] != n:
            ds = None
    if ds is None:
        cfg = sd.config_from_dict(config(d, beta, family, n, TOLERANCE * tf, path))
        start = time.perf_counter()
        ds = sd.run(cfg, progress=False, overwrite=True)
        wall = time.perf_counter() - start
        ds.attrs["study_wall_seconds"] = wall
        (path.with_suffix(".wall")).write_text(f"{wall:.1f}\n")
    elif path.with_suffix(".wall").exists():
        wall = float(path.with_suffix(".wall").read_text())
    return measure(ds, wall)


def measure(ds, wall: float | None) -> dict:
    t = ds["time"].values
    w2 = ds["w2_projection"].values
    k = first_minimum(w2)
    theta = ds["theta"].values
    g = ds["rho"].values  # the law g of theta (cells of width pi / n)
    mean_cos = (g * np.cos(theta)).sum(axis=1) / g.sum(axis=1)
    left = np.nonzero(np.abs(mean_cos) > 0.5)[0]
    return {
        "min_w2": float(w2[k]),
        "t_min": float(t[k]),
        "still_falling": bool(k == len(t) - 1),
        "t_leave": float(t[left[0]]) if left.size else None,
        "w2_end": float(w2[-1]),
        "steps": int(ds.attrs.get("n_steps", 0)),
        "wall": wall,
        "time": t.tolist(),
        "w2": w2.tolist(),
    }


def first_minimum(w2: np.ndarray) -> int:
    """The index of the first snapshot below both neighbours (the plateau's minimum, before any
    later departure or second dip); the last snapshot when W2 only falls."""
    inner = np.nonzero((w2[1:-1] <= w2[:-2]) & (w2[1:-1] < w2[2:]))[0]
    return int(inner[0] + 1) if inner.size else len(w2) - 1


def change(base: float, refined: float) -> float:
    return abs(refined - base) / abs(refined) if refined else float("nan")


def summarize(results: dict) -> str:
    lines = [
        "| family | beta | d | n | min W2 (rad) | t of min | change n->2n | change tol/4 "
        "| W2 at T = 20 (n->2n) | t of abs E[cos theta] > 1/2 | wall (s): n, 2n, tol/4 |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]

    def order(key: str) -> tuple:
        family, d, beta = key.split("|")
        return (family != "poles", float(beta), int(d))

    for key in sorted(results, key=order):
        runs = results[key]
        family, d, beta = key.split("|")
        base = runs.get("base")
        if base is None:
            continue
        fine, tight = runs.get("2n"), runs.get("tol/4")
        t_min = f"{base['t_min']:g}" + (" (still falling)" if base["still_falling"] else "")
        ch_n = f"{100 * change(base['min_w2'], fine['min_w2']):.2g}%" if fine else "-"
        ch_t = f"{100 * change(base['min_w2'], tight['min_w2']):.2g}%" if tight else "-"
        end = f"{base['w2_end']:.3g}" + (
            f" ({100 * change(base['w2_end'], fine['w2_end']):.2g}%)" if fine else ""
        )
        leave = "-" if base["t_leave"] is None else f"{base['t_leave']:g}"
        walls = ", ".join(
            "-" if r is None or r["wall"] is None else f"{r['wall']:.0f}"
            for r in (base, fine, tight)
        )
        lines.append(
            f"| {family} | {float(beta):g} | {d} | {base_n(int(d), float(beta), family)} | "
            f"{base['min_w2']:.4g} | "
            f"{t_min} | {ch_n} | {ch_t} | {end} | {leave} | {walls} |"
        )
    return "\n".join(lines)


def figures(results: dict) -> None:
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for ax, family in zip(axes, FAMILIES):
        for key, runs in sorted(results.items()):
            fam, d, beta = key.split("|")
            if fam != family or "base" not in runs or float(beta) != 1000.0:
                continue
            ax.semilogy(runs["base"]["time"], runs["base"]["w2"], label=f"d = {d}")
        ax.set_title(f"{family} family, beta = 1000 (log_sl, the base runs)")
        ax.set_xlabel("t (model time)")
        ax.legend()
    axes[0].set_ylabel("W2 to Pi_# rho_0 (rad, 1-D in theta)")
    fig.tight_layout()
    out = ROOT / "docs" / "figures"
    fig.savefig(out / "high_dimension_w2.png", dpi=110)
    plt.close(fig)
    path = OUT / f"{name(1024, 1000.0, 'equator', 'base')}.nc"
    if path.exists():
        ds = sd.open_run(path)
        with np.errstate(divide="ignore"):
            log_g = np.log10(np.maximum(ds["rho"].values, 1e-300))
        fig, ax = plt.subplots(figsize=(7, 4))
        image = ax.pcolormesh(
            ds["time"].values,
            ds["theta"].values,
            log_g.T,
            vmin=-12,
            vmax=log_g.max(),
            shading="auto",
            cmap="viridis",
        )
        fig.colorbar(image, ax=ax, label="log10 g(theta, t)")
        ax.set_xlabel("t (model time)")
        ax.set_ylabel("theta (rad)")
        ax.set_title("d = 1024, beta = 1000, equator family: the ring forms, then slides north")
        fig.tight_layout()
        fig.savefig(out / "high_dimension_ring.png", dpi=110)
        plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--betas", type=float, nargs="*", default=list(BETAS))
    parser.add_argument("--dims", type=int, nargs="*", default=list(DIMS))
    parser.add_argument("--families", nargs="*", default=list(FAMILIES))
    parser.add_argument("--labels", nargs="*", default=[r[0] for r in RUNS],
                        help="which of each case's runs: base 2n tol/4 (default: all three)")
    parser.add_argument("--summarize", action="store_true", help="only read finished runs")
    args = parser.parse_args()
    OUT.mkdir(exist_ok=True)
    summary_path = HERE / "summary.json"
    results = json.loads(summary_path.read_text()) if summary_path.exists() else {}
    for beta in args.betas:
        for family in args.families:
            for d in args.dims:
                key = f"{family}|{d}|{beta:g}"
                for label, nf, tf in (r for r in RUNS if r[0] in args.labels):
                    path = OUT / f"{name(d, beta, family, label)}.nc"
                    if args.summarize and not path.exists():
                        continue
                    results.setdefault(key, {})[label] = run_one(d, beta, family, label, nf, tf)
                    summary_path.write_text(json.dumps(results, indent=1))
                    print(
                        key,
                        label,
                        {k: v for k, v in results[key][label].items() if k not in ("time", "w2")},
                        flush=True,
                    )
    table = summarize(results)
    (HERE / "summary.md").write_text(table + "\n")
    print(table)
    figures(results)


if __name__ == "__main__":
    main()
