"""The domain is the one place that knows the domain.

Every registered domain answers what the modules ask (quasi-uniform points, W2); a domain the
package has never heard of (S^3, registered here for the test only) gets the domain-generic
defaults, and the optional features it does not provide refuse in one line; and no module
outside geometry.py decides by comparing a domain name or a dimension to a literal.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from conftest import stop_after_steps

import spheredens as sd
from spheredens import transport
from spheredens.compare import w2_between_runs
from spheredens.diagnostics import projection_distance
from spheredens.exceptions import ConfigError, SpheredensError
from spheredens.geometry import (
    CIRCLE,
    DOMAINS,
    SPHERE,
    Domain,
    NotProvided,
    domain_entry,
    domain_of_dimension,
    fibonacci_sphere,
    get_domain,
    halton_sphere,
)
from spheredens.initial import (
    FromFile,
    RandomSmooth,
    von_mises_fisher_density,
    von_mises_fisher_normalized,
)
from spheredens.interaction import Layout
from spheredens.io import open_run
from spheredens.models import Model
from spheredens.particles import run_particles, sample_iid
from spheredens.plot._density import FIGURES
from spheredens.schemes import Resolution, Scheme, Tendency, register_scheme
from spheredens.targets import AssumptionError, projection_measure

PACKAGE = Path(__file__).resolve().parents[1] / "spheredens"


def random_atoms(rng, d, n):
    x = rng.standard_normal((n, d))
    return x / np.linalg.norm(x, axis=1, keepdims=True), rng.random(n) + 0.1


class PointGrid:
    """What a grid file (grids/_name.py) of S^3 gives: n quasi-uniform points, equal weights."""

    weight_attrs = {"long_name": "quadrature weight (volume / n)", "units": "1"}
    rho_attrs = {"long_name": "density with respect to volume", "units": "1"}

    def __init__(self, n: int, area: float) -> None:
        self.n = n
        self.points = halton_sphere(n, 4)
        self.weight = np.full(n, area / n)
        self.h = (area / n) ** (1.0 / 3.0)

    @property
    def shape(self):
        return (self.n,)

    @property
    def space_dims(self):
        return ("point",)

    def dataset_variables(self):
        return {}

    def dataset_coords(self):
        return {"point": ("point", np.arange(self.n), {"long_name": "index of the point"})}


class Relax(Scheme):
    """What a scheme file (schemes/_name.py) of S^3 gives: d rho/dt = mean(rho) - rho (mass kept,
    positive), with the step from the attention velocity of the direct evaluator."""

    name, domain = "relax", "s3"
    options = ("n", "interaction", "integrator")
    #: every n from the minimum on resolves the kernel (rule c = 0)
    resolution = Resolution("n", 64, 8, 4096, rule=(0.0, 1.0), message="n = {value} < {need}")
    positive = True

    @classmethod
    def memory_estimate(cls, options):
        n = int(options.get("n") or 64)
        return n, 8.0 * n * n

    def __init__(self, problem, *, n: int = 64, **options) -> None:
        super().__init__(problem, PointGrid(n, 2.0 * np.pi**2), **options)

    def layout(self):
        return Layout("s3", "values", self.grid, self.grid, scheme=self.name)

    def sample(self, f):
        return np.asarray(f(self.grid.points), dtype=float)

    def rhs(self, state, t):
        v = self.interaction.velocity(state)
        mean = np.sum(state * self.grid.weight, axis=-1, keepdims=True) / np.sum(self.grid.weight)
        return Tendency(mean - state, float(np.sqrt(np.max(np.sum(v * v, axis=-1)))))

    def attributes(self):
        return {"n": self.grid.n, "interaction": self.interaction.name}


@pytest.fixture
def s3():
    """A third domain, S^3 in R^4, registered only for the test: its geometry.py entry, and the
    grid and scheme above (what grids/_name.py and schemes/_name.py would hold)."""
    domain = Domain("s3", 4, 2.0 * np.pi**2, "relax", ("iid", "quasi_uniform"))
    DOMAINS._items["s3"] = domain
    register_scheme(Relax)
    try:
        yield domain
    finally:
        del DOMAINS._items["s3"]


# -- what every domain answers ------------------------------------------------------------
@pytest.mark.parametrize("name", list(DOMAINS))
def test_quasi_uniform_points_are_unit_vectors_of_the_domain(name):
    domain = get_domain(name)
    x = domain.quasi_uniform(500)
    assert x.shape == (500, domain.d)
    assert np.allclose(np.linalg.norm(x, axis=1), 1.0, atol=1e-14)
    assert np.array_equal(x, domain.quasi_uniform(500))  # deterministic
    assert abs(np.mean(x, axis=0)).max() < 0.05  # spread over the whole domain
    # a meridian reduction (zonal) has the points of a plane, and is never found by dimension
    assert domain_of_dimension(domain.d) is (CIRCLE if domain.meridian else domain)


def test_quasi_uniform_points_are_those_of_before():
    """The circle's equispaced angles and the sphere's Fibonacci lattice (same bits as the
    sampler used: iid runs are unchanged)."""
    assert np.array_equal(
        CIRCLE.quasi_uniform(8192),
        np.stack(
            [
                np.cos(2 * np.pi * np.arange(8192) / 8192),
                np.sin(2 * np.pi * np.arange(8192) / 8192),
            ],
            axis=-1,
        ),
    )
    assert np.array_equal(SPHERE.quasi_uniform(40000), fibonacci_sphere(40000))
    assert (CIRCLE.envelope_points, SPHERE.envelope_points) == (8192, 40000)


@pytest.mark.parametrize("name", list(DOMAINS))
def test_w2_of_the_domain(name):
    domain = get_domain(name)
    rng = np.random.default_rng(3)
    x, a = random_atoms(rng, domain.d, 40)
    y, b = random_atoms(rng, domain.d, 30)
    assert domain.w2(x, a, x, a) == pytest.approx(0.0, abs=1e-6)
    expected = (
        transport.w2_circle(np.arctan2(x[:, 1], x[:, 0]), a, np.arctan2(y[:, 1], y[:, 0]), b)
        if domain is CIRCLE
        else transport.w2_sphere(x, a, y, b)
    )
    assert domain.w2(x, a, y, b) == pytest.approx(expected, abs=1e-12)


def test_circle_w2_takes_angles_as_they_are():
    """compare passes the sub-atoms of the circle's cells as angles: same number as before."""
    rng = np.random.default_rng(4)
    theta = rng.uniform(-1.0, 7.0, 50)
    x, a = random_atoms(rng, 2, 20)
    w = rng.random(50)
    assert CIRCLE.w2(theta, w, x, a) == transport.w2_circle(
        theta, w, np.mod(np.arctan2(x[:, 1], x[:, 0]), 2 * np.pi), a
    )


@pytest.mark.parametrize("d", [2, 3])
def test_general_von_mises_fisher_normalization_matches_the_closed_forms(d):
    rng = np.random.default_rng(d)
    x, _ = random_atoms(rng, d, 100)
    mean = np.eye(d)[0]
    for kappa in (0.0, 0.5, 3.0, 80.0):
        g = np.exp(kappa * (x @ mean - 1.0))
        assert np.allclose(
            von_mises_fisher_normalized(g, kappa, d),
            von_mises_fisher_density(x, mean, kappa),
            rtol=1e-12,
            atol=0,
        )


# -- a new domain: the five files are enough, the rest refuses in one line ----------------
def test_a_new_domain_gets_the_defaults(s3):
    x = s3.quasi_uniform(2000)
    assert np.array_equal(x, halton_sphere(2000, 4))
    assert abs(x.mean(axis=0)).max() < 0.02
    rng = np.random.default_rng(0)
    p, a = random_atoms(rng, 4, 25)
    q, b = random_atoms(rng, 4, 20)
    assert s3.w2(p, a, p, a) == pytest.approx(0.0, abs=1e-7)
    assert s3.w2(p, a, q, b) == transport.w2_sphere(p, a, q, b)
    # von Mises-Fisher on S^3 integrates to 1 (quasi-Monte Carlo over the Halton points)
    dens = von_mises_fisher_density(x, np.array([0.0, 0.0, 0.6, 0.8]), 2.0)
    assert np.mean(dens) * s3.area == pytest.approx(1.0, abs=2e-2)
    assert von_mises_fisher_density(x[:3], np.eye(4)[0], 0.0) == pytest.approx(1.0 / s3.area)
    # iid particles: rejection sampling from the domain's quasi-uniform envelope
    samples = sample_iid(lambda y: np.full(len(y), 1.0 / s3.area), 4, 50, np.random.default_rng(1))
    assert samples.shape == (50, 4)


def test_a_new_domain_runs_writes_diagnoses_and_resumes(s3, tmp_path):
    """The five files are enough: configuration, run, file, mass and energy, resume."""
    data = {
        "model": {"name": "usa", "beta": 1.0},
        "domain": {"name": "s3"},
        "initial": {"name": "von_mises_fisher", "means": [[0.0, 0.0, 0.6, 0.8]], "kappas": [2.0]},
        "discretization": {"n": 300},
        "time": {"t_end": 0.5, "snapshots": 3},
    }
    cfg = sd.config_from_dict(data)
    full = sd.run(cfg, output=tmp_path / "full.nc", progress=False)
    read = open_run(tmp_path / "full.nc")
    assert read.attrs["domain"] == "s3" and read.attrs["interaction"] == "direct"
    assert np.array_equal(read["rho"].values, full["rho"].values)
    assert np.abs(full["mass"].values - 1.0).max() <= 1e-12
    assert np.all(np.isfinite(full["energy"].values))
    assert np.all(np.diff(full["min_rho"].values) > 0)  # relaxing to the mean
    assert np.all(np.isnan(full["w2_projection"].values))
    assert full["w2_projection"].attrs["comment"].startswith("not defined: ")
    with stop_after_steps(2), pytest.raises(KeyboardInterrupt):
        sd.run(cfg, output=tmp_path / "cut.nc", progress=False)
    resumed = sd.run(cfg, output=tmp_path / "cut.nc", progress=False, resume=True)
    assert resumed.attrs["run_status"] == "complete"
    for name in ("rho", "mass", "min_rho", "energy", "w2_terminal"):
        assert np.array_equal(resumed[name].values, full[name].values, equal_nan=True), name
    # particles: iid from the domain's quasi-uniform envelope, W2 between runs by the default
    particles = sd.config_from_dict(
        {**data, "particles": {"n": 40, "initialization": "iid", "dt": 0.1}}
    )
    runs = [run_particles(particles, seed=k, progress=False) for k in (0, 1)]
    assert runs[0]["position"].shape == (3, 40, 4)
    assert w2_between_runs(runs)[0, 1] > 0.0
    with pytest.raises(ConfigError, match="random_smooth"):
        sd.config_from_dict(
            {
                "domain": {"name": "s3"},
                "initial": {"name": "random_smooth"},
                "model": {"name": "sa", "beta": 1.0},
            }
        )


def test_optional_features_refuse_on_a_new_domain(s3, tmp_path):
    with pytest.raises(
        ConfigError, match=r"^initial.name: .*'random_smooth'.* not implemented on the s3"
    ):
        RandomSmooth.from_params({}, 4, tmp_path)
    with pytest.raises(ConfigError, match=r"^initial.name: .*'file'.* not implemented on the s3"):
        FromFile.from_params({"path": "rho.nc"}, 4, tmp_path)
    model = Model("sa", 1.0, np.eye(4), np.eye(4), np.diag([2.0, 1.0, 1.0, 0.5]))
    with pytest.raises(AssumptionError, match="not implemented on the s3"):
        projection_measure(model, lambda y: np.full(len(y), 1.0 / s3.area))
    w2, reason = projection_distance(model, None, None, lambda y: np.full(len(y), 1.0 / s3.area))
    assert w2 is None and "Pi_# rho_0" in reason and "\n" not in reason
    with pytest.raises(NotProvided, match="is not implemented on the s3") as info:
        domain_entry(FIGURES, s3, "figure", "a figure of a run")
    assert isinstance(info.value, SpheredensError) and "\n" not in str(info.value)


def test_plot_refuses_a_domain_without_figure(s3, tmp_path):
    xr = pytest.importorskip("xarray")
    from spheredens.plot import plot_run

    with pytest.raises(NotProvided, match="a figure of a run is not implemented on the s3"):
        plot_run(xr.Dataset(attrs={"domain": "s3"}), tmp_path / "x.png")
    assert not (tmp_path / "x.png").exists()


# -- no module decides by a literal domain name or dimension ------------------------------
#: a comparison of a domain name, or of a dimension, with a literal
LITERAL = re.compile(
    r"""(==|!=)\s*["'](circle|sphere)["']|["'](circle|sphere)["']\s*(==|!=)"""
    r"""|\bd\s*(==|!=)\s*\d|\.d\s*(==|!=)\s*\d|shape\[-1\]\s*(==|!=)\s*\d"""
    r"""|hasattr\([^)]*["'](theta|lat|lon)["']"""
)

#: module -> why it may compare a domain or dimension to a literal
ALLOWED = {
    "geometry.py": "the domains themselves",
    "auxiliary.py": "rope_general: the circle's one plane rotation against an axis on the sphere "
    "(any other d is refused by the 3-vector check)",
    "interaction/_auxiliary.py": "the usa_av evaluator declares domains = (circle, sphere) and "
    "picks its Fourier or spherical-harmonic basis",
    "interaction/_fourier.py": "the circle-only FFT evaluator (domains = (circle,)) checks that B "
    "is a 2-D rotation multiple",
}


def test_no_module_compares_a_domain_or_a_dimension_to_a_literal():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel in ALLOWED:
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            if LITERAL.search(code) and not code.strip().startswith(('"', "'")):
                found.append(f"{rel}:{number}: {line.strip()}")
    assert not found, "ask the Domain instead (or add to ALLOWED with a reason):\n" + "\n".join(
        found
    )


def test_the_literal_check_catches_the_old_forms():
    for line in (
        "if d == 2:",
        'x if domain == "circle" else y',
        'if ds.attrs.get("domain") == "sphere":',
        'self.circle = hasattr(grid, "theta")',
        "if x.shape[-1] == 2:",
        "if domain.d == 2:",
    ):
        assert LITERAL.search(line), line
    assert not LITERAL.search("if domain is CIRCLE:")
    assert all((PACKAGE / rel).is_file() for rel in ALLOWED)
