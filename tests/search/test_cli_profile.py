"""`llmcap profile` and `llmcap simulate --op-tables` as a user runs them."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from search.cli import cli

VIDUR_DIR = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "vidur"
needs_vidur = pytest.mark.skipif(
    not VIDUR_DIR.is_dir(), reason="Vidur tables (../shared/data/vidur) absent"
)
SMALL = ["--num-requests", "40", "--qps", "1"]
TINY = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
    "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128,
    "num_hidden_layers": 2, "vocab_size": 256, "max_position_embeddings": 2048,
}  # fmt: skip


def invoke(*args: str):
    return CliRunner().invoke(cli, [str(a) for a in args], env={"COLUMNS": "200"})


@pytest.fixture(scope="module")
def vidur_a100(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("vidur") / "a100"
    result = invoke("profile", "import-vidur", VIDUR_DIR, "--gpu", "a100", "--out", out)
    assert result.exit_code == 0, result.output
    assert f"wrote {out / 'gemm.csv'}: 36516 rows" in result.output
    return out


@needs_vidur
def test_simulate_on_imported_vidur_tables_says_which_tables_it_used(vidur_a100: Path):
    args = ["simulate", *SMALL, "--model", "meta-llama/Llama-2-70b-hf", "--tp", "2",
            "--estimator", "profiled", "--op-tables", vidur_a100]  # fmt: skip
    result = invoke(*args, "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["estimator"]["used"] == "profiled"
    assert f"llmcap op tables {vidur_a100.resolve()} (vidur on NVIDIA A100" in (
        data["estimator"]["label"]
    )
    # layer GEMMs, attention and all-reduce all measured; Vidur does not time the LM head,
    # which the table's GEMM regressor (or, without one, the roofline) answers
    assert set(data["estimator"]["fallbacks"]) <= {"lm_head"}
    assert data["requests"]["completed"] == 40
    roof = json.loads(invoke(*args[:-4], "--json").output)  # the roofline
    ratio = data["latency_s"]["tpot"]["p50"] / roof["latency_s"]["tpot"]["p50"]
    assert 0.5 < ratio < 2.0  # the same deployment, timed from Vidur's A100 measurements


@needs_vidur
def test_tables_of_another_gpu_exit_2_naming_both(vidur_a100: Path):
    result = invoke("simulate", *SMALL, "--sku", "h100-sxm", "--estimator", "profiled",
                    "--op-tables", vidur_a100)  # fmt: skip
    assert result.exit_code == 2
    assert "measured on 'a100-80gb', not 'h100-sxm'" in result.output
    assert "Traceback" not in result.output


def test_malformed_or_missing_tables_exit_2_naming_file_and_field(tmp_path: Path):
    from estimators._op_tables import OpTablesMeta, write_op_tables

    gemm = pd.DataFrame({"dtype": ["bf16"] * 2, "m": [1, 8], "n": [4096] * 2, "k": [4096] * 2,
                         "latency_ms": [0.01, "fast"]})  # fmt: skip
    meta = OpTablesMeta(source="test", device="cuda", dtype="bf16", date="2026-01-01")
    write_op_tables(tmp_path / "bad", meta, {"gemm": gemm})
    result = invoke("simulate", *SMALL, "--estimator", "profiled", "--op-tables", tmp_path / "bad")
    assert result.exit_code == 2
    assert "gemm.csv: field 'latency_ms' row 2: 'fast' is not a positive number" in result.output
    assert "Traceback" not in result.output
    result = invoke("simulate", *SMALL, "--estimator", "auto", "--op-tables", tmp_path / "nope")
    assert result.exit_code == 2 and "op tables" in result.output and "does not exist" in (
        result.output
    )
    result = invoke("simulate", *SMALL, "--op-tables", tmp_path / "bad")  # roofline reads none
    assert result.exit_code == 2 and "add --estimator profiled" in result.output


def test_profile_input_errors_exit_2(tmp_path: Path):
    result = invoke("profile", "run", "--model", "meta-llama/Llama-3.1-8B", "--tp", "1,x",
                    "--out", tmp_path)  # fmt: skip
    assert result.exit_code == 2 and "comma-separated list of integers" in result.output
    result = invoke("profile", "run", "--model", "meta-llama/Llama-3.1-8B", "--sku", "tpu-v9",
                    "--out", tmp_path)  # fmt: skip
    assert result.exit_code == 2 and "tpu-v9" in result.output
    result = invoke("profile", "import-vidur", tmp_path / "nowhere", "--gpu", "a100", "--out",
                    tmp_path / "o")  # fmt: skip
    assert result.exit_code == 2 and "nowhere: does not exist" in result.output
    assert "Traceback" not in result.output


def test_profile_fp8_on_cpu_exits_2_with_what_is_needed(tmp_path: Path):
    pytest.importorskip("torch")
    config = tmp_path / "config.json"
    config.write_text(json.dumps(TINY))
    result = invoke("profile", "run", "--model", config, "--dtype", "fp8", "--device", "cpu",
                    "--out", tmp_path / "t")  # fmt: skip
    assert result.exit_code == 2
    assert "fp8 GEMMs need an NVIDIA GPU of compute capability 8.9" in result.output


@pytest.mark.slow
def test_profile_run_on_cpu_then_simulate_reads_the_tables(tmp_path: Path):
    pytest.importorskip("torch")
    config = tmp_path / "config.json"
    config.write_text(json.dumps(TINY))
    out = tmp_path / "tables"
    result = invoke("profile", "run", "--model", config, "--tp", "1", "--device", "cpu",
                    "--quick", "--threads", "1", "--out", out)  # fmt: skip
    assert result.exit_code == 0, result.output
    assert f"wrote {out / 'gemm.csv'}: 12 rows" in result.output  # 4 shapes x 3 token counts
    assert "the tables name no catalog SKU" in result.output
    result = invoke("simulate", *SMALL, "--model", config, "--sku", "l4", "--estimator",
                    "profiled", "--op-tables", out, "--json")  # fmt: skip
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert "llmcap-profiler on" in data["estimator"]["label"]
    assert data["estimator"]["fallbacks"] == {}
    assert data["requests"]["completed"] == 40


def _spec(tables: Path, skus: list[str], estimator: str = "profiled") -> dict:
    return {
        "name": "op-tables", "model": "meta-llama/Llama-2-7b-hf", "skus": skus,
        "estimator": estimator, "op_tables": str(tables),
        "workload": {"source": "chat", "num_requests": 60},
        "space": {"tp": [1], "schedulers": {"sarathi": {"batch_size": [64], "chunk_size": [512]}}},
    }  # fmt: skip


def test_search_spec_op_tables_are_checked_and_fingerprinted(tmp_path: Path):
    from estimators._op_tables import OpTablesMeta, write_op_tables
    from search._errors import SpecError
    from search._spec import parse_spec

    gemm = pd.DataFrame({"dtype": ["bf16"] * 2, "m": [1, 8], "n": [4096] * 2, "k": [4096] * 2,
                         "latency_ms": [0.01, 0.02]})  # fmt: skip
    meta = OpTablesMeta(source="test", device="cuda", dtype="bf16", date="2026-01-01",
                        sku="a100-80gb")  # fmt: skip
    write_op_tables(tmp_path / "t", meta, {"gemm": gemm})
    spec = parse_spec(_spec(tmp_path / "t", ["a100-80gb"]))
    before = spec.fingerprint()
    assert before != parse_spec(_spec(tmp_path / "t", ["a100-80gb"], "auto")).fingerprint()
    write_op_tables(tmp_path / "t", meta, {"gemm": gemm.assign(latency_ms=[0.01, 0.03])})
    assert parse_spec(_spec(tmp_path / "t", ["a100-80gb"])).fingerprint() != before
    with pytest.raises(SpecError, match=r"measured on 'a100-80gb', not 'h100-sxm'"):
        parse_spec(_spec(tmp_path / "t", ["a100-80gb", "h100-sxm"]))
    parse_spec(_spec(tmp_path / "t", ["a100-80gb", "h100-sxm"], "auto"))  # roofline for H100
    with pytest.raises(SpecError, match=r"op_tables are read by the profiled and auto"):
        parse_spec(_spec(tmp_path / "t", ["a100-80gb"], "roofline"))
    with pytest.raises(SpecError, match=r"nowhere: does not exist"):
        parse_spec(_spec(tmp_path / "nowhere", ["a100-80gb"]))


@needs_vidur
def test_search_runs_on_imported_vidur_tables(vidur_a100: Path, tmp_path: Path):
    import yaml

    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(_spec(vidur_a100, ["a100-80gb"])))
    db = f"sqlite:///{tmp_path / 'r.db'}"
    result = invoke("search", "run", spec, "--db", db, "--executor", "inline")
    assert result.exit_code == 0, result.output
    best = invoke("results", "best", "--db", db)
    assert best.exit_code == 0 and "QPS" in best.output


def test_the_catalog_lists_which_operators_each_shipped_table_times():
    result = invoke("catalog", "op-tables", "--json")
    assert result.exit_code == 0, result.output
    by_name = {row["name"]: row for row in json.loads(result.output)}
    assert by_name["h200/llama-3.1-8b"]["operators"] == "gemm,prefill,decode"
    assert by_name["h200/minimax-m2.5"]["operators"] == "gemm,prefill,decode,moe"
    assert by_name["h200/deepseek-v3"]["operators"] == "gemm,moe"  # MLA: not timed
