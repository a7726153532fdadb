"""Trace loaders: request streams recorded from real services.

Formats (sniffed from the extension and header when `format="auto"`):

- ``azure``: Azure LLM inference trace 2023 CSV, ``TIMESTAMP, ContextTokens, GeneratedTokens``;
  timestamps are datetimes, turned into seconds from the first request.
- ``vidur``: Vidur trace CSV, ``num_prefill_tokens, num_decode_tokens`` and, when the trace has
  timestamps, ``arrived_at`` (seconds).  Without ``arrived_at`` (the arxiv summarization trace)
  the trace has no timestamps of its own.
- ``mooncake``: Mooncake JSON lines, ``timestamp`` (ms), ``input_length``, ``output_length``,
  and, when present, ``hash_ids``: the prompt's 512-token blocks as hashes of their whole
  prefix (a list of integers per line), kept as ``Workload.prefix_blocks`` for the
  simulator's prefix cache.
- ``csv``: any CSV with a column mapping ``{"prompt": ..., "output": ..., "arrival": ...}``
  ("arrival" optional; numeric in `time_unit`, or datetimes).

Rows with a missing, zero or negative token count are **dropped**, and their number is
reported in ``Workload.metadata["dropped_invalid"]`` (the simulator needs prompt >= 1 and
output >= 1; the shipped Azure, Vidur and Mooncake traces have no such rows).  Rows are sorted
by arrival time (stable) and times start at 0.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from workloads import _plain_columns as plain
from workloads._arrivals import ArrivalProcess, Poisson, rescale_to_rate
from workloads._errors import WorkloadError
from workloads._types import Workload

if TYPE_CHECKING:  # pandas loads with the first trace read
    import pandas as pd

TRACE_FORMATS = ("auto", "azure", "vidur", "mooncake", "csv")
TIME_UNITS = {"s": 1.0, "ms": 1e-3}
COLUMN_KEYS = ("arrival", "prompt", "output")

# format -> (arrival column or None, prompt column, output column)
_KNOWN_COLUMNS: dict[str, tuple[str | None, str, str]] = {
    "azure": ("TIMESTAMP", "ContextTokens", "GeneratedTokens"),
    "vidur": ("arrived_at", "num_prefill_tokens", "num_decode_tokens"),
    "mooncake": ("timestamp", "input_length", "output_length"),
}


@dataclass(slots=True)
class TraceData:
    """A trace as read from its file, before any filtering or re-timing."""

    path: Path
    format: str
    arrival_times: np.ndarray | None  # float64 seconds from the first request; None: no timestamps
    prompt_tokens: np.ndarray  # int64 >= 1
    output_tokens: np.ndarray  # int64 >= 1
    dropped_invalid: int = 0
    prefix_blocks: np.ndarray | None = None  # object array of int tuples (Mooncake hash_ids)

    def __len__(self) -> int:
        return len(self.prompt_tokens)

    def take(self, index: np.ndarray | slice) -> TraceData:
        """The rows selected by a boolean mask, index array or slice (order kept)."""
        return TraceData(
            path=self.path,
            format=self.format,
            arrival_times=None if self.arrival_times is None else self.arrival_times[index],
            prompt_tokens=self.prompt_tokens[index],
            output_tokens=self.output_tokens[index],
            dropped_invalid=self.dropped_invalid,
            prefix_blocks=None if self.prefix_blocks is None else self.prefix_blocks[index],
        )


def is_file(path: str | Path) -> bool:
    """Whether ``path`` is a regular file; False (not an error) for a name the OS refuses."""
    try:
        return Path(path).is_file()
    except (OSError, ValueError):  # a name too long, a NUL byte
        return False


def _csv_header(path: Path) -> list[str]:
    header = plain.csv_header(path)
    if header is not None:
        return header
    import pandas as pd

    try:
        return [str(c) for c in pd.read_csv(path, nrows=0).columns]
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise WorkloadError(f"trace {path}: cannot read a CSV header ({exc})") from None


def _jsonl_keys(path: Path) -> list[str]:
    with path.open("rb") as f:
        for lineno, line in enumerate(f, start=1):
            if line.strip():
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise WorkloadError(
                        f"trace {path}: line {lineno} is not JSON ({exc})"
                    ) from None
                if not isinstance(record, dict):
                    raise WorkloadError(f"trace {path}: line {lineno} is not a JSON object")
                return list(record)
    raise WorkloadError(f"trace {path}: the file is empty")


def _sniff(path: Path, columns: dict[str, str] | None) -> str:
    if path.suffix.lower() in (".jsonl", ".json"):
        return "mooncake"
    if columns is not None:
        return "csv"
    header = _csv_header(path)
    for fmt in ("azure", "vidur"):
        _, prompt, output = _KNOWN_COLUMNS[fmt]
        if prompt in header and output in header:
            return fmt
    raise WorkloadError(
        f"trace {path}: cannot tell its format from its columns {header}; give the format "
        "(azure, vidur, mooncake) or format 'csv' with a column mapping "
        "{'prompt': ..., 'output': ..., 'arrival': ...}"
    )


def _check_columns(path: Path, fmt: str, needed: list[str], found: list[str]) -> None:
    missing = [c for c in needed if c not in found]
    if missing:
        raise WorkloadError(
            f"trace {path} ({fmt} format): missing column(s) {missing}; found columns {found}"
        )


def _resolve_columns(
    path: Path, fmt: str, columns: dict[str, str] | None
) -> tuple[str | None, str, str]:
    if fmt != "csv":
        return _KNOWN_COLUMNS[fmt]
    if columns is None:
        raise WorkloadError(
            f"trace {path}: format 'csv' needs a column mapping "
            "{'prompt': ..., 'output': ..., 'arrival': ...} ('arrival' optional)"
        )
    bad = sorted(set(columns) - set(COLUMN_KEYS))
    if bad or "prompt" not in columns or "output" not in columns:
        raise WorkloadError(
            f"trace {path}: column mapping {columns} must have keys 'prompt' and 'output' and "
            f"may have 'arrival'; allowed keys: {list(COLUMN_KEYS)}"
        )
    return columns.get("arrival"), columns["prompt"], columns["output"]


def _to_seconds(raw: pd.Series, fmt: str, time_unit: str) -> np.ndarray:
    """Arrival column -> float64 seconds (NaN where unreadable); datetimes count from the
    earliest one (in integer nanoseconds first, so no precision is lost)."""
    import pandas as pd

    if fmt == "azure" or not pd.api.types.is_numeric_dtype(raw):
        stamps = pd.to_datetime(raw, format="ISO8601", errors="coerce")
        missing = stamps.isna().to_numpy()
        if missing.all():
            return np.full(len(raw), np.nan)
        ns = stamps.to_numpy(dtype="datetime64[ns]").astype(np.int64)
        seconds = (ns - ns[~missing].min()).astype(np.float64) * 1e-9
        seconds[missing] = np.nan
        return seconds
    scale = 1e-3 if fmt == "mooncake" else TIME_UNITS[time_unit]
    return pd.to_numeric(raw, errors="coerce").to_numpy(dtype=np.float64) * scale


def _plain_seconds(
    cells: list, fmt: str, time_unit: str, numbers: Callable[[list], np.ndarray | None]
) -> np.ndarray | None:
    """`_to_seconds` of plain cells (see `workloads._plain_columns`), or None."""
    if fmt != "azure":
        values = numbers(cells)
        if values is not None:
            return values * (1e-3 if fmt == "mooncake" else TIME_UNITS[time_unit])
        if fmt == "mooncake":
            return None
    stamps = plain.csv_timestamps(cells)
    if stamps is None:
        return None
    ns, missing = stamps
    if missing.all():
        return np.full(len(cells), np.nan)
    seconds = (ns - ns[~missing].min()).astype(np.float64) * 1e-9
    seconds[missing] = np.nan
    return seconds


MOONCAKE_BLOCK_TOKENS = 512  # tokens per hash_ids block in the Mooncake traces
HASH_IDS = "hash_ids"


def _read_mooncake(path: Path, names: list[str]) -> tuple[list[list], np.ndarray | None]:
    """The rows of the columns `names`, and the prefix blocks (``hash_ids``) when the file
    has them."""
    keys = _jsonl_keys(path)
    _check_columns(path, "mooncake", names, keys)
    with_hashes = HASH_IDS in keys
    rows = []
    hashes: list[tuple[int, ...]] = []
    with path.open("rb") as f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                rows.append([record.get(name) for name in names])
            except (json.JSONDecodeError, AttributeError):
                raise WorkloadError(f"trace {path}: line {lineno} is not a JSON object") from None
            if with_hashes:
                hashes.append(_hash_ids(path, lineno, record.get(HASH_IDS)))
    blocks = None
    if with_hashes:
        blocks = np.empty(len(hashes), dtype=object)
        blocks[:] = hashes
    return rows, blocks


def _hash_ids(path: Path, lineno: int, value: object) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(
        isinstance(h, int) and not isinstance(h, bool) for h in value
    ):
        raise WorkloadError(
            f"trace {path}: line {lineno}: field {HASH_IDS!r} must be a list of integers "
            f"(got {str(value)[:60]!r})"
        )
    hashes = tuple(value)
    if len(set(hashes)) != len(hashes):  # each hash stands for the prefix up to its block
        repeated = next(h for i, h in enumerate(hashes) if h in hashes[:i])
        raise WorkloadError(
            f"trace {path}: line {lineno}: field {HASH_IDS!r} repeats hash {repeated}; a "
            "prompt's block hashes each cover its prefix up to that block, so they differ"
        )
    return hashes


def read_trace(
    path: str | Path,
    format: str = "auto",
    *,
    columns: dict[str, str] | None = None,
    time_unit: str = "s",
) -> TraceData:
    """Read a trace file into arrays, dropping rows with missing or non-positive token counts."""
    path = Path(path)
    if format not in TRACE_FORMATS:
        raise WorkloadError(f"trace format {format!r} is not one of {list(TRACE_FORMATS)}")
    if time_unit not in TIME_UNITS:
        raise WorkloadError(f"time_unit {time_unit!r} is not one of {list(TIME_UNITS)}")
    if not is_file(path):
        raise WorkloadError(f"no trace file at {str(path)!r}")
    try:
        return _read_trace(path, format, columns, time_unit)
    except (UnicodeDecodeError, RecursionError) as exc:
        what = "is not UTF-8 text" if isinstance(exc, UnicodeDecodeError) else "nests too deeply"
        raise WorkloadError(f"trace {path} {what}") from None
    except OSError as exc:
        raise WorkloadError(f"cannot read trace {path}: {exc.strerror or exc}") from None


def _read_trace(
    path: Path, format: str, columns: dict[str, str] | None, time_unit: str
) -> TraceData:
    fmt = _sniff(path, columns) if format == "auto" else format
    arrival_col, prompt_col, output_col = _resolve_columns(path, fmt, columns)

    prefix_blocks = None
    if fmt == "mooncake":
        names = [c for c in (arrival_col, prompt_col, output_col) if c is not None]
        rows, prefix_blocks = _read_mooncake(path, names)
        cells = {name: [row[k] for row in rows] for k, name in enumerate(names)}
        numbers = plain.json_numbers
    else:
        header = _csv_header(path)
        if fmt == "vidur" and arrival_col not in header:
            arrival_col = None  # e.g. the arxiv summarization trace: lengths only
        names = [c for c in (arrival_col, prompt_col, output_col) if c is not None]
        _check_columns(path, fmt, names, header)
        cells = plain.csv_columns(path, header, names)
        numbers = plain.csv_numbers

    # without pandas where every cell is plain (see workloads/_plain_columns.py)
    parsed = None
    if cells is not None:
        prompt = numbers(cells[prompt_col])
        output = numbers(cells[output_col])
        times = (
            None
            if arrival_col is None
            else _plain_seconds(cells[arrival_col], fmt, time_unit, numbers)
        )
        if prompt is not None and output is not None and (times is not None or not arrival_col):
            parsed = prompt, output, times
    if parsed is None:
        frame = _pandas_frame(path, names, rows if fmt == "mooncake" else None)
        parsed = _pandas_columns(path, frame, fmt, time_unit, arrival_col, prompt_col, output_col)
    prompt, output, times = parsed

    valid = (prompt >= 1) & (output >= 1)  # NaN compares False
    if times is not None:
        valid &= np.isfinite(times)
    if not valid.any():
        raise WorkloadError(f"trace {path}: no request with prompt >= 1 and output >= 1 tokens")
    prompt, output = prompt[valid].astype(np.int64), output[valid].astype(np.int64)
    if prefix_blocks is not None:
        prefix_blocks = prefix_blocks[valid]
    if times is not None:
        times = times[valid]
        order = np.argsort(times, kind="stable")
        times, prompt, output = times[order], prompt[order], output[order]
        if prefix_blocks is not None:
            prefix_blocks = prefix_blocks[order]
        times = times - times[0]
    return TraceData(
        path, fmt, times, prompt, output, int(len(valid) - valid.sum()), prefix_blocks
    )


def _pandas_frame(path: Path, names: list[str], rows: list[list] | None) -> pd.DataFrame:
    """The columns `names` of a CSV file, or of Mooncake `rows`, as pandas reads them."""
    import pandas as pd

    if rows is not None:
        return pd.DataFrame(rows, columns=names)
    try:
        return pd.read_csv(path, usecols=names)
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise WorkloadError(f"trace {path}: cannot read it as CSV ({exc})") from None


def _pandas_columns(
    path: Path,
    frame: pd.DataFrame,
    fmt: str,
    time_unit: str,
    arrival_col: str | None,
    prompt_col: str,
    output_col: str,
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """(prompt, output, arrival seconds or None) of a pandas frame, float64 with NaN where
    a cell is unreadable."""
    import pandas as pd

    prompt = pd.to_numeric(frame[prompt_col], errors="coerce").to_numpy(dtype=np.float64)
    output = pd.to_numeric(frame[output_col], errors="coerce").to_numpy(dtype=np.float64)
    try:
        times = None if arrival_col is None else _to_seconds(frame[arrival_col], fmt, time_unit)
    except ValueError as exc:  # e.g. times in several zones
        raise WorkloadError(
            f"trace {path}: cannot read the arrival column {arrival_col!r} as times ({exc})"
        ) from None
    return prompt, output, times


def trace_workload(
    trace: TraceData,
    *,
    arrivals: ArrivalProcess | None,
    rng: np.random.Generator,
    max_total_tokens: int | None = None,
    num_requests: int | None = None,
    target_qps: float | None = None,
    metadata: dict[str, object] | None = None,
) -> Workload:
    """Filter, truncate and time a trace.

    `arrivals` None replays the trace's own timestamps (rescaled to `target_qps` when given);
    otherwise the arrival times are drawn from `arrivals` with `rng`.
    """
    total = len(trace)
    dropped_long = 0
    if max_total_tokens is not None:
        keep = trace.prompt_tokens + trace.output_tokens <= max_total_tokens
        dropped_long = int(total - keep.sum())
        trace = trace.take(keep)
        if len(trace) == 0:
            raise WorkloadError(
                f"trace {trace.path}: no request has prompt + output <= max_total_tokens "
                f"({max_total_tokens})"
            )
    if num_requests is not None:
        trace = trace.take(slice(0, num_requests))
    n = len(trace)
    if arrivals is None:
        if trace.arrival_times is None:
            raise WorkloadError(
                f"trace {trace.path} has no timestamps; give a qps to draw Poisson arrivals"
            )
        times = trace.arrival_times - trace.arrival_times[0]
        if target_qps is not None:
            times = rescale_to_rate(times, target_qps)
    else:
        times = arrivals.times(n, rng)
    meta: dict[str, object] = {
        "source": str(trace.path),
        "format": trace.format,
        "trace_requests": total,
        "dropped_invalid": trace.dropped_invalid,
        "dropped_over_max_total_tokens": dropped_long,
    }
    if num_requests is not None and num_requests > n:
        meta["num_requests_requested"] = num_requests  # the trace had fewer
    meta.update(metadata or {})
    return Workload(
        name=trace.path.stem,
        arrival_times=times,
        prompt_tokens=trace.prompt_tokens,
        output_tokens=trace.output_tokens,
        has_own_timestamps=arrivals is None,
        metadata=meta,
        prefix_blocks=trace.prefix_blocks,
        prefix_block_tokens=MOONCAKE_BLOCK_TOKENS if trace.prefix_blocks is not None else 0,
    )


def load_trace(
    path: str | Path,
    format: str = "auto",
    *,
    columns: dict[str, str] | None = None,
    time_unit: str = "s",
    max_total_tokens: int | None = None,
    num_requests: int | None = None,
    target_qps: float | None = None,
    arrival: str = "trace",
    seed: int = 0,
) -> Workload:
    """Load a trace file as a `Workload`.

    - `max_total_tokens`: drop requests with prompt + output > N (before `num_requests`).
    - `num_requests`: keep the first N requests (all of them if the trace has fewer).
    - `arrival="trace"`: replay the trace's own timestamps, from 0, rescaled so that the mean
      rate (1 / mean inter-arrival time) is `target_qps` when it is given.  A trace without
      timestamps gets Poisson arrivals at `target_qps` instead.
    - `arrival="poisson"`: Poisson arrivals at `target_qps`, drawn with `seed`.
    """
    if arrival not in ("trace", "poisson"):
        raise WorkloadError(f"arrival {arrival!r} is not one of ['trace', 'poisson']")
    if max_total_tokens is not None and max_total_tokens < 2:
        raise WorkloadError(f"max_total_tokens must be >= 2, got {max_total_tokens}")
    if num_requests is not None and num_requests < 1:
        raise WorkloadError(f"num_requests must be >= 1, got {num_requests}")
    trace = read_trace(path, format, columns=columns, time_unit=time_unit)
    poisson = arrival == "poisson" or (trace.arrival_times is None and target_qps is not None)
    if poisson and target_qps is None:
        raise WorkloadError("arrival 'poisson' needs target_qps (the Poisson rate)")
    return trace_workload(
        trace,
        arrivals=Poisson(target_qps) if poisson else None,
        rng=np.random.default_rng(seed),
        max_total_tokens=max_total_tokens,
        num_requests=num_requests,
        target_qps=None if poisson else target_qps,
        metadata={"arrival": "poisson" if poisson else "trace", "qps": target_qps, "seed": seed},
    )


SECONDS_PER_DAY = 86_400.0


def hourly_shares(arrival_times: np.ndarray, start_hour: int = 0) -> list[float]:
    """Each hour of the day's share of a trace's arrivals (hour 0-23), from timestamps in
    seconds since the trace's first request, which arrived at `start_hour` o'clock.

    Averaged over the days the trace covers; it must cover at least one whole day.
    """
    times = np.asarray(arrival_times, dtype=np.float64)
    if times.size == 0:
        raise WorkloadError("a daily profile needs a trace with arrival times; this one has none")
    span = float(times.max() - times.min())
    if span < SECONDS_PER_DAY * (23 / 24):
        raise WorkloadError(
            f"a daily profile needs a trace covering a whole day; this one spans "
            f"{span / 3600:.1f} h"
        )
    hours = ((times - times.min()) // 3600 + start_hour).astype(np.int64) % 24
    counts = np.bincount(hours, minlength=24).astype(np.float64)
    return [float(c) for c in counts / counts.sum()]
