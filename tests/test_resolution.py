"""Resolution guard: runs refuse grids that do not resolve the attention kernel (or warn when
allowed explicitly)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import EXAMPLE_C

import spheredens as sd
from spheredens.cli import main
from spheredens.runner import resolution_problem


def cfg(n=None, lmax=None, beta=100.0, **extra):
    if lmax is None:
        return sd.config_from_dict(
            {
                "model": {"beta": beta, **EXAMPLE_C},
                "discretization": {"n": n, **extra},
                "time": {"t_end": 0.1},
            }
        )
    return sd.config_from_dict(
        {
            "model": {"beta": beta},
            "domain": {"name": "sphere"},
            "discretization": {"scheme": "sh_spectral", "lmax": lmax, **extra},
            "time": {"t_end": 0.1},
        }
    )


def test_circle_needs_three_cells_per_kernel_width():
    # width (beta sigma_max(B))^(-1/2) with 3 cells of 2 pi / n across: n >= 6 pi sqrt(beta
    # sigma_max)
    sigma = np.linalg.norm(np.array(EXAMPLE_C["K"]), 2)
    need = int(np.ceil(6 * np.pi * np.sqrt(100.0 * sigma)))
    assert 320 <= need <= 325
    assert resolution_problem(cfg(need - 1)) and not resolution_problem(cfg(need))
    with pytest.raises(
        sd.ConfigError, match=rf"discretization.n: n = 256 does not resolve .* n >= {need}"
    ):
        sd.run(cfg(256), progress=False)


def test_sphere_needs_lmax_a_few_times_sqrt_2_beta():
    assert resolution_problem(cfg(lmax=41)) and not resolution_problem(cfg(lmax=43))
    with pytest.raises(sd.ConfigError, match="discretization.lmax: lmax = 31"):
        sd.run(cfg(lmax=31), progress=False)


def test_override_warns_and_runs():
    with pytest.warns(sd.SpheredensWarning, match="running anyway"):
        ds = sd.run(cfg(128, allow_underresolved=True), progress=False)
    assert ds.attrs["run_status"] == "complete"


def test_zero_temperature_has_no_kernel():
    z = sd.config_from_dict(
        {"model": {"name": "sa_zero_temperature", **EXAMPLE_C}, "discretization": {"n": 16}}
    )
    assert resolution_problem(z) == ""


def test_cli_refuses_in_one_line(tmp_path, capsys):
    (tmp_path / "c.toml").write_text("[model]\nbeta = 1000.0\n[discretization]\nn = 256\n")
    assert main(["run", str(tmp_path / "c.toml")]) == 2
    err = capsys.readouterr().err
    assert (
        err.count("\n") == 1 and "allow_underresolved" in err and not (tmp_path / "c.nc").exists()
    )
