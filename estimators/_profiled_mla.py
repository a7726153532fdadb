"""The profiled backend for models with multi-head latent attention (MLA): MLA attention
and the absorbed decode BMMs from aiconfigurator-core's measured MLA tables
(estimators/_aic_moe_mla.py), the projections from the GEMM table, the MLA roofline
(estimators/_mla.py) where a table has no data."""

from __future__ import annotations

from typing import Any

from estimators import _aic_tables as aic
from estimators._aic_moe_mla import mla_bmm_curve, mla_grid
from estimators._curves import Curve, Grid2D
from estimators._mla import MlaRooflineEstimator
from estimators._profiled import AicOpTables, ProfiledEstimator
from estimators._roofline import _token_op_time
from estimators._types import ModelArchitecture, Precision

__all__ = ["MlaProfiledEstimator"]


class MlaProfiledEstimator(ProfiledEstimator, MlaRooflineEstimator):
    """The profiled backend for a model with multi-head latent attention: MLA attention
    and the absorbed BMMs from the measured MLA tables, its projections from the GEMM
    table, the MLA roofline (estimators/_mla.py) where a table has no data."""

    def __init__(self, model: ModelArchitecture, *args: Any, **kwargs: Any) -> None:
        super().__init__(model, *args, **kwargs)
        s = self.mla
        self._mla_ctx: Grid2D | None = None
        self._mla_gen: Grid2D | None = None
        self._bmm: list[Curve] = []
        self._kv_up_curve: Curve | None = None
        source = self.op_tables
        if not isinstance(source, AicOpTables):
            self.fallbacks["attn_mla"] = f"{source.label} hold no MLA table"
            return
        kv_dtype = "fp8" if self.kv_precision is Precision.FP8 else "bfloat16"
        sysname, eng, ver = source.system, source.engine, source.version
        for phase in ("context", "generation"):
            try:
                label, grid = mla_grid(sysname, eng, ver, phase, s.heads, kv_dtype)
            except aic.AicDataMissing as exc:
                self.fallbacks[f"attn_mla_{phase}"] = str(exc)
                continue
            if grid is None:
                self.fallbacks[f"attn_mla_{phase}"] = (
                    f"no {phase} MLA rows for {s.heads} heads, KV {kv_dtype} in {label}"
                )
                continue
            self.tables.append(label)
            if phase == "context":
                self._mla_ctx = grid
            else:
                self._mla_gen = grid
        if self._mla_gen is not None:
            for op_name in ("mla_gen_pre", "mla_gen_post"):
                try:
                    label, curve = mla_bmm_curve(sysname, eng, ver, op_name, s.heads)
                except aic.AicDataMissing as exc:
                    self.fallbacks["attn_absorb"] = str(exc)
                    self._bmm = []
                    break
                if curve is None:
                    self.fallbacks["attn_absorb"] = f"no {op_name} rows for {s.heads} heads"
                    self._bmm = []
                    break
                self._bmm.append(curve)
            else:
                self.tables.append(label)
        self._kv_up_curve = self.table_gemm_curve(s.heads * (s.nope + s.v), s.kv_lora)
        # the profiled backend's attention hooks read `_ctx` and `_gen` (None: the roofline)
        self._ctx = self._mla_ctx
        if self._mla_gen is not None and self._bmm:
            self._gen = _AbsorbedDecode(self._mla_gen, self._bmm)  # type: ignore[assignment]
        self._attn_cache.clear()

    def _prefill_attn(self, npt: int, npf: int, pairs: float, kv_tokens: int) -> float:
        """The context MLA table (the profiled backend's `_ctx` lookup), kv_b_proj's
        up-projection of the KV tokens read (the GEMM table) and the engine's eager
        prefill cost (estimators/_mla.py)."""
        t = super()._prefill_attn(npt, npf, pairs, kv_tokens)  # the MLA roofline without _ctx
        if self._ctx is None:
            return t
        if self._kv_up_curve is not None:
            return t + self._kv_up_curve(float(kv_tokens)) + self._mla_eager
        return t + _token_op_time(self._kv_up_op, float(kv_tokens), self._k) + self._mla_eager


class _AbsorbedDecode:
    """Seconds of one layer's MLA decode over (sequences, KV length): the generation
    table plus the two absorbed BMMs at one token a sequence."""

    __slots__ = ("bmms", "grid")

    def __init__(self, grid: Grid2D, bmms: list[Curve]) -> None:
        self.grid, self.bmms = grid, bmms

    def __call__(self, b: float, s: float) -> float:
        return self.grid(b, s) + sum(c(float(b)) for c in self.bmms)
