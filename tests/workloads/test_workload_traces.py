from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from workloads import WorkloadError, load_trace, mean_rate, read_trace

TRACES = Path(__file__).resolve().parents[3] / "shared" / "data" / "traces"  # ../shared
needs_traces = pytest.mark.skipif(not TRACES.is_dir(), reason="shared traces not present")


@needs_traces
@pytest.mark.parametrize(
    ("name", "fmt", "n", "prompt_mean", "output_mean"),
    [
        ("azure_llm_2023_conv.csv", "azure", 19_366, 1155, 211),
        ("azure_llm_2023_code.csv", "azure", 8_819, 2048, 28),
        ("vidur_splitwise_conv.csv", "vidur", 19_366, 1155, 211),
        ("vidur_splitwise_code.csv", "vidur", 8_819, 2048, 28),
        ("mooncake_conversation.jsonl", "mooncake", 12_031, 12_035, 343),
        ("mooncake_synthetic.jsonl", "mooncake", 3_993, 15_325, 149),
    ],
)
def test_real_traces_with_timestamps(
    name: str, fmt: str, n: int, prompt_mean: float, output_mean: float
) -> None:
    w = load_trace(TRACES / name)
    assert len(w) == n and w.has_own_timestamps and w.concurrency is None
    assert w.metadata["format"] == fmt and w.metadata["dropped_invalid"] == 0
    assert w.prompt_tokens.mean() == pytest.approx(prompt_mean, rel=0.002)
    assert w.output_tokens.mean() == pytest.approx(output_mean, rel=0.01)
    assert w.arrival_times[0] == 0 and np.all(np.diff(w.arrival_times) >= 0)
    assert w.prompt_tokens.min() >= 1 and w.output_tokens.min() >= 1
    assert 1000 < w.arrival_times[-1] < 3600  # an hour or less of traffic


@needs_traces
def test_azure_and_vidur_copies_agree() -> None:
    azure = load_trace(TRACES / "azure_llm_2023_conv.csv")
    vidur = load_trace(TRACES / "vidur_splitwise_conv.csv", format="vidur")
    assert np.array_equal(azure.prompt_tokens, vidur.prompt_tokens)
    assert np.allclose(azure.arrival_times, vidur.arrival_times, atol=1e-5)


@needs_traces
def test_arxiv_has_no_timestamps() -> None:
    path = TRACES / "vidur_arxiv_summarization_4k.csv"
    trace = read_trace(path)
    assert trace.format == "vidur" and trace.arrival_times is None and len(trace) == 28_257
    assert trace.prompt_tokens.max() <= 4096
    with pytest.raises(WorkloadError, match="no timestamps; give a qps"):
        load_trace(path)
    w = load_trace(path, target_qps=3.0, seed=5)
    assert not w.has_own_timestamps and w.metadata["arrival"] == "poisson"
    assert mean_rate(w.arrival_times) == pytest.approx(3.0, rel=0.03)
    assert np.array_equal(w.arrival_times, load_trace(path, target_qps=3.0, seed=5).arrival_times)


@needs_traces
def test_rescale_to_target_qps() -> None:
    path = TRACES / "azure_llm_2023_code.csv"
    raw = load_trace(path)
    w = load_trace(path, target_qps=20.0)
    assert w.has_own_timestamps
    assert mean_rate(w.arrival_times) == pytest.approx(20.0, rel=1e-9)
    gaps = np.diff(raw.arrival_times)
    assert np.allclose(np.diff(w.arrival_times), gaps * mean_rate(raw.arrival_times) / 20.0)


@needs_traces
def test_poisson_on_a_timestamped_trace() -> None:
    w = load_trace(TRACES / "azure_llm_2023_conv.csv", arrival="poisson", target_qps=8.0, seed=1)
    assert not w.has_own_timestamps
    assert mean_rate(w.arrival_times) == pytest.approx(8.0, rel=0.03)
    with pytest.raises(WorkloadError, match="needs target_qps"):
        load_trace(TRACES / "azure_llm_2023_conv.csv", arrival="poisson")


@needs_traces
def test_max_total_tokens_and_num_requests() -> None:
    path = TRACES / "azure_llm_2023_conv.csv"
    full = load_trace(path)
    w = load_trace(path, max_total_tokens=2048)
    keep = full.prompt_tokens + full.output_tokens <= 2048
    assert len(w) == keep.sum() and np.all(w.prompt_tokens + w.output_tokens <= 2048)
    assert w.metadata["dropped_over_max_total_tokens"] == (~keep).sum()
    head = load_trace(path, num_requests=500)
    assert len(head) == 500
    assert np.array_equal(head.prompt_tokens, full.prompt_tokens[:500])
    assert np.array_equal(head.arrival_times, full.arrival_times[:500])
    both = load_trace(path, max_total_tokens=2048, num_requests=500)
    assert np.array_equal(both.prompt_tokens, full.prompt_tokens[keep][:500])
    more = load_trace(path, num_requests=10**6)
    assert len(more) == len(full) and more.metadata["num_requests_requested"] == 10**6


def test_generic_csv_with_mapping(tmp_path: Path) -> None:
    path = tmp_path / "mine.csv"
    path.write_text(
        "t_ms,in,out,other\n"
        "3000,10,5,x\n"
        "1000,20,0,x\n"  # output 0: dropped
        "2000,30,7,x\n"
        "2500,,7,x\n"  # missing prompt: dropped
        "4000,40,9,x\n"
    )
    w = load_trace(
        path, "csv", columns={"arrival": "t_ms", "prompt": "in", "output": "out"}, time_unit="ms"
    )
    assert w.metadata["dropped_invalid"] == 2 and w.has_own_timestamps
    assert w.arrival_times.tolist() == [0.0, 1.0, 2.0]  # sorted, from the first, in seconds
    assert w.prompt_tokens.tolist() == [30, 10, 40]
    assert w.output_tokens.tolist() == [7, 5, 9]
    # a mapping alone implies the csv format; without an arrival column: no timestamps
    lengths = read_trace(path, columns={"prompt": "in", "output": "out"})
    assert lengths.format == "csv" and lengths.arrival_times is None and len(lengths) == 3


def test_generic_csv_with_datetimes(tmp_path: Path) -> None:
    path = tmp_path / "dt.csv"
    path.write_text("when,p,o\n2024-01-01 00:00:00,5,5\n2024-01-01 00:00:02.5,6,6\n")
    w = load_trace(path, columns={"arrival": "when", "prompt": "p", "output": "o"})
    assert w.arrival_times.tolist() == [0.0, 2.5]


def test_missing_column_names_it(tmp_path: Path) -> None:
    path = tmp_path / "bad.csv"
    path.write_text("TIMESTAMP,ContextTokens,Other\n2023-11-16 18:17:03,5,5\n")
    with pytest.raises(WorkloadError) as info:
        load_trace(path, "azure")
    message = str(info.value)
    assert str(path) in message and "['GeneratedTokens']" in message
    assert "found columns ['TIMESTAMP', 'ContextTokens', 'Other']" in message
    with pytest.raises(WorkloadError, match=r"missing column\(s\) \['nope'\]"):
        load_trace(path, columns={"prompt": "ContextTokens", "output": "nope"})


def test_missing_mooncake_key(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    path.write_text('{"timestamp": 0, "input_length": 5}\n')
    with pytest.raises(WorkloadError, match=r"\['output_length'\]; found columns"):
        load_trace(path)


def test_unknown_layout_and_bad_arguments(tmp_path: Path) -> None:
    path = tmp_path / "x.csv"
    path.write_text("a,b\n1,2\n")
    with pytest.raises(
        WorkloadError, match=r"cannot tell its format from its columns \['a', 'b'\]"
    ):
        load_trace(path)
    with pytest.raises(WorkloadError, match="no trace file"):
        load_trace(tmp_path / "missing.csv")
    with pytest.raises(WorkloadError, match="not one of"):
        load_trace(path, "parquet")
    with pytest.raises(WorkloadError, match="allowed keys"):
        load_trace(path, "csv", columns={"prompt": "a", "tokens_out": "b"})
    with pytest.raises(WorkloadError, match="needs a column mapping"):
        load_trace(path, "csv")
