"""Example C (concentration paper digest): positivity, conservation, W2 to Pi_# rho_0.

``fv`` keeps min rho >= 0 on the strongly concentrating run beta = 100,
T = 40, n = 512; mass is conserved to 1e-12; W2(rho_t, Pi_# rho_0) decreases over the first time
units for beta in {10, 30, 100}, and its minimum over time decreases with beta.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import EXAMPLE_C, make_config

import spheredens as sd

BETAS = (10.0, 30.0, 100.0)


def example_c(beta, t_end, scheme="fv", n=512, snapshots=None):
    cfg = make_config(
        model={"beta": beta, **EXAMPLE_C},
        initial={"name": "uniform"},
        discretization={"scheme": scheme, "n": n},
        time={"t_end": t_end, "snapshots": snapshots or int(4 * t_end) + 1},
    )
    return sd.run(cfg, progress=False)


@pytest.fixture(scope="module")
def runs():
    # beta = 100 to T = 40; the others far enough to pass their minimum
    return {beta: example_c(beta, 40.0 if beta == 100.0 else 20.0) for beta in BETAS}


@pytest.mark.slow
def test_fv_keeps_density_nonnegative_when_concentrating(runs):
    ds = runs[100.0]
    assert float(ds.time[-1]) == 40.0 and ds.attrs["run_status"] == "complete"
    assert float(ds["min_rho"].min()) >= 0.0
    # it does concentrate: the peak grows by more than two orders of magnitude
    assert float(ds["rho"].isel(time=-1).max()) > 100 * float(ds["rho"].isel(time=0).max())


@pytest.mark.parametrize("beta", BETAS)
@pytest.mark.slow
def test_mass_conserved_over_full_run(runs, beta):
    mass = runs[beta]["mass"].values
    # ~5000 steps x 3 stages of round-off on O(1) numbers: a random walk far below 1e-12
    assert np.abs(mass - 1.0).max() <= 1e-12


@pytest.mark.parametrize("beta", BETAS)
@pytest.mark.slow
def test_w2_projection_decreases_early(runs, beta):
    ds = runs[beta]
    w2 = ds["w2_projection"].sel(time=slice(0.0, 5.0)).values
    assert np.all(np.diff(w2) < 0), w2


@pytest.mark.slow
def test_minimum_w2_decreases_with_beta(runs):
    minima = [float(runs[b]["w2_projection"].min()) for b in BETAS]
    assert minima[0] > minima[1] > minima[2], minima
    # and the minimum is reached later for larger beta (metastability grows like log beta)
    t_min = [float(runs[b]["time"][int(np.argmin(runs[b]["w2_projection"].values))]) for b in BETAS]
    assert t_min[0] <= t_min[1] <= t_min[2], t_min


def test_fourier_conserves_mass_over_full_run():
    ds = example_c(10.0, 10.0, scheme="fourier", n=256)
    assert np.abs(ds["mass"].values - 1.0).max() <= 1e-12
