"""Trace columns read without pandas, for the files whose cells are all plain: numbers, or in
a timestamp column ISO 8601 dates and times (``2023-11-16 18:15:46.6805900``).  That covers
the Azure, Vidur and Mooncake traces, and spares a short simulation pandas' import (a
fifth of a second).

Each function returns None at the first header, row or cell it does not read exactly as
pandas does (``read_csv`` with its defaults, then ``to_numeric`` or ``to_datetime(...,
format="ISO8601")`` with ``errors="coerce"``), and the caller then reads the file with
pandas: what a trace parses to never depends on which reader read it.
"""

from __future__ import annotations

import csv
import io
import math
import operator
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np

# cells pandas reads as numbers, with no whitespace, separators or words (nan, inf)
_INTS = re.compile(r"(?:[-+]?[0-9]{1,18}\n)*\Z")  # one per line; int64 without overflow
_NUMBERS = re.compile(r"(?:[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?\n)*\Z")
# date and time (no zone), one per line; hours, minutes and seconds in range (no leap second)
_STAMPS = re.compile(
    r"(?:[0-9]{4}-[0-9]{2}-[0-9]{2}[ T](?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]"
    r"(?:\.[0-9]{1,9})?\n)*\Z"
)


def csv_header(path: Path) -> list[str] | None:
    """The column names of the first non-blank line, or None (pandas renames or strips what
    this does not handle: empty or repeated names, a byte-order mark; unreadable text)."""
    try:
        with path.open(newline="", encoding="utf-8") as f:
            header = next((row for row in csv.reader(f) if row), None)
    except (UnicodeDecodeError, csv.Error):
        return None
    if not header or header[0].startswith("\ufeff") or "" in header:
        return None
    return header if len(set(header)) == len(header) else None


def csv_columns(path: Path, header: list[str], names: Sequence[str]) -> dict[str, list[str]] | None:
    """The cells of the columns `names` (in `header`), blank lines skipped; None when a row
    has another number of fields than the header (pandas pads, refuses or takes an index)."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return None
    width = len(header)
    data = _split_unquoted(text, width) if '"' not in text and "\r" not in text else None
    if data is None:  # quotes, CR line ends or rows of other widths: the csv module
        try:
            rows = [row for row in csv.reader(io.StringIO(text, newline="")) if row]
        except csv.Error:
            return None
        if not rows or not all(len(row) == width for row in rows[1:]):
            return None
        data = [list(column) for column in zip(*rows[1:], strict=True)] or [[]] * width
    return {name: data[header.index(name)] for name in names}


def _split_unquoted(text: str, width: int) -> list[list[str]] | None:
    """The columns of a CSV text without quotes or CRs, each row `width` fields; None when
    a row has another width (blank lines are skipped, as they are by pandas)."""
    lines = text.split("\n")
    if "" in lines:
        lines = [line for line in lines if line]
    if len(set(map(operator.methodcaller("count", ","), lines))) > 1 or not lines:
        return None
    if lines[0].count(",") != width - 1:
        return None
    cells = ",".join(lines[1:]).split(",") if len(lines) > 1 else []
    return [cells[i::width] for i in range(width)]


def csv_numbers(cells: list[str]) -> np.ndarray | None:
    """float64 of number cells, NaN for empty ones; None when any cell is something else."""
    present = [c for c in cells if c] if "" in cells else cells
    text = "\n".join(present) + "\n" if present else ""
    if _INTS.match(text):
        convert = int
    elif _NUMBERS.match(text):
        convert = float
    else:
        return None
    if len(present) == len(cells):
        return np.fromiter(map(convert, cells), np.float64, len(cells))
    return np.array([convert(c) if c else math.nan for c in cells], dtype=np.float64)


def json_numbers(values: list[object]) -> np.ndarray | None:
    """float64 of JSON numbers, NaN for null; None when any value is something else
    (a string, a boolean, an integer beyond int64)."""
    out = np.empty(len(values), dtype=np.float64)
    for i, v in enumerate(values):
        if v is None:
            out[i] = math.nan
        elif type(v) is float or (type(v) is int and -(2**63) <= v < 2**63):
            out[i] = v
        else:
            return None
    return out


def csv_timestamps(cells: list[str]) -> tuple[np.ndarray, np.ndarray] | None:
    """(nanoseconds since 1970 as int64, missing mask) of ISO 8601 date-and-time cells
    without a zone, empty cells missing; None when any cell is something else."""
    missing = np.fromiter(map(operator.not_, cells), bool, len(cells))
    present = [c for c in cells if c] if missing.any() else cells
    if not _STAMPS.match("\n".join(present) + "\n" if present else ""):
        return None
    try:
        stamps = np.array(present, dtype="datetime64[ns]")  # the calendar checked too
    except ValueError:  # a day the month does not have
        return None
    ns = np.zeros(len(cells), dtype=np.int64)
    ns[~missing] = stamps.astype(np.int64)
    return ns, missing
