"""
Example C on the circle
=======================

The softmax model ``sa`` on S^1 with Q = I, K = [[1.75, 0.866025], [0.433013, 2.5]],
V = diag(1, 0.5) and beta = 30, from the uniform density: "example C" of the concentration
study (docs/concentration.md). A = V B^T is symmetric with eigenvalues 2 and 1, so the
zero-temperature limit carries rho_0 to Pi_# rho_0, two atoms at +-u, u = (cos 30deg,
sin 30deg). The finite-temperature density concentrates near those atoms (the metastable
phase), then drifts towards the top eigenvector e_1 of V (the terminal phase).

What it shows: the density as a space-time image and W2(rho_t, Pi_# rho_0) beside it.
Reference: ``make demo`` runs the same configuration at n = 512 (runs/circle_example_c; min W2
0.1609); here n = 192 cells, the coarsest grid the resolution rule allows at beta = 30.
Runtime: about 5 s.
"""

# %%
# The configuration: every key not given takes its default (docs/config.md); nothing is
# written to disk until a path is given.
import spheredens as sd

cfg = sd.config_from_dict({
    "model": {"name": "sa", "beta": 30.0,
              "K": [[1.75, 0.866025], [0.433013, 2.5]], "V": [[1.0, 0.0], [0.0, 0.5]]},
    "domain": {"name": "circle"},
    "initial": {"name": "uniform"},
    "discretization": {"scheme": "fv", "n": 192},
    "time": {"t_end": 40.0, "snapshots": 41},
})
ds = sd.run(cfg, progress=False)
w2 = ds["w2_projection"]
print(f"mass {float(ds['mass'][-1]):.15f}, min rho {float(ds['min_rho'].min()):.2e}")
print(f"min over t of W2 to Pi_# rho_0: {float(w2.min()):.4f} at t = {float(w2.idxmin()):g}")

# %%
# The figure of ``spheredens plot`` (log colour scale). By t ~ 9 the density sits in two bands
# near theta = pi/6 and 7pi/6, the atoms +-u of Pi_# rho_0, where W2 is smallest; then the
# bands drift to theta = 0 and pi (+-e_1, the top eigenvector of V) and W2 rises again.
sd.plot_run(ds, "circle_example_c.png")
