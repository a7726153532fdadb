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


def test_a_static_decode_pool_or_a_bad_tp_exits_2_naming_it():
    result = CliRunner().invoke(cli, [*BASE, "--decode-replicas", "1", "--scheduler", "static"])
    assert result.exit_code == 2 and "decode pool: scheduler 'static'" in result.output
    result = CliRunner().invoke(cli, [*BASE, "--decode-replicas", "1", "--decode-tp", "3"])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "3" in result.output
