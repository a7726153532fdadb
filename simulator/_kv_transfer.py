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
    """The KV hand-offs one decode replica has accepted, in order: each reserves its KV
    blocks on the replica before its bytes move, as the engines do (SGLang's decode server
    pre-allocates a request's KV in its DecodePreallocQueue before the transfer; vLLM's
    NixlConnector has the decode scheduler allocate the blocks before the read;
    TensorRT-LLM's generation server schedules the request's KV before the transmission).

    A hand-off whose blocks do not fit (the pool's admission rule: the watermark kept free,
    a whole length reserved where the scheduler reserves it) waits here, its transfer not
    started, until requests that finish on the replica free enough; hand-offs start in
    order, and not while a request the replica preempted waits for blocks of its own
    (SGLang resumes its retracted requests first).  A started transfer's blocks count as
    used (`Request.blocks`: the prompt's and its first decode step's, or the prompt's with
    the rest of its length reserved) until the replica admits the request, which then needs
    no new ones.  `start(req, now, at_hand_off)` begins the transfer of a reserved request.
    """

    __slots__ = (
        "decode_tokens", "pool", "reserves_full_length", "start", "waiting",
    )  # fmt: skip

    def __init__(
        self,
        pool: BlockPool,
        scheduler: SchedulerConfig,
        start: Callable[[Request, float, bool], None],
    ) -> None:
        self.pool = pool
        # the decode replica's admission rule, and the tokens one decode step writes
        self.reserves_full_length = scheduler.reserve_full_length
        self.decode_tokens = scheduler.decode_tokens
        self.start = start
        self.waiting: deque[Request] = deque()

    def offer(self, req: Request, now: float, replica_waiting: deque[Request]) -> None:
        """A prefill pool hands `req` over: its transfer starts now if its blocks fit."""
        if not self.waiting and self._may_reserve(replica_waiting) and self._reserve(req):
            self.start(req, now, True)
        else:
            self.waiting.append(req)

    def retry(self, now: float, replica_waiting: deque[Request]) -> None:
        """Blocks were freed: start the waiting hand-offs that now fit, in order."""
        waiting = self.waiting
        while waiting and self._may_reserve(replica_waiting) and self._reserve(waiting[0]):
            self.start(waiting.popleft(), now, False)

    @staticmethod
    def _may_reserve(replica_waiting: deque[Request]) -> bool:
        """No preempted request (it waits at the head, holding no blocks) comes first."""
        return not replica_waiting or replica_waiting[0].blocks > 0

    def _reserve(self, req: Request) -> bool:
        pool = self.pool
        request_blocks = pool.request_blocks  # its sliding-window layers' window too
        prompt = request_blocks(req.prefill_target)
        if self.reserves_full_length:
            full = request_blocks(req.total_tokens)
            if not pool.can_admit(full):
                return False
            pool.reserved += full - prompt
            held = prompt
        else:
            # the prompt's KV and the slots of its first decode step (SGLang pre-allocates
            # decode tokens beside the prompt), so that admitting it never overfills
            first_step = min(req.prefill_target + self.decode_tokens, req.total_tokens)
            held = request_blocks(first_step)
            if not pool.can_admit(held):
                return False
        pool.allocate(held)
        req.blocks = held
        return True
