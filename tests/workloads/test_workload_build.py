from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workloads import (
    WorkloadError,
    WorkloadSpec,
    build_workload,
    builtin_workload_names,
    describe_workload,
    get_builtin_workload,
    load_trace,
    mean_rate,
)

TRACES = Path(__file__).resolve().parents[3] / "shared" / "data" / "traces"  # ../shared
needs_traces = pytest.mark.skipif(not TRACES.is_dir(), reason="shared traces not present")


def build(spec: dict | WorkloadSpec, n: int = 1000, qps: float | None = 5.0, **kw):  # type: ignore[no-untyped-def]
    return build_workload(
        spec,
        num_requests=n,
        qps=qps,
        concurrency=kw.pop("concurrency", None),
        seed=kw.pop("seed", 0),
    )


def arrays(w) -> tuple[np.ndarray, ...]:  # type: ignore[no-untyped-def]
    return (w.arrival_times, w.prompt_tokens, w.output_tokens)


def test_same_seed_same_arrays_other_seed_other_arrays() -> None:
    spec = {"source": "chat", "arrival": "gamma", "cv": 2.0}
    a, b, c = build(spec, seed=7), build(spec, seed=7), build(spec, seed=8)
    assert all(np.array_equal(x, y) for x, y in zip(arrays(a), arrays(b), strict=True))
    assert not any(np.array_equal(x, y) for x, y in zip(arrays(a), arrays(c), strict=True))


def test_sub_streams_are_independent() -> None:
    base = build({"source": "chat"}, seed=3)
    other = build({"source": "chat", "prompt_len": "uniform:10:20"}, seed=3)
    assert np.array_equal(base.arrival_times, other.arrival_times)
    assert np.array_equal(base.output_tokens, other.output_tokens)
    assert not np.array_equal(base.prompt_tokens, other.prompt_tokens)


def test_builtins_exist_and_describe_themselves() -> None:
    names = builtin_workload_names()
    assert {"chat", "code", "summarization", "fixed-1k-128"} <= set(names)
    for name in names:
        assert get_builtin_workload(name).description


@pytest.mark.parametrize(
    ("name", "prompt_mean", "output_mean", "tol"),
    [("chat", 1155, 211, 0.03), ("code", 2048, 28, 0.04), ("summarization", 3072, 216, 0.03)],
)
def test_builtin_means(name: str, prompt_mean: float, output_mean: float, tol: float) -> None:
    w = build({"source": name}, n=50_000, seed=11)
    assert w.prompt_tokens.mean() == pytest.approx(prompt_mean, rel=tol)
    assert w.output_tokens.mean() == pytest.approx(output_mean, rel=tol)
    assert w.metadata["description"] == get_builtin_workload(name).description


def test_builtin_shapes() -> None:
    chat = build({"source": "chat"}, n=50_000)
    assert 900 <= np.median(chat.prompt_tokens) <= 1100
    assert np.percentile(chat.prompt_tokens, 99) > 3.5 * np.median(chat.prompt_tokens)  # tail
    summ = build({"source": "summarization"}, n=50_000)
    assert summ.prompt_tokens.min() >= 2560 and np.all(
        summ.prompt_tokens + summ.output_tokens <= 4096
    )
    assert (
        np.percentile(summ.output_tokens, 10) >= 100
        and np.percentile(summ.output_tokens, 90) <= 400
    )
    fixed = build({"source": "fixed-1k-128"})
    assert np.all(fixed.prompt_tokens == 1024) and np.all(fixed.output_tokens == 128)


def test_poisson_default_and_gamma_and_static() -> None:
    w = build({"source": "code"}, n=20_000, qps=12.0)
    assert w.metadata["arrival"] == "poisson" and not w.has_own_timestamps
    assert mean_rate(w.arrival_times) == pytest.approx(12.0, rel=0.03)
    g = build({"source": "code", "arrival": "gamma", "cv": 3.0}, n=20_000, qps=12.0)
    gaps = np.diff(g.arrival_times)
    assert gaps.std() / gaps.mean() == pytest.approx(3.0, rel=0.1) and g.metadata["cv"] == 3.0
    s = build({"source": "code", "arrival": "static"}, qps=None)
    assert np.all(s.arrival_times == 0) and s.concurrency is None


def test_closed_loop() -> None:
    w = build({"source": "chat"}, n=300, qps=None, concurrency=16)
    assert w.concurrency == 16 and np.all(w.arrival_times == 0) and len(w) == 300
    assert w.metadata["arrival"] == "closed-loop"
    info = describe_workload(w)
    assert info["concurrency"] == 16 and info["mean_qps"] is None


def test_length_overrides_and_max_total_tokens() -> None:
    w = build({"source": "chat", "prompt_len": "fixed:512", "output_len": "zipf:1.2:1:64"})
    assert np.all(w.prompt_tokens == 512) and w.output_tokens.max() <= 64
    capped = build({"source": "chat", "max_total_tokens": 1024}, n=5000)
    assert len(capped) == 5000
    assert np.all(capped.prompt_tokens + capped.output_tokens <= 1024)
    assert capped.metadata["resampled_over_max_total_tokens"] > 0
    with pytest.raises(WorkloadError, match="rejects almost every request"):
        build({"source": "fixed-1k-128", "max_total_tokens": 1000})


def test_describe_workload() -> None:
    w = build({"source": "fixed-1k-128"}, n=2001, qps=4.0)
    info = describe_workload(w)
    assert info["n"] == 2001 and info["name"] == "fixed-1k-128"
    assert info["duration_s"] == pytest.approx(w.arrival_times[-1] - w.arrival_times[0])
    assert info["mean_qps"] == pytest.approx(2000 / info["duration_s"])
    for key in ("prompt_mean", "prompt_p50", "prompt_p99"):
        assert info[key] == 1024
    assert info["output_max"] == 128 and isinstance(info["output_max"], int)


@pytest.mark.parametrize(
    ("spec", "kwargs", "pattern"),
    [
        ({"source": "chatt"}, {}, r"'chatt' is neither a built-in workload \['chat', 'code'.*path"),
        ({"source": "/no/such/trace.csv"}, {}, "nor an existing trace file"),
        ({"source": "chat"}, {"qps": 0.0}, "qps must be a finite number > 0, got 0.0"),
        ({"source": "chat"}, {"qps": -1.0}, "qps must be"),
        (
            {"source": "chat"},
            {"qps": None, "concurrency": 0},
            "concurrency must be an integer >= 1",
        ),
        ({"source": "chat"}, {"qps": 2.0, "concurrency": 4}, "either qps .* or concurrency"),
        ({"source": "chat"}, {"qps": None}, "no arrival rate: .* give qps .* or concurrency"),
        ({"source": "chat"}, {"n": 0}, "num_requests must be an integer >= 1"),
        ({"source": "chat"}, {"seed": -1}, "seed must be"),
        ({"source": "chat", "arrival": "trace"}, {}, "'chat' is a built-in"),
        ({"source": "chat", "arrival": "gamma"}, {"qps": None, "concurrency": 2}, "closed loop"),
        ({"source": "chat", "cv": 0}, {}, r"field 'cv': Input should be greater than 0 \(got 0\)"),
        ({"source": "chat", "arrival": "burst"}, {}, r"field 'arrival'.*'poisson', 'gamma'"),
        (
            {"source": "chat", "qps": 3},
            {},
            r"field 'qps': Extra inputs .* allowed fields: \['source'",
        ),
        ({"prompt_len": "fixed:x"}, {}, r"field 'prompt_len': bad length spec 'fixed:x'"),
        ({"trace_format": "azure", "columns": {"prompt": "a", "output": "b"}}, {}, "csv' only"),
        ({"columns": {"prompt": "a"}}, {}, "must have keys 'prompt' and 'output'"),
        ({"max_total_tokens": 1}, {}, "field 'max_total_tokens'"),
    ],
)
def test_errors(spec: dict, kwargs: dict, pattern: str) -> None:
    with pytest.raises(WorkloadError, match=pattern):
        build(spec, **kwargs)


def test_spec_model_forbids_extras_and_accepts_instances() -> None:
    spec = WorkloadSpec(source="code", arrival="poisson")
    assert len(build(spec)) == 1000
    with pytest.raises(WorkloadError, match="must be a mapping"):
        build_workload(["chat"], num_requests=1, qps=1.0, concurrency=None, seed=0)  # type: ignore[arg-type]


@needs_traces
def test_trace_sources() -> None:
    path = str(TRACES / "azure_llm_2023_conv.csv")
    replay = build({"source": path}, n=1000, qps=None)
    assert replay.has_own_timestamps and replay.metadata["arrival"] == "trace"
    assert np.array_equal(replay.arrival_times, load_trace(path, num_requests=1000).arrival_times)
    # a qps rescales the trace's own timestamps by default (DESIGN: capacity keeps them)
    rescaled = build({"source": path}, n=1000, qps=50.0)
    assert rescaled.has_own_timestamps and rescaled.metadata["arrival"] == "trace"
    assert mean_rate(rescaled.arrival_times) == pytest.approx(50.0)
    poisson = build({"source": path, "arrival": "poisson"}, n=1000, qps=50.0)
    assert not poisson.has_own_timestamps
    assert np.array_equal(poisson.prompt_tokens, replay.prompt_tokens)
    closed = build({"source": path}, n=100, qps=None, concurrency=8)
    assert closed.concurrency == 8 and np.all(closed.arrival_times == 0)
    override = build({"source": path, "output_len": "fixed:64", "max_total_tokens": 2048}, qps=None)
    assert np.all(override.output_tokens == 64)
    assert np.all(override.prompt_tokens + 64 <= 2048)


@needs_traces
def test_trace_without_timestamps_needs_a_rate() -> None:
    path = str(TRACES / "vidur_arxiv_summarization_4k.csv")
    with pytest.raises(WorkloadError, match="no arrival rate"):
        build({"source": path}, qps=None)
    with pytest.raises(WorkloadError, match="has no timestamps"):
        build({"source": path, "arrival": "trace"}, qps=1.0)
    w = build({"source": path}, n=5000, qps=2.0)
    assert w.metadata["arrival"] == "poisson" and len(w) == 5000


@needs_traces
def test_empirical_lengths_from_a_trace() -> None:
    spec = {"source": "chat", "prompt_len": f"trace:{TRACES / 'azure_llm_2023_code.csv'}"}
    w = build(spec, n=50_000)
    assert w.prompt_tokens.mean() == pytest.approx(2048, rel=0.03)


LENGTH_SPECS = st.one_of(
    st.none(),
    st.integers(1, 5000).map(lambda v: f"fixed:{v}"),
    st.tuples(st.integers(1, 3000), st.integers(0, 3000)).map(
        lambda t: f"uniform:{t[0]}:{t[0] + t[1]}"
    ),
    st.tuples(st.floats(0.1, 3.0), st.integers(1, 100), st.integers(0, 5000)).map(
        lambda t: f"zipf:{t[0]}:{t[1]}:{t[1] + t[2]}"
    ),
    st.tuples(st.floats(1.0, 5000.0), st.floats(0.0, 2.5)).map(
        lambda t: f"lognormal:{t[0]}:{t[1]}:20000"
    ),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    source=st.sampled_from(builtin_workload_names()),
    arrival=st.sampled_from([None, "poisson", "gamma", "static"]),
    cv=st.floats(0.05, 10.0),
    qps=st.floats(1e-3, 1e4),
    concurrency=st.one_of(st.none(), st.integers(1, 512)),
    n=st.integers(1, 3000),
    prompt_len=LENGTH_SPECS,
    output_len=LENGTH_SPECS,
    seed=st.integers(0, 2**32),
)
def test_build_workload_is_always_well_formed(  # type: ignore[no-untyped-def]
    source, arrival, cv, qps, concurrency, n, prompt_len, output_len, seed
) -> None:
    spec = {"source": source, "arrival": arrival, "cv": cv}
    spec |= {"prompt_len": prompt_len, "output_len": output_len}
    if concurrency is not None:
        spec["arrival"] = None
    w = build_workload(
        spec,
        num_requests=n,
        qps=None if concurrency is not None else qps,
        concurrency=concurrency,
        seed=seed,
    )
    assert len(w) == n and w.concurrency == concurrency
    assert np.all(np.diff(w.arrival_times) >= 0) and np.all(np.isfinite(w.arrival_times))
    assert w.prompt_tokens.dtype == np.int64 and w.output_tokens.dtype == np.int64
    assert w.prompt_tokens.min() >= 1 and w.output_tokens.min() >= 1


def test_a_shared_system_prompt_prefixes_every_prompt_with_shared_block_hashes():
    from workloads._build import SHARED_PREFIX_BLOCK_TOKENS as B

    plain = build_workload({"source": "chat"}, num_requests=50, qps=1.0, concurrency=None,
                           seed=1)  # fmt: skip
    w = build_workload(
        {"source": "chat", "shared_prefix_tokens": 1000, "shared_prefixes": 3},
        num_requests=50, qps=1.0, concurrency=None, seed=1,
    )  # fmt: skip
    assert np.array_equal(w.prompt_tokens, plain.prompt_tokens + 1000)
    assert np.array_equal(w.arrival_times, plain.arrival_times)  # its own random stream
    assert w.prefix_block_tokens == B and len(w.prefix_blocks) == 50
    shared = 1000 // B
    heads = {blocks[:shared] for blocks in w.prefix_blocks}
    assert len(heads) == 3  # one per system prompt
    tails = [h for blocks in w.prefix_blocks for h in blocks[shared:]]
    assert len(tails) == len(set(tails))  # every later block is the request's own
    assert all(
        len(blocks) == p // B for blocks, p in zip(w.prefix_blocks, w.prompt_tokens, strict=True)
    )
    assert not set(tails) & {h for head in heads for h in head}


def test_a_trace_with_its_own_hashes_refuses_a_synthetic_prefix(tmp_path):
    trace = tmp_path / "t.jsonl"
    trace.write_text(
        '{"timestamp": 0, "input_length": 100, "output_length": 5, "hash_ids": [1]}\n'
        '{"timestamp": 5, "input_length": 100, "output_length": 5, "hash_ids": [1]}\n'
    )
    with pytest.raises(WorkloadError, match="carries its own prefix hashes"):
        build_workload({"source": str(trace), "shared_prefix_tokens": 64}, num_requests=2,
                       qps=1.0, concurrency=None, seed=0)  # fmt: skip


def test_a_conversations_turn_carries_its_history_and_shares_its_blocks():
    """Two conversations of two turns behind a 128-token system prompt (blocks of 64): a
    turn's prompt is the history (system prompt, earlier prompt, answer) plus its message,
    and its hashes begin with every whole block of that history."""
    from workloads import Workload
    from workloads._build import with_prompt_prefixes

    w = Workload("t", np.array([0.0, 1.0, 2.0, 3.0]), np.array([100, 50, 70, 200]),
                 np.array([30, 40, 10, 5]))  # fmt: skip
    out = with_prompt_prefixes(w, np.random.default_rng(0), shared_tokens=128, turns=2)
    assert out.prompt_tokens.tolist() == [228, 128 + 100 + 30 + 50, 198, 128 + 70 + 10 + 200]
    assert out.arrival_times.tolist() == [0.0, 0.0, 2.0, 2.0]  # no gap: right after
    assert list(out.prefix_blocks) == [
        (-1, -2, 0),  # system prompt, then the message's whole block
        (-1, -2, 0, 1),  # 258 tokens of history: 4 whole blocks, the 4th completed by the answer
        (-1, -2, 3),  # (block 2 was the 5th whole block of the first conversation's history)
        (-1, -2, 3, 4, 5, 6),  # 208 tokens of history: 3 whole blocks, then 3 new ones
    ]
    gapped = with_prompt_prefixes(w, np.random.default_rng(0), turns=2, turn_gap_s=30.0)
    assert gapped.arrival_times[-1] > 2.0 and np.all(np.diff(gapped.arrival_times) >= 0)


def test_a_yaml_count_is_a_length_spec() -> None:
    """`prompt_len: 1024` (an integer in YAML) is the spec `1024`; a boolean is no count."""
    assert WorkloadSpec(source="chat", prompt_len=1024, output_len=64).prompt_len == "1024"
    lengths = build({"source": "chat", "prompt_len": 1024, "output_len": 64}, n=20)
    assert set(lengths.prompt_tokens) == {1024} and set(lengths.output_tokens) == {64}
    with pytest.raises(WorkloadError, match="field 'prompt_len'"):
        build({"source": "chat", "prompt_len": True})
