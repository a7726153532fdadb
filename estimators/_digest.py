"""A digest of the data the cost models read, so that stored results know what produced them.

A search reuses a stored result only when everything that decided it is unchanged; the fitted
roofline constants and the engine profiles (``estimators/data/*.yaml``) are part of that, so a
new release that refits them re-simulates instead of serving answers of the old numbers.
"""

from __future__ import annotations

import functools
import hashlib
from importlib import resources
from importlib.abc import Traversable

__all__ = ["cost_model_digest", "data_digest"]


@functools.cache
def cost_model_digest() -> str:
    """The digest of the cost models' own data folder (``estimators/data``)."""
    return data_digest(resources.files("estimators").joinpath("data"))


def data_digest(folder: Traversable) -> str:
    """sha256 (16 hex digits) of every YAML file in `folder`, by name and content."""
    digest = hashlib.sha256()
    for entry in sorted(folder.iterdir(), key=lambda p: p.name):
        if entry.is_file() and entry.name.endswith(".yaml"):
            digest.update(entry.name.encode())
            digest.update(entry.read_bytes())
    return digest.hexdigest()[:16]
