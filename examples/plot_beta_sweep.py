"""
A sweep in beta
===============

Example C on the circle (the gallery's first example) at beta = 3, 10 and 30: how close the
density comes to Pi_# rho_0, when, and when it leaves again. A sweep names a base
configuration and the values to vary; every case is a task on Dask (a local cluster of two
worker processes here, or an existing cluster with ``scheduler="tcp://host:port"``), writes its
own file, and the cases combine into one dataset with a ``beta`` dimension.
``sd.analyze_beta`` then gives, per beta, the minimum of W2, its time, the departure time and
the early rate against the spectral gap (definitions: docs/concentration.md).

What it shows: the figure of ``spheredens analyze-beta``, one panel per quantity: W2 to
Pi_# rho_0 (radians) against t for each beta at n = 192, min W2 against beta beside the bound
sqrt(log(beta + 1) / beta), and the departure time against beta, where a run that has not
departed by T = 25 is an open triangle at T. Reference:
the study of beta = 10 to 1000 at n = 1024 to 4096 in docs/concentration.md. Runtime: about
15 s (two cases at a time on two workers, started as new processes).
"""

# %%
# The sweep, as a sweep file would hold it (``spheredens sweep FILE``): here the base is a
# table, and the case files go to a temporary folder.
import tempfile
from pathlib import Path

import spheredens as sd
from spheredens.plot import plot_beta_study
from spheredens.sweep import sweep_from_dict

folder = Path(tempfile.mkdtemp())
sweep = sweep_from_dict({
    "base": {"model": {"name": "sa", "K": [[1.75, 0.866025], [0.433013, 2.5]],
                       "V": [[1.0, 0.0], [0.0, 0.5]]},
             "discretization": {"scheme": "fv", "n": 192},
             "time": {"t_end": 25.0, "snapshots": 51}},
    "output_dir": "cases",
    "vary": {"model.beta": [3.0, 10.0, 30.0]},
}, base_dir=folder)
print([case.name for case in sweep.cases])

# %%
# Run it: a finished case is never recomputed, so running the same sweep again only combines.
# Dask starts its workers as new Python processes, which import this script: the ``__main__``
# guard keeps them from starting the sweep again (as in any script that starts processes; the
# command ``spheredens sweep`` needs none).
if __name__ == "__main__":
    combined, outcome = sd.run_sweep(sweep, n_workers=2, progress=False)
    print(outcome)
    print(combined["w2_projection"].dims, combined["w2_projection"].shape)

# %%
# The table of ``spheredens analyze-beta`` and its figure. The departure is the first time
# after the minimum at which W2 exceeds 2 min + 0.02; a run whose W2 has not risen that far by
# t_end (here beta = 10) is reported as "no departure by t_end". The plateau between the
# minimum and the departure lengthens quickly with beta (docs/concentration.md: departures at
# t = 18, 29 and 76 for beta = 30, 100 and 300, at n = 1024).
if __name__ == "__main__":
    analysis = sd.analyze_beta(combined)
    print("\n".join(sd.beta_table(analysis)))
    plot_beta_study(combined, analysis, "beta_sweep.png")
