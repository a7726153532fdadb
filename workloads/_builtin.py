"""Built-in named workloads: parametric length distributions that need no file.

The log-normal parameters (median, sigma of the log, clip) were fitted to the published
statistics of public traces, not copied from them:

- chat: Azure LLM inference 2023, conversation (mean prompt 1,155, p99 ~4.1k; mean output 211,
  p90 ~424, outputs capped at 1,000).
- code: Azure LLM inference 2023, code (mean prompt 2,048, median ~1.5k, 8k context; mean
  output 28, median 13).
- summarization: Arxiv-Summarization as used by Vidur (long prompts, prompt + output <= 4k).
"""

from __future__ import annotations

from dataclasses import dataclass

from workloads._errors import WorkloadError
from workloads._lengths import Fixed, LengthDistribution, LogNormal, Uniform


@dataclass(frozen=True, slots=True)
class BuiltinWorkload:
    """A named pair of prompt and output length distributions."""

    name: str
    description: str
    prompt: LengthDistribution
    output: LengthDistribution


_BUILTINS: dict[str, BuiltinWorkload] = {
    w.name: w
    for w in (
        BuiltinWorkload(
            "chat",
            "conversation (Azure 2023 chat-like): prompt median ~950 mean ~1.16k heavy tail, "
            "output mean ~211",
            LogNormal(950, 0.63, high=16384),
            LogNormal(160, 0.76, high=1000),
        ),
        BuiltinWorkload(
            "code",
            "code completion (Azure 2023 code-like): prompt mean ~2.05k up to 8k, output mean ~28",
            LogNormal(1469, 0.865, high=8192),
            LogNormal(13, 1.24, high=2048),
        ),
        BuiltinWorkload(
            "summarization",
            "summarization (arxiv-like): prompt uniform 2.5k-3.5k, output median 200 "
            "(32-512), total <= 4k",
            Uniform(2560, 3584),
            LogNormal(200, 0.4, low=32, high=512),
        ),
        BuiltinWorkload(
            "fixed-1k-128",
            "sanity check: every prompt 1024 tokens, every output 128 tokens",
            Fixed(1024),
            Fixed(128),
        ),
    )
}


def builtin_workload_names() -> list[str]:
    """Names of the built-in workloads, in a stable order."""
    return list(_BUILTINS)


def get_builtin_workload(name: str) -> BuiltinWorkload:
    """The built-in workload called `name`; `WorkloadError` listing the names otherwise."""
    try:
        return _BUILTINS[name]
    except KeyError:
        raise WorkloadError(
            f"unknown built-in workload {name!r}; built-ins: {builtin_workload_names()}"
        ) from None


def builtin_length_statistics(sample: int = 20_000, seed: int = 0) -> list[dict[str, object]]:
    """Each built-in workload's prompt and output length statistics, from `sample` draws."""
    import numpy as np

    rows: list[dict[str, object]] = []
    for workload in _BUILTINS.values():
        rng = np.random.default_rng(seed)
        row: dict[str, object] = {"name": workload.name, "description": workload.description}
        for part, dist in (("prompt", workload.prompt), ("output", workload.output)):
            lengths = np.asarray(dist.sample(sample, rng), dtype=float)
            row |= {
                f"{part}_mean": float(lengths.mean()),
                f"{part}_p50": float(np.percentile(lengths, 50)),
                f"{part}_p99": float(np.percentile(lengths, 99)),
                f"{part}_max": int(lengths.max()),
            }
        rows.append(row)
    return rows
