"""The request stream handed to the simulator."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np


@dataclass(slots=True)
class Workload:
    """Requests as parallel numpy arrays, sorted by arrival time.

    `arrival_times` are seconds from the start of the run.  A closed-loop workload
    (`concurrency` set) ignores them: the simulator keeps `concurrency` requests in
    flight and issues the next request, in array order, when one completes.

    `prefix_blocks`, when known (a trace's Mooncake ``hash_ids``), holds per request the
    tuple of hashes of its prompt's `prefix_block_tokens`-token blocks, each hash standing
    for the whole prefix up to its block: what the simulator's prefix cache matches.
    """

    name: str
    arrival_times: np.ndarray  # float64, seconds, non-decreasing
    prompt_tokens: np.ndarray  # int64, >= 1
    output_tokens: np.ndarray  # int64, >= 1
    concurrency: int | None = None
    has_own_timestamps: bool = False  # True for a trace replayed with its own arrival times
    metadata: dict[str, object] = field(default_factory=dict)
    prefix_blocks: np.ndarray | None = None  # object array of tuples of int hashes
    prefix_block_tokens: int = 0

    def __post_init__(self) -> None:
        self.arrival_times = np.asarray(self.arrival_times, dtype=np.float64)
        self.prompt_tokens = np.asarray(self.prompt_tokens, dtype=np.int64)
        self.output_tokens = np.asarray(self.output_tokens, dtype=np.int64)
        n = len(self.arrival_times)
        if not (len(self.prompt_tokens) == n == len(self.output_tokens)):
            raise ValueError("arrival_times, prompt_tokens and output_tokens differ in length")
        if self.prefix_blocks is not None:
            if len(self.prefix_blocks) != n:
                raise ValueError("prefix_blocks and prompt_tokens differ in length")
            if self.prefix_block_tokens < 1:
                raise ValueError("prefix_blocks need prefix_block_tokens >= 1")

    def __len__(self) -> int:
        return len(self.arrival_times)

    def with_arrival_times(self, arrival_times: np.ndarray) -> Workload:
        """The same requests at other arrival times (used to rescale a rate)."""
        return dataclasses.replace(
            self, arrival_times=arrival_times, metadata=dict(self.metadata)
        )

    def head(self, n: int) -> Workload:
        """The first `n` requests (all of them when there are fewer)."""
        cut = slice(0, n)
        return dataclasses.replace(
            self,
            arrival_times=self.arrival_times[cut],
            prompt_tokens=self.prompt_tokens[cut],
            output_tokens=self.output_tokens[cut],
            metadata=dict(self.metadata),
            prefix_blocks=None if self.prefix_blocks is None else self.prefix_blocks[cut],
        )
