"""`llmcap simulate` and `llmcap catalog` as a user runs them."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from click.testing import CliRunner

from search.cli import cli
from tests.search.conftest import needs_aic

SMALL = ["--num-requests", "60", "--qps", "2"]


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args), env={"COLUMNS": "200"})


def test_simulate_prints_a_metrics_table():
    result = invoke("simulate", *SMALL)
    assert result.exit_code == 0, result.output
    for text in ("Latency", "TTFT", "TBT", "TPOT", "Scheduling delay", "MFU", "KV cache"):
        assert text in result.output


def test_simulate_json_summary():
    result = invoke(
        "simulate", *SMALL, "--json", "--scheduler", "vllm", "--engine", "vidur"
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["requests"]["completed"] == 60
    assert data["deployment"]["scheduler"] == "vllm"
    assert data["memory"]["num_kv_blocks"] > 0
    assert 0 < data["latency_s"]["ttft"]["p50"] <= data["latency_s"]["ttft"]["p99"]


def test_a_checkpoint_variant_runs_as_its_builtin_and_says_so():
    result = invoke("simulate", *SMALL, "--model", "meta-llama/Llama-2-7b-chat-hf")
    assert result.exit_code == 0, result.output
    assert "has the architecture of built-in meta-llama/Llama-2-7b-hf" in result.output
    data = json.loads(
        invoke("simulate", *SMALL, "--model", "meta-llama/Llama-2-7b-chat-hf", "--json").stdout
    )
    assert data["deployment"]["model_architecture"] == "meta-llama/Llama-2-7b-hf"


def test_config_file_with_command_line_override(tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text(
        "model: meta-llama/Llama-2-13b-hf\nsku: h100-sxm\ntp: 2\nscheduler: orca\n"
        "workload: {source: code, output_len: 'fixed:8'}\nnum-requests: 40\nqps: 3\n"
    )
    result = invoke("simulate", "--config", str(config), "--scheduler", "sarathi", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["deployment"]["model"] == "meta-llama/Llama-2-13b-hf"
    assert data["deployment"]["tp"] == 2
    assert data["deployment"]["scheduler"] == "sarathi"  # the command line wins
    assert data["deployment"]["workload"]["source"] == "code"
    assert data["workload"]["output_mean"] == 8


def test_records_and_trace_outputs(tmp_path):
    csv_path, trace_path = tmp_path / "req.csv", tmp_path / "trace.json"
    result = invoke(
        "simulate", *SMALL, "--pp", "2", "--requests-out", str(csv_path), "--trace-out",
        str(trace_path),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    frame = pd.read_csv(csv_path)
    assert len(frame) == 60 and {"ttft", "tpot", "scheduling_delay"} <= set(frame.columns)
    trace = json.loads(trace_path.read_text())
    spans = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert {e["tid"] for e in spans} == {0, 1}  # both pipeline stages
    # batches named by phase, with what they held
    assert {e["name"] for e in spans} <= {"prefill", "decode", "mixed"}
    assert {"prefill", "decode"} <= {e["name"] for e in spans}
    for e in spans:
        args = e["args"]
        assert (args["prefills"] > 0) == (e["name"] != "decode")
        assert (args["decodes"] > 0) == (e["name"] != "prefill")
        assert args["prefill_tokens"] >= args["prefills"] and args["kv_blocks_used"] > 0
    # every request a span from arrival to completion, with its first token
    for phase in ("b", "e", "n"):
        assert len([e for e in trace["traceEvents"] if e["ph"] == phase]) == 60
    begins = {e["id"]: e["ts"] for e in trace["traceEvents"] if e["ph"] == "b"}
    ends = {e["id"]: e["ts"] for e in trace["traceEvents"] if e["ph"] == "e"}
    assert all(ends[i] > begins[i] for i in begins)


def test_an_overloaded_run_says_so_and_long_times_read_in_seconds():
    result = invoke("simulate", "--num-requests", "300", "--qps", "20")
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.replace("│", " ").split())
    assert "warning: overloaded: offered" in text and "served" in text
    assert "TTFT s " in text  # tens of seconds of queueing read in s
    assert "TBT ms " in text and "Normalized ms/token" in text
    data = json.loads(invoke("simulate", "--num-requests", "300", "--qps", "20", "--json").output)
    assert len(data["warnings"]) == 1 and data["warnings"][0].startswith("overloaded")
    calm = json.loads(invoke("simulate", *SMALL, "--json").output)
    assert calm["warnings"] == []


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--model", "no-such-model"], "Built-in models"),
        (["--sku", "h900"], "known ids"),
        (["--tp", "3"], "does not divide the 32 attention heads"),
        (["--pp", "5"], "does not divide the 32 layers"),
        (["--model", "meta-llama/Llama-2-70b-hf"], "DOES NOT FIT"),
        (["--qps", "0"], "qps"),
        (["--qps", "-2"], "greater than 0"),
        (["--workload", "missing.csv"], "neither a built-in workload"),
        (["--concurrency", "4"], "not both"),
        (["--config", "nowhere.yaml"], "config file not found"),
    ],
)
def test_bad_input_is_one_clear_message_and_exit_2(args, needle):
    result = invoke("simulate", *SMALL, *args)
    assert result.exit_code == 2
    assert needle in result.output
    assert "Traceback" not in result.output


def test_trace_without_needed_columns_names_them(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("time,foo\n0,1\n")
    result = invoke("simulate", "--workload", str(bad), "--trace-format", "azure")
    assert result.exit_code == 2
    assert "ContextTokens" in result.output


def test_unknown_config_key_is_named(tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text("modle: x\n")
    result = invoke("simulate", "--config", str(config))
    assert result.exit_code == 2
    assert "modle: unknown field" in result.output


@pytest.mark.parametrize(
    ("text", "flags", "named"),
    [
        ("workload: -1\n", (), "workload: expected a trace file or built-in workload name"),
        ("decode: 5\n", ("--decode-tp", "2"), "decode: expected a mapping of fields; got 5"),
    ],
)
def test_a_config_section_that_is_no_mapping_is_named(tmp_path, text, flags, named):
    config = tmp_path / "run.yaml"
    config.write_text(text)
    result = invoke("simulate", "--config", str(config), *flags)
    assert result.exit_code == 2, result.output
    assert named in result.output and "Traceback" not in result.output


def test_help_documents_every_option():
    result = invoke("simulate", "--help")
    assert result.exit_code == 0
    command = cli.commands["simulate"]
    for param in command.params:
        for opt in param.opts:
            if opt.startswith("--"):
                assert opt in result.output
    assert "Examples" in result.output


def test_catalog_tables():
    skus = invoke("catalog", "skus")
    models = invoke("catalog", "models")
    assert skus.exit_code == 0 and "a100-80gb" in skus.output and "h200" in skus.output
    assert models.exit_code == 0 and "Llama-2-70b-hf" in models.output


def _at_80_columns(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args), env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    return result.output


def test_catalog_fits_80_columns_and_never_shortens_what_a_user_types():
    from estimators import builtin_model_names, load_model
    from sku_catalog import load_catalog

    skus = _at_80_columns("catalog", "skus")
    models = _at_80_columns("catalog", "models")
    assert max(len(line) for line in (skus + models).splitlines()) <= 80
    assert "…" not in skus + models
    for sku in load_catalog().skus():
        assert f" {sku.id} " in skus and f"{sku.price_per_gpu_hour:.2f}" in skus
    for name in builtin_model_names():
        model = load_model(name)
        assert f" {model.name} " in models and f"{model.num_params / 1e9:.2f}B" in models


def test_catalog_wide_and_json_carry_every_field():
    from sku_catalog import load_catalog

    wide = _at_80_columns("catalog", "skus", "--wide")
    for sku in load_catalog().skus():
        assert sku.price_source in wide and sku.name in wide  # whole, past 80 columns
    rows = json.loads(_at_80_columns("catalog", "skus", "--json"))
    assert {r["id"] for r in rows} == {s.id for s in load_catalog().skus()}
    h100 = next(r for r in rows if r["id"] == "h100-sxm")
    assert h100["fp8_tflops"] == 1979.0 and h100["price_per_gpu_hour"] > 0
    models = json.loads(_at_80_columns("catalog", "models", "--json"))
    llama = next(m for m in models if m["name"] == "meta-llama/Llama-3.1-8B")
    assert (llama["num_layers"], llama["num_key_value_heads"]) == (32, 8)


def test_simulate_names_its_engine_and_its_defaults():
    result = invoke("simulate", *SMALL, "--json", "--engine", "sglang", "--sku", "h100-sxm")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["engine"]["name"] == data["deployment"]["engine"] == "sglang@0.5.4"
    assert data["engine"]["memory_fraction_name"] == "mem_fraction_static"
    assert data["deployment"]["chunk_size"] == 8192  # chunked_prefill_size on H100


def test_simulate_unknown_engine_exits_2_naming_the_engines():
    result = invoke("simulate", *SMALL, "--engine", "vllm@0.2")
    assert result.exit_code == 2
    assert "no profile covers version 0.2" in result.output
    assert "trtllm" in result.output
    assert "Traceback" not in result.output


def test_batch_waiting_holds_prompts_back_and_costs_ttft():
    args = ["simulate", "--model", "meta-llama/Llama-3.1-8B", "--sku", "h100-sxm",
            "--engine", "trtllm", "--num-requests", "80", "--qps", "4", "--json"]  # fmt: skip
    plain = json.loads(invoke(*args).output)
    result = invoke(*args, "--batch-wait-iters", "20", "--batch-wait-token-ratio", "0.9")
    assert result.exit_code == 0, result.output
    held = json.loads(result.output)
    # a prompt arriving while others decode waits up to 20 decode steps
    assert held["latency_s"]["ttft"]["p50"] > plain["latency_s"]["ttft"]["p50"] + 0.02
    assert held["requests"]["completed"] == plain["requests"]["completed"] == 80


def test_a_recv_interval_delays_new_requests_and_zero_is_refused():
    args = ["simulate", "--model", "meta-llama/Llama-3.1-8B", "--sku", "h100-sxm",
            "--engine", "sglang", "--num-requests", "80", "--qps", "4", "--json"]  # fmt: skip
    plain = json.loads(invoke(*args).output)
    result = invoke(*args, "--recv-interval", "30")
    assert result.exit_code == 0, result.output
    polled = json.loads(result.output)
    # a request arriving while others decode waits up to 30 decode steps for the next poll
    assert polled["latency_s"]["ttft"]["p50"] > plain["latency_s"]["ttft"]["p50"] + 0.02
    assert polled["requests"]["completed"] == 80
    refused = invoke(*args, "--recv-interval", "0")
    assert refused.exit_code == 2
    assert "--recv-interval" in refused.output and "Traceback" not in refused.output


def test_adp_balance_holds_prompts_under_attention_dp_and_needs_it():
    args = ["simulate", "--model", "Qwen/Qwen3-30B-A3B", "--sku", "h100-sxm", "--dp", "4",
            "--ep", "4", "--engine", "trtllm", "--num-requests", "200", "--concurrency", "32",
            "--prompt-len", "uniform:400:512", "--output-len", "uniform:200:256",
            "--json"]  # fmt: skip
    plain = json.loads(invoke(*args).output)
    result = invoke(*args, "--adp-balance-timeout-iters", "60")
    assert result.exit_code == 0, result.output
    balanced = json.loads(result.output)
    # a prompt waits for one per rank, up to 60 counted iterations
    assert balanced["latency_s"]["ttft"]["mean"] > plain["latency_s"]["ttft"]["mean"] + 0.02
    assert balanced["requests"]["completed"] == plain["requests"]["completed"] == 200
    refused = invoke(*args, "--adp-balance-batching-wait-iters", "-1")
    assert refused.exit_code == 2
    assert "--adp-balance-batching-wait-iters" in refused.output
    no_dp = [a for a in args if a not in ("--dp", "4", "--ep")]
    refused = invoke(*no_dp, "--adp-balance-timeout-iters", "60")
    assert refused.exit_code == 2 and "Traceback" not in refused.output
    assert "dp > 1, got dp 1" in refused.output


@needs_aic
def test_the_engine_release_asked_for_picks_the_measured_tables_nearest_to_it():
    """`--engine NAME@VERSION` runs the profile covering VERSION and reads the operator
    tables measured nearest to VERSION itself, not to the profile's first release."""

    def tables(engine: str) -> str:
        result = invoke("simulate", *SMALL, "--json", "--model", "Qwen/Qwen3-32B",
                        "--sku", "h100-sxm", "--tp", "2", "--estimator", "profiled",
                        "--engine", engine)  # fmt: skip
        assert result.exit_code == 0, result.output
        data = json.loads(result.output)
        assert data["deployment"]["engine"] == "sglang@0.5.4"  # one profile for both
        return data["estimator"]["label"]

    assert tables("sglang").endswith("engine sglang 0.5.6.post2")
    assert tables("sglang@0.5.14").endswith("engine sglang 0.5.14")
