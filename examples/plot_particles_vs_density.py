"""
Particles against the density
=============================

The same model integrated two ways: the density rho_t on a grid (``sd.run``) and n tokens as
particles (``sd.run_particles``: the n-particle system, softmax in log-sum-exp form, RK4
renormalized to the circle). ``sd.compare`` measures W2 between them at every snapshot time the
runs share (exact on the circle, geodesic cost), with the spread over i.i.d. particle runs.

What it shows: example C at beta = 30 (the gallery's first example) with 300 particles, placed
at the quantiles of rho_0 or drawn i.i.d. from it (three seeds); W2(rho_t, mu_t) against t and
the density with the particles overlaid. Reference: i.i.d. tokens carry O(n^-1/2) sampling
noise, deterministic quantile points far less (``tests/test_particles.py``: W2 falls like
n^-1/2, quantiles ~15x closer at n = 1000); README, "Particles and comparison with the
density". Runtime: about 7 s.
"""

# %%
# A ``[particles]`` table added to the run configuration: 300 particles at the (k + 1/2) / n
# quantiles of rho_0, a fixed step of 0.05 (shortened to land on the snapshot times).
import spheredens as sd
from spheredens.plot import plot_comparison

cfg = sd.config_from_dict({
    "model": {"name": "sa", "beta": 30.0,
              "K": [[1.75, 0.866025], [0.433013, 2.5]], "V": [[1.0, 0.0], [0.0, 0.5]]},
    "discretization": {"scheme": "fv", "n": 192},
    "time": {"t_end": 10.0, "snapshots": 11},
    "particles": {"n": 300, "initialization": "quantile", "dt": 0.05},
})
density = sd.run(cfg, progress=False)
particles = sd.run_particles(cfg, progress=False)
quantile = sd.compare(density, [particles])
print("quantile points: W2 =", quantile["w2"].values[0].round(4))

# %%
# The figure of ``spheredens compare``: W2 against t, and the density with the particles.
plot_comparison(quantile, density, particles, "particles_quantile.png")

# %%
# Three i.i.d. runs: the samples split between the two half-circles that Pi sends to +u and
# -u with an imbalance of order n^-1/2, and each run carries its own split to its two atoms.
# W2 to the density grows as both concentrate, by an amount that differs from seed to seed
# (the wide band).
iid_cfg = cfg.replace(**{"particles.initialization": "iid"})
runs = [sd.run_particles(iid_cfg, seed=seed, progress=False) for seed in (0, 1, 2)]
iid = sd.compare(density, runs)
for t, mean, std in zip(iid["time"].values, iid["w2_mean"].values, iid["w2_std"].values):
    print(f"t = {t:4g}   W2 = {mean:.4f} +- {std:.4f}")
plot_comparison(iid, density, runs[0], "particles_iid.png")
