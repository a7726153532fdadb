"""The operators the profiler times, as torch closures on random inputs, and the timer.

Each ``*_op`` function allocates its inputs once (random normal values: the kernels'
speed does not depend on the values, but all-zero inputs can take shortcuts) and returns a
closure that runs the operator once.  `time_op` runs it ``warmup`` times, then ``repeats``
times, each timed alone (CUDA events on a GPU, ``time.perf_counter`` on the CPU), and
returns the median in seconds.

Attention is torch's ``scaled_dot_product_attention`` (flash or memory-efficient kernels
where torch has them for the device, the math kernel elsewhere): prefill causal over whole
prompts, or a chunk after a cached prefix with the causal mask aligned to the end; decode
as one query token per sequence over a dense KV cache of that length (no paged gather, so
engines with paged kernels may differ a little).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

__all__ = ["decode_op", "gemm_op", "prefill_op", "time_op", "torch_dtype"]


def torch_dtype(torch: Any, name: str) -> Any:
    return {"bf16": torch.bfloat16, "fp16": torch.float16}[name]


def time_op(torch: Any, device: str, fn: Callable[[], Any], warmup: int, repeats: int) -> float:
    """Median seconds of one call of `fn` after `warmup` untimed calls."""
    for _ in range(warmup):
        fn()
    samples: list[float] = []
    if device == "cuda":
        torch.cuda.synchronize()
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        for _ in range(repeats):
            start.record()
            fn()
            end.record()
            end.synchronize()
            samples.append(start.elapsed_time(end) * 1e-3)  # ms -> s
    else:
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def gemm_op(torch: Any, device: str, dtype: str, m: int, n: int, k: int) -> Callable[[], Any]:
    """``y = x W^T`` with x [m, k] and W [n, k]: a linear layer's GEMM.  fp8: both operands
    in float8_e4m3fn, per-tensor scales, bf16 output (``torch._scaled_mm``; m padded to a
    multiple of 16, as the fp8 kernels require)."""
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
