"""Fixtures shared by the estimator tests: a catalog SKU and the built-in DeepSeek-V3."""

from __future__ import annotations

import pytest

from estimators import load_model
from sku_catalog import load_catalog


@pytest.fixture(scope="module")
def h200():
    return load_catalog().get("h200")


@pytest.fixture(scope="module")
def v3():
    return load_model("deepseek-ai/DeepSeek-V3")
