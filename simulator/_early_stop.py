"""Progress hooks that stop a run once its latency verdict is certain to be "fails".

A `Simulation`'s ``on_progress`` hook is called every few events with the simulation and
stops the run when it returns True.  The counters here read the run's requests and batch
log as they go, each visited once:

* `LateRequestCounter` counts requests whose delay to one event (scheduling, first
  token, completion) reached a bound, or that have waited that long without it;
* `SlowGapCounter` counts token gaps certain to reach a bound (decodes of a batch
  that lasted the bound or more);
* `SlowTpotCounter` counts requests whose TPOT is certain to reach a bound (finished
  with it, or decoding for longer than the bound times their decode steps).

`slow_gap_share` gives the share of a run's token gaps so far at or above a bound (what the
capacity search steers its next probe by), and `waiting_delays`, for a run stopped early,
each arrived and served request's delay to the event so far (the time waited, for those
still waiting).
"""

from __future__ import annotations

import math

import numpy as np

from simulator._engine import Simulation
from simulator._metrics import token_gaps

# Latency metrics whose late requests can be counted while the run goes: a request's
# value is (time of one event - arrival), and a request still waiting for that event
# already has at least (now - arrival).  The request attribute of that event:
_EVENT_OF_METRIC = {
    "scheduling_delay": "scheduled_at",
    "ttft": "first_token_at",
    "e2e": "completed_at",
}

EARLY_STOP_METRICS: frozenset[str] = frozenset(_EVENT_OF_METRIC)


def _event_attr(metric: str) -> str:
    try:
        return _EVENT_OF_METRIC[metric]
    except KeyError:
        raise ValueError(
            f"metric {metric!r} has no per-request event to count; one of "
            f"{sorted(_EVENT_OF_METRIC)}"
        ) from None


class LateRequestCounter:
    """An ``on_progress`` hook: stops the run once `limit` requests are late for `metric`.

    A request is late when its delay from arrival to the metric's event (one of
    `EARLY_STOP_METRICS`) reached `bound`, or when it has waited `bound` without the event.
    Requests are visited in arrival order with a pointer that only moves forward: a
    request is settled once its event happened (late or not, it is counted) or once it
    has waited `bound` without it (late for good).  The pointer stops at the first
    unsettled request.  No request behind it can be late unless this one is: it arrived
    no earlier, and its event came no earlier than now.  So the count is exact at every
    call, at O(1) amortised cost per request.  Rejected requests are not counted.
    """

    __slots__ = ("attr", "bound", "late", "limit", "ptr")

    def __init__(self, metric: str, bound: float, limit: int) -> None:
        self.attr = _event_attr(metric)
        self.bound = bound
        self.limit = limit
        self.late = 0  # requests counted late so far
        self.ptr = 0

    def __call__(self, sim: Simulation) -> bool:
        reqs = sim.requests
        n = len(reqs)
        now = sim.now
        bound = self.bound
        attr = self.attr
        i = self.ptr
        late = self.late
        while i < n:
            req = reqs[i]
            t = getattr(req, attr)
            if t == t:  # the event happened (not NaN)
                if t - req.arrival >= bound:
                    late += 1
            elif req.rejected is not None:
                pass  # never served: outside the percentile's population
            elif req.arrival <= now and now - req.arrival >= bound:
                late += 1  # its delay only grows from here
            else:
                break
            i += 1
        self.ptr = i
        self.late = late
        return late >= self.limit


class SlowGapCounter:
    """An ``on_progress`` hook for a TBT bound: stops the run once `limit` token gaps are
    certain to reach `bound`.

    A decode step (a batch) that lasts `bound` or more gives each of its decode requests a
    gap at least that long: its previous token was emitted no later than the step began.
    So the count of such steps' decodes is a lower bound on the gaps >= bound.  Batches
    are logged at dispatch with their end, visited once each.
    """

    __slots__ = ("bound", "limit", "ptr", "slow")

    def __init__(self, bound: float, limit: int) -> None:
        self.bound = bound
        self.limit = limit
        self.slow = 0  # gaps counted so far
        self.ptr = 0

    def __call__(self, sim: Simulation) -> bool:
        rows = sim.batches.rows
        bound = self.bound
        slow = self.slow
        for i in range(self.ptr, len(rows)):
            row = rows[i]  # (replica, start, end, prefill tokens, prefills, decodes, ...)
            if row[2] - row[1] >= bound:
                slow += row[5]
        self.ptr = len(rows)
        self.slow = slow
        return slow >= self.limit


class SlowTpotCounter:
    """An ``on_progress`` hook for a TPOT bound: stops the run once `limit` requests are
    certain to have a TPOT of at least `bound`.

    A request's TPOT is (completion - first token) / (output - 1), over the requests of
    more than one output token.  One that finished is counted by its value; one still
    decoding already has at least (now - first token) / (output - 1), so it is late for
    good once that reached `bound`.  Requests are taken up in arrival order once they
    have their first token (a pointer that stops at the first without one), then watched
    until settled: the watched ones are at most those in flight.  Rejected requests and
    those of one output token are outside TPOT's population.
    """

    __slots__ = ("bound", "decoding", "late", "limit", "ptr")

    def __init__(self, bound: float, limit: int) -> None:
        self.bound = bound
        self.limit = limit
        self.late = 0  # requests counted late so far
        self.ptr = 0
        self.decoding: list = []  # requests with a first token, not settled yet

    def __call__(self, sim: Simulation) -> bool:
        reqs = sim.requests
        n = len(reqs)
        i = self.ptr
        decoding = self.decoding
        while i < n:
            req = reqs[i]
            if req.rejected is not None or req.output_tokens < 2:
                pass  # outside the population
            elif req.first_token_at == req.first_token_at:  # has its first token
                decoding.append(req)
            else:
                break
            i += 1
        self.ptr = i
        now = sim.now
        bound = self.bound
        late = self.late
        keep = []
        for req in decoding:
            arrival = req.arrival
            ttft = req.first_token_at - arrival
            end = req.completed_at
            # as `request_arrays` computes it: (e2e - ttft) / (output - 1)
            if end == end:  # finished: its TPOT is known
                if ((end - arrival) - ttft) / (req.output_tokens - 1) >= bound:
                    late += 1
            elif ((now - arrival) - ttft) / (req.output_tokens - 1) >= bound:
                late += 1  # its TPOT only grows from here
            else:
                keep.append(req)
        self.decoding = keep
        self.late = late
        return late >= self.limit


def slow_gap_share(sim: Simulation, bound: float) -> float:
    """Share of the run's token gaps so far (`token_gaps`: of the requests' finished decode
    segments) that are at least `bound`; NaN when there is none yet."""
    gaps = token_gaps(sim)
    total = int(gaps.weights.sum())
    if total <= 0:
        return math.nan
    return float(gaps.weights[gaps.values >= bound].sum()) / total


def waiting_delays(sim: Simulation, metric: str) -> np.ndarray:
    """Delay to `metric`'s event of every served request arrived by ``sim.now``.

    A request still waiting for the event counts the time it has waited so far; requests
    not yet arrived, and rejected ones, are left out.
    """
    event = _event_attr(metric)
    now = sim.now
    values: list[float] = []
    for req in sim.requests:
        if req.rejected is None and req.arrival <= now:
            t = getattr(req, event)
            values.append((t if t == t else now) - req.arrival)  # NaN: still waiting
    return np.asarray(values, dtype=np.float64)
