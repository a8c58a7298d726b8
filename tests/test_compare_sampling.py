"""compare's i.i.d. sampling level: the W2 that n i.i.d. samples of rho_0 have from rho_0,
against an independent Monte Carlo (numpy's von Mises sampler and POT's W2 on the circle) to
10%, recorded per run (NaN for a run not started i.i.d.) and printed by the command."""

from __future__ import annotations

import math

import numpy as np
import ot

import spheredens as sd
from spheredens.cli import main
from spheredens.compare import sampling_level

KAPPA, MU, N = 2.0, 0.7, 200


def _density(tmp_path):
    cfg = {
        "model": {"name": "sa", "beta": 1.0},
        "domain": {"name": "circle"},
        "initial": {
            "name": "von_mises_fisher",
            "means": [[math.cos(MU), math.sin(MU)]],
            "kappas": [KAPPA],
        },
        "discretization": {"scheme": "fv", "n": 512},
        "time": {"t_end": 0.5, "snapshots": 3},
        "output": {"figure": False},
    }
    path = tmp_path / "density.nc"
    sd.run(sd.config_from_dict(cfg), output=path)
    return cfg, path


def _independent_level(draws: int = 200, seed: int = 5) -> float:
    """Mean W2 (radians) of N von Mises samples against the density on 4096 fine atoms."""
    rng = np.random.default_rng(seed)
    theta = (np.arange(4096) + 0.5) / 4096 * 2 * np.pi
    weights = np.exp(KAPPA * np.cos(theta - MU))
    weights /= weights.sum()
    values = []
    for _ in range(draws):
        samples = np.mod(rng.vonmises(MU, KAPPA, N), 2 * np.pi) / (2 * np.pi)
        loss = ot.wasserstein_circle(samples, theta / (2 * np.pi), None, weights, p=2)
        values.append(2 * np.pi * math.sqrt(float(np.squeeze(loss))))
    return float(np.mean(values))


def test_the_sampling_level_matches_an_independent_monte_carlo(tmp_path):
    _, path = _density(tmp_path)
    mean, spread = sampling_level(sd.open_run(path), N, draws=60)
    want = _independent_level()
    assert abs(mean / want - 1.0) < 0.10, (mean, want)
    assert 0.0 < spread < mean


def test_compare_records_it_for_iid_runs_and_prints_it(tmp_path, capsys):
    cfg, path = _density(tmp_path)
    particles = []
    for init in ("iid", "quantile"):
        p_cfg = sd.config_from_dict(
            {**cfg, "particles": {"n": N, "initialization": init, "seed": 3}}
        )
        out = tmp_path / f"particles_{init}.nc"
        sd.run_particles(p_cfg, output=out)
        particles.append(out)
    result = sd.compare(
        sd.open_run(path), [sd.open_particles(p) for p in particles], density_file=str(path)
    )
    level = result["sampling_w2"].values
    assert np.isfinite(level[0]) and np.isnan(level[1])
    assert abs(level[0] / _independent_level() - 1.0) < 0.25  # 20 draws
    # the i.i.d. run's W2 at t = 0 is of the size of the level, the quantile run's far below
    w2_0 = result["w2"].values[:, 0]
    assert 0.2 * level[0] < w2_0[0] < 3.0 * level[0] and w2_0[1] < 0.2 * level[0]
    assert main(["compare", str(path), *map(str, particles), "--no-figure"]) == 0
    out = capsys.readouterr().out
    assert f"i.i.d. sampling level, n = {N}:" in out and "sampling noise" in out
