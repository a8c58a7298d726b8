"""Hostile inputs: random configuration tables and netCDF files end in a valid configuration or
a one-line error, never another exception (property-based, hypothesis)."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import spheredens as sd
from spheredens.config import SECTIONS, config_from_dict
from spheredens.exceptions import SchemaError

KNOWN_KEYS = [
    "name",
    "beta",
    "Q",
    "K",
    "V",
    "means",
    "kappas",
    "weights",
    "seed",
    "bandwidth",
    "amplitude",
    "path",
    "variable",
    "time",
    "scheme",
    "n",
    "lmax",
    "limiter",
    "filter",
    "interaction",
    "integrator",
    "nthreads",
    "t_end",
    "times",
    "snapshots",
    "cfl",
    "max_dt",
    "figure",
    "initialization",
    "dt",
]
NAMES = [
    "sa",
    "usa",
    "sa_zero_temperature",
    "circle",
    "sphere",
    "fv",
    "fourier",
    "sh_spectral",
    "uniform",
    "von_mises_fisher",
    "random_smooth",
    "file",
    "iid",
    "quantile",
    "mc",
    "auto",
    "direct",
    "fft",
    "funk_hecke",
    "rk4",
    "x.nc",
    "bogus",
]
scalars = st.one_of(
    st.booleans(),
    st.integers(-(10**9), 10**9),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(NAMES),
    st.text(max_size=6),
    st.none(),
)
values = st.one_of(
    scalars,
    st.lists(scalars, max_size=4),
    st.lists(st.lists(st.floats(-3, 3), min_size=0, max_size=4), max_size=4),
)
tables = st.dictionaries(
    st.one_of(st.sampled_from(KNOWN_KEYS), st.text(max_size=5)), values, max_size=6
)
configs = st.dictionaries(
    st.one_of(st.sampled_from(list(SECTIONS)), st.text(max_size=5)),
    st.one_of(tables, scalars),
    max_size=7,
)


@settings(max_examples=400, deadline=2000, suppress_health_check=[HealthCheck.too_slow])
@given(configs)
def test_random_config_tables(tmp_path_factory, data):
    try:
        cfg = config_from_dict(data, base_dir=tmp_path_factory.getbasetemp())
    except sd.ConfigError as exc:
        assert "\n" not in str(exc) and str(exc)
    else:
        assert isinstance(cfg, sd.RunConfig)
        assert config_from_dict(cfg.to_dict(), base_dir=cfg.base_dir) == cfg  # round trip


@settings(
    max_examples=150,
    deadline=3000,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    n=st.integers(0, 40),
    dims=st.sampled_from([("theta",), ("x",), ("time", "theta"), ("theta", "y")]),
    fill=st.sampled_from(["ok", "nan", "negative", "zero", "random", "huge"]),
    with_weight=st.booleans(),
    coord=st.booleans(),
)
def test_random_initial_files(tmp_path, n, dims, fill, with_weight, coord):
    rng = np.random.default_rng(n)
    shape = tuple(n if d in ("theta", "x") else 2 for d in dims)
    rho = {
        "ok": np.full(shape, 1 / (2 * np.pi)),
        "nan": np.full(shape, np.nan),
        "negative": -np.ones(shape),
        "zero": np.zeros(shape),
        "random": rng.random(shape),
        "huge": np.full(shape, 1e308),
    }[fill]
    ds = xr.Dataset({"rho": (dims, rho)})
    if coord and "theta" in dims:
        ds = ds.assign_coords(theta=np.linspace(0, 2 * np.pi, n, endpoint=False))
    if with_weight and "theta" in dims:
        ds["weight"] = ("theta", np.full(n, 2 * np.pi / max(n, 1)))
    path = tmp_path / "init.nc"
    ds.to_netcdf(path)
    before = path.read_bytes()
    try:
        config_from_dict({"initial": {"name": "file", "path": "init.nc"}}, base_dir=tmp_path)
    except sd.ConfigError as exc:
        assert "\n" not in str(exc)
    assert path.read_bytes() == before  # inputs are never modified


@settings(
    max_examples=100, deadline=3000, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    t=st.integers(0, 3),
    n=st.integers(0, 5),
    d=st.integers(1, 4),
    scale=st.sampled_from([1.0, 1.5, np.nan, 0.0]),
    domain=st.sampled_from(["circle", "sphere", "torus"]),
)
def test_random_particle_files(tmp_path, t, n, d, scale, domain):
    g = np.random.default_rng(t + 10 * n).standard_normal((t, n, d))
    x = scale * g / np.maximum(np.linalg.norm(g, axis=-1, keepdims=True), 1e-300)
    ds = xr.Dataset(
        {"position": (("time", "particle", "component"), x)},
        coords={"time": np.arange(t, dtype=float)},
        attrs={"domain": domain},
    )
    path = tmp_path / "p.nc"
    ds.to_netcdf(path)
    try:
        sd.io.open_particles(path)
    except SchemaError as exc:
        assert "\n" not in str(exc)


def test_huge_configuration_refused_with_estimate():
    with pytest.raises(
        sd.ConfigError, match=r"time.snapshots: the run would need about [0-9.]+ GiB"
    ):
        config_from_dict(
            {
                "domain": {"name": "sphere"},
                "discretization": {"scheme": "sh_spectral", "lmax": 1023},
                "time": {"t_end": 1.0, "snapshots": 100000},
            }
        )
