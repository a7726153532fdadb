"""Model and GPU records built by hand, so estimator tests do not depend on the catalogs."""

from __future__ import annotations

from estimators._types import ModelArchitecture
from sku_catalog._types import GpuSku, LinkKind, NodeShape


def make_sku(
    sku_id: str = "a100-80gb",
    arch: str = "ampere",
    mem_gb: float = 80.0,
    bw_tbps: float = 2.039,
    fp16: float = 312,
    fp8: float | None = None,
    link_gbps: float = 300.0,
    nodes: tuple[NodeShape, ...] | None = None,
) -> GpuSku:
    return GpuSku(
        id=sku_id,
        name=sku_id.upper(),
        memory_gb=mem_gb,
        memory_bandwidth_tbps=bw_tbps,
        fp16_tflops=fp16,
        fp8_tflops=fp8,
        nodes=nodes or (NodeShape(8, LinkKind.NVSWITCH, link_gbps, 25.0),),
        price_per_gpu_hour=1.0,
        price_source="test",
        price_date="2025-01-01",
        power_w=400,
        architecture=arch,
    )


LLAMA7B = ModelArchitecture(
    name="meta-llama/Llama-2-7b-hf",
    num_layers=32,
    hidden_size=4096,
    num_attention_heads=32,
    num_key_value_heads=32,
    intermediate_size=11008,
    vocab_size=32000,
)
LLAMA70B = ModelArchitecture(
    name="meta-llama/Llama-2-70b-hf",
    num_layers=80,
    hidden_size=8192,
    num_attention_heads=64,
    num_key_value_heads=8,
    intermediate_size=28672,
    vocab_size=32000,
)
