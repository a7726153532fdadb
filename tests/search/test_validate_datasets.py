"""`llmcap validate`: the vidur-ops dataset (held-out operator rows) and vllm bench JSONs."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from estimators import Precision
from estimators import _calibration as cal
from search._validate import DatasetError
from search._validate._bench_json import (
    Serving,
    bench_deployment,
    bench_workload,
    read_bench_json,
    simulate_bench,
)
from search._validate._ops_report import frame_stats, headline
from search._validate._vidur_ops import is_held_out, load_vidur_ops, select, validate_vidur_ops
from search.cli import cli

VIDUR_DIR = Path(__file__).resolve().parents[3] / "shared" / "data" / "vidur"
needs_vidur = pytest.mark.skipif(
    not VIDUR_DIR.is_dir(), reason="Vidur tables (../shared/data/vidur) absent"
)
# measured on the subset below (held-out matmul MAPE 7.5%, attention 8.6%), plus a margin
SUBSET_MATMUL_MAPE_BOUND = 0.09
SUBSET_ATTENTION_MAPE_BOUND = 0.11

SUBSET_FILES = (
    "profiling/compute/a100/meta-llama/Llama-2-7b-hf/mlp.csv",
    "profiling/compute/h100/meta-llama/Llama-2-7b-hf/mlp.csv",
    "profiling/compute/a100/microsoft/phi-2/mlp.csv",
    "profiling/network/a100_dgx/all_reduce.csv",
    "profiling_2024/a100/cpu_overheads.csv",
)


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args), env={"COLUMNS": "200"})


@pytest.fixture(scope="module")
def vidur_subset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two models on two GPUs, one network table and every 40th attention row: seconds."""
    if not VIDUR_DIR.is_dir():
        pytest.skip("Vidur tables (../shared/data/vidur) absent")
    root = tmp_path_factory.mktemp("vidur")
    for rel in SUBSET_FILES:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(VIDUR_DIR / rel, root / rel)
    attention = pd.read_csv(VIDUR_DIR / "profiling_2024" / "a100" / "attention.csv")
    (root / "profiling_2024" / "a100").mkdir(parents=True, exist_ok=True)
    attention.iloc[::40].to_csv(root / "profiling_2024" / "a100" / "attention.csv", index=False)
    return root


# -- vidur-ops -------------------------------------------------------------------


def _keys(data: dict[str, cal.FamilyData]) -> list[str]:
    out: list[str] = []
    for d in data.values():
        for t in (*d.ops, *d.nets, *d.attention):
            out += [str(k) for k in t.row_keys()]
        if d.cpu is not None:
            out += [str(k) for k in cal.cpu_row_keys(d.cpu)]
    return out


def test_the_split_is_deterministic_disjoint_and_about_one_in_five(vidur_subset: Path) -> None:
    data = load_vidur_ops(vidur_subset)
    everything = _keys(data)
    held = _keys(select(data, is_held_out))
    fit = _keys(select(data, lambda k: not is_held_out(k)))
    assert held == _keys(select(load_vidur_ops(vidur_subset), is_held_out))  # same rows again
    assert not set(held) & set(fit)
    assert sorted(held + fit) == sorted(everything)
    assert 0.17 < len(held) / len(everything) < 0.23
    # the split is by row, not by table: each operator table gives rows to both sides
    for table in data["ampere"].ops:
        marks = [is_held_out(k) for k in table.row_keys()]
        assert any(marks) and not all(marks)


@needs_vidur
def test_held_out_matmul_and_attention_errors_on_a_subset(vidur_subset: Path) -> None:
    data = load_vidur_ops(vidur_subset)
    result = validate_vidur_ops(data, leave_out=False)
    stats = headline(result.held_out.scored)
    assert stats["matmul"].n > 1000 and stats["attention"].n > 50
    assert stats["matmul"].mape < SUBSET_MATMUL_MAPE_BOUND, stats["matmul"]
    assert stats["attention"].mape < SUBSET_ATTENTION_MAPE_BOUND, stats["attention"]
    assert set(result.held_out.scored["gpu"]) == {"a100-80gb", "h100-sxm"}


@needs_vidur
def test_the_profiled_backend_interpolates_held_out_rows_from_the_others(
    vidur_subset: Path,
) -> None:
    data = load_vidur_ops(vidur_subset)
    scored = validate_vidur_ops(data, leave_out=False).held_out_profiled
    assert scored is not None
    stats = headline(scored)
    # measured on this subset: matmul 3.5%, attention 6.0% (the roofline: 7.5%, 8.6%)
    assert stats["matmul"].n > 1000 and stats["matmul"].mape < 0.045, stats["matmul"]
    assert stats["attention"].n > 50 and stats["attention"].mape < 0.08, stats["attention"]
    assert set(scored["group"]) == {"matmul", "attention prefill", "attention decode"}
    # chunks after a cached prefix are read from the rows measured after one: as the whole
    # prompt with as many query-key pairs they came out 2-3x too slow
    prefill = scored[scored["group"] == "attention prefill"]
    assert frame_stats(prefill).mape < 0.10, frame_stats(prefill)


@needs_vidur
def test_leave_one_out_scores_only_the_left_out_rows(vidur_subset: Path) -> None:
    result = validate_vidur_ops(load_vidur_ops(vidur_subset))
    by_gpu = {f.name: f for f in result.leave_gpu_out}
    assert set(by_gpu) == {"a100", "h100"}
    assert set(by_gpu["h100"].scored["gpu"]) == {"h100-sxm"}
    # without the H100 table, the H100 is predicted with the defaults: worse than held-out rows
    h100_held = result.held_out.scored.query("gpu == 'h100-sxm' and group == 'elementwise'")
    h100_loo = by_gpu["h100"].scored.query("group == 'elementwise'")
    assert len(h100_loo) > len(h100_held)
    assert frame_stats(h100_loo).mape > frame_stats(h100_held).mape + 0.03  # 20% against 11%
    by_model = {f.name: f for f in result.leave_model_out}
    phi = by_model["microsoft/phi-2"].scored
    assert set(phi["model"]) == {"phi-2"} and set(phi["group"]) == {"matmul", "elementwise"}


def test_vidur_ops_needs_a_complete_directory(tmp_path: Path) -> None:
    result = invoke("validate", "--dataset", "vidur-ops")
    assert result.exit_code == 2 and "--vidur-dir" in result.output
    result = invoke("validate", "--dataset", "vidur-ops", "--vidur-dir", str(tmp_path))
    assert result.exit_code == 2 and "mlp.csv" in result.output
    mlp = tmp_path / "profiling" / "compute" / "a100" / "org" / "m" / "mlp.csv"
    mlp.parent.mkdir(parents=True)
    mlp.write_text("num_tokens,n_embd\n1,4096\n")
    result = invoke("validate", "--dataset", "vidur-ops", "--vidur-dir", str(tmp_path))
    assert result.exit_code == 2 and "attention.csv" in result.output
    attention = tmp_path / "profiling_2024" / "a100" / "attention.csv"
    attention.parent.mkdir(parents=True)
    attention.write_text("is_prefill\nTrue\n")
    result = invoke("validate", "--dataset", "vidur-ops", "--vidur-dir", str(tmp_path))
    assert result.exit_code == 2
    assert str(mlp) in result.output and "num_tensor_parallel_workers" in result.output
    assert "Traceback" not in result.output


@needs_vidur
def test_a_malformed_value_names_file_line_and_column(vidur_subset: Path, tmp_path: Path) -> None:
    broken = tmp_path / "vidur"
    shutil.copytree(vidur_subset, broken)
    table = broken / SUBSET_FILES[0]
    frame = pd.read_csv(table)
    frame["time_stats.mlp_up_proj.median"] = frame["time_stats.mlp_up_proj.median"].astype(object)
    frame.loc[3, "time_stats.mlp_up_proj.median"] = "n/a ms"
    frame.to_csv(table, index=False)
    result = invoke("validate", "--dataset", "vidur-ops", "--vidur-dir", str(broken))
    assert result.exit_code == 2, result.output
    assert f"{table} line 5: column time_stats.mlp_up_proj.median" in result.output
    assert "'n/a ms'" in result.output


# -- vllm bench serve JSON ---------------------------------------------------------


def bench_result(**overrides) -> dict:
    """A result file with the fields `vllm bench serve --save-result` writes (values made up
    for the test, not a measurement)."""
    base = {
        "date": "20250601-120000",
        "endpoint_type": "vllm",
        "backend": "vllm",
        "label": None,
        "model_id": "meta-llama/Llama-3.1-8B-Instruct",
        "tokenizer_id": "meta-llama/Llama-3.1-8B-Instruct",
        "num_prompts": 16,
        "request_rate": "inf",
        "burstiness": 1.0,
        "max_concurrency": 1,
        "duration": 20.0,
        "completed": 16,
        "total_input_tokens": 8192,
        "total_output_tokens": 2048,
        "request_throughput": 0.8,
        "request_goodput": None,
        "output_throughput": 102.4,
        "total_token_throughput": 512.0,
        "mean_ttft_ms": 30.0,
        "median_ttft_ms": 29.0,
        "std_ttft_ms": 2.0,
        "p99_ttft_ms": 35.0,
        "mean_tpot_ms": 7.0,
        "median_tpot_ms": 7.0,
        "std_tpot_ms": 0.2,
        "p99_tpot_ms": 7.5,
        "mean_itl_ms": 7.0,
        "median_itl_ms": 6.9,
        "std_itl_ms": 0.4,
        "p99_itl_ms": 8.0,
    }
    return {**base, **overrides}


def write(path: Path, data: dict | str) -> Path:
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


def test_means_stand_for_the_lengths_without_detailed_fields(tmp_path: Path) -> None:
    run = read_bench_json(write(tmp_path / "r.json", bench_result()))
    assert run.num_requests == 16 and math.isinf(run.request_rate) and run.max_concurrency == 1
    assert set(run.prompt_tokens) == {512} and set(run.output_tokens) == {128}
    assert run.measured["p99_itl_ms"] == 8.0 and run.measured["request_throughput"] == 0.8
    workload = bench_workload(run)
    assert workload.concurrency == 1 and not workload.arrival_times.any()


def test_detailed_lengths_are_used_and_failed_requests_dropped(tmp_path: Path) -> None:
    detailed = bench_result(
        completed=3,
        input_lens=[100, 200, 300, 400],
        output_lens=[10, 0, 30, 40],  # the second request failed
        ttfts=[0.02, 0.0, 0.03, 0.04],
        itls=[[0.007] * 9, [], [0.007] * 29, [0.007] * 39],
    )
    run = read_bench_json(write(tmp_path / "r.json", detailed))
    assert sorted(run.prompt_tokens) == [100, 300, 400]
    assert sorted(run.output_tokens) == [10, 30, 40]


def test_a_finite_rate_is_drawn_as_the_client_draws_it(tmp_path: Path) -> None:
    many = {"completed": 4000, "total_input_tokens": 400000, "total_output_tokens": 40000}
    poisson = read_bench_json(
        write(tmp_path / "p.json", bench_result(request_rate=4.0, max_concurrency=None, **many))
    )
    gaps = np.diff(bench_workload(poisson).arrival_times)
    assert bench_workload(poisson).concurrency is None
    assert 1 / gaps.mean() == pytest.approx(4.0, rel=0.05)
    assert gaps.std() / gaps.mean() == pytest.approx(1.0, abs=0.06)
    bursty = read_bench_json(
        write(tmp_path / "g.json", bench_result(request_rate=4.0, burstiness=0.25, **many))
    )
    gaps = np.diff(bench_workload(bursty).arrival_times)
    assert gaps.std() / gaps.mean() == pytest.approx(2.0, rel=0.1)  # cv = 1 / sqrt(burstiness)


def test_a_single_stream_decodes_at_about_the_weight_read_time(tmp_path: Path) -> None:
    run = read_bench_json(write(tmp_path / "r.json", bench_result()))
    rows = {r.name: r for r in simulate_bench(Serving("meta-llama/Llama-3.1-8B", "h100-sxm"), run)}
    assert set(rows) >= {"mean TTFT (ms)", "p99 TPOT (ms)", "median ITL (ms)"}
    # 16 GB of bf16 weights read per step from 3.35 TB/s HBM: >= 4.8 ms, overheads on top
    tpot = rows["mean TPOT (ms)"].predicted
    assert 4.8 < tpot < 12.0
    assert rows["mean TPOT (ms)"].error == pytest.approx(tpot / 7.0 - 1)
    # one request at a time: throughput is the inverse of the end-to-end latency
    e2e_s = (rows["mean TTFT (ms)"].predicted + 127 * tpot) / 1e3
    assert rows["request throughput (req/s)"].predicted == pytest.approx(1 / e2e_s, rel=0.05)


def test_a_run_of_an_fp8_checkpoint_is_served_in_fp8_unless_told(tmp_path: Path) -> None:
    run = read_bench_json(write(tmp_path / "r.json", bench_result()))
    v3 = Serving("deepseek-ai/DeepSeek-V3", "h200", tp=8)
    assert bench_deployment(v3, run).precision is Precision.FP8  # its config.json's
    told = Serving("deepseek-ai/DeepSeek-V3", "h200", tp=8, precision=Precision.BF16)
    assert bench_deployment(told, run).precision is Precision.BF16


def test_cli_prints_a_table_per_file(tmp_path: Path) -> None:
    write(tmp_path / "a.json", bench_result())
    write(tmp_path / "b.json", bench_result(max_concurrency=4))
    result = invoke("validate", "--dataset", str(tmp_path), "--gpu", "h100-sxm")
    assert result.exit_code == 0, result.output
    assert "a.json" in result.output and "b.json" in result.output
    assert "closed loop at 4" in result.output and "mean TPOT (ms)" in result.output


@pytest.mark.parametrize(
    ("content", "field"),
    [
        ("{not json", "not valid JSON"),
        (bench_result(completed="sixteen"), "completed"),
        ({k: v for k, v in bench_result().items() if k != "completed"}, "completed"),
        (bench_result(request_rate="fast"), "request_rate"),
        (bench_result(burstiness=0), "burstiness"),
        (bench_result(input_lens=[1, 2], output_lens=[3]), "input_lens and output_lens"),
        (bench_result(model_id="someone/unknown-model"), "model_id"),
        (
            {k: v for k, v in bench_result().items() if not k.endswith("_ms")},
            "no latency field",
        ),
    ],
)
def test_bad_bench_json_exits_2_naming_file_and_field(
    tmp_path: Path, content: dict | str, field: str
) -> None:
    path = write(tmp_path / "bad.json", content)
    result = invoke("validate", "--dataset", str(path), "--gpu", "h100-sxm")
    assert result.exit_code == 2, result.output
    assert str(path) in result.output and field in result.output
    assert "Traceback" not in result.output


def test_bench_options_are_checked(tmp_path: Path) -> None:
    path = write(tmp_path / "r.json", bench_result())
    result = invoke("validate", "--dataset", str(path))
    assert result.exit_code == 2 and "--gpu" in result.output
    result = invoke("validate", "--dataset", str(path), "--gpu", "h100-sxm", "--engine", "nope")
    assert result.exit_code == 2 and "--engine" in result.output
    result = invoke("validate", "--dataset", str(tmp_path / "missing.json"), "--gpu", "h100-sxm")
    assert result.exit_code == 2 and "missing.json" in result.output
    with pytest.raises(DatasetError, match="no such file"):
        from search._validate._bench_json import bench_files

        bench_files([tmp_path / "nope"])
