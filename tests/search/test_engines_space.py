"""Engines in search specs: the default, a search dimension, fingerprints and stored results."""

from __future__ import annotations

import pytest

from search._errors import SpecError
from search._space import expand_space, fingerprint
from search._spec import parse_spec

BASE = {"model": "meta-llama/Llama-3.1-8B", "skus": ["h100-sxm"], "workload": "chat"}


def test_default_engine_is_current_vllm_with_its_own_limits():
    spec = parse_spec(BASE)
    (point,) = expand_space(spec)
    assert point.engine == "vllm@0.13"
    assert (point.scheduler, point.chunk_size, point.batch_size) == ("sarathi", 8192, 1024)
    assert "vllm@0.13" in point.label()


def test_engines_are_a_search_dimension():
    spec = parse_spec({**BASE, "space": {"engines": ["vllm", "sglang@0.5.1", "trtllm", "vidur"]}})
    points = expand_space(spec)
    assert [p.engine for p in points] == ["vllm@0.13", "sglang@0.4", "trtllm@1.0", "vidur@2024"]
    assert spec.space.size(1)[0] == 4
    fps = {fingerprint(spec.fingerprint(), p, spec) for p in points}
    assert len(fps) == 4  # the engine decides the result
    vidur = points[-1]
    assert "engine" not in vidur.as_dict()  # fingerprints from before profiles still match
    assert (vidur.chunk_size, vidur.batch_size) == (512, 128)


def test_space_schedulers_override_the_engine_policy():
    spec = parse_spec(
        {**BASE, "engine": "trtllm", "space": {"schedulers": {"vllm": {"batch_size": [64]}}}}
    )
    (point,) = expand_space(spec)
    assert (point.scheduler, point.batch_size, point.max_tokens) == ("vllm", 64, 8192)
    deployment = point.deployment(spec)
    assert deployment.engine.key == "trtllm@1.0"
    assert deployment.scheduler.max_tokens == 8192


@pytest.mark.parametrize(
    "data",
    [{**BASE, "engine": "tgi"}, {**BASE, "space": {"engines": ["vllm@0.1"]}}],
)
def test_unknown_engines_in_a_spec_name_the_available(data):
    with pytest.raises(SpecError) as info:
        parse_spec(data)
    assert "available engines" in str(info.value)


def test_a_token_budget_the_engines_memory_formula_cannot_hold_is_an_infeasible_point():
    """SGLang's own mem_fraction_static shrinks with its chunk (1.5 MiB a token): at 65,536
    tokens on an 80 GB H100 nothing is left, so that point is reported infeasible with the
    reason, and the search goes on with the others."""
    from search._space import candidates

    chunks = {"schedulers": {"sglang": {"chunk_size": [8192, 65536]}}}
    spec = parse_spec({**BASE, "engine": "sglang", "space": chunks})
    found = {c.point.chunk_size: c for c in candidates(spec)}
    assert found[8192].feasible
    big = found[65536]
    assert not big.feasible
    reason = big.infeasible_reason or ""
    assert reason.startswith("memory:") and "mem_fraction_static" in reason


def test_the_space_takes_each_engines_own_limits_under_attention_dp() -> None:
    """A DP replica's defaults in the space are the simulator's (`engine_scheduler`):
    SGLang's chunk is the engine's budget split over the ranks, vLLM's DP times its
    budget; both batch caps DP times the engine's per-rank cap."""
    moe = {"model": "Qwen/Qwen3-30B-A3B", "skus": ["h100-sxm"], "workload": "chat",
           "space": {"tp": [1], "dp": [2], "ep": [2], "engines": ["sglang", "vllm"]}}  # fmt: skip
    points = {p.engine.split("@")[0]: p for p in expand_space(parse_spec(moe))}
    assert (points["sglang"].chunk_size, points["sglang"].batch_size) == (8192, 8192)
    assert (points["vllm"].chunk_size, points["vllm"].batch_size) == (16384, 2048)
