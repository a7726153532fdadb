"""The one entry point the CLI and the search use: a workload spec -> a `Workload`."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from workloads._arrivals import ArrivalProcess, Gamma, Poisson, Static, mean_rate
from workloads._builtin import builtin_workload_names, get_builtin_workload
from workloads._errors import WorkloadError
from workloads._lengths import (
    LENGTH_SPEC_FORMS,
    LengthDistribution,
    check_length_spec,
    parse_length_spec,
)
from workloads._traces import COLUMN_KEYS, is_file, read_trace, trace_workload
from workloads._types import Workload

_MAX_RESAMPLE_ROUNDS = 100
MIN_CV, MAX_CV = 1e-3, 1e3  # burstiness of gamma arrivals: from nearly regular to extreme


class WorkloadSpec(BaseModel):
    """What traffic to simulate (the `workload:` section of a search spec).

    `source` is a built-in name (`builtin_workload_names()`) or a path to a trace file.
    `arrival` None picks "trace" for a trace with timestamps (rescaled to qps when one is
    given), else "poisson".  `prompt_len` / `output_len` are length specs (`parse_length_spec`) that
    replace the source's lengths.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    source: str = Field(
        "chat",
        description="A built-in workload (chat, code, summarization: `llmcap catalog "
        "workloads`) or the path to a trace file (Azure 2023, Vidur, Mooncake or a CSV).",
    )
    trace_format: Literal["auto", "azure", "vidur", "mooncake", "csv"] = Field(
        "auto", description="The trace's format; auto tells it from the file's columns."
    )
    columns: dict[str, str] | None = Field(
        None,
        description="For a csv trace: its column names for arrival, prompt and output "
        "(e.g. {arrival: ts, prompt: in_tokens, output: out_tokens}).",
    )
    arrival: Literal["poisson", "gamma", "static", "trace"] | None = Field(
        None,
        description="Arrival process; null: the trace's own timestamps when it has them "
        "(rescaled to each probed rate), else poisson.",
    )
    cv: float = Field(
        default=1.0, gt=0, allow_inf_nan=False,
        description="Coefficient of variation of gamma inter-arrival times (1 = Poisson).",
    )  # fmt: skip
    prompt_len: str | None = Field(
        None,
        description=f"Replace the prompt lengths with a length spec: {LENGTH_SPEC_FORMS}.",
    )
    output_len: str | None = Field(
        None, description="Replace the output lengths (the same length specs as prompt_len)."
    )
    max_total_tokens: int | None = Field(
        default=None, ge=2,
        description="Drop requests whose prompt + output exceed this many tokens.",
    )  # fmt: skip
    time_unit: Literal["s", "ms"] = Field(
        "s", description="Unit of a csv trace's numeric arrival column."
    )
    shared_prefix_tokens: int = Field(
        0, ge=0,
        description="A system prompt of this many tokens starts every request's prompt (added "
        "to its length); with prefix caching its blocks are computed once per replica.",
    )  # fmt: skip
    shared_prefixes: int = Field(
        1, ge=1, description="Distinct system prompts of shared_prefix_tokens; each "
        "conversation draws one at random.",
    )  # fmt: skip
    session_turns: int = Field(
        1, ge=1, le=1000,
        description="Turns per conversation: each turn's prompt is the conversation so far "
        "(earlier prompts and answers) plus a new message of the prompt lengths.",
    )  # fmt: skip
    turn_gap_s: float = Field(
        0.0, ge=0, allow_inf_nan=False,
        description="Mean seconds between a conversation's turns (exponential gaps).",
    )  # fmt: skip

    @field_validator("source")
    @classmethod
    def _known_source(cls, source: str) -> str:
        if source not in builtin_workload_names() and not is_file(source):
            raise WorkloadError(
                f"{source!r} is neither a built-in workload {builtin_workload_names()} nor "
                "an existing trace file; give a built-in name or a path to a trace file"
            )
        return source

    @field_validator("cv")
    @classmethod
    def _cv_range(cls, cv: float) -> float:
        if not MIN_CV <= cv <= MAX_CV:
            raise WorkloadError(
                f"cv must be between {MIN_CV:g} and {MAX_CV:g}, got {cv:g}: gamma arrivals have "
                "shape 1/cv^2, which must stay a finite, non-zero number"
            )
        return cv

    @field_validator("prompt_len", "output_len", mode="before")
    @classmethod
    def _count_as_spec(cls, value: object) -> object:
        """A bare count (`prompt_len: 1024` in YAML) is the spec `1024`, every request that
        long; booleans are no count."""
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)
        return value

    @field_validator("prompt_len", "output_len")
    @classmethod
    def _length_spec(cls, text: str | None) -> str | None:
        if text is not None:
            check_length_spec(text)
        return text

    @field_validator("columns")
    @classmethod
    def _column_keys(cls, columns: dict[str, str] | None) -> dict[str, str] | None:
        if columns is not None and (
            not set(columns) <= set(COLUMN_KEYS) or not {"prompt", "output"} <= set(columns)
        ):
            raise WorkloadError(
                f"column mapping {columns} must have keys 'prompt' and 'output' and may have "
                f"'arrival'; allowed keys: {list(COLUMN_KEYS)}"
            )
        return columns

    @model_validator(mode="after")
    def _columns_only_for_csv(self) -> WorkloadSpec:
        if self.columns is not None and self.trace_format not in ("auto", "csv"):
            raise WorkloadError(
                f"columns apply to trace_format 'csv' only, not {self.trace_format!r}"
            )
        return self

    @property
    def is_builtin(self) -> bool:
        return self.source in builtin_workload_names()


def _validate_spec(spec: WorkloadSpec | Mapping[str, Any]) -> WorkloadSpec:
    if isinstance(spec, WorkloadSpec):
        return spec
    if not isinstance(spec, Mapping):
        raise WorkloadError(f"workload spec must be a mapping, got {type(spec).__name__}")
    try:
        return WorkloadSpec.model_validate(dict(spec))
    except ValidationError as exc:
        errors = exc.errors()
        err = errors[0]
        loc = ".".join(str(p) for p in err["loc"])
        msg = str(err["msg"]).removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg += f"; allowed fields: {list(WorkloadSpec.model_fields)}"
        elif err["type"] != "value_error":
            msg += f" (got {err.get('input')!r})"
        more = f" (and {len(errors) - 1} more errors)" if len(errors) > 1 else ""
        where = f"workload spec field {loc!r}" if loc else "workload spec"
        raise WorkloadError(f"{where}: {msg}{more}") from None


def _check_args(num_requests: int, qps: float | None, concurrency: int | None, seed: int) -> None:
    def is_int(x: object) -> bool:
        return isinstance(x, int | np.integer) and not isinstance(x, bool)

    def is_number(x: object) -> bool:
        return is_int(x) or isinstance(x, float | np.floating)

    if not is_int(num_requests) or num_requests < 1:
        raise WorkloadError(f"num_requests must be an integer >= 1, got {num_requests!r}")
    if qps is not None and not (is_number(qps) and math.isfinite(qps) and qps > 0):
        raise WorkloadError(f"qps must be a finite number > 0, got {qps!r}")
    if concurrency is not None and (not is_int(concurrency) or concurrency < 1):
        raise WorkloadError(f"concurrency must be an integer >= 1, got {concurrency!r}")
    if qps is not None and concurrency is not None:
        raise WorkloadError(
            f"give either qps (open loop) or concurrency (closed loop), not both "
            f"(got qps={qps}, concurrency={concurrency})"
        )
    if not is_int(seed) or seed < 0:
        raise WorkloadError(f"seed must be an integer >= 0, got {seed!r}")


def _sample_lengths(
    prompt: LengthDistribution,
    output: LengthDistribution,
    n: int,
    max_total_tokens: int | None,
    rng_prompt: np.random.Generator,
    rng_output: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray, int]:
    """`n` (prompt, output) pairs; pairs over `max_total_tokens` are redrawn.  Returns the
    pairs and how many were rejected."""
    p, o = prompt.sample(n, rng_prompt), output.sample(n, rng_output)
    if max_total_tokens is None:
        return p, o, 0
    kept_p, kept_o, got, rejected = [], [], 0, 0
    for _ in range(_MAX_RESAMPLE_ROUNDS):
        keep = p + o <= max_total_tokens
        kept_p.append(p[keep])
        kept_o.append(o[keep])
        got += int(keep.sum())
        rejected += int(len(keep) - keep.sum())
        if got >= n:
            return np.concatenate(kept_p)[:n], np.concatenate(kept_o)[:n], rejected
        p, o = prompt.sample(n, rng_prompt), output.sample(n, rng_output)
    raise WorkloadError(
        f"max_total_tokens={max_total_tokens} rejects almost every request of this workload "
        f"({got} of {n} kept after {_MAX_RESAMPLE_ROUNDS} rounds); raise it or shorten the lengths"
    )


def _arrival_process(
    spec: WorkloadSpec, qps: float | None, concurrency: int | None, has_timestamps: bool
) -> tuple[str, ArrivalProcess | None]:
    """The arrival kind and process; process None means replay the trace's own timestamps."""
    if concurrency is not None:
        if spec.arrival not in (None, "static"):
            raise WorkloadError(
                f"arrival {spec.arrival!r} describes an open loop; with concurrency the workload "
                "is closed loop (leave arrival unset, or give qps instead of concurrency)"
            )
        return "closed-loop", Static()
    # a trace with its own timestamps keeps their shape (rescaled when a qps is given)
    kind = spec.arrival or ("trace" if has_timestamps else "poisson")
    if kind == "trace":
        if not has_timestamps:
            what = "is a built-in" if spec.is_builtin else "has no timestamps"
            raise WorkloadError(
                f"arrival 'trace' replays a trace's own timestamps, but {spec.source!r} {what}; "
                "use arrival 'poisson', 'gamma' or 'static'"
            )
        return kind, None
    if kind == "static":
        return kind, Static()
    if qps is None:
        why = (
            f"arrival {kind!r} needs a rate"
            if spec.arrival
            else f"workload {spec.source!r} has no timestamps of its own"
        )
        raise WorkloadError(
            f"no arrival rate: {why}; give qps (open loop) or concurrency (closed loop)"
        )
    return kind, Poisson(qps) if kind == "poisson" else Gamma(qps, spec.cv)


def build_workload(
    spec: WorkloadSpec | Mapping[str, Any],
    *,
    num_requests: int,
    qps: float | None,
    concurrency: int | None,
    seed: int,
) -> Workload:
    """Build the request stream a spec describes.

    Synthetic (built-in) sources draw `num_requests` requests.  Trace sources keep the first
    `num_requests` requests after filtering (fewer if the trace is shorter; then
    `metadata["num_requests_requested"]` is set).  `qps` gives open-loop arrivals at that
    rate: a trace's own timestamps rescaled to that mean rate (the default for a trace that
    has them), Poisson (the default otherwise), or gamma with `arrival="gamma"`.
    `concurrency` gives a closed loop (`Workload.concurrency`, arrival times all zero).
    Same arguments, same arrays: arrivals, prompt lengths and output lengths each come from
    their own sub-stream of `SeedSequence(seed)`.
    """
    spec = _validate_spec(spec)
    _check_args(num_requests, qps, concurrency, seed)
    workload = _build(spec, num_requests, qps, concurrency, seed)
    if spec.shared_prefix_tokens or spec.session_turns > 1:
        rng_prefix = np.random.default_rng(np.random.SeedSequence(seed).spawn(4)[3])
        workload = with_prompt_prefixes(
            workload, rng_prefix, shared_tokens=spec.shared_prefix_tokens,
            shared_prompts=spec.shared_prefixes, turns=spec.session_turns,
            turn_gap_s=spec.turn_gap_s,
        )  # fmt: skip
    return workload


SHARED_PREFIX_BLOCK_TOKENS = 64  # granularity of a synthetic prompt's prefix hashes


def with_prompt_prefixes(
    workload: Workload,
    rng: np.random.Generator,
    *,
    shared_tokens: int = 0,
    shared_prompts: int = 1,
    turns: int = 1,
    turn_gap_s: float = 0.0,
) -> Workload:
    """`workload` with the prompt structure prefix caching sees, and its prefix hashes.

    - A system prompt of `shared_tokens` tokens (one of `shared_prompts`, drawn per
      conversation) starts every prompt.
    - Conversations of `turns` turns: consecutive requests form one; a turn's prompt is the
      conversation so far (system prompt, earlier prompts and answers) plus its own message
      (the workload's prompt length); its turns arrive `turn_gap_s` apart on average
      (exponential gaps) after the first, which keeps the workload's arrival.

    A block's hash stands for the whole prefix up to it: the system prompt's whole blocks are
    shared by its conversations, a conversation's history blocks by its later turns, and
    every other block is new.
    """
    if workload.prefix_blocks is not None:
        raise WorkloadError(
            f"shared_prefix_tokens / session_turns: {workload.name!r} carries its own prefix "
            "hashes (hash_ids); leave both at their defaults"
        )
    size = SHARED_PREFIX_BLOCK_TOKENS
    n = len(workload)
    message, answer = workload.prompt_tokens.tolist(), workload.output_tokens.tolist()
    arrival = workload.arrival_times.copy()
    shared = shared_tokens // size
    groups = rng.integers(shared_prompts, size=-(-n // turns)).tolist()
    gaps = rng.exponential(turn_gap_s, size=n).tolist() if turn_gap_s > 0 else [0.0] * n
    prompt = np.empty(n, dtype=np.int64)
    blocks = np.empty(n, dtype=object)
    fresh = 0  # the next new block's hash (system prompts' blocks are negative)
    for c, start in enumerate(range(0, n, turns)):
        history = shared_tokens  # tokens before this turn's message
        kept = tuple(range(-1 - groups[c] * shared, -1 - (groups[c] + 1) * shared, -1))
        for i in range(start, min(start + turns, n)):
            if i > start:
                arrival[i] = arrival[i - 1] + gaps[i]
            p = history + message[i]
            new = p // size - len(kept)
            blocks[i] = kept + tuple(range(fresh, fresh + new))
            fresh += new
            prompt[i] = p
            history = p + answer[i]
            grown = history // size - p // size  # whole blocks the answer completes
            kept = blocks[i] + tuple(range(fresh, fresh + grown))
            fresh += grown
    order = np.argsort(arrival, kind="stable")
    metadata = dict(workload.metadata) | {
        "shared_prefix_tokens": shared_tokens,
        "shared_prefixes": shared_prompts,
        "session_turns": turns,
        "turn_gap_s": turn_gap_s,
    }
    return dataclasses.replace(
        workload,
        arrival_times=arrival[order],
        prompt_tokens=prompt[order],
        output_tokens=workload.output_tokens[order],
        metadata=metadata,
        prefix_blocks=blocks[order],
        prefix_block_tokens=size,
    )


def _build(
    spec: WorkloadSpec, num_requests: int, qps: float | None, concurrency: int | None, seed: int
) -> Workload:
    rng_arrival, rng_prompt, rng_output = (
        np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(3)
    )
    prompt_override = (
        None if spec.prompt_len is None else parse_length_spec(spec.prompt_len, which="prompt")
    )
    output_override = (
        None if spec.output_len is None else parse_length_spec(spec.output_len, which="output")
    )
    metadata: dict[str, object] = {
        "source": spec.source,
        "seed": seed,
        "qps": qps,
        "concurrency": concurrency,
        "prompt_len": spec.prompt_len,
        "output_len": spec.output_len,
        "max_total_tokens": spec.max_total_tokens,
    }

    if spec.is_builtin:
        builtin = get_builtin_workload(spec.source)
        kind, arrivals = _arrival_process(spec, qps, concurrency, has_timestamps=False)
        assert arrivals is not None
        prompt, output, rejected = _sample_lengths(
            builtin.prompt if prompt_override is None else prompt_override,
            builtin.output if output_override is None else output_override,
            num_requests,
            spec.max_total_tokens,
            rng_prompt,
            rng_output,
        )
        metadata |= {"arrival": kind, "description": builtin.description}
        metadata["resampled_over_max_total_tokens"] = rejected
        if kind == "gamma":
            metadata["cv"] = spec.cv
        return Workload(
            name=spec.source,
            arrival_times=arrivals.times(num_requests, rng_arrival),
            prompt_tokens=prompt,
            output_tokens=output,
            concurrency=concurrency,
            metadata=metadata,
        )

    trace = read_trace(
        spec.source, spec.trace_format, columns=spec.columns, time_unit=spec.time_unit
    )
    if prompt_override is not None:
        trace = dataclasses.replace(
            trace, prompt_tokens=prompt_override.sample(len(trace), rng_prompt),
            prefix_blocks=None,  # the hashes describe the recorded prompts, not these
        )
    if output_override is not None:
        trace = dataclasses.replace(
            trace, output_tokens=output_override.sample(len(trace), rng_output)
        )
    kind, arrivals = _arrival_process(spec, qps, concurrency, trace.arrival_times is not None)
    metadata["arrival"] = kind
    if kind == "gamma":
        metadata["cv"] = spec.cv
    workload = trace_workload(
        trace,
        arrivals=arrivals,
        rng=rng_arrival,
        max_total_tokens=spec.max_total_tokens,
        num_requests=num_requests,
        target_qps=qps if arrivals is None else None,
        metadata=metadata,
    )
    workload.concurrency = concurrency
    return workload


def describe_workload(w: Workload) -> dict[str, object]:
    """Summary numbers for the CLI: size, timing and length statistics (plain Python values).

    `duration_s` is last arrival - first arrival and `mean_qps` = (n - 1) / duration_s (None
    for a closed loop or when all requests arrive at once).
    """
    t = w.arrival_times
    summary: dict[str, object] = {
        "name": w.name,
        "n": len(w),
        "duration_s": float(t[-1] - t[0]) if len(t) else 0.0,
        "mean_qps": None if w.concurrency is not None else mean_rate(t),
        "concurrency": w.concurrency,
        "has_own_timestamps": w.has_own_timestamps,
    }
    for label, values in (("prompt", w.prompt_tokens), ("output", w.output_tokens)):
        empty = len(values) == 0
        p50, p99 = (None, None) if empty else np.percentile(values, [50, 99]).tolist()
        summary |= {
            f"{label}_mean": None if empty else float(values.mean()),
            f"{label}_p50": p50,
            f"{label}_p99": p99,
            f"{label}_max": None if empty else int(values.max()),
        }
    return summary
