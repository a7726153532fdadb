"""Fixtures shared by the estimator tests: catalog SKUs and built-in models."""

from __future__ import annotations

import pytest

from estimators import load_model
from sku_catalog import load_catalog


@pytest.fixture(scope="module")
def h100():
    return load_catalog().get("h100-sxm")


@pytest.fixture(scope="module")
def h200():
    return load_catalog().get("h200")


@pytest.fixture(scope="module")
def v3():
    return load_model("deepseek-ai/DeepSeek-V3")


@pytest.fixture(scope="module")
def llama8b():
    return load_model("meta-llama/Llama-3.1-8B")
