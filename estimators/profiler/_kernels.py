"""The operators the profiler times, as torch closures on random inputs, and the timer.

Each ``*_op`` function allocates its inputs once (random normal values: the kernels'
speed does not depend on the values, but all-zero inputs can take shortcuts) and returns a
closure that runs the operator once.

`time_op` times a list of such closures, each over its own copy of the inputs, and returns
the median seconds of one call.  On a GPU the list is captured once in a CUDA graph and
the graph replayed between two CUDA events, as engines replay their decode steps: the
kernels run back to back with no host launch gap, and the copies (together at least twice
the L2 cache, see `rotation_copies`) make each call read its operands from HBM, as a layer
does whose weights were evicted by the layers before it.  Where capture fails the same calls
run eagerly between the events.  On the CPU each call is timed alone with
``time.perf_counter``.

A MoE layer's routed experts are torch's grouped GEMMs (``torch._grouped_mm``; fp8:
``torch._scaled_grouped_mm`` with row-wise scales), one GPU's share of the layer's tokens under
balanced routing (`moe_op`).

Attention is torch's ``scaled_dot_product_attention`` (flash or memory-efficient kernels
where torch has them for the device, the math kernel elsewhere): prefill causal over whole
prompts, or a chunk after a cached prefix with the causal mask aligned to the end; decode
as one query token per sequence over a dense KV cache of that length (no paged gather, so
engines with paged kernels may differ a little).
"""

from __future__ import annotations

import itertools
import statistics
import time
from collections.abc import Callable
from typing import Any

__all__ = [
    "MAX_COPIES",
    "MOE_KERNELS",
    "ROTATION_BYTES",
    "decode_op",
    "gemm_op",
    "moe_bytes",
    "moe_op",
    "moe_rows",
    "prefill_op",
    "rotation_copies",
    "time_op",
    "token_combiner",
    "torch_dtype",
]


def torch_dtype(torch: Any, name: str) -> Any:
    return {"bf16": torch.bfloat16, "fp16": torch.float16}[name]


ROTATION_BYTES = 128 << 20  # inputs rotated through per timed call: over twice an H100's L2
MAX_COPIES = 64


def rotation_copies(input_bytes: int, budget_bytes: int) -> int:
    """How many copies of an operator's inputs to rotate through on a GPU: enough that
    together they span `ROTATION_BYTES` (so no call finds its operands in L2), at most
    `MAX_COPIES`, and never more than fit in `budget_bytes`."""
    want = -(-ROTATION_BYTES // max(1, input_bytes))
    fit = max(1, budget_bytes // max(1, input_bytes))
    return max(1, min(want, MAX_COPIES, fit))


def time_op(
    torch: Any,
    device: str,
    fns: list[Callable[[], Any]],
    warmup: int,
    repeats: int,
    graph: bool = True,
) -> tuple[float, str]:
    """Median seconds of one call of the closures in `fns` (each the same operator over its
    own inputs), and how it was timed: ``cuda-graph``, ``cuda-events`` (eager: `graph`
    False, or capture failed) or ``perf-counter`` (CPU)."""
    if device != "cuda":
        fn = fns[0]
        for _ in range(warmup):
            fn()
        samples = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - t0)
        return statistics.median(samples), "perf-counter"
    run_all = _cuda_graph(torch, fns) if graph else None
    method = "cuda-graph"
    if run_all is None:
        method = "cuda-events"

        def run_all() -> None:
            for fn in fns:
                fn()

    for _ in range(max(1, warmup)):
        run_all()
    torch.cuda.synchronize()
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    samples = []
    for _ in range(repeats):
        start.record()
        run_all()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1e-3 / len(fns))  # ms -> s, per call
    return statistics.median(samples), method


def _cuda_graph(torch: Any, fns: list[Callable[[], Any]]) -> Callable[[], Any] | None:
    """The calls of `fns` captured in one CUDA graph, as its replay; None when the
    operators cannot be captured (the caller then runs them eagerly)."""
    try:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up off the capture stream, as torch asks
            for fn in fns:
                fn()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for fn in fns:
                fn()
    except RuntimeError:
        torch.cuda.synchronize()
        return None
    return graph.replay


def gemm_op(torch: Any, device: str, dtype: str, m: int, n: int, k: int) -> Callable[[], Any]:
    """``y = x W^T`` with x [m, k] and W [n, k]: a linear layer's GEMM.

    fp8: both operands in float8_e4m3fn, per-tensor scales, bf16 output
    (``torch._scaled_mm``, cuBLASLt; m padded to a multiple of 16, as the fp8 kernels
    require).  The activations' quantization is not timed: vLLM fuses it into the RMSNorm
    before the layer.  Per-token scales are not used either: torch's row-wise scaled kernel
    was measured 1.5-3x slower on an H100 than the engines' CUTLASS kernels at these
    shapes, while the per-tensor one lies within 0.7-1.0x of them
    (benchmarks/compare_op_tables.py against aiconfigurator's vLLM tables)."""
    if dtype == "fp8":
        mp = -(-m // 16) * 16
        x = torch.randn(mp, k, device=device).to(torch.float8_e4m3fn)
        w = torch.randn(n, k, device=device).to(torch.float8_e4m3fn)
        one = torch.ones((), device=device)
        wt = w.t()  # column-major [k, n], as _scaled_mm wants its second operand
        return lambda: torch._scaled_mm(x, wt, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    dt = torch_dtype(torch, dtype)
    x = torch.randn(m, k, device=device, dtype=dt)
    w = torch.randn(n, k, device=device, dtype=dt)
    linear = torch.nn.functional.linear
    return lambda: linear(x, w)


def _sdpa(torch: Any, q: Any, k: Any, v: Any, **kwargs: Any) -> Callable[[], Any]:
    """SDPA over grouped KV heads: native GQA where torch has it, else KV repeated to the
    query heads once, outside the timed call."""
    sdpa = torch.nn.functional.scaled_dot_product_attention
    groups = q.shape[1] // k.shape[1]
    if groups > 1:
        try:
            sdpa(q, k, v, enable_gqa=True, **kwargs)
            return lambda: sdpa(q, k, v, enable_gqa=True, **kwargs)
        except (TypeError, RuntimeError):
            k = k.repeat_interleave(groups, dim=1)
            v = v.repeat_interleave(groups, dim=1)
    return lambda: sdpa(q, k, v, **kwargs)


def prefill_op(
    torch: Any,
    device: str,
    dtype: str,
    batch: int,
    chunk: int,
    cached: int,
    heads: int,
    kv_heads: int,
    head_dim: int,
) -> Callable[[], Any]:
    """One layer's prefill attention: `batch` sequences of `chunk` query tokens after
    `cached` tokens already in the KV cache, causal."""
    dt = torch_dtype(torch, dtype)
    q = torch.randn(batch, heads, chunk, head_dim, device=device, dtype=dt)
    k = torch.randn(batch, kv_heads, cached + chunk, head_dim, device=device, dtype=dt)
    v = torch.randn_like(k)
    if cached == 0:
        return _sdpa(torch, q, k, v, is_causal=True)
    from torch.nn.attention.bias import causal_lower_right

    return _sdpa(torch, q, k, v, attn_mask=causal_lower_right(chunk, cached + chunk))


def decode_op(
    torch: Any,
    device: str,
    dtype: str,
    batch: int,
    kv_len: int,
    heads: int,
    kv_heads: int,
    head_dim: int,
) -> Callable[[], Any]:
    """One layer's decode attention: `batch` sequences of one query token each, reading
    `kv_len` KV tokens from a dense cache."""
    dt = torch_dtype(torch, dtype)
    q = torch.randn(batch, heads, 1, head_dim, device=device, dtype=dt)
    k = torch.randn(batch, kv_heads, kv_len, head_dim, device=device, dtype=dt)
    v = torch.randn_like(k)
    return _sdpa(torch, q, k, v)


MOE_KERNELS = {"bf16": "torch-grouped-mm", "fp8": "torch-scaled-grouped-mm-rowwise"}


def moe_rows(tokens: int, topk: int, experts: int, moe_ep: int) -> list[int]:
    """Rows each of one GPU's experts receives when `tokens` tokens each choose `topk` of
    `experts` experts held by `moe_ep` GPUs, balanced: the GPU gets its share of the
    ``tokens x topk`` choices (rounded up), spread evenly over as many of its experts as
    there are rows; experts that receive none are left out (a grouped kernel skips them)."""
    local = experts // moe_ep
    rows = max(1, -(-tokens * topk // moe_ep))
    active = min(local, rows)
    return [rows // active + (i < rows % active) for i in range(active)]


def moe_op(
    torch: Any,
    device: str,
    dtype: str,
    tokens: int,
    hidden: int,
    width: int,
    topk: int,
    experts: int,
    moe_ep: int,
) -> Callable[[], Any]:
    """One GPU's routed experts of a MoE layer that `tokens` tokens enter, each choosing
    `topk` of `experts` experts of `width` (after MoE TP), the experts spread over `moe_ep`
    GPUs: gather the GPU's rows (a token once per expert it chose there), the grouped
    gate-up GEMM, SiLU x up, the grouped down GEMM, and each token's weighted sum of its
    rows, as the engines' fused MoE kernels do between the router and the all-to-all (here
    unfused: the gather, the activation and the sum are kernels of their own).

    fp8: the gathered rows and the activation are quantized to float8_e4m3fn (one kernel
    each, as the engines quantize before each grouped GEMM), row-wise scales, bf16 output;
    the engines' block-scaled kernels may differ."""
    counts = moe_rows(tokens, topk, experts, moe_ep)
    rows, active = sum(counts), len(counts)
    bf16 = torch.bfloat16
    offs = torch.tensor(list(itertools.accumulate(counts)), dtype=torch.int32, device=device)
    token_of_row = torch.arange(rows, device=device) % tokens
    weight = torch.rand(rows, 1, device=device, dtype=bf16)
    x = torch.randn(tokens, hidden, device=device, dtype=bf16)
    silu = torch.nn.functional.silu
    if dtype == "fp8":
        f8 = torch.float8_e4m3fn
        # [E, n, k] row-major, seen as [E, k, n] column-major: the layout the kernel wants
        w13 = torch.randn(active, 2 * width, hidden, device=device, dtype=bf16).to(f8)
        w2 = torch.randn(active, hidden, width, device=device, dtype=bf16).to(f8)
        w13t, w2t = w13.transpose(-2, -1), w2.transpose(-2, -1)
        row_scale = torch.ones(rows, device=device)
        s13 = torch.ones(active, 2 * width, device=device)
        s2 = torch.ones(active, hidden, device=device)
        mm = torch._scaled_grouped_mm

        def gate_up(a: Any) -> Any:
            return mm(a.to(f8), w13t, row_scale, s13, offs=offs, out_dtype=bf16)

        def down(g: Any) -> Any:
            return mm(g.to(f8), w2t, row_scale, s2, offs=offs, out_dtype=bf16)

    else:
        w13 = torch.randn(active, 2 * width, hidden, device=device, dtype=bf16)
        w2 = torch.randn(active, hidden, width, device=device, dtype=bf16)
        w13t, w2t = w13.transpose(-2, -1), w2.transpose(-2, -1)

        def gate_up(a: Any) -> Any:
            return torch._grouped_mm(a, w13t, offs=offs)

        def down(g: Any) -> Any:
            return torch._grouped_mm(g, w2t, offs=offs)

    combine = token_combiner(torch, weight, token_of_row, tokens, hidden)

    def run() -> Any:
        h = gate_up(x.index_select(0, token_of_row))
        return combine(down(silu(h[:, :width]) * h[:, width:]))

    return run


def token_combiner(
    torch: Any, weight: Any, token_of_row: Any, tokens: int, hidden: int
) -> Callable[[Any], Any]:
    """The weighted sum of each token's rows of `y` (``[rows, hidden]``, row r serving token
    ``token_of_row[r]``, which is ``r % tokens``): where every token has as many rows, one
    batched product that reads each row once, as the engines' reduction over a token's
    experts does (on an H200, at 65,536 rows of 3,072, the layer's steps besides its GEMMs
    took 0.65 ms with it against 2.5 ms with the indexed add); else an indexed add
    (atomics), for the shapes whose rows do not divide."""
    rows = weight.shape[0]
    per_token = rows // tokens if rows % tokens == 0 else 0
    if per_token == 1:  # a row a token: only its weight (a batched product of one row is slow)
        return lambda y: y * weight
    if per_token:
        token_weights = weight.view(per_token, tokens).t().unsqueeze(1).contiguous()

        def combine(y: Any) -> Any:
            by_token = y.view(per_token, tokens, hidden).transpose(0, 1)
            return torch.bmm(token_weights, by_token).squeeze(1)

        return combine
    out = torch.empty(tokens, hidden, device=weight.device, dtype=weight.dtype)

    def add(y: Any) -> Any:
        out.zero_()
        return out.index_add_(0, token_of_row, y * weight)

    return add


def moe_bytes(
    tokens: int, hidden: int, width: int, topk: int, experts: int, moe_ep: int, dtype: str
) -> int:
    """Bytes `moe_op` allocates for its inputs (weights and tokens; fp8 weights are 1 byte)."""
    counts = moe_rows(tokens, topk, experts, moe_ep)
    elem = 1 if dtype == "fp8" else 2
    return len(counts) * 3 * width * hidden * elem + 2 * tokens * hidden * 2
