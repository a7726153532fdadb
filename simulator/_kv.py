"""Paged KV-cache accounting of one replica."""

from __future__ import annotations


def blocks_for(tokens: int, block_size: int) -> int:
    return -(-tokens // block_size)


class BlockPool:
    """Free/used KV blocks of one replica (every pipeline stage holds the same tokens).

    `reserved` counts blocks promised to requests that allocate ahead of use
    (static batching reserves a request's whole length at admission).
    """

    __slots__ = ("block_size", "peak_used", "reserved", "total", "used", "watermark_blocks")

    def __init__(self, total: int, block_size: int, watermark: float) -> None:
        self.total = total
        self.block_size = block_size
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
