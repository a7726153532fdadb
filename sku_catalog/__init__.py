"""GPU SKUs, node shapes and interconnects, and prices: built-in YAML data and a typed loader.

>>> from sku_catalog import load_catalog
>>> catalog = load_catalog()              # built-ins; load_catalog(["my_prices.yaml"]) merges
>>> catalog.get("H100-80GB-SXM").id       # ids and display names, any case
'h100-sxm'
"""

from __future__ import annotations

from sku_catalog._loader import Catalog, CatalogError, UnknownSkuError, load_catalog
from sku_catalog._table import format_sku_table
from sku_catalog._types import GpuSku, LinkKind, NodeShape
from sku_catalog._yaml import YamlInputError, read_yaml_file

__all__ = [
    "Catalog",
    "CatalogError",
    "GpuSku",
    "LinkKind",
    "NodeShape",
    "UnknownSkuError",
    "YamlInputError",
    "format_sku_table",
    "load_catalog",
    "read_yaml_file",
]
