"""How the beta = 300 departure of the two atoms answers a perturbation of known size (issue 30).

Takes a study case's file (study.py) whose checkpoint lies at the start of the plateau, copies
it, moves every particle of the checkpoint by ``EPS`` rad in a random tangent direction (seeded;
``--kind mass`` instead multiplies every particle's mass by exp(EPS g), g standard normal, and
normalizes; ``--kind none`` leaves it as it is), and continues the copy to ``--t-end`` with the
same configuration, or with the changes of ``--set`` from the checkpoint on (e.g. a tighter
tolerance from the plateau on: whether the departure answers the step error while the
clusters creep, or what came before). Mass stays 1
(the masses are renormalized, positions do not carry mass). The copies' table (min W2, plateau,
departure as in study.py) tells whether the departure moves with log(1/EPS), as the time of an
instability seeded at EPS would, or stays put.

Usage:
  .venv/bin/python runs/sphere_two_atoms/lagrangian/sensitivity.py --run FILE EPS SEED \
        [--kind position|mass|none] [--t-end T] [--set KEY=VALUE ...] [--clock]
  .venv/bin/python runs/sphere_two_atoms/lagrangian/sensitivity.py --table FILE
Files: cases/sensitivity/<FILE's stem>_<kind><EPS>_seed<SEED>[_<key><value>].nc (key: the
last part of each --set key); --table lists FILE and its
copies. FILE may be a copy of a running case's file (its checkpoint is where the copy starts).
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import tomllib
from pathlib import Path

import numpy as np
import xarray as xr
from clock import SchemeClock, clock_path  # beside this script
from scipy.special import logsumexp

import spheredens as sd
from spheredens.recorder import checkpoint_digest

HERE = Path(__file__).resolve().parent
STUDY = HERE / "study.py"
SNAP = (30.0, 50.0, 66.0, 78.0)
COPIES = HERE / "cases" / "sensitivity"
#: the perturbations (``--kind``; "none" continues the copy unperturbed, e.g. with ``--set``)
KINDS = ("position", "mass", "none")


def _study():
    """study.py as a module (its CASES, case_config and summarize)."""
    spec = importlib.util.spec_from_file_location("study", STUDY)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def copy_name(source: Path, kind: str, eps: float, seed: int, changes: dict | None = None) -> Path:
    """cases/sensitivity/<source's stem>_<kind><eps>_seed<seed>[_<key><value> ...].nc (not
    among the study's own cases, whose table takes one file per case); the keys of ``changes``
    by their last part (``discretization.tolerance`` -> ``tolerance``)."""
    suffix = "".join(f"_{k.rsplit('.', 1)[-1]}{v:g}" if isinstance(v, float)
                     else f"_{k.rsplit('.', 1)[-1]}{v}" for k, v in (changes or {}).items())
    return COPIES / f"{source.stem}_{kind}{eps:g}_seed{seed}{suffix}.nc"


def perturb(state: np.ndarray, kind: str, eps: float, seed: int) -> np.ndarray:
    """The state (n_xi, 11, n) with every particle moved by eps rad (kind "position": random
    tangent direction, shapes projected back onto the new tangent plane) or every mass times
    exp(eps g) (kind "mass", renormalized to the slice's old total)."""
    rng = np.random.default_rng(seed)
    out = state.copy()
    if kind == "none":
        return out
    for s in out:
        if kind == "position":
            x = s[1:4].T
            d = rng.standard_normal(x.shape)
            d -= x * np.sum(d * x, axis=1, keepdims=True)
            d /= np.linalg.norm(d, axis=1, keepdims=True)
            y = np.cos(eps) * x + np.sin(eps) * d
            y /= np.linalg.norm(y, axis=1, keepdims=True)
            s[1:4] = y.T
            for rows in (slice(4, 7), slice(7, 10)):  # the two shape vectors, tangent at y
                f = s[rows].T
                s[rows] = (f - y * np.sum(f * y, axis=1, keepdims=True)).T
        else:
            g = eps * rng.standard_normal(s.shape[1])
            total = logsumexp(s[0])
            s[0] += g
            s[10] += g
            shift = logsumexp(s[0]) - total
            s[0] -= shift
            s[10] -= shift
    return out


def start_copy(
    source: Path, kind: str, eps: float, seed: int, changes: dict | None = None,
    config_text: str | None = None,
) -> Path:
    """The perturbed copy of ``source`` (written once; an existing copy is kept as it is); with
    ``changes`` (dotted keys, named in the copy's name), its stored configuration is
    ``config_text``, the changed one: the run from the checkpoint on is that configuration's."""
    target = copy_name(source, kind, eps, seed, changes)
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.exists():
        return target
    with xr.open_dataset(source) as ds:
        ds = ds.load()
    shape = tuple(int(v) for v in str(ds.attrs["checkpoint_shape"]).split(","))
    raw = np.asarray(ds["checkpoint_state"].values)
    state = perturb(raw[0].reshape(shape), kind, eps, seed)
    ds["checkpoint_state"].values[0] = state.reshape(-1)  # the file's name says how
    ds.attrs["checkpoint_sha256"] = checkpoint_digest(ds)
    if config_text is not None:
        ds.attrs["config"] = config_text
    tmp = target.with_suffix(".tmp")
    ds.to_netcdf(tmp)
    shutil.move(tmp, target)
    return target


def continue_copy(
    source: Path,
    kind: str,
    eps: float,
    seed: int,
    t_end: float,
    clock: bool = False,
    changes: dict | None = None,
) -> None:
    study = _study()
    with xr.open_dataset(source) as ds:
        cfg = sd.config_from_dict(tomllib.loads(ds.attrs["config"]), base_dir=HERE.parent)
    if changes:
        cfg = cfg.replace(**changes)
    data = cfg.to_dict()
    data["time"]["t_end"] = float(t_end)
    data["time"]["snapshots"] = int(round(t_end / study.SPACING)) + 1
    target = start_copy(source, kind, eps, seed, changes, cfg.to_toml() if changes else None)
    config = sd.config_from_dict(data, base_dir=HERE.parent)
    observers = [SchemeClock(clock_path(target))] if clock else []
    sd.run(config, output=target, resume=True, progress=True, observers=observers)


def table(source: Path) -> str:
    study = _study()
    rows = [
        "| file | perturbation | min W2 (t) | plateau from | departure | W2 at t = 30, 50, 66, 78 "
        "| wall |",
        "|---|---|---|---|---|---|---|",
    ]
    copies = sorted(p for k in KINDS for p in COPIES.glob(f"{source.stem}_{k}*_seed*.nc"))
    for path in [source, *copies]:
        s = study.summarize(path)
        with xr.open_dataset(path) as ds:
            what = "none"  # the runner keeps its own attributes: the name says it
            if "_seed" in path.stem:
                kind_eps, seed = path.stem[len(source.stem) + 1 :].split("_seed")
                kind = kind_eps.rstrip("0123456789.e-+")
                what = f"{kind} {kind_eps[len(kind):]} (seed {seed})"
            w2 = ds["w2_projection"]
            at = [w2.sel(time=t).item() if t <= float(ds["time"].max()) else np.nan for t in SNAP]
        snapshots = ", ".join(f"{v:.5f}" for v in at)
        rows.append(
            f"| {path.name} | {what} | {study.curve_cells(s)} | {snapshots} | "
            f"{study.wall_cell(s)} |"
        )
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", nargs=3, metavar=("FILE", "EPS", "SEED"))
    parser.add_argument("--kind", choices=KINDS, default="position")
    parser.add_argument("--t-end", type=float, default=110.0)
    parser.add_argument("--table", metavar="FILE")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="change the copy's configuration from its checkpoint on, e.g. "
                        "discretization.tolerance=1e-6 (VALUE in TOML; repeatable)")
    parser.add_argument("--clock", action="store_true",
                        help="record the clusters' tail weights from the scheme's own sums "
                        "(clock.py) beside the copy")
    args = parser.parse_args()
    if args.run:
        source, eps, seed = Path(args.run[0]), float(args.run[1]), int(args.run[2])
        changes = {}
        for item in args.set:
            key, _, value = item.partition("=")
            changes[key.strip()] = tomllib.loads(f"v = {value.strip()}")["v"]
        continue_copy(source, args.kind, eps, seed, args.t_end, args.clock, changes)
    if args.table:
        print(table(Path(args.table)))


if __name__ == "__main__":
    main()
