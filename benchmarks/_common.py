"""Helpers shared by the benchmark scripts: timing and the provenance stamp of each row."""
from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import subprocess
import time
from pathlib import Path
from typing import Any, Callable


def fastest_call(
    fn: Callable[[], Any], calls: int, clock: Callable[[], float] = time.perf_counter
) -> float:
    """The shortest of ``calls`` single calls (after one warm-up), in seconds of ``clock``
    (wall time by default; ``time.process_time`` for CPU time on a shared machine)."""
    fn()
    best = float("inf")
    for _ in range(calls):
        t0 = clock()
        fn()
        best = min(best, clock() - t0)
    return best


def best_time(fn: Callable[[], Any], *, repeat: int = 5, number: int | None = None) -> float:
    """Best-of-``repeat`` seconds per call, after one warm-up call (number auto-chosen ~0.2 s)."""
    fn()
    if number is None:
        t0 = time.perf_counter()
        fn()
        once = max(time.perf_counter() - t0, 1e-7)
        number = max(1, int(0.2 / once))
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter() - t0) / number)
    return best


def stamp() -> dict[str, Any]:
    import numpy
    import scipy

    import spheredens

    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, cwd=Path(__file__).parent).stdout.strip()
    except OSError:
        commit = ""
    return {
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "commit": commit,
        "spheredens": spheredens.__version__,
        "numpy": numpy.__version__,
        "scipy": scipy.__version__,
        "python": platform.python_version(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cpus",
        "threads": os.environ.get("OMP_NUM_THREADS", "default"),
        "spheredens_threads": os.environ.get("SPHEREDENS_THREADS", "default"),
    }


def write_rows(name: str, rows: list[dict[str, Any]]) -> Path:
    out = Path(__file__).parent / "results" / f"{name}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(rows, indent=1) + "\n")
    return out
