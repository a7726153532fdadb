"""A request's state inside the simulator."""

from __future__ import annotations

from dataclasses import dataclass, field

NAN = float("nan")


@dataclass(slots=True)
class Request:
    """One request, from arrival to completion.

    Output tokens come from two places: a finished prefill emits one token, and
    every decode step of the lane the request sits in emits one more.  The decode
    part is not counted request by request (that would cost O(batch) per
    iteration); a request remembers the lane step it joined at and derives its
    progress from the lane's step counter.  `segments` keeps, for every stretch
    of decoding, (time the preceding prefill emitted its token, lane id, first
    step, end step exclusive): enough to rebuild every token time afterwards.
    """

    id: int
    arrival: float
    prompt_tokens: int
    output_tokens: int
    replica: int = -1
    # prefill progress: tokens to (re)compute and tokens done; a preempted request
    # recomputes its prompt and the tokens it had generated
    prefill_target: int = 0
    prefilled: int = 0
    generated: int = 0  # output tokens emitted before the current decode segment
    blocks: int = 0  # KV blocks held outside the lane's implicit accounting (prefill)
    reserved_blocks: int = 0  # blocks reserved up front (static batching)
    # decode segment bookkeeping (valid while in a lane)
    lane: int = -1
    join_step: int = 0
    kv_at_join: int = 0
    finish_step: int = 0
    segment_token: int = 0  # invalidates stale finish-heap entries after a preemption
    # timeline
    scheduled_at: float = NAN
    first_token_at: float = NAN
    completed_at: float = NAN
    preemptions: int = 0
    rejected: str | None = None
    segments: list[tuple[float, int, int, int]] = field(default_factory=list)
    last_prefill_emit: float = NAN
    prefix: tuple[int, ...] | None = None  # prefix-block hashes of the prompt, when known
    cached_tokens: int = 0  # prompt tokens found in the prefix cache on arrival
    # prefix blocks whose KV it shares with other running requests (PrefixCache.refs)
    shared_prefix: tuple[int, ...] = ()

    @property
    def remaining_prefill(self) -> int:
        return self.prefill_target - self.prefilled

    @property
    def total_tokens(self) -> int:
        """KV tokens the request holds at its end: the prompt and all but the last output."""
        return self.prompt_tokens + self.output_tokens - 1
