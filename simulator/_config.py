"""Configuration records of one simulation: replica scheduler, cluster shape, run options."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class SchedulerKind(StrEnum):
    """Replica (batching) schedulers."""

    VLLM = "vllm"  # prefill-first: waiting prompts run alone, pausing decodes
    ORCA = "orca"  # iteration-level: whole prompts mixed with decodes
    SARATHI = "sarathi"  # chunked prefill under a token budget; decodes never paused
    STATIC = "static"  # FasterTransformer-style: a new batch only when the last one drained
    SGLANG = "sglang"  # prefill-only or decode-only iterations; prompts chunked at chunk_size

    @property
    def chunked(self) -> bool:
        """Whether the policy chunks prompts at `chunk_size` (its token budget)."""
        return self in _CHUNKED

    @property
    def mixes_decodes(self) -> bool:
        """Whether running decodes share an iteration, and its token budget, with prompt
        chunks (Sarathi, Orca); the others run prompts and decodes in iterations of their
        own, the decodes' limited by the batch cap alone."""
        return self in _MIXED


_CHUNKED = frozenset({SchedulerKind.SARATHI, SchedulerKind.SGLANG})
_MIXED = frozenset({SchedulerKind.SARATHI, SchedulerKind.ORCA})


class GlobalSchedulerKind(StrEnum):
    """How arriving requests are routed to replicas."""

    ROUND_ROBIN = "round_robin"
    LEAST_OUTSTANDING = "lor"
    RANDOM = "random"
    CACHE_AWARE = "cache_aware"  # the replica caching the request's prefix (vllm-router, SGLang)


DEFAULT_BATCH_SIZE = 128
DEFAULT_CHUNK_SIZE = 512
DEFAULT_VLLM_MAX_TOKENS = 4096


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    """The batching policy of every replica.

    batch_size: most sequences in one batch (one micro-batch under pipeline parallelism).
    chunk_size: Sarathi-Serve's token budget per iteration (prefill chunks plus decodes);
        SGLang's chunked_prefill_size (prefill tokens of one prefill-only iteration).
    max_tokens: most tokens per iteration for vLLM (and Orca when set); None = no limit.
    reserve_full_length: admit a request only with KV blocks for its whole length (prompt +
        output) reserved, so it is never preempted (TensorRT-LLM's GUARANTEED_NO_EVICT);
        otherwise blocks are taken as tokens arrive and a request is preempted when they run
        out.  Static batching always reserves.
    batch_wait_iters, batch_wait_token_ratio: batch waiting (TensorRT-LLM's
        batch_wait_timeout_iters and batch_wait_max_tokens_ratio; 0 and 0.0: off).  While
        decodes run, prompts are held back from the iteration until they have been held
        `batch_wait_iters` iterations in a row or the iteration would hold at least
        `batch_wait_token_ratio` x the token budget (the held prompts' whole lengths plus
        the decodes), so that prefills batch up; an iteration without decodes never holds.
        Off under attention DP (`attention_dp` > 1): TensorRT-LLM's executor ignores it there.
    attention_dp: the attention data-parallel ranks of the replica this policy batches for
        (`Deployment.dp`; the deployment sets it: `replica_scheduler`).  One simulated
        replica batches for all its ranks at once (estimators/_attention_dp.py).
    adp_balance_timeout_iters, adp_balance_batching_wait_iters: TensorRT-LLM's attention-DP
        balance (``attention_dp_config: {enable_balance: true, timeout_iters,
        batching_wait_iters}``; both 0: off, and off without attention DP), which holds
        prompts back until every rank has one (`simulator._policies.Policy`); TensorRT-LLM's
        defaults under ``enable_balance`` alone are 50 and 10.
    decode_tokens: query tokens each running decode counts against the iteration's token
        budget: 1, or under speculative decoding the k + 1 positions its verify step runs
        (`SpeculativeConfig.verify_tokens`): vLLM v1 schedules a running request's
        ``num_tokens_with_spec - num_computed_tokens`` (its k draft tokens + 1) inside
        max_num_batched_tokens, TensorRT-LLM's micro-batch scheduler counts a generation
        request's draft tokens + 1 against max_num_tokens, so less prefill fits beside a
        speculative decode batch.
    recv_interval: how often the scheduler takes in newly arrived requests (SGLang's
        scheduler_recv_interval; 1: before every iteration, as every engine does by
        default).  Above 1, a request that arrives while batches run is held until the
        scheduler polls: after an iteration with prompt tokens, and otherwise after every
        `recv_interval` decode iterations (SGLang's SchedulerRecvSkipper weighs a decode or
        verify iteration 1 and any other 1000 against the interval); an idle replica takes
        it in at once.
    schedule_ahead: the engine forms the next batch while the current one runs (vLLM v1's
        async scheduling, SGLang's and TensorRT-LLM's overlap schedulers: the CPU schedules
        and launches batch N + 1 before batch N's results are back), so a request arriving
        during batch N is first scheduled in batch N + 2, one batch later than under a
        scheduler that forms each batch when the previous one ends; so are a decode
        replica's hand-off that reaches it during batch N (its blocks, and the transfer
        into them, wait for the scheduler) and its request whose KV transfer completes
        during batch N (the engines see a transfer done at an iteration boundary).  Set
        from the engine profile's `overlap`.
    """

    kind: SchedulerKind = SchedulerKind.SARATHI
    batch_size: int = DEFAULT_BATCH_SIZE
    chunk_size: int = DEFAULT_CHUNK_SIZE
    max_tokens: int | None = None
    reserve_full_length: bool = False
    batch_wait_iters: int = 0
    batch_wait_token_ratio: float = 0.0
    decode_tokens: int = 1
    recv_interval: int = 1
    schedule_ahead: bool = False
    attention_dp: int = 1
    adp_balance_timeout_iters: int = 0
    adp_balance_batching_wait_iters: int = 0

    def token_budget(self) -> int | None:
        """Tokens one iteration may hold under the policy's budget (SGLang's: the prompt
        tokens of a prefill iteration), or None where the policy sets no limit."""
        if self.kind.chunked:
            return self.chunk_size
        if self.kind is SchedulerKind.VLLM:
            return self.max_tokens or DEFAULT_VLLM_MAX_TOKENS
        return self.max_tokens

    def max_iteration_tokens(self) -> int | None:
        """Most tokens one iteration may hold, or None where the policy sets no limit: the
        token budget, which decodes count against, except under SGLang's policy, whose
        iteration prefills or decodes (`simulator._policies.SglangPolicy`): its budget bounds
        a prefill iteration, and a decode iteration holds every running request's
        `decode_tokens`, up to the batch cap."""
        budget = self.token_budget()
        if budget is not None and self.kind is SchedulerKind.SGLANG:
            return max(budget, self.batch_size * self.decode_tokens)
        return budget


@dataclass(frozen=True, slots=True)
class ClusterConfig:
    """Replicas of one deployment; each replica holds tp * pp GPUs."""

    num_replicas: int = 1
    pp: int = 1
    num_kv_blocks: int = 1024  # KV blocks per replica (from the memory planner)
    block_size: int = 16  # tokens per KV block
    # blocks every running request holds beside its tokens' (its sliding-window layers'
    # window under vLLM's paged layout; estimators `MemoryPlan.window_kv_blocks`)
    window_kv_blocks: int = 0
    watermark: float = 0.01  # fraction of blocks kept free when admitting new prompts (vLLM)
    global_scheduler: GlobalSchedulerKind = GlobalSchedulerKind.ROUND_ROBIN
    # prefix caching (simulator/_prefix_cache.py), used when the workload carries prefix
    # hashes: on by default, as in vLLM v1, SGLang and TensorRT-LLM; the cache holds
    # `prefix_cache_tokens` (None: as many tokens as the replica's KV blocks; inf: unbounded)
    prefix_cache: bool = True
    prefix_cache_tokens: float | None = None
    # host seconds each replica's HTTP frontend spends on a prompt token before its scheduler
    # sees the request (tokenizing, one request at a time: estimators `Frontend`); 0: none
    tokenize_seconds_per_token: float = 0.0
    # seconds more on every request's TTFT outside the engine's clock (its HTTP way in and
    # its first token's way out: estimators `Frontend.request_ms`), holding no tokenizer;
    # charged before the scheduler sees the request
    frontend_latency: float = 0.0


@dataclass(frozen=True, slots=True)
class RunOptions:
    """What to record and when to stop."""

    seed: int = 0  # for the random global scheduler
    record_stage_times: bool = False  # keep per-stage spans of every batch (for --trace-out)
    max_time: float | None = None  # stop the clock here (simulated seconds)
    # called with the Simulation every `progress_every` events; returning True stops the run
    on_progress: Callable[[Any], bool | None] | None = None
    progress_every: int = 4096
