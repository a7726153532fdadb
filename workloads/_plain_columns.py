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
import datetime as dt
import math
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np

# cells pandas reads as numbers, with no whitespace, separators or words (nan, inf)
_INTS = re.compile(r"(?:[-+]?[0-9]{1,18}\n)*\Z")  # one per line; int64 without overflow
_NUMBERS = re.compile(r"(?:[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?\n)*\Z")
_STAMP = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})[ T]([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]{1,9}))?\Z"
)
_EPOCH = dt.date(1970, 1, 1).toordinal()


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
    where = [header.index(name) for name in names]
    width = len(header)
    cells: list[list[str]] = [[] for _ in names]
    try:
        with path.open(newline="", encoding="utf-8") as f:
            rows = csv.reader(f)
            next(row for row in rows if row)  # the header
            for row in rows:
                if len(row) != width:
                    if not row:
                        continue
                    return None
                for column, i in zip(cells, where, strict=True):
                    column.append(row[i])
    except (UnicodeDecodeError, csv.Error, StopIteration):
        return None
    return dict(zip(names, cells, strict=True))


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
    ns = np.zeros(len(cells), dtype=np.int64)
    missing = np.zeros(len(cells), dtype=bool)
    match = _STAMP.match
    for i, cell in enumerate(cells):
        if not cell:
            missing[i] = True
            continue
        m = match(cell)
        if m is None:
            return None
        year, month, day, hour, minute, second, fraction = m.groups()
        if int(hour) > 23 or int(minute) > 59 or int(second) > 59:
            return None
        try:
            days = dt.date(int(year), int(month), int(day)).toordinal() - _EPOCH
        except ValueError:
            return None
        seconds = days * 86_400 + int(hour) * 3600 + int(minute) * 60 + int(second)
        ns[i] = seconds * 1_000_000_000 + (int(fraction.ljust(9, "0")) if fraction else 0)
    return ns, missing
