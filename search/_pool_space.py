"""The disaggregated part of a search space: a prefill pool and a decode pool.

A spec asks for disaggregated deployments with ``space.mode: [aggregated,
disaggregated]`` (or ``[disaggregated]`` alone) and, optionally, a
``space.disaggregated`` block whose ``prefill`` and ``decode`` sub-spaces name each
pool's SKUs, parallelism and replica counts (the P:D ratio); an axis left out takes
the aggregated one (the spec's ``skus``, ``space.tp``, ``space.pp``,
``space.replicas``).  Every combination of a prefill pool and a decode pool within
``budget.max_gpus`` (both pools together) is a configuration.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveInt

from search._limits import Replicas
from simulator import KvLink
from sku_catalog import Catalog

AGGREGATED = "aggregated"
DISAGGREGATED = "disaggregated"
Mode = Literal["aggregated", "disaggregated"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _PoolSpace(_Strict):
    """The axes every pool has; each one left out is the aggregated space's."""

    skus: list[str] | None = Field(
        None, min_length=1, description="GPU SKUs of the pool; null: the spec's skus."
    )
    tp: list[PositiveInt] | None = Field(
        None, min_length=1, description="Tensor-parallel degrees; null: space.tp."
    )
    replicas: list[Replicas] | None = Field(
        None, min_length=1, description="Replicas of the pool (P or D of the P:D ratio); "
        "null: space.replicas.",
    )  # fmt: skip
    ep: list[PositiveInt] | None = Field(
        None, min_length=1, description="Expert-parallel degrees of the pool's replicas (a "
        "mixture of experts); null: space.ep.",
    )  # fmt: skip
    dp: list[PositiveInt] | None = Field(
        None, min_length=1, description="Attention data-parallel degrees of the pool's "
        "replicas (a mixture of experts; DP x TP GPUs a replica); null: space.dp.",
    )  # fmt: skip


class PrefillSpace(_PoolSpace):
    """The prefill pool's axes; each one left out is the aggregated space's."""

    pp: list[PositiveInt] | None = Field(
        None, min_length=1, description="Pipeline-parallel degrees; null: space.pp."
    )


class DecodeSpace(_PoolSpace):
    """The decode pool's axes (one pipeline stage); a batch cap left out is the engine's."""

    batch_size: list[PositiveInt] | None = Field(
        None, min_length=1, description="Batch caps of the decode replicas; null: the engine's."
    )
    gpu_memory_utilization: float | None = Field(
        None, gt=0.0, le=1.0,
        description="Share of GPU memory the decode servers take, where they are launched "
        "with their own; null: the spec's gpu_memory_utilization.",
    )  # fmt: skip


class DisaggregatedSpace(_Strict):
    """The prefill and decode sub-spaces and the link KV moves over between them."""

    prefill: PrefillSpace = Field(default_factory=PrefillSpace, description="Prefill pool axes.")
    decode: DecodeSpace = Field(default_factory=DecodeSpace, description="Decode pool axes.")
    kv_link: KvLink = Field(
        KvLink.AUTO,
        description="How KV moves from prefill to decode: auto (NVLink when both pools are "
        "one SKU in one node, else the network), nvlink (required: configurations that "
        "cannot are infeasible) or network.",
    )


@dataclass(frozen=True, slots=True)
class PoolAxes:
    """One pool's concrete axes, the aggregated space's filled in."""

    skus: tuple[str, ...]
    tp: tuple[int, ...]
    pp: tuple[int, ...]
    replicas: tuple[int, ...]
    batch_size: tuple[int, ...] | None = None  # None: the engine's cap
    ep: tuple[int, ...] = (1,)
    dp: tuple[int, ...] = (1,)

    @property
    def smallest_gpus(self) -> int:
        return min(self.tp) * min(self.pp) * min(self.dp) * min(self.replicas)

    @property
    def size(self) -> int:
        batches = len(self.batch_size) if self.batch_size else 1
        shapes = len(self.tp) * len(self.pp) * len(self.ep) * len(self.dp)
        return len(self.skus) * shapes * len(self.replicas) * batches


def pool_axes(
    disaggregated: DisaggregatedSpace,
    skus: list[str],
    tp: list[int],
    pp: list[int],
    replicas: list[int],
    ep: list[int],
    dp: list[int],
) -> tuple[PoolAxes, PoolAxes]:
    """(prefill, decode) axes of `disaggregated`, the aggregated ones where it has none."""
    pre, dec = disaggregated.prefill, disaggregated.decode
    prefill = PoolAxes(
        tuple(pre.skus or skus), tuple(pre.tp or tp), tuple(pre.pp or pp),
        tuple(pre.replicas or replicas), None, tuple(pre.ep or ep), tuple(pre.dp or dp),
    )  # fmt: skip
    decode = PoolAxes(
        tuple(dec.skus or skus), tuple(dec.tp or tp), (1,), tuple(dec.replicas or replicas),
        tuple(dec.batch_size) if dec.batch_size else None, tuple(dec.ep or ep),
        tuple(dec.dp or dp),
    )  # fmt: skip
    return prefill, decode


def dp_tp_text(dp: int, tp: int, joiner: str = " x ") -> str:
    """A replica's attention DP and TP as text, DP left out at 1: ``DP2 x TP4``, ``TP8``
    (`joiner` between the two: " x " in messages, " " in labels, "x" in results tables)."""
    return (f"DP{dp}{joiner}" if dp > 1 else "") + f"TP{tp}"


@dataclass(frozen=True, slots=True)
class DecodePoint:
    """The decode pool of a disaggregated point: `replicas` replicas of `dp` x `tp` GPUs of
    `sku` (attention DP and EP of a mixture of experts as `ConfigPoint.dp` / `.ep`), each
    batching at most `batch_size` sequences, KV arriving over `link`."""

    sku: str
    tp: int
    replicas: int
    batch_size: int
    link: str = KvLink.AUTO.value
    ep: int = 1
    dp: int = 1

    @property
    def gpus_per_replica(self) -> int:
        return self.tp * self.dp

    @property
    def num_gpus(self) -> int:
        return self.gpus_per_replica * self.replicas

    def label(self) -> str:
        parts = [self.sku, dp_tp_text(self.dp, self.tp, " ")]
        if self.ep > 1:
            parts.append(f"EP{self.ep}")
        parts += [f"x{self.replicas}", f"b{self.batch_size}"]
        if self.link != KvLink.AUTO.value:
            parts.append(f"kv over {self.link}")
        return " ".join(parts)


def gpu_cost_per_hour(params: dict, num_gpus: int, catalog: Catalog) -> float:
    """Dollars per hour of a stored configuration's `num_gpus` GPUs, each pool at its own
    SKU's price in `catalog` (`params` as `search._space.ConfigPoint.as_dict` writes them;
    without a ``decode`` entry every GPU is the configuration's ``sku``)."""
    price = catalog.get(params["sku"]).price_per_gpu_hour
    if params.get("decode") is None:
        return num_gpus * price
    decode = DecodePoint(**params["decode"])
    decode_price = catalog.get(decode.sku).price_per_gpu_hour
    return (num_gpus - decode.num_gpus) * price + decode.num_gpus * decode_price
