"""Every configuration under runs/ is accepted as it stands: a study's command cannot fail on a
stale key after a change of the validator."""

from __future__ import annotations

import tomllib
import warnings
from pathlib import Path

import pytest

import spheredens as sd
from spheredens.sweep import load_sweep

RUNS = Path(__file__).resolve().parents[1] / "runs"
CONFIGS = sorted(RUNS.rglob("*.toml"))


def test_the_studies_have_configurations():
    assert len(CONFIGS) >= 20


@pytest.mark.parametrize("path", CONFIGS, ids=[str(p.relative_to(RUNS)) for p in CONFIGS])
def test_every_runs_configuration_is_accepted(path):
    data = tomllib.loads(path.read_text())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # allow_underresolved warns on purpose
        if "vary" in data:
            sweep = load_sweep(path)
            assert len(sweep.cases) >= 1
        else:
            cfg = sd.load_config(path)
            assert cfg.time.t_end > 0
