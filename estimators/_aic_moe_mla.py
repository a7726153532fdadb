"""Curves of mixture-of-experts and MLA layers from aiconfigurator-core's measured tables.

The profiled backend (estimators/_profiled.py) reads these where the deployment's system,
engine and version have them (the nearest version, as for every other table), and the
roofline otherwise (named in the estimator's ``fallbacks``):

* **routed experts** (``moe/<engine>/<ver>/moe_perf``): one curve in the tokens entering
  the layer (every attention-DP rank's: the experts take them all) at this deployment's
  hidden size, expert width, top-k, expert count, MoE TP (``tp x dp / ep``), EP and expert
  precision; the fastest measured kernel at each token count.  It replaces the roofline's
  grouped GEMMs and activation; the router GEMM, the all-to-all and FLOP/byte counts stay
  the roofline's.  The routing distribution is `DEFAULT_DISTRIBUTION` (see there).  Where
  the engine's named kernel (`EngineProfile.moe_kernels`) is measured only at other
  models' experts, its time there is scaled to this shape (`scaled_to_shape`).  Where the
  shape's EP rows do not time an EP rank's share of the work (`EP_ROWS_SUSPECT`), its EP-1
  rows are scaled by the kernel's EP scaling measured at the nearest shape whose EP rows
  do (`_ep_from_ep1`).
* **MLA attention** (``mla/<engine>/<ver>/{context,generation}_mla_perf``): the kernel
  alone, over (sequences, prompt length) and (sequences, cached tokens + 1) at this GPU's
  heads and KV precision; ``kv_b_proj``'s up-projection of the KV tokens a prefill reads
  and the projections around it are GEMMs (the GEMM table's), as aiconfigurator prices
  them.  Decode adds the two absorbed BMMs (``mla_bmm/<engine>/<ver>/mla_bmm_perf``,
  16-bit where measured) at the decode tokens.

Interpolation is `estimators._curves`': log-log inside the measured range, constant below
the smallest size, linear in work above the largest, each curve made monotone.
"""

from __future__ import annotations

import functools
import math
from typing import Any

from estimators import _aic_tables as aic
from estimators._curves import Curve, Grid2D, grid_from_rows, monotone, rows_where
from estimators._types import ModelArchitecture, Precision

__all__ = [
    "DEFAULT_DISTRIBUTION",
    "mla_bmm_curve",
    "mla_grid",
    "moe_curve",
    "moe_dtypes",
    "scaled_to_shape",
]

# The expert-choice distribution read from the MoE tables.  aiconfigurator's collectors
# time one EP rank: ``balanced`` spreads the tokens' top-k choices evenly over the experts
# (every rank gets ``tokens x top-k / EP`` rows), ``power_law_<alpha>`` draws per-expert
# loads from a power law and puts the busiest expert group on the timed rank.  The serving
# benchmarks llmcap validates against send random prompts to routers trained with a
# load-balancing loss (DeepSeek-V3's bias-based balancing, Qwen3's auxiliary loss), whose
# loads are close to even, not heavy-tailed; so the default is ``balanced``.  The measured
# difference is modest and not one-sided (SGLang 0.5.14 H200, DeepSeek-V3 shape: power_law
# 1.01 runs 1.1-1.5x balanced at EP 1 and 0.5-1.1x at EP >= 2), and aiconfigurator itself
# defaults to ``power_law_1.01``; `moe_curve` takes either.
DEFAULT_DISTRIBUTION = "balanced"


def moe_dtypes(model: ModelArchitecture, precision: Precision) -> tuple[str, ...]:
    """The tables' ``moe_dtype`` names for the experts of a run at `precision` (the model's
    own expert precision where it has one), the checkpoint's own first: MXFP4 experts as
    the Blackwell kernels run them (MXFP8 activations), else weight-only; INT4 experts
    weight-only (``int4_wo``: vLLM's Marlin kernel)."""
    p = model.expert_precision or Precision(precision)
    if p is Precision.MXFP4:
        return ("w4a8_mxfp4_mxfp8", "w4a16_mxfp4")
    if p is Precision.INT4:
        return ("int4_wo",)
    if p is Precision.FP8:
        return ("fp8_block", "fp8") if model.weight_scale_block else ("fp8", "fp8_block")
    if p is Precision.FP4:
        return ("nvfp4",)
    return ("bfloat16",)


@functools.cache
def moe_curve(
    system: str,
    engine: str,
    version: str | None,
    shape: tuple[int, int, int, int, int, int],
    dtypes: tuple[str, ...],
    distribution: str = DEFAULT_DISTRIBUTION,
    kernel: str = "",
) -> tuple[str, Curve | None, str]:
    """(table label, seconds of the routed experts over the tokens entering the layer or
    None, why None) for ``shape`` = (hidden, expert intermediate, top-k, experts, MoE TP,
    EP), the first of `dtypes` measured there; only the rows of kernels whose
    ``kernel_source`` holds `kernel` where one is named (the engine's default kernel,
    `EngineProfile.moe_kernels`), scaled from another shape where that kernel has no rows
    at this one (`scaled_to_shape`)."""
    ref, df = aic.load_moe(system, engine, version)
    if kernel:
        df = df[df["kernel_source"].astype(str).str.contains(kernel, regex=False)]
    hidden, inter, topk, experts, moe_tp, moe_ep = shape
    sub = rows_where(df, hidden_size=hidden, inter_size=inter, topk=topk, num_experts=experts,
                     moe_tp_size=moe_tp, distribution=distribution)  # fmt: skip
    for dtype in dtypes:
        rows = sub[sub["moe_dtype"] == dtype]
        if len(_fastest(rows[rows["moe_ep_size"] == moe_ep])) < 2:
            continue
        suspect = []  # under EP, the kernels whose EP rows do not time a rank's share
        if moe_ep > 1:
            kernels = rows["kernel_source"]
            suspect = [k for k, own in rows.groupby(kernels) if not _ep_rows_scale(own)]
            rows = rows[~kernels.isin(suspect)]
        best = _fastest(rows[rows["moe_ep_size"] == moe_ep])
        if len(best) < 2:  # only suspect kernels measured this EP
            of_suspect = df[df["kernel_source"].isin(suspect)]
            return _ep_from_ep1(ref.label, of_suspect, shape, dtype, distribution)
        xs = best.index.to_numpy(dtype=float)
        return ref.label, Curve(xs, monotone(best.to_numpy()), 1.0), ""
    if kernel:  # the named kernel measured at another model's shape only
        scaled = scaled_to_shape(df, shape, dtypes, distribution)
        if scaled is not None:
            source, curve = scaled
            return f"{ref.label} ({kernel} at {source}, scaled)", curve, ""
    of_kernel = f" of kernel {kernel}" if kernel else ""
    return (
        ref.label,
        None,
        (
            f"no {'/'.join(dtypes)} {distribution} rows{of_kernel} for hidden {hidden}, expert "
            f"width {inter}, top-{topk} of {experts}, MoE TP {moe_tp}, EP {moe_ep} in {ref.label}"
        ),
    )


# A shape whose EP-2 rows take at least this share of its EP-1 rows' time (at the largest
# token count both measure) has EP rows that do not time an EP rank's share of the work.
# Under balanced routing an EP-2 rank runs half the expert rows of EP 1, and the kernels'
# EP-2 rows take 0.47-0.67 of EP 1 at almost every shape of the tables (benchmarks/
# moe_table_ep_scaling.py: median 0.53).  The exceptions take all of it: DeepSeek-V3's shape
# under the FlashInfer TensorRT-LLM kernels of SGLang 0.5.14 and vLLM 0.24, which route
# inside the kernel with the model's group-limited top-k (the collectors' balanced logits
# most likely do not survive it), and SGLang 0.5.10's Triton and Marlin tables, whose
# collector computes every expert choice of the rank's tokens (remote ones clamped onto a
# local expert).
EP_ROWS_SUSPECT = 0.8


def _fastest(rows: Any) -> Any:
    """The fastest measured kernel's seconds at each token count of `rows`."""
    return rows.groupby("num_tokens", sort=True)["seconds"].min()


def ep_scaling(rows: Any, ep: int) -> Any:
    """time(EP `ep`) / time(EP 1) at each token count both of `rows` (one shape, MoE TP,
    precision and distribution) measure; empty where either is missing."""
    one, many = _fastest(rows[rows["moe_ep_size"] == 1]), _fastest(rows[rows["moe_ep_size"] == ep])
    common = one.index.intersection(many.index)
    return many[common] / one[common]


def _ep_rows_scale(rows: Any) -> bool:
    """Whether the EP rows of one shape (one kernel's, or the fastest of several) time an
    EP rank's share (`EP_ROWS_SUSPECT`); shapes without EP-1 and EP-2 rows to compare are
    taken as measured."""
    ratio = ep_scaling(rows, 2)
    return ratio.empty or float(ratio.iloc[-1]) < EP_ROWS_SUSPECT


def _ep_from_ep1(
    label: str,
    rows: Any,
    shape: tuple[int, int, int, int, int, int],
    dtype: str,
    distribution: str,
) -> tuple[str, Curve | None, str]:
    """The routed experts at `shape`'s EP from its EP-1 rows, where its own EP rows do not
    scale (`_ep_rows_scale`): EP 1's time at each token count times the same kernel's
    measured EP scaling (`ep_scaling`) at the shape nearest in one expert's size whose EP
    rows do, at the same MoE TP, precision and distribution (`rows`: the table's rows of
    those kernels).  None where no shape of the kernel scales at this EP."""
    hidden, inter, topk, experts, moe_tp, moe_ep = shape
    fields = ["hidden_size", "inter_size", "topk", "num_experts"]
    same = rows_where(rows, moe_tp_size=moe_tp, distribution=distribution, moe_dtype=dtype)
    own = rows_where(same, hidden_size=hidden, inter_size=inter, topk=topk, num_experts=experts)
    ep1 = _fastest(own[own["moe_ep_size"] == 1])
    candidates = []
    for other, measured in same.groupby(fields, sort=True):
        if other == (hidden, inter, topk, experts) or not _ep_rows_scale(measured):
            continue
        scaling = ep_scaling(measured, moe_ep)
        common = ep1.index.intersection(scaling.index)
        if len(common) >= 2:
            size = abs(math.log(other[0] * other[1] / (hidden * inter)))
            candidates.append((size, other, ep1[common] * scaling[common]))
    why = (
        f"the EP {moe_ep} rows of hidden {hidden}, expert width {inter}, top-{topk} of "
        f"{experts} in {label} do not scale with EP (benchmarks/moe_table_ep_scaling.py)"
    )
    if not candidates:
        return label, None, f"{why}, and no shape of the kernel whose EP rows do"
    _, (h, i, k, e), seconds = min(candidates, key=lambda c: c[0])
    xs = seconds.index.to_numpy(dtype=float)
    source = f"EP 1 x the kernel's EP {moe_ep} scaling at hidden {h}, expert width {i}, "
    source += f"top-{k} of {e}"
    return f"{label} ({source})", Curve(xs, monotone(seconds.to_numpy()), 1.0), ""


def scaled_to_shape(
    rows: Any,
    shape: tuple[int, int, int, int, int, int],
    dtypes: tuple[str, ...],
    distribution: str = DEFAULT_DISTRIBUTION,
) -> tuple[str, Curve] | None:
    """(the measured shape, seconds of the routed experts at `shape` over the tokens entering
    the layer) from one kernel's `rows` measured at another model's experts with the same
    MoE TP, EP, precision and distribution, or None where there are none.

    A grouped GEMM's time is set by the tokens each expert receives (its GEMMs' M,
    ``tokens x top-k / experts``): at small M it reads every touched expert's weights, at
    large M it runs their FLOPs, and both scale with the experts' total size
    (``experts x hidden x width``) at the same M.  So the measured shape's time at M,
    times the ratio of total expert sizes, prices `shape` at the token count that gives
    its experts the same M.  The measured shape nearest in one expert's size is used;
    token counts below one are dropped."""
    hidden, inter, topk, experts, moe_tp, moe_ep = shape
    sub = rows_where(rows, moe_tp_size=moe_tp, moe_ep_size=moe_ep, distribution=distribution)
    fields = ["hidden_size", "inter_size", "topk", "num_experts"]
    for dtype in dtypes:
        measured = sub[sub["moe_dtype"] == dtype]
        if measured.empty:
            continue
        shapes = measured[fields].drop_duplicates().itertuples(index=False, name=None)
        h, i, k, e = min(shapes, key=lambda s: abs(math.log(s[0] * s[1] / (hidden * inter))))
        one = rows_where(measured, hidden_size=h, inter_size=i, topk=k, num_experts=e)
        best = one.groupby("num_tokens", sort=True)["seconds"].min()
        tokens = best.index.to_numpy(dtype=float) * (k / e) * (experts / topk)
        seconds = monotone(best.to_numpy()) * (experts * hidden * inter) / (e * h * i)
        keep = tokens >= 1.0
        if keep.sum() >= 2:
            source = f"hidden {h}, expert width {i}, top-{k} of {e}"
            return source, Curve(tokens[keep], seconds[keep], 1.0)
    return None


@functools.cache
def mla_grid(
    system: str, engine: str, version: str | None, phase: str, heads: int, kv_dtype: str
) -> tuple[str, Grid2D | None]:
    """(table label, seconds of one layer's MLA attention over (sequences, length) or
    None): length is the prompt (context) or the cached tokens + 1 (generation)."""
    ref, df = aic.load_mla(system, engine, phase, version)
    sub = df[(df["num_heads"] == heads) & (df["kv_cache_dtype"] == kv_dtype)]
    if sub.empty:
        return ref.label, None
    if phase == "context":
        xs, work_exp = sub["isl"].to_numpy(dtype=float), 2.0
    else:
        xs, work_exp = sub["step"].to_numpy(dtype=float) + 1.0, 1.0
    best = sub.assign(x=xs).groupby(["batch_size", "x"], sort=True)["seconds"].min().reset_index()
    grid = grid_from_rows(
        best["batch_size"].to_numpy(), best["x"].to_numpy(), best["seconds"].to_numpy(), work_exp
    )
    return ref.label, grid


@functools.cache
def mla_bmm_curve(
    system: str, engine: str, version: str | None, op_name: str, heads: int
) -> tuple[str, Curve | None]:
    """(table label, seconds of one absorbed BMM over decode tokens or None): 16-bit rows
    where measured (engines keep the absorbed weights in 16 bits), else any."""
    ref, df = aic.load_mla_bmm(system, engine, version)
    sub = df[(df["op_name"] == op_name) & (df["num_heads"] == heads)]
    if (sub["bmm_dtype"] == "bfloat16").any():
        sub = sub[sub["bmm_dtype"] == "bfloat16"]
    best = sub.groupby("num_tokens", sort=True)["seconds"].min()
    if len(best) < 2:
        return ref.label, None
    return ref.label, Curve(best.index.to_numpy(dtype=float), monotone(best.to_numpy()), 1.0)
