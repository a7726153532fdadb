"""Rendering the catalog as a table (``llmcap catalog skus``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from rich import box
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


# (header, cell, right-aligned, shown only with --wide): the narrow set fits 80 columns
_SKU_COLUMNS: tuple[tuple[str, Callable[[GpuSku], str], bool, bool], ...] = (
    ("id", lambda s: s.id, False, False),
    ("name", lambda s: s.name, False, True),
    ("mem GB", lambda s: _num(s.memory_gb), True, False),
    ("TB/s", lambda s: _num(s.memory_bandwidth_tbps), True, False),
    ("BF16 TF", lambda s: _num(s.fp16_tflops), True, False),
    ("FP8 TF", lambda s: "-" if s.fp8_tflops is None else _num(s.fp8_tflops), True, False),
    ("node", lambda s: _nodes(s), True, False),
    ("intra-node link", lambda s: _link(s.default_node), False, True),
    ("inter-node GB/s", lambda s: _num(s.default_node.inter_node_bandwidth_gbps), True, True),
    ("$/GPU-h", lambda s: f"{s.price_per_gpu_hour:.2f}", True, False),
    ("price date", lambda s: s.price_date, False, True),
    ("price source", lambda s: s.price_source, False, True),
)


def format_sku_table(catalog: Catalog | Iterable[GpuSku], wide: bool = False) -> Table:
    """A rich table of the SKUs (a `Catalog` or any iterable of `GpuSku`), in catalog order.

    The ids never wrap or shorten (they are what a user types); `wide` adds the name, links
    and the price's date and source.  Link and inter-node columns describe the default (first)
    node shape.
    """
    skus = catalog.skus() if isinstance(catalog, Catalog) else list(catalog)
    columns = [c for c in _SKU_COLUMNS if wide or not c[3]]
    rows = [[cell(sku) for _, cell, _, _ in columns] for sku in skus]
    table = Table(title="GPU SKUs", title_justify="left", box=box.SIMPLE_HEAD)
    for i, (header, _, right, _) in enumerate(columns):
        whole = right or header == "id"  # numbers and ids are never shortened; text may wrap
        table.add_column(
            header,
            justify="right" if right else "left",
            no_wrap=whole,
            min_width=max([len(header), *(len(r[i]) for r in rows)]) if whole else None,
            style="bold" if header == "id" else None,
            overflow="fold",
        )
    for row in rows:
        table.add_row(*row)
    return table


def _nodes(sku: GpuSku) -> str:
    others = sku.nodes[1:]
    return _node(sku.default_node) + (
        f" (also {', '.join(_node(s) for s in others)})" if others else ""
    )
