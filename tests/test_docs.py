"""Docstring examples run as tests (POT's discipline)."""

from __future__ import annotations

import doctest

import pytest

import spheredens.config
import spheredens.kernel

MODULES = [spheredens.config, spheredens.kernel]


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__)
def test_docstring_examples(module):
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
