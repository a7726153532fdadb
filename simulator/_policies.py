"""Replica schedulers as small policies over one batching core.

A policy answers one question: given an idle lane of a replica, what runs next?
It returns a `BatchPlan` (whether the lane's decodes run, and which prefill
chunks join them) or None when the lane has nothing to do.  The core
(`simulator._replica.Replica`) owns the queues, the KV blocks and the clock; a
policy only calls `replica.admit` (take the head of the waiting queue, if its
blocks fit) and `replica.prepare_decodes` (allocate the coming decode step's
blocks, preempting by recompute when they run out).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import islice
from typing import TYPE_CHECKING

from simulator._config import SchedulerConfig, SchedulerKind
from simulator._lane import Lane
from simulator._request import Request

if TYPE_CHECKING:
    from simulator._replica import Replica


@dataclass(slots=True)
class BatchPlan:
    run_decodes: bool
    prefills: list[tuple[Request, int]]  # (request, query tokens of its chunk)

    @property
    def num_tokens_planned(self) -> int:
        return sum(q for _, q in self.prefills)


class Policy:
    """Base policy; subclasses implement `plan`."""

    reserves_full_length = False  # admit only with blocks for the whole request reserved
    # with nothing waiting and no prompt being chunked, `plan` is `replica.prepare_decodes`
    # then the lane's decodes alone, or None for a lane without decodes, which it also
    # prepares (marks its coming step's blocks allocated) unless this is False
    prepares_empty_lanes = True

    def __init__(self, config: SchedulerConfig) -> None:
        self.config = config
        self.batch_size = config.batch_size
        self.token_budget = config.token_budget()
        self.decode_tokens = config.decode_tokens  # budget tokens of one running decode
        if config.reserve_full_length:
            self.reserves_full_length = True
        dp = config.attention_dp
        # prompts may be held back from an iteration: batch waiting, or under attention DP
        # (where TensorRT-LLM ignores batch waiting) the balance of its ranks
        waits = config.batch_wait_iters > 0 or config.batch_wait_token_ratio > 0
        balances = (
            config.adp_balance_timeout_iters > 0 or config.adp_balance_batching_wait_iters > 0
        )
        self._balance = dp > 1 and balances
        self._may_hold = self._balance or (dp == 1 and waits)
        # iterations in a row that batch waiting (or the balance's batching wait) held the
        # prompts back
        self._held = 0
        # the decode iteration (`Replica.decode_iterations`) after which the balance's
        # timeout count last restarted
        self._balance_reset_at = 0

    def plan(self, lane: Lane, replica: Replica) -> BatchPlan | None:
        raise NotImplementedError

    def rejection(self, req: Request) -> str | None:
        """Why this policy can never serve `req`, or None.

        A token limit counts the tokens of one iteration: a whole prompt (its context
        step), then one per decode step.  A policy that cannot chunk therefore refuses only
        prompts longer than the limit, whatever the output length (vLLM v0's "prompt too
        long" check, TensorRT-LLM's "prompt length should not exceed max_num_tokens").
        """
        budget = self.token_budget
        if budget is not None and req.prompt_tokens > budget:
            return (
                f"prompt of {req.prompt_tokens} tokens exceeds the {budget}-token iteration "
                f"limit of the {self.config.kind.value} scheduler"
            )
        return None

    def _prompt_chunks(
        self, lane: Lane, replica: Replica, budget: int
    ) -> list[tuple[Request, int]]:
        """Prompt chunks of at most `budget` tokens in all: the prompts being chunked
        continue first, then waiting requests are admitted (while the batch cap and the KV
        blocks allow), the last one chunked to what is left."""
        chunks: list[tuple[Request, int]] = []
        if self._may_hold and self._holds_prompts(lane, replica):
            return chunks
        for req in lane.prefilling:
            if budget <= 0:
                break
            q = min(req.prefill_target - req.prefilled, budget)
            chunks.append((req, q))
            budget -= q
        waiting = replica.waiting
        while budget > 0 and waiting and lane.num_seqs < self.batch_size:
            req = waiting[0]
            if not replica.admit(req, lane):
                break
            q = min(req.remaining_prefill, budget)  # after any cached prefix
            if q:  # 0: its KV came from a prefill pool, it joined the decodes
                chunks.append((req, q))
                budget -= q
        return chunks

    def _decodes(self, lane: Lane, replica: Replica) -> BatchPlan | None:
        """A decode-only iteration of the lane, its step's blocks prepared; when preparing
        them preempted every decode, the plan again: the waiting requests, the preempted
        ones among them, may start now (as vLLM's next step and SGLang's next batch take
        them), and nothing else would wake the idle replica."""
        running = bool(lane.members)
        replica.prepare_decodes(lane)
        if lane.members:
            return BatchPlan(True, [])
        return self.plan(lane, replica) if running and replica.waiting else None

    def _holds_prompts(self, lane: Lane, replica: Replica) -> bool:
        """Whether this iteration runs its decodes without the prompts that could join
        them, to let more prompts gather: batch waiting (`SchedulerConfig.batch_wait_iters`)
        or, under attention DP, the balance of its ranks (`_balance_holds`)."""
        if self._balance:
            return self._balance_holds(lane, replica)
        if not lane.num_decodes:
            return False
        prompts = [r.prompt_tokens for r in self._ready_prompts(lane, replica)]
        if not prompts:
            return False
        config = self.config
        tokens = sum(prompts) + lane.num_decodes * self.decode_tokens
        enough = tokens >= config.batch_wait_token_ratio * (self.token_budget or 0)
        if enough or self._held >= config.batch_wait_iters:
            self._held = 0
            return False
        self._held += 1
        return True

    def _ready_prompts(self, lane: Lane, replica: Replica) -> list[Request]:
        """The prompts that could join this iteration: those being chunked, then the
        waiting ones the batch cap leaves seats for."""
        seats = max(self.batch_size - lane.num_seqs, 0)
        return lane.prefilling + list(islice(replica.waiting, seats))

    def _balance_holds(self, lane: Lane, replica: Replica) -> bool:
        """TensorRT-LLM's attention-DP balance (`SchedulerConfig.adp_balance_timeout_iters`,
        its PyExecutor ``_balance_adp_requests``): whether this iteration runs without the
        prompts that could join it.

        TensorRT-LLM holds every rank's context requests back while not every rank has
        one, counting each such iteration, with or without prompts, and lets them go on
        the iteration that brings the count to ``timeout_iters``, or at once when not every
        rank has generation requests; either resets the count.  When every rank has one
        (and a free slot), the count resets too, and if every rank also decodes, they wait
        up to ``batching_wait_iters`` more iterations.  So a prompt arriving while every
        rank decodes waits for the count's next multiple of the timeout: up to
        ``timeout_iters`` - 1 iterations, fewer the later it comes in the count.

        One simulated replica batches for all `attention_dp` ranks, so this reads "every
        rank has context requests" as at least `attention_dp` prompts ready to join
        (`_ready_prompts`: one per rank, as TensorRT-LLM's router spreads new requests over
        the ranks, least loaded first, and a full rank has no seat; lenient where two
        prompts go to one rank, which then count for two), and "every rank has
        generation requests" as at least `attention_dp` decodes: TensorRT-LLM pads a rank
        with no request at all with a dummy generation request, so what fails the test is
        a rank whose only requests are prompts, where the router sends a new prompt while
        fewer requests decode than there are ranks.  The count is kept in the
        replica's decode iterations (`Replica.decode_iterations`), which also run without
        asking the policy while nothing waits, so SGLang's prefill-only iterations do not
        count.  As batch waiting, it applies to the policies that mix prompts with decodes
        or chunk them (Sarathi, Orca, SGLang: `_prompt_chunks`, `OrcaPolicy.plan`).
        """
        config = self.config
        dp = config.attention_dp
        iterations = replica.decode_iterations()
        decodes = lane.num_decodes
        if len(self._ready_prompts(lane, replica)) >= dp:
            self._reset_balance(iterations, decodes)
            if decodes >= dp and self._held < config.adp_balance_batching_wait_iters:
                self._held += 1
                return True
            self._held = 0
            return False
        timeout = config.adp_balance_timeout_iters
        counted = iterations - self._balance_reset_at  # this one's place in the count
        if decodes < dp or timeout == 0 or (counted > 0 and counted % timeout == 0):
            self._reset_balance(iterations, decodes)
            return False
        return True

    def _reset_balance(self, iterations: int, decodes: int) -> None:
        """The balance's timeout count restarts after this iteration: the next is its first
        (one decode iteration on, or none when this one runs no decodes)."""
        self._balance_reset_at = iterations if decodes else iterations - 1


class SarathiPolicy(Policy):
    """Sarathi-Serve: decodes first, never paused; prompts fill the rest of the budget in chunks."""

    def rejection(self, req: Request) -> str | None:
        return None  # chunking serves any length

    def plan(self, lane: Lane, replica: Replica) -> BatchPlan | None:
        replica.prepare_decodes(lane)
        decodes = lane.num_decodes * self.decode_tokens
        chunks = self._prompt_chunks(lane, replica, self.token_budget - decodes)
        if not chunks and not lane.members:
            return None
        return BatchPlan(bool(lane.members), chunks)


class VllmPolicy(Policy):
    """vLLM (v0 default): waiting prompts run first as a prefill-only batch, pausing decodes."""

    def plan(self, lane: Lane, replica: Replica) -> BatchPlan | None:
        lane.forget_empty_preparation()  # it admits before it prepares the decodes
        waiting = replica.waiting
        budget = self.token_budget
        chunks: list[tuple[Request, int]] = []
        while waiting and lane.num_seqs < self.batch_size:
            req = waiting[0]
            # a recompute (prompt + generated) longer than the limit runs alone
            q = req.remaining_prefill
            if (q > budget and chunks) or not replica.admit(req, lane):
                break
            if q:
                chunks.append((req, q))
                budget -= q
        if chunks:
            return BatchPlan(False, chunks)
        return self._decodes(lane, replica)


class OrcaPolicy(Policy):
    """Orca: iteration-level batching; whole prompts join the running decodes (TensorRT-LLM
    with chunked context off), unless batch waiting or the attention-DP balance holds them
    back this iteration (`_holds_prompts`)."""

    def plan(self, lane: Lane, replica: Replica) -> BatchPlan | None:
        replica.prepare_decodes(lane)
        budget = self.token_budget
        if budget is not None:
            budget -= lane.num_decodes * self.decode_tokens
        waiting = replica.waiting
        chunks: list[tuple[Request, int]] = []
        held = self._may_hold and self._holds_prompts(lane, replica)
        while waiting and not held and lane.num_seqs < self.batch_size:
            req = waiting[0]
            # a recompute (prompt + generated) longer than the limit runs alone
            q = req.remaining_prefill
            if (
                budget is not None
                and q > budget
                and (chunks or lane.members or q <= self.token_budget)
            ):
                break
            if not replica.admit(req, lane):
                break
            if q:
                chunks.append((req, q))
                if budget is not None:
                    budget -= q
        if not chunks and not lane.members:
            return None
        return BatchPlan(bool(lane.members), chunks)


class SglangPolicy(Policy):
    """SGLang (default, mixed chunks off): an iteration prefills or decodes, never both.

    Waiting prompts go first, as a prefill-only batch of at most `chunk_size` tokens
    (SGLang's chunked_prefill_size): a prompt that does not fit is chunked, its rest
    leading the next prefill batch.  Admission stops at the running-request cap or when
    the KV blocks run out.  With no prefill to run, every running request decodes.
    """

    def rejection(self, req: Request) -> str | None:
        return None  # chunking serves any length

    def plan(self, lane: Lane, replica: Replica) -> BatchPlan | None:
        lane.forget_empty_preparation()  # it admits before it prepares the decodes
        chunks = self._prompt_chunks(lane, replica, self.token_budget)
        if chunks:
            return BatchPlan(False, chunks)
        return self._decodes(lane, replica)


class StaticPolicy(Policy):
    """FasterTransformer-style static batching: a new batch only once the lane has drained.

    Memory for each request's whole length is reserved at admission, so a batch
    never runs out of KV blocks half-way.
    """

    reserves_full_length = True
    prepares_empty_lanes = False

    def plan(self, lane: Lane, replica: Replica) -> BatchPlan | None:
        if lane.members:
            replica.prepare_decodes(lane)
            return BatchPlan(True, [])
        waiting = replica.waiting
        budget = self.token_budget
        chunks: list[tuple[Request, int]] = []
        while waiting and len(chunks) < self.batch_size:
            req = waiting[0]
            q = req.remaining_prefill
            if budget is not None and q > budget:
                break
            if not replica.admit(req, lane):
                break
            chunks.append((req, q))
            if budget is not None:
                budget -= q
        return BatchPlan(False, chunks) if chunks else None


POLICIES: dict[SchedulerKind, type[Policy]] = {
    SchedulerKind.SARATHI: SarathiPolicy,
    SchedulerKind.VLLM: VllmPolicy,
    SchedulerKind.ORCA: OrcaPolicy,
    SchedulerKind.STATIC: StaticPolicy,
    SchedulerKind.SGLANG: SglangPolicy,
}


def make_policy(config: SchedulerConfig) -> Policy:
    return POLICIES[config.kind](config)
