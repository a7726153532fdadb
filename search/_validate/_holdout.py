"""Leave-one-GPU-out and leave-one-model-out folds of the roofline's engine layers.

The roofline's constants for vLLM, SGLang and TensorRT-LLM are fitted to aiconfigurator's
operator tables (`estimators._aic_calibration`), never to the end-to-end points
`llmcap validate` scores.  A fold refits them without some of those tables and scores
the points the excluded data speaks for:

* GPU X: no GEMM or attention table of X (X's engine-layer entries are dropped; its
  family's and the engine's defaults become geometric means of the other GPUs' fits, so X
  uses what the rest gives), and the engine profiles' all-reduce term of X's family is
  refitted to the other GPUs of that family (or, with none left, dropped: the roofline's
  NCCL fit to Vidur's tables applies), and likewise their MoE all-to-all lines (with none
  left, the roofline's alltoall constants apply).  Vidur's 2023 tables behind the base layers (the
  elementwise, point-to-point and CPU constants; A100/H100/A40) are not aiconfigurator's
  and stay.
* model M: every GPU and engine refitted without the GEMM rows at M's TP-sharded (n, k)
  shapes and the attention rows at its per-GPU head shapes (TP 1, 2, 4, 8).  Models that
  share a head shape (Llama-3.1-70B and Qwen3-32B) lose those rows together.

Fits are cached on disk (`estimators._aic_calibration`), so a fold costs seconds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from estimators import AllReduceCost, AllToAllCost
from search._validate._aic_silicon import ValidationPoint

__all__ = ["HOLD_OUT_KINDS", "HoldOutFold", "gpu_fold", "model_fold", "parse_hold_out"]

HOLD_OUT_KINDS = ("gpu", "model")


@dataclass(frozen=True, slots=True)
class HoldOutFold:
    """What one fold leaves out and the constants it simulates with."""

    kind: str  # gpu | model
    name: str  # the catalog SKU id or the built-in model name held out
    table: dict[str, Any]  # roofline.yaml's form, engine layers refitted without it
    # engine -> {family: its all-reduce refitted, or None: dropped}; only what changes
    allreduce: dict[str, dict[str, AllReduceCost | None]] = field(default_factory=dict)
    # engine -> {family: its MoE all-to-all line refitted, or None: dropped}; likewise
    all_to_all: dict[str, dict[str, AllToAllCost | None]] = field(default_factory=dict)
    excluded: str = ""
    # the MLA eager prefill cost table refitted without it ({engine: {sku: us}}; None: as
    # packaged, estimators/_mla.py)
    mla_eager: dict[str, dict[str, float]] | None = None

    def selects(self, point: ValidationPoint) -> bool:
        return point.sku == self.name if self.kind == "gpu" else point.model == self.name


def parse_hold_out(text: str) -> tuple[str, ...]:
    """``gpu,model`` -> ('gpu', 'model'); ValueError names what is allowed."""
    kinds = tuple(dict.fromkeys(k.strip().lower() for k in text.split(",") if k.strip()))
    bad = [k for k in kinds if k not in HOLD_OUT_KINDS]
    if bad or not kinds:
        raise ValueError(
            f"--hold-out {text!r}: expected a comma-separated list of {', '.join(HOLD_OUT_KINDS)}"
        )
    return kinds


def _table_with(fits: Sequence[Any]) -> dict[str, Any]:
    from estimators import engine_layer, packaged_roofline_table

    table = {k: v for k, v in packaged_roofline_table().items() if k != "engines"}
    table["engines"] = engine_layer(fits)
    return table


def gpu_fold(sku_id: str) -> HoldOutFold:
    """The fold without GPU `sku_id`'s tables (see the module docstring)."""
    from estimators import (
        A2A_SKUS,
        FIT_ENGINES,
        FIT_SKUS,
        all_to_all_key,
        family_lines,
        fit_all,
        fit_all_to_all,
        fit_allreduce,
        mean_all_to_all,
        mean_allreduce,
        mla_eager_fold,
    )
    from sku_catalog import load_catalog

    catalog = load_catalog()

    family = catalog.get(sku_id).family
    fits = fit_all(exclude_sku=sku_id)

    def refit(
        skus: Sequence[str],
        fit: Callable[..., Any],
        mean: Callable[..., Any],
        key: Callable[..., str] | None = None,
    ) -> tuple[list[str], dict[str, Any]]:
        """The other GPUs of the family among `skus`, and each engine's line of that
        family refitted to their tables (None: no table left; `key`: `family_lines`')."""
        kin = [s for s in skus if s != sku_id and catalog.get(s).family == family]
        lines = family_lines(kin, fit, mean, key)
        return kin, {e: {family: lines.get(e, {}).get(family)} for e in FIT_ENGINES}

    others, allreduce = refit(FIT_SKUS, fit_allreduce, mean_allreduce)
    kin, all_to_all = refit(A2A_SKUS, fit_all_to_all, mean_all_to_all, all_to_all_key)
    for lines in all_to_all.values():  # the held-out GPU's own line, where an engine has one
        lines[sku_id] = None
    kept = ", ".join(others) or "none: the roofline's NCCL fit applies"
    kept_a2a = ", ".join(kin) or "none: the roofline's alltoall constants apply"
    excluded = (
        f"GPU {sku_id}: its GEMM and attention tables (every engine), its all-reduce "
        f"tables ({family} all-reduce refitted to: {kept}), its MoE all-to-all tables "
        f"({family} all-to-all refitted to: {kept_a2a}), its MLA module tables (the "
        "eager MLA prefill cost: the engine's mean over the other GPUs)"
    )
    return HoldOutFold(
        "gpu", sku_id, _table_with(fits), allreduce, all_to_all, excluded,
        mla_eager_fold(exclude_sku=sku_id),
    )  # fmt: skip


def model_fold(model_name: str) -> HoldOutFold:
    """The fold without the rows at model `model_name`'s shapes (see the module docstring)."""
    from estimators import fit_all, load_model, mla_eager_fold, model_shapes

    model = load_model(model_name)
    fits = fit_all(exclude_model=model)
    gemms, heads = model_shapes(model)
    excluded = (
        f"model {model_name}: GEMM rows at (n, k) in {sorted(gemms)} and attention rows at "
        f"(heads, KV heads, head_dim) in {sorted(heads)}, on every GPU and engine"
        + (", and every MLA module table (all of DeepSeek-V3's shape: no eager MLA prefill "
           "cost)" if model.is_mla else "")
        + (f", and the MoE table rows of hidden {model.hidden_size}, top-"
           f"{model.num_experts_per_tok}" if model.num_experts else "")
    )  # fmt: skip
    eager = mla_eager_fold(exclude_mla=True) if model.is_mla else None
    return HoldOutFold("model", model_name, _table_with(fits), {}, {}, excluded, eager)
