"""Multi-head latent attention (MLA, DeepSeek-V2/V3): its projections, its compressed KV
cache, and its prefill and decode attention, priced by the roofline.

An MLA layer projects the hidden state down to a query latent (``q_lora_rank``) and a KV
latent (``kv_lora_rank``) plus one rotary key (``qk_rope_head_dim``) shared by every head;
the KV cache holds only that latent and rotary key: ``kv_lora_rank + qk_rope_head_dim``
elements a token and layer (DeepSeek-V3: 576, against 2 x 128 heads x 128 for the same heads
with standard attention). Under tensor parallelism the heads are split, but the down-
projections and the latent KV are *replicated* on every TP rank, as vLLM and SGLang run MLA
without attention data parallelism (estimators/_memory.py; attention DP is what spreads the
latent cache instead).

Engines run the two phases differently, and so are they priced (per GPU, ``H`` = heads / TP):

* prefill, non-absorbed: ``kv_b_proj`` up-projects every KV token the chunks read (their
  context included) to ``H`` heads of keys (``qk_nope``) and values (``v_head_dim``), then
  FlashAttention runs over ``H`` heads with ``qk_nope + qk_rope`` query-key dimensions and
  ``v_head_dim`` value dimensions: ``2 H (qk + v)`` FLOPs a query-key pair, the roofline's
  prefill attention form with those widths.
* decode, absorbed: ``W_UK`` is folded into the query (a batched GEMM of ``H`` heads,
  ``qk_nope -> kv_lora_rank`` per decode token) and ``W_UV`` into the output (``kv_lora_rank
  -> v_head_dim``); the attention then reads the latent once per KV token for all heads
  (``(kv_lora_rank + qk_rope) x kv_bytes``) and computes ``2 H (2 kv_lora_rank + qk_rope)``
  FLOPs per KV token: a KV-cache read like any decode, 7x smaller than standard attention's.
  The two absorbed BMMs keep 16-bit weights (engines dequantise ``kv_b_proj`` to build them).

Every efficiency and overhead is the roofline's (estimators/data/roofline.yaml), plus one
fixed cost: a prefill layer run eagerly (SGLang launches every kernel of a prefill from the
host, while decode replays CUDA graphs) costs ``prefill_layer_us`` more per iteration that
holds a prefill, by engine and GPU in estimators/data/mla_eager.yaml, derived from
aiconfigurator's MLA module tables by benchmarks/fit_mla_eager.py (context module minus
generation module at one sequence of the shortest length: ~0.5-0.6 ms for SGLang, under
10 us for TensorRT-LLM and vLLM).  Engines and GPUs not listed there, and deployments
without an engine profile, add none.  The profiled backend reads the measured ``mla`` and
``mla_bmm`` tables instead of this roofline (estimators/_profiled_mla.py).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any

import yaml

from estimators._roofline import (
    _ACT_BYTES,
    RooflineEstimator,
    TokenOp,
    _coeffs,
    _token_op_time,
)
from estimators._types import ModelArchitecture
from estimators._weight_precision import gemm_kind

__all__ = [
    "MlaRooflineEstimator",
    "MlaShape",
    "mla_eager_fold",
    "mla_eager_table",
    "mla_prefill_eager_seconds",
]

_MLA_PROJECTIONS = frozenset({"attn_pre_proj", "attn_rope", "attn_post_proj"})


@dataclass(frozen=True, slots=True)
class MlaShape:
    """One GPU's share of an MLA layer: its heads and the latent widths."""

    heads: int  # attention heads on this GPU (heads / TP)
    hidden: int
    q_lora: int  # 0: queries projected from the hidden state directly
    kv_lora: int
    nope: int
    rope: int
    v: int

    @classmethod
    def of(cls, model: ModelArchitecture, tp: int) -> MlaShape:
        return cls(
            heads=model.num_attention_heads // tp,
            hidden=model.hidden_size,
            q_lora=model.q_lora_rank,
            kv_lora=model.kv_lora_rank,
            nope=model.qk_nope_head_dim,
            rope=model.qk_rope_head_dim,
            v=model.v_head_dim,
        )

    @property
    def qk(self) -> int:
        return self.nope + self.rope

    @property
    def latent(self) -> int:
        """KV-cache elements of one token in one layer (on every TP rank)."""
        return self.kv_lora + self.rope

    @property
    def prefill_flops_per_pair(self) -> float:
        """Non-absorbed attention: QK over nope + rope, PV over v_head_dim, every head."""
        return 2.0 * self.heads * (self.qk + self.v)

    @property
    def decode_flops_per_kv(self) -> float:
        """Absorbed attention: QK over the latent and rotary key, PV over the latent."""
        return 2.0 * self.heads * (2 * self.kv_lora + self.rope)


@functools.cache
def _eager_table() -> dict[str, dict[str, float]]:
    text = resources.files("estimators").joinpath("data/mla_eager.yaml").read_text("utf-8")
    data = (yaml.safe_load(text) or {}).get("prefill_layer_us") or {}
    if not isinstance(data, dict):
        raise ValueError("estimators/data/mla_eager.yaml: prefill_layer_us must be a mapping")
    return data


# the table `mla_eager_table` put in place of the packaged one (None: the packaged one)
_eager_override: list[Mapping[str, Mapping[str, float]] | None] = [None]


@contextlib.contextmanager
def mla_eager_table(data: Mapping[str, Mapping[str, float]] | None) -> Iterator[None]:
    """Estimators built inside the block read the eager prefill cost from `data`
    ({engine: {sku id: us}}) instead of estimators/data/mla_eager.yaml; None keeps it."""
    before = _eager_override[0]
    _eager_override[0] = data
    try:
        yield
    finally:
        _eager_override[0] = before


def mla_eager_fold(exclude_sku: str | None = None, exclude_mla: bool = False) -> dict:
    """The eager-cost table fitted without some of its tables: without GPU `exclude_sku`'s
    (each engine's value for it becomes the mean of its other GPUs'), or without any MLA
    module table (`exclude_mla`: they all time DeepSeek-V3's shape; no value is left)."""
    if exclude_mla:
        return {}
    out: dict[str, dict[str, float]] = {}
    for engine, by_sku in _eager_table().items():
        rest = {s: float(v) for s, v in by_sku.items() if s != exclude_sku}
        if exclude_sku is not None and rest:
            rest[exclude_sku] = sum(rest.values()) / len(rest)
        out[engine] = rest
    return out


def mla_prefill_eager_seconds(engine: str | None, sku_id: str) -> float:
    """Seconds an eagerly run MLA prefill layer costs beyond its kernels' time under
    `engine` on `sku_id` (0 where not measured; see the module docstring)."""
    if not engine:
        return 0.0
    table = _eager_override[0]
    if table is None:
        table = _eager_table()
    return float((table.get(engine) or {}).get(sku_id, 0.0)) * 1e-6


def _matmul(name: str, n: int, k: int, weight_bytes: float, kind: str = "matmul") -> TokenOp:
    a = _ACT_BYTES
    return TokenOp(name, kind, 2.0 * n * k, float(n * k * weight_bytes), float((n + k) * a))


class MlaRooflineEstimator(RooflineEstimator):
    """The roofline with MLA's projections and attention (see module docstring) in place
    of standard attention's; everything else (MLP or experts, communication, host work) is
    the roofline's."""

    def __init__(self, model: ModelArchitecture, *args: Any, **kwargs: Any) -> None:
        super().__init__(model, *args, **kwargs)
        if not model.is_mla:
            raise ValueError(f"{model.name} has no multi-head latent attention")
        s = self.mla = MlaShape.of(model, self.tp)
        # the latent projections and the output projection each as the checkpoint keeps them
        # (NVFP4 checkpoints keep the latent projections in 16 bits)
        wp = self.weights
        w = model.matmul_weight_bytes(wp.attention_out)
        wl = model.matmul_weight_bytes(wp.attention)
        kl = gemm_kind(wp.attention, self.precision)
        ko = gemm_kind(wp.attention_out, self.precision)
        a = _ACT_BYTES
        latents = s.q_lora + s.kv_lora
        down = (s.q_lora or s.heads * s.qk) + s.latent  # fused q_a + kv_a (q split if no q_a)
        attn_ops = [
            _matmul("attn_pre_proj", down, s.hidden, wl, kl),
            TokenOp(
                "attn_latent_norm",
                "norm",
                5.0 * latents,
                float(latents * a),
                float(2 * latents * a),
            ),
            *([_matmul("attn_q_up_proj", s.heads * s.qk, s.q_lora, wl, kl)] if s.q_lora else []),
            TokenOp(
                "attn_rope",
                "rope",
                6.0 * (s.heads + 1) * s.rope,
                0.0,
                float(2 * (s.heads + 1) * s.rope * a),
            ),
            _matmul("attn_post_proj", s.hidden, s.heads * s.v, w, ko),
        ]
        ops = list(self.layer_ops)
        at = next(i for i, op in enumerate(ops) if op.name in _MLA_PROJECTIONS)
        ops = [op for op in ops if op.name not in _MLA_PROJECTIONS]
        self.layer_ops = tuple(ops[:at] + attn_ops + ops[at:])
        self.operator_counts = {
            **{op.name: op.count for op in self.layer_ops},
            "all_reduce": self.operator_counts["all_reduce"],
        }
        self._layer_cache.clear()
        self._cache.clear()

        c = self.constants
        # prefill: kv_b_proj over the KV tokens read, then attention over up-projected heads
        self._kv_up_op = _matmul("attn_kv_up_proj", s.heads * (s.nope + s.v), s.kv_lora, wl, kl)
        self._pf_kv_row = float(s.heads * (s.qk + s.v) * a)  # up-projected K and V of a token
        self._pf_q_row2 = float(s.heads * (s.qk + s.v) * a)  # query in, output out
        self._pf_sec_per_pair = s.prefill_flops_per_pair / (
            self.attn_peak * c.attention_prefill_eff_max
        )
        # decode: the absorbed BMMs (16-bit weights) around attention over the latent
        self._k16 = _coeffs(c, self.attn_peak, self.hbm_bw)
        self._absorb_ops = (
            _matmul("attn_absorb_uk", s.kv_lora, s.nope, a),  # per head: q_nope -> latent
            _matmul("attn_absorb_uv", s.v, s.kv_lora, a),  # per head: latent -> v
        )
        self._absorb_heads = s.heads
        self._kv_row = float(s.latent * self.kv_precision.bytes)  # the latent cache read
        self._q_row2 = float(s.heads * (s.latent + s.kv_lora) * a)
        self._dec_sec_per_kv = s.decode_flops_per_kv / (
            self.attn_peak * c.attention_prefill_eff_max
        )
        self._attn_flops_per_pair = s.prefill_flops_per_pair
        engine = self.engine.name if self.engine is not None else None
        self._mla_eager = mla_prefill_eager_seconds(engine, self.sku.id)

    def _prefill_attn(self, npt: int, npf: int, pairs: float, kv_tokens: int) -> float:
        """Non-absorbed prefill: up-project the KV tokens read, then attention over heads."""
        up = _token_op_time(self._kv_up_op, float(kv_tokens), self._k)
        diag = 0.5 * (npt * npt / npf + npt)
        if diag > pairs:
            diag = pairs
        comp = self._pf_sec_per_pair * (
            pairs + self._pf_causal_m1 * diag + self._pf_ctx * (kv_tokens - npt) + self._pf_q * npt
        )
        mem = (kv_tokens * self._pf_kv_row + npt * self._pf_q_row2) * self._attn_sec_per_byte
        return up + (comp if comp > mem else mem) + self._attn_ovh + self._mla_eager

    def _decode_attn(self, nd: int, dkv: int) -> float:
        """Absorbed decode: the W_UK and W_UV BMMs of `nd` tokens and the latent read."""
        m = float(nd)
        bmm = 0.0
        for op in self._absorb_ops:  # one kernel over the heads: weights H x, rows H x
            flops = op.flops_per_token * self._absorb_heads * (m + self._k16.m_half)
            nbytes = self._absorb_heads * (op.fixed_bytes + op.bytes_per_token * m)
            comp = flops * self._k16.sec_per_flop
            mem = nbytes * self._k16.sec_per_byte["matmul"]
            bmm += (comp if comp > mem else mem) + self._k16.overhead["matmul"]
        mem = ((dkv + self._dec_seq_kv * nd) * self._kv_row + nd * self._q_row2) * (
            self._attn_sec_per_byte
        )
        comp = self._dec_sec_per_kv * dkv
        return bmm + (comp if comp > mem else mem) + self._attn_ovh

    def describe(self) -> str:
        s = self.mla
        return super().describe() + (
            f"\n  MLA: {s.heads} heads per GPU, KV latent {s.kv_lora} + rope {s.rope} "
            f"({self._kv_row:g} B a token and layer, replicated on every TP rank), q latent "
            f"{s.q_lora or '-'}; prefill non-absorbed, decode absorbed"
        )
