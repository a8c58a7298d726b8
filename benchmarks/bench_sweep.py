"""What a Dask sweep costs over running the same cases one after another in one process.

Cases: example C on the circle (sa, Q = I, K = [[1.75, 0.866025], [0.433013, 2.5]],
V = diag(1, 0.5), uniform rho_0), fv with n = 256 (direct quadrature), t in [0, 12] with 49
snapshots, beta in {10, 20, 30, 40}: a few seconds each. In one run of this script, repeated
``--repeat`` times in alternation (the machine is shared: alternating spreads its load over the
modes):

- ``serial``: the cases one after another in this process, ``spheredens.run`` (after one
  warm-up run, so the imports are not counted: they are reported apart);
- ``sweep1``: ``spheredens.run_sweep`` on a local cluster of 1 worker;
- ``sweep2``: the same on 2 workers;
- ``sweep1_empty``: a sweep of one case of one step on 1 worker: the fixed cost of a sweep
  (cluster start and shutdown, the worker's imports, the combined file);
- ``sweep1_dask_defaults`` (with ``--dask-defaults``): ``sweep1`` with the workers as Dask
  configures them (its profiler on, ``MALLOC_TRIM_THRESHOLD_ = 65536``): how sweeps ran before
  ``spheredens.sweep._run.LOCAL_CLUSTER_CONFIG``.

Every mode writes the same case files (figures off) into a fresh folder. BLAS and OpenMP
threads are 1 in this process and in the workers (set below before numpy is imported; the
workers inherit the environment, and the local cluster sets the same).

Reported per mode (best of the repeats): wall seconds per case = wall x workers / cases
(worker-seconds per case) and its ratio to serial; CPU seconds per case (user + system, of
this process and of the workers once the cluster has ended) and its ratio to serial, which
the other users of a shared machine disturb far less than the wall time; system CPU seconds
per case; and the range of the cases' own ``wall_time_seconds`` (the time loop and its
snapshots, as recorded in each file).

Usage: python benchmarks/bench_sweep.py [--repeat R] [--cases N] [--dask-defaults]
(writes benchmarks/results/sweep.json)
"""
from __future__ import annotations

import os

for _name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_name] = "1"

import argparse  # noqa: E402
import resource  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import xarray as xr  # noqa: E402

import spheredens as sd  # noqa: E402
from spheredens.config import config_from_dict  # noqa: E402
from spheredens.sweep import _run as sweep_run  # noqa: E402
from spheredens.sweep import sweep_from_dict  # noqa: E402

from _common import stamp, write_rows  # noqa: E402

BETAS = (10.0, 20.0, 30.0, 40.0, 50.0, 60.0)
BASE = {
    "model": {"name": "sa", "beta": 30.0, "Q": [[1.0, 0.0], [0.0, 1.0]],
              "K": [[1.75, 0.866025], [0.433013, 2.5]], "V": [[1.0, 0.0], [0.0, 0.5]]},
    "domain": {"name": "circle"},
    "initial": {"name": "uniform"},
    "discretization": {"scheme": "fv", "n": 256},
    "time": {"t_end": 12.0, "snapshots": 49, "cfl": 0.4},
}


#: the case of ``sweep1_empty``: one step (start the cluster, import in the worker, write a file)
EMPTY = {**BASE, "time": {"t_end": 0.01, "snapshots": 2}}


def loop_seconds(folder: Path) -> list[float]:
    """``wall_time_seconds`` of every case file in ``folder`` (the time loop of each run)."""
    out = []
    for path in sorted(folder.glob("*.nc")):
        if path.name == "combined.nc":
            continue
        with xr.open_dataset(path) as ds:
            out.append(float(ds.attrs["wall_time_seconds"]))
    return out


def cpu_seconds() -> tuple[float, float]:
    """(user + system, system) CPU seconds of this process and of its children that ended (the
    local cluster's workers, once it is closed)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    system = own.ru_stime + children.ru_stime
    return own.ru_utime + children.ru_utime + system, system


def timed(fn) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds and system CPU seconds of ``fn()`` (all processes: this one,
    and the workers of a sweep)."""
    cpu0, sys0 = cpu_seconds()
    t0 = time.perf_counter()
    fn()
    wall = time.perf_counter() - t0
    cpu1, sys1 = cpu_seconds()
    return wall, cpu1 - cpu0, sys1 - sys0


def serial(betas: tuple[float, ...], folder: Path) -> None:
    for beta in betas:
        table = {**BASE, "model": {**BASE["model"], "beta": beta},
                 "output": {"path": str(folder / f"beta-{beta:g}.nc"), "figure": False}}
        sd.run(config_from_dict(table), progress=False)


def sweep(betas: tuple[float, ...], folder: Path, workers: int, base: dict = BASE) -> None:
    table = {"base": base, "output_dir": str(folder), "vary": {"model.beta": list(betas)}}
    spec = sweep_from_dict(table, base_dir=folder.parent)
    _, outcome = sd.run_sweep(spec, n_workers=workers, progress=False)
    if any(v != "ran" for v in outcome.values()):
        raise RuntimeError(f"a case did not run: {outcome}")


def with_dask_defaults(fn):
    """``fn`` with the local cluster as Dask configures it (profiler on, Dask's pre-spawn
    environment with MALLOC_TRIM_THRESHOLD_ = 65536): how sweeps ran before; this process's
    environment, which the nannies update, is restored afterwards."""
    def call() -> None:
        saved, config = dict(os.environ), sweep_run.LOCAL_CLUSTER_CONFIG
        sweep_run.LOCAL_CLUSTER_CONFIG = {}
        try:
            fn()
        finally:
            sweep_run.LOCAL_CLUSTER_CONFIG = config
            os.environ.clear()
            os.environ.update(saved)
    return call


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--cases", type=int, default=4, choices=range(2, len(BETAS) + 1))
    parser.add_argument("--dask-defaults", action="store_true",
                        help="also time a 1-worker sweep with Dask's default worker settings")
    args = parser.parse_args()
    betas = BETAS[: args.cases]
    work = Path(tempfile.mkdtemp(prefix="bench_sweep_"))
    base = stamp()
    t0 = time.perf_counter()
    warm = {**BASE, "time": {"t_end": 0.5, "snapshots": 3}}
    sd.run(config_from_dict(warm), progress=False)  # the imports (xarray, POT, netCDF) happen here
    imports = time.perf_counter() - t0
    modes = {"serial": 1, "sweep1": 1, "sweep2": 2, "sweep1_empty": 1}
    if args.dask_defaults:
        modes["sweep1_dask_defaults"] = 1
    timings: dict[str, list[tuple[float, float, float, list[float]]]] = {m: [] for m in modes}
    try:
        for r in range(args.repeat):
            for mode, workers in modes.items():
                folder = work / f"{mode}_{r}"
                folder.mkdir()
                if mode == "serial":
                    call = lambda f=folder: serial(betas, f)  # noqa: E731
                elif mode == "sweep1_empty":  # one case of one step: the fixed cost
                    call = lambda f=folder: sweep(betas[:1], f, 1, EMPTY)  # noqa: E731
                else:
                    call = lambda f=folder, w=workers: sweep(betas, f, w)  # noqa: E731
                if mode.endswith("dask_defaults"):
                    call = with_dask_defaults(call)
                wall, cpu, system = timed(call)
                timings[mode].append((wall, cpu, system, loop_seconds(folder)))
                print(f"repeat {r}: {mode:>20} wall {wall:7.2f} s, cpu {cpu:7.2f} s "
                      f"(system {system:5.2f} s), load {os.getloadavg()[0]:.1f}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    rows = []
    cases = len(betas)
    serial_wall = min(t[0] for t in timings["serial"]) / cases
    serial_cpu = min(t[1] for t in timings["serial"]) / cases
    for mode, workers in modes.items():
        walls = [t[0] for t in timings[mode]]
        cpus = [t[1] for t in timings[mode]]
        systems = [t[2] for t in timings[mode]]
        loops = [x for t in timings[mode] for x in t[3]]
        n = 1 if mode == "sweep1_empty" else cases
        per_case = min(walls) * workers / n
        rows.append({**base, "mode": mode, "workers": workers, "cases": cases,
                     "cases_run": n, "repeats": args.repeat, "wall_s": walls, "cpu_s": cpus,
                     "system_s": systems,
                     "per_case_wall_s": per_case, "wall_ratio_to_serial": per_case / serial_wall,
                     "per_case_cpu_s": min(cpus) / n,
                     "cpu_ratio_to_serial": min(cpus) / n / serial_cpu,
                     "per_case_system_s": min(systems) / n,
                     "loop_mean_s": statistics.mean(loops), "loop_min_s": min(loops),
                     "loop_max_s": max(loops), "serial_imports_s": imports,
                     "load_average": os.getloadavg()[0]})
    path = write_rows("sweep", rows)
    print(f"{cases} cases (beta = {', '.join(f'{b:g}' for b in betas)}), {args.repeat} repeats "
          f"(best shown); imports of the serial process (not counted): {imports:.1f} s")
    print(f"{'mode':>20} {'wall s/case':>11} {'/ serial':>8} {'cpu s/case':>10} {'/ serial':>8} "
          f"{'sys s/case':>10} {'loop s (min-max)':>18}")
    for r in rows:
        print(f"{r['mode']:>20} {r['per_case_wall_s']:11.2f} {r['wall_ratio_to_serial']:8.2f} "
              f"{r['per_case_cpu_s']:10.2f} {r['cpu_ratio_to_serial']:8.2f} "
              f"{r['per_case_system_s']:10.2f} {r['loop_min_s']:8.2f}-{r['loop_max_s']:.2f}")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
