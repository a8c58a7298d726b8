"""What the pruned sums of ``log_lagrangian`` need against what they keep, at a run's checkpoint.

For the particles of a handover file's checkpoint (``handover.py --run ...``, beta = 300), all
as targets and sources of the velocity sums (logits <q_i, y_j> + log m_j, q = beta B^T x):

* needed: the pairs within log(PARTICLE_FRACTION) - log(particles) of their row's largest
  term (the skipped rest then weighs less than PARTICLE_FRACTION of the row's sum, as the
  certificate asks);
* the blocks of 16 consecutive sources holding them;
* the blocks the per-row bounds keep (``SourceBlocks.bounds``: <q, c_J> + |q| r_J), and after
  the unions over TARGET_BLOCK rows that ``kept_sums`` sums;
* the same with the exact bound over each block's cap, |q| cos(max(0, phi - theta)).

Each as a fraction of all pairs (docs/concentration.md, "What the sums need in the
concentration phase"). A file keeps its latest checkpoint only: measure a run while it runs
(or stopped) at the time of interest, as the page's t = 16.5 and 24 were. Nothing is written.

Usage: .venv/bin/python runs/sphere_two_atoms/lagrangian/sums_need.py cases/handover/FILE.nc
"""

from __future__ import annotations

import math
import shutil
import sys
import tempfile
from pathlib import Path

import handover  # beside this script
import numpy as np
import study
import xarray as xr

import spheredens as sd
from spheredens.interaction._particle_flow import PARTICLE_FRACTION
from spheredens.interaction._pruned import TARGET_BLOCK, SourceBlocks
from spheredens.schemes._sphere_lagrangian import unpack

ROWS = 512  # targets per chunk of the measurement
T0 = 12.0  # the handover's time: the files count from it


def main(path: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:  # a copy: the run may still be writing it
        copy = Path(tmp) / "state.nc"
        shutil.copy(path, copy)
        with xr.open_dataset(copy) as ds:
            state = ds["checkpoint_state"].values.reshape(1, 11, -1)
            t0 = float(ds.attrs["checkpoint_time"])
    log_m, x, _, _ = unpack(state[0])
    x = x / np.linalg.norm(x, axis=1, keepdims=True)
    data = study.case_config(handover.BETA, 32, 3e-6, 1.0, handover.VARIANT, handover.HANDOVER)
    config = sd.config_from_dict(data.to_dict(), base_dir=study.HERE)
    q = sd.Problem.from_config(config).model.kernel.query(x)
    n = len(x)
    blocks = SourceBlocks(x, 16, fraction=PARTICLE_FRACTION)
    sizes = np.exp(blocks.log_size)
    q_norm = np.linalg.norm(q, axis=1)
    theta = 2.0 * np.arcsin(np.minimum(0.5 * blocks.radius, 1.0))  # the caps' angular radii
    block_log_a = np.maximum.reduceat(log_m, blocks.starts)
    counts = dict.fromkeys(("needed", "blocks", "row", "union", "cap row", "cap union"), 0.0)
    for start in range(0, n, ROWS):
        rows = slice(start, start + ROWS)
        g = q[rows] @ x.T + log_m
        within = g >= (g.max(axis=1) + math.log(PARTICLE_FRACTION) - math.log(n))[:, None]
        counts["needed"] += within.sum()
        counts["blocks"] += (np.logical_or.reduceat(within, blocks.starts, axis=1) * sizes).sum()
        upper, lower = blocks.bounds(q[rows], q_norm[rows], x, log_m)
        cos_phi = (q[rows] @ blocks.centres.T) / q_norm[rows, None]
        sin_phi = np.sqrt(np.maximum(0.0, 1.0 - cos_phi**2))
        reach = np.where(
            cos_phi >= np.cos(theta), 1.0, cos_phi * np.cos(theta) + sin_phi * np.sin(theta)
        )
        cap = q_norm[rows, None] * reach + block_log_a + blocks.log_size
        for name, bound in (("", upper), ("cap ", cap)):
            keep = bound >= lower[:, None] + blocks.log_cut
            counts[name + "row"] += (keep * sizes).sum()
            for k in range(0, keep.shape[0], TARGET_BLOCK):
                union = keep[k : k + TARGET_BLOCK].any(axis=0) @ sizes
                counts[name + "union"] += union * min(TARGET_BLOCK, keep.shape[0] - k)
    print(f"t = {T0 + t0:g}: {n} particles; fractions of all pairs:")
    for name, count in counts.items():
        print(f"  {name:10s} {count / n**2:.4f}")


if __name__ == "__main__":
    main(sys.argv[1])
