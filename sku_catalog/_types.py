"""Typed records of the GPU catalog: SKUs, node shapes and interconnects, prices."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class LinkKind(StrEnum):
    """How the GPUs inside one node talk to each other."""

    NVSWITCH = "nvswitch"  # all-to-all at full bandwidth (DGX/HGX)
    NVLINK_PAIRWISE = "nvlink-pairwise"  # NVLink bridges between pairs, PCIe beyond the pair
    PCIE = "pcie"  # PCIe only


@dataclass(frozen=True, slots=True)
class NodeShape:
    """One way the SKU is sold as a machine."""

    gpus_per_node: int
    intra_node_link: LinkKind
    intra_node_bandwidth_gbps: float  # GB/s, unidirectional, per GPU, inside the node
    inter_node_bandwidth_gbps: float  # GB/s, unidirectional, per GPU, between nodes


@dataclass(frozen=True, slots=True)
class GpuSku:
    """A GPU as a deployment target: capability, node shapes and price."""

    id: str  # short lower-case id used on the command line, e.g. "a100-80gb"
    name: str  # display name, e.g. "A100-80GB-SXM"
    memory_gb: float  # HBM capacity, GB (1e9 bytes)
    memory_bandwidth_tbps: float  # HBM bandwidth, TB/s (1e12 bytes/s)
    fp16_tflops: float  # dense FP16/BF16 tensor-core peak, TFLOP/s
    fp8_tflops: float | None  # dense FP8 tensor-core peak, None where the chip has no FP8
    nodes: tuple[NodeShape, ...]  # first is the default shape
    price_per_gpu_hour: float  # on-demand USD per GPU-hour
    price_source: str
    price_date: str  # ISO date the price was read
    power_w: float  # board power (TDP), W
    architecture: str = ""  # e.g. "ampere", "hopper"
    fp4_tflops: float | None = None  # dense FP4 (NVFP4) tensor-core peak, None: no FP4

    @property
    def memory_bytes(self) -> float:
        return self.memory_gb * 1e9

    @property
    def memory_bandwidth_bytes(self) -> float:
        return self.memory_bandwidth_tbps * 1e12

    @property
    def default_node(self) -> NodeShape:
        return self.nodes[0]

    @property
    def family(self) -> str:
        """The architecture in lower case ("" when unknown): the key of the per-family
        entries of the engine profiles and the roofline constants."""
        return (self.architecture or "").lower()

    def peak_flops(self, fp8: bool = False, fp4: bool = False) -> float:
        """Dense tensor-core peak in FLOP/s for the compute precision."""
        if fp4 and self.fp4_tflops is not None:
            return self.fp4_tflops * 1e12
        if (fp8 or fp4) and self.fp8_tflops is not None:
            return self.fp8_tflops * 1e12
        return self.fp16_tflops * 1e12

