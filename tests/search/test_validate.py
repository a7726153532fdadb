"""`llmcap validate`: the aic-silicon dataset, its mapping, the error statistics, the CLI."""

from __future__ import annotations

import csv
import math
from dataclasses import replace

import pytest
from click.testing import CliRunner

from estimators import BatchShape, Precision, load_engine
from search._validate import (
    DatasetError,
    _aic_silicon,
    _launch_scripts,
    concurrency_band,
    error_stats,
    load_aic_silicon,
    parse_rows,
    select_points,
)
from search._validate._aic_generator import trtllm_agg_max_num_tokens
from search._validate._launch_scripts import (
    VLLM_FLASHINFER_MXFP8_MOE,
    record_field,
    trtllm_deepseek_max_num_tokens,
)
from search._validate._run import closed_loop_workload, deployment_for, engine_for
from search._validate._stats import grouped
from search.cli import cli
from simulator import SchedulerKind, prepare
from tests.benchmark_scripts import load_benchmark
from tests.search.conftest import needs_aic
from tests.search.silicon_rows import row

HEADER = ",".join(_aic_silicon.REQUIRED_COLUMNS)


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args), env={"COLUMNS": "200"})


# -- selection and mapping -----------------------------------------------------


def test_a_row_maps_to_catalog_names_and_the_engine_kv_precision():
    selection = select_points([row()])
    assert selection.skipped == {}
    [point] = selection.points
    assert (point.model, point.sku, point.tp, point.pp) == (
        "meta-llama/Llama-3.1-70B",
        "h200",
        4,
        1,
    )
    assert (point.isl, point.osl, point.concurrency) == (1024, 128, 16)
    assert point.precision is Precision.FP8
    assert point.kv_precision is Precision.BF16  # vLLM keeps a 16-bit KV cache by default
    assert (point.measured_ttft_ms, point.measured_tpot_ms) == (120.5, 9.5)


@pytest.mark.parametrize(
    ("overrides", "model", "sku", "precision", "kv"),
    [
        ({"backend": "trtllm"}, "meta-llama/Llama-3.1-70B", "h200", "fp8", "fp8"),
        ({"gemm_quant_mode": ""}, "meta-llama/Llama-3.1-70B", "h200", "bf16", "bf16"),
        (
            {"model_path": "nvidia/Llama-3.1-8B-Instruct-FP8", "system": "h100_sxm"},
            "meta-llama/Llama-3.1-8B", "h100-sxm", "fp8", "bf16",
        ),
        (
            {"model_path": "Qwen/Qwen3-32B", "system": "b200_sxm", "gemm_quant_mode": "fp8_block",
             "backend": "sglang"},
            "Qwen/Qwen3-32B", "b200", "fp8", "bf16",
        ),
    ],
)  # fmt: skip
def test_mapping_of_models_systems_and_precisions(overrides, model, sku, precision, kv):
    [point] = select_points([row(**overrides)]).points
    assert (point.model, point.sku, point.precision.value, point.kv_precision.value) == (
        model,
        sku,
        precision,
        kv,
    )


@pytest.mark.parametrize(
    ("overrides", "model", "precision", "experts", "weights", "kv"),
    [
        # NVIDIA's NVFP4 checkpoints: every linear layer (Llama), DeepSeek's layout
        ({"gemm_quant_mode": "nvfp4", "moe_quant_mode": "nvfp4", "system": "b200_sxm"},
         "meta-llama/Llama-3.1-70B", "fp4", None, "fp4", "bf16"),
        ({"model_path": "deepseek-ai/DeepSeek-R1", "gemm_quant_mode": "nvfp4",
          "moe_quant_mode": "nvfp4", "system": "b200_sxm", "backend": "trtllm",
          "backend_version": "1.2.0", "tp_size": "8", "moe_ep_size": "8", "moe_tp_size": "1"},
         "deepseek-ai/DeepSeek-V3", "fp4", None, "fp4", "fp8"),
        # gpt-oss's own checkpoint, labelled nvfp4: 16-bit weights and its MXFP4 experts,
        # on Hopper too (weight-only)
        ({"model_path": "openai/gpt-oss-120b", "gemm_quant_mode": "nvfp4",
          "moe_quant_mode": "nvfp4", "system": "h100_sxm", "tp_size": "2",
          "moe_tp_size": "2", "moe_ep_size": "1"},
         "openai/gpt-oss-120b", "bf16", None, "bf16 + mxfp4 experts", "bf16"),
        # a row whose experts are not the checkpoint's: FP8 experts set apart
        ({"model_path": "openai/gpt-oss-120b", "gemm_quant_mode": "fp8",
          "moe_quant_mode": "fp8", "backend": "trtllm", "backend_version": "1.2.0",
          "system": "h100_sxm", "moe_tp_size": "4", "moe_ep_size": "1"},
         "openai/gpt-oss-120b", "fp8", "fp8", "fp8", "fp8"),
        # Kimi-K2.5's own checkpoint, labelled int4_wo: 16-bit weights and its INT4 experts
        ({"model_path": "moonshotai/Kimi-K2.5", "gemm_quant_mode": "int4_wo",
          "moe_quant_mode": "int4_wo", "tp_size": "8", "moe_tp_size": "1",
          "moe_ep_size": "8"},
         "moonshotai/Kimi-K2.5", "bf16", None, "bf16 + int4 experts", "bf16"),
        # ... and NVIDIA's NVFP4 one, labelled nvfp4: NVFP4 experts set apart from its own
        ({"model_path": "moonshotai/Kimi-K2.5", "gemm_quant_mode": "nvfp4",
          "moe_quant_mode": "nvfp4", "system": "b200_sxm", "tp_size": "8",
          "moe_tp_size": "1", "moe_ep_size": "8"},
         "moonshotai/Kimi-K2.5", "fp4", "fp4", "fp4", "bf16"),
    ],
)  # fmt: skip
def test_fp4_rows_map_to_the_layout_of_the_checkpoint_they_measured(
    overrides, model, precision, experts, weights, kv
):
    from search._validate._aic_estimate import aic_quant_modes
    from search._validate._run import point_model

    [point] = select_points([row(**overrides)], models="all").points
    assert (point.model, point.precision.value, point.weights, point.kv_precision.value) == (
        model, precision, weights, kv,
    )  # fmt: skip
    assert (point.expert_precision and point.expert_precision.value) == experts
    assert point.four_bit == ("fp4" in weights or "int4" in weights)
    deployed = point_model(point)
    if point.moe:  # the experts the simulation runs: the row's, else the checkpoint's own
        own = {"openai/gpt-oss-120b": "mxfp4", "moonshotai/Kimi-K2.5": "int4"}.get(model)
        expected = experts or own or precision
        assert (deployed.expert_precision or point.precision).value == expected
    # aiconfigurator gets the row's quant modes, or none where the label is not the
    # checkpoint's format (it then reads gpt-oss's own: bf16 GEMMs, w4a16_mxfp4 experts;
    # on Blackwell the W4A8 experts the engines run there, the test below)
    gpt_oss_fp4 = weights == "bf16 + mxfp4 experts"
    kimi_int4 = weights == "bf16 + int4 experts"  # no int4_wo GEMM table: 16-bit GEMMs
    assert aic_quant_modes(point) == (
        ("", "") if gpt_oss_fp4
        else ("bfloat16", "int4_wo") if kimi_int4
        else (overrides["gemm_quant_mode"], point.moe_quant_mode)
    )  # fmt: skip
    if gpt_oss_fp4:
        blackwell = replace(point, sku="b200", system="b200_sxm")
        assert aic_quant_modes(blackwell) == ("", "w4a8_mxfp4_mxfp8")
    assert deployment_for(point).model.expert_precision == deployed.expert_precision


def test_a_block_scaled_fp8_row_runs_a_block_scaled_checkpoint():
    """A row whose GEMMs are fp8_block (Qwen3's FP8 checkpoints) deploys the model with
    128 x 128 weight blocks, whose GEMMs take the block-scaled constants and tables; a
    per-tensor FP8 row keeps the built-in config's own (none for Qwen3-32B)."""
    from search._validate._run import point_model

    qwen = {"model_path": "Qwen/Qwen3-32B", "system": "b200_sxm", "backend": "sglang"}
    [block] = select_points([row(**qwen, gemm_quant_mode="fp8_block")]).points
    [tensor] = select_points([row(**qwen, gemm_quant_mode="fp8")]).points
    assert point_model(block).weight_scale_block == 128 * 128
    assert deployment_for(block).model.weight_scale_block == 128 * 128
    assert point_model(tensor).weight_scale_block == 0


def test_rows_that_cannot_be_simulated_are_counted_by_reason():
    rows = [
        row(mode="disagg"),
        row(system="gb300"),
        row(gemm_quant_mode="int4_wo"),
        row(model_path="moonshotai/Kimi-K2-Instruct"),
        row(silicon_data_source="source_file=x.csv"),
        row(attention_dp_size="2"),
        row(),
    ]
    selection = select_points(rows)
    assert len(selection.points) == 1 and selection.total_rows == 7
    assert selection.skipped == {
        "disaggregated (prefill/decode pools)": 1,
        "GPU not in the catalog (gb300)": 1,
        "weight precision not modelled (int4_wo)": 1,
        "model not in the catalog (unknown architecture)": 1,
        "no concurrency recorded": 1,
        "attention data parallelism of a dense model": 1,
    }


def test_a_row_whose_concurrency_ran_on_workers_it_does_not_record_is_skipped():
    # the dataset records each attention-DP rank's batch: concurrency = batch x ranks
    assert len(select_points([row(batch_size="16")]).points) == 1
    moe = {"model_path": "openai/gpt-oss-120b", "gemm_quant_mode": "nvfp4",
           "moe_quant_mode": "nvfp4", "tp_size": "1", "moe_tp_size": "1",
           "moe_ep_size": "4"}  # fmt: skip
    ranks = select_points([row(attention_dp_size="4", batch_size="4", **moe)], models="moe")
    assert [p.dp for p in ranks.points] == [4]
    # concurrency 16 over a batch of 4 on a worker without attention DP: 3 more workers, or
    # ranks, that the row does not name
    for spread in (row(batch_size="4"), row(attention_dp_size="4", batch_size="1", **moe)):
        selection = select_points([spread], models="all")
        assert selection.points == []
        assert selection.skipped == {_aic_silicon.UNRECORDED_WORKERS: 1}
    # an empty batch says nothing either way
    assert len(select_points([row(batch_size="")]).points) == 1


def test_a_malformed_field_names_the_file_line_and_field():
    with pytest.raises(DatasetError, match=r"data.csv line 3: field tp_size .*'two'"):
        select_points([row(), row(tp_size="two")], "data.csv")
    with pytest.raises(DatasetError, match="field silicon_tpot_ms"):
        select_points([row(silicon_tpot_ms="nan")], "data.csv")


def test_a_missing_column_names_the_file_and_column():
    text = HEADER.replace(",silicon_ttft_ms", "") + "\n"
    with pytest.raises(DatasetError, match=r"data.csv: missing column.*silicon_ttft_ms"):
        parse_rows(text, "data.csv")


@needs_aic
def test_each_campaign_gets_its_clients_length_spread():
    public = select_points([row(silicon_data_source="db-dump/2026-04-27; silicon_concurrency=8")])
    own = select_points([row()])
    assert public.points[0].source == "benchmark-db" and public.points[0].length_ratio == 0.8
    assert own.points[0].source == "aic-collection" and own.points[0].length_ratio == 1.0
    # the dump's two earlier copies, named by their file
    for dump in ("2026-04-06.csv", "2026-03-25.csv"):
        source = f"source_file={dump}; silicon_concurrency=8"
        assert select_points([row(silicon_data_source=source)]).points[0].source == (
            "benchmark-db"
        )


def test_nvidias_own_runs_reach_the_engine_through_dynamos_frontend():
    """`aiconfigurator eval` serves every deployment behind Dynamo's frontend, which
    tokenizes once and hands the engine token ids: vLLM's own server latency is off the
    path there, and on the public benchmark's points, served by vLLM's own server, on it."""
    [own] = select_points([row()]).points
    [public] = select_points(
        [row(silicon_data_source="db-dump/2026-04-27; silicon_concurrency=8")]
    ).points
    assert (own.frontend, public.frontend) == ("dynamo", "")
    vllm = load_engine("vllm@0.12.0")
    assert engine_for(public).frontend == vllm.frontend
    behind = engine_for(own)
    assert behind.frontend.request_ms == 0.0 < vllm.frontend.request_ms
    assert behind.frontend.tokenize_us_per_token == vllm.frontend.tokenize_us_per_token
    assert not behind.disagg_decode_tokenizes and vllm.disagg_decode_tokenizes
    own_latency = prepare(deployment_for(own)).cluster.frontend_latency
    public_latency = prepare(deployment_for(public)).cluster.frontend_latency
    assert own_latency == 0.0 < public_latency


def test_the_public_tensorrt_llm_1k_1k_points_below_tp8_batch_their_prompts():
    public = "db-dump/x; silicon_concurrency=8"
    rows = [
        row(silicon_data_source=public, backend="trtllm", backend_version="", isl="1024",
            osl="1024", tp_size="4"),
        row(silicon_data_source=public, backend="trtllm", isl="1024", osl="1024", tp_size="8"),
        row(silicon_data_source=public, backend="trtllm", isl="8192", osl="1024", tp_size="4"),
        row(silicon_data_source=public, backend="vllm", isl="1024", osl="1024", tp_size="4"),
        # NVIDIA's own runs (a measurement of their own, not a copy of the dump's)
        row(backend="trtllm", isl="1024", osl="1024", tp_size="4", silicon_ttft_ms="131.2"),
    ]
    waits = [(p.batch_wait_iters, p.batch_wait_token_ratio) for p in select_points(rows).points]
    assert waits == [(20, 0.9), (0, 0.0), (0, 0.0), (0, 0.0), (0, 0.0)]
    [point] = select_points(rows[:1]).points
    scheduler = deployment_for(point).scheduler
    assert (scheduler.batch_wait_iters, scheduler.batch_wait_token_ratio) == (20, 0.9)


def test_the_public_sglang_blackwell_points_poll_for_requests_as_their_scripts_set():
    def interval(concurrency, **fields):
        source = f"db-dump/x; silicon_concurrency={concurrency}"
        fields = {"backend": "sglang", "backend_version": "0.5.9", "system": "b200_sxm",
                  "tp_size": "8", **fields}  # fmt: skip
        [point] = select_points([row(silicon_data_source=source, **fields)]).points
        return point.recv_interval

    assert [interval(c) for c in (4, 8, 16, 64)] == [10, 10, 30, 30]
    assert interval(64, system="b300_sxm") == 30
    assert interval(64, tp_size="4") == 10  # FP8 at TP 4: always 10
    assert interval(64, tp_size="4", gemm_quant_mode="nvfp4") == 30
    assert interval(64, system="h200_sxm") == 1  # its H200 script sets none
    assert interval(64, backend="vllm", backend_version="0.12.0") == 1
    own = row(backend="sglang", backend_version="0.5.9", system="b200_sxm", tp_size="8")
    [point] = select_points([own]).points  # NVIDIA's own runs
    assert point.recv_interval == 1
    source = "db-dump/x; silicon_concurrency=32"
    [point] = select_points([row(silicon_data_source=source, backend="sglang",
                                 backend_version="0.5.9", system="b200_sxm",
                                 tp_size="8")]).points  # fmt: skip
    assert deployment_for(point).scheduler.recv_interval == 30


def deepseek_row(engine: str, version: str, concurrency: int, **fields: str) -> dict[str, str]:
    fields = {"model_path": "deepseek-ai/DeepSeek-R1", "backend": engine,
              "backend_version": version, "system": "b200_sxm", "moe_quant_mode": "fp8_block",
              "tp_size": "8", "moe_tp_size": "8", "moe_ep_size": "1", **fields}  # fmt: skip
    return row(**{"silicon_data_source": f"db-dump/x; silicon_concurrency={concurrency}",
                  **fields})  # fmt: skip


def test_the_public_deepseek_points_take_their_scripts_batch_waiting():
    def wait(concurrency, **fields):
        rows = [deepseek_row("trtllm", "1.2.0rc6.post2", concurrency, osl="1024", **fields)]
        [point] = select_points(rows, models="moe").points
        return point.batch_wait_iters, point.batch_wait_token_ratio

    assert wait(64) == (40, 0.8)  # dsr1_fp8_b200_trt's DELAY_BATCHING
    assert wait(32) == (0, 0.0)
    assert wait(64, isl="8192") == (0, 0.0)
    assert wait(64, gemm_quant_mode="nvfp4", moe_quant_mode="nvfp4") == (0, 0.0)
    # the Llama-3.1-70B script's rule is its own: DeepSeek at TP 4 does not batch-wait
    assert wait(8, tp_size="4", moe_tp_size="4") == (0, 0.0)


def test_the_public_deepseek_runs_with_unrecorded_mtp_are_skipped():
    rows = [
        deepseek_row("trtllm", "1.2.0rc6.post3", 8),  # only the -mtp configs run this image
        deepseek_row("trtllm", "1.2.0rc6.post2", 8),
        deepseek_row("sglang", "0.5.9", 128),  # the plain configuration stops at 64
        deepseek_row("sglang", "0.5.9", 64),
        deepseek_row("sglang", "0.5.9", 128, gemm_quant_mode="nvfp4", moe_quant_mode="nvfp4"),
    ]
    selection = select_points(rows, models="moe")
    kept = [(p.engine, p.engine_version, p.concurrency) for p in selection.points]
    assert kept == [("trtllm", "1.2.0rc6.post2", 8), ("sglang", "0.5.9", 64),
                    ("sglang", "0.5.9", 128)]  # fmt: skip
    assert sorted(selection.skipped) == [
        "speculative (MTP) run, acceptance not recorded (SGLang -mtp concurrency)",
        "speculative (MTP) run, acceptance not recorded (TensorRT-LLM -mtp image)",
    ]
    own = select_points([{**rows[0], "silicon_data_source": "aic; silicon_concurrency=8"}],
                        models="moe")  # fmt: skip
    assert len(own.points) == 1  # NVIDIA's own runs are what their rows say


def twin_rows(engine: str, version: str, dumped: str, csv_date: str, **fields: str):
    """The dump's plain measurement of one deployment and a CSV dump's rows of it: an exact
    copy printed with another last digit, another measurement, and the same at a
    concurrency the dump does not hold."""
    def one(name, source, date, tpot, concurrency=4):
        return deepseek_row(engine, version, concurrency, **fields, id=name, osl="1024",
                            silicon_tpot_ms=tpot, silicon_data_source=(
                                f"{source}; silicon_concurrency={concurrency}; measured={date}"))

    return [
        one("plain", "db-dump/2026-04-27; config_id=87", dumped, "8.759961854292433"),
        one("copy", "source_file=2026-03-25.csv", dumped, "8.759961854292431"),
        one("twin", "source_file=2026-03-25.csv", csv_date, "6.7032488884248025"),
        one("alone", "source_file=2026-03-25.csv", csv_date, "6.7", concurrency=8),
    ]  # fmt: skip


def test_a_run_decoding_faster_than_the_deployment_at_an_eighth_of_its_clients_is_skipped():
    def run(name, concurrency, tpot, **fields):
        source = f"source_file=x.csv; silicon_concurrency={concurrency}"
        return row(id=name, silicon_data_source=source, silicon_tpot_ms=str(tpot), **fields)

    rows = [
        run("light", 8, 10.0),
        run("held", 64, 8.0),  # 0.8 of the light run's step: a heavier batch, a noisier run
        run("unheld", 64, 7.0),  # under 0.75 of it at eight times the clients
        run("near", 32, 5.0),  # only four times the light run's clients: nothing to hold to
        run("other layout", 64, 5.0, tp_size="8.0"),  # another deployment
    ]
    selection = select_points(rows)
    assert [p.id for p in selection.points] == ["light", "held", "near", "other layout"]
    assert selection.skipped == {_aic_silicon.UNHELD_CONCURRENCY: 1}
    # any release of the deployment counts: the light run's version does not matter
    rows[0] = {**rows[0], "backend_version": "0.19.0"}
    assert select_points(rows).skipped == {_aic_silicon.UNHELD_CONCURRENCY: 1}


@needs_aic
def test_the_installed_moe_points_lose_exactly_the_six_runs_that_did_not_hold_512_clients():
    selection = load_aic_silicon(models="moe")
    assert selection.skipped[_aic_silicon.UNHELD_CONCURRENCY] == 6
    assert len(selection.points) == 1323
    kept_512 = [p for p in selection.points
                if p.model == "openai/gpt-oss-120b" and p.sku == "h100-sxm"
                and p.concurrency == 512]  # fmt: skip
    assert len(kept_512) == 3  # their TPOT matches the lighter runs': a load that was held


@pytest.mark.parametrize(
    ("engine", "version", "fields", "dumped", "csv_date", "kept"),
    [  # SGLang 0.5.9 B200 FP8 TP 8; TensorRT-LLM 1.1.0rc2.post2 H200 and B200 TP 8 EP 8
        ("sglang", "0.5.9", {}, "2026-03-25T00:00:00.000Z", "2026-03-25T16:34:14Z",
         ["plain", "alone"]),
        # 2026-01-14: a sweep of the -mtp configurations alone (`mtp_sweep_runs`)
        ("trtllm", "1.1.0rc2.post2", {"system": "h200_sxm", "moe_tp_size": "1",
                                      "moe_ep_size": "8"}, "2025-12-15", "2026-01-14",
         ["plain"]),
        ("trtllm", "1.1.0rc2.post2", {"moe_tp_size": "1", "moe_ep_size": "8"},
         "2025-12-15", "2026-01-28", ["plain", "alone"]),
    ],
)  # fmt: skip
def test_another_measurement_of_a_plain_point_sharing_the_mtp_image_is_the_twin_s(
    engine, version, fields, dumped, csv_date, kept
):
    selection = select_points(twin_rows(engine, version, dumped, csv_date, **fields),
                              models="moe")  # fmt: skip
    # the copy is the plain measurement, whether counted once or twice
    assert [p.id for p in selection.points if p.id != "copy"] == kept
    assert selection.skipped[_launch_scripts.TWIN_REASON] == 1


def test_twins_are_only_named_in_the_groups_and_dates_the_evidence_covers():
    def twins(rows):
        return select_points(rows, models="moe").skipped[_launch_scripts.TWIN_REASON]

    # an image only the plain SGLang configuration ran, and FP4 (no -mtp twin listed)
    assert twins(twin_rows("sglang", "0.5.9", "2026-03-25", "2026-03-25")) == 1
    assert twins(twin_rows("sglang", "0.5.6", "2025-12-31", "2025-12-31")) == 0
    fp4 = {"gemm_quant_mode": "nvfp4", "moe_quant_mode": "nvfp4"}
    assert twins(twin_rows("sglang", "0.5.9", "2026-03-25", "2026-03-25", **fp4)) == 0
    # a measurement older than the plain one the dump keeps may be the plain one's own
    assert twins(twin_rows("sglang", "0.5.9", "2026-03-25", "2026-03-20")) == 0
    # another layout than the dump's is another deployment
    rows = twin_rows("sglang", "0.5.9", "2026-03-25", "2026-03-25")
    rows[2] = {**rows[2], "tp_size": "4", "moe_tp_size": "4"}
    assert twins(rows) == 0


@needs_aic
def test_the_public_dump_keeps_one_result_per_configuration_and_point():
    """The premise of `speculative_twins`: the `db-dump` rows are the database's latest
    result per (config_id, ISL, OSL, concurrency), though configurations ran many times."""
    _, rows = _aic_silicon.read_silicon_csv()
    seen: set[tuple[str, ...]] = set()
    runs: dict[str, set[str]] = {}
    for r in rows:
        if not r["silicon_data_source"].startswith("db-dump"):
            continue
        fields = dict(part.strip().partition("=")[::2]
                      for part in r["silicon_data_source"].split(";"))  # fmt: skip
        key = (fields["config_id"], r["isl"], r["osl"], fields["silicon_concurrency"])
        assert key not in seen
        seen.add(key)
        runs.setdefault(fields["config_id"], set()).add(fields["workflow_run_id"])
    assert len(seen) == 882
    assert sum(len(found) > 1 for found in runs.values()) == 24
    twins = _launch_scripts.TWIN_REASON
    assert _aic_silicon.load_aic_silicon(models="moe").skipped[twins] == 61


def test_rows_of_a_sweep_that_ran_only_the_mtp_configurations_are_skipped():
    def kept(version, date, **fields):
        source = f"source_file=2026-04-06.csv; silicon_concurrency=8; measured={date}"
        rows = [deepseek_row("trtllm", version, 8, silicon_data_source=source, **fields)]
        selection = select_points(rows, models="moe")
        assert sum(selection.skipped.values()) == 1 - len(selection.points)
        return len(selection.points)

    fp4 = {"gemm_quant_mode": "nvfp4", "moe_quant_mode": "nvfp4"}
    # PR 392's sweep of the -mtp twins, FP4 and FP8, B200 and H200
    assert kept("1.1.0rc2.post2", "2026-01-14T00:00:00.000Z", **fp4) == 0
    assert kept("1.1.0rc2.post2", "2026-01-14T00:00:00.000Z") == 0
    assert kept("1.1.0rc2.post2", "2026-01-14T00:00:00.000Z", system="h200_sxm") == 0
    # the plain configurations' own sweep, and PR 587's, which named both twins
    assert kept("1.1.0rc2.post2", "2025-12-15T00:00:00.000Z", **fp4) == 1
    assert kept("1.1.0rc2.post2", "2026-01-28T00:00:00.000Z", **fp4) == 1
    # another image measured that day
    assert kept("1.2.0rc6.post2", "2026-01-14T00:00:00.000Z", **fp4) == 1
    source = "source_file=2026-04-06.csv; silicon_concurrency=8; measured=2026-01-14"
    skipped = select_points(
        [deepseek_row("trtllm", "1.1.0rc2.post2", 8, silicon_data_source=source)], models="moe"
    ).skipped
    assert skipped == {_launch_scripts.MTP_SWEEP_REASON: 1}


def test_points_say_whether_the_benchmark_client_warmed_the_server_up():
    """The public benchmark's client sent warm-up requests from InferenceMAX PR #480 (opened
    2026-01-17, upstream by 2026-02-03) on; its earlier points' mean TTFT may carry the
    server's cold start.  The report groups the errors by it; NVIDIA's own runs do not record
    it."""

    def warmup(source: str) -> str:
        [point] = select_points([row(silicon_data_source=source)]).points
        return point.client_warmup

    dump = "db-dump/2026-04-27; silicon_concurrency=8; measured="
    assert warmup(dump + "2025-11-10T00:00:00.000Z") == _aic_silicon.NOT_WARMED_UP
    assert warmup(dump + "2026-01-16T00:00:00.000Z") == _aic_silicon.NOT_WARMED_UP
    # measured while the change was under review: either
    assert warmup(dump + "2026-01-17T00:00:00.000Z") == _aic_silicon.WARMUP_EITHER
    assert warmup(dump + "2026-02-03T00:00:00.000Z") == _aic_silicon.WARMUP_EITHER
    assert warmup(dump + "2026-02-04T00:00:00.000Z") == _aic_silicon.WARMED_UP
    copy = "source_file=2026-04-06.csv; silicon_concurrency=8; measured=2026-03-25T00:00:00Z"
    assert warmup(copy) == _aic_silicon.WARMED_UP
    assert warmup("db-dump/2026-04-27; silicon_concurrency=8") == ""  # no date recorded
    own = "source_file=/data/b200_sxm/x.csv; silicon_concurrency=8; measured=2026-03-17"
    assert warmup(own) == ""  # NVIDIA's own campaign


def test_a_measurement_copied_into_another_dump_counts_once():
    first = row(id="a", silicon_data_source="db-dump/x; silicon_concurrency=8")
    copy = row(id="b", silicon_data_source="source_file=2026-04-06.csv; silicon_concurrency=8")
    other = row(id="c", silicon_data_source="db-dump/y; silicon_concurrency=8",
                silicon_tpot_ms="9.4")  # same deployment, another measurement  # fmt: skip
    selection = select_points([first, copy, other])
    assert [p.id for p in selection.points] == ["a", "c"]
    assert selection.skipped == {_aic_silicon.REPEATED: 1}
    # a copy filed under the sibling HF id, without the engine version, its last digit
    # printed differently: the same measurement
    r1 = deepseek_row("sglang", "0.5.9", 8, id="r1", silicon_tpot_ms="22.529311712042354")
    v3 = deepseek_row("sglang", "", 8, id="v3", model_path="deepseek-ai/DeepSeek-V3",
                      silicon_tpot_ms="22.52931171204235")  # fmt: skip
    selection = select_points([r1, v3], models="moe")
    assert [p.id for p in selection.points] == ["r1"]
    assert selection.skipped == {_aic_silicon.REPEATED: 1}


def test_a_dump_measurement_another_campaign_copied_rounded_is_skipped():
    """NVIDIA's gap-analysis files carry benchmark-dump rows with their means rounded to
    0.01 ms (and their own batch_size): one measurement, kept once, as the dump's."""
    dump = row(id="dump", silicon_data_source="db-dump/x; silicon_concurrency=16",
               silicon_ttft_ms="169.9406875", silicon_tpot_ms="8.3614")  # fmt: skip
    copy = row(id="copy", silicon_data_source="source_file=kimi-k2.5-gap-analysis.csv; "
               "silicon_concurrency=16", silicon_ttft_ms="169.94", silicon_tpot_ms="8.36",
               batch_size="4")  # fmt: skip
    own = row(id="own", silicon_data_source="source_file=/data/h200_sxm/x.csv; "
              "silicon_concurrency=16", silicon_ttft_ms="169.95",
              silicon_tpot_ms="8.36")  # fmt: skip
    for rows in ([copy, dump, own], [dump, copy, own]):
        selection = select_points(rows)
        assert sorted(p.id for p in selection.points) == ["dump", "own"]
        assert selection.skipped == {_aic_silicon.DUMP_COPY: 1}
        assert {p.id: p.source for p in selection.points}["dump"] == "benchmark-db"
    assert _aic_silicon._dump_copy_key(row(silicon_ttft_ms="")) is None  # nothing to match


LAYOUT = ("tp_size", "attention_dp_size", "moe_tp_size", "moe_ep_size")


@pytest.mark.parametrize(
    ("engine", "recorded", "ran"),
    [
        ("sglang", ("64", "1", "8", "8"), ("8", "1", "1", "8")),  # TP 8, EP 8
        ("trtllm", ("16", "1", "4", "4"), ("4", "1", "1", "4")),  # TP 4, EP 4
        ("trtllm", ("1", "64", "8", "8"), ("1", "8", "1", "8")),  # attention DP 8, EP 8
        ("vllm", ("4", "4", "1", "16"), ("4", "1", "1", "4")),  # vLLM TP 4 with EP
        ("vllm", ("2", "2", "1", "4"), ("2", "1", "1", "2")),
        ("trtllm", ("8", "1", "1", "8"), ("8", "1", "1", "8")),  # as it ran: unchanged
        ("trtllm", ("1", "8", "1", "8"), ("1", "8", "1", "8")),
        ("sglang", ("8", "1", "8", "1"), ("8", "1", "8", "1")),
    ],
)
def test_a_later_dump_s_layout_multiplied_by_ep_is_the_one_that_ran(engine, recorded, ran):
    decoded = _aic_silicon.dump_layout(dict(zip(LAYOUT, recorded, strict=True)), engine, 8)
    assert tuple(decoded[name] for name in LAYOUT) == ran


@pytest.mark.parametrize(
    ("run", "recorded", "ran"),
    [
        ("tp2_ep2", ("4", "1", "2", "2"), ("2", "1", "1", "2")),  # TP 2, EP 2 on one node
        ("tp2_ep2", ("1", "4", "2", "2"), ("1", "2", "1", "2")),  # attention DP 2, EP 2
        ("tp2_0_ep2_0", ("1", "4", "2", "2"), ("1", "2", "1", "2")),
        ("tp4_ep2", ("4", "1", "2", "2"), ("4", "1", "2", "2")),  # TP 4 with EP 2: as it ran
        ("tp2_ep2", ("2", "1", "1", "2"), ("2", "1", "1", "2")),
    ],
)
def test_a_multiplied_layout_that_fits_a_node_is_told_by_the_run_s_name(run, recorded, ran):
    """Four GPUs fit a node, so only the row's id, the run's own name (TP 2: two GPUs),
    tells TP 2 x EP 2 recorded multiplied from TP 4 with MoE TP 2 and EP 2."""
    r = {"id": f"2026_04_06_gpt_oss_120b_h200_sxm_trtllm_fp4_agg_1024x1024_c4_{run}_992",
         **dict(zip(LAYOUT, recorded, strict=True))}  # fmt: skip
    decoded = _aic_silicon.dump_layout(r, "trtllm", 8)
    assert tuple(decoded[name] for name in LAYOUT) == ran


@needs_aic
def test_the_layout_rule_matches_every_copy_the_earliest_dump_holds():
    _, rows = _aic_silicon.read_silicon_csv()
    measurement = ("backend", "model_path", "system", "isl", "osl")
    means = ("silicon_ttft_ms", "silicon_tpot_ms")  # to nine digits, as copies print them

    def key(r):
        concurrency = record_field(r["silicon_data_source"] or "", "silicon_concurrency")
        return (*(r[k] for k in measurement), *(f"{float(r[k]):.9g}" for k in means),
                concurrency)  # fmt: skip

    def layout(r):
        return tuple(int(float(r[name] or 1)) for name in LAYOUT)

    earliest = {key(r): r for r in rows if r["mode"] == "agg"
                and r["silicon_data_source"].startswith("source_file=2026-03-25.csv")}  # fmt: skip
    compared = 0
    for r in rows:
        later = r["silicon_data_source"].startswith(("db-dump", "source_file=2026-04-06.csv"))
        if r["mode"] != "agg" or not later:
            continue
        decoded = _aic_silicon.dump_layout(r, r["backend"], 8)
        copy = earliest.get(key(r))
        if decoded is not r and copy is not None:
            assert layout(decoded) == layout(copy)
            compared += 1
    assert compared == 89


def public_point(engine: str, version: str, concurrency: int, model: str = "deepseek",
                 **fields: str):
    """The one point of a public benchmark row of DeepSeek-R1, gpt-oss or MiniMax-M2.5."""
    if model == "deepseek":
        return select_points([deepseek_row(engine, version, concurrency, **fields)],
                             models="moe").points[0]  # fmt: skip
    checkpoint = {"gpt-oss": ("openai/gpt-oss-120b", "nvfp4"),
                  "minimax": ("MiniMaxAI/MiniMax-M2.5", "fp8")}[model]  # fmt: skip
    fields = {"model_path": checkpoint[0], "backend": engine, "backend_version": version,
              "system": "b200_sxm", "gemm_quant_mode": checkpoint[1],
              "moe_quant_mode": checkpoint[1], "tp_size": "4", "moe_tp_size": "4",
              "moe_ep_size": "1", **fields}  # fmt: skip
    source = f"db-dump/x; silicon_concurrency={concurrency}"
    return select_points([row(silicon_data_source=source, **fields)], models="moe").points[0]


def test_the_public_points_keep_the_kv_cache_dtype_their_scripts_set():
    def kv(point):
        deployment = deployment_for(point)
        return point.kv_cache_dtype, point.kv_precision, deployment.resolved_kv_precision()

    fp8, bf16 = Precision.FP8, Precision.BF16
    # SGLang's DeepSeek-R1 B200 scripts: --kv-cache-dtype fp8_e4m3 (the engine's own: 16-bit)
    assert kv(public_point("sglang", "0.5.9", 32)) == (fp8, fp8, fp8)
    assert kv(public_point("sglang", "0.5.9", 32, gemm_quant_mode="nvfp4",
                           moe_quant_mode="nvfp4")) == (fp8, fp8, fp8)  # fmt: skip
    assert kv(public_point("sglang", "0.5.9", 32, system="h200_sxm")) == (None, bf16, bf16)
    # TensorRT-LLM gpt-oss: fp8 on B200, auto (its 16-bit weights' dtype) on H200
    assert kv(public_point("trtllm", "1.2.0rc2.post2", 256, "gpt-oss")) == (fp8, fp8, fp8)
    assert kv(public_point("trtllm", "gpt-oss-dev", 64, "gpt-oss", system="h200_sxm")) == (
        None, bf16, bf16)  # fmt: skip
    assert kv(public_point("vllm", "0.15.1", 64, "gpt-oss")) == (fp8, fp8, fp8)
    assert kv(public_point("vllm", "", 64, "gpt-oss")) == (fp8, fp8, fp8)  # every B200 script
    assert kv(public_point("vllm", "0.18.0", 64, "gpt-oss", system="h200_sxm")) == (
        None, bf16, bf16)  # fmt: skip
    # NVIDIA's own runs are what their rows say: the engine's default
    own = {**deepseek_row("sglang", "0.5.9", 32),
           "silicon_data_source": "aic; silicon_concurrency=32"}  # fmt: skip
    [point] = select_points([own], models="moe").points
    assert kv(point) == (None, bf16, bf16)


def test_tensorrt_llm_deepseek_scripts_size_max_num_tokens_from_concurrency_and_prompt():
    assert trtllm_deepseek_max_num_tokens(4, 1024) == 8192  # at least 8192
    assert trtllm_deepseek_max_num_tokens(64, 8192) == 8320  # (64 + 8192 + 127) // 64 * 64
    assert trtllm_deepseek_max_num_tokens(256, 8192) == 8512
    point = public_point("trtllm", "1.2.0rc6.post2", 64, isl="8192", osl="1024")
    assert (point.token_budget, point.memory_fraction) == (8320, 0.8)
    scheduler = deployment_for(point).scheduler  # whole contexts under it: chunking stays off
    assert (scheduler.kind, scheduler.max_tokens) == (SchedulerKind.ORCA, 8320)
    tp4 = public_point("trtllm", "1.2.0rc6.post2", 32, isl="8192", osl="1024", tp_size="4",
                       moe_tp_size="4")  # fmt: skip
    assert tp4.memory_fraction == 0.75  # dsr1_fp8_b200_trt at 8k/1k on 4 GPUs
    h200 = public_point("trtllm", "1.1.0rc2.post2", 16, system="h200_sxm")
    assert (h200.token_budget, h200.memory_fraction) == (8192, 0.75)


def test_nvidias_tensorrt_llm_runs_take_the_generators_token_limit_and_whole_contexts():
    """aiconfigurator's generator gives an aggregated TensorRT-LLM worker max_num_tokens 512 +
    ISL + 1500, rounded up to 32, and leaves chunked context off: whole prompts, a few an
    iteration, instead of the engine profile's chunks of 8192."""
    assert trtllm_agg_max_num_tokens(1024) == 3040  # 3036 rounded up to 32
    assert trtllm_agg_max_num_tokens(128) == 2144
    [own] = select_points([row(backend="trtllm", backend_version="1.0.0rc3")]).points
    assert (own.token_budget, own.scheduler) == (3040, "orca")
    scheduler = deployment_for(own).scheduler
    assert (scheduler.kind, scheduler.max_tokens) == (SchedulerKind.ORCA, 3040)
    # the public benchmark's TensorRT-LLM points and NVIDIA's vLLM and SGLang runs keep
    # their engine's policy
    public = row(silicon_data_source="db-dump/x; silicon_concurrency=16", backend="trtllm",
                 backend_version="1.1.0rc2", isl="8192", osl="1024")  # fmt: skip
    [public_point_] = select_points([public]).points
    assert not public_point_.scheduler
    assert deployment_for(public_point_).scheduler.kind is SchedulerKind.SARATHI
    sglang = row(backend="sglang", backend_version="0.5.6.post2", model_path="Qwen/Qwen3-32B",
                 system="h100_sxm", tp_size="2")  # fmt: skip
    for own_other in select_points([row(), sglang]).points:
        assert (own_other.token_budget, own_other.scheduler) == (0, "")


def test_the_public_points_take_their_scripts_token_budget_and_batch_cap():
    sglang = deployment_for(public_point("sglang", "0.5.9", 64)).scheduler
    assert (sglang.chunk_size, sglang.batch_size) == (32768, 64)  # 128 running, 64 clients
    # at TP 4 the script runs at most 32 requests: the rest of 64 clients queue
    tp4 = public_point("sglang", "0.5.9", 64, isl="8192", tp_size="4", moe_tp_size="4")
    assert (tp4.token_budget, tp4.batch_cap, tp4.memory_fraction) == (8192, 32, 0.95)
    assert deployment_for(tp4).scheduler.batch_size == 32
    h200 = public_point("sglang", "0.5.9", 64, system="h200_sxm")
    assert deployment_for(h200).scheduler.chunk_size == 32768  # the engine's own: 8192
    # TensorRT-LLM gpt-oss: 20000 tokens per attention DP rank
    gpt_oss = public_point("trtllm", "1.2.0rc2.post2", 256, "gpt-oss", tp_size="1",
                           moe_tp_size="1")  # fmt: skip
    assert deployment_for(gpt_oss).scheduler.max_tokens == 20000  # whole contexts under it
    ranks = replace(gpt_oss, dp=2, ep=2)
    assert deployment_for(ranks).scheduler.max_tokens == 40000
    # vLLM MiniMax-M2.5 on H200: the script's budget and batch cap came after the 0.18 runs
    for version in ("0.16.0", "0.18.0"):
        point = public_point("vllm", version, 64, "minimax", system="h200_sxm")
        assert (point.token_budget, point.batch_cap, point.kv_cache_dtype) == (0, 0, None)
        assert deployment_for(point).scheduler.chunk_size == 8192  # vLLM's own
    # a script that sets none keeps the engine's limits
    plain = public_point("vllm", "0.18.0", 64, "gpt-oss", system="h200_sxm")
    assert (plain.token_budget, plain.batch_cap, plain.memory_fraction) == (0, 0, 0.0)


def test_the_gpt_oss_vllm_scripts_capture_cuda_graphs_up_to_2048_tokens():
    """max-cudagraph-capture-size 2048 in every gpt-oss vLLM script: a 1k prefill with its
    decodes runs in the piecewise graphs; other scripts keep vLLM's min(2 x seqs, 512)."""
    for system in ("b200_sxm", "h100_sxm", "h200_sxm"):
        point = public_point("vllm", "0.18.0", 4, "gpt-oss", system=system)
        assert point.graph_max_tokens == 2048
        engine = engine_for(point)
        assert (engine.piecewise_max_tokens, engine.piecewise_tokens_per_seq) == (2048, 0)
        assert deployment_for(point).sized_engine().graphed(1027, False, 4)
    minimax = public_point("vllm", "0.18.0", 4, "minimax", system="h200_sxm")
    assert minimax.graph_max_tokens == 0
    assert deployment_for(minimax).sized_engine().piecewise_max_tokens == 8  # 2 x 4 clients
    assert not deployment_for(minimax).sized_engine().graphed(1027, False, 4)


@needs_aic
def test_the_gpt_oss_vllm_scripts_force_their_moe_kernels():
    """VLLM_MXFP4_USE_MARLIN=1 in gptoss_fp4_h100 and _h200: the points' profile names
    Marlin for the MXFP4 experts on Hopper, and their eager prefills take that kernel's
    measured time (scaled from the shape it was timed at).  VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8
    =1 in gptoss_fp4_b200: FlashInfer's kernel with MXFP8 activations, not vLLM's default
    with 16-bit ones, several times faster at a prefill's token counts."""
    from estimators._profiled import routed_experts_curve

    b200 = public_point("vllm", "0.15.1", 4, "gpt-oss")
    assert b200.moe_kernel == VLLM_FLASHINFER_MXFP8_MOE
    default = load_engine("vllm@0.15.1").moe_kernels["mxfp4"]
    assert engine_for(b200).moe_kernels["mxfp4"] == {**default, "blackwell": b200.moe_kernel}
    est = prepare(deployment_for(b200)).estimator
    label, curve, _ = routed_experts_curve(est, "b200_sxm", "vllm", "0.15.1")
    assert "flashinfer_trtllm_mxfp4_mxfp8" in label
    default_label, bf16, _ = routed_experts_curve(
        prepare(deployment_for(replace(b200, moe_kernel=""))).estimator, "b200_sxm", "vllm",
        "0.15.1",
    )
    assert default_label == "b200_sxm/moe/vllm/0.24.0/moe_perf.parquet"  # at gpt-oss's shape
    assert curve(8192) < 0.5 * bf16(8192)
    for system in ("h100_sxm", "h200_sxm"):
        point = public_point("vllm", "0.18.0", 4, "gpt-oss", system=system)
        assert point.moe_kernel == "marlin"
        kernels = engine_for(point).moe_kernels["mxfp4"]
        assert kernels["hopper"] == "marlin"
        assert kernels["blackwell"] == load_engine("vllm").moe_kernels["mxfp4"]["blackwell"]
        est = prepare(deployment_for(point)).estimator
        label, _, _ = routed_experts_curve(est, system, "vllm", "0.18.0")
        assert "marlin at hidden 3584" in label


def test_the_minimax_vllm_scripts_before_their_fix_run_expert_parallel():
    """`--enable-expert-parallel` when EP_SIZE >= 1, i.e. always: every H200 run and the
    B200 runs before PR #947 (the 0.19 image) shard the experts over the TP GPUs, though
    their rows record EP 1; the 0.19 B200 runs (-gt 1) do not."""
    for system, version, ep in (("h200_sxm", "0.16.0", 4), ("h200_sxm", "0.18.0", 4),
                                ("b200_sxm", "0.17.0", 4), ("b200_sxm", "0.19.0", 1)):  # fmt: skip
        point = public_point("vllm", version, 8, "minimax", system=system)
        assert point.ep == ep
        assert deployment_for(point).ep == ep


def minimax_dump_point(config: int, concurrency: int, precision: str = "nvfp4",
                       system: str = "b300_sxm", version: str = "0.19.0", isl: str = "1024"):
    """A MiniMax-M2.5 row of the public dump as it records vLLM's TP 2 / EP 2 layout
    (attention DP 2, MoE EP 4: `_aic_silicon.dump_layout`), with its configuration id."""
    source = f"db-dump/x; config_id={config}; silicon_concurrency={concurrency}"
    fields = row(silicon_data_source=source, model_path="MiniMaxAI/MiniMax-M2.5",
                 backend="vllm", backend_version=version, system=system, isl=isl,
                 osl="1024", gemm_quant_mode=precision, moe_quant_mode=precision,
                 tp_size="2", attention_dp_size="2", moe_tp_size="1", moe_ep_size="4")  # fmt: skip
    [point] = select_points([fields], models="moe").points
    return point


def test_the_minimax_blackwell_scripts_of_the_0_19_image_set_their_recipe():
    """minimaxm2.5_fp4_* and _fp8_* on B200 / B300 with the 0.19 image: FP8 KV cache, CUDA
    graphs up to 2048 tokens, a token budget of twice the prompt and vLLM's own memory
    fraction; the FP8 runs before (0.17) kept 0.95 and expert parallelism, the FP4 ones
    vLLM's defaults."""
    for system in ("b200_sxm", "b300_sxm"):
        for precision in ("nvfp4", "fp8"):
            point = minimax_dump_point(726, 128, precision=precision, system=system, isl="8192")
            assert (point.kv_cache_dtype, point.token_budget, point.graph_max_tokens,
                    point.memory_fraction) == (Precision.FP8, 16384, 2048, 0.0)  # fmt: skip
            assert deployment_for(point).scheduler.chunk_size == 16384
    early = minimax_dump_point(726, 128, system="b200_sxm", version="0.17.0")
    assert (early.kv_cache_dtype, early.token_budget, early.graph_max_tokens) == (None, 0, 0)
    fp8 = minimax_dump_point(726, 128, precision="fp8", system="b200_sxm", version="0.17.0")
    assert (fp8.kv_cache_dtype, fp8.memory_fraction, fp8.graph_max_tokens) == (None, 0.95, 0)


def test_the_minimax_fp4_dp_attn_configurations_run_attention_dp_over_their_tp_gpus():
    """Configurations 707 (B200) and 727 (B300) are the `dp-attn` entries: their script runs
    --tensor-parallel-size=1 --data-parallel-size=2 --enable-expert-parallel, each DP rank
    with vLLM's own batch cap and the script's token budget; the plain TP 2 / EP 2 entries
    (706, 726) and the FP8 script's `dp-attn` entry (827, a script without that branch)
    keep TP 2 with EP 2."""
    for config, system in ((727, "b300_sxm"), (707, "b200_sxm")):
        point = minimax_dump_point(config, 2048, system=system)
        assert (point.tp, point.dp, point.ep) == (1, 2, 2)
        deployment = deployment_for(point)
        assert (deployment.tp, deployment.dp, deployment.ep) == (1, 2, 2)
        assert deployment.scheduler.batch_size == 2 * 1024  # vLLM's 1024 a rank
        assert deployment.scheduler.chunk_size == 2 * 2048  # twice the prompt a rank
    for config, precision in ((726, "nvfp4"), (827, "fp8")):
        point = minimax_dump_point(config, 1024, precision=precision)
        assert (point.tp, point.dp, point.ep) == (2, 1, 2)


def test_marlin_is_forced_from_the_v0_13_image_on():
    """PR #327 brought VLLM_MXFP4_USE_MARLIN=1 with vLLM 0.13: the 0.11 runs ran Triton."""
    for version, kernel in (("0.11.2", ""), ("", ""), ("0.13.0", "marlin")):
        point = public_point("vllm", version, 4, "gpt-oss", system="h200_sxm")
        assert point.moe_kernel == kernel


def test_sglang_deepseek_fuses_its_shared_expert_unless_its_script_runs_flashinfer_trtllm():
    """SGLang runs DeepSeek-V3/R1's shared expert as a 257th routed expert at EP 1, but its
    B200/B300 scripts' --moe-runner-backend flashinfer_trtllm turns that off; the H200
    script keeps the default runner, and the fusion."""
    blackwell = public_point("sglang", "0.5.9", 32)
    hopper = public_point("sglang", "0.5.9", 32, system="h200_sxm")
    assert blackwell.moe_kernel == "flashinfer_trtllm" and hopper.moe_kernel == ""
    fused = prepare(deployment_for(hopper)).estimator
    apart = prepare(deployment_for(blackwell)).estimator
    assert (fused._fused_shared, apart._fused_shared) == (1, 0)
    assert not any(op.name.startswith("shared_expert_") for op in fused.layer_ops)
    assert any(op.name.startswith("shared_expert_") for op in apart.layer_ops)


def test_sglang_deepseek_fp8_blackwell_script_runs_flashinfers_block_fp8_gemms():
    """The dsr1_fp8_b200 script turns DeepGEMM off (SGL_ENABLE_JIT_DEEPGEMM=false,
    SGLANG_ENABLE_FLASHINFER_GEMM=true): its dense block-FP8 GEMMs run FlashInfer's
    groupwise kernel, slower at a prefill's token counts; the FP4 and H200 scripts keep the
    default."""
    fp8 = public_point("sglang", "0.5.9", 4)
    fp4 = public_point("sglang", "0.5.9", 4, gemm_quant_mode="nvfp4", moe_quant_mode="nvfp4")
    h200 = public_point("sglang", "0.5.9", 4, system="h200_sxm")
    assert fp8.fp8_block_gemm == "flashinfer"
    assert fp4.fp8_block_gemm == h200.fp8_block_gemm == ""
    assert engine_for(fp8).fp8_block_gemm == "flashinfer"
    assert engine_for(h200).fp8_block_gemm == load_engine("sglang").fp8_block_gemm == ""
    prefill = BatchShape(num_prefill_tokens=8192, num_prefills=1,
                         prefill_attn_pairs=8192 * 8193 // 2, prefill_kv_tokens=8192)  # fmt: skip

    def seconds(point):
        return prepare(deployment_for(point)).estimator.batch_cost(prefill).stage_times[0]

    assert seconds(fp8) > 1.2 * seconds(replace(fp8, fp8_block_gemm=""))


def test_the_public_points_plan_memory_with_their_scripts_fraction():
    point = public_point("sglang", "0.5.9", 64)
    plan = prepare(deployment_for(point)).memory
    assert plan.memory_fraction_name == "mem_fraction_static"
    assert plan.gpu_memory_utilization == 0.82
    default = prepare(deployment_for(replace(point, memory_fraction=0.0))).memory
    assert default.gpu_memory_utilization != 0.82
    # SGLang's fraction is of the GPU's memory: the KV cache grows by the difference
    grown = (0.82 - default.gpu_memory_utilization) * plan.gpu_memory_bytes
    assert plan.kv_bytes - default.kv_bytes == pytest.approx(grown, rel=1e-6)
    trtllm = public_point("trtllm", "1.2.0rc2.post2", 64, "gpt-oss")
    plan = prepare(deployment_for(trtllm)).memory
    assert (plan.memory_fraction_name, plan.gpu_memory_utilization) == (
        "free_gpu_memory_fraction", 0.85)  # fmt: skip
    assert public_point("vllm", "0.16.0", 8, "minimax", system="h200_sxm").memory_fraction == (
        0.95)  # fmt: skip


def test_a_spreading_client_draws_lengths_in_its_range_and_a_fixed_one_does_not():
    [point] = select_points([row(silicon_data_source="db-dump/x; silicon_concurrency=50")]).points
    spread = closed_loop_workload(point, requests_per_slot=10)
    prompts, outputs = spread.prompt_tokens, spread.output_tokens
    assert len(prompts) == 500 and spread.concurrency == 50
    assert prompts.min() >= 819 and prompts.max() <= 1024  # [int(0.8 x 1024), 1024]
    assert outputs.min() >= 102 and outputs.max() <= 128
    assert prompts.mean() == pytest.approx((819 + 1024) / 2, rel=0.02)
    assert len(set(prompts.tolist())) > 100  # spread, not a handful of values
    again = closed_loop_workload(point, requests_per_slot=10)
    assert (again.prompt_tokens == prompts).all()  # seeded: every run draws the same
    other = closed_loop_workload(point, requests_per_slot=10, seed=1)
    assert not (other.prompt_tokens == prompts).all()
    fixed = closed_loop_workload(replace(point, length_ratio=1.0), requests_per_slot=10)
    assert set(fixed.prompt_tokens.tolist()) == {1024}
    assert set(fixed.output_tokens.tolist()) == {128}


def test_the_installed_dataset_loads_and_selects_the_dense_aggregated_points():
    selection = load_aic_silicon()
    assert selection.total_rows > 5000
    # aiconfigurator-core 0.12.0: 905 16-bit and FP8 points, 132 NVFP4 ones
    assert len(selection.points) == 1037
    assert sum(p.precision is Precision.FP4 for p in selection.points) == 132
    # 30 rows ran on more workers or attention-DP ranks than they record
    assert selection.skipped[_aic_silicon.UNRECORDED_WORKERS] == 30
    assert sum(selection.skipped.values()) + len(selection.points) == selection.total_rows
    assert {p.sku for p in selection.points} == {"h100-sxm", "h200", "b200", "gb200"}
    assert {p.engine for p in selection.points} == {"vllm", "sglang", "trtllm"}
    assert {p.model for p in selection.points} == {
        "meta-llama/Llama-3.1-8B",
        "meta-llama/Llama-3.1-70B",
        "Qwen/Qwen3-32B",
    }
    assert all(p.concurrency >= 1 and p.measured_tpot_ms > 0 for p in selection.points)


# -- statistics ----------------------------------------------------------------


def test_error_statistics_on_hand_made_numbers():
    stats = error_stats([110.0, 50.0, 200.0, math.nan, 90.0], [100.0, 100.0, 100.0, 100.0, 100.0])
    assert stats.n == 4  # the NaN prediction is left out
    assert stats.mape == pytest.approx((0.1 + 0.5 + 1.0 + 0.1) / 4)
    assert stats.median_signed == pytest.approx((-0.1 + 0.1) / 2)
    assert stats.within == pytest.approx(0.5)  # exactly 10% off counts as within


def test_error_statistics_of_nothing_are_nan():
    stats = error_stats([], [])
    assert stats.n == 0 and math.isnan(stats.mape)


def test_groups_with_numeric_labels_sort_by_their_numbers_before_named_ones():
    labels = {"8192/1024": 1, "1024/8192": 1, "15000/500": 1, "1024/1024": 1, "129+": 1,
              "9-32": 1, "fp8": 1}  # fmt: skip
    names = [name for name, _ in grouped(labels, lambda label: label, len)]
    assert names == ["9-32", "129+", "1024/1024", "1024/8192", "8192/1024", "15000/500", "fp8"]


def test_concurrency_bands():
    assert [concurrency_band(c) for c in (1, 8, 9, 32, 33, 128, 129, 512)] == [
        "1-8", "1-8", "9-32", "9-32", "33-128", "33-128", "129+", "129+",
    ]  # fmt: skip


# -- the command ---------------------------------------------------------------


@needs_aic
def test_validate_on_a_small_fixed_subset(tmp_path):
    out = tmp_path / "val"
    # six points of the 16-bit and FP8 checkpoints (--limit draws them with a fixed seed)
    result = invoke("validate", "--limit", "6", "--no-aic", "--workers", "1", "--out", str(out),
                    "--filter", "weights!=fp4")  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "1037 of 5221 rows can be simulated" in result.output
    assert "validating 6 of them" in result.output
    lines = result.output.splitlines()
    tpot = next(line for line in lines if line.startswith("TPOT MAPE "))
    ttft = next(line for line in lines if line.startswith("TTFT MAPE "))
    for title in ("by engine", "by GPU", "by model", "by concurrency", "by lengths"):
        assert title in result.output  # lengths: the six span 1k/128 to 2k/128
    # Regression guard at today's fidelity, set on the six drawn before the rows spread over
    # unrecorded workers were skipped (TPOT 32%, TTFT 53% before the engine layers were
    # fitted to aiconfigurator's operator tables; 8% and 80% after: those constants follow
    # the operator tables, never these points); today's six: 9% and 46%.  Tighten these
    # bounds as the fidelity work lands.
    assert float(tpot.split()[2].rstrip("%")) < 45
    assert float(ttft.split()[2].rstrip("%")) < 95
    csv_text = (out / "points.csv").read_text().splitlines()
    assert len(csv_text) == 7 and csv_text[0].startswith("id,source,engine")
    for record in csv.DictReader(csv_text):  # the wait before a prompt runs: part of its TTFT
        wait, ttft = float(record["predicted_ttft_wait_ms"]), float(record["predicted_ttft_ms"])
        assert 0.0 <= wait < ttft
    assert (out / "predicted_vs_measured.png").stat().st_size > 1000


@needs_aic
def test_the_public_benchmark_points_with_their_clients_length_spread():
    # Eight InferenceMAX points (Llama-3.1-70B FP8, H100/H200/B200). With every request the
    # same length their TTFT MAPE was 126%: the clients stayed in step and each prefill
    # queued behind the others. Drawn as the client draws them it is 23%.
    result = invoke("validate", "--filter", "source=benchmark-db", "--limit", "8", "--no-aic",
                    "--workers", "1")  # fmt: skip
    assert result.exit_code == 0, result.output
    ttft = next(line for line in result.output.splitlines() if line.startswith("TTFT MAPE "))
    assert float(ttft.split()[2].rstrip("%")) < 35


@needs_aic
def test_validate_with_shipped_op_tables_keeps_their_gpus_points():
    result = invoke(
        "validate", "--no-aic", "--workers", "1", "--estimator", "profiled",
        "--op-tables", "h100-sxm/llama-3.1-70b", "--filter", "model=70B",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "validating 45 of them (the h100-sxm points: the op tables' GPU)" in result.output
    tpot = next(line for line in result.output.splitlines() if line.startswith("TPOT MAPE "))
    # 15.4% when these tables were shipped (aiconfigurator's own tables: 9.8%); the tables
    # were measured on a GPU, never fitted to these points
    assert float(tpot.split()[2].rstrip("%")) < 25


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--op-tables", "h100-sxm/llama-3.1-70b"], "add --estimator profiled"),
        (["--estimator", "profiled", "--op-tables", "nowhere/x"], "--op-tables: op tables "),
        (["--dataset", "x.json", "--op-tables", "h200/llama-3.1-8b"], "only --dataset aic-"),
    ],
)
def test_op_tables_that_cannot_be_read_exit_2(args, message):
    result = invoke("validate", "--no-aic", *args)
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output


@needs_aic
def test_aiconfigurator_estimate_side_by_side():
    result = invoke("validate", "--limit", "2", "--workers", "1", "--filter", "engine=vllm")
    assert result.exit_code == 0, result.output
    assert "aiconfigurator TPOT MAPE" in result.output
    assert "aic TPOT MAPE" in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--dataset", "nope"], "unknown dataset 'nope'; available: aic-silicon"),
        (["--filter", "colour=red"], "--filter 'colour=red': expected KEY=VALUE"),
    ],
)
def test_bad_arguments_exit_2_without_a_traceback(args, message):
    result = invoke("validate", "--no-aic", *args)
    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output


def test_missing_extra_exits_2_with_the_install_line(monkeypatch):
    monkeypatch.setattr(_aic_silicon, "PACKAGE", "no_such_package_for_llmcap")
    result = invoke("validate", "--no-aic")
    assert result.exit_code == 2
    assert "pip install 'llmcap[aic]'" in result.output
    assert "Traceback" not in result.output


def test_malformed_table_exits_2_naming_file_and_field(monkeypatch):
    bad = HEADER + "\n" + ",".join(row(isl="1k").values()) + "\n"

    def read() -> tuple[str, list[dict[str, str]]]:
        return "silicon_sample.csv", parse_rows(bad, "silicon_sample.csv")

    monkeypatch.setattr(_aic_silicon, "read_silicon_csv", read)
    result = invoke("validate", "--no-aic")
    assert result.exit_code == 2
    assert "silicon_sample.csv line 2: field isl must be a positive integer, got '1k'" in (
        result.output
    )
    assert "Traceback" not in result.output


@needs_aic
def test_hold_out_prints_leave_one_gpu_and_model_out_rows(tmp_path, monkeypatch):
    monkeypatch.setenv("LLMCAP_CACHE_DIR", str(tmp_path))
    result = invoke(
        "validate", "--limit", "4", "--no-aic", "--workers", "1", "--filter", "engine=vllm",
        "--hold-out", "gpu,model",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "held out (constants refitted without the row's data)" in result.output
    rows = [line for line in result.output.splitlines() if line.startswith(("│ gpu", "│ model"))]
    assert rows, result.output
    for line in rows:
        cells = [c.strip() for c in line.strip("│").split("│")]
        assert int(cells[1]) >= 1
        assert all(c.endswith("%") for c in cells[2:])
    assert "excluded: GPU" in result.output and "excluded: model" in result.output


def test_hold_out_rejects_an_unknown_kind():
    result = invoke("validate", "--no-aic", "--hold-out", "gpu,sku")
    assert result.exit_code == 2
    assert "--hold-out 'gpu,sku': expected a comma-separated list of gpu, model" in result.output
    assert "Traceback" not in result.output


@needs_aic
def test_aiconfigurator_answers_deepseek_points_it_has_tables_for():
    """SGLang 0.5.9's folder holds only collective timings and the rows label DeepSeek's
    block-scaled experts "fp8": the estimate goes on to the current database and to the
    checkpoint's own expert quantisation, as aiconfigurator's estimate path would."""
    from search._validate._aic_estimate import estimate_point

    points = load_aic_silicon(models="moe").points
    wanted = {("sglang", "0.5.9"), ("trtllm", "1.2.0rc6.post2")}
    picked = {}
    for point in points:
        key = (point.engine, point.engine_version)
        if (key in wanted and "DeepSeek" in point.model_path and point.sku == "b200"
                and point.precision is Precision.FP8):  # fmt: skip
            picked.setdefault(key, point)
    assert set(picked) == wanted
    for point in picked.values():
        assert point.moe_quant_mode in {"fp8", "fp8_block"}
        estimate = estimate_point(point)
        assert estimate.error == "", estimate.error
        assert 1.0 < estimate.tpot_ms < 100.0
        assert estimate.ttft_ms > estimate.tpot_ms


@needs_aic
def test_aiconfigurator_estimates_a_disaggregated_point_with_its_own_session():
    """A disaggregated point goes through aiconfigurator's disaggregated estimate (its
    `cli_estimate(mode="disagg")`) with each pool's layout and worker count; TTFT is its
    prefill pool's, independent of the decode side's batch, TPOT the decode pool's."""
    pytest.importorskip("aiconfigurator")
    from search._validate._aic_estimate import estimate_point

    points = load_aic_silicon(models="all", modes="disagg").points
    point = next(p for p in points if p.id == "dsr1_gb200_sglang_fp4_disagg_1024x1024_c8_cfg486")
    low = estimate_point(point)
    assert low.error == "", low.error
    assert 1.0 < low.tpot_ms < 100.0 and low.ttft_ms > low.tpot_ms
    busy = estimate_point(replace(point, concurrency=32))
    assert busy.ttft_ms == pytest.approx(low.ttft_ms)  # one prompt a prefill batch
    assert busy.tpot_ms > low.tpot_ms  # a bigger decode batch per rank


def test_the_report_keeps_4_bit_rows_apart(capsys):
    from rich.console import Console

    from search._validate._report import print_report
    from search._validate._run import PointResult

    fp8 = select_points([row()]).points[0]
    fp4 = replace(fp8, id="p2", precision=Precision.FP4, weights="fp4")
    results = [
        PointResult(fp8, predicted_ttft_ms=120.5, predicted_tpot_ms=9.5 * 1.1),  # TPOT +10%
        PointResult(fp4, predicted_ttft_ms=60.25, predicted_tpot_ms=9.5 * 0.5),  # -50%, -50%
    ]
    print_report(results, with_aic=False, console=Console(width=200))
    out = capsys.readouterr().out
    assert "TPOT MAPE 30.0%" in out  # both rows
    assert "without 4-bit weights (n=1): TPOT MAPE 10.0%, TTFT MAPE 0.0%" in out
    assert "4-bit weights (fp4, mxfp4, int4) (n=1): TPOT MAPE 50.0%, TTFT MAPE 50.0%" in out
    assert "by weights" in out
    print_report(results[:1], with_aic=False, console=Console(width=200))
    out = capsys.readouterr().out
    assert "4-bit" not in out and "by weights" not in out  # one kind of weights: no split


def test_the_report_says_why_aiconfigurator_answered_no_point(capsys):
    """Where aiconfigurator answers none of the points the report names its most common
    reason instead of comparing MAPEs over nothing."""
    from rich.console import Console

    from search._validate._report import print_report
    from search._validate._run import PointResult

    point = select_points([row()]).points[0]
    why = "aiconfigurator's disaggregated estimate needs the aiconfigurator package"
    results = [
        PointResult(point, predicted_ttft_ms=120.5, predicted_tpot_ms=9.5, aic_error=why),
        PointResult(replace(point, id="p2"), predicted_ttft_ms=100.0, predicted_tpot_ms=9.0,
                    aic_error=why),
    ]  # fmt: skip
    print_report(results, with_aic=True, console=Console(width=250))
    out = capsys.readouterr().out
    assert f"aiconfigurator answers none of the 2 points (2: {why})" in out
    assert "both tools answer" not in out and "nan" not in out


@needs_aic
def test_a_point_s_closed_loop_throughput_follows_little_s_law():
    point = select_points([row()]).points[0]  # C 16, fixed 1024/128 lengths
    assert point.mean_output_tokens == 128
    # each client's request takes TTFT + 127 x TPOT = 120.5 + 1206.5 ms = 1.327 s
    assert point.requests_per_second(120.5, 9.5) == pytest.approx(16 / 1.327)
    assert math.isnan(point.requests_per_second(math.nan, 9.5))
    assert math.isnan(point.requests_per_second(120.5, 0.0))
    # a client drawing lengths from [int(0.8 x 128), 128] = [102, 128] asks for 115 on average
    spread = replace(point, length_ratio=0.8)
    assert spread.mean_output_tokens == 115
    assert spread.requests_per_second(100.0, 10.0) == pytest.approx(16 / (0.1 + 114 * 0.01))


def test_the_report_scores_the_throughput_both_latencies_imply(capsys, tmp_path):
    from rich.console import Console

    from search._validate._report import print_report, write_points_csv
    from search._validate._run import PointResult

    point = select_points([row()]).points[0]
    # TTFT and TPOT both 10% slow: every request lasts 10% longer, 1/1.1 of the requests
    result = PointResult(point, predicted_ttft_ms=120.5 * 1.1, predicted_tpot_ms=9.5 * 1.1)
    print_report([result], with_aic=False, console=Console(width=250))
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("Throughput "))
    assert "MAPE 9.1%" in line and "median signed -9%" in line
    assert "req/s MAPE" in out  # the group tables' column
    with (write_points_csv([result], tmp_path / "points.csv")).open() as handle:
        record = next(csv.DictReader(handle))
    assert float(record["measured_req_s"]) == pytest.approx(16 / 1.327, rel=1e-4)
    assert float(record["req_s_error"]) == pytest.approx(1 / 1.1 - 1, abs=1e-4)
    assert record["aic_req_s"] == "" and record["aic_req_s_error"] == ""


def test_the_best_single_value_of_repeat_measurements_is_their_weighted_median():
    from search._validate._stats import best_single_value_mape

    # 100 scores 25% against (100, 200); 150 would score 37.5% and 200 50%
    assert best_single_value_mape([200.0, 100.0]) == pytest.approx(0.25)
    assert best_single_value_mape([50.0]) == 0.0
    assert math.isnan(best_single_value_mape([]))
    values = [80.0, 95.0, 100.0, 180.0, 97.0]
    brute = min(sum(abs(c / v - 1) for v in values) / len(values)
                for c in (50 + 0.01 * i for i in range(20_000)))  # fmt: skip
    assert best_single_value_mape(values) == pytest.approx(brute, abs=1e-4)


def test_the_report_shows_how_far_repeat_measurements_of_one_deployment_disagree(capsys):
    from rich.console import Console

    from search._validate._report import print_report, repeat_floor
    from search._validate._run import PointResult

    point = select_points([row()]).points[0]  # C 16, TTFT 120.5 ms, TPOT 9.5 ms
    # the same deployment measured again, by another run and client, twice as slow to start
    again = replace(point, id="again", measured_ttft_ms=241.0, client_warmup="warm-up",
                    source="aic-collection", model_path="deepseek-ai/DeepSeek-R1")  # fmt: skip
    other = replace(point, id="other", concurrency=32)  # another load: another deployment
    assert again.deployment == point.deployment != other.deployment
    results = [PointResult(p, predicted_ttft_ms=120.5, predicted_tpot_ms=9.5)
               for p in (point, again, other)]  # fmt: skip
    floor = repeat_floor(results)
    assert floor is not None and (floor.points, floor.deployments) == (2, 1)
    assert floor.ttft == pytest.approx(0.25)  # 120.5 against (120.5, 241)
    assert floor.tpot == 0.0
    assert floor.ours.ttft.mape == pytest.approx(0.25)  # llmcap's answer is that best value
    print_report(results, with_aic=False, console=Console(width=200))
    out = capsys.readouterr().out
    assert "repeat measurements: 2 points measure 1 deployment more than once" in out
    assert "differ by TTFT MAPE 25.0%, TPOT 0.0%" in out
    assert "(llmcap there: TTFT 25.0%, TPOT 0.0%" in out
    assert repeat_floor(results[::2]) is None
    print_report(results[::2], with_aic=False, console=Console(width=200))
    assert "repeat measurements" not in capsys.readouterr().out


@needs_aic
def test_aiconfigurator_reads_nvidias_nvfp4_checkpoint_as_its_base_model():
    from search._validate._aic_estimate import _model_path

    # the package ships no config of NVIDIA's quantised copy: the base architecture, with
    # the row's nvfp4 modes
    assert _model_path("nvidia/DeepSeek-R1-NVFP4") == "deepseek-ai/DeepSeek-R1"
    assert _model_path("nvidia/Llama-3.1-70B-Instruct-FP8") == "nvidia/Llama-3.1-70B-Instruct-FP8"


def test_the_public_deepseek_tensorrt_llm_points_with_attention_dp_balance_their_ranks():
    def balance(engine, version, **fields):
        rows = [deepseek_row(engine, version, 128, **fields)]
        [point] = select_points(rows, models="moe").points
        return point

    dep8 = {"tp_size": "1", "attention_dp_size": "8", "moe_tp_size": "1", "moe_ep_size": "8"}
    point = balance("trtllm", "1.2.0rc6.post2", **dep8)
    assert (point.adp_balance_timeout_iters, point.adp_balance_batching_wait_iters) == (60, 0)
    assert (point.batch_wait_iters, point.recv_interval) == (0, 1)  # none of the others
    plain = balance("trtllm", "1.2.0rc6.post2")  # TP 8, no attention DP
    assert (plain.adp_balance_timeout_iters, plain.adp_balance_batching_wait_iters) == (0, 0)
    assert balance("sglang", "0.5.9", system="h200_sxm", **dep8).adp_balance_timeout_iters == 0
    # gpt-oss's scripts set enable_balance alone: TensorRT-LLM's defaults, 50 and 10
    gpt_oss = {"model_path": "openai/gpt-oss-120b", "gemm_quant_mode": "nvfp4",
               "moe_quant_mode": "nvfp4", "tp_size": "1", "attention_dp_size": "4",
               "moe_tp_size": "1", "moe_ep_size": "4"}  # fmt: skip
    oss = balance("trtllm", "1.2.0rc2.post2", **gpt_oss)
    assert (oss.adp_balance_timeout_iters, oss.adp_balance_batching_wait_iters) == (50, 10)
    deployment = deployment_for(point)
    scheduler = deployment.scheduler
    assert (scheduler.adp_balance_timeout_iters, scheduler.adp_balance_batching_wait_iters) == (
        60, 0,
    )  # fmt: skip
    # the replica's policy sees the deployment's 8 ranks
    workload = closed_loop_workload(point, requests_per_slot=1)
    [replica] = prepare(deployment).simulation(workload).replicas
    assert replica.policy.config.attention_dp == deployment.dp == 8


def test_public_rack_rows_beyond_tp_8_are_skipped_as_unrecorded_layouts():
    def mapped(tp):
        rows = [deepseek_row("trtllm", "", 64, system="gb200", tp_size=str(tp),
                             moe_tp_size=str(tp), gemm_quant_mode="nvfp4",
                             moe_quant_mode="nvfp4")]  # fmt: skip
        return select_points(rows, models="moe")

    assert mapped(64).skipped == {_aic_silicon.RACK_LAYOUT: 1}
    assert mapped(32).skipped == {_aic_silicon.RACK_LAYOUT: 1}
    assert [p.tp for p in mapped(8).points] == [8]


def _ttft_gap_script():
    return load_benchmark("ttft_gap")


def _points_file(directory, rows):
    """A `llmcap validate --out` points.csv in `directory` holding `rows` (each a dict of
    some of its columns; the others empty)."""
    from search._validate._report import CSV_COLUMNS

    directory.mkdir(exist_ok=True)
    with open(directory / "points.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        for values in rows:
            writer.writerow({**dict.fromkeys(CSV_COLUMNS, ""), **values})


def test_the_ttft_gap_diagnostic_groups_low_concurrency_points(tmp_path):
    """benchmarks/ttft_gap.py: medians of the low-concurrency points by engine, GPU, model,
    prompt length and warm-up; the gap per layer of the catalog model; MAPE by warm-up."""
    gap = _ttft_gap_script()

    def row(id_, isl, concurrency, measured, predicted, warmup):
        return dict(id=id_, engine="sglang", sku="h200", model="deepseek-ai/DeepSeek-V3",
                    isl=str(isl), concurrency=str(concurrency), client_warmup=warmup,
                    measured_ttft_ms=str(measured), predicted_ttft_ms=str(predicted),
                    ttft_error=str(predicted / measured - 1),
                    measured_tpot_ms=str(concurrency * 2.5))  # fmt: skip

    rows = [
        row("a", 1024, 4, 250.0, 130.0, "warm-up"),
        row("b", 1024, 8, 260.0, 120.0, "warm-up"),
        row("c", 8192, 4, 470.0, 470.0, "warm-up"),
        row("d", 1024, 64, 400.0, 300.0, "warm-up"),  # above the concurrency bound
        row("e", 1024, 4, 400.0, 100.0, "no warm-up"),
    ]
    _points_file(tmp_path, rows)
    read = gap.read_points(tmp_path)
    table = {(t[3], t[4]): t[5:] for t in gap.gap_table(read, max_concurrency=8)}
    n, measured, predicted, median_gap, per_layer, steps = table[("1024", "warm-up")]
    assert (n, measured, predicted, median_gap) == (2, 255.0, 125.0, 130.0)
    assert per_layer == pytest.approx(130.0 / 61)  # DeepSeek-V3's 61 layers
    assert steps == pytest.approx(130.0 / 15.0)  # the median TPOT of concurrency 4 and 8
    assert table[("8192", "warm-up")][3] == 0.0
    assert table[("1024", "no warm-up")][0] == 1
    by_warmup = gap.mape_by_warmup(read)
    assert by_warmup["no warm-up"] == (1, pytest.approx(75.0))
    assert by_warmup["warm-up"][0] == 4


def test_the_ttft_gap_diagnostic_splits_by_concurrency_and_counts_in_decode_steps(tmp_path):
    """--by-concurrency: one row per concurrency, each gap also over that concurrency's
    median measured TPOT (a gap of a steady number of decode steps while the step grows)."""
    gap = _ttft_gap_script()
    common = dict(engine="trtllm", sku="h200", model="deepseek-ai/DeepSeek-V3", isl="1024")
    _points_file(tmp_path, [
        dict(common, id="a", concurrency="36", measured_ttft_ms="650", predicted_ttft_ms="250",
             measured_tpot_ms="13.0"),
        dict(common, id="b", concurrency="576", measured_ttft_ms="1700", predicted_ttft_ms="900",
             measured_tpot_ms="30.0"),
    ])  # fmt: skip
    rows = gap.read_points(tmp_path)
    split = {t[5]: t[6:] for t in gap.gap_table(rows, 1000, by_concurrency=True)}
    assert split[36][3] == 400.0 and split[36][5] == pytest.approx(400.0 / 13.0)
    assert split[576][3] == 800.0 and split[576][5] == pytest.approx(800.0 / 30.0)
    (together,) = gap.gap_table(rows, 1000)
    assert together[5] == 2  # both points in one group without the split


def test_the_ttft_gap_diagnostic_brackets_measurements_between_two_runs(tmp_path):
    """--against: each measured TTFT above both runs' predictions, between them or below
    both, by engine; points missing from either run are left out."""
    gap = _ttft_gap_script()

    def point(id_, engine, measured, predicted):
        return dict(id=id_, engine=engine, measured_ttft_ms=str(measured),
                    predicted_ttft_ms=str(predicted), client_warmup="")  # fmt: skip

    _points_file(tmp_path / "roofline", [
        point("a", "sglang", 300, 100), point("b", "sglang", 300, 200),
        point("c", "trtllm", 100, 200), point("d", "trtllm", 150, 150),
        point("e", "trtllm", 500, 100),  # not in the other run
    ])  # fmt: skip
    _points_file(tmp_path / "tables", [
        point("a", "sglang", 300, 250), point("b", "sglang", 300, 400),
        point("c", "trtllm", 100, 300), point("d", "trtllm", 150, 120),
    ])  # fmt: skip
    counts = gap.bracket(
        gap.read_points(tmp_path / "roofline"), gap.read_points(tmp_path / "tables")
    )
    assert counts == {"sglang": (1, 1, 0), "trtllm": (0, 1, 1)}


def test_the_ttft_gap_diagnostic_refuses_a_points_file_without_warm_up(tmp_path):
    gap = _ttft_gap_script()
    (tmp_path / "points.csv").write_text("id,predicted_ttft_ms\na,1.0\n")
    with pytest.raises(SystemExit, match="client_warmup"):
        gap.read_points(tmp_path)


def test_the_twin_pairs_diagnostic_pairs_points_that_differ_in_one_field(tmp_path):
    """benchmarks/twin_pairs.py: a 4-bit point is paired with its 8-bit twin (same engine
    release, GPU, parallelism, lengths and concurrency) under --vary weights, an EP 4 point
    with its EP 1 twin under --vary ep, and the ratios are the twin's over the reference's."""
    twins = load_benchmark("twin_pairs")
    fp8 = "minimaxm2_5_b300_vllm_fp8_agg_8192x1024_c128_cfg733"
    fp4 = "minimaxm2_5_b300_vllm_fp4_agg_8192x1024_c128_cfg725"
    ep1 = "minimaxm2_5_b300_vllm_fp8_agg_1024x1024_c256_cfg733"
    ep4 = "minimaxm2_5_b300_vllm_fp8_agg_1024x1024_c256_cfg734"
    measured = {fp8: (1000.0, 30.0), fp4: (700.0, 24.0), ep1: (300.0, 30.0), ep4: (280.0, 33.0)}
    _points_file(tmp_path, [
        dict(id=id_, concurrency=id_.split("_")[-2].removeprefix("c"),
             model="MiniMaxAI/MiniMax-M2.5", system="b300_sxm", tp="4", isl="8192",
             tpot_error="0.0", measured_ttft_ms=str(ttft), measured_tpot_ms=str(tpot),
             predicted_ttft_ms=str(ttft / 2), predicted_tpot_ms=str(tpot))
        for id_, (ttft, tpot) in measured.items()
    ])  # fmt: skip
    points = twins.read_points(tmp_path)

    by_weights = twins.pairs(points, twins.VARIATIONS["weights"])
    assert [(a["id"], b["id"], v) for a, b, v in by_weights] == [(fp8, fp4, "4-bit")]
    (name, n, meas, pred, err), *_ = twins.band_rows(by_weights, "ttft")
    assert (name, n, meas, pred, err) == ("65+", 1, 0.7, pytest.approx(0.7), pytest.approx(0.0))
    assert twins.band_rows(by_weights, "tpot")[-1][2] == pytest.approx(0.8)

    by_ep = twins.pairs(points, twins.VARIATIONS["ep"])
    assert [(a["id"], b["id"], v) for a, b, v in by_ep] == [(ep1, ep4, "ep4")]
    assert twins.band_rows(by_ep, "tpot")[-1][2] == pytest.approx(1.1)
