"""``spheredens convergence``: min W2 to Pi_# rho_0 and the departure over refinements, with the
observed order and the Richardson estimate, on a manufactured sequence: three real runs (circle,
fv, n = 64, 128, 256) whose W2 curves are replaced by W2_n(t) = m_n + 0.01 (t - 2)^2 before
t_n and 1 from t_n on, with m_n = 0.1 + 0.02 (64 / n)^2 and t_n = 3 + 0.64 (64 / n)^2 (both
second order, limits 0.1 and 3)."""

from __future__ import annotations

import numpy as np
import pytest

import spheredens as sd
from spheredens.cli import main
from spheredens.convergence import convergence_study
from spheredens.exceptions import ModelMismatchError, SchemaError

NS = (64, 128, 256)


def _run(tmp_path, n: int, beta: float = 5.0):
    cfg = sd.config_from_dict(
        {
            "model": {"name": "sa", "beta": beta},
            "domain": {"name": "circle"},
            "initial": {"name": "random_smooth", "seed": 1},
            "discretization": {"scheme": "fv", "n": n},
            "time": {"t_end": 5.0, "snapshots": 501},
            "output": {"figure": False},
        }
    )
    path = tmp_path / f"run_n{n}_beta{beta:g}.nc"
    sd.run(cfg, output=path)
    ds = sd.open_run(path).load()
    t = ds["time"].values
    m = 0.1 + 0.02 * (64 / n) ** 2
    t_dep = 3.0 + 0.64 * (64 / n) ** 2
    w2 = np.where(t < t_dep - 1e-9, m + 0.01 * (t - 2.0) ** 2, 1.0)
    ds["w2_projection"].values[:] = w2
    out = tmp_path / f"manufactured_n{n}_beta{beta:g}.nc"
    ds.to_netcdf(out)
    return out


@pytest.fixture(scope="module")
def manufactured(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("convergence")
    return tmp, [_run(tmp, n) for n in NS]


def test_the_order_and_the_limits_of_a_manufactured_sequence(manufactured):
    _, paths = manufactured
    runs = [sd.open_run(p) for p in reversed(paths)]  # any order
    study = convergence_study(runs, [p.name for p in reversed(paths)])
    assert study["parameter"] == "n" and study["ratio"] == 2.0
    assert [row["n"] for row in study["rows"]] == list(NS)
    mins = [row["min_w2"] for row in study["rows"]]
    assert np.allclose(mins, [0.12, 0.105, 0.10125], rtol=0, atol=1e-12)
    r = study["richardson"]["min_w2"]
    assert abs(r["order"] - 2.0) < 1e-6 and abs(r["extrapolated"] - 0.1) < 1e-9
    d = study["richardson"]["departure_time"]
    assert abs(d["order"] - 2.0) < 1e-6 and abs(d["extrapolated"] - 3.0) < 1e-6
    assert [row["t_min"] for row in study["rows"]] == [2.0, 2.0, 2.0]
    assert np.allclose(study["changes"]["departure_time"], [0.48 / 3.16, 0.12 / 3.04])


def test_the_command_prints_the_table_and_the_estimates(manufactured, capsys):
    _, paths = manufactured
    assert main(["convergence", *map(str, paths)]) == 0
    out = capsys.readouterr().out
    assert "min W2: observed order 2.00, Richardson estimate 0.1," in out
    assert "departure: observed order 2.00, Richardson estimate 3," in out
    assert "min W2: change per refinement (ratio 2): 14.29%, 3.70%" in out


def test_another_model_another_ratio_or_one_run_is_refused(manufactured, tmp_path, capsys):
    _, paths = manufactured
    other = _run(tmp_path, 512, beta=6.0)
    with pytest.raises(ModelMismatchError, match="beta"):
        convergence_study([sd.open_run(p) for p in (*paths[:2], other)])
    assert main(["convergence", str(paths[0]), str(other)]) != 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "beta" in err, err
    with pytest.raises(SchemaError, match="one ratio"):
        convergence_study(
            [sd.open_run(p) for p in (paths[0], paths[1])] + [sd.open_run(_run(tmp_path, 512))]
        )
    with pytest.raises(SchemaError, match="two runs or more"):
        convergence_study([sd.open_run(paths[0])])
    with pytest.raises(SchemaError, match="same n"):
        convergence_study([sd.open_run(paths[0]), sd.open_run(paths[0])])
