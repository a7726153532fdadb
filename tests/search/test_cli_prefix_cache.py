"""`llmcap simulate` with prefix caching: a trace's hash_ids, the options, bad input."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from search.cli import cli

SMALL = ["--model", "meta-llama/Llama-3.1-8B", "--sku", "h100-sxm", "--num-requests", "40"]


def _trace(path: Path, hashes: list) -> Path:
    lines = [
        {"timestamp": 100 * i, "input_length": 2048, "output_length": 16, "hash_ids": h}
        for i, h in enumerate(hashes)
    ]
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    return path


def invoke(*args: str):
    return CliRunner().invoke(cli, ["simulate", *SMALL, *args], env={"COLUMNS": "200"})


def test_a_shared_system_prompt_is_served_from_the_cache(tmp_path):
    # every request shares its first two 512-token blocks; the third and fourth are its own
    trace = _trace(tmp_path / "t.jsonl", [[0, 1, 10 + 2 * i, 11 + 2 * i] for i in range(40)])
    on = invoke("--workload", str(trace), "--json")
    off = invoke("--workload", str(trace), "--json", "--no-prefix-cache")
    assert on.exit_code == 0 and off.exit_code == 0, on.output + off.output
    cache = json.loads(on.output)["prefix_cache"]
    # 39 requests x 1024 cached tokens of 40 x 2048 prompt tokens
    assert cache["prefill_tokens_saved"] == 39 * 1024
    assert cache["hit_rate"] == 39 * 1024 / (40 * 2048)
    assert "prefix_cache" not in json.loads(off.output)
    table = invoke("--workload", str(trace), "--prefix-cache-tokens", "unbounded")
    assert "prefix cache: hit rate 48.8% of prompt tokens (39,936 not recomputed); unbounded" in (
        table.output
    )


def test_hash_ids_that_are_not_lists_of_integers_exit_2_naming_the_line(tmp_path):
    trace = _trace(tmp_path / "t.jsonl", [[0, 1], [0, "x"]])
    result = invoke("--workload", str(trace))
    assert result.exit_code == 2
    assert "line 2: field 'hash_ids' must be a list of integers" in result.output
    assert "Traceback" not in result.output


def test_hash_ids_that_repeat_a_hash_exit_2_naming_the_line_and_the_hash(tmp_path):
    # a block's hash stands for the prompt up to that block: one prompt never repeats one
    # (the prefix cache would count the block twice)
    trace = _trace(tmp_path / "t.jsonl", [[0, 1], [0, 1, 0]])
    result = invoke("--workload", str(trace))
    assert result.exit_code == 2
    assert "line 2: field 'hash_ids' repeats hash 0" in result.output
    assert "Traceback" not in result.output


def test_a_bad_cache_size_exits_2_naming_the_option(tmp_path):
    trace = _trace(tmp_path / "t.jsonl", [[0, 1]] * 3)
    result = invoke("--workload", str(trace), "--prefix-cache-tokens", "lots")
    assert result.exit_code == 2 and "prefix_cache_tokens" in result.output
    assert "Traceback" not in result.output
