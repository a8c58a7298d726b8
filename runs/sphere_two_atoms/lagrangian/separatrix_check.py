"""Is the mass across set by how finely the particles cut the separatrix? (docs/concentration.md)

A diagnostic, not a scheme option. At t = 0 the particles already partition rho_0 by the
plane <x, u> = 0 with an error of 0.4e-5 to 1.8e-4 (n = 64, 45, 46, 32: ``--initial``), more
than the mass across itself (about 7e-5): a particle that straddles the line where the flow
separates the two basins carries all its mass to one side, and only the splits that the
stretching there causes refine that partition. This script runs the study's case
(study.py, beta = 300, ``--merge 3 --look --moments --limited``) to t = 12 with one change,
made at run time: besides the caps of ``refine_look``, a particle that straddles a separatrix,
found from the flow at the start of the step and nothing else, is cut down to ``--length``
kernel widths (|beta B^T x|^-1/2). It straddles one when it is stretched along its long axis e
(rate r = <f, df/dt> / |f|^2 > 0, f the long edge) and the velocity along e, linear across
it, vanishes inside it: |<X(x), e>| < r |f| / 2. No plane is given: unlike band_check.py,
this finds the separatrix wherever the flow has one, and cuts a line of particles, not a band.

Usage:
  .venv/bin/python runs/sphere_two_atoms/lagrangian/separatrix_check.py --run N [--length L]
      run (or resume) the case at n = N into cases/separatrix_test_L/
  .venv/bin/python runs/sphere_two_atoms/lagrangian/separatrix_check.py --table
      the mass across (1e-5) at t = 4 ... 12 of the runs there
  .venv/bin/python runs/sphere_two_atoms/lagrangian/separatrix_check.py --initial N [N ...]
      the particles' partition of rho_0 by the plane at t = 0 (1e-5)
"""

from __future__ import annotations

import argparse

import numpy as np
import study  # beside this script
from scipy.special import logsumexp

import spheredens.schemes._sphere_lagrangian as lagrangian
from spheredens.problem import Problem
from spheredens.schemes import make_scheme
from spheredens.schemes._particle_remesh import look_lengths
from spheredens.targets import projection_target

BETA = 300.0
VARIANT = study.Variant(merge=3.0, look=True, moments=True, limited=True)


def straddling(shape: np.ndarray, velocity: np.ndarray, shape_rate: np.ndarray) -> np.ndarray:
    """The particles (shapes (n, 3, 2), orthogonal edges; their dx/dt and d shape/dt) whose
    long axis is stretched and whose velocity along it vanishes inside them."""
    lengths = np.linalg.norm(shape, axis=1)  # (n, 2)
    k = np.argmax(lengths, axis=1)
    rows = np.arange(len(k))
    f, df = shape[rows, :, k], shape_rate[rows, :, k]
    length = lengths[rows, k]
    rate = np.einsum("ij,ij->i", f, df) / length**2
    along = np.einsum("ij,ij->i", velocity, f) / length
    return (rate > 0.0) & (np.abs(along) < 0.5 * rate * length)


class Separatrix:
    """The run-time patch: the flow of each step is kept, and ``look_lengths`` cuts the
    particles :func:`straddling` by it (one slice: the study's case has none)."""

    def __init__(self, length: float) -> None:
        self.length = length
        self.flow = None
        self.shape = None
        self.cut = []  # particles cut per step

    def install(self) -> None:
        flows = lagrangian.SphereLagrangianScheme._flows

        def kept(scheme, state):
            out = flows(scheme, state)
            self.flow, self.shape = out[0], lagrangian.unpack(state[0])[2]
            return out

        lagrangian.SphereLagrangianScheme._flows = kept
        lagrangian.look_lengths = self.lengths

    def lengths(self, log_m, x, query, s_max):
        out = look_lengths(log_m, x, query, s_max)
        if self.flow is None or len(self.flow[0]) != len(x):
            return out
        near = np.flatnonzero(straddling(self.shape, *self.flow))
        self.cut.append(near.size)
        if near.size:
            width = np.linalg.norm(np.asarray(query(x[near]), dtype=float), axis=1) ** -0.5
            out[near] = np.minimum(out[near], self.length * width)
        return out


def initial_partition(n: int, target) -> float:
    """The particles' mass on +u's side of the plane at t = 0 minus the target's atom."""
    cfg = study.case_config(BETA, n, 3e-6, 1.0, VARIANT)
    scheme = make_scheme(Problem.from_config(cfg), cfg.discretization)
    log_m, x, _, _ = lagrangian.unpack(scheme.initial_state()[0])
    m = np.exp(log_m - logsumexp(log_m))
    return float(m[x @ target.points[0] > 0.0].sum() - target.masses[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--run", type=int, metavar="N")
    parser.add_argument(
        "--length",
        type=float,
        default=0.25,
        help="straddling particles are cut to this many kernel widths (default %(default)g)",
    )
    parser.add_argument("--tol", type=float, default=3e-6)
    parser.add_argument("--table", action="store_true")
    parser.add_argument("--initial", type=int, nargs="+", metavar="N")
    args = parser.parse_args()
    target = projection_target(study.case_config(BETA, 16, 1e-4, study.SPACING))
    if args.initial:
        for n in args.initial:
            print(f"n = {n}: {1e5 * initial_partition(n, target):.2f}e-5")
    if args.run:
        patch = Separatrix(args.length)
        patch.install()
        out = study.OUT / f"separatrix_test_{args.length:g}"
        study.run_case(BETA, args.run, args.tol, 12.0, VARIANT, False, out)
        print(
            f"straddling particles cut per step: median {np.median(patch.cut):.0f}, "
            f"max {max(patch.cut, default=0)}"
        )
    if args.table:
        paths = sorted(study.OUT.glob("separatrix_test*/*.nc"))
        print(study.across_table("separatrix run", paths, target))


if __name__ == "__main__":
    main()
