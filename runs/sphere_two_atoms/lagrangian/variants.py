"""Experiments on the handover case with the tail merged: the deep tail split less (not part of
the scheme), or only the particles near the heaviest followed by the step control (now the
option ``follow_depth``).

Both continue fv's state remapped onto NLAT2 rings at t = 12 (``handover.py --run 512 12 32
3e-6 --on NLAT2``) at n = 32, tolerance 3e-6, ``merge_tail = 1`` at width 0.4, to the absolute
time T_END, and write a file and its .w2.csv as handover.py does; the run to compare with is
``handover.py --run 512 12 32 3e-6 --on NLAT2 --t-end 110 --merge-tail 0.4``
(docs/concentration.md, "Where the time goes with the tail merged").

* ``--split FACTOR [--depth DEPTH]``: from t = 12 to 16 the count climbs from 20 858 to
  35 000 (beta = 300): the flow stretches the tail and every particle longer than the split
  length is cut in two, whatever its depth. Here the particles whose log mass lies more than
  DEPTH (default 20) below the heaviest particle's, outside the look caps, are split only
  beyond FACTOR split lengths (a wrapper around the scheme module's ``look_lengths``). Files
  cases/handover/tail_split_experiment/fv512on{NLAT2}_t12_mt0.4_s{FACTOR}_d{DEPTH}_n32_tol3e-06.nc
* ``--window WINDOW``: the step control follows every particle whose log mass lies within
  2 beta sigma_max(B) + 50 e-folds of the heaviest's (1 838 at beta = 300: all), and on the
  plateau most evaluations are the sub-steps of tail particles 25-95 e-folds down. Here the
  window is WINDOW e-folds (the scheme's option ``follow_depth``, which this experiment led to;
  ``handover.py --follow-depth`` runs it in the handover ladder). Files
  cases/handover/window_experiment/fv512on{NLAT2}_t12_mt0.4_w{WINDOW}_n32_tol3e-06.nc

Usage:
  .venv/bin/python runs/sphere_two_atoms/lagrangian/variants.py T_END --split FACTOR
      [--depth DEPTH] [--on NLAT2]
  .venv/bin/python runs/sphere_two_atoms/lagrangian/variants.py T_END --window WINDOW
      [--on NLAT2]
NLAT2 is 128 by default with --split, 64 with --window.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import handover  # beside this script
import numpy as np
import study

import spheredens as sd
from spheredens.schemes import _sphere_lagrangian as scheme_module

T0, N, TOLERANCE, WIDTH = 12.0, 32, 3e-6, 0.4
_look_lengths = scheme_module.look_lengths


class DeepLengths:
    """``look_lengths``, with the split length times ``factor`` for the particles more than
    ``depth`` below the heaviest log mass and outside the look caps."""

    def __init__(self, factor: float, depth: float) -> None:
        self.factor, self.depth = factor, depth

    def __call__(self, log_m, x, query, s_max):
        lengths = _look_lengths(log_m, x, query, s_max)
        deep = (log_m < np.max(log_m) - self.depth) & (lengths >= s_max)
        return np.where(deep, self.factor * s_max, lengths)


def run(t_end: float, path: Path, on: int, options: dict | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = study.case_config(handover.BETA, N, TOLERANCE, t_end - T0, handover.VARIANT, path.parent)
    data = data.to_dict()
    data["initial"] = {"name": "file", "path": str(handover.HANDOVER / f"fv512on{on}_t12.state.nc")}
    data["discretization"].update(merge_tail=1.0, merge_tail_width=WIDTH, **(options or {}))
    span = t_end - T0
    data["time"] = {"t_end": span, "snapshots": int(round(span / study.SPACING)) + 1}
    data["output"] = {"path": str(path), "figure": False}
    config = sd.config_from_dict(data, base_dir=study.HERE)
    observer = handover.OriginalTarget(path.with_suffix(".w2.csv"), T0, handover.BETA)
    sd.run(config, output=path, resume=path.exists(), progress=True, observers=[observer])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("t_end", type=float)
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--split", type=float, metavar="FACTOR")
    what.add_argument("--window", type=float)
    parser.add_argument("--depth", type=float, default=20.0)
    parser.add_argument("--on", type=int, metavar="NLAT2")
    args = parser.parse_args()
    tail = f"_n{N}_tol{TOLERANCE:g}.nc"
    if args.split is not None:
        on = args.on or 128
        scheme_module.look_lengths = DeepLengths(args.split, args.depth)
        name = f"fv512on{on}_t12_mt{WIDTH:g}_s{args.split:g}_d{args.depth:g}" + tail
        path = handover.HANDOVER / "tail_split_experiment" / name
    else:
        on = args.on or 64
        name = f"fv512on{on}_t12_mt{WIDTH:g}_w{args.window:g}" + tail
        path = handover.HANDOVER / "window_experiment" / name
    run(args.t_end, path, on, {"follow_depth": args.window} if args.window else None)


if __name__ == "__main__":
    main()
