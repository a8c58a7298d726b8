"""Invalid configurations: one-line errors naming the key, in Python and on the command line."""

from __future__ import annotations

import copy
import subprocess
import sys

import pytest

from spheredens.cli import main
from spheredens.config import config_from_dict, load_config
from spheredens.config_toml import toml_value
from spheredens.exceptions import ConfigError

VALID = {
    "model": {
        "name": "sa",
        "beta": 30.0,
        "Q": [[1.0, 0.0], [0.0, 1.0]],
        "K": [[1.75, 0.866025], [0.433013, 2.5]],
        "V": [[1.0, 0.0], [0.0, 0.5]],
    },
    "domain": {"name": "circle"},
    "initial": {
        "name": "von_mises_fisher",
        "means": [[1.0, 0.0]],
        "kappas": [2.0],
        "weights": [1.0],
    },
    "discretization": {"scheme": "fv", "n": 64},
    "time": {"t_end": 1.0, "snapshots": 3, "cfl": 0.4},
}

_DELETE = object()

# (id, changes {section: {key: value}}, key the message must name, words it must contain)
CASES = [
    ("negative_beta", {"model": {"beta": -1.0}}, "model.beta", ">= 0"),
    ("beta_not_a_number", {"model": {"beta": "thirty"}}, "model.beta", "number"),
    ("beta_too_large", {"model": {"beta": 1e5}}, "model.beta", "1e4"),
    ("nonsquare_Q", {"model": {"Q": [[1.0, 0.0], [0.0]]}}, "model.Q", "2 x 2"),
    ("wrong_size_V", {"model": {"V": [[1.0, 0, 0], [0, 1.0, 0], [0, 0, 1.0]]}}, "model.V", "2 x 2"),
    ("nan_in_K", {"model": {"K": [[float("nan"), 0.0], [0.0, 1.0]]}}, "model.K[0][0]", "finite"),
    (
        "singular_B_zero_temperature",
        {"model": {"name": "sa_zero_temperature", "beta": _DELETE, "K": [[1.0, 1.0], [1.0, 1.0]]}},
        "model.K",
        "singular",
    ),
    (
        "finite_beta_zero_temperature",
        {"model": {"name": "sa_zero_temperature", "beta": 5.0}},
        "model.beta",
        "inf",
    ),
    ("unknown_model", {"model": {"name": "transformer"}}, "model.name", "'sa'"),
    ("unknown_model_key", {"model": {"temperature": 0.1}}, "model.temperature", "unknown key"),
    ("unknown_section", {"solver": {"n": 3}}, "solver", "unknown section"),
    ("unknown_domain", {"domain": {"name": "torus"}}, "domain.name", "'circle'"),
    ("unknown_initial", {"initial": {"name": "gaussian"}}, "initial.name", "'von_mises_fisher'"),
    ("vmf_missing_means", {"initial": {"means": _DELETE}}, "initial.means", "required"),
    ("vmf_mean_not_unit", {"initial": {"means": [[2.0, 0.0]]}}, "initial.means[0]", "unit vector"),
    ("vmf_negative_weight", {"initial": {"weights": [-1.0]}}, "initial.weights[0]", "> 0"),
    ("vmf_kappas_length", {"initial": {"kappas": [1.0, 2.0]}}, "initial.kappas", "1 entries"),
    (
        "missing_initial_file",
        {
            "initial": {
                "name": "file",
                "path": "nowhere.nc",
                "means": _DELETE,
                "kappas": _DELETE,
                "weights": _DELETE,
            }
        },
        "initial.path",
        "does not exist",
    ),
    ("unknown_scheme", {"discretization": {"scheme": "weno"}}, "discretization.scheme", "'fv'"),
    ("n_too_small", {"discretization": {"n": 4}}, "discretization.n", ">= 8"),
    (
        "fourier_odd_n",
        {"discretization": {"scheme": "fourier", "n": 65}},
        "discretization.n",
        "even",
    ),
    ("lmax_on_circle", {"discretization": {"lmax": 63}}, "discretization.lmax", "unknown key"),
    (
        "unknown_limiter",
        {"discretization": {"limiter": "superbee"}},
        "discretization.limiter",
        "'mc'",
    ),
    (
        "fft_for_general_B",
        {"discretization": {"interaction": "fft"}},
        "discretization.interaction",
        "rotation",
    ),
    ("nonpositive_t_end", {"time": {"t_end": 0.0}}, "time.t_end", "> 0"),
    (
        "time_outside_range",
        {"time": {"snapshots": _DELETE, "times": [0.0, 2.0]}},
        "time.times[1]",
        "outside [0, t_end]",
    ),
    (
        "times_not_increasing",
        {"time": {"snapshots": _DELETE, "times": [0.5, 0.2]}},
        "time.times",
        "increasing",
    ),
    ("times_and_snapshots", {"time": {"times": [0.0, 1.0]}}, "time.times", "not both"),
    ("cfl_too_large", {"time": {"cfl": 1.5}}, "time.cfl", "<= 1"),
    ("one_snapshot", {"time": {"snapshots": 1}}, "time.snapshots", ">= 2"),
    ("output_not_netcdf", {"output": {"path": "result.txt"}}, "output.path", ".nc"),
    ("max_dt_negative", {"time": {"max_dt": -0.1}}, "time.max_dt", "> 0"),
    # the sphere
    (
        "two_by_two_on_sphere",
        {
            "domain": {"name": "sphere"},
            "initial": {"means": [[1.0, 0.0, 0.0]]},
            "discretization": {"scheme": "sh_spectral", "n": _DELETE},
        },
        "model.Q",
        "3 x 3",
    ),
    (
        "n_on_sphere",
        {
            **{"domain": {"name": "sphere"}},
            "model": {"Q": _DELETE, "K": _DELETE, "V": _DELETE},
            "initial": {"means": [[1.0, 0.0, 0.0]]},
            "discretization": {"scheme": "sh_spectral"},
        },
        "discretization.n",
        "unknown key",
    ),
    (
        "sphere_scheme_on_circle",
        {"discretization": {"scheme": "sh_spectral", "n": _DELETE}},
        "discretization.scheme",
        "scheme for the sphere",
    ),
    (
        "lmax_too_small",
        {
            "domain": {"name": "sphere"},
            "model": {"Q": _DELETE, "K": _DELETE, "V": _DELETE},
            "initial": {"means": [[1.0, 0.0, 0.0]]},
            "discretization": {"scheme": "sh_spectral", "n": _DELETE, "lmax": 2},
        },
        "discretization.lmax",
        ">= 3",
    ),
    (
        "fft_on_sphere",
        {
            "domain": {"name": "sphere"},
            "model": {"Q": _DELETE, "K": _DELETE, "V": _DELETE},
            "initial": {"means": [[1.0, 0.0, 0.0]]},
            "discretization": {"scheme": "sh_spectral", "n": _DELETE, "interaction": "fft"},
        },
        "discretization.interaction",
        "not available on the sphere",
    ),
    (
        "funk_hecke_general_B",
        {
            "domain": {"name": "sphere"},
            "model": {
                "Q": _DELETE,
                "V": _DELETE,
                "K": [[1.2, 0.3, 0.1], [-0.2, 0.8, 0.4], [0.1, 0.2, 1.5]],
            },
            "initial": {"means": [[1.0, 0.0, 0.0]]},
            "discretization": {"scheme": "sh_spectral", "n": _DELETE, "interaction": "funk_hecke"},
        },
        "discretization.interaction",
        "orthogonal",
    ),
    (
        "mean_wrong_dimension_sphere",
        {
            "domain": {"name": "sphere"},
            "model": {"Q": _DELETE, "K": _DELETE, "V": _DELETE},
            "discretization": {"scheme": "sh_spectral", "n": _DELETE},
        },
        "initial.means[0]",
        "3 numbers",
    ),
]


def apply(changes):
    data = copy.deepcopy(VALID)
    for section, table in changes.items():
        target = data.setdefault(section, {})
        for key, value in table.items():
            if value is _DELETE:
                target.pop(key, None)
            else:
                target[key] = value
    return data


def to_toml(data):
    lines = []
    for section, table in data.items():
        lines.append(f"[{section}]")
        lines += [f"{k} = {toml_value(v)}" for k, v in table.items()]
    return "\n".join(lines) + "\n"


def test_valid_base_config_is_accepted(tmp_path):
    cfg = config_from_dict(VALID)
    assert cfg.model.beta == 30.0
    path = tmp_path / "ok.toml"
    path.write_text(to_toml(VALID))
    assert load_config(path) == config_from_dict(VALID, base_dir=tmp_path)


def test_at_least_fifteen_cases():
    assert len(CASES) >= 15


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_python_raises_config_error_naming_key(case, tmp_path):
    _, changes, key, words = case
    with pytest.raises(ConfigError) as info:
        config_from_dict(apply(changes), base_dir=tmp_path)
    assert isinstance(info.value, ValueError)
    message = str(info.value)
    assert info.value.key == key
    assert message.startswith(f"{key}: ") and "\n" not in message
    assert words in message, message


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_cli_one_line_exit_code_2(case, tmp_path, capsys):
    _, changes, key, words = case
    path = tmp_path / "bad.toml"
    path.write_text(to_toml(apply(changes)))
    code = main(["run", str(path)])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and err.startswith(f"spheredens: error: {key}: "), err
    assert not list(tmp_path.glob("*.nc"))  # nothing computed, nothing written


@pytest.mark.parametrize(
    "text, words",
    [
        ("[model]\nbeta = -2.0\n", "model.beta"),
        ("[model\nbeta = 1\n", "not valid TOML"),
    ],
)
def test_cli_subprocess_has_no_traceback(tmp_path, text, words):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    proc = subprocess.run(
        [sys.executable, "-m", "spheredens.cli", "run", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1
    assert words in proc.stderr


def test_missing_config_file(capsys, tmp_path):
    assert main(["run", str(tmp_path / "absent.toml")]) == 2
    assert "does not exist" in capsys.readouterr().err
