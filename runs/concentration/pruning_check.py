"""Does the certified pruning move the departure? (issue 14: "whatever drops small values must
be shown not to move the departure").

Runs example C at beta = 1000 with ``log_sl`` (n = 1024, tolerance 1e-2, to T = 300) twice:
with the pruning of ``direct_pruned`` (skips source blocks proven below 2^-60 of each row's sum)
and with every source summed (the cut set to -inf), and prints min W2, t_min, the departure
time, the largest difference of W2 over the run and the wall times. The other thing that could
drop small values, the floor of log rho at -1e6, is never reached in these runs (the smallest
log rho is printed).

Usage: .venv/bin/python runs/concentration/pruning_check.py [--n 1024]   (~15 minutes)
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import spheredens as sd
from spheredens.analysis import curve_summary
from spheredens.config import load_config
from spheredens.simulate import Observer

HERE = __file__.rsplit("/", 1)[0]


class Curve(Observer):
    def __init__(self, scheme) -> None:
        self.scheme, self.t, self.log_min = scheme, [], np.inf

    def observe(self, t, state) -> None:
        self.t.append(t)
        self.log_min = min(self.log_min, float(self.scheme.log_density(state).min()))


def run(n: int, prune: bool):
    cfg = load_config(f"{HERE}/base_low_temperature.toml")
    cfg = cfg.replace(**{"discretization.n": n})
    problem = sd.Problem.from_config(cfg)
    scheme = sd.make_scheme(problem, cfg.discretization)
    if not prune:
        scheme.interaction._log_cut = -np.inf  # keep every block: the plain log-sum-exp sums
    recorder = sd.Recorder(problem, scheme, cfg)
    curve = Curve(scheme)
    t0 = time.perf_counter()
    sd.simulate(scheme, cfg.time, [recorder, curve])
    ds = recorder.dataset()
    return ds, time.perf_counter() - t0, curve.log_min


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=1024)
    args = parser.parse_args()
    out = {}
    for prune in (True, False):
        ds, wall, log_min = run(args.n, prune)
        s = curve_summary(ds["time"].values, ds["w2_projection"].values)
        out[prune] = ds["w2_projection"].values
        print(f"{'pruned' if prune else 'every source'}: min W2 {s['min_w2']:.8f} at t = {s['t_min']:g}, "
              f"departure {s['departure_time']:g}, {ds.attrs['n_steps']} steps, {wall:.0f} s, "
              f"smallest log rho {log_min:.1f}")
    print(f"largest |W2(pruned) - W2(every source)| over the run: {np.nanmax(np.abs(out[True] - out[False])):.3g}")


if __name__ == "__main__":
    main()
