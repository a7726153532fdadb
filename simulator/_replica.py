"""One replica: its waiting queue, lanes, KV blocks and pipeline stages."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from heapq import heappop, heappush
from typing import TYPE_CHECKING

from estimators import (
    AcceptedTokens,
    BatchShape,
    ExecutionTimeEstimator,
    PipelineStepCost,
    SpeculativeEstimator,
    decode_steps,
    pipeline_decode_steps,
)
from simulator._events import BATCH_END, WAKE
from simulator._kv import BlockPool
from simulator._kv_transfer import TransferQueue
from simulator._lane import Lane, make_lane
from simulator._policies import BatchPlan, Policy
from simulator._prefix_cache import PrefixCache
from simulator._request import Request

if TYPE_CHECKING:
    from simulator._engine import Simulation


def _seen_by(
    entries: list[tuple[float, Request]], now: float, ahead: bool
) -> tuple[list[Request], list[tuple[float, Request]]]:
    """(the requests the scheduler takes in after a batch ending `now`, the entries it
    still holds): each entry carries the end of the batch in flight when the request came;
    forming batches `ahead`, the batch that follows this one was formed before the requests
    that came during this one were seen, so they wait for the next batch end."""
    if not ahead:
        return [req for _, req in entries], []
    return [req for t, req in entries if t < now], [e for e in entries if e[0] >= now]


class Replica:
    """The batching core every policy runs on.

    A batch is dispatched when stage 0 is free and a lane is idle.  Its timing
    through all pipeline stages is fixed at dispatch (stages run batches in
    order, so none can overtake it), and one event marks its end on the last
    stage, when its tokens are emitted.
    """

    def __init__(
        self,
        replica_id: int,
        sim: Simulation,
        policy: Policy,
        estimator: ExecutionTimeEstimator,
        num_kv_blocks: int,
        block_size: int,
        watermark: float,
        pp: int,
        prefix_cache: PrefixCache | None = None,
        window_kv_blocks: int = 0,
    ) -> None:
        self.id = replica_id
        self.sim = sim
        self.policy = policy
        self.estimator = estimator
        self.pool = BlockPool(num_kv_blocks, block_size, watermark, window_kv_blocks)
        self.block_size = block_size
        self.pp = pp
        # speculative decoding: lanes of bursts, each drawing its own under the run's seed
        spec = estimator.config if isinstance(estimator, SpeculativeEstimator) else None
        self.bursts = spec is not None  # no decode runs without the heap (`_run_decode_steps`)
        self.lanes = [
            make_lane(lane_id, block_size,
                      AcceptedTokens(spec, [sim.options.seed, lane_id]) if spec else None)
            for lane_id in (sim.new_lane_id() for _ in range(pp))
        ]  # fmt: skip
        self.next_lane = 0
        self.stage_free = [0.0] * pp
        self.waiting: deque[Request] = deque()
        # requests preempted here that wait to run again (`_preempt`); while any does, no
        # new hand-off reserves KV blocks here (`TransferQueue`)
        self.preempted_waiting = 0
        # requests routed here that the scheduler has not taken in yet (`_poll`), each with
        # the end of the batch in flight when it arrived: a scheduler polls for new ones
        # every `recv_interval` decode iterations, and one that forms the next batch while a
        # batch runs (`schedule_ahead`) has no room for them before the batch after the next
        config = policy.config
        self.recv_interval = config.recv_interval
        self.schedule_ahead = config.schedule_ahead
        self.holds = self.recv_interval > 1 or self.schedule_ahead
        self.held: list[tuple[float, Request]] = []
        # a decode replica reserving KV when a request is routed (SGLang): the requests
        # routed here whose reservation waits for the scheduler to take them in (`_poll`)
        self.routed: list[Request] = []
        # a decode replica reserving KV at the hand-off: hand-offs that reached its
        # scheduler while a batch ran, each with that batch's end; the scheduler reserves
        # their blocks, and the transfer into them starts, when it next schedules
        # (`take_hand_off`)
        self.handed: list[tuple[float, Request]] = []
        # a decode replica under `schedule_ahead`: requests whose KV arrived while a batch
        # ran, each with that batch's end; the batch after it was formed before the engine
        # saw the transfer done, so they join the one after that (`receive`)
        self.received: list[tuple[float, Request]] = []
        self._polled_at = 0  # the decode iterations (`decode_iterations`) at its last poll
        self.outstanding = 0  # routed here and not finished
        self.now = 0.0
        self.wake_at = -1.0  # pending wake-up for a free stage 0 (PP)
        self.busy_time = 0.0  # stage-0 busy seconds
        self.prefix_cache = prefix_cache  # None: off, or the workload has no prefix hashes
        # a prefill pool's replica hands each request on once its prompt is done (its first
        # token emitted): `hand_off(req, now)` moves its KV to the decode pool
        self.hand_off: Callable[[Request, float], None] | None = None
        # a decode pool's replica that shows a transferred request's first token at the end
        # of its first step with it rather than when it admits it (FIRST_TOKEN_DECODE_STEP)
        self.first_token_on_step = False
        # a decode pool's replica: the hand-offs it accepted, their KV blocks reserved here
        # before the transfer, or waiting for room
        self.transfers: TransferQueue | None = None
        self.hardware = sim.hardware  # its pool's GPUs (MFU, MBU)
        # the decode-only run being priced (`_run_decode_steps`): (its next step, the
        # lane's kv_base and decodes it was priced for, the lane, next() of its costs)
        self._decode_run: tuple | None = None
        # the same for each lane of a pipeline (`_run_pipeline_decodes`), by lane id
        self._lane_runs: dict[int, tuple] = {}
        self._decodes_only = BatchPlan(True, [])
        self._lane_after = {lane: (i + 1) % pp for i, lane in enumerate(self.lanes)}  # next_lane

    # -- admission ---------------------------------------------------------

    def rejection(self, req: Request) -> str | None:
        """Why this replica can never serve `req`, or None."""
        tokens = self._length_here(req)
        need = self.pool.request_blocks(tokens)
        if need > self.pool.max_request_blocks():
            return (
                f"request needs {tokens} KV tokens ({need} blocks) but a replica "
                f"holds at most {self.pool.max_request_blocks() * self.block_size}"
            )
        return self.policy.rejection(req)

    def enqueue(self, req: Request, now: float) -> None:
        req.replica = self.id
        self.outstanding += 1
        if not self._takes_in_now():
            self.held.append((self.stage_free[0], req))  # until a poll takes it (`_poll`)
            return
        self._take_in(req)
        # dispatch after every arrival of this instant is queued, so they can batch together
        if self.stage_free[0] <= now and self.wake_at != now:
            self.wake_at = now
            self.sim.schedule_wake(self, now, after_arrivals=True)

    def reserve_when_polled(self, req: Request, now: float) -> None:
        """A decode replica that reserves a request's KV blocks when it is routed (SGLang's
        decode server: its scheduler takes the request in, then its DecodePreallocQueue
        reserves the blocks): the reservation (`offer_transfer`) waits for the scheduler's
        next poll for new requests (`_poll`), at once when no batch is in flight."""
        if not self._takes_in_now():
            self.routed.append(req)
            return
        self.offer_transfer(req, now)

    def _takes_in_now(self) -> bool:
        """Whether the scheduler takes in a request that arrives now at once: it does not
        hold arrivals for its polls (`holds`), or no batch is in flight, so it polls now."""
        if not self.holds:
            return True
        if any(lane.in_flight for lane in self.lanes):
            return False
        self._polled_at = self.decode_iterations()  # idle: it polls at once
        return True

    def take_hand_off(self, req: Request, now: float) -> None:
        """The decode request of a hand-off reaches this replica now (the KV reserved at the
        hand-off): its scheduler allocates the request's blocks when it schedules it, and
        the transfer into them starts then (vLLM's NixlConnector reads once the scheduler
        has allocated them, TensorRT-LLM's generation server receives into the blocks its
        scheduler allocated): at once when no batch is in flight, else when that batch
        ends, or the one after it under `schedule_ahead`."""
        if any(lane.in_flight for lane in self.lanes):
            self.handed.append((self.stage_free[0], req))
            return
        self.offer_transfer(req, now)

    def offer_transfer(self, req: Request, now: float) -> None:
        """A decode replica: reserve the KV blocks of `req`, or queue it until they fit."""
        self.transfers.offer(req, now, self.preempted_waiting)

    def _take_in(self, req: Request) -> None:
        """The scheduler takes in a new request: it waits for its prompt to be admitted,
        after the part of it the prefix cache holds."""
        req.prefill_target = req.prompt_tokens
        cache = self.prefix_cache
        if cache is not None and req.prefix is not None:
            req.cached_tokens = req.prefilled = cache.match(req.prefix, req.prompt_tokens)
        self.waiting.append(req)

    def decode_iterations(self) -> int:
        """Decode iterations (lane steps) the replica has completed."""
        return sum(lane.step for lane in self.lanes)

    def _poll(self, plan: BatchPlan, now: float) -> None:
        """After a batch ending `now`, the scheduler takes in held requests if it polls now:
        after a batch with prompt tokens, after every `recv_interval` decode iterations since
        its last poll (it polls on that count even with nothing held), or when nothing is
        left to run.  Under `schedule_ahead` the batch that follows was formed while this one
        ran, so it takes in only the requests that arrived before this batch (the batch in
        flight at their arrival ended before `now`); the others wait for the next batch end,
        unless nothing is left to run.  A decode replica's routed requests (`routed`) have
        their KV blocks reserved at the poll itself, the batch in flight aside (SGLang's
        decode loop reserves them as it takes them in, before it forms a batch)."""
        iterations = self.decode_iterations()
        idle = not (self.waiting or any(lane.num_seqs for lane in self.lanes))
        if not (
            plan.prefills or idle or (iterations - self._polled_at) % self.recv_interval == 0
        ):
            return
        self._polled_at = iterations
        held, self.held = _seen_by(self.held, now, self.schedule_ahead and not idle)
        for req in held:
            self._take_in(req)
        routed, self.routed = self.routed, []
        for req in routed:
            self.offer_transfer(req, now)

    def receive(self, req: Request, now: float) -> None:
        """A request whose prompt a prefill pool computed arrives with its KV cache (a
        decode pool's replica, counted in `outstanding` since the hand-off): it waits for
        KV blocks like a new prompt, then decodes.  The engines see a transfer done at an
        iteration boundary (vLLM's connector reports it with a step's output, SGLang's and
        TensorRT-LLM's loops check their transfers before they form a batch), so under
        `schedule_ahead` one that completes while a batch runs misses the batch formed
        during it, as a new arrival does, whatever the replica's `recv_interval` (the
        transfers are checked every iteration)."""
        req.replica = self.id
        if self.schedule_ahead and any(lane.in_flight for lane in self.lanes):
            self.received.append((self.stage_free[0], req))
            return
        self._queue_received(req)
        if self.stage_free[0] <= now and self.wake_at != now:
            self.wake_at = now
            self.sim.schedule_wake(self, now, after_arrivals=True)

    def _queue_received(self, req: Request) -> None:
        """A received request, its blocks reserved, waits for admission ahead of those
        preempted here (`_holders_end`)."""
        if self.preempted_waiting:
            self.waiting.insert(self._holders_end(), req)
        else:
            self.waiting.append(req)

    def _queues_requests(self) -> bool:
        """Whether any request waits here outside the running batch (a burst, the waiting
        queue, or one held for the scheduler: an arrival, a routed or handed-off decode
        request, a received transfer), so a run of decode steps may not go on alone."""
        return bool(
            self.bursts or self.waiting or self.held or self.routed or self.handed or self.received
        )

    def _take_in_disaggregated(self, now: float, formed_ahead: bool = True) -> None:
        """A decode replica after a batch ending `now`: the hand-offs (`take_hand_off`) and
        the finished transfers (`receive`) its scheduler has seen by the batch it forms
        next get their blocks and join the waiting queue; under `schedule_ahead` those seen
        during this batch wait for the next batch end, unless nothing is left to run or
        the batch formed ahead was none (`formed_ahead` False: `on_batch_end`)."""
        busy = bool(self.waiting) or any(lane.num_seqs for lane in self.lanes)
        ahead = formed_ahead and self.schedule_ahead and busy
        if self.handed:
            handed, self.handed = _seen_by(self.handed, now, ahead)
            for req in handed:
                self.offer_transfer(req, now)
        if self.received:
            received, self.received = _seen_by(self.received, now, ahead)
            for req in received:
                self._queue_received(req)

    def admit(self, req: Request, lane: Lane) -> bool:
        """Move the head of the waiting queue into `lane` if its KV blocks fit (a request
        whose KV came from a prefill pool joins the lane's decodes at once)."""
        pool = self.pool
        if req.blocks:  # reserved here at the hand-off (`TransferQueue`): the prompt's
            # blocks are the lane's now, the rest give way to its first step's below
            pool.release(req.blocks - self.pool.request_blocks(req.prefill_target))
            req.blocks = 0
        else:
            need = self.pool.request_blocks(req.prefill_target)
            shared: tuple[int, ...] = ()
            saved = 0
            if req.prefilled and req.prefix is not None and self.prefix_cache is not None:
                # its cached prefix: blocks other running requests hold cost it nothing
                shared, saved = self.prefix_cache.reusable(req.prefix, req.prefilled)
                need -= saved
            if self.policy.reserves_full_length:
                full = self.pool.request_blocks(self._length_here(req)) - saved
                if not pool.can_admit(full):
                    return False
                pool.reserved += full - need
            elif not pool.can_admit(need):
                return False
            pool.allocate(need)
            if shared:
                self.prefix_cache.hold(shared)
                req.shared_prefix = shared
            if req.generated:  # waiting with output tokens and no blocks: one preempted here
                self.preempted_waiting -= 1
        self.waiting.popleft()
        if math.isnan(req.scheduled_at):
            req.scheduled_at = self.now
        if req.generated and not req.remaining_prefill:  # its KV arrived from a prefill pool
            emit = req.first_token_at
            if emit != emit:  # NaN: this replica shows the client its first token
                emit = self.now
                if self.first_token_on_step:
                    lane.first_token_due.append(req)  # at the end of the coming step
                else:
                    req.first_token_at = emit  # now, at the iteration boundary
            lane.join(req, req.prefill_target, req.output_tokens - req.generated, emit)
            if lane.prepared_step == lane.step:  # the coming step's blocks prepare_decodes missed
                step_blocks = lane.step_blocks_of(req)
                if self.policy.reserves_full_length:
                    pool.reserved -= step_blocks  # out of its reserved length
                pool.allocate(step_blocks)
        else:
            lane.prefilling.append(req)
        transfers = self.transfers
        if transfers is not None and transfers.waiting:
            # a decode replica: the slots it kept for the first step beyond the coming one
            # are free again, or a preempted request no longer holds the transfers back
            transfers.retry(self.now, self.preempted_waiting)
        return True

    def _holders_end(self) -> int:
        """Where the waiting requests that hold their KV blocks end.  On a decode replica
        they (received from the prefill pool, their blocks reserved: `TransferQueue`) come
        before those it preempted: they need no more blocks to run and may free what a
        preempted one lacks, as SGLang's decode server runs its transferred requests while
        retracted ones wait for room; the other way round, a preempted request short of
        the blocks they hold would wait for ever.  Elsewhere no waiting request holds any."""
        return len(self.waiting) - self.preempted_waiting if self.transfers is not None else 0

    def _length_here(self, req: Request) -> int:
        """The KV tokens `req` can come to hold on this replica (what a full-length
        reservation keeps for it, what must fit for it to be served at all): its whole
        length, or on a prefill pool's replica its prompt, the engines' disaggregated
        frontends asking the prefill for one token (TensorRT-LLM's disaggregated server:
        max_tokens 1, context_only; vLLM's P/D proxy likewise), its KV freed once sent
        (`kv_sent`)."""
        return req.prompt_tokens if self.hand_off is not None else req.total_tokens

    def prepare_decodes(self, lane: Lane) -> None:
        """Allocate the KV blocks of the lane's coming decode step, preempting if short."""
        pool = self.pool
        need = lane.blocks_needed()
        while need > pool.free:  # reserved blocks (static batching) are the lane's own
            victim = lane.latest_arrival()
            if victim is None:
                break
            self._preempt(victim, lane)
            need = lane.blocks_needed()
        if need:
            if self.policy.reserves_full_length:
                pool.reserved -= need
            pool.allocate(need)
        lane.prepared_step = lane.step

    def _preempt(self, req: Request, lane: Lane) -> None:
        kv_tokens = lane.leave(req)
        req.prefill_target = req.prompt_tokens + req.generated
        req.prefilled = 0
        req.preemptions += 1
        self.waiting.insert(self._holders_end(), req)  # first in line but for those
        self.preempted_waiting += 1  # before its blocks go: transfers wait for it
        self._release_kv(req, kv_tokens, self.now)

    # -- dispatch ----------------------------------------------------------

    def try_dispatch(self, now: float, first: int = 0) -> None:
        """Dispatch what the policy plans for the idle lanes, in turn from `next_lane` (the
        `first` ones already visited), while stage 0 is free."""
        self.now = now
        stage_free = self.stage_free
        lanes = self.lanes
        n = len(lanes)
        for k in range(first, n):
            if stage_free[0] > now:
                break
            lane = lanes[(self.next_lane + k) % n]
            if lane.in_flight:
                continue
            plan = self.policy.plan(lane, self)
            if plan is not None:
                self._dispatch(lane, plan, now)
                self.next_lane = (lane.id - self.lanes[0].id + 1) % n
        # under PP, come back when stage 0 frees up if a lane is still idle
        free_at = stage_free[0]
        if (
            n > 1
            and free_at > now
            and self.wake_at != free_at
            and not all(lane.in_flight for lane in lanes)
        ):
            self.wake_at = free_at
            self.sim.schedule_wake(self, free_at)

    def _dispatch(self, lane: Lane, plan: BatchPlan, now: float) -> None:
        prefill_tokens = 0
        pairs = 0.0
        prefill_kv = 0
        for req, q in plan.prefills:
            ctx = req.prefilled
            prefill_tokens += q
            pairs += q * (ctx + (q + 1) * 0.5)
            prefill_kv += ctx + q
        if plan.run_decodes:
            num_decodes = len(lane.members)
            decode_kv = lane.decode_kv_tokens()
        else:
            num_decodes = 0
            decode_kv = 0
        cost = self.estimator.batch_cost(
            BatchShape(
                prefill_tokens, len(plan.prefills), pairs, prefill_kv, num_decodes, decode_kv
            )
        )
        stage_times = cost.stage_times
        stage_free = self.stage_free
        end = now + cost.cpu_overhead + stage_times[0]
        self.busy_time += end - now
        stage_free[0] = end
        spans = self.sim.stage_spans
        if spans is not None:  # only for --trace-out: nothing added to the hot path otherwise
            batch_index = len(self.sim.batches)  # the row `record_batch` appends below
            spans.append((self.id, 0, now, end, batch_index))
        for s in range(1, self.pp):
            start = end + cost.pp_hop_time
            if stage_free[s] > start:
                start = stage_free[s]
            end = start + stage_times[s]
            stage_free[s] = end
            if spans is not None:
                spans.append((self.id, s, start, end, batch_index))
        lane.in_flight = True
        self.sim.record_batch(
            self, lane, now, end, prefill_tokens, len(plan.prefills), num_decodes, cost
        )
        self.sim.schedule_batch_end(self, lane, plan, end)

    def _run_decode_steps(self, lane: Lane, plan: BatchPlan, now: float) -> bool:
        """`try_dispatch` for a one-lane replica (pp == 1) when every policy's plan is the lane's
        decodes alone: nothing waiting, no prompt being chunked, and the step's new KV
        blocks free (no preemption).  Dispatches the decode step as `prepare_decodes` and
        `_dispatch` would, reusing `plan` (decodes only), and returns True; False, with
        nothing done, when those conditions do not hold.

        While a step's end is the event the simulation would pop next
        (`Simulation.batch_end_horizon`), that end is handled here at once, as the event
        loop and `on_batch_end` would handle it, and the next step dispatched: the same
        events in the same order, without the event heap.  The steps are priced by
        `decode_steps` while the batch stays the same."""
        pool = self.pool
        block_size = self.block_size
        phase = lane.phase
        step = lane.step
        need = phase[-step % block_size]  # lane.blocks_needed()
        sim = self.sim
        if (
            self._queues_requests()
            or lane.prefilling
            or not lane.members
            or need > pool.total - pool.used
            or sim.stage_spans is not None
        ):
            return False
        members = lane.members
        rows = sim.batches.rows
        stage_free = self.stage_free
        reserves = self.policy.reserves_full_length
        replica_id = self.id
        num_decodes = len(members)
        kv_base = lane.kv_base
        run = self._decode_run  # (next step, kv_base, decodes, lane, next()) of its pricing
        if (
            run is not None
            and run[0] == step
            and run[1] == kv_base
            and run[2] == num_decodes
            and run[3] is lane
        ):
            price = run[4]
        else:
            price = decode_steps(self.estimator, num_decodes, kv_base + num_decodes * step).__next__
        horizon, at_horizon = sim.batch_end_horizon()
        countdown = sim.events_to_progress
        busy = self.busy_time
        finish_heap = lane.finish_heap
        step_ends = lane.step_end_times
        self.next_lane = 0
        while True:
            # dispatch the decode step `step`: its new KV blocks, its cost, its batch-log row
            if need:
                if reserves:
                    pool.reserved -= need
                used = pool.used + need
                pool.used = used
                if used > pool.peak_used:
                    pool.peak_used = used
            lane.prepared_step = step
            host, stage, flops, nbytes = price()
            end = now + host + stage
            busy += end - now
            rows.append((replica_id, now, end, 0, 0, num_decodes, pool.used, flops, nbytes))
            if end > horizon or (end == horizon and not at_horizon) or countdown == 1:
                break
            # its end is the next event: handled here as `Simulation.run` would (one event
            # of the progress countdown) and `on_batch_end`
            countdown -= 1
            sim.now = now = end
            if finish_heap[0][0] > step:  # `lane.complete_step` when no member finishes
                step_ends.append(end)
                step += 1
                lane.step = step
                need = phase[-step % block_size]
                if need <= pool.total - pool.used:
                    continue
                done = ()
            else:
                done = lane.complete_step(end)
                step += 1
                if done:
                    for req in done:
                        self._finish(req, req.total_tokens, end)
                    horizon, at_horizon = sim.batch_end_horizon()  # a closed loop's arrival
                need = phase[-step % block_size]
            if self.waiting or not members or need > pool.total - pool.used:
                self._decode_run = (step, kv_base, num_decodes, lane, price)
                self.busy_time = busy
                sim.events_to_progress = countdown
                stage_free[0] = end
                self.try_dispatch(end)
                return True
            if done:
                num_decodes = len(members)
                kv_base = lane.kv_base
                price = decode_steps(
                    self.estimator, num_decodes, kv_base + num_decodes * step
                ).__next__
        self._decode_run = (step + 1, kv_base, num_decodes, lane, price)
        self.busy_time = busy
        sim.events_to_progress = countdown
        stage_free[0] = end
        self.now = now
        lane.in_flight = True
        sim.schedule_batch_end(self, lane, plan, end)
        return True

    def _run_pipeline_decodes(self, now: float) -> bool:
        """`try_dispatch` for a pipeline-parallel replica (pp > 1) when every policy's plan
        is each lane's decodes alone (nothing waiting, no prompt being chunked: see
        `Policy.prepares_empty_lanes`), then the replica's own events that follow while
        each is the one `Simulation.run` would pop next.  Returns True, or False with
        nothing done when those conditions do not hold.

        Why it is exact.  The replica's own events (its lanes' batch ends, its stage-0
        wake-ups) leave the event heap for two queues here, each in the heap's order:
        batch ends by dispatch, since a batch cannot overtake the one before it on any
        stage (its end on the last stage is no earlier), and wake-ups by creation, since
        stage 0 frees up no earlier each time.  New ones take the sequence numbers the
        heap would give them, so every event keeps its key (time, kind, sequence number).
        The earlier of the two queues' heads is handled here while it comes before the
        heap's first entry, the next open-loop arrival and the time limit, and not after
        the progress hook's turn (each one counts in its countdown): the order and times
        `run` would handle them in.  Each is handled as `on_batch_end` (decodes alone) or a
        wake-up would handle it, with `try_dispatch`'s visit of the lanes inlined: the same
        state changes in the same order, each step's stage times from
        `pipeline_decode_steps`, which equal `batch_cost`'s.  The queues go back to the
        heap, with their keys, when this stops.  A lane whose coming step needs more KV
        blocks than are free (a preemption) stops it too, and `try_dispatch` then asks the
        policy.  What this saves: the heap, the policy's plan of every lane visited, the
        `BatchShape` and `BatchCost` of every step, the event loop's dispatch by kind.
        While one lane decodes and the others are empty (a pipeline at low load), its steps
        need neither queue: each is its dispatch, a wake-up that dispatches nothing, and
        its end, handled at once when both come next."""
        sim = self.sim
        if self._queues_requests() or sim.stage_spans is not None:
            return False
        lanes = self.lanes
        for lane in lanes:
            if lane.prefilling:  # also: no batch in flight carries a prompt chunk
                return False
        heap = sim._heap
        # the events made here, kept off the heap: (time, sequence number, lane) of the
        # batches dispatched, and (time, sequence number, None) of stage-0 wake-ups
        ends: deque[tuple] = deque()
        wakes: deque[tuple] = deque()
        n = len(lanes)
        last = n - 1  # `empty` when one lane has decodes
        after = self._lane_after
        stage_free = self.stage_free
        later_stages = range(1, self.pp)
        pool = self.pool
        block_size = self.block_size
        reserves = self.policy.reserves_full_length
        prepares_empty = self.policy.prepares_empty_lanes
        rows = sim.batches.rows
        replica_id = self.id
        countdown = sim.events_to_progress
        seq = sim._seq  # the heap's sequence numbers, given here to the events made here
        busy = self.busy_time
        prices: dict[Lane, Callable[[], PipelineStepCost]] = {}  # each lane's run of steps
        # idle lanes with decodes (a visit dispatches one), lanes without decodes (idle),
        # and whether a visit would still mark one of those prepared: with none of the
        # three, visiting the lanes changes nothing
        ready = empty = 0
        unprepared = False
        for lane in lanes:
            if not lane.members:
                empty += 1
                unprepared |= prepares_empty and lane.prepared_step != lane.step
            elif not lane.in_flight:
                ready += 1
        only_ready: Lane | None = None  # the one lane a visit would dispatch, when known
        limit = sim._next_arrival  # an own event at this time still goes first
        if sim._max_time < limit:
            limit = sim._max_time
        t = now
        visit = True
        while True:
            if visit:  # `try_dispatch(t)`: the lanes in turn from `next_lane`
                k = 0 if ready or unprepared else n
                while stage_free[0] <= t:
                    if only_ready is not None:  # the others' visits would change nothing
                        lane = only_ready
                        only_ready = None
                        visited = 0
                        k = n
                    else:
                        if k == n:
                            break
                        lane = lanes[(self.next_lane + k) % n]
                        visited = k
                        k += 1
                        if lane.in_flight:
                            continue
                        if not lane.members:
                            if prepares_empty:  # the policy's plan: nothing to run
                                lane.prepared_step = lane.step
                            continue
                    step = lane.step
                    need = lane.phase[-step % block_size]  # `prepare_decodes`
                    if need:
                        if need > pool.total - pool.used:  # a preemption: the policy decides
                            self.busy_time = busy
                            sim._seq = seq
                            sim.now = t
                            self._end_pipeline_run(ends, wakes, prices)
                            sim.events_to_progress = countdown
                            self.try_dispatch(t, visited)  # the rest of this visit
                            return True
                        if reserves:
                            pool.reserved -= need
                        pool.allocate(need)
                    lane.prepared_step = step
                    # `_dispatch` of the decodes, priced by the lane's `pipeline_decode_steps`
                    price = prices.get(lane)
                    if price is None:
                        price = prices[lane] = self._lane_price(lane)
                    host, stage_times, hop, flops, nbytes = price()
                    free_at = t + host + stage_times[0]
                    busy += free_at - t
                    stage_free[0] = end = free_at
                    for s in later_stages:
                        start = end + hop
                        if stage_free[s] > start:
                            start = stage_free[s]
                        end = start + stage_times[s]
                        stage_free[s] = end
                    lane.in_flight = True
                    ready -= 1
                    nd = len(lane.members)
                    rows.append((replica_id, t, end, 0, 0, nd, pool.used, flops, nbytes))
                    seq += 1
                    self.next_lane = after[lane]
                    if (
                        empty == last
                        and not (ends or wakes or unprepared)
                        and t < free_at < end <= limit
                        and self.wake_at != free_at
                        and not 0 < countdown < 3
                        and not (heap and heap[0] < (end, BATCH_END, seq))
                        and not lane.first_token_due
                        and lane.finish_heap[0][0] > step
                    ):
                        # the only lane with decodes: its wake-up when stage 0 frees up
                        # (which dispatches nothing) and its end, which finishes no member,
                        # come next; handled at once, they lead to its next step
                        seq += 1
                        countdown -= 2
                        self.wake_at = -1.0
                        t = end
                        lane.in_flight = False
                        lane.step_end_times.append(t)
                        lane.step = step + 1
                        ready = 1
                        only_ready = lane
                        k = n
                        continue
                    ends.append((end, seq, lane))
                if unprepared:
                    unprepared = any(not x.members and x.prepared_step != x.step for x in lanes)
                free_at = stage_free[0]
                if free_at > t and self.wake_at != free_at and (ready or empty):
                    self.wake_at = free_at  # come back when stage 0 frees up for an idle lane
                    seq += 1
                    wakes.append((free_at, seq, None))
            # the next event: the first of the two queues' heads and the heap's first entry,
            # handled here if it is the replica's own batch end or wake-up
            if wakes:
                queue = wakes
                kind = WAKE
                if ends and ends[0][0] <= wakes[0][0]:
                    queue = ends
                    kind = BATCH_END
            elif ends:
                queue = ends
                kind = BATCH_END
            elif heap:
                queue = None
            else:
                break
            if heap:
                top = heap[0]
                if queue is None or top < (queue[0][0], kind, queue[0][1]):
                    if top[3] is not self or top[1] > WAKE:
                        break
                    queue = None
                    kind = top[1]
            at = queue[0][0] if queue is not None else top[0]
            if at > limit or countdown == 1:
                break  # an arrival, the end of the run, or the progress hook comes first
            countdown -= 1
            lane = queue.popleft()[2] if queue is not None else heappop(heap)[4]
            t = at  # the clocks, `sim.now` and `self.now`, are set when this stops
            if kind == WAKE:
                self.wake_at = -1.0
                # the visit changes nothing when no lane is ready and stage 0 is free
                visit = ready or unprepared or stage_free[0] > t
                continue
            visit = True
            lane.in_flight = False
            step = lane.step
            if lane.first_token_due or lane.finish_heap[0][0] <= step:
                done = lane.complete_step(t)
                if done:
                    prices.pop(lane, None)  # other members: another run of steps
                    sim._seq = seq
                    sim.now = t
                    for req in done:
                        self._finish(req, req.total_tokens, t)
                    seq = sim._seq  # a closed loop's arrivals
                if not lane.members:
                    empty += 1
                    unprepared |= prepares_empty
                    only_ready = None
                    continue
            else:  # `lane.complete_step` when no member finishes
                lane.step_end_times.append(t)
                lane.step = step + 1
            ready += 1
            only_ready = lane if ready == 1 and not unprepared else None
        self.busy_time = busy
        sim._seq = seq
        sim.now = self.now = t
        self._end_pipeline_run(ends, wakes, prices)
        sim.events_to_progress = countdown
        return True

    def _lane_price(self, lane: Lane) -> Callable[[], PipelineStepCost]:
        """`next()` of the costs of `lane`'s coming decode steps: the run priced before, if
        it is still the lane's (same members, this step next), else a new one."""
        nd = len(lane.members)
        run = self._lane_runs.get(lane.id)
        if run is not None and run[0] == lane.step and run[1] == lane.kv_base and run[2] == nd:
            return run[3]
        return pipeline_decode_steps(
            self.estimator, nd, lane.kv_base + nd * lane.step
        ).__next__

    def _end_pipeline_run(
        self, ends: deque[tuple], wakes: deque[tuple], prices: dict[Lane, Callable]
    ) -> None:
        """Put `_run_pipeline_decodes`'s queues of own events back on the event heap, and
        keep its lanes' runs of steps for the next time."""
        heap = self.sim._heap
        plan = self._decodes_only
        for t, seq, lane in ends:
            heappush(heap, (t, BATCH_END, seq, self, lane, plan))
        for t, seq, _ in wakes:
            heappush(heap, (t, WAKE, seq, self, None, None))
        for lane, price in prices.items():  # next: the step after the one dispatched last
            step = lane.step + 1 if lane.in_flight else lane.step
            self._lane_runs[lane.id] = (step, lane.kv_base, len(lane.members), price)

    # -- completion --------------------------------------------------------

    def on_batch_end(self, lane: Lane, plan: BatchPlan, now: float) -> None:
        lane.in_flight = False
        if plan.run_decodes:
            for req in lane.complete_step(now):
                self._finish(req, req.total_tokens, now)
        if plan.prefills:
            for req, q in plan.prefills:
                req.prefilled += q
                if req.prefilled < req.prefill_target:
                    continue
                # the prompt is done: its blocks enter the prefix cache, it emits one token
                cache = self.prefix_cache
                if cache is not None and req.prefix is not None:
                    cache.insert(req.prefix)
                    held = req.shared_prefix
                    adopted = cache.adopt(req.prefix, len(held), req.prompt_tokens)
                    if adopted:
                        req.shared_prefix = held + adopted
                req.generated += 1
                if self.hand_off is not None and req.generated < req.output_tokens:
                    # prefill pool: the KV goes to a decode pool, which decides when the
                    # client sees the first token; its blocks here stay until it has been
                    # sent (`kv_sent`)
                    self.outstanding -= 1
                    self.hand_off(req, now)
                    continue
                if math.isnan(req.first_token_at):
                    req.first_token_at = now
                    if req.segments:  # its prefill pool's token, never shown: a decode
                        # replica preempted it before the step that was to show it
                        # (FIRST_TOKEN_DECODE_STEP); the client sees it now, with this one
                        req.segments = [(now, *seg[1:]) for seg in req.segments]
                if req.generated >= req.output_tokens:
                    req.segments.append((now, lane.id, lane.step, lane.step))
                    self._finish(req, req.prefill_target, now)
                else:
                    lane.join(req, req.prefill_target, req.output_tokens - req.generated, now)
            lane.prefilling = [r for r in lane.prefilling if r.prefilled < r.prefill_target]
            if self.holds:
                self._poll(plan, now)  # after a batch with prompt tokens, it polls
            if self.handed or self.received:
                self._take_in_disaggregated(now)
        else:
            if self.held or self.routed:
                self._poll(plan, now)
            if self.handed or self.received:
                self._take_in_disaggregated(now)
            if self.pp == 1:
                if self._run_decode_steps(lane, plan, now):  # decodes alone: no policy to ask
                    return
            elif self._run_pipeline_decodes(now):
                return
        self.try_dispatch(now)
        if (self.handed or self.received) and not any(lane.in_flight for lane in self.lanes):
            # no batch formed (what waits is short of KV blocks, which a deferred transfer
            # may hold): the scheduler's next loop, at once, sees the transfers it deferred
            self._take_in_disaggregated(now, formed_ahead=False)
            self.try_dispatch(now)

    def kv_sent(self, req: Request, now: float) -> None:
        """A prefill pool's replica: the KV of `req`, handed off, has reached the decode
        pool (or will never go), so its blocks here are free, as the engines free them once
        the transfer is done (SGLang's prefill server after the sender's completion, vLLM's
        NixlConnector after the decode side's read, TensorRT-LLM's context server after the
        transmission); a prompt that waited for them may start."""
        self._release_kv(req, req.prefill_target, now)
        if self.waiting and self.stage_free[0] <= now and self.wake_at != now:
            self.wake_at = now
            self.sim.schedule_wake(self, now, after_arrivals=True)

    def _finish(self, req: Request, kv_tokens: int, now: float) -> None:
        req.completed_at = now
        self._release_kv(req, kv_tokens, now)
        self.outstanding -= 1
        self.sim.on_request_done(req, now)

    def _release_kv(self, req: Request, kv_tokens: int, now: float) -> None:
        """Free the KV blocks of `req`'s `kv_tokens`: its own, and of its shared prefix
        blocks those it held the last reference to.  A decode replica's requests waiting
        for blocks (`TransferQueue`) take them if they now fit."""
        blocks = self.pool.request_blocks(kv_tokens)
        shared = req.shared_prefix
        if shared:
            cache = self.prefix_cache
            blocks += cache.release(shared) - len(shared) * cache.kv_blocks_per_block
            req.shared_prefix = ()
        self.pool.release(blocks)
        transfers = self.transfers
        if transfers is not None and transfers.waiting:
            transfers.retry(now, self.preempted_waiting)
