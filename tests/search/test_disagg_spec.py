"""Disaggregated prefill/decode pools in a search spec: parsing, bad input, the space,
fingerprints and prices."""

from __future__ import annotations

from dataclasses import asdict

import pytest
from click.testing import CliRunner

from search._errors import SpecError
from search._space import ConfigPoint, DecodePoint, candidates, check, expand_space
from search._spec import parse_spec, sha256_json
from search.cli import cli

BASE = {
    "model": "meta-llama/Llama-3.1-70B",
    "skus": ["h100-sxm", "h200"],
    "budget": {"max_gpus": 16},
    "space": {"tp": [4, 8], "replicas": [1, 2]},
}
POOLS = {
    "mode": ["aggregated", "disaggregated"],
    "disaggregated": {
        "prefill": {"replicas": [1, 2]},
        "decode": {"skus": ["h200"], "tp": [4], "replicas": [1, 2], "batch_size": [128, 256]},
    },
}


def _spec(**space):
    return parse_spec({**BASE, "space": {**BASE["space"], **space}})


def test_the_pools_sub_spaces_fill_in_from_the_aggregated_axes() -> None:
    spec = _spec(**POOLS)
    prefill, decode = spec.space.pools(spec.skus)
    assert prefill.skus == ("h100-sxm", "h200") and prefill.tp == (4, 8)
    assert decode.skus == ("h200",) and decode.tp == (4,) and decode.pp == (1,)
    count, factors = spec.space.size(len(spec.skus))
    # 2 SKUs x 2 TP x 2 replicas aggregated; 8 prefill pools x 4 decode pools (2 x 2 batch caps)
    assert count == 8 + 32 and "8 prefill pools x 4 decode pools" in factors
    points = expand_space(spec)
    assert len(points) == 40
    split = [p for p in points if p.decode is not None]
    assert len(split) == 32 and {p.decode.batch_size for p in split} == {128, 256}
    assert all(p.mode == "disaggregated" for p in split)


def test_mode_alone_takes_every_axis_from_the_aggregated_space() -> None:
    spec = _spec(mode=["disaggregated"])
    points = expand_space(spec)
    # (2 SKUs x 2 TP x 2 replicas) prefill pools x the same decode pools, none aggregated
    assert len(points) == 64 and all(p.decode is not None for p in points)


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"space": {"disaggregated": {}}},
         "space: disaggregated is given but mode ['aggregated'] has no 'disaggregated'"),
        ({"space": {"mode": ["disaggregated"],
                    "disaggregated": {"decode": {"skus": ["h9000"]}}}},
         "space.disaggregated.decode.skus.0: unknown GPU SKU 'h9000'; allowed: a100-40gb"),
        ({"budget": {"max_gpus": 8}, "space": {"mode": ["disaggregated"], "tp": [8]}},
         "space.disaggregated: no split of budget.max_gpus 8 has GPUs on both sides: the "
         "smallest prefill pool takes 8 GPUs (TP8 x PP1 x 1), the smallest decode pool 8"),
        ({"space": {"mode": ["disaggregated"],
                    "disaggregated": {"decode": {"replicas": [0]}}}},
         "space.disaggregated.decode.replicas.0: Input should be greater than 0 (got: 0)"),
        ({"skus": ["h100-pcie"],
          "space": {"mode": ["disaggregated"], "disaggregated": {"kv_link": "nvlink"}}},
         "space.disaggregated.kv_link: nvlink, but the prefill pool's h100-pcie nodes have no "
         "NVLink (intra_node_link pcie)"),
        ({"space": {"mode": ["disaggregated"], "disaggregated": {"kv_link": "infiniband"}}},
         "space.disaggregated.kv_link: Input should be 'auto', 'nvlink' or 'network'"),
        ({"space": {"mode": ["disaggregated"], "disaggregated": {"decode": {"pp": [2]}}}},
         "space.disaggregated.decode.pp: unknown field"),
        ({"space": {"mode": ["split"]}},
         "space.mode.0: Input should be 'aggregated' or 'disaggregated' (got: 'split')"),
    ],
)  # fmt: skip
def test_bad_pools_name_the_field_the_value_and_what_is_allowed(overrides, expected) -> None:
    with pytest.raises(SpecError) as caught:
        parse_spec({**BASE, **overrides})
    assert expected in str(caught.value)


def test_search_run_exits_2_on_a_split_without_decode_gpus(tmp_path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text(
        "model: meta-llama/Llama-3.1-70B\nskus: [h100-sxm]\nbudget: {max_gpus: 8}\n"
        "space: {mode: [disaggregated], tp: [8]}\n"
    )
    result = CliRunner().invoke(cli, ["search", "run", str(path), "--db", f"sqlite:///{tmp_path}/r.db"])
    assert result.exit_code == 2, result.output
    assert "space.disaggregated: no split of budget.max_gpus 8" in result.output
    assert "Traceback" not in result.output


def test_aggregated_fingerprints_do_not_change_when_pools_join_the_space() -> None:
    plain, mixed = _spec(), _spec(**POOLS)
    assert plain.fingerprint() == mixed.fingerprint()  # the space is not in the spec's
    before = {c.point: c.fingerprint for c in candidates(plain)}
    after = {c.point: c.fingerprint for c in candidates(mixed) if c.point.decode is None}
    assert before == after and len(before) == 8
    # and they are the fingerprints of the fields stored before pools existed
    point = next(iter(before))
    assert "decode" not in point.as_dict()
    fields = {k: v for k, v in asdict(point).items() if k not in ("decode", "ep", "dp")}
    sku = asdict(plain.sku_catalog.get(point.sku))
    del sku["fp4_tflops"]  # the catalog's FP4 peak enters FP4 configurations only
    assert before[point] == sha256_json(
        {"spec": plain.fingerprint(), "point": fields, "sku": sku}
    )


def test_the_pool_layout_is_in_the_fingerprint_and_round_trips() -> None:
    spec = _spec(**POOLS)
    split = [c for c in candidates(spec) if c.point.decode is not None]
    assert len({c.fingerprint for c in split}) == len(split) == 32
    point = split[0].point
    stored = point.as_dict() | {"label": point.label()}
    assert stored["decode"] == {
        "sku": "h200", "tp": 4, "replicas": 1, "batch_size": 128, "link": "auto"
    }  # fmt: skip
    assert ConfigPoint.from_dict(stored) == point
    assert point.label().startswith("prefill h100-sxm TP4 PP1 ")
    assert point.label().endswith(" + decode h200 TP4 x1 b128")


def test_the_decode_pool_may_take_its_own_memory_fraction() -> None:
    """space.disaggregated.decode.gpu_memory_utilization launches the decode servers with
    their own fraction (the prefill pool keeping the spec's); it enters the spec's
    fingerprint only where given, so specs without it keep theirs."""
    pools = {**POOLS, "disaggregated": {**POOLS["disaggregated"], "decode": {
        **POOLS["disaggregated"]["decode"], "gpu_memory_utilization": 0.7}}}  # fmt: skip
    plain, own = _spec(**POOLS), _spec(**pools)
    assert own.fingerprint() != plain.fingerprint() == _spec().fingerprint()
    split = next(c.point for c in candidates(own) if c.point.decode is not None)
    deployment = split.deployment(own)
    assert deployment.decode is not None and deployment.decode.gpu_memory_utilization == 0.7
    assert deployment.gpu_memory_utilization is None  # the prefill pool: the engine's own
    assert split.deployment(plain).decode.gpu_memory_utilization is None
    with pytest.raises(SpecError, match="gpu_memory_utilization"):
        _spec(**{**pools, "disaggregated": {"decode": {"gpu_memory_utilization": 1.2}}})


def test_a_mixture_of_experts_pools_search_attention_dp_and_expert_parallelism() -> None:
    """Each pool takes its own EP and attention-DP axes (the aggregated space's where left
    out): a DeepSeek-V3 decode pool of DP 8 x TP 1 with EP 8 is a wide-EP decode replica of
    8 GPUs, priced and budgeted as such, its batch cap the engine's per rank x DP; EP that
    does not divide the pool's GPUs is infeasible with the reason; a pool at DP 1 and EP 1
    stores no dp or ep, so those configurations keep their fingerprints."""
    spec = parse_spec({
        "model": "deepseek-ai/DeepSeek-V3", "skus": ["h200"], "engine": "sglang",
        "budget": {"max_gpus": 16},
        "space": {"tp": [8], "precision": ["fp8"], "mode": ["disaggregated"],
                  "disaggregated": {"prefill": {"replicas": [1]}, "decode": {
                      "tp": [1, 8], "dp": [1, 8], "ep": [1, 8], "replicas": [1]}}},
    })  # fmt: skip
    found = {(c.point.decode.tp, c.point.decode.dp, c.point.decode.ep): c
             for c in candidates(spec)}  # fmt: skip
    wide = found[(1, 8, 8)]
    assert wide.feasible and wide.point.num_gpus == 16
    assert wide.point.label().endswith("+ decode h200 DP8 TP1 EP8 x1 b32768")
    assert wide.point.as_dict()["decode"] == {
        "sku": "h200", "tp": 1, "replicas": 1, "batch_size": 32768, "link": "auto",
        "ep": 8, "dp": 8,
    }  # fmt: skip
    deployment = wide.point.deployment(spec)
    assert (deployment.decode.dp, deployment.decode.ep) == (8, 8)
    assert deployment.decode.scheduler.batch_size == 32768
    assert "EP=8 does not divide TP=1" in (found[(1, 1, 8)].infeasible_reason or "")
    assert (found[(8, 8, 1)].infeasible_reason or "").startswith("budget: 72 GPUs")
    assert "dp" not in found[(8, 1, 1)].point.as_dict()["decode"]
    assert ConfigPoint.from_dict(wide.point.as_dict()) == wide.point
    from search._results_view import pool_split

    assert pool_split(wide.point.as_dict()) == "1P1D TP8/DP8xTP1"


def test_qps_per_dollar_prices_both_pools_each_at_its_sku() -> None:
    spec = _spec(**POOLS)
    catalog = spec.sku_catalog
    h100, h200 = catalog.get("h100-sxm").price_per_gpu_hour, catalog.get("h200").price_per_gpu_hour
    point = ConfigPoint(
        "h100-sxm", 4, 1, 2, "bf16", "sarathi", 128, 512, decode=DecodePoint("h200", 4, 1, 128)
    )
    assert point.num_gpus == 12
    assert point.cost_per_hour(catalog) == pytest.approx(8 * h100 + 4 * h200)
    assert point.cost_per_hour(catalog) == pytest.approx(8 * 6.88 + 4 * 7.912)  # catalog prices
    deployment = point.deployment(spec)
    assert deployment.num_gpus == 12
    assert deployment.cost_per_hour == pytest.approx(point.cost_per_hour(catalog))


def test_infeasible_pools_say_why() -> None:
    spec = _spec(mode=["disaggregated"], disaggregated={"kv_link": "nvlink"})
    mixed = ConfigPoint(
        "h100-sxm", 4, 1, 1, "bf16", "sarathi", 128, 512,
        decode=DecodePoint("h200", 4, 1, 128, "nvlink"),
    )  # fmt: skip
    reason, _ = check(mixed, spec)
    assert reason == (
        "pools: decode pool: link nvlink: h100-sxm and h200 GPUs do not share a node; "
        "use link network or auto"
    )
    too_big = ConfigPoint(
        "h100-sxm", 8, 1, 1, "bf16", "sarathi", 128, 512,
        decode=DecodePoint("h100-sxm", 4, 1, 128, "nvlink"),
    )  # fmt: skip
    reason, _ = check(too_big, spec)
    assert "the two pools' 12 GPUs do not fit the 8 GPUs of a h100-sxm node" in reason
    over = ConfigPoint(
        "h100-sxm", 8, 1, 2, "bf16", "sarathi", 128, 512,
        decode=DecodePoint("h200", 4, 1, 128),
    )  # fmt: skip
    reason, _ = check(over, spec)
    assert reason == (
        "budget: 20 GPUs (prefill TP8 x PP1 x 2 replicas + decode TP4 x 1 replicas) > max_gpus 16"
    )


def _validated_example(name: str) -> tuple[str, list]:
    """`llmcap search validate` of examples/`name`: its output and feasible candidates."""
    from pathlib import Path

    from search._spec import load_spec

    example = Path(__file__).resolve().parents[2] / "examples" / name
    result = CliRunner().invoke(cli, ["search", "validate", str(example)])
    assert result.exit_code == 0, result.output
    return result.output, [c for c in candidates(load_spec(example)) if c.feasible]


def test_the_example_holds_both_layouts_within_16_gpus() -> None:
    output, feasible = _validated_example("disagg.yaml")
    # aggregated: 2 SKUs x (TP4 x1/x2/x4, TP8 x1/x2) x 2 chunk sizes = 20 within 16 GPUs;
    # disaggregated: 2 x 2 SKUs x 9 prefill/decode splits of at most 16 GPUs x 2 = 72
    assert "152 configurations: 92 feasible, 60 dropped" in output
    assert sum(c.point.decode is not None for c in feasible) == 72
    assert max(c.point.num_gpus for c in feasible) == 16


def test_the_moe_example_pairs_a_tp_decode_pool_with_a_wide_ep_one() -> None:
    output, feasible = _validated_example("moe_disagg.yaml")
    assert "10 configurations: 6 feasible, 4 dropped" in output
    decodes = {(c.point.decode.dp, c.point.decode.tp, c.point.decode.ep)
               for c in feasible if c.point.decode is not None}  # fmt: skip
    assert decodes == {(8, 1, 8), (1, 8, 8)}
    assert max(c.point.num_gpus for c in feasible) == 24
