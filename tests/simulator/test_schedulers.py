"""Scheduler semantics, each checked on the behaviour a user would see."""

from __future__ import annotations

import numpy as np
import pytest

from simulator import (
    ClusterConfig,
    RunOptions,
    SchedulerConfig,
    SchedulerKind,
    Simulation,
    request_token_times,
    simulate,
)
from simulator._policies import Policy
from tests.simulator.conftest import LinearEstimator, make_workload, poisson_workload

ALL_KINDS = list(SchedulerKind)


def run(workload, kind, estimator=None, blocks=4096, pp=1, **sched):
    estimator = estimator or LinearEstimator(pp=pp)
    return Simulation(
        workload,
        estimator,
        SchedulerConfig(kind, **sched),
        ClusterConfig(num_kv_blocks=blocks, pp=pp),
        RunOptions(),
    ).run()


def watch_plans(monkeypatch):
    """Record (lane members before planning, plan, waiting before planning) for every plan."""
    seen: list[tuple[int, object, int]] = []
    for cls in Policy.__subclasses__():
        original = cls.plan

        def plan(self, lane, replica, _original=original):
            members = len(lane.members)
            waiting = len(replica.waiting)
            result = _original(self, lane, replica)
            seen.append((members, result, waiting))
            return result

        monkeypatch.setattr(cls, "plan", plan)
    return seen


def test_sarathi_never_pauses_a_running_decode(monkeypatch):
    seen = watch_plans(monkeypatch)
    run(poisson_workload(300, 30, prompt=(200, 3000)), SchedulerKind.SARATHI, chunk_size=256)
    decoding_plans = [plan for members, plan, _ in seen if members and plan is not None]
    assert decoding_plans
    assert all(plan.run_decodes for plan in decoding_plans)
    # and the prompts really were chunked alongside decodes
    assert any(plan.prefills and plan.run_decodes for plan in decoding_plans)


def test_vllm_runs_waiting_prefills_first():
    # A decodes; B arrives meanwhile.  vLLM pauses A for B's whole prefill,
    # Sarathi interleaves B's chunks with A's decodes.
    workload = make_workload([100, 2000], [60, 5], arrivals=[0.0, 0.2])
    vllm = run(workload, SchedulerKind.VLLM)
    sarathi = run(workload, SchedulerKind.SARATHI, chunk_size=256)
    est = LinearEstimator()
    full_prefill = est.base + est.per_token * 2000
    a_vllm = np.diff(request_token_times(vllm, 0))
    a_sarathi = np.diff(request_token_times(sarathi, 0))
    assert a_vllm.max() >= full_prefill  # A's decode waited for B's entire prompt
    assert a_sarathi.max() < full_prefill / 2
    # vLLM gives B its first token after one prefill iteration
    b = vllm.requests[1]
    assert b.first_token_at - b.arrival < 2 * full_prefill + 0.05


def test_static_batching_admits_only_when_the_batch_drains():
    workload = make_workload([100, 100, 100], [50, 10, 20], arrivals=[0.0, 0.0, 0.05])
    sim = run(workload, SchedulerKind.STATIC, batch_size=2)
    first, second, late = sim.requests
    assert first.scheduled_at == second.scheduled_at == 0.0
    # the late request waits for the whole first batch, including its longest member
    assert late.scheduled_at >= max(first.completed_at, second.completed_at)


@pytest.mark.parametrize(
    "kind", [SchedulerKind.SARATHI, SchedulerKind.SGLANG, SchedulerKind.VLLM, SchedulerKind.ORCA]
)
def test_token_budget_is_never_exceeded(kind):
    est = LinearEstimator(record=True)
    sched = {"chunk_size": 384} if kind.chunked else {"max_tokens": 3000}
    sim = run(poisson_workload(400, 40, prompt=(10, 1500)), kind, est, **sched)
    budget = SchedulerConfig(kind, **sched).token_budget()
    assert max(b.num_tokens for b in est.calls) <= budget
    assert sim.completed == 400


@pytest.mark.parametrize("kind", ALL_KINDS)
def test_batch_size_cap_holds(kind):
    est = LinearEstimator(record=True)
    run(poisson_workload(300, 200, prompt=(10, 300)), kind, est, batch_size=8)
    assert max(b.num_seqs for b in est.calls) <= 8


def test_orca_mixes_whole_prompts_with_decodes(monkeypatch):
    seen = watch_plans(monkeypatch)
    run(poisson_workload(200, 30, prompt=(200, 1200)), SchedulerKind.ORCA)
    mixed = [p for _, p, _ in seen if p is not None and p.prefills and p.run_decodes]
    assert mixed
    for plan in mixed:
        for req, q in plan.prefills:
            assert q == req.prefill_target  # never chunked


def test_preemption_by_recompute_when_blocks_run_out():
    # 60 blocks of 16 tokens = 960 tokens for requests that grow to ~700 each
    workload = make_workload([300] * 6, [400] * 6)
    sim = run(workload, SchedulerKind.VLLM, blocks=60)
    assert sum(r.preemptions for r in sim.requests) > 0
    assert sim.completed == 6
    for r in sim.requests:
        assert len(request_token_times(sim, r.id)) == r.output_tokens
    assert all(rep.pool.peak_used <= rep.pool.total for rep in sim.replicas)


def test_full_length_reservation_never_preempts_and_caps_what_runs():
    # the workload of the test above: ~700 tokens each, 60 blocks of 16 tokens hold one whole
    # request at a time (44 blocks) with a reservation, where on-demand blocks admit several
    workload = make_workload([300] * 6, [400] * 6)
    on_demand = run(workload, SchedulerKind.SARATHI, blocks=60, chunk_size=2048)
    reserved = run(
        workload, SchedulerKind.SARATHI, blocks=60, chunk_size=2048, reserve_full_length=True
    )
    assert sum(r.preemptions for r in on_demand.requests) > 0
    assert sum(r.preemptions for r in reserved.requests) == 0
    assert reserved.completed == 6
    # one request at a time: each starts only when the one before has finished
    starts = sorted(r.scheduled_at for r in reserved.requests)
    ends = sorted(r.completed_at for r in reserved.requests)
    assert all(s >= e for s, e in zip(starts[1:], ends[:-1], strict=True))
    assert max(b[5] for b in reserved.batches.rows) == 1  # decodes in a batch


def test_request_larger_than_the_cache_is_rejected_not_looped():
    workload = make_workload([100, 5000, 100], [10, 10, 10])
    result = simulate(
        workload, LinearEstimator(), SchedulerConfig(), ClusterConfig(num_kv_blocks=100)
    )
    assert result.summary["requests"]["rejected"] == 1
    assert result.summary["requests"]["completed"] == 2
    reason = result.requests.loc[1, "rejected"]
    assert "5009 KV tokens" in reason and "at most" in reason


def test_vllm_rejects_prompts_beyond_its_iteration_limit():
    workload = make_workload([100, 5000], [10, 10])
    sim = run(workload, SchedulerKind.VLLM, max_tokens=4096)
    assert sim.requests[1].rejected and "4096-token" in sim.requests[1].rejected
    assert sim.requests[0].completed_at > 0


def shapes(seen):
    """(decodes run, [(request id, chunk tokens)]) of every plan that ran, in order."""
    return [(p.run_decodes, [(r.id, q) for r, q in p.prefills]) for _, p, _ in seen if p]


def test_sglang_prefills_and_decodes_in_separate_iterations(monkeypatch):
    # A decodes alone; B arrives meanwhile: its prefill runs as its own iteration, A's
    # decode waits for it, and the two then decode together
    seen = watch_plans(monkeypatch)
    workload = make_workload([100, 200], [6, 3], arrivals=[0.0, 0.03])
    sim = run(workload, SchedulerKind.SGLANG, chunk_size=512)
    plans = shapes(seen)
    assert plans[0] == (False, [(0, 100)])  # prefill-only
    assert plans[1] == (True, [])  # decode-only
    b = plans.index((False, [(1, 200)]))
    assert all(decodes and not prefills for decodes, prefills in plans[1:b])
    assert all(decodes and not prefills for decodes, prefills in plans[b + 1 :])
    assert not any(decodes and prefills for decodes, prefills in plans)
    assert sim.completed == 2


def test_sglang_chunks_a_long_prompt_across_prefill_iterations(monkeypatch):
    # a 1000-token prompt under a 256-token chunk: four prefill-only iterations; the
    # chunked prompt leads each, and B (arrived meanwhile) fills the last one's room
    seen = watch_plans(monkeypatch)
    workload = make_workload([1000, 100], [4, 4], arrivals=[0.0, 0.001])
    sim = run(workload, SchedulerKind.SGLANG, chunk_size=256)
    plans = shapes(seen)
    assert plans[:4] == [
        (False, [(0, 256)]),
        (False, [(0, 256)]),
        (False, [(0, 256)]),
        (False, [(0, 232), (1, 24)]),
    ]
    assert plans[4] == (False, [(1, 76)])  # B's rest before any decode
    assert plans[5] == (True, [])
    assert sim.completed == 2


def test_sglang_caps_running_requests(monkeypatch):
    seen = watch_plans(monkeypatch)
    workload = make_workload([50] * 4, [5, 5, 5, 5])
    sim = run(workload, SchedulerKind.SGLANG, batch_size=2, chunk_size=512)
    plans = shapes(seen)
    assert plans[0] == (False, [(0, 50), (1, 50)])  # two of the four: the cap
    # the third is admitted only once the first two have finished
    third = next(i for i, (_, prefills) in enumerate(plans) if (2, 50) in prefills)
    assert all(decodes for decodes, _ in plans[1:third])
    assert sim.requests[2].scheduled_at >= sim.requests[0].completed_at
    assert sim.completed == 4


@pytest.mark.parametrize("kind", [SchedulerKind.ORCA, SchedulerKind.VLLM])
def test_token_limit_refuses_long_prompts_not_long_outputs(kind):
    # a token limit counts one iteration's tokens: a 3000-token prompt with 2000 output
    # tokens fits a 4096-token limit; a 5000-token prompt does not
    workload = make_workload([3000, 5000, 100], [2000, 10, 10])
    sim = run(workload, kind, max_tokens=4096)
    assert sim.requests[0].rejected is None and sim.requests[0].completed_at > 0
    assert "prompt of 5000 tokens" in sim.requests[1].rejected
    assert sim.requests[2].completed_at > 0


def test_chunking_policies_refuse_no_prompt_for_its_length():
    workload = make_workload([20000, 100], [10, 10])
    for kind in (SchedulerKind.SARATHI, SchedulerKind.SGLANG):
        sim = run(workload, kind, chunk_size=512, blocks=8192)
        assert sim.completed == 2


def test_orca_recomputes_a_preempted_request_longer_than_its_limit():
    # preempted after decoding, a request's recompute (prompt + generated) outgrows the
    # 400-token limit: it runs alone instead of blocking the queue forever
    workload = make_workload([300] * 4, [300] * 4)
    sim = run(workload, SchedulerKind.ORCA, blocks=80, max_tokens=400, batch_size=4)
    assert sum(r.preemptions for r in sim.requests) > 0
    assert sim.completed == 4


def test_pipeline_parallel_runs_micro_batches_concurrently():
    workload = poisson_workload(400, 60, prompt=(50, 400), output=(20, 100))
    pp1 = simulate(workload, LinearEstimator(pp=1), SchedulerConfig(), ClusterConfig(pp=1))
    pp2 = simulate(workload, LinearEstimator(pp=2), SchedulerConfig(), ClusterConfig(pp=2))
    assert pp2.summary["requests"]["completed"] == 400
    spans_ok = pp2.sim.lanes[0].step > 0 and pp2.sim.lanes[1].step > 0
    assert spans_ok  # both micro-batch lanes did work
    # two stages each doing half the layers sustain a lower latency under the same load
    assert pp2.summary["latency_s"]["e2e"]["mean"] < pp1.summary["latency_s"]["e2e"]["mean"]


def test_closed_loop_keeps_concurrency_in_flight():
    workload = make_workload([200] * 50, [20] * 50, concurrency=4)
    sim = run(workload, SchedulerKind.SARATHI)
    assert sim.completed == 50
    arrivals = np.array([r.arrival for r in sim.requests])
    completions = np.sort([r.completed_at for r in sim.requests])
    assert (arrivals[:4] == 0).all()
    # every later request arrives exactly when an earlier one completed
    assert np.allclose(np.sort(arrivals[4:]), completions[:46])


@pytest.mark.parametrize(
    "kind, budget",
    [(SchedulerKind.SARATHI, {"chunk_size": 1024}), (SchedulerKind.ORCA, {"max_tokens": 1024})],
)
def test_batch_waiting_holds_prompts_while_decodes_run(monkeypatch, kind, budget):
    """TensorRT-LLM's batch waiting: a prompt arriving while another request decodes is held
    for `batch_wait_iters` decode-only iterations (its tokens stay under the ratio), then
    runs; one arriving at an idle replica is never held.  Chunked or whole (Orca), as
    TensorRT-LLM holds its context requests either way."""
    # request 0 alone (idle replica), request 1 arrives while request 0 decodes
    workload = make_workload([100, 100], [50, 5], arrivals=[0.0, 0.05])

    def ttfts(**wait):
        sim = run(workload, kind, **budget, **wait)
        return [r.first_token_at - r.arrival for r in sim.requests]

    plain = ttfts()
    seen = watch_plans(monkeypatch)
    held = ttfts(batch_wait_iters=3, batch_wait_token_ratio=0.9)
    assert held[0] == pytest.approx(plain[0])  # an idle replica never holds
    holds = [plan for members, plan, waiting in seen
             if plan is not None and waiting and members and not plan.prefills]  # fmt: skip
    assert len(holds) == 3  # three decode-only iterations with the prompt held back
    assert held[1] > plain[1] + 3 * LinearEstimator().base
    # a ratio the held tokens already reach releases them at once
    assert ttfts(batch_wait_iters=3, batch_wait_token_ratio=0.05)[1] == pytest.approx(plain[1])


def test_a_recv_interval_takes_new_requests_in_every_n_decode_iterations():
    """SGLang's scheduler_recv_interval: a request arriving while A decodes is taken in at
    the end of the first decode iteration whose count since the scheduler's last poll (A's
    prefill) is a multiple of the interval; one arriving at an idle replica at once; and a
    batch with prompt tokens makes the scheduler poll, restarting the count."""
    workload = make_workload([100, 200, 300], [60, 30, 5], arrivals=[0.0, 0.035, 0.2])

    def simulated(interval):
        return run(workload, SchedulerKind.SGLANG, chunk_size=512, recv_interval=interval)

    plain, polled = simulated(1), simulated(4)
    assert polled.requests[0].first_token_at == pytest.approx(plain.requests[0].first_token_at)
    a_tokens = request_token_times(polled, 0)  # [prefill end, decode 1 end, decode 2 end, ...]
    a_lane = polled.lanes[0]
    b = polled.requests[1]
    first_after = next(j for j, t in enumerate(a_tokens) if t >= b.arrival)
    taken = next(j for j in range(first_after, len(a_tokens)) if j % 4 == 0)
    assert taken > first_after  # really held past the first iteration boundary
    assert b.scheduled_at == pytest.approx(a_tokens[taken])
    assert plain.requests[1].scheduled_at == pytest.approx(
        request_token_times(plain, 0)[first_after]
    )
    # B's prefill restarts the count: C waits for the 4th decode iteration after it
    c = polled.requests[2]
    b_prefill_end = b.first_token_at
    steps_after = [t for t in a_lane.step_end_times if t > b_prefill_end]
    ends = [t for i, t in enumerate(steps_after, 1) if i % 4 == 0 and t >= c.arrival]
    assert c.scheduled_at == pytest.approx(ends[0])
    assert polled.completed == 3


def test_a_held_request_is_taken_in_once_nothing_is_left_to_run():
    # B arrives while A decodes its last steps; the interval is longer than A's decodes, so
    # the scheduler polls when it goes idle, at A's end
    workload = make_workload([100, 100], [4, 3], arrivals=[0.0, 0.012])
    sim = run(workload, SchedulerKind.SGLANG, chunk_size=512, recv_interval=100)
    a, b = sim.requests
    assert b.arrival < a.completed_at
    assert b.scheduled_at == pytest.approx(a.completed_at)
    assert sim.completed == 2


def test_recv_interval_one_changes_nothing():
    workload = poisson_workload(200, 20, prompt=(50, 600))
    for kind in (SchedulerKind.SGLANG, SchedulerKind.SARATHI, SchedulerKind.VLLM):
        plain = run(workload, kind, chunk_size=512)
        explicit = run(workload, kind, chunk_size=512, recv_interval=1)
        assert [r.first_token_at for r in plain.requests] == [
            r.first_token_at for r in explicit.requests
        ]


@pytest.mark.parametrize("pp", [1, 2])
def test_a_recv_interval_delays_first_tokens_in_a_closed_loop(pp):
    outputs = np.random.default_rng(0).integers(20, 60, 120).tolist()  # clients out of step
    workload = make_workload([300] * 120, outputs, concurrency=16)
    plain = run(workload, SchedulerKind.SGLANG, pp=pp, chunk_size=2048)
    polled = run(workload, SchedulerKind.SGLANG, pp=pp, chunk_size=2048, recv_interval=10)
    assert plain.completed == polled.completed == 120
    ttft = [np.mean([r.first_token_at - r.arrival for r in s.requests]) for s in (plain, polled)]
    assert ttft[1] > ttft[0] + 2 * LinearEstimator().base  # several decode steps more


def test_a_scheduler_forming_batches_ahead_schedules_an_arrival_one_batch_later():
    """vLLM's async scheduling, SGLang's and TensorRT-LLM's overlap schedulers form batch
    N + 1 while batch N runs: B, arriving during one of A's decode steps, is scheduled at
    the end of the step after it, one step later than with batches formed at each end; a
    request arriving at an idle replica is scheduled at once either way."""
    workload = make_workload([100, 200], [40, 10], arrivals=[0.0, 0.035])

    def simulated(ahead):
        return run(workload, SchedulerKind.SGLANG, chunk_size=512, schedule_ahead=ahead)

    plain, ahead = simulated(False), simulated(True)
    assert ahead.requests[0].scheduled_at == plain.requests[0].scheduled_at == 0.0
    a_tokens = request_token_times(ahead, 0)  # A's step ends
    first_after = next(j for j, t in enumerate(a_tokens) if t >= 0.035)
    assert plain.requests[1].scheduled_at == pytest.approx(a_tokens[first_after])
    assert ahead.requests[1].scheduled_at == pytest.approx(a_tokens[first_after + 1])
    assert ahead.completed == 2


def test_the_engines_with_overlap_schedulers_form_batches_ahead():
    from estimators import load_engine
    from simulator._deployment import engine_scheduler
    from sku_catalog import load_catalog

    h100 = load_catalog().get("h100-sxm")
    ahead = {name: engine_scheduler(load_engine(name), h100).schedule_ahead
             for name in ("vllm", "sglang", "trtllm", "vidur")}  # fmt: skip
    assert ahead == {"vllm": True, "sglang": True, "trtllm": True, "vidur": False}
    assert not engine_scheduler(load_engine("vllm@0.11.0"), h100).schedule_ahead


def test_sglang_splits_its_token_budget_over_attention_dp_ranks_and_vllm_does_not():
    """SGLang divides chunked_prefill_size by dp_size under DP attention, so a replica of 8
    DP ranks takes the engine's budget in all; vLLM's and TensorRT-LLM's ranks each run the
    whole budget.  The default batch cap stays each rank's own for all three."""
    from estimators import load_engine
    from simulator._deployment import engine_scheduler
    from sku_catalog import load_catalog

    b200 = load_catalog().get("b200")
    for name in ("sglang", "vllm", "trtllm"):
        engine = load_engine(name)
        limits = engine.limits(b200, 1)
        one, eight = engine_scheduler(engine, b200, 1), engine_scheduler(engine, b200, 1, dp=8)
        assert eight.batch_size == 8 * one.batch_size == 8 * limits.batch_cap
        ranks = 1 if name == "sglang" else 8  # the ranks the engine's budget is given to
        assert eight.token_budget() == ranks * one.token_budget() == ranks * limits.token_budget
    explicit = engine_scheduler(load_engine("sglang"), b200, 1, dp=8, chunk_size=131072)
    assert explicit.chunk_size == 131072  # a launch's --chunked-prefill-size: the replica's


def balanced(workload, **sched):
    """`workload` run by a Sarathi replica of 2 attention DP ranks (`attention_dp`)."""
    return run(workload, SchedulerKind.SARATHI, chunk_size=1024, attention_dp=2, **sched)


def held_plans(seen) -> int:
    """Plans that ran decodes with prompts waiting and none of them joining."""
    return sum(1 for members, plan, waiting in seen
               if plan is not None and waiting and members and not plan.prefills)  # fmt: skip


def test_adp_balance_holds_a_lone_prompt_until_its_count_reaches_the_timeout(monkeypatch):
    """TensorRT-LLM's attention-DP balance, 2 ranks, timeout 5: A decodes alone (fewer
    decodes than ranks: B is never held and its admission restarts the count); C, arriving
    during B's first iteration, is held 4 iterations and joins on the 5th, which brings the
    count to the timeout."""
    workload = make_workload([100, 100, 100], [80, 60, 5], arrivals=[0.0, 0.05, 0.0565])
    plain = balanced(workload)
    seen = watch_plans(monkeypatch)
    held = balanced(workload, adp_balance_timeout_iters=5)
    a_tokens = request_token_times(held, 0)  # [prefill end, decode 1 end, ...]
    b, c = held.requests[1], held.requests[2]
    assert b.scheduled_at == pytest.approx(plain.requests[1].scheduled_at)  # 1 decode < 2
    i = next(j for j, t in enumerate(a_tokens) if t == pytest.approx(b.scheduled_at))
    assert a_tokens[i] < c.arrival < a_tokens[i + 1]  # C comes during B's first iteration
    assert held_plans(seen) == 4
    assert c.scheduled_at == pytest.approx(a_tokens[i + 5])
    assert plain.requests[2].scheduled_at == pytest.approx(request_token_times(plain, 0)[i + 1])


def test_adp_balance_count_runs_while_nothing_waits():
    """The count goes on in every iteration that not every rank has a prompt for, prompts
    or not (the replica's decode iterations, also those run without the policy): C,
    arriving during A and B's 3rd decode iteration, joins their 5th under timeout 5 (the
    count restarted with their prefill), their 10th under timeout 10, and their 4th, not
    held at all, under timeout 2."""
    a_tokens = request_token_times(balanced(make_workload([100, 100], [80, 80])), 0)
    arrival = (a_tokens[2] + a_tokens[3]) / 2  # [prefill end, decode 1 end, ...]
    workload = make_workload([100, 100, 100], [80, 80, 5], arrivals=[0.0, 0.0, arrival])
    for timeout, joins in ((5, 4), (10, 9), (2, 3)):
        held = balanced(workload, adp_balance_timeout_iters=timeout)
        a_held = request_token_times(held, 0)
        assert held.requests[2].scheduled_at == pytest.approx(a_held[joins])
    assert balanced(workload).requests[2].scheduled_at == pytest.approx(a_tokens[3])


def test_adp_balance_lets_prompts_for_every_rank_go_at_once_or_after_the_batching_wait():
    workload = make_workload([100, 100, 100, 100], [80, 80, 5, 5], arrivals=[0, 0, 0.03, 0.03])
    plain = balanced(workload)
    a_tokens = request_token_times(plain, 0)
    first = next(j for j, t in enumerate(a_tokens) if t >= 0.03)
    held = balanced(workload, adp_balance_timeout_iters=60)
    for r in (2, 3):  # two prompts, two ranks: no wait
        assert held.requests[r].scheduled_at == pytest.approx(a_tokens[first])
    waited = balanced(workload, adp_balance_timeout_iters=60, adp_balance_batching_wait_iters=3)
    a_waited = request_token_times(waited, 0)
    for r in (2, 3):  # ... but the batching wait while every rank decodes
        assert waited.requests[r].scheduled_at == pytest.approx(a_waited[first + 3])


def test_adp_balance_is_off_with_one_rank_and_batch_waiting_off_under_attention_dp():
    workload = make_workload([100, 100, 100], [80, 80, 5], arrivals=[0, 0, 0.03])
    plain = run(workload, SchedulerKind.SARATHI, chunk_size=1024)
    times = [r.scheduled_at for r in plain.requests]
    one_rank = run(workload, SchedulerKind.SARATHI, chunk_size=1024, adp_balance_timeout_iters=60)
    assert [r.scheduled_at for r in one_rank.requests] == times
    wait = {"batch_wait_iters": 20, "batch_wait_token_ratio": 0.9}
    waited = run(workload, SchedulerKind.SARATHI, chunk_size=1024, **wait)
    assert waited.requests[2].scheduled_at > times[2]
    two_ranks = balanced(workload, **wait)  # TensorRT-LLM ignores batch waiting under ADP
    assert [r.scheduled_at for r in two_ranks.requests] == times
