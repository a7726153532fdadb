"""A user's own `vllm bench serve` results (`--save-result` JSON) as validation data.

vLLM's serving benchmark (`vllm bench serve`, formerly benchmarks/benchmark_serving.py)
writes one JSON object per run: the traffic it sent (`request_rate`, a number or "inf";
`burstiness`, the shape of its gamma inter-arrival times, 1.0 = Poisson;
`max_concurrency`, null when unlimited), what completed (`completed`, `duration` in
seconds, `total_input_tokens`, `total_output_tokens`, `request_throughput`,
`output_throughput`) and latency statistics in milliseconds: `mean_`, `median_`, `std_`
and `p<N>_` of `ttft`, `tpot`, `itl` (and `e2el` when selected).  With `--save-detailed`
it adds per-request `input_lens`, `output_lens`, `ttfts` and `itls`.

The JSON does not say which GPU, parallelism or engine version served it: those come from
the command line (`--gpu`, `--tp`, `--pp`, `--engine`, `--precision`; `--model` defaults to
the JSON's `model_id`).  The run is simulated as the client ran it:

- `request_rate` inf and `max_concurrency` set: a closed loop of that many requests in
  flight; inf and no cap: every request sent at t = 0;
- a finite rate: arrivals drawn as the client draws them (Poisson for burstiness 1, else
  gamma with shape = burstiness), seeded; a `max_concurrency` then caps the batch (the
  client holds the others back; here they wait in the server's queue instead);
- per-request prompt and output lengths when the file has them, else the means.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from estimators import Precision, load_engine, load_model
from search._validate._aic_silicon import DatasetError
from search._validate._run import engine_deployment
from simulator import Deployment, prepare
from sku_catalog import load_catalog
from workloads import Gamma, Poisson, Workload

METRICS = ("ttft", "tpot", "itl", "e2el")
STATISTICS = ("mean", "median", "p99")
# llmcap's summary name of each metric and statistic
_SUMMARY_METRIC = {"ttft": "ttft", "tpot": "tpot", "itl": "tbt", "e2el": "e2e"}
_SUMMARY_STAT = {"mean": "mean", "median": "p50", "p99": "p99"}
SEED = 0


@dataclass(frozen=True, slots=True)
class BenchRun:
    """What one result file says about the traffic sent and what was measured."""

    path: Path
    model_id: str
    num_requests: int
    request_rate: float  # requests/s; inf = all at once
    burstiness: float
    max_concurrency: int | None
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    measured: dict[str, float] = field(default_factory=dict)  # e.g. mean_ttft_ms, throughputs


@dataclass(frozen=True, slots=True)
class Serving:
    """What served the run (from the command line)."""

    model: str
    gpu: str
    tp: int = 1
    pp: int = 1
    engine: str = "vllm"  # NAME[@VERSION]
    precision: Precision | None = None  # None: the checkpoint's own


@dataclass(frozen=True, slots=True)
class Comparison:
    """One measured value against the simulator's."""

    name: str  # e.g. "mean TTFT (ms)"
    measured: float
    predicted: float

    @property
    def error(self) -> float:
        return self.predicted / self.measured - 1.0 if self.measured > 0 else math.nan


def bench_files(paths: list[Path]) -> list[Path]:
    """The JSON files named, a directory standing for its *.json files."""
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            found = sorted(path.glob("*.json"))
            if not found:
                raise DatasetError(f"{path}: no *.json result file in this directory")
            files += found
        elif path.is_file():
            files.append(path)
        else:
            raise DatasetError(f"{path}: no such file or directory (a vllm bench serve JSON)")
    return files


def read_bench_json(path: Path) -> BenchRun:
    """Parse one result file; a missing or malformed field raises DatasetError naming it."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise DatasetError(f"{path}: cannot read: {exc}") from None
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise DatasetError(f"{path}: expected a JSON object (vllm bench serve --save-result)")
    completed = _count(data, "completed", path)
    if completed == 0:
        raise DatasetError(f"{path}: field completed is 0: no request finished")
    rate = _rate(data, path)
    burstiness = _number(data, "burstiness", path, default=1.0)
    if burstiness <= 0:
        raise DatasetError(f"{path}: field burstiness must be > 0, got {burstiness}")
    cap = data.get("max_concurrency")
    max_concurrency = None if cap is None else _count(data, "max_concurrency", path)
    prompt, output = _lengths(data, completed, path)
    measured = {}
    for metric in METRICS:
        for stat in STATISTICS:
            key = f"{stat}_{metric}_ms"
            if data.get(key) is not None:
                measured[key] = _number(data, key, path)
    for key in ("request_throughput", "output_throughput"):
        if data.get(key) is not None:
            measured[key] = _number(data, key, path)
    if not any(k.endswith("_ms") for k in measured):
        raise DatasetError(
            f"{path}: no latency field (mean_ttft_ms, median_tpot_ms, p99_itl_ms, ...)"
        )
    model_id = data.get("model_id")
    return BenchRun(
        path=path,
        model_id=model_id if isinstance(model_id, str) else "",
        num_requests=len(prompt),
        request_rate=rate,
        burstiness=burstiness,
        max_concurrency=max_concurrency,
        prompt_tokens=prompt,
        output_tokens=output,
        measured=measured,
    )


def _number(data: dict[str, Any], key: str, path: Path, default: float | None = None) -> float:
    value = data.get(key)
    if value is None and default is not None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        shown = "missing" if key not in data else f"got {value!r}"
        raise DatasetError(f"{path}: field {key} must be a finite number ({shown})")
    return float(value)


def _count(data: dict[str, Any], key: str, path: Path) -> int:
    value = _number(data, key, path)
    if value < 0 or value != int(value):
        raise DatasetError(f"{path}: field {key} must be a whole number >= 0, got {value}")
    return int(value)


def _rate(data: dict[str, Any], path: Path) -> float:
    value = data.get("request_rate")
    if value in ("inf", "Infinity") or value == math.inf:
        return math.inf
    rate = _number(data, "request_rate", path)
    if rate <= 0:
        raise DatasetError(f'{path}: field request_rate must be > 0 or "inf", got {rate}')
    return rate


def _lengths(data: dict[str, Any], completed: int, path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Per-request lengths of the completed requests, or `completed` requests of the means."""
    inputs, outputs = data.get("input_lens"), data.get("output_lens")
    if inputs is not None or outputs is not None:
        for key, values in (("input_lens", inputs), ("output_lens", outputs)):
            if not isinstance(values, list) or not all(
                isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in values
            ):
                raise DatasetError(f"{path}: field {key} must be a list of token counts")
        if len(inputs) != len(outputs):  # type: ignore[arg-type]
            raise DatasetError(
                f"{path}: fields input_lens and output_lens differ in length "
                f"({len(inputs)} and {len(outputs)})"  # type: ignore[arg-type]
            )
        prompt = np.asarray(inputs, dtype=np.int64)
        output = np.asarray(outputs, dtype=np.int64)
        done = (output > 0) & (prompt > 0)  # failed requests have no output
        if done.any():
            return prompt[done], output[done]
    total_in = _number(data, "total_input_tokens", path)
    total_out = _number(data, "total_output_tokens", path)
    isl = max(round(total_in / completed), 1)
    osl = max(round(total_out / completed), 1)
    return np.full(completed, isl, dtype=np.int64), np.full(completed, osl, dtype=np.int64)


def bench_workload(run: BenchRun) -> Workload:
    """The traffic as the client sent it (see the module docstring)."""
    n = run.num_requests
    rng = np.random.default_rng(SEED)
    closed = math.isinf(run.request_rate)
    if closed:
        arrivals = np.zeros(n)
    elif run.burstiness == 1.0:
        arrivals = Poisson(run.request_rate).times(n, rng)
    else:
        arrivals = Gamma(run.request_rate, cv=1.0 / math.sqrt(run.burstiness)).times(n, rng)
    order = np.argsort(rng.random(n), kind="stable")  # lengths in a seeded random order
    return Workload(
        name=f"vllm bench serve {run.path.name}",
        arrival_times=np.sort(arrivals) - (arrivals.min() if n else 0.0),
        prompt_tokens=run.prompt_tokens[order],
        output_tokens=run.output_tokens[order],
        concurrency=run.max_concurrency if closed else None,
        metadata={"arrival": "closed-loop" if closed else f"rate {run.request_rate}"},
    )


def bench_deployment(serving: Serving, run: BenchRun) -> Deployment:
    """The engine's own policy and limits, its batch capped at the client's concurrency."""
    model = load_model(serving.model)
    return engine_deployment(
        load_engine(serving.engine),
        load_catalog().get(serving.gpu),
        model,
        serving.tp,
        serving.pp,
        serving.precision or model.default_precision,
        max_batch=run.max_concurrency,
    )


def simulate_bench(serving: Serving, run: BenchRun) -> list[Comparison]:
    """Every statistic the file measured that the simulator also reports, with both values."""
    result = prepare(bench_deployment(serving, run)).simulate(bench_workload(run))
    latency = result.summary["latency_s"]
    rows: list[Comparison] = []
    for metric in METRICS:
        for stat in STATISTICS:
            key = f"{stat}_{metric}_ms"
            if key in run.measured:
                predicted = latency[_SUMMARY_METRIC[metric]][_SUMMARY_STAT[stat]] * 1e3
                label = f"{stat} {metric.upper()} (ms)"
                rows.append(Comparison(label, run.measured[key], predicted))
    throughput = result.summary["throughput"]
    for key, ours, label in (
        ("request_throughput", "requests_per_s", "request throughput (req/s)"),
        ("output_throughput", "output_tokens_per_s", "output throughput (tok/s)"),
    ):
        if key in run.measured:
            rows.append(Comparison(label, run.measured[key], throughput[ours]))
    return rows
