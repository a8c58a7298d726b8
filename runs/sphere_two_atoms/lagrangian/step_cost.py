"""What a stretch of time costs from a run's checkpoint, with the scheme's options changed.

Continues the particles of a ``log_lagrangian`` file's checkpoint (default: the two atoms at
beta = 300 with the tail merged, ``tail_merge.py 110 1 20 --cells 128``, whose checkpoint is
t = 110) for SPAN units of time with the handover case's options (n, tolerance 3e-6, merge 3,
moments, limited, refine_look, ``merge_tail = 1`` at width 0.4) and any OPTION=VALUE given,
and prints the steps, the evaluations of the velocities, the sub-steps, the wall time, and at
the end W2 to Pi_# rho_0 and the two heaviest particles (docs/concentration.md, "Where the
time goes with the tail merged"). Nothing is written but a .npy of the heaviest particles.

Usage:
  .venv/bin/python runs/sphere_two_atoms/lagrangian/step_cost.py [--span S] [--n N]
      [--file F] [--window W] [--shape-factor K] [OPTION=VALUE ...]
      --window W: follow (error-control) only the particles within W e-folds of the heaviest
      log mass (the option follow_depth = W; by default 2 beta sigma_max + 50);
      --shape-factor K: the shapes' tolerance K times the scheme's; OPTION=VALUE: a
      [discretization] option, e.g. quadrature=cells, tolerance=1e-5
"""

from __future__ import annotations

import argparse
import dataclasses
import time
import tomllib

import handover  # beside this script
import numpy as np
import study
import xarray as xr

import spheredens as sd
from spheredens.schemes import _sphere_lagrangian as scheme_module
from spheredens.schemes import make_scheme
from spheredens.schemes._sphere_lagrangian import unpack
from spheredens.transport import w2_to_antipodal_atoms

DEFAULT_FILE = (
    handover.HANDOVER / "tail_merge_experiment" / "fv512on128_t12_tm_R1_D20_c128_n32_tol3e-06.nc"
)
T0 = 12.0  # the handover's time: the files count from it


def _option(text: str) -> tuple[str, object]:
    """OPTION=VALUE as TOML reads VALUE (a bare word is a string)."""
    key, value = text.split("=", 1)
    try:
        return key, tomllib.loads(f"v = {value}")["v"]
    except tomllib.TOMLDecodeError:
        return key, value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--span", type=float, default=2.0)
    parser.add_argument("--n", type=int, default=32)
    parser.add_argument("--file", default=str(DEFAULT_FILE))
    parser.add_argument("--window", type=float)
    parser.add_argument("--shape-factor", type=float, default=1.0)
    parser.add_argument("options", nargs="*", metavar="OPTION=VALUE")
    args = parser.parse_args()
    options = dict(_option(o) for o in args.options)
    if args.window is not None:
        options["follow_depth"] = args.window
    data = study.case_config(handover.BETA, args.n, 3e-6, 1.0, handover.VARIANT, handover.HANDOVER)
    data = data.to_dict()
    data["initial"] = {"name": "file", "path": str(handover.HANDOVER / "fv512on128_t12.state.nc")}
    data["discretization"].update(merge_tail=1.0, merge_tail_width=0.4, **options)
    config = sd.config_from_dict(data, base_dir=study.HERE)
    scheme_module.SHAPE_TOLERANCE_FACTOR *= args.shape_factor
    scheme = make_scheme(sd.Problem.from_config(config), config.discretization)
    scheme.initial_state()  # the split length
    with xr.open_dataset(args.file) as ds:
        state = ds["checkpoint_state"].values.reshape(1, 11, -1)
        t0 = float(ds.attrs["checkpoint_time"])
    evaluations = [0]
    flow = scheme._flow

    def counted(*a, **k):
        evaluations[0] += 1
        return flow(*a, **k)

    scheme._flow = counted
    span = dataclasses.replace(
        config.time, t_end=t0 + args.span, times=(t0, t0 + args.span), snapshots=None
    )
    start = time.perf_counter()
    result = sd.simulate(scheme, span, state=state, t_start=t0, steps_done=1)
    wall = time.perf_counter() - start
    log_m, x, _, _ = unpack(result.state[0])
    x = x / np.linalg.norm(x, axis=1, keepdims=True)
    m = np.exp(log_m - log_m.max())
    m /= m.sum()
    target = handover.original_target(handover.BETA)
    w2 = w2_to_antipodal_atoms(x, m, target.points[0], float(target.masses[0]))
    top = np.argsort(log_m)[-2:]
    print(
        f"t = {T0 + t0:g} to {T0 + t0 + args.span:g}: {result.n_steps} steps, "
        f"{evaluations[0]} evaluations, {scheme.substeps} sub-steps of {scheme.refined_particles}"
        f" particles, {wall:.1f} s; {log_m.size} particles at the end, W2 {w2:.6f}, the "
        f"heaviest at {x[top].round(6).tolist()}"
    )


if __name__ == "__main__":
    main()
