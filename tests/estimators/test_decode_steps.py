"""`decode_steps`, the simulator's price of a run of decode-only iterations, and
`pipeline_decode_steps`, the same with every pipeline stage's time, must give exactly what
`batch_cost` gives step by step, for every backend: the roofline (with and without an engine
profile's host work and overlap, TP and PP), the profiled backend on aiconfigurator's tables
and on Vidur's, speculative decoding, and an estimator that has only `batch_cost`."""

from __future__ import annotations

from dataclasses import replace
from itertools import islice
from pathlib import Path

import pytest

from estimators import (
    BatchCost,
    BatchShape,
    IterationOverhead,
    SpeculativeConfig,
    SpeculativeEstimator,
    decode_steps,
    load_engine,
    load_model,
    make_estimator,
    pipeline_decode_steps,
    priced_decode_steps,
)
from estimators import _aic_tables as aic
from sku_catalog import load_catalog

VIDUR_DIR = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "vidur"
STEPS = 300
# (decodes, KV tokens of the first step): one sequence, a small batch, a large one whose
# attention turns from compute- to memory-bound along the run
RUNS = [(1, 700), (17, 17 * 1300 + 5), (128, 128 * 40)]


def step_by_step(est, num_decodes: int, kv_tokens: int) -> list[tuple[float, ...]]:
    out = []
    for j in range(STEPS):
        shape = BatchShape(num_decodes=num_decodes, decode_kv_tokens=kv_tokens + num_decodes * j)
        c = est.batch_cost(shape)
        out.append((c.cpu_overhead, c.stage_times[0], c.flops, c.bytes_moved))
    return out


def pipeline_step_by_step(est, num_decodes: int, kv_tokens: int) -> list[tuple]:
    out = []
    for j in range(STEPS):
        shape = BatchShape(num_decodes=num_decodes, decode_kv_tokens=kv_tokens + num_decodes * j)
        c = est.batch_cost(shape)
        out.append((c.cpu_overhead, c.stage_times, c.pp_hop_time, c.flops, c.bytes_moved))
    return out


def assert_exact(est) -> None:
    for nd, kv in RUNS:
        got = list(islice(decode_steps(est, nd, kv), STEPS))
        assert got == step_by_step(est, nd, kv)  # exact, not approximately
        got = list(islice(pipeline_decode_steps(est, nd, kv), STEPS))
        assert got == pipeline_step_by_step(est, nd, kv)


def assert_own_pricing(est) -> None:
    """`decode_steps` is the estimator's own, with no `batch_cost` per step (past the first
    step of a batch size, which it checks against `batch_cost`)."""
    assert est._decode_steps_mirror

    def no_batch_cost(shape: BatchShape) -> BatchCost:
        raise AssertionError("priced through batch_cost")

    est.batch_cost = no_batch_cost
    try:
        assert len(list(islice(decode_steps(est, 17, 17 * 900), 50))) == 50
        assert len(list(islice(pipeline_decode_steps(est, 17, 17 * 900), 50))) == 50
    finally:
        del est.batch_cost


def _model(name: str = "meta-llama/Llama-2-7b-hf"):
    return load_model(name)


@pytest.mark.parametrize(
    ("sku", "tp", "pp", "engine"),
    [
        ("a100-80gb", 1, 1, None),
        ("a100-80gb", 2, 2, None),
        ("a100-80gb", 1, 4, "vllm"),  # four stages, host work overlapped with the first
        ("h100-sxm", 4, 1, "vllm"),  # engine host work overlapped with the GPU step
        ("h100-sxm", 1, 1, "sglang"),
        ("h100-sxm", 2, 1, "trtllm"),
    ],
)
def test_roofline_runs_equal_its_batch_cost(sku, tp, pp, engine):
    est = make_estimator(
        "roofline", _model(), load_catalog().get(sku), tp, pp,
        engine=load_engine(engine) if engine else None,
    )  # fmt: skip
    assert_exact(est)
    assert_own_pricing(est)


def test_roofline_overlap_with_host_work_longer_than_some_steps():
    """Overlapped host work leaves `host - GPU step` where the host is longer: a value that
    changes along the run as the KV reads grow (here 12 ms of host work)."""
    vllm = load_engine("vllm")
    profile = replace(vllm, decode_overhead=IterationOverhead(12.0, 0.0))
    est = make_estimator("roofline", _model(), load_catalog().get("h100-sxm"), 1, engine=profile)
    assert est._overlap
    hosts = [h for h, _, _, _ in islice(decode_steps(est, 64, 64 * 100), STEPS)]
    assert hosts[0] > hosts[-1] >= 0.0 and len(set(hosts)) > STEPS // 2
    assert_exact(est)


needs_aic = pytest.mark.skipif(
    not aic.aic_available(),
    reason="the measured tables need the llmcap[aic] extra (aiconfigurator-core)",
)


@needs_aic
@pytest.mark.parametrize("engine", [None, "vllm", "sglang"])
def test_profiled_runs_equal_its_batch_cost(engine):
    est = make_estimator(
        "profiled", _model("meta-llama/Llama-3.1-8B"), load_catalog().get("h100-sxm"), 2,
        engine=load_engine(engine) if engine else None,
    )  # fmt: skip
    assert est.backend_name == "profiled" and "attn_decode" not in est.fallbacks
    assert_exact(est)
    assert_own_pricing(est)


@pytest.mark.skipif(not VIDUR_DIR.is_dir(), reason="Vidur tables (../shared/data/vidur) absent")
def test_profiled_on_vidur_tables_runs_equal_its_batch_cost(tmp_path: Path):
    from estimators.profiler import import_vidur

    tables = tmp_path / "a100"
    import_vidur(VIDUR_DIR, "a100", tables)
    est = make_estimator(
        "profiled", _model("meta-llama/Llama-2-70b-hf"), load_catalog().get("a100-80gb"),
        tp=2, op_tables=tables,
    )  # fmt: skip
    assert "attn_decode" not in est.fallbacks  # decode attention from Vidur's rows
    assert_exact(est)
    assert_own_pricing(est)


def test_speculative_prices_its_own_verify_steps_not_the_targets():
    target = make_estimator("roofline", _model(), load_catalog().get("h100-sxm"), 1)
    spec = SpeculativeEstimator(target, SpeculativeConfig("eagle", 3, 0.7))
    assert_exact(spec)
    # a verify step of 4 tokens per sequence and 3 draft steps, per emitted token: not the
    # target's decode step, which `SpeculativeEstimator.__getattr__` would hand out
    assert next(decode_steps(spec, 8, 8 * 1000)) != next(decode_steps(target, 8, 8 * 1000))
    spec_steps = pipeline_decode_steps(spec, 8, 8 * 1000)  # looked up on its class
    assert next(spec_steps) != next(pipeline_decode_steps(target, 8, 8 * 1000))


def test_a_batch_cost_it_does_not_mirror_makes_the_roofline_fall_back():
    """A subclass whose `batch_cost` does more than the roofline's (as a new parallelism
    would): the first step's check sees it, and every run is priced by `batch_cost`."""
    from estimators import RooflineEstimator

    class Busier(RooflineEstimator):
        def batch_cost(self, batch: BatchShape) -> BatchCost:
            cost = super().batch_cost(batch)
            return BatchCost(tuple(1.25 * t for t in cost.stage_times), cost.pp_hop_time,
                             cost.cpu_overhead, cost.flops, cost.bytes_moved)  # fmt: skip

    est = Busier(_model(), load_catalog().get("a100-80gb"))
    assert_exact(est)
    assert not est._decode_steps_mirror


class OnlyBatchCost:
    """An estimator with the contract's one method (a registered third-party backend)."""

    def __init__(self) -> None:
        self.shapes: list[BatchShape] = []

    def batch_cost(self, b: BatchShape) -> BatchCost:
        self.shapes.append(b)
        t = 1e-3 + 1e-8 * b.decode_kv_tokens
        return BatchCost((t, 2 * t), 1e-5, 2e-4, 3.0 * b.num_tokens, 5.0 * b.decode_kv_tokens)


def test_an_estimator_with_only_batch_cost_is_priced_step_by_step_as_consumed():
    est = OnlyBatchCost()
    steps = decode_steps(est, 3, 30)
    assert est.shapes == []  # nothing priced before it is asked for
    got = list(islice(steps, 4))
    assert [s.decode_kv_tokens for s in est.shapes] == [30, 33, 36, 39]
    assert all(s.num_decodes == 3 and s.num_prefill_tokens == 0 for s in est.shapes)
    assert got[1] == (2e-4, 1e-3 + 1e-8 * 33, 9.0, 165.0)  # the first stage's time
    est.shapes.clear()
    assert list(islice(priced_decode_steps(est, 3, 30), 4)) == got
    est.shapes.clear()
    stages = list(islice(pipeline_decode_steps(est, 3, 30), 2))
    assert [s.decode_kv_tokens for s in est.shapes] == [30, 33]
    t = 1e-3 + 1e-8 * 33
    assert stages[1] == (2e-4, (t, 2 * t), 1e-5, 9.0, 165.0)  # every stage, and the hop
