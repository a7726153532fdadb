"""A replica's prefix cache: KV blocks of earlier prompts, found again by their hashes.

Engines keep the KV blocks of finished prompts and reuse them when a new prompt starts with
the same tokens (vLLM's automatic prefix caching, SGLang's RadixAttention, TensorRT-LLM's
KV-cache reuse).  A workload that carries prefix hashes (``Workload.prefix_blocks``: per
request, the hash of each ``prefix_block_tokens``-token block of its prompt, each hash
covering the whole prefix up to its block, as Mooncake's ``hash_ids`` do) feeds this cache:

- when a request arrives, its leading blocks that the cache holds are a hit: that many
  prompt tokens are not computed again (at least one token always is, to produce the first
  output token), but attention still reads them as context;
- when a request's prefill ends, its blocks enter the cache;
- the cache holds at most `capacity` blocks; the least recently used leave first (a hit or
  an insert refreshes a block).

Running requests share a prefix's KV blocks, as vLLM's block pool (reference counts, a
block freed to the evictable queue when its last reference ends) and SGLang's radix tree
(lock_ref) do: a request admitted with a hit holds references on its leading cached blocks;
those another running request already references cost it no KV blocks, the others are taken
out of the free memory once; when its prefill ends its own whole prefix blocks become
shared too (unless another request already references the same block: that copy stays its
own).  A block whose last reference ends goes back to the free memory, still cached.
Sharing needs prefix blocks of whole KV blocks (``block_tokens`` a multiple of the paged
block size); otherwise each request holds its whole prompt.

The LRU set itself is counted apart from the replica's paged KV pool: its default capacity
is the pool's size, as in engines where unreferenced cached blocks live in the free KV
memory until it is needed, and a referenced block may leave the LRU set (later prompts then
miss it) while its holders keep it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

__all__ = ["PrefixCache", "prefix_reuse_tokens"]


class PrefixCache:
    """LRU set of prefix-block hashes, with hit counters."""

    __slots__ = (
        "block_tokens", "blocks", "capacity", "hit_tokens", "kv_blocks_per_block",
        "prompt_tokens", "refs",
    )  # fmt: skip

    def __init__(
        self, block_tokens: int, capacity: int | None, kv_block_size: int | None = None
    ) -> None:
        if block_tokens < 1:
            raise ValueError(f"prefix block_tokens must be >= 1, got {block_tokens}")
        if capacity is not None and capacity < 0:
            raise ValueError(f"prefix cache capacity must be >= 0 blocks, got {capacity}")
        self.block_tokens = block_tokens
        self.capacity = capacity  # None: unbounded
        self.blocks: OrderedDict[int, None] = OrderedDict()
        self.hit_tokens = 0  # prompt tokens served from the cache
        self.prompt_tokens = 0  # prompt tokens of the requests looked up
        # paged KV blocks of one prefix block; 0: running requests share nothing
        whole = kv_block_size is not None and block_tokens % kv_block_size == 0
        self.kv_blocks_per_block = block_tokens // kv_block_size if whole else 0
        self.refs: dict[int, int] = {}  # prefix block -> running requests holding it

    def match(self, hashes: Sequence[int], prompt_tokens: int) -> int:
        """Prompt tokens of a new request found in the cache (its leading cached blocks,
        at most ``prompt_tokens - 1``); refreshes the blocks hit."""
        hit = self.cached_blocks(hashes)
        for h in hashes[:hit]:
            self.blocks.move_to_end(h)
        tokens = min(hit * self.block_tokens, prompt_tokens - 1)
        self.hit_tokens += tokens
        self.prompt_tokens += prompt_tokens
        return tokens

    def cached_blocks(self, hashes: Sequence[int]) -> int:
        """How many leading blocks of `hashes` the cache holds (a router's look: nothing
        is refreshed or counted)."""
        n = 0
        for h in hashes:
            if h not in self.blocks:
                break
            n += 1
        return n

    def insert(self, hashes: Sequence[int]) -> None:
        """A finished prefill's blocks enter the cache (the least recently used leave)."""
        blocks = self.blocks
        for h in hashes:
            if h in blocks:
                blocks.move_to_end(h)
            else:
                blocks[h] = None
        if self.capacity is not None:
            while len(blocks) > self.capacity:
                blocks.popitem(last=False)

    # -- blocks shared by running requests -----------------------------------

    def reusable(self, hashes: Sequence[int], cached_tokens: int) -> tuple[tuple[int, ...], int]:
        """(the leading blocks a request admitted with `cached_tokens` found in the cache
        holds, the paged KV blocks that saves it): the held blocks that some running request
        already references cost nothing, the others are taken from the free memory."""
        per = self.kv_blocks_per_block
        if not per:
            return (), 0
        held = tuple(hashes[: cached_tokens // self.block_tokens])
        refs = self.refs
        return held, per * sum(1 for h in held if h in refs)

    def hold(self, hashes: Sequence[int]) -> None:
        """A running request references these blocks."""
        refs = self.refs
        for h in hashes:
            refs[h] = refs.get(h, 0) + 1

    def adopt(self, hashes: Sequence[int], held: int, prompt_tokens: int) -> tuple[int, ...]:
        """A prefill ended: its own whole prefix blocks after the `held` ones become shared
        (those no running request references yet); returns them, now referenced once."""
        if not self.kv_blocks_per_block:
            return ()
        refs = self.refs
        whole = hashes[held : prompt_tokens // self.block_tokens]
        adopted = tuple(h for h in whole if h not in refs)
        for h in adopted:
            refs[h] = 1
        return adopted

    def release(self, hashes: Sequence[int]) -> int:
        """A request ends or is preempted: drops its references; returns the paged KV blocks
        whose last reference that was (back to the free memory, still cached)."""
        refs = self.refs
        freed = 0
        for h in hashes:
            n = refs[h] - 1
            if n:
                refs[h] = n
            else:
                del refs[h]
                freed += 1
        return freed * self.kv_blocks_per_block

    @property
    def hit_rate(self) -> float:
        """Share of the looked-up prompt tokens served from the cache."""
        return self.hit_tokens / self.prompt_tokens if self.prompt_tokens else 0.0


def prefix_reuse_tokens(
    prefix_blocks: Sequence[Sequence[int]], prompt_tokens: np.ndarray, block_tokens: int
) -> np.ndarray:
    """Per request, the prompt tokens an unbounded cache shared by every replica would have
    when it arrives, in array order: its leading blocks seen in any earlier prompt (at most
    ``prompt - 1``).  No run caches more, so it bounds what prefix caching can save."""
    cache = PrefixCache(block_tokens, None)
    out = np.zeros(len(prompt_tokens), dtype=np.int64)
    for i, (hashes, prompt) in enumerate(zip(prefix_blocks, prompt_tokens.tolist(), strict=True)):
        out[i] = cache.match(hashes, prompt)
        cache.insert(hashes)
    return out
