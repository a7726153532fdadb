"""The request stream handed to the simulator."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(slots=True)
class Workload:
    """Requests as parallel numpy arrays, sorted by arrival time.

    `arrival_times` are seconds from the start of the run.  A closed-loop workload
    (`concurrency` set) ignores them: the simulator keeps `concurrency` requests in
    flight and issues the next request, in array order, when one completes.
    """

    name: str
    arrival_times: np.ndarray  # float64, seconds, non-decreasing
    prompt_tokens: np.ndarray  # int64, >= 1
    output_tokens: np.ndarray  # int64, >= 1
    concurrency: int | None = None
    has_own_timestamps: bool = False  # True for a trace replayed with its own arrival times
    metadata: dict[str, object] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.arrival_times = np.asarray(self.arrival_times, dtype=np.float64)
        self.prompt_tokens = np.asarray(self.prompt_tokens, dtype=np.int64)
        self.output_tokens = np.asarray(self.output_tokens, dtype=np.int64)
        n = len(self.arrival_times)
        if not (len(self.prompt_tokens) == n == len(self.output_tokens)):
            raise ValueError("arrival_times, prompt_tokens and output_tokens differ in length")

    def __len__(self) -> int:
        return len(self.arrival_times)

    def with_arrival_times(self, arrival_times: np.ndarray) -> Workload:
        """The same requests at other arrival times (used to rescale a rate)."""
        return Workload(
            name=self.name,
            arrival_times=arrival_times,
            prompt_tokens=self.prompt_tokens,
            output_tokens=self.output_tokens,
            concurrency=self.concurrency,
            has_own_timestamps=self.has_own_timestamps,
            metadata=dict(self.metadata),
        )
