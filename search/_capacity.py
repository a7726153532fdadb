"""One configuration's capacity search (Vidur-Search), as a worker process runs it.

The capacity of a deployment is the largest arrival rate at which a latency
percentile (by default the P99 scheduling delay, DESIGN.md "Domain rules") stays
under its bound.  `find_capacity` finds it by simulation:

* **One workload, rescaled.**  The workload's arrival times are normalised once
  to a unit mean rate; the probe at rate ``q`` replays the same requests at
  ``unit / q`` (a Poisson stream stays Poisson, a trace keeps its own shape).
  Prompt and output arrays are shared by every probe, never redrawn.
* **Bracketed by an analytic bound.**  `simulator.service_bound` prices the workload
  at the best batching the scheduler, the batch cap and the KV memory allow: the
  most the deployment can sustain (its steady-state ceiling).  `throughput_upper_bound`
  adds the slack a finite run leaves (the first requests fill the batches, the
  last may wait up to the SLO's bound): no simulation passes above it.  The first
  probe is at a share of the ceiling (or at a hint, e.g. a neighbouring
  configuration's capacity); the search brackets up, never past the finite-run
  bound (or, where that does not hold, past the ceiling: a run that passes there
  is too short to load the deployment, and the capacity is the ceiling with no
  failing rate known), or down (halving), and bisects geometrically until the
  bracket is within the relative tolerance.
* **Steered by the slow token gaps.**  Where a TBT SLO is missed, the run's share of
  token gaps at or above its bound, over the share its percentile allows, says how far
  the rate is from meeting it (`_Search.tbt_capacity_estimate`: in proportion to the
  rate from a failing run alone, a power of it between a passing and a failing one).
  The next probe goes where that ratio is estimated to be 1 (a tolerance inside the
  bracket, at most `STEERED` probes in a row between geometric bisections), not only
  at the bracket's middle.  It places probes, never decides one: verdicts are the
  simulations', so the bracket holds the capacity as the halving search's does.
* **Measured, or flagged.**  A search that passes at the ceiling has no failing
  rate: the workload was too short to load the deployment, and the capacity rests
  on the analytic ceiling, not on a measurement.  Given a workload longer than the
  requests it starts on (`find_capacity`'s `num_requests`), the search then runs
  again on twice as many requests of the same stream (warm-started at the rate
  that passed), until some rate fails (`CapacityResult.capacity_kind` "measured")
  or the workload has no more requests ("ceiling").
* **Exact early stop.**  With N requests and the SLO at percentile p, the run
  fails as soon as more than about (1 - p/100) N requests (`late_limit`, the
  inverted-CDF count of `simulator.weighted_percentiles`) are already late: their
  delay, or the delay accrued while still waiting, reached the bound.  Nothing
  later can pull the percentile back, so the probe stops there and counts as
  failed, the verdict the full run would give.  This holds for SLOs on
  scheduling delay, TTFT and e2e latency, the capacity SLO and the `also` ones
  alike (the first certain to fail stops the run; `simulator.LateRequestCounter`).
  TBT likewise, on token gaps: a decode step lasting the bound or more gives each of
  its decodes a gap at least that long (`simulator.SlowGapCounter`), and the run has
  sum(output - 1) gaps in all, known up front.  TPOT likewise, on requests: one decoding
  for longer than the bound times its decode steps has a TPOT at least the bound
  (`simulator.SlowTpotCounter`); its population, the servable requests of more than one
  output token, is known up front.  Normalised latency is judged at the end.

Everything here is a pure function of plain data (no Ray, Optuna or SQL), so a
worker can run it in any process.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from functools import cached_property

import numpy as np

from search._capacity_kind import CAPACITY_CEILING, CAPACITY_MEASURED
from search._zero_load import ZERO_LOAD_METRICS, zero_load_percentile
from simulator import (
    EARLY_STOP_METRICS,
    LateRequestCounter,
    PreparedDeployment,
    RunOptions,
    ServiceBound,
    Simulation,
    SlowGapCounter,
    SlowTpotCounter,
    request_arrays,
    servable_requests,
    service_bound,
    slow_gap_share,
    summarize,
    waiting_delays,
    weighted_percentiles,
)
from workloads import Workload, rescale_to_rate

__all__ = [
    "CAPACITY_CEILING",
    "CAPACITY_MEASURED",
    "DEFAULT_SLO",
    "CapacityResult",
    "CapacitySearchOptions",
    "LatencySLO",
    "Probe",
    "PruneCheck",
    "ServiceBound",
    "find_capacity",
    "first_requests",
    "late_limit",
    "servable",
    "service_bound",
    "throughput_upper_bound",
    "unit_arrival_times",
]

METRICS = ("scheduling_delay", "ttft", "tbt", "tpot", "e2e", "normalized_latency")
PERCENTILES = (50, 90, 95, 99)

FIRST_GUESS = 0.75  # share of the steady-state bound probed first (capacity is ~0.5-1 of it)
STEP = 2.0  # factor between bracketing probes (up to the bound, or down) without a hint
FLOOR = 1e-3  # below this share of the bound, nothing passes: capacity 0
PROGRESS_EVERY = 256  # simulator events between two late counts
STEERED = 3  # most probes in a row placed by the TBT estimate, between geometric ones
LENGTHEN = 2  # factor on the requests of a search run again because it rested on the ceiling



# --------------------------------------------------------------------------- options


@dataclass(frozen=True, slots=True)
class LatencySLO:
    """One latency bound: `metric` at `percentile` stays strictly under `max_s` seconds."""

    metric: str  # scheduling_delay | ttft | tbt | tpot | e2e | normalized_latency
    percentile: int  # 50 | 90 | 95 | 99
    max_s: float

    def __post_init__(self) -> None:
        if self.metric not in METRICS:
            raise ValueError(f"SLO metric {self.metric!r} is not one of {list(METRICS)}")
        if self.percentile not in PERCENTILES:
            raise ValueError(f"SLO percentile {self.percentile!r} is not one of {PERCENTILES}")
        if not (isinstance(self.max_s, int | float) and math.isfinite(self.max_s)) or (
            self.max_s <= 0
        ):
            raise ValueError(f"SLO max_s must be a finite number > 0, got {self.max_s!r}")

    def value(self, summary: dict) -> float:
        """The metric's percentile in a simulator summary (seconds; NaN if nothing measured)."""
        return float(summary["latency_s"][self.metric][f"p{self.percentile}"])

    def passed(self, summary: dict) -> bool:
        """True when the percentile is under the bound (NaN, nothing measured, fails)."""
        return bool(self.value(summary) < self.max_s)

    @property
    def column(self) -> str:
        """The results column (and slo_detail key) of this percentile, e.g. ``ttft_p90``."""
        return f"{self.metric}_p{self.percentile}"

    def label(self) -> str:
        return f"{self.column} < {self.max_s:g} s"


DEFAULT_SLO = LatencySLO("scheduling_delay", 99, 5.0)  # Vidur-Search's criterion


@dataclass(frozen=True, slots=True)
class CapacitySearchOptions:
    """How one configuration's capacity is searched.

    tolerance: the search stops when the bracket [largest passing rate, smallest
        failing rate] is at most this wide, relative (hi / lo - 1 <= tolerance).
    max_simulations: most probes (simulations) in all, over every workload length;
        the capacity is then the largest passing rate found so far.
    early_stop: stop a probe as soon as its verdict is certain to be "fails".
    """

    slo: LatencySLO = DEFAULT_SLO
    also: tuple[LatencySLO, ...] = ()  # SLOs a passing rate must meet too (checked on full runs)
    tolerance: float = 0.05
    max_simulations: int = 20
    early_stop: bool = True
    # place probes where a missed TBT SLO's slow gaps are estimated to become few enough
    # (`_Search.tbt_capacity_estimate`), not only by halving the bracket
    tbt_steering: bool = True

    def __post_init__(self) -> None:
        if not (0 < self.tolerance < 1):
            raise ValueError(f"tolerance must be in (0, 1), got {self.tolerance!r}")
        if self.max_simulations < 1:
            raise ValueError(f"max_simulations must be >= 1, got {self.max_simulations!r}")


@dataclass(frozen=True, slots=True)
class PruneCheck:
    """What a configuration must do to matter when a job wants only the best one.

    It must meet its capacity SLO and every filter in `filters` at `qps`, the rate at
    which its QPS per dollar ties the best found so far (0: no best yet).  Capacity
    searches assume a verdict that holds at a rate holds below it (so does bisection);
    then a configuration failing at `qps` either has a capacity under it (its QPS per
    dollar is below the best) or fails a filter at any capacity above it: it cannot be
    recommended.  A filter missed even at zero load prunes it without a simulation.
    Where filters are judged at the capacity (not part of it), the search that follows
    stops too at the first rate that meets the capacity SLO but misses a filter: the
    capacity is no lower, so it misses the filter too.
    """

    qps: float
    filters: tuple[LatencySLO, ...] = ()


# --------------------------------------------------------------------------- results


@dataclass(slots=True)
class Probe:
    """One simulation of the search, at one arrival rate."""

    qps: float
    passed: bool
    num_requests: int  # requests in the simulated workload
    # the capacity SLO's percentile; when stopped early, that of the SLO that stopped the
    # run (the capacity SLO or an `also` one), a value >= its bound
    slo_value: float
    stopped_early: bool
    iterations: int  # batches simulated
    wall_s: float
    # "search": a probe of the search; "known": known to pass without a simulation (at or
    # under a rate that passed the `PruneCheck`; slo_value NaN); "check": the `PruneCheck`;
    # "summary": the run, after the search, at a known rate that turned out the capacity
    kind: str = "search"

    @property
    def simulated(self) -> bool:
        return self.kind != "known"


@dataclass(slots=True)
class CapacityResult:
    """The answer of `find_capacity`."""

    capacity_qps: float  # largest rate found that meets the SLO (0.0 if none does)
    # the simulator summary of the run at that rate (None: no rate passed, or only the
    # caller's `passing_qps`)
    summary: dict | None
    upper_bound_qps: float  # the analytic bound used to bracket (inf: none for this workload)
    failing_qps: float = math.inf  # smallest rate known to fail: capacity is in [capacity, this)
    probes: list[Probe] = field(default_factory=list)
    num_simulations: int = 0
    wall_time_s: float = 0.0
    # an SLO missed even at zero load (capacity 0 without a simulation), with the
    # zero-load lower bound on its percentile
    unmeetable: tuple[LatencySLO, float] | None = None
    num_requests: int = 0  # requests in the workload of the search that decided
    rejected_requests: int = 0  # of those, never servable (rejected on arrival at any rate)
    pruned: str | None = None  # why it cannot be the best (`PruneCheck`); None: searched
    # pruned for missing its SLOs at `PruneCheck.qps` (a lower best might not prune it);
    # False: pruned whatever the best (a filter missed under its capacity, or at zero load)
    pruned_by_best: bool = False

    @property
    def capacity_kind(self) -> str:
        """The kind of the capacity: "ceiling" when a rate passed and none failed (the
        capacity is the analytic ceiling, not a measurement), else "measured"."""
        if self.capacity_qps > 0 and math.isinf(self.failing_qps):
            return CAPACITY_CEILING
        return CAPACITY_MEASURED


# --------------------------------------------------------------------------- helpers


def unit_arrival_times(workload: Workload) -> np.ndarray:
    """The workload's arrival times shifted to start at 0 and scaled to a mean rate of 1/s.

    The probe at q requests/s uses ``unit / q``.  Raises ValueError for a closed-loop
    workload or one whose requests all arrive at the same instant (no rate to scale).
    """
    if workload.concurrency is not None:
        raise ValueError(
            f"workload {workload.name!r} is closed loop (concurrency={workload.concurrency}): "
            "it has no arrival rate to search over; build it open loop (give qps, not "
            "concurrency) for a capacity search"
        )
    if len(workload) < 2:
        raise ValueError(
            f"workload {workload.name!r} has {len(workload)} request(s); a capacity search "
            "needs at least 2"
        )
    try:
        return rescale_to_rate(workload.arrival_times, 1.0)
    except ValueError as exc:  # WorkloadError: all at one instant
        raise ValueError(f"workload {workload.name!r}: {exc}; no rate to search over") from None


def first_requests(workload: Workload, n: int) -> Workload:
    """The first `n` requests of `workload` (all of them when it has no more)."""
    return workload if n >= len(workload) else workload.head(n)


def late_limit(n: int, percentile: int) -> int:
    """Fewest values >= B among n that put the percentile at >= B.

    Mirrors `simulator.weighted_percentiles` (inverted CDF): the percentile is the
    sorted value at index ``ceil(p/100 n - 1e-9) - 1``; it is >= B exactly when at
    most that many values are < B.
    """
    if n <= 0:
        return 1
    x = percentile / 100.0 * n - 1e-9
    idx = int(np.searchsorted(np.arange(1, n + 1, dtype=np.float64), x, side="left"))
    idx = min(max(idx, 0), n - 1)
    return n - idx


def _request_metric_values(sim: Simulation, metric: str) -> np.ndarray:
    """The per-request values `summarize` takes the metric's percentiles over."""
    cols = request_arrays(sim)
    if metric == "scheduling_delay":
        rejected = cols["rejected"] != ""
        waiting = ~rejected & np.isnan(cols["scheduled"]) & (cols["arrival"] <= sim.now)
        delay = np.where(waiting, sim.now - cols["arrival"], cols["scheduling_delay"])
        return delay[~np.isnan(delay)]
    done = ~np.isnan(cols["completed"])
    if metric == "tpot":
        return cols["tpot"][done & ~np.isnan(cols["tpot"])]
    return cols[metric][done]


def _slo_value(sim: Simulation, slo: LatencySLO) -> float:
    """The SLO percentile of a run, as `summarize` computes it (without building the rest)."""
    if slo.metric == "tbt":
        return slo.value(summarize(sim))
    values = _request_metric_values(sim, slo.metric)
    return float(weighted_percentiles(values, None, (slo.percentile,))[f"p{slo.percentile}"])


def _stopped_value(sim: Simulation, slo: LatencySLO) -> float:
    """SLO percentile of a run stopped early, counting the delay waiting requests accrued.

    Requests not yet arrived are left out; by the stopping rule the value is >= the bound.
    """
    arr = waiting_delays(sim, slo.metric)
    return float(weighted_percentiles(arr, None, (slo.percentile,))[f"p{slo.percentile}"])


# --------------------------------------------------------------------------- the bound


def servable(prepared: PreparedDeployment, workload: Workload) -> np.ndarray:
    """Which requests a replica can serve at all (the simulator rejects the others on arrival).

    See `simulator.servable_requests`.
    """
    return servable_requests(prepared, workload.prompt_tokens, workload.output_tokens)


def _finite_run_bound(service: ServiceBound, unit: np.ndarray, slo: LatencySLO) -> float:
    """Largest rate a finite run of these arrivals could pass (fluid model of the queue).

    `unit` are the unit-rate arrival times of the servable requests.  To pass, at least
    J = N - late_limit + 1 of the N requests must meet the bound; the last of them in
    arrival order, j >= J, is admitted by ``u_j / q + B``.  Its replica has by then
    admitted its first ``j / R`` requests, of which at most `max_in_flight` (M) are
    unfinished: ``(j / R - M) T`` seconds of work done from an empty start (T the
    average request's, the work in flight not counted).  So ``q <= u_j / ((j / R - M) T
    - B)`` for some j >= J: the bound is the largest of those (and at least the
    steady-state bound); infinite when even every request arriving at once could pass.
    """
    n = len(unit)
    if n == 0:
        return 0.0
    need = n - late_limit(n, slo.percentile) + 1
    j = np.arange(need, n + 1, dtype=np.float64)
    done = j / service.num_replicas - service.max_in_flight
    slack = done * service.seconds_per_request - slo.max_s
    if slack[0] <= 0:
        return math.inf
    return max(float(np.max(unit[need - 1 :] / slack)), service.steady_qps)


def throughput_upper_bound(
    prepared: PreparedDeployment, workload: Workload, slo: LatencySLO = DEFAULT_SLO
) -> float:
    """An arrival rate (requests/s, all replicas) above any that can meet `slo` in simulation.

    The steady-state bound is ``replicas / seconds_per_request`` of `service_bound`;
    a finite run of N requests can keep a delay bound at a somewhat higher rate (the
    first requests fill the batches, the last may wait up to the bound), which the
    fluid model of `_finite_run_bound` adds: infinite when the workload is too short
    to load the deployment at all, 0 when it serves none of the requests.  The
    guarantee is for SLOs on scheduling delay, TTFT and e2e latency (each at least
    the scheduling delay); TBT, TPOT and normalised latency do not grow with the
    queue, and for them it is only the search's starting point.
    """
    unit = unit_arrival_times(workload)
    mask = servable(prepared, workload)
    return _finite_run_bound(service_bound(prepared, workload, mask), unit[mask], slo)


# --------------------------------------------------------------------------- the search


class _Search:
    """The probes of one configuration, sharing one workload's arrays."""

    def __init__(
        self,
        prepared: PreparedDeployment,
        workload: Workload,
        unit: np.ndarray,
        options: CapacitySearchOptions,
    ) -> None:
        self.prepared = prepared
        self.workload = workload
        self.unit = unit
        self.options = options
        self.probes: list[Probe] = []
        # largest passing rate, its run (None: known to pass, not simulated)
        self.best: tuple[float, Simulation | None] | None = None
        self.served_none = False
        self.known_pass = 0.0  # rates up to this one pass (`PruneCheck`): not simulated
        # `PruneCheck` filters judged at each passing rate, and why one failed there (then the
        # capacity, no lower, fails it too: the configuration cannot be recommended)
        self.prune_filters: tuple[LatencySLO, ...] = ()
        self.pruned: str | None = None
        # TBT SLOs watched, and each simulated rate's slow-gap ratio (`slow_ratio`)
        self.tbt_slos = [s for s in (options.slo, *options.also) if s.metric == "tbt"]
        self.slow_ratios: dict[float, float] = {}

    def slow_ratio(self, sim: Simulation) -> float:
        """Of the TBT SLOs, the largest share of gaps at or above the bound, over the share
        the percentile allows (1 - p/100): about 1 where the SLO is met just barely, > 1
        where it is missed (NaN: no gap yet)."""
        ratios = [
            slow_gap_share(sim, s.max_s) / (1.0 - s.percentile / 100.0) for s in self.tbt_slos
        ]
        return max(ratios)

    def tbt_capacity_estimate(self, lo: float, hi: float) -> float | None:
        """Where the slow-gap ratio reaches 1, from the runs at `hi` (failing) and `lo`
        (passing; 0: none): a guess to place the next probe, never a verdict.

        None unless the run at `hi` missed a TBT SLO (ratio > 1).  Below saturation a
        token gap is slow when its step shares the batch (or, under pipeline parallelism,
        a stage) with a prompt chunk, about in proportion to the arrival rate: with both
        ends known the ratio is taken as a power of the rate through them (log-log
        secant), with `hi` alone as proportional to it."""
        f = self.slow_ratios.get(hi, math.nan)
        if not f > 1.0:
            return None
        p = self.slow_ratios.get(lo, math.nan) if lo > 0 else math.nan
        if 0.0 < p < 1.0:
            power = math.log(f / p) / math.log(hi / lo)
            if power > 0:
                return lo * (1.0 / p) ** (1.0 / power)
        return hi / f

    def best_summary(self) -> dict | None:
        """The summary of the run at the largest passing rate (simulated now if its verdict
        was known without a run); None when no rate passed."""
        if self.best is None:
            return None
        qps, sim = self.best
        if sim is None:
            started = time.perf_counter()
            workload = self.workload.with_arrival_times(self.unit / qps)
            sim = self.prepared.simulation(workload, RunOptions()).run()
            value = _slo_value(sim, self.options.slo)
            self.probes.append(
                Probe(qps, True, len(self.workload), value, False, len(sim.batches),
                      time.perf_counter() - started, "summary")
            )  # fmt: skip
        return summarize(sim)

    @property
    def exhausted(self) -> bool:
        return len(self.probes) >= self.options.max_simulations

    @cached_property
    def _servable_outputs(self) -> np.ndarray:
        return self.workload.output_tokens[servable(self.prepared, self.workload)]

    def _counter(self, slo: LatencySLO):
        """The early-stop hook counting `slo`'s late values, with the limit of its run."""
        if slo.metric in EARLY_STOP_METRICS:
            return LateRequestCounter(
                slo.metric, slo.max_s, late_limit(len(self.workload), slo.percentile)
            )
        outputs = self._servable_outputs
        if slo.metric == "tbt":  # token gaps: output - 1 of each servable request
            gaps = int(np.maximum(outputs - 1, 0).sum())
            return SlowGapCounter(slo.max_s, late_limit(gaps, slo.percentile))
        # tpot: the servable requests of more than one output token
        return SlowTpotCounter(slo.max_s, late_limit(int((outputs > 1).sum()), slo.percentile))

    def _early_stop(self) -> tuple[list[LatencySLO], object]:
        """The SLOs whose late requests are counted as the run goes, and the run's hook.

        The capacity SLO and every `also` SLO on a delay-like metric: the run stops as
        soon as any one of them is certain to fail.  The hook records which did first.
        """
        watched = [
            s
            for s in (self.options.slo, *self.options.also)
            if s.metric in EARLY_STOP_METRICS or s.metric in ("tbt", "tpot")
        ]
        if not self.options.early_stop or not watched:
            return [], None
        counters = [self._counter(s) for s in watched]
        tripped: list[LatencySLO] = []

        def hook(sim: Simulation) -> bool:
            for slo, counter in zip(watched, counters, strict=True):
                if counter(sim):
                    tripped.append(slo)
                    return True
            return False

        return tripped, hook

    def probe(self, qps: float) -> bool:
        if qps <= self.known_pass:
            self.probes.append(
                Probe(qps, True, len(self.workload), math.nan, False, 0, 0.0, "known")
            )
            if self.best is None or qps > self.best[0]:
                self.best = (qps, None)
            return True
        slo = self.options.slo
        started = time.perf_counter()
        workload = self.workload.with_arrival_times(self.unit / qps)
        tripped, hook = self._early_stop()
        options = RunOptions(on_progress=hook, progress_every=PROGRESS_EVERY)
        sim = self.prepared.simulation(workload, options).run()
        if sim.stopped_early:
            stopper = tripped[0]
            # TBT, TPOT: the percentile of the values so far (the full run's is no lower than
            # the bound)
            value = (
                _stopped_value(sim, stopper)
                if stopper.metric in EARLY_STOP_METRICS
                else max(_slo_value(sim, stopper), stopper.max_s)
            )
            passed = False
        else:
            value = _slo_value(sim, slo)
            passed = bool(value < slo.max_s)
            self.served_none = all(r.rejected is not None for r in sim.requests)
            if passed and (self.options.also or self.prune_filters):
                summary = summarize(sim)
                passed = all(extra.passed(summary) for extra in self.options.also)
                missed = [f for f in self.prune_filters if not f.passed(summary)]
                if passed and missed:
                    self.pruned = (
                        f"misses {missed[0].label()} at {qps:.4g} req/s, under its capacity"
                    )
        if self.tbt_slos and self.options.tbt_steering:
            self.slow_ratios[qps] = self.slow_ratio(sim)
        self.probes.append(
            Probe(qps, passed, len(self.workload), value, sim.stopped_early, len(sim.batches),
                  time.perf_counter() - started)
        )  # fmt: skip
        if passed and (self.best is None or qps > self.best[0]):
            self.best = (qps, sim)
        return passed


def _prune_check(
    prepared: PreparedDeployment,
    workload: Workload,
    unit: np.ndarray,
    options: CapacitySearchOptions,
    prune: PruneCheck,
    mask: np.ndarray,
) -> str | _Search:
    """`PruneCheck` of one configuration: why it is pruned without a simulation, or its
    one probe at ``prune.qps`` (none when ``prune.qps`` is 0), SLOs and filters watched."""
    extra = tuple(f for f in prune.filters if f not in (options.slo, *options.also))
    for bound in extra:
        if bound.metric in ZERO_LOAD_METRICS:
            least = zero_load_percentile(prepared, workload, bound.metric, bound.percentile, mask)
            if least >= bound.max_s:
                return f"{bound.label()} is missed even at zero load ({least:.4g} s)"
    check = _Search(prepared, workload, unit, replace(options, also=(*options.also, *extra)))
    if prune.qps > 0:
        check.probe(prune.qps)
        check.probes[-1].kind = "check"
    return check


def find_capacity(
    prepared: PreparedDeployment,
    workload: Workload,
    options: CapacitySearchOptions = CapacitySearchOptions(),
    *,
    hint_qps: float | None = None,
    passing_qps: float | None = None,
    failing_qps: float | None = None,
    num_requests: int | None = None,
    prune: PruneCheck | None = None,
) -> CapacityResult:
    """The largest arrival rate at which `prepared` meets `options.slo` on `workload`.

    `workload` must be open loop; its requests are replayed at every probed rate
    (arrival times scaled).  `hint_qps` (e.g. the capacity of a neighbouring
    configuration) replaces the first guess.  Refining a coarser search's bracket,
    `passing_qps` is a rate known to pass (never simulated again: where no higher rate
    passes, the capacity is this rate and `summary` None, the coarser run's metrics
    standing) and `failing_qps` one known to fail; the search then only bisects
    between them.  The capacity is the
    largest passing rate; the search stops once the smallest failing rate above it is
    within `options.tolerance` (relative), or after `options.max_simulations` probes.
    An SLO that `zero_load_percentile` shows missed even with every request alone
    gives capacity 0 at once (`CapacityResult.unmeetable` says which).

    `num_requests` (default: all) is how many of the workload's first requests the
    search runs on.  When it passes at the analytic ceiling with no rate failing (the
    requests are too few to load the deployment), it runs again on `LENGTHEN` times as
    many (at most all of `workload`), starting at the rate that passed, until a rate
    fails ("measured") or the workload has no more requests, or the probes run out
    ("ceiling": `CapacityResult.capacity_kind`).  The result is that of the last
    search, with the probes, simulations and time of all of them.

    With `prune` (a job that wants only the best configuration), the first probe is at
    `prune.qps` with the filters watched too: where it fails, or a filter is missed even
    at zero load, the search stops there with `CapacityResult.pruned` saying why (capacity
    0, no summary).  Where it passes, the search is the one it would have been (the same
    probes; those at or under `prune.qps` pass without a simulation), but it stops, pruned,
    at a simulated rate that meets the SLO and misses a filter.
    """
    started = time.perf_counter()
    n = len(workload) if num_requests is None else min(max(num_requests, 1), len(workload))
    result = _find_capacity_once(
        prepared, first_requests(workload, n), options, hint_qps, passing_qps, failing_qps,
        prune,
    )  # fmt: skip
    probes = list(result.probes)
    while result.capacity_kind == CAPACITY_CEILING and n < len(workload):
        left = options.max_simulations - sum(p.kind in ("search", "known") for p in probes)
        if left < 1:
            break
        n = min(LENGTHEN * n, len(workload))
        result = _find_capacity_once(
            prepared, first_requests(workload, n), replace(options, max_simulations=left),
            result.capacity_qps, None, None,
        )  # fmt: skip
        probes += result.probes
    result.probes = probes
    result.num_simulations = sum(p.simulated for p in probes)
    result.wall_time_s = time.perf_counter() - started
    return result


def _find_capacity_once(
    prepared: PreparedDeployment,
    workload: Workload,
    options: CapacitySearchOptions,
    hint_qps: float | None,
    passing_qps: float | None,
    failing_qps: float | None,
    prune: PruneCheck | None = None,
) -> CapacityResult:
    """`find_capacity` on all of `workload`, with no lengthening."""
    started = time.perf_counter()
    unit = unit_arrival_times(workload)
    slo = options.slo
    mask = servable(prepared, workload)
    service = service_bound(prepared, workload, mask)
    upper = _finite_run_bound(service, unit[mask], slo)
    search = _Search(prepared, workload, unit, options)
    counts = {"num_requests": len(workload), "rejected_requests": len(workload) - int(mask.sum())}
    if service.num_servable == 0:  # every request is rejected: no rate can pass
        wall = time.perf_counter() - started
        return CapacityResult(0.0, None, 0.0, 0.0, [], 0, wall, **counts)
    for bound in (slo, *options.also):
        if bound.metric in ZERO_LOAD_METRICS:
            least = zero_load_percentile(prepared, workload, bound.metric, bound.percentile, mask)
            if least >= bound.max_s:  # missed with every request alone: at any rate
                wall = time.perf_counter() - started
                return CapacityResult(0.0, None, upper, 0.0, [], 0, wall, (bound, least), **counts)
    if prune is not None:
        checked = _prune_check(prepared, workload, unit, options, prune, mask)
        checked_probes = [] if isinstance(checked, str) else checked.probes
        if isinstance(checked, str) or (checked_probes and not checked_probes[-1].passed):
            reason = checked if isinstance(checked, str) else (
                f"misses its SLOs at {prune.qps:.4g} req/s, where it would tie the best"
            )
            probes = [] if isinstance(checked, str) else checked.probes
            return CapacityResult(
                0.0, None, upper, prune.qps if probes else math.inf, probes, len(probes),
                time.perf_counter() - started, pruned=reason, pruned_by_best=bool(probes),
                **counts,
            )  # fmt: skip
        # passes there: the search runs as it would have, without simulating the rates
        # known to pass, and stops at a passing rate that misses a filter
        search.known_pass = prune.qps
        search.prune_filters = tuple(
            f for f in prune.filters if f not in (options.slo, *options.also)
        )
    # the first guess: a share of the tighter (steady-state) bound; a hint starts a gallop
    steady = service.steady_qps
    reference = min(upper, steady)
    tol = options.tolerance
    if hint_qps is not None and hint_qps > 0:
        q, grow = float(hint_qps), 1.0 + 2.0 * tol
    else:
        q, grow = FIRST_GUESS * reference, STEP
    floor = FLOOR * reference
    lo = 0.0  # largest passing rate
    hi = math.inf  # smallest failing rate
    if failing_qps is not None and failing_qps > 0:
        hi = failing_qps
    # the highest rate worth probing: the finite-run bound where it holds (SLOs on delay,
    # TTFT, e2e with a workload long enough to load the deployment); else the steady-state
    # bound, which no deployment sustains: a run passing there is too short to tell more
    ceiling = upper if math.isfinite(upper) and slo.metric in EARLY_STOP_METRICS else steady
    q = min(q, hi / (1.0 + tol), ceiling)  # never start at a rate known to fail
    galloping = hint_qps is not None
    bracketing = True
    if passing_qps is not None and passing_qps > 0:  # refining: lo is known
        lo, grow, galloping = float(passing_qps), 1.0 + 2.0 * tol, True
        q = min(lo * grow, ceiling)
        bracketing = hi == math.inf and lo < ceiling
    # bracket: up from a passing rate (at most to the ceiling), down from a failing one,
    # by a factor that squares at each step of a gallop
    while bracketing and not search.exhausted and search.pruned is None:
        if search.probe(q):
            lo = q
            if hi < math.inf or q >= ceiling:
                break
            q = min(q * grow, ceiling)
        else:
            hi = q
            if lo > 0 or search.served_none:
                break
            guess = search.tbt_capacity_estimate(0.0, q)
            if guess is None:
                q /= grow
            else:  # a TBT SLO missed: just under where its slow gaps would be few enough,
                # at least half the step down (another SLO may be failing too), and not
                # under the floor (capacity 0 needs a failing probe there)
                q = min(q / math.sqrt(grow), max(guess / math.sqrt(1.0 + tol), floor))
            if q < floor:
                break
        if galloping:
            grow *= grow
    # bisect geometrically; where a TBT SLO fails at the upper end, probe where its slow
    # gaps are estimated to become few enough, kept a tolerance inside the bracket (so that
    # a probe next to a bracket end closes it): at most STEERED probes in a row, then one at
    # the geometric middle
    steered = 0
    margin = (1.0 + tol) ** 0.98  # a hair inside: a probe there closes the bracket
    while (
        lo > 0 and hi < math.inf and hi / lo - 1 > tol and not search.exhausted
        and search.pruned is None
    ):  # fmt: skip
        mid = math.sqrt(lo * hi)
        guess = search.tbt_capacity_estimate(lo, hi) if steered < STEERED else None
        if guess is not None and lo * margin < hi / margin:
            mid = min(max(guess, lo * margin), hi / margin)
            steered += 1
        else:
            steered = 0
        if search.probe(mid):
            lo = mid
        else:
            hi = mid
    if search.pruned is not None:
        probes = [*checked_probes, *search.probes]
        return CapacityResult(
            0.0, None, upper, math.inf, probes, sum(p.simulated for p in probes),
            time.perf_counter() - started, pruned=search.pruned, **counts,
        )  # fmt: skip
    summary = search.best_summary()
    if search.best is not None:
        lo = search.best[0]
    probes = [*checked_probes, *search.probes] if prune is not None else search.probes
    return CapacityResult(
        capacity_qps=lo,
        summary=summary,
        upper_bound_qps=upper,
        failing_qps=min([hi, *(p.qps for p in search.probes if not p.passed)]),
        probes=probes,
        num_simulations=sum(p.simulated for p in probes),
        wall_time_s=time.perf_counter() - started,
        **counts,
    )
