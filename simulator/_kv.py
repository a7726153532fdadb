"""Paged KV-cache accounting of one replica."""

from __future__ import annotations


def blocks_for(tokens: int, block_size: int) -> int:
    return -(-tokens // block_size)


class BlockPool:
    """Free/used KV blocks of one replica (every pipeline stage holds the same tokens).

    `reserved` counts blocks promised to requests that allocate ahead of use
    (static batching reserves a request's whole length at admission).  `window_blocks`:
    blocks every running request holds beside its tokens' (its sliding-window layers'
    window under vLLM's paged layout; estimators `MemoryPlan.window_kv_blocks`).
    """

    __slots__ = (
        "block_size", "peak_used", "reserved", "total", "used", "watermark_blocks",
        "window_blocks",
    )  # fmt: skip

    def __init__(
        self, total: int, block_size: int, watermark: float, window_blocks: int = 0
    ) -> None:
        self.total = total
        self.block_size = block_size
        self.window_blocks = window_blocks
        self.used = 0
        self.reserved = 0
        self.peak_used = 0
        self.watermark_blocks = int(watermark * total)

    @property
    def free(self) -> int:
        return self.total - self.used

    def can_admit(self, blocks: int) -> bool:
        """Whether a new prompt of `blocks` blocks may start (keeps the watermark free)."""
        return self.total - self.used - self.reserved - blocks >= self.watermark_blocks

    def request_blocks(self, kv_tokens: int) -> int:
        """Blocks a running request with `kv_tokens` cached tokens holds (its window's too)."""
        return blocks_for(kv_tokens, self.block_size) + self.window_blocks

    def max_request_blocks(self) -> int:
        """The largest request one replica can ever hold."""
        return self.total - self.watermark_blocks

    def allocate(self, blocks: int) -> None:
        self.used += blocks
        if self.used > self.peak_used:
            self.peak_used = self.used
        if self.used > self.total:
            raise AssertionError(f"KV over-allocated: {self.used} > {self.total} blocks")

    def release(self, blocks: int) -> None:
        self.used -= blocks
