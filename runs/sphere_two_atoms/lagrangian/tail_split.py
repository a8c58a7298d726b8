"""An experiment: the handover case with the deep tail split less.

From t = 12 to 16 the count climbs from 20 858 to 35 000 (beta = 300, n = 32): the flow
stretches the tail, and every particle longer than the split length (0.059 rad) is cut in two,
whatever its depth, while the sums over those particles are the cost of the whole
concentration phase (docs/concentration.md, "Where the time goes with the tail merged"). Here
the particles whose log mass lies more than DEPTH below the heaviest particle's, outside the
look caps, are split only when longer than FACTOR times the split length (a wrapper around the
scheme module's ``look_lengths``, for this experiment only); the rest is the scheme with
``merge_tail = 1``, ``merge_tail_width = 0.4`` (``handover.py --merge-tail 0.4``). Not part of
the scheme.

Usage:
  .venv/bin/python runs/sphere_two_atoms/lagrangian/tail_split.py T_END FACTOR [--depth DEPTH]
      continue cases/handover/fv512on128_t12.state.nc (``handover.py --run 512 12 32 3e-6
      --on 128``) at n = 32, tolerance 3e-6 to the absolute time T_END, into
      cases/handover/tail_split_experiment/fv512on128_t12_mt0.4_s{FACTOR}_d{DEPTH}_n32_tol3e-06.nc
      and its .w2.csv (as handover.py writes them); DEPTH default 20
"""

from __future__ import annotations

import argparse

import handover  # beside this script
import numpy as np
import study

import spheredens as sd
from spheredens.schemes import _sphere_lagrangian as scheme_module

T0, N, TOLERANCE, WIDTH = 12.0, 32, 3e-6, 0.4
OUT = handover.HANDOVER / "tail_split_experiment"
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


def run(t_end: float, factor: float, depth: float) -> None:
    name = f"fv512on128_t12_mt{WIDTH:g}_s{factor:g}_d{depth:g}_n{N}_tol{TOLERANCE:g}.nc"
    path = OUT / name
    OUT.mkdir(parents=True, exist_ok=True)
    data = study.case_config(handover.BETA, N, TOLERANCE, t_end - T0, handover.VARIANT, OUT)
    data = data.to_dict()
    data["initial"] = {"name": "file", "path": str(handover.HANDOVER / "fv512on128_t12.state.nc")}
    data["discretization"].update(merge_tail=1.0, merge_tail_width=WIDTH)
    span = t_end - T0
    data["time"] = {"t_end": span, "snapshots": int(round(span / study.SPACING)) + 1}
    data["output"] = {"path": str(path), "figure": False}
    config = sd.config_from_dict(data, base_dir=study.HERE)
    scheme_module.look_lengths = DeepLengths(factor, depth)
    observer = handover.OriginalTarget(path.with_suffix(".w2.csv"), T0, handover.BETA)
    sd.run(config, output=path, resume=path.exists(), progress=True, observers=[observer])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("t_end", type=float)
    parser.add_argument("factor", type=float)
    parser.add_argument("--depth", type=float, default=20.0)
    args = parser.parse_args()
    run(args.t_end, args.factor, args.depth)


if __name__ == "__main__":
    main()
