"""A decode lane: the requests that run together in one micro-batch slot.

Without pipeline parallelism a replica has one lane; with PP it has one per
stage, so that PP micro-batches are in flight at once.  The decoding members of
a lane all advance one token per lane step, which lets every per-step quantity
be kept in aggregate, O(1) per iteration whatever the batch size:

* the KV tokens the decodes read at step S: ``kv_base + n * S``;
* the new KV blocks step S needs: members whose cached length is a multiple of
  the block size, counted by ``phase[(-S) % block_size]``;
* who finishes at step S: a heap keyed by each member's last step.
"""

from __future__ import annotations

import heapq

from estimators import AcceptedTokens
from simulator._request import Request


class Lane:
    __slots__ = (
        "block_size",
        "finish_heap",
        "first_token_due",
        "id",
        "in_flight",
        "kv_base",
        "members",
        "phase",
        "prefilling",
        "prepared_step",
        "step",
        "step_end_times",
    )

    def __init__(self, lane_id: int, block_size: int) -> None:
        self.id = lane_id
        self.block_size = block_size
        self.step = 0  # decode steps completed so far
        self.step_end_times: list[float] = []  # end time of every completed step
        self.members: dict[int, Request] = {}  # decoding requests by id
        self.kv_base = 0  # sum over members of (kv_at_join - join_step)
        self.phase = [0] * block_size  # members by (kv_at_join - join_step) % block_size
        self.finish_heap: list[tuple[int, int, int, Request]] = []
        self.prefilling: list[Request] = []  # admitted, prompt not finished (chunked prefill)
        self.in_flight = False
        self.prepared_step = -1  # the step whose new KV blocks `prepare_decodes` allocated
        # members whose client sees the first token at the end of the coming step (a decode
        # replica of disaggregated serving, `FIRST_TOKEN_DECODE_STEP`)
        self.first_token_due: list[Request] = []

    def forget_empty_preparation(self) -> None:
        """A lane prepared for its coming step while it had no members holds no block for
        that step: forget it, so that requests joining from now on (`Replica.admit`) are
        left to the next `prepare_decodes`, which allocates their step's blocks once.  Only
        a plan that prepares before it admits (Sarathi) keeps the mark for its joiners."""
        if not self.members:
            self.prepared_step = -1

    @property
    def num_decodes(self) -> int:
        return len(self.members)

    @property
    def num_seqs(self) -> int:
        return len(self.members) + len(self.prefilling)

    def decode_kv_tokens(self) -> int:
        """KV tokens the decodes attend over at the coming step."""
        return self.kv_base + len(self.members) * self.step

    def blocks_needed(self) -> int:
        """New KV blocks the coming step allocates (one per member at a block boundary)."""
        return self.phase[-self.step % self.block_size]

    def kv_tokens_of(self, req: Request) -> int:
        """Tokens `req` has cached before the coming step."""
        return req.kv_at_join + self.step - req.join_step

    def step_blocks_of(self, req: Request) -> int:
        """New KV blocks the coming step writes for member `req`."""
        return 1 if self.kv_tokens_of(req) % self.block_size == 0 else 0

    def join(self, req: Request, kv_tokens: int, decode_steps: int, emit_time: float) -> None:
        """Add a request whose prefill just emitted a token; it decodes `decode_steps` times."""
        req.lane = self.id
        req.join_step = self.step
        req.kv_at_join = kv_tokens
        req.finish_step = self.step + decode_steps - 1
        req.segment_token += 1
        req.last_prefill_emit = emit_time
        offset = kv_tokens - self.step
        self.members[req.id] = req
        self.kv_base += offset
        self.phase[offset % self.block_size] += 1
        heapq.heappush(self.finish_heap, (req.finish_step, req.id, req.segment_token, req))

    def leave(self, req: Request) -> int:
        """Remove `req` before the coming step; returns the KV tokens it holds."""
        del self.members[req.id]
        offset = req.kv_at_join - req.join_step
        self.kv_base -= offset
        self.phase[offset % self.block_size] -= 1
        req.segments.append((req.last_prefill_emit, self.id, req.join_step, self.step))
        req.generated += self.step - req.join_step
        req.segment_token += 1  # its heap entry is now stale
        req.lane = -1
        return req.kv_at_join + self.step - req.join_step

    def complete_step(self, end_time: float) -> list[Request] | tuple[()]:
        """Record the end of the coming step; returns the members that emitted their last token."""
        self.step_end_times.append(end_time)
        step = self.step
        self.step += 1
        if self.first_token_due:
            self._emit_first_tokens(step, end_time)
        heap = self.finish_heap
        if not heap or heap[0][0] > step:
            return ()  # nobody finishes at this step (most steps)
        done: list[Request] = []
        while heap and heap[0][0] <= step:
            _, _, token, req = heapq.heappop(heap)
            if token == req.segment_token and req.lane == self.id:
                self.leave(req)
                done.append(req)
        return done

    def _emit_first_tokens(self, step: int, end_time: float) -> None:
        """The members that joined at `step` with their first token still due show it now,
        together with the token of this step (no gap between the two)."""
        for req in self.first_token_due:
            due = req.first_token_at != req.first_token_at  # NaN: not shown yet
            if due and req.lane == self.id and req.join_step == step:
                req.first_token_at = end_time
                req.last_prefill_emit = end_time
        self.first_token_due = []

    def latest_arrival(self) -> Request | None:
        """The decoding member that arrived last (vLLM's preemption victim)."""
        if not self.members:
            return None
        return self.members[max(self.members)]


class BurstLane(Lane):
    """A lane of speculative decoding: each lane step is one verify step, and each member
    emits its own burst of tokens there (`AcceptedTokens`), drawn for the whole segment when
    it joins.  The aggregates of `Lane` then no longer follow from the step counter alone, so
    the joins schedule, step by step, the tokens the members emit (`emitted`) and the KV blocks
    they write (`new_blocks`); a leaving member takes its unspent steps back out.
    `kv_tokens` is the members' cached tokens before the coming step.  `bursts` keeps each
    finished segment's bursts, by (request id, join step), for the token times; `extra_tokens`
    counts the tokens beyond one per step of every finished segment."""

    __slots__ = ("accepted", "bursts", "emitted", "extra_tokens", "kv_tokens", "new_blocks", "plan")

    def __init__(self, lane_id: int, block_size: int, accepted: AcceptedTokens) -> None:
        super().__init__(lane_id, block_size)
        self.accepted = accepted
        self.kv_tokens = 0
        self.emitted: dict[int, int] = {}
        self.new_blocks: dict[int, int] = {}
        self.plan: dict[int, list[int]] = {}  # a member's bursts, by request id
        self.bursts: dict[tuple[int, int], list[int]] = {}
        self.extra_tokens = 0

    def decode_kv_tokens(self) -> int:
        return self.kv_tokens

    def blocks_needed(self) -> int:
        return self.new_blocks.get(self.step, 0)

    def kv_tokens_of(self, req: Request) -> int:
        return req.kv_at_join + sum(self.plan[req.id][: self.step - req.join_step])

    def step_blocks_of(self, req: Request) -> int:
        kv = self.kv_tokens_of(req)
        b = self.plan[req.id][self.step - req.join_step]
        return (kv + b - 1) // self.block_size - (kv - 1) // self.block_size

    def join(self, req: Request, kv_tokens: int, decode_steps: int, emit_time: float) -> None:
        """`decode_steps`: the tokens it still emits; its bursts set how many steps that takes."""
        bursts = self.accepted.bursts(decode_steps)
        self._schedule(bursts, self.step, kv_tokens, 1)
        self.plan[req.id] = bursts
        self.kv_tokens += kv_tokens
        super().join(req, kv_tokens, len(bursts), emit_time)

    def _schedule(self, bursts: list[int], first: int, kv: int, sign: int) -> None:
        size = self.block_size
        emitted = self.emitted
        new_blocks = self.new_blocks
        step = first
        for b in bursts:
            emitted[step] = emitted.get(step, 0) + sign * b
            blocks = (kv + b - 1) // size - (kv - 1) // size  # blocks_for(kv + b) - blocks_for(kv)
            if blocks:
                new_blocks[step] = new_blocks.get(step, 0) + sign * blocks
            kv += b
            step += 1

    def leave(self, req: Request) -> int:
        bursts = self.plan.pop(req.id)
        done = self.step - req.join_step
        spent = bursts[:done]
        kv = req.kv_at_join + sum(spent)
        self._schedule(bursts[done:], self.step, kv, -1)  # the steps it will not run
        self.kv_tokens -= kv
        self.bursts[(req.id, req.join_step)] = spent
        self.extra_tokens += kv - req.kv_at_join - done
        super().leave(req)  # counted one token per step: add the rest of its bursts
        req.generated += kv - req.kv_at_join - done
        return kv

    def complete_step(self, end_time: float) -> list[Request] | tuple[()]:
        step = self.step
        self.kv_tokens += self.emitted.pop(step, 0)
        self.new_blocks.pop(step, None)
        return super().complete_step(end_time)


def make_lane(lane_id: int, block_size: int, accepted: AcceptedTokens | None) -> Lane:
    """A lane of one token per member per step, or of speculative bursts (`accepted`)."""
    if accepted is None:
        return Lane(lane_id, block_size)
    return BurstLane(lane_id, block_size, accepted)
