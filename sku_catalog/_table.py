"""Rendering the catalog as a table (``llmcap catalog skus``)."""

from __future__ import annotations

from collections.abc import Iterable

from rich.table import Table

from sku_catalog._loader import Catalog
from sku_catalog._types import GpuSku, NodeShape

__all__ = ["format_sku_table"]


def _num(value: float) -> str:
    return f"{value:g}"


def _node(shape: NodeShape) -> str:
    return f"{shape.gpus_per_node}x"


def _link(shape: NodeShape) -> str:
    return f"{shape.intra_node_link.value} {_num(shape.intra_node_bandwidth_gbps)} GB/s"


def format_sku_table(catalog: Catalog | Iterable[GpuSku]) -> Table:
    """A rich table of the SKUs (a `Catalog` or any iterable of `GpuSku`), in catalog order.

    Link and inter-node columns describe the default (first) node shape.
    """
    skus = catalog.skus() if isinstance(catalog, Catalog) else list(catalog)
    table = Table(title="GPU SKUs", title_justify="left")
    table.add_column("id", style="bold", no_wrap=True)
    table.add_column("name")
    table.add_column("memory GB", justify="right")
    table.add_column("BW TB/s", justify="right")
    table.add_column("BF16 TFLOP/s", justify="right")
    table.add_column("FP8 TFLOP/s", justify="right")
    table.add_column("node (GPUs)", justify="right")
    table.add_column("intra-node link")
    table.add_column("inter-node GB/s", justify="right")
    table.add_column("$/GPU-h", justify="right")
    table.add_column("price date")
    table.add_column("price source", overflow="fold")
    for sku in skus:
        default = sku.default_node
        others = sku.nodes[1:]
        node = _node(default) + (f" (also {', '.join(_node(s) for s in others)})" if others else "")
        table.add_row(
            sku.id,
            sku.name,
            _num(sku.memory_gb),
            _num(sku.memory_bandwidth_tbps),
            _num(sku.fp16_tflops),
            "-" if sku.fp8_tflops is None else _num(sku.fp8_tflops),
            node,
            _link(default),
            _num(default.inter_node_bandwidth_gbps),
            f"{sku.price_per_gpu_hour:.2f}",
            sku.price_date,
            sku.price_source,
        )
    return table
