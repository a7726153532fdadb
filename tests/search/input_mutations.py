"""Bad input for llmcap, generated from a random.Random: mutated specs and simulate options.

Shared by the property-based test (tests/search/test_input_fuzz.py, which draws the Random
from hypothesis) and the subprocess fuzzer (benchmarks/fuzz_inputs.py).  Every case is small
to run when it is valid (few requests), so a case that takes long or grows large is a bug.
"""

from __future__ import annotations

import copy
import random
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
BASE_SPEC_FILE = REPO / "examples" / "quick.yaml"

LONG_NAME = "n" * 5000

# values that a field should refuse, or accept and still run quickly
EVIL_VALUES: list[Any] = [
    None, -1, 0, 1, 2, 3, 10**12, 10**30, 1.0e30, 1.5, -0.5, float("inf"), float("nan"),
    "", "x", "sarathi", "1e12", LONG_NAME, "/" + LONG_NAME, "/nonexistent/dir/file",
    "\u00e9\u2603", True, [], {}, [1, 2], {"a": 1}, [[[[[]]]]], "2024-01-01", "~nobody/x",
]  # fmt: skip

# mutations of the base spec that run quickly when valid: few requests
SMALL_SPEC_OVERRIDES = {"workload": {"source": "chat", "num_requests": 50}}


def base_spec() -> dict[str, Any]:
    spec = yaml.safe_load(BASE_SPEC_FILE.read_text(encoding="utf-8"))
    spec["workload"] = dict(SMALL_SPEC_OVERRIDES["workload"])
    return spec


def _paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path to a value inside nested dicts and lists."""
    out = [prefix] if prefix else []
    if isinstance(node, dict):
        for key, value in node.items():
            out += _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out += _paths(value, (*prefix, i))
    return out


def _parent(root: Any, path: tuple) -> Any:
    for part in path[:-1]:
        root = root[part]
    return root


def deep_value(depth: int, kind: str) -> str:
    """YAML text of a value nested `depth` levels deep."""
    if kind == "list":
        return "[" * depth + "]" * depth
    return "{a: " * depth + "1" + "}" * depth


def mutate_spec(rng: random.Random) -> bytes:
    """One mutated spec file (YAML bytes, not always valid YAML or UTF-8)."""
    spec = base_spec()
    for _ in range(rng.randint(1, 3)):
        spec = _mutate_tree(rng, spec)
    text = yaml.safe_dump(spec, sort_keys=False, allow_unicode=True)
    return _mutate_text(rng, text) if rng.random() < 0.35 else text.encode()


def _mutate_tree(rng: random.Random, spec: Any) -> Any:
    if not isinstance(spec, dict) or not spec:
        return spec
    spec = copy.deepcopy(spec)
    path = rng.choice(_paths(spec))
    parent, key = _parent(spec, path), path[-1]
    action = rng.choice(["drop", "replace", "replace", "replace", "unknown", "wrap", "top"])
    if action == "drop":
        del parent[key]
    elif action == "replace":
        parent[key] = rng.choice(EVIL_VALUES)
    elif action == "unknown" and isinstance(parent, dict):
        parent[f"extra_{rng.randint(0, 9)}"] = rng.choice(EVIL_VALUES)
    elif action == "wrap":
        parent[key] = [parent[key]] if rng.random() < 0.5 else {"value": parent[key]}
    elif action == "top":
        return rng.choice([[spec], "just text", 42, None])
    return spec


def _mutate_text(rng: random.Random, text: str) -> bytes:
    data = text.encode()
    action = rng.choice(["bytes", "truncate", "duplicate", "deep", "alias", "bom", "huge_list"])
    if action == "bytes":
        at = rng.randrange(len(data) + 1)
        junk = bytes(rng.randrange(128, 256) for _ in range(rng.randint(1, 4)))
        return data[:at] + junk + data[at:]
    if action == "truncate":
        return data[: rng.randrange(len(data) + 1)]
    if action == "duplicate":
        lines = [ln for ln in text.splitlines() if ln and not ln.startswith((" ", "#", "-"))]
        return (text + (rng.choice(lines) if lines else "name: again") + "\n").encode()
    if action == "deep":
        depth = rng.choice([10, 40, 200, 5000, 100_000])
        return (text + f"deep: {deep_value(depth, rng.choice(['list', 'map']))}\n").encode()
    if action == "alias":
        rows = ["l0: &l0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]"]
        rows += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]" for i in range(1, 8)]
        return (text + "\n".join(rows) + "\n").encode()
    if action == "bom":
        return b"\xff\xfe" + text.encode("utf-16-le")
    return (text + "extra: [" + ", ".join(["1"] * 300_000) + "]\n").encode()


# -- simulate command lines ------------------------------------------------------------------

# options of `llmcap simulate` and values that keep a valid run short
SIMULATE_OPTIONS: dict[str, list[str]] = {
    "--model": ["meta-llama/Llama-2-7b-hf", "llama-2-70b", "nonexistent-model", "/nope.json"],
    "--sku": ["a100-80gb", "h100-sxm", "l40s", "tpu-v9"],
    "--tp": ["1", "2", "3", "8", "1024"],
    "--pp": ["1", "2", "5", "64"],
    "--replicas": ["1", "2", "4"],
    "--scheduler": ["vllm", "orca", "sarathi", "static", "fifo"],
    "--batch-size": ["1", "8", "128", "100000"],
    "--chunk-size": ["64", "512", "4096"],
    "--max-tokens": ["64", "4096"],
    "--global-scheduler": ["round_robin", "lor", "random"],
    "--precision": ["bf16", "fp8"],
    "--kv-precision": ["bf16", "fp8"],
    "--block-size": ["1", "16", "4096"],
    "--gpu-memory-utilization": ["0.5", "0.9", "1.0"],
    "--workload": ["chat", "code", "summarization", "fixed-1k-128", "/nonexistent/t.csv"],
    "--trace-format": ["auto", "azure", "mooncake"],
    "--arrival": ["poisson", "gamma", "static", "trace"],
    "--cv": ["0.5", "1", "4"],
    "--prompt-len": ["fixed:100", "uniform:10:200", "lognormal:100:0.5:400", "zipf:1.1:10:100"],
    "--output-len": ["fixed:10", "uniform:1:50"],
    "--max-total-tokens": ["256", "4096"],
    "--qps": ["0.5", "2", "50"],
    "--concurrency": ["1", "8"],
    "--num-requests": ["1", "10", "40"],
    "--seed": ["0", "7"],
}
EVIL_OPTION_VALUES = [
    "", "-1", "0", "1e12", "1000000000000", "10000000000000000000000", "nan", "inf", "-inf",
    "abc", "1.5", "0x10", LONG_NAME, "/" + LONG_NAME, "fixed:1000000000", "uniform:5:1",
    "lognormal:0:0", "zipf:0:1:2", "trace:/nonexistent", "fixed:", ":::", "\u2603",
    "1e-300", "1e300", "1000001", "1025", "1e-9",
]  # fmt: skip
OUTPUT_PATHS = [
    "{tmp}/r.csv", "{tmp}/r.parquet", "{tmp}/r.txt", "/nonexistent/dir/r.csv", "/dev/full",
    "{tmp}/full.csv", "/proc/r.csv", "{tmp}", "{tmp}/" + LONG_NAME + ".csv", "",
]  # fmt: skip
TRACE_PATHS = ["{tmp}/t.json", "/nonexistent/dir/t.json", "/dev/full", "{tmp}/full.json",
               "/proc/t.json", "{tmp}/t.csv", "{tmp}/" + LONG_NAME + ".json"]  # fmt: skip
CONFIG_FILES = ["{tmp}/config.yaml", "/nonexistent.yaml", "{tmp}", "{tmp}/" + LONG_NAME]

# the base of every command line: short runs
SIMULATE_BASE = ["simulate", "--num-requests", "20", "--qps", "4", "--json"]


def simulate_args(rng: random.Random) -> list[str]:
    """One `llmcap simulate` command line; paths hold "{tmp}" for a scratch folder."""
    args = list(SIMULATE_BASE)
    if rng.random() < 0.2:
        args = ["simulate", "--json"]  # the option defaults (1000 requests, no rate)
    for option in rng.sample(list(SIMULATE_OPTIONS), rng.randint(1, 4)):
        if option == "--concurrency" and "--qps" in args:
            at = args.index("--qps")
            del args[at : at + 2]
        value = (
            rng.choice(EVIL_OPTION_VALUES)
            if rng.random() < 0.25
            else rng.choice(SIMULATE_OPTIONS[option])
        )
        args += [option, value]
    if rng.random() < 0.15:
        args += ["--requests-out", rng.choice(OUTPUT_PATHS)]
    if rng.random() < 0.15:
        args += ["--trace-out", rng.choice(TRACE_PATHS)]
    if rng.random() < 0.1:
        args += ["--config", rng.choice(CONFIG_FILES)]
    if rng.random() < 0.05:
        args += [rng.choice(["--bogus", "--tp", "--json=3"])]
    return args


def config_file_bytes(rng: random.Random) -> bytes:
    """A mutated `simulate --config` file: option names with good or evil values."""
    options = {"num_requests": 10, "qps": 4}
    for option in rng.sample(list(SIMULATE_OPTIONS), rng.randint(0, 3)):
        key = option.removeprefix("--").replace("-", "_")
        options[key] = rng.choice([*EVIL_VALUES, rng.choice(SIMULATE_OPTIONS[option])])
    text = yaml.safe_dump(options, allow_unicode=True)
    return _mutate_text(rng, text) if rng.random() < 0.3 else text.encode()


def prepare_scratch(tmp: Path, rng: random.Random) -> None:
    """The scratch folder's files: a config file, and links to /dev/full."""
    (tmp / "config.yaml").write_bytes(config_file_bytes(rng))
    for name in ("full.csv", "full.json"):
        link = tmp / name
        if not link.is_symlink():
            link.symlink_to("/dev/full")


def fill(args: list[str], tmp: Path) -> list[str]:
    return [a.replace("{tmp}", str(tmp)) for a in args]
