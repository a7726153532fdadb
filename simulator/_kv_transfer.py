"""Disaggregated serving's KV hand-off: when a decode replica reserves a prompt's KV
blocks (`TransferQueue`), and how long the KV then takes to reach it after the prefill
ends (`layerwise_transfer_wait`).  The prefill replica keeps its own copy until the
transfer is done (`Replica.kv_sent`)."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from simulator._config import SchedulerConfig
from simulator._kv import BlockPool
from simulator._request import Request


def layerwise_transfer_wait(transfer_s: float, prefill_s: float, layers: int) -> float:
    """The wait after the prefill's end when each layer's KV is sent as the layer finishes.

    The prefill produces the L layers' KV one after another over `prefill_s` (p = prefill_s /
    L each) and the link sends them in order (x = transfer_s / L each); layer i is sent once
    it is computed and the layer before it is sent, so the last one arrives at
    max over i of (i p + (L - i + 1) x) = max(L p + x, p + L x) after the prefill began: the
    wait after its end is the larger of one layer's transfer (the link keeps up) and the
    transfer less all but one layer of the prefill (the link is the bottleneck).
    `layers` <= 0 means no overlap: the whole transfer follows the prefill.
    """
    if layers <= 0 or transfer_s <= 0.0:
        return max(transfer_s, 0.0)
    prefill_s = max(prefill_s, 0.0)
    return max(transfer_s / layers, transfer_s - prefill_s * (layers - 1) / layers)


class TransferQueue:
    """The requests one decode replica has accepted, in order: each reserves its KV blocks
    on the replica before its bytes move, as the engines do (SGLang's decode server
    pre-allocates a request's KV in its DecodePreallocQueue before the transfer; vLLM's
    NixlConnector has the decode scheduler allocate the blocks before the read;
    TensorRT-LLM's generation server schedules the request's KV before the transmission).
    When a request is offered is the engine's (`EngineProfile.disagg_decode_reserve`): at
    its hand-off, or when it is routed, before its prefill may start (SGLang).

    A request whose blocks do not fit (the pool's admission rule: the watermark kept free,
    a whole length reserved where the scheduler reserves it) waits here until the replica
    releases enough (`retry`: whenever it frees blocks, and when it admits again a request
    it had preempted); requests reserve in order, and not while a request the replica
    preempted waits for blocks of its own (SGLang resumes its retracted requests first:
    `Replica.preempted_waiting`).  A reserved request's blocks count as used
    (`Request.blocks`: the prompt's and its first decode step's, or the prompt's with the
    rest of its length reserved) until the replica admits it, which then needs no new ones.
    `reserved(req, now, at_once)` is called once its blocks are reserved, `at_once` when
    that is as it is offered.
    """

    __slots__ = (
        "decode_tokens", "pool", "reserved", "reserves_full_length", "waiting",
    )  # fmt: skip

    def __init__(
        self,
        pool: BlockPool,
        scheduler: SchedulerConfig,
        reserved: Callable[[Request, float, bool], None],
    ) -> None:
        self.pool = pool
        # the decode replica's admission rule, and the tokens one decode step writes
        self.reserves_full_length = scheduler.reserve_full_length
        self.decode_tokens = scheduler.decode_tokens
        self.reserved = reserved
        self.waiting: deque[Request] = deque()

    def offer(self, req: Request, now: float, preempted_waiting: int) -> None:
        """`req` asks for its blocks: reserved now if they fit and no request the replica
        preempted waits (`preempted_waiting` of them), else it waits."""
        if not self.waiting and not preempted_waiting and self._reserve(req):
            self.reserved(req, now, True)
        else:
            self.waiting.append(req)

    def retry(self, now: float, preempted_waiting: int) -> None:
        """Blocks were freed: reserve for the waiting requests that now fit, in order,
        unless a request the replica preempted waits."""
        if preempted_waiting:
            return
        waiting = self.waiting
        while waiting and self._reserve(waiting[0]):
            self.reserved(waiting.popleft(), now, False)

    def fits(self, req: Request) -> bool:
        """Whether `req`'s blocks could be reserved now (the pool's admission rule)."""
        held, rest = self._blocks(req)
        return self.pool.can_admit(held + rest)

    def _blocks(self, req: Request) -> tuple[int, int]:
        """(blocks a reservation holds, blocks it reserves for the rest of the length)."""
        request_blocks = self.pool.request_blocks  # its sliding-window layers' window too
        if self.reserves_full_length:
            prompt = request_blocks(req.prompt_tokens)
            return prompt, request_blocks(req.total_tokens) - prompt
        # the prompt's KV and the slots of its first decode step (SGLang pre-allocates
        # decode tokens beside the prompt), so that admitting it never overfills
        first_step = min(req.prompt_tokens + self.decode_tokens, req.total_tokens)
        return request_blocks(first_step), 0

    def _reserve(self, req: Request) -> bool:
        held, rest = self._blocks(req)
        pool = self.pool
        if not pool.can_admit(held + rest):
            return False
        pool.reserved += rest
        pool.allocate(held)
        req.blocks = held
        return True
