"""`llmcap simulate` with a prefill pool and a decode pool."""

from __future__ import annotations

import json

from click.testing import CliRunner

from search.cli import cli

BASE = ["simulate", "--model", "meta-llama/Llama-3.1-70B", "--sku", "h100-sxm", "--tp", "4",
        "--qps", "3", "--num-requests", "300", "--json"]  # fmt: skip


def _run(*args: str) -> dict:
    result = CliRunner().invoke(cli, [*BASE, *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_decode_pool_takes_the_decodes_off_the_prefill_gpus():
    aggregated = _run("--replicas", "2")
    split = _run("--decode-sku", "h200", "--decode-tp", "4", "--decode-replicas", "1")
    # decodes never wait behind a prompt chunk: the token gaps are the decode steps alone
    assert split["latency_s"]["tbt"]["p99"] < 0.5 * aggregated["latency_s"]["tbt"]["p99"]
    assert split["requests"]["completed"] == 300
    replicas = split["replicas"]
    assert len(replicas) == 2 and replicas[1]["tokens_per_batch_mean"] < 64  # decode only
    assert [r["role"] for r in replicas] == ["prefill", "decode"]
    assert {r["role"] for r in aggregated["replicas"]} == {"aggregated"}


def test_the_replicas_table_says_which_replicas_are_each_pool_s():
    args = [a for a in BASE if a != "--json"]
    split = CliRunner().invoke(cli, [*args, "--replicas", "2", "--decode-sku", "h200",
                                     "--decode-tp", "4", "--decode-replicas", "3"])  # fmt: skip
    assert split.exit_code == 0, split.output
    assert "Replicas (mean ≤ max; prefill #0-1, decode #2-4)" in split.output
    aggregated = CliRunner().invoke(cli, [*args, "--replicas", "2"])
    assert "Replicas (mean ≤ max)" in aggregated.output


def test_a_static_decode_pool_or_a_bad_tp_exits_2_naming_it():
    result = CliRunner().invoke(cli, [*BASE, "--decode-replicas", "1", "--scheduler", "static"])
    assert result.exit_code == 2 and "decode pool: scheduler 'static'" in result.output
    result = CliRunner().invoke(cli, [*BASE, "--decode-replicas", "1", "--decode-tp", "3"])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "3" in result.output


DSV3 = ["simulate", "--model", "deepseek-ai/DeepSeek-V3", "--sku", "h200", "--tp", "8",
        "--ep", "8", "--precision", "fp8", "--engine", "trtllm", "--concurrency", "64",
        "--prompt-len", "fixed:1024", "--output-len", "fixed:64", "--num-requests", "128",
        "--json", "--decode-replicas", "1"]  # fmt: skip


def test_a_decode_pool_with_attention_dp_and_experts():
    wide = CliRunner().invoke(cli, [*DSV3, "--decode-tp", "1", "--decode-dp", "8",
                                    "--decode-ep", "8"])  # fmt: skip
    assert wide.exit_code == 0, wide.output
    out = json.loads(wide.output)
    assert out["requests"]["completed"] == 128
    deep = json.loads(CliRunner().invoke(cli, [*DSV3, "--decode-tp", "8", "--decode-ep",
                                               "8"]).output)  # fmt: skip
    assert (out["deployment"]["decode"]["dp"], out["deployment"]["decode"]["ep"]) == (8, 8)
    assert (deep["deployment"]["decode"]["dp"], deep["deployment"]["decode"]["tp"]) == (1, 8)
    # the same 8 decode GPUs as 8 DP ranks of TP 1 or one TP 8 group: another decode step
    assert out["latency_s"]["tpot"]["mean"] != deep["latency_s"]["tpot"]["mean"]


def test_a_decode_ep_that_does_not_divide_its_gpus_exits_2_naming_it():
    result = CliRunner().invoke(cli, [*DSV3, "--decode-tp", "1", "--decode-dp", "8",
                                      "--decode-ep", "3"])  # fmt: skip
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "ep" in result.output and "3" in result.output


# four decode replicas of batch cap 1 at concurrency 4, output lengths spread 100-200
ROUTED = ["simulate", "--model", "meta-llama/Llama-3.1-70B", "--sku", "h100-sxm", "--tp", "4",
          "--engine", "trtllm", "--concurrency", "4", "--num-requests", "40",
          "--prompt-len", "fixed:512", "--output-len", "uniform:100:200", "--decode-replicas",
          "4", "--decode-tp", "4", "--decode-batch-size", "1", "--json"]  # fmt: skip


def test_decode_router_round_robin_makes_requests_wait_for_a_busy_decoder():
    def run(*router: str) -> dict:
        result = CliRunner().invoke(cli, [*ROUTED, *router])
        assert result.exit_code == 0, result.output
        return json.loads(result.output)

    lor, rr = run(), run("--decode-router", "round_robin")
    assert (lor["deployment"]["decode"]["router"], rr["deployment"]["decode"]["router"]) == (
        "lor", "round_robin"
    )
    # TensorRT-LLM's client sees the first token from its decode replica: round-robin sends
    # some requests to a replica still decoding another, where they wait for its slot
    assert rr["latency_s"]["ttft"]["mean"] > 2 * lor["latency_s"]["ttft"]["mean"]
    # each decodes alone either way: the same steps
    assert abs(rr["latency_s"]["tpot"]["mean"] - lor["latency_s"]["tpot"]["mean"]) < 1e-9


def test_a_bad_decode_router_exits_2_naming_the_choices(tmp_path):
    result = CliRunner().invoke(cli, [*ROUTED, "--decode-router", "fastest"])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "--decode-router" in result.output and "round_robin" in result.output
    config = tmp_path / "sim.yaml"
    config.write_text("decode:\n  replicas: 2\n  router: fastest\n")
    result = CliRunner().invoke(cli, ["simulate", "--config", str(config)])
    assert result.exit_code == 2 and "decode.router" in result.output
    assert "fastest" in result.output


def test_the_cli_offers_exactly_the_decode_routers_the_simulator_takes():
    """The CLI spells its --decode-router choices out (it imports no simulator to start);
    they are simulator.DECODE_ROUTERS, which the search spec's decode.router takes too."""
    from simulator import DECODE_ROUTERS

    option = next(p for p in cli.commands["simulate"].params if p.name == "decode_router")
    assert tuple(option.type.choices) == DECODE_ROUTERS
    assert "cache_aware" not in DECODE_ROUTERS
