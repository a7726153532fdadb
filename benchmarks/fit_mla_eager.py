"""Per-layer fixed cost of MLA prefill run eagerly, from aiconfigurator's MLA module tables.

Engines run decode in CUDA graphs and prefill eagerly (SGLang, vLLM's attention, TRT-LLM's
context phase): every kernel of a prefill layer is launched from the host, and at small
prompts the GPU waits for the launches.  aiconfigurator-core times the whole MLA module
(projections, norms, RoPE, attention) of both phases: ``mla_{context,generation}_module_perf``
(TRT-LLM, vLLM) and ``wideep_{context,generation}_mla_perf`` (SGLang).  At one sequence of
the smallest measured length the work is negligible, so

    eager cost per layer = context module (batch 1, shortest prompt)
                           - generation module (batch 1, shortest context)

is what the eager launch costs beyond the graphed one (the median over the measured head
counts, never below 0).  Written per engine and GPU to estimators/data/mla_eager.yaml,
which the MLA roofline adds to each layer of an iteration that runs a prefill
(estimators/_mla.py).  No end-to-end point is read.

    python benchmarks/fit_mla_eager.py            # print the fit
    python benchmarks/fit_mla_eager.py --write    # and update estimators/data/mla_eager.yaml
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from estimators import _aic_tables as aic

YAML_PATH = Path(__file__).resolve().parent.parent / "estimators" / "data" / "mla_eager.yaml"
# (context table, generation table) of the whole MLA module, by engine
MODULE_TABLES = {
    "sglang": ("wideep_context_mla_perf.parquet", "wideep_generation_mla_perf.parquet"),
    "trtllm": ("mla_context_module_perf.parquet", "mla_generation_module_perf.parquet"),
    "vllm": ("mla_context_module_perf.parquet", "mla_generation_module_perf.parquet"),
}


def _smallest(df, length: str) -> dict[int, float]:
    """Seconds of one sequence at the shortest measured `length`, by head count (the
    fastest kernel and dtype measured there)."""
    one = df[df["batch_size"] == 1]
    out: dict[int, float] = {}
    for heads, sub in one.groupby("num_heads"):
        shortest = sub[sub[length] == sub[length].min()]
        out[int(heads)] = float(shortest["seconds"].min())
    return out


def eager_cost(system: str, engine: str) -> tuple[float, str] | None:
    """(seconds per layer, tables used) for one system and engine, None without tables."""
    ctx_name, gen_name = MODULE_TABLES[engine]
    try:
        ctx_ref = aic.resolve_table(system, "mla", engine, None, ctx_name)
        gen_ref = aic.resolve_table(system, "mla", engine, ctx_ref.version, gen_name)
    except aic.AicDataMissing:
        return None
    req = ("num_heads", "batch_size", "isl", "latency")
    ctx = aic._read(ctx_ref, req)
    gen = aic._read(gen_ref, req)
    gen_len = "step" if "step" in gen and gen["step"].nunique() > 1 else "isl"
    c, g = _smallest(ctx, "isl"), _smallest(gen, gen_len)
    diffs = [c[h] - g[h] for h in sorted(set(c) & set(g))]
    if not diffs:
        return None
    return max(0.0, float(np.median(diffs))), f"{ctx_ref.label} - {gen_ref.label}"


def fit() -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for engine in MODULE_TABLES:
        for sku, system in sorted(aic.SKU_SYSTEMS.items()):
            got = eager_cost(system, engine)
            if got is None:
                continue
            seconds, label = got
            out.setdefault(engine, {})[sku] = round(seconds * 1e6, 1)
            print(f"{engine:7s} {sku:10s} {seconds * 1e6:7.1f} us/layer  ({label})")
    return out


def write(fits: dict[str, dict[str, float]]) -> None:
    import yaml

    head = (
        "# Per-layer fixed cost (us) of an MLA prefill layer run eagerly, by engine and GPU.\n"
        "# Written by: python benchmarks/fit_mla_eager.py --write (see its docstring): the\n"
        "# context module minus the generation module of aiconfigurator-core's MLA module\n"
        "# tables at one sequence of the shortest length. Read by estimators/_mla.py.\n"
    )
    YAML_PATH.write_text(head + yaml.safe_dump({"prefill_layer_us": fits}, sort_keys=True))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"update {YAML_PATH.name}")
    args = parser.parse_args()
    fits = fit()
    if args.write:
        write(fits)
        print(f"wrote {YAML_PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
