"""``op_tables`` in a simulate config or a search spec: checked at the edge, fingerprinted."""

from __future__ import annotations

import hashlib
from pathlib import Path

from estimators import load_op_tables, resolve_op_tables

__all__ = ["check_op_tables", "op_tables_digest"]


def check_op_tables(estimator: str, op_tables: Path | None, sku_ids: list[str]) -> None:
    """Raise ValueError (one line) when `op_tables` are given to an estimator that reads
    none, cannot be read, or (under ``profiled``) were measured on another SKU than one of
    `sku_ids`; ``auto`` falls back to the roofline for those with a warning instead."""
    if op_tables is None:
        return
    if estimator == "roofline":
        raise ValueError(
            "op_tables are read by the profiled and auto estimators; add --estimator profiled "
            "(estimator: profiled)"
        )
    tables = load_op_tables(op_tables)  # OpTablesError (a ValueError) names file and field
    measured_on = tables.meta.sku
    if estimator == "profiled" and measured_on:
        others = [s for s in sku_ids if s != measured_on]
        if others:
            raise ValueError(
                f"op_tables {op_tables} were measured on {measured_on!r}, not "
                f"{', '.join(map(repr, others))}; use tables of each GPU, or estimator auto "
                "(the roofline where tables are missing)"
            )


def op_tables_digest(op_tables: Path) -> str:
    """sha256 of the directory's tables (meta and CSVs, by name), so results computed from
    other measurements are never taken for these."""
    digest = hashlib.sha256()
    for path in sorted(resolve_op_tables(op_tables).iterdir()):
        if path.is_file() and path.suffix in (".csv", ".yaml"):
            digest.update(path.name.encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()
