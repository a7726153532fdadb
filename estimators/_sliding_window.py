"""Sliding-window attention: a layer whose queries attend to the last `window` keys only.

gpt-oss alternates sliding-window layers (a window of 128) with full-attention ones;
Mistral-7B-v0.1 slides every layer over 4,096.  vLLM, SGLang and TensorRT-LLM run those
layers with windowed kernels (FlashAttention's / FlashInfer's ``window_left``, TensorRT-LLM's
``attention_window_size``), which read and score only the keys inside the window.

The estimators price one average layer's attention (`RooflineEstimator._prefill_attn` and
`_decode_attn`, which the profiled backend overrides with measured tables).
`windowed_attention` wraps those two hooks: the full layers' share of the layers is priced
as the batch is, the sliding share with the batch clipped to the window:

- a decode of a sequence reads at most `window` keys: ``min(kv, n x window)`` over `n`
  sequences;
- a prompt chunk's query scores at most `window` keys: ``min(pairs, tokens x window)``
  query-key pairs, and each sequence reads at most ``window`` keys before its chunk:
  ``min(kv, n x window + tokens)``.

Both clips are exact for every sequence longer than the window and an upper bound on the
first `window` tokens of a prompt (which score fewer keys): at most ``window^2 / 2`` pairs
per prompt.  The KV memory the sliding layers keep is the engine's (estimators/_memory.py
`kv_cache_layout`: every key, a window of pages per request, or a window pool).
"""

from __future__ import annotations

from collections.abc import Callable

PrefillAttention = Callable[[int, int, float, int], float]  # (tokens, seqs, pairs, kv) -> s
DecodeAttention = Callable[[int, int], float]  # (seqs, kv tokens) -> s

__all__ = ["windowed_attention"]


def windowed_attention(
    prefill: PrefillAttention,
    decode: DecodeAttention,
    window: int,
    sliding_layers: int,
    num_layers: int,
) -> tuple[PrefillAttention, DecodeAttention]:
    """The average layer's (prefill, decode) attention seconds when `sliding_layers` of
    `num_layers` layers slide over `window` keys, from the full-attention hooks."""
    if window < 1 or not 0 < sliding_layers <= num_layers:
        raise ValueError(
            f"sliding window {window} over {sliding_layers} of {num_layers} layers: "
            "need a window >= 1 and 1..num_layers sliding layers"
        )
    slide = sliding_layers / num_layers
    return (
        _WindowedPrefill(prefill, window, slide),
        _WindowedDecode(decode, window, slide),
    )


class _WindowedPrefill:
    """Plain objects rather than closures, so that an estimator holding them pickles."""

    __slots__ = ("full", "prefill", "slide", "window")

    def __init__(self, prefill: PrefillAttention, window: int, slide: float) -> None:
        self.prefill, self.window, self.slide, self.full = prefill, window, slide, 1.0 - slide

    def __call__(self, npt: int, npf: int, pairs: float, kv_tokens: int) -> float:
        w = self.window
        windowed = self.prefill(npt, npf, min(pairs, npt * w), min(kv_tokens, npf * w + npt))
        if not self.full:
            return windowed
        return self.full * self.prefill(npt, npf, pairs, kv_tokens) + self.slide * windowed


class _WindowedDecode:
    __slots__ = ("decode", "full", "slide", "window")

    def __init__(self, decode: DecodeAttention, window: int, slide: float) -> None:
        self.decode, self.window, self.slide, self.full = decode, window, slide, 1.0 - slide

    def __call__(self, nd: int, dkv: int) -> float:
        windowed = self.decode(nd, min(dkv, nd * self.window))
        if not self.full:
            return windowed
        return self.full * self.decode(nd, dkv) + self.slide * windowed
