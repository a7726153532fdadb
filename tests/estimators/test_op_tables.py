"""llmcap's own op-table format: writing, reading, errors, and the profiled backend on it."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from estimators import BatchShape, ProfiledDataMissing, load_model, make_estimator
from estimators._curves import monotone
from estimators._op_tables import (
    OpTablesError,
    OpTablesMeta,
    layer_gemm_shapes,
    load_op_tables,
    write_op_tables,
)
from sku_catalog import load_catalog

MODEL = load_model("meta-llama/Llama-3.1-8B")
MS = np.array([1, 4, 16, 64, 256, 1024, 4096])


def _gemm_ms(n: int, k: int, m: np.ndarray) -> np.ndarray:
    """A plausible GEMM time (ms): a floor, then 100 TFLOP/s, with a little bump to flatten."""
    t = 0.01 + 2.0 * m * n * k / 100e12 * 1e3
    return t * np.where(m == 16, 1.05, 1.0)  # noise: 16 tokens slower than 64 at small n


def _tables(tp: int = 1, sku: str | None = "h100-sxm", ms: np.ndarray = MS) -> dict:
    rows = []
    for op, (n, k) in layer_gemm_shapes(MODEL, tp).items():
        for m, t in zip(ms, _gemm_ms(n, k, ms), strict=True):
            rows.append({"dtype": "bf16", "m": int(m), "n": n, "k": k, "latency_ms": t, "op": op})
    heads, kv, hd = 32 // tp, 8 // tp, 128
    ctx, gen = [], []
    for b in (1, 4):
        for s in (128, 512, 2048):
            ctx.append({"num_heads": heads, "num_kv_heads": kv, "head_dim": hd,
                        "kv_dtype": "bf16", "batch_size": b, "prompt_len": s, "cached_len": 0,
                        "latency_ms": 1e-3 * b * (5 + s * s / 1e4)})  # fmt: skip
        ctx.append({**ctx[-1], "cached_len": 1024, "latency_ms": 99.0})  # not read
        for kvl in (256, 2048, 16384):
            gen.append({"num_heads": heads, "num_kv_heads": kv, "head_dim": hd,
                        "kv_dtype": "bf16", "batch_size": b, "kv_len": kvl,
                        "latency_ms": 1e-3 * (8 + b * kvl / 500)})  # fmt: skip
    ar = [{"num_gpus": 2, "message_bytes": int(x), "latency_ms": 0.01 + x / 2e8,
           "implementation": impl} for x in (1 << 12, 1 << 20, 1 << 26)
          for impl in ("nccl", "custom")]  # fmt: skip
    moe = [{"dtype": dt, **dict(zip(MOE_KEY, MOE_SHAPE, strict=True)), "num_tokens": t,
            "latency_ms": (0.05 + t * 1e-4) * (2 if kernel == "slow" else 1)
                          * (1.5 if dt == "bf16" else 1), "kernel": kernel}
           for dt in ("bf16", "fp8") for kernel in ("fast", "slow")
           for t in (1, 16, 256, 4096)]  # fmt: skip
    return {
        "gemm": pd.DataFrame(rows),
        "context_attention": pd.DataFrame(ctx),
        "generation_attention": pd.DataFrame(gen),
        "allreduce": pd.DataFrame(ar),
        "moe": pd.DataFrame(moe),
    }


MOE_KEY = ("hidden_size", "inter_size", "topk", "num_experts", "moe_tp", "moe_ep")
MOE_SHAPE = (2048, 768, 8, 128, 1, 4)


def _meta(sku: str | None = "h100-sxm") -> OpTablesMeta:
    return OpTablesMeta(source="test", device="cuda", dtype="bf16", date="2026-01-02", sku=sku,
                        gpu_name="NVIDIA H100 80GB HBM3", torch="2.13.0", cuda="12.8")  # fmt: skip


@pytest.fixture
def tables_dir(tmp_path: Path) -> Path:
    out = tmp_path / "tables"
    write_op_tables(out, _meta(), _tables())
    return out


def test_written_directory_loads_with_its_meta_and_rows(tables_dir: Path):
    files = sorted(p.name for p in tables_dir.iterdir())
    assert files == ["allreduce.csv", "context_attention.csv", "gemm.csv",
                     "generation_attention.csv", "meta.yaml", "moe.csv"]  # fmt: skip
    t = load_op_tables(tables_dir)
    assert t.meta.sku == "h100-sxm" and t.meta.torch == "2.13.0"
    assert t.gemm_dtypes() == ["bf16"]
    assert "NVIDIA H100 80GB HBM3" in t.label and "torch 2.13.0" in t.label
    _, cube = t.gemm_cube("bfloat16")
    assert cube is not None and list(cube.ms) == list(MS)
    assert t.gemm_cube("fp8")[1] is None


def test_profiled_backend_exact_at_measured_points_and_monotone(tables_dir: Path):
    sku = load_catalog().get("h100-sxm")
    est = make_estimator("profiled", MODEL, sku, op_tables=tables_dir)
    assert est.backend_name == "profiled"
    assert set(est.fallbacks) <= {"lm_head"}  # the vocabulary GEMM was not measured here
    for op, (n, k) in layer_gemm_shapes(MODEL, 1).items():
        written = pd.read_csv(tables_dir / "gemm.csv")
        written = written[(written["n"] == n) & (written["k"] == k)]
        measured = written.sort_values("m")["latency_ms"].to_numpy() * 1e-3
        got = np.array([est.gemm_time(op, m) for m in MS])
        assert np.allclose(got, monotone(measured), rtol=1e-12)
        exact = np.isclose(got, measured, rtol=1e-12)
        assert exact.sum() >= len(MS) - 1  # all but the noisy 16-token point
        dense = np.array([est.gemm_time(op, m) for m in range(1, 6000, 7)])
        assert np.all(np.diff(dense) >= 0)
    # attention: exact at measured (batch, length); the cached-prefix rows are not read
    ctx = pd.read_csv(tables_dir / "context_attention.csv").query("cached_len == 0")
    for row in ctx.itertuples():
        b, s = row.batch_size, row.prompt_len
        pairs = b * s * (s + 1) / 2
        got = est._prefill_attn(b * s, b, pairs, b * s)
        assert got == pytest.approx(row.latency_ms * 1e-3, rel=0.003)  # key quantised to 0.2%
    gen = pd.read_csv(tables_dir / "generation_attention.csv")
    for row in gen.itertuples():
        got = est.decode_attention_time(
            BatchShape(num_decodes=row.batch_size, decode_kv_tokens=row.batch_size * row.kv_len)
        )
        assert got == pytest.approx(row.latency_ms * 1e-3, rel=0.003)


def _chunk_batch(b: int, q: int, cached: int) -> BatchShape:
    return BatchShape(num_prefill_tokens=b * q, num_prefills=b,
                      prefill_attn_pairs=b * q * (cached + (q + 1) / 2),
                      prefill_kv_tokens=b * (cached + q))  # fmt: skip


def test_chunks_after_a_cached_prefix_are_read_from_their_own_rows(tmp_path: Path):
    tables = _tables()
    ctx = tables["context_attention"]
    ctx = ctx[ctx["cached_len"] == 0]
    head = ctx.iloc[0][["num_heads", "num_kv_heads", "head_dim", "kv_dtype"]].to_dict()

    def chunk_ms(q: int, cached: int) -> float:  # a chunk reads its KV once per query tile
        return 1e-3 * (5 + q * (cached + q) / 4e4)

    rows = [{**head, "batch_size": 1, "prompt_len": q, "cached_len": c,
             "latency_ms": chunk_ms(q, c)}
            for q in (128, 512) for c in (0, 1024, 8192)]  # fmt: skip
    tables["context_attention"] = pd.concat([ctx, pd.DataFrame(rows)], ignore_index=True)
    tables["context_attention"] = tables["context_attention"].drop_duplicates(
        ["batch_size", "prompt_len", "cached_len"], keep="last"
    )
    write_op_tables(tmp_path, _meta(), tables)
    est = make_estimator("profiled", MODEL, load_catalog().get("h100-sxm"), op_tables=tmp_path)
    for q in (128, 512):
        for c in (1024, 8192):  # exact at the measured chunks (cache key to 0.2%)
            got = est.prefill_attention_time(_chunk_batch(1, q, c))
            assert got == pytest.approx(chunk_ms(q, c) * 1e-3, rel=0.003)
    # between two measured chunk lengths: log-linear in the chunk length, at the same KV
    mid = est.prefill_attention_time(_chunk_batch(1, 256, 4096 - 256))
    lo = est.prefill_attention_time(_chunk_batch(1, 128, 4096 - 128))
    hi = est.prefill_attention_time(_chunk_batch(1, 512, 4096 - 512))
    assert mid == pytest.approx(math.sqrt(lo * hi), rel=0.01)
    # a whole prompt still reads the prompt rows
    whole = est.prefill_attention_time(_chunk_batch(1, 512, 0))
    assert whole == pytest.approx(chunk_ms(512, 0) * 1e-3, rel=0.003)
    # the equal-pairs rule it replaces prices a short chunk after a long prefix as a long
    # prompt: far slower than the measured chunk
    pairs_rule = est._ctx(1, 0.5 * (math.sqrt(1 + 8 * 128 * (8192 + 64.5)) - 1))
    assert pairs_rule > 1.5 * chunk_ms(128, 8192) * 1e-3


def test_allreduce_is_the_fastest_implementation_in_16_bit_elements(tmp_path: Path):
    out = tmp_path / "t"
    tables = _tables(tp=2)
    ar = tables["allreduce"]
    ar.loc[ar["implementation"] == "custom", "latency_ms"] *= 0.5  # custom is faster
    write_op_tables(out, _meta(), tables)
    est = make_estimator("profiled", MODEL, load_catalog().get("h100-sxm"), tp=2, op_tables=out)
    assert "all_reduce" not in est.fallbacks
    for nbytes in (1 << 12, 1 << 20, 1 << 26):
        expected = 0.5 * (0.01 + nbytes / 2e8) * 1e-3
        # the writer keeps 6 significant digits
        assert est.all_reduce_time(float(nbytes)) == pytest.approx(expected, rel=1e-5)


def test_shapes_measured_on_other_token_grids_are_all_kept(tmp_path: Path):
    tables = _tables()
    gemm = tables["gemm"]
    short = gemm[(gemm["op"] == "attn_pre_proj") & (gemm["m"] <= 256)]
    tables["gemm"] = pd.concat([gemm[gemm["op"] != "attn_pre_proj"], short])
    write_op_tables(tmp_path / "t", _meta(), tables)
    est = make_estimator(
        "profiled", MODEL, load_catalog().get("h100-sxm"), op_tables=tmp_path / "t"
    )
    assert "attn_pre_proj" not in est.fallbacks
    t256 = est.gemm_time("attn_pre_proj", 256)
    assert est.gemm_time("attn_pre_proj", 1024) == pytest.approx(4 * t256)  # linear beyond


def test_tables_of_another_gpu_or_precision_are_refused(tables_dir: Path):
    cat = load_catalog()
    with pytest.raises(ProfiledDataMissing, match="measured on 'h100-sxm', not 'a100-80gb'"):
        make_estimator("profiled", MODEL, cat.get("a100-80gb"), op_tables=tables_dir)
    with pytest.raises(ProfiledDataMissing, match=r"no fp8 GEMM rows .*measured there: bf16"):
        make_estimator("profiled", MODEL, cat.get("h100-sxm"), precision="fp8",
                       op_tables=tables_dir)  # fmt: skip
    with pytest.raises(ValueError, match="not 'roofline'"):
        make_estimator("roofline", MODEL, cat.get("h100-sxm"), op_tables=tables_dir)


def test_tables_without_a_catalog_sku_serve_any_sku_and_say_so(tmp_path: Path):
    write_op_tables(tmp_path / "t", _meta(sku=None), _tables())
    est = make_estimator("profiled", MODEL, load_catalog().get("l40s"), op_tables=tmp_path / "t")
    assert "name no catalog GPU" in est.describe() and "l40s" in est.describe()


@pytest.mark.parametrize(
    ("file", "edit", "message"),
    [
        ("gemm.csv", lambda df: df.drop(columns=["k"]), r"gemm.csv: missing field 'k'"),
        ("gemm.csv", lambda df: df.assign(latency_ms=df["latency_ms"].where(df.index != 2, -1)),
         r"gemm.csv: field 'latency_ms' row 3: .* is not a positive number"),
        ("gemm.csv", lambda df: df.assign(dtype="int4"),
         r"gemm.csv: field 'dtype' row 1: 'int4' is not one of bf16, fp16, fp8"),
        ("gemm.csv", lambda df: df.assign(m=df["m"].astype(float) + 0.5),
         r"gemm.csv: field 'm' row 1: .* is not a positive integer"),
        ("context_attention.csv", lambda df: df.assign(cached_len=-1),
         r"context_attention.csv: field 'cached_len' row 1: .* is not a non-negative integer"),
        ("generation_attention.csv", lambda df: df.assign(kv_len="long"),
         r"generation_attention.csv: field 'kv_len' row 1: 'long' is not a positive integer"),
        ("allreduce.csv", lambda df: df.iloc[0:0],
         r"allreduce.csv: no rows"),
        ("moe.csv", lambda df: df.assign(moe_ep=0),
         r"moe.csv: field 'moe_ep' row 1: 0 is not a positive integer"),
    ],
)  # fmt: skip
def test_malformed_table_names_file_and_field(tables_dir: Path, file, edit, message):
    path = tables_dir / file
    edit(pd.read_csv(path)).to_csv(path, index=False)
    with pytest.raises(OpTablesError, match=message):
        load_op_tables(tables_dir)


def test_malformed_meta_or_directory_names_it(tables_dir: Path, tmp_path: Path):
    meta = tables_dir / "meta.yaml"
    meta.write_text(meta.read_text().replace("device: cuda", "device: tpu"))
    with pytest.raises(OpTablesError, match=r"meta.yaml: field 'device'.*'tpu'"):
        load_op_tables(tables_dir)
    meta.write_text("- just\n- a list\n")
    with pytest.raises(OpTablesError, match=r"meta.yaml: must hold a mapping"):
        load_op_tables(tables_dir)
    meta.unlink()
    with pytest.raises(OpTablesError, match=r"meta.yaml: no such file"):
        load_op_tables(tables_dir)
    with pytest.raises(OpTablesError, match=r"op tables .*nowhere: does not exist"):
        load_op_tables(tmp_path / "nowhere")
    write_op_tables(tmp_path / "no-gemm", _meta(), {"allreduce": _tables()["allreduce"]})
    with pytest.raises(OpTablesError, match=r"gemm.csv: no such file"):
        load_op_tables(tmp_path / "no-gemm")


def test_moe_rows_answer_for_the_engines_expert_precisions_by_their_fastest_kernel(
    tables_dir: Path,
):
    tables = load_op_tables(tables_dir)
    # block-scaled FP8 experts are read from the fp8 rows, the faster kernel at each size
    label, curve, why = tables.moe_curve(MOE_SHAPE, ("fp8_block", "fp8"))
    assert label.endswith("moe.csv") and not why
    assert curve(256) == pytest.approx((0.05 + 256e-4) * 1e-3)
    _, curve, _ = tables.moe_curve(MOE_SHAPE, ("bfloat16",))
    assert curve(256) == pytest.approx(1.5 * (0.05 + 256e-4) * 1e-3)
    # another split, or a precision the table lacks: None, and the shape asked
    _, none, why = tables.moe_curve((*MOE_SHAPE[:4], 4, 1), ("fp8",))
    assert none is None and "no fp8 rows for hidden 2048, expert width 768" in why
    assert "MoE TP 4, EP 1" in why
    assert tables.moe_curve(MOE_SHAPE, ("nvfp4",))[1] is None
