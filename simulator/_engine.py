"""The discrete-event loop: arrivals, batch completions, wake-ups."""

from __future__ import annotations

import gc
import heapq
import math
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from itertools import chain

import numpy as np

from estimators import (
    DECODE_RESERVE_AT_HANDOFF,
    DECODE_RESERVE_AT_ROUTE,
    FIRST_TOKEN_DECODE_STEP,
    FIRST_TOKEN_PREFILL,
    BatchCost,
    ExecutionTimeEstimator,
)
from simulator._config import ClusterConfig, GlobalSchedulerKind, RunOptions, SchedulerConfig
from simulator._events import ARRIVAL as _ARRIVAL
from simulator._events import BATCH_END as _BATCH_END
from simulator._events import DISPATCH as _DISPATCH
from simulator._events import TOKENIZED as _TOKENIZED
from simulator._events import TRANSFER as _TRANSFER
from simulator._events import WAKE as _WAKE
from simulator._kv_transfer import TransferQueue, layerwise_transfer_wait
from simulator._lane import Lane
from simulator._policies import BatchPlan, make_policy
from simulator._prefix_cache import PrefixCache
from simulator._replica import Replica
from simulator._request import Request
from simulator._routing import make_router
from workloads import Workload


class SimulationStalled(RuntimeError):
    """The simulation ran out of events with requests neither finished nor rejected."""


@dataclass(frozen=True, slots=True)
class Hardware:
    """Per-GPU peaks used for MFU/MBU, and GPUs per replica."""

    gpus_per_replica: int = 1
    peak_flops: float = 0.0  # FLOP/s per GPU
    memory_bandwidth: float = 0.0  # bytes/s per GPU


def _prefix_cache(workload: Workload, cluster: ClusterConfig) -> PrefixCache:
    """One replica's prefix cache, in the workload's prefix blocks."""
    tokens = cluster.prefix_cache_tokens
    if tokens is None:
        tokens = cluster.num_kv_blocks * cluster.block_size
    size = workload.prefix_block_tokens
    capacity = None if math.isinf(tokens) else int(tokens // size)
    return PrefixCache(size, capacity, cluster.block_size)


@dataclass(frozen=True, slots=True)
class DecodePool:
    """The decode side of disaggregated serving: its replicas' cost model, scheduler, KV
    blocks and GPUs, and how long one prompt token's KV cache takes to reach it from the
    prefill pool.  The Simulation's own estimator, scheduler and cluster are then the
    prefill pool's."""

    estimator: ExecutionTimeEstimator
    scheduler: SchedulerConfig
    cluster: ClusterConfig
    hardware: Hardware
    transfer_seconds_per_token: float
    # layers whose KV the prefill side sends one by one as each finishes, overlapping the
    # transfer with the prefill (`layerwise_transfer_wait`); 0: sent after the prefill
    transfer_layers: int = 0
    # where the client sees a request's first token (estimators FIRST_TOKEN_SOURCES): the
    # prefill pool's, when its prefill ends; or a decode replica's, when it admits the
    # transferred request at an iteration boundary, or after its first step with it
    first_token: str = FIRST_TOKEN_PREFILL
    # when a decode replica reserves a request's KV blocks (estimators DECODE_RESERVE_MOMENTS):
    # at its hand-off, or when it is routed, its prefill held until they are reserved
    reserve: str = DECODE_RESERVE_AT_HANDOFF
    # which decode replica takes a request (`make_router`): the one with the fewest
    # outstanding requests, or in turn whatever their load (Dynamo's frontend by default)
    router: GlobalSchedulerKind = GlobalSchedulerKind.LEAST_OUTSTANDING


def _enqueue(req: Request, replica: Replica, now: float) -> None:
    replica.enqueue(req, now)


@contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic garbage collector paused, then restored.  The simulator makes no reference
    cycles, only objects that live as long as the run (requests, batch-log rows): the
    collector's passes over them while they are made, each also over every other live
    object, cost up to a tenth of a run; they are left to the collector's next pass."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


class Simulation:
    """One run of one deployment over one workload: its replicas, or with a `decode_pool`
    a prefill pool (the arguments) whose replicas hand each prompt's KV cache over to the
    decode pool's (disaggregated serving; where the client sees the first token is the
    `DecodePool.first_token` rule)."""

    def __init__(
        self,
        workload: Workload,
        estimator: ExecutionTimeEstimator,
        scheduler: SchedulerConfig,
        cluster: ClusterConfig,
        options: RunOptions | None = None,
        hardware: Hardware | None = None,
        decode_pool: DecodePool | None = None,
    ) -> None:
        self.workload = workload
        self.scheduler = scheduler
        self.cluster = cluster
        self.options = options or RunOptions()
        self.hardware = hardware or Hardware()
        with collector_paused():  # passes over every live object while they are made
            self.requests = [
                Request(i, t, p, o)
                for i, (t, p, o) in enumerate(
                    zip(
                        workload.arrival_times.tolist(),
                        workload.prompt_tokens.tolist(),
                        workload.output_tokens.tolist(),
                        strict=True,
                    )
                )
            ]
        prefixes = workload.prefix_blocks if cluster.prefix_cache else None
        if prefixes is not None:
            for req, prefix in zip(self.requests, prefixes, strict=True):
                req.prefix = prefix
        self.pp = cluster.pp
        self._lanes_made = 0
        self.replicas = [
            Replica(
                r,
                self,
                make_policy(scheduler),
                estimator,
                cluster.num_kv_blocks,
                cluster.block_size,
                cluster.watermark,
                cluster.pp,
                _prefix_cache(workload, cluster) if prefixes is not None else None,
                window_kv_blocks=cluster.window_kv_blocks,
            )
            for r in range(cluster.num_replicas)
        ]
        self._route = make_router(cluster.global_scheduler, self.replicas, self.options.seed)
        # each replica's frontend tokenizes one prompt at a time (`_tokenize`): (seconds a
        # prompt token, every request's HTTP latency on top), and when it is free again, by
        # replica id
        self._frontend = (cluster.tokenize_seconds_per_token, cluster.frontend_latency)
        self._frontend_free = [0.0] * len(self.replicas)
        # an arriving request the router sent to a replica that can serve it: it queues
        # there, or first reserves its decode KV (`_reserve_decode_at_route`)
        self._enqueue: Callable[[Request, Replica, float], None] = _enqueue
        self.decode_pool = decode_pool
        if decode_pool is not None:
            self._add_decode_pool(decode_pool)
        self.lanes: list[Lane] = [lane for rep in self.replicas for lane in rep.lanes]
        self._heap: list[tuple] = []
        self._seq = 0
        self.now = 0.0
        # (replica, stage, start, end, index of the batch in `batches`) for --trace-out
        self.stage_spans: list[tuple[int, int, float, float, int]] | None = (
            [] if self.options.record_stage_times else None
        )
        self.batches = BatchLog()
        self.completed = 0
        self.wall_time = 0.0
        self.stopped_early = False
        self._closed_loop_next = 0
        # read by `batch_end_horizon` and `Replica._run_decode_steps` while `run` goes: the
        # next open-loop arrival, the time limit, and the events before the progress hook
        # is called (never 0 without a hook)
        self._next_arrival = math.inf
        self._max_time = math.inf
        self.events_to_progress = -1

    # -- hooks the replicas call -------------------------------------------

    def new_lane_id(self) -> int:
        """Lanes are numbered in the order the replicas create them."""
        self._lanes_made += 1
        return self._lanes_made - 1

    def _add_decode_pool(self, pool: DecodePool) -> None:
        c = pool.cluster
        first = len(self.replicas)
        decoders = [
            Replica(first + r, self, make_policy(pool.scheduler), pool.estimator,
                    c.num_kv_blocks, c.block_size, c.watermark, c.pp,
                    window_kv_blocks=c.window_kv_blocks)
            for r in range(c.num_replicas)
        ]  # fmt: skip
        at_route = pool.reserve == DECODE_RESERVE_AT_ROUTE
        for replica in decoders:
            replica.hardware = pool.hardware
            replica.first_token_on_step = pool.first_token == FIRST_TOKEN_DECODE_STEP
            reserved = partial(self._release_prefill if at_route else self._start_transfer, replica)
            replica.transfers = TransferQueue(replica.pool, replica.policy.config, reserved)
        for replica in self.replicas:
            replica.hand_off = self._hand_off_reserved if at_route else self._hand_off
        if at_route:
            self._enqueue = self._reserve_decode_at_route
        # the decode replica a request goes to (`DecodePool.router`); a seed apart from the
        # prefill pool's, so random routers do not draw the same sequence of replicas
        self._pick_decoder = make_router(pool.router, decoders, self.options.seed + 1)
        # at_route: request id -> the decode replica holding its KV blocks, and how many
        self._reserved_for: dict[int, tuple[Replica, int]] = {}
        self.replicas = self.replicas + decoders
        # a decode replica's frontend taking the decode request in after the hand-off,
        # tokenizing its prompt again (`ClusterConfig.tokenize_seconds_per_token` and
        # `frontend_latency` of the decode pool: 0 where the decode request does not go
        # through the decode server's HTTP frontend)
        self._decode_frontend = (c.tokenize_seconds_per_token, c.frontend_latency)
        self._frontend_free += [0.0] * len(decoders)

    def _reject_at_decode(self, req: Request, decoder: Replica, reason: str, now: float) -> None:
        req.rejected = f"decode pool: {reason}"
        req.replica = decoder.id
        self.on_request_done(req, now)

    def _reserve_decode_at_route(self, req: Request, replica: Replica, now: float) -> None:
        """SGLang's routing: the request goes to a prefill replica and to a decode replica
        (`DecodePool.router`) at once; the decode replica reserves its KV blocks, or queues it until
        they fit (`TransferQueue`), and only then may its prefill start (`_release_prefill`).
        A request of one output token never reaches the decode pool."""
        if req.output_tokens <= 1:
            replica.enqueue(req, now)
            return
        decoder = self._pick_decoder(req)
        reason = decoder.rejection(req)
        if reason is not None:  # a decode replica can never hold it: rejected on arrival
            self._reject_at_decode(req, decoder, reason, now)
            return
        decoder.outstanding += 1
        # its prefill replica, which the router counts it against from now on
        req.replica = replica.id
        replica.outstanding += 1
        decoder.reserve_when_polled(req, now)

    def _release_prefill(
        self, decoder: Replica, req: Request, now: float, _at_once: bool
    ) -> None:
        """`decoder` reserved the request's KV blocks (at_route): the prefill replica takes
        it in.  The blocks are `decoder`'s, kept aside until the hand-off (`Request.blocks`
        are a request's blocks on the replica it waits at)."""
        self._reserved_for[req.id] = (decoder, req.blocks)
        req.blocks = 0
        prefill = self.replicas[req.replica]
        prefill.outstanding -= 1  # counted since it was routed: `enqueue` counts it again
        prefill.enqueue(req, now)

    def _hand_off_reserved(self, req: Request, now: float) -> None:
        """A prefill whose decode KV was reserved when it was routed: the transfer starts
        now, overlapping the prefill where the engine sends layer by layer."""
        if self.decode_pool.first_token == FIRST_TOKEN_PREFILL:
            req.first_token_at = now
        decoder, req.blocks = self._reserved_for.pop(req.id)
        self._start_transfer(decoder, req, now, True)

    def _hand_off(self, req: Request, now: float) -> None:
        """A prefill pool's request hands its KV cache to a decode replica (`DecodePool.router`),
        which reserves the blocks before the transfer starts, or queues the hand-off until
        they fit (`TransferQueue`); the client sees its first token now when the prefill
        pool emits it."""
        pool = self.decode_pool
        if pool.first_token == FIRST_TOKEN_PREFILL:
            req.first_token_at = now
        replica = self._pick_decoder(req)
        reason = replica.rejection(req)
        if reason is not None:  # a decode replica can never hold it: rejected, as on arrival
            self.replicas[req.replica].kv_sent(req, now)
            self._reject_at_decode(req, replica, reason, now)
            return
        replica.outstanding += 1  # from the hand-off on: the next request goes elsewhere
        if any(self._decode_frontend):
            self._tokenize(req, replica, now, hand_off=True)
            return
        replica.take_hand_off(req, now)

    def _start_transfer(
        self, replica: Replica, req: Request, now: float, at_hand_off: bool
    ) -> None:
        """The prefill of `req` is done and `replica` has reserved its KV blocks: its
        transfer starts now.  Layer by layer it overlaps the prefill only when it starts at
        the hand-off; one that waited for blocks sends the whole prompt's KV after."""
        pool = self.decode_pool
        transfer = layerwise_transfer_wait(
            req.prefill_target * pool.transfer_seconds_per_token,
            now - req.scheduled_at,  # the prefill's span on its replica
            pool.transfer_layers if at_hand_off else 0,
        )
        arrive = now + transfer
        self._seq += 1
        source = self.replicas[req.replica]  # the prefill replica, holding the KV till then
        heapq.heappush(self._heap, (arrive, _TRANSFER, self._seq, replica, req, source))

    def batch_end_horizon(self) -> tuple[float, bool]:
        """(t, at_t): a batch end scheduled now for a time before t, or at t when `at_t`, is
        the event `run` pops next (no arrival, other event or the time limit comes first), so
        its replica may handle it at once, without the heap, when `events_to_progress` is
        not 1 (the progress hook comes before the next event)."""
        limit = self._next_arrival
        if self._max_time < limit:
            limit = self._max_time
        heap = self._heap
        if heap:
            first = heap[0]
            if first[0] < limit:
                return first[0], first[1] != _BATCH_END  # a batch end queued earlier goes first
            if first[0] == limit and first[1] == _BATCH_END:
                return limit, False
        return limit, True

    def schedule_batch_end(self, replica: Replica, lane: Lane, plan: BatchPlan, t: float) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (t, _BATCH_END, self._seq, replica, lane, plan))

    def schedule_wake(self, replica: Replica, t: float, after_arrivals: bool = False) -> None:
        self._seq += 1
        kind = _DISPATCH if after_arrivals else _WAKE
        heapq.heappush(self._heap, (t, kind, self._seq, replica, None, None))

    def record_batch(
        self,
        replica: Replica,
        lane: Lane,
        start: float,
        end: float,
        prefill_tokens: int,
        num_prefills: int,
        num_decodes: int,
        cost: BatchCost,
    ) -> None:
        self.batches.rows.append(
            (replica.id, start, end, prefill_tokens, num_prefills, num_decodes,
             replica.pool.used, cost.flops, cost.bytes_moved)
        )  # fmt: skip

    def on_request_done(self, req: Request, now: float) -> None:
        self.completed += 1
        if self.workload.concurrency is not None and self._closed_loop_next < len(self.requests):
            self._schedule_arrival(self._closed_loop_next, now)
            self._closed_loop_next += 1

    # -- the loop ----------------------------------------------------------

    def _schedule_arrival(self, index: int, t: float) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (t, _ARRIVAL, self._seq, None, index, None))

    def _arrive(self, index: int, now: float) -> None:
        req = self.requests[index]
        req.arrival = now
        replica = self._route(req)
        reason = replica.rejection(req)
        if reason is not None:
            req.rejected = reason
            req.replica = replica.id
            self.on_request_done(req, now)
            return
        if any(self._frontend):
            self._tokenize(req, replica, now)
            return
        self._enqueue(req, replica, now)

    def _tokenize(self, req: Request, replica: Replica, now: float, hand_off: bool = False) -> None:
        """The replica's HTTP frontend tokenizes the request's prompt, after the prompts it
        took before, and hands it to the scheduler when done (`_tokenized`), the frontend's
        per-request latency later (`ClusterConfig.frontend_latency`, the tokenizer free
        meanwhile): an arrival, which the router counts against the replica meanwhile, or a
        decode replica's hand-off (`hand_off`, counted since the hand-off; the decode pool's
        frontend)."""
        per_token, latency = self._decode_frontend if hand_off else self._frontend
        tokenized = max(now, self._frontend_free[replica.id]) + req.prompt_tokens * per_token
        self._frontend_free[replica.id] = tokenized
        if not hand_off:
            replica.outstanding += 1
        self._seq += 1
        event = (tokenized + latency, _TOKENIZED, self._seq, replica, req, hand_off)
        heapq.heappush(self._heap, event)

    def _tokenized(self, replica: Replica, req: Request, hand_off: bool, now: float) -> None:
        if hand_off:
            replica.take_hand_off(req, now)
            return
        replica.outstanding -= 1  # `_enqueue` counts it from now on
        self._enqueue(req, replica, now)

    @collector_paused()
    def run(self) -> Simulation:
        started = time.perf_counter()
        heap = self._heap
        heappop = heapq.heappop
        max_time = self.options.max_time if self.options.max_time is not None else math.inf
        if self.workload.concurrency is not None:
            first = min(self.workload.concurrency, len(self.requests))
            for index in range(first):
                self._schedule_arrival(index, 0.0)
            self._closed_loop_next = first
            arrivals: list[float] = []
        else:
            arrivals = self.workload.arrival_times.tolist()
        num_arrivals = len(arrivals)
        i = 0
        next_arrival = arrivals[0] if num_arrivals else math.inf
        self._next_arrival = next_arrival
        self._max_time = max_time
        on_progress = self.options.on_progress
        every = self.options.progress_every if on_progress is not None else -1
        countdown = every
        while True:
            countdown -= 1
            if countdown == 0:
                countdown = every
                if on_progress(self):
                    self.stopped_early = True
                    break
            if heap and (
                i >= num_arrivals
                or heap[0][0] < next_arrival
                or (heap[0][0] == next_arrival and heap[0][1] < _ARRIVAL)
            ):
                t, kind, _, replica, a, b = heappop(heap)
                if t > max_time:
                    break
                self.now = t
                if kind == _BATCH_END:
                    # the replica may handle the batch ends that follow at once (each one
                    # an event of the countdown)
                    self.events_to_progress = countdown
                    replica.on_batch_end(a, b, t)
                    countdown = self.events_to_progress
                elif kind == _ARRIVAL:
                    self._arrive(a, t)
                elif kind == _TOKENIZED:
                    self._tokenized(replica, a, b, t)
                elif kind == _TRANSFER:
                    b.kv_sent(a, t)
                    replica.receive(a, t)
                else:
                    replica.wake_at = -1.0
                    replica.try_dispatch(t)
            elif i < num_arrivals:
                t = next_arrival
                if t > max_time:
                    break
                self.now = t
                i += 1
                next_arrival = arrivals[i] if i < num_arrivals else math.inf
                self._next_arrival = next_arrival
                self._arrive(i - 1, t)
            else:
                break
        self.wall_time = time.perf_counter() - started
        if not self.stopped_early and max_time == math.inf:
            self._check_all_served()
        return self

    def _check_all_served(self) -> None:
        """Raise SimulationStalled when the events ran out before every request finished or
        was rejected: some request waits for what will never come (a simulator defect, not
        a slow deployment), and metrics of the ones that finished would mislead."""
        stuck = len(self.requests) - self.completed
        if stuck:
            waiting = [(r.id, len(r.waiting)) for r in self.replicas if r.waiting]
            raise SimulationStalled(
                f"simulation stalled: {stuck} of {len(self.requests)} requests never finished "
                f"with no event left to run (replica, requests waiting there: {waiting}); "
                "please report it with the deployment and workload"
            )


class BatchLog:
    """Per-batch records: one tuple per batch while running, columns afterwards."""

    FIELDS = (
        "replica", "start", "end", "prefill_tokens", "num_prefills", "num_decodes",
        "kv_blocks_used", "flops", "bytes_moved",
    )  # fmt: skip

    def __init__(self) -> None:
        self.rows: list[tuple[float, ...]] = []

    def __len__(self) -> int:
        return len(self.rows)

    def columns(self) -> dict[str, np.ndarray]:
        width = len(self.FIELDS)
        # one pass over the rows' values: half the time of np.array on the list of tuples
        flat = np.fromiter(chain.from_iterable(self.rows), np.float64, len(self.rows) * width)
        table = flat.reshape(len(self.rows), width)
        return {name: table[:, i] for i, name in enumerate(self.FIELDS)}
