"""Every registered (domain, scheme, evaluator) combination against the scheme contract.

The combinations come from the registries: every scheme of every domain
(``Domain.schemes``), with every evaluator class that serves its layout
(``interaction.candidates``). A newly registered scheme or evaluator is covered without
editing this file; an evaluator that none of the canonical models below can select makes
:func:`test_every_evaluator_is_exercised` fail, with the name of the evaluator.

Checked for each combination: mass to round-off, positivity where the scheme promises it
(``Scheme.positive``), bit-exact resume after an interruption; and for each scheme, the exact
zero-temperature solution at the scheme's documented order (``Scheme.zero_temperature_order``).
The zero-temperature reference is computed in :mod:`spheredens.references`, independently of the
schemes (numpy and scipy only), and run by :func:`spheredens.verify.zero_temperature_errors` (the
same as ``spheredens verify``): the weak form int phi rho_T = int phi(Phi_T(y)) rho_0(y) dy of the
push-forward by the flow Phi of X(x) = P_x V B^T x / |B^T x|, with rho_0 a von Mises-Fisher
density and a fine quadrature in y.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import assert_resumes_bit_for_bit

import spheredens as sd
from spheredens.geometry import DOMAINS, get_domain
from spheredens.interaction import candidates, select_evaluator
from spheredens.kernel import AttentionKernel
from spheredens.references import QUADRATURE_DIMENSIONS
from spheredens.verify import zero_temperature_errors, zero_temperature_resolutions


class ByDimension(dict):
    """Fixed matrices and vectors for d = 2, 3; seeded well-conditioned ones for any other d
    (a newly registered domain is covered without editing this file)."""

    def __init__(self, table, make):
        super().__init__(table)
        self.make = make

    def __missing__(self, d):
        self[d] = self.make(d, np.random.default_rng(d))
        return self[d]


V = ByDimension(
    {2: [[1.0, 0.2], [0.1, 0.6]], 3: [[1.0, 0.2, 0.0], [0.1, 0.7, -0.3], [0.0, 0.4, 0.5]]},
    lambda d, rng: (np.eye(d) + 0.2 * rng.standard_normal((d, d))).tolist(),
)
GENERAL = ByDimension(
    {
        2: [[1.75, 0.866025], [0.433013, 2.5]],
        3: [[1.2, 0.3, 0.1], [-0.2, 0.8, 0.4], [0.1, 0.2, 1.5]],
    },
    lambda d, rng: (np.diag(np.linspace(1.0, 1.6, d)) + 0.2 * rng.standard_normal((d, d))).tolist(),
)
MEAN = ByDimension(
    {2: np.array([0.6, 0.8]), 3: np.array([0.0, 0.6, 0.8])},
    lambda d, rng: np.ones(d) / math.sqrt(d),
)
KAPPA = 2.0
T = 1.0


def rotation(d: int, angle: float) -> np.ndarray:
    """A rotation of R^d (about (1, 1, 1) / sqrt(3) in R^3; in the (e1, e2) plane otherwise)."""
    c, s = math.cos(angle), math.sin(angle)
    if d == 3:
        k = np.ones(3) / math.sqrt(3.0)
        K = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
        return np.eye(3) + s * K + (1 - c) * K @ K
    R = np.eye(d)
    R[:2, :2] = [[c, -s], [s, c]]
    return R


#: the dimension d of S^{d-1} of a meridian domain (zonal) in these tests
MERIDIAN_D = 5


def canonical_models(d: int, meridian: bool = False) -> list[tuple[dict, dict | None]]:
    """(model table, auxiliary table) pairs: between them every evaluator applies to one (a
    meridian domain: models symmetric about the axis, by their scalars)."""
    if meridian:
        return [
            ({"name": "sa", "beta": 2.0, "a": 1.2, "b": 0.8, "l1": 1.0, "l2": 0.6}, None),
            ({"name": "sa_zero_temperature", "a": 1.2, "b": 0.8, "l1": 1.0, "l2": 0.6}, None),
            ({"name": "usa", "beta": 1.5, "a": 1.0, "b": -0.5, "l1": 0.7, "l2": 1.0}, None),
        ]
    return [
        ({"name": "sa", "beta": 2.0, "K": (1.2 * rotation(d, 0.7)).tolist(), "V": V[d]}, None),
        ({"name": "sa", "beta": 2.0, "K": GENERAL[d], "V": V[d]}, None),
        ({"name": "sa_zero_temperature", "K": GENERAL[d], "V": V[d]}, None),
        (
            {"name": "usa_av", "beta": 1.0},
            {"kernel": "rope", "slices": 3, "omega": 2 * math.pi, "slice_perturbation": 0.5},
        ),
    ]


def _combinations():
    for name in DOMAINS:
        domain = get_domain(name)
        for scheme in domain.schemes:
            cls = domain.scheme_class(scheme)
            for evaluator in candidates(name, cls.evaluator_inputs):
                yield pytest.param(name, cls, evaluator, id=f"{name}-{scheme}-{evaluator.name}")


def _schemes():
    for name in DOMAINS:
        for scheme in get_domain(name).schemes:
            yield pytest.param(name, get_domain(name).scheme_class(scheme), id=f"{name}-{scheme}")


def config(
    domain: str,
    cls,
    model: dict,
    auxiliary: dict | None,
    choice: str,
    *,
    resolution: int | None = None,
    initial: dict | None = None,
    time: dict | None = None,
):
    """A validated configuration of ``cls`` for ``model``, at the coarsest resolution that
    resolves the kernel (at least twice the scheme's minimum) unless ``resolution`` is given."""
    d = get_domain(domain).d
    meridian = get_domain(domain).meridian
    if resolution is None:
        resolution = 2 * cls.resolution.minimum
        if model["name"] != "sa_zero_temperature":
            if meridian:
                K = np.diag([model.get("a", 1.0), model.get("b", 1.0)])
            else:
                K = np.array(model.get("K", np.eye(d)))
            resolution = max(resolution, cls.resolution.needed(AttentionKernel(model["beta"], K)))
    # a meridian domain (zonal) on S^{MERIDIAN_D - 1}, densities symmetric about e_1
    mean = np.eye(MERIDIAN_D)[0] if meridian else MEAN[d]
    data = {
        "model": model,
        "domain": {"name": domain, "d": MERIDIAN_D} if meridian else {"name": domain},
        "initial": initial
        or {
            "name": "von_mises_fisher",
            "means": [mean.tolist(), (-mean).tolist()],
            "kappas": [4.0, 2.0],
            "weights": [0.7, 0.3],
        },
        "discretization": {
            "scheme": cls.name,
            cls.resolution.key: resolution,
            "interaction": choice,
        },
        "time": time or {"t_end": 1.0, "snapshots": 3},
    }
    if auxiliary is not None:
        data["auxiliary"] = auxiliary
    return sd.config_from_dict(data)


def model_for(domain: str, cls, evaluator):
    """The first canonical model for which the configuration selects ``evaluator``."""
    choice = evaluator.name if evaluator.selectable else "auto"
    for model, auxiliary in canonical_models(get_domain(domain).d, get_domain(domain).meridian):
        try:
            cfg = config(domain, cls, model, auxiliary, choice)
        except sd.ConfigError:
            continue
        chosen = select_evaluator(cfg.model.build(), domain, cls.evaluator_inputs, choice)
        if chosen is evaluator:
            return cfg
    return None


@pytest.mark.parametrize("domain, cls, evaluator", list(_combinations()))
def test_every_evaluator_is_exercised(domain, cls, evaluator):
    assert model_for(domain, cls, evaluator) is not None, (
        f"no canonical model selects {evaluator.__name__} for {domain} {cls.name}: add one to "
        "canonical_models"
    )


@pytest.mark.parametrize("domain, cls, evaluator", list(_combinations()))
def test_mass_positivity_and_bit_exact_resume(domain, cls, evaluator, tmp_path):
    cfg = model_for(domain, cls, evaluator)
    full = sd.run(cfg, output=tmp_path / "full.nc", progress=False)
    assert full.attrs["interaction"] == evaluator.name
    # mass: the fluxes telescope (fv) or the l = 0 / k = 0 mode has zero tendency (spectral);
    # a few hundred steps of round-off on O(1) numbers stay far below 1e-12
    assert np.abs(full["mass"].values - 1.0).max() <= 1e-12
    if cls.positive:
        assert float(full["min_rho"].min()) >= 0.0
    assert_resumes_bit_for_bit(cfg, tmp_path, full, ("rho", "mass", "min_rho", "w2_projection"))


# -- the exact zero-temperature solution (spheredens.references, shared with `spheredens verify`) --
@pytest.mark.parametrize("domain, cls", list(_schemes()))
def test_exact_zero_temperature_solution_at_documented_order(domain, cls):
    d = get_domain(domain).d
    if get_domain(domain).meridian:
        pytest.skip(
            "a meridian domain: tests/test_zonal.py checks the zonal schemes against the exact "
            "zero-temperature solution by characteristics in the polar angle"
        )
    if d not in QUADRATURE_DIMENSIONS:
        pytest.skip(
            f"no reference quadrature of S^{d - 1} in spheredens.references: add one to "
            "check the zero-temperature order on that domain"
        )
    spectral = math.isinf(cls.zero_temperature_order)
    # resolutions default / 4, / 2, / 1: n = 64, 128, 256; lmax + 1 = 8, 16, 32; nlat = 8, 16, 32
    resolutions = zero_temperature_resolutions(cls)
    errors = zero_temperature_errors(
        domain, cls.name, resolutions, K=GENERAL[d], V=V[d], mean=MEAN[d].tolist(), kappa=KAPPA, T=T
    )
    orders = np.log2(np.array(errors[:-1]) / np.array(errors[1:]))
    if spectral:
        # faster than any fixed order: the gain per doubling grows and passes 2^6, or the error
        # reaches the time-integration floor (RK4 at cfl 0.05: ~1e-9)
        assert errors[-1] <= 1e-9 or (orders[1] > orders[0] and orders[1] > 6), (errors, orders)
    else:
        # the documented order, within 0.2 (limiters clip at extrema)
        assert orders.min() >= cls.zero_temperature_order - 0.2, (errors, orders)
