"""What aiconfigurator's config generator set for NVIDIA's own runs beyond each engine's
defaults.

The `aic-collection` points of aic-silicon (module docstring of `_aic_silicon.py`) were
measured the way `aiconfigurator eval` measures a deployment: its pipeline
(`eval/pipeline.py`) has `aiconfigurator cli default` generate the engine configuration,
starts it behind Dynamo's frontend and drives it with genai-perf
(`eval/benchmarks/genai_perf_runner.py`: fixed lengths, 10 C requests after 2 C warm-up
ones).  The generator (`generator/`, read 2026-11-29 at ai-dynamo/aiconfigurator; the
TensorRT-LLM rule as stored at @a2d8002e and @17676b35, which agree) derives the engine's
options from the deployment in `rule_plugin/<engine>.rule` and writes those that its
version's template (`backend_templates/<engine>/`, the newest at or below the engine
version) emits:

- TensorRT-LLM (`trtllm.rule`), aggregated: ``max_batch_size`` 512 (a smaller batch is
  raised to 512), ``tokens_per_block`` 32, ``max_num_tokens = 512 + ISL + 1500`` rounded up
  to a multiple of 32, the overlap scheduler on and decode CUDA graphs padded over a dense
  list of batch sizes up to 520 (the engine profile's own).  Its templates
  (`extra_engine_args.1.0.0rc3.yaml.j2`, 1.0.0, 1.3.0rc1) write ``enable_chunked_prefill``
  only from a generator parameter, default false, that neither the rule nor the deployment
  sets: contexts run whole, as many as fit the limit beside the running decodes (the Orca
  policy).  Disaggregated, a prefill worker gets ``max_num_tokens = ISL + 1500`` rounded up
  to 32 (``prefill max_num_tokens``), its contexts whole too: one prompt an iteration at
  these prompt lengths (the decode workers' limit only bounds their decodes).  Its overlap
  scheduler off (``prefill disable_overlap_scheduler = true``) is not applied: the prefill
  pool keeps the engine profile's host overlap.
- SGLang, aggregated (`sglang.rule` as stored today): ``max_prefill_tokens = ISL + 1500``
  and ``enable_mixed_chunk``, which its templates from 0.5.6.post2 on emit (0.5.1.post1's
  tests a key the mapping never sets, ``enable-mix-chunk``).  SGLang's PrefillAdder adds a
  waiting prompt after the first only while it fits what is left of max_prefill_tokens, so
  a prefill batch would hold one or two of these prompts.  Not applied: the rule's history
  before the runs was not read (the stored template itself shows the generator changing),
  and the runs measure SGLang's own limits rather than that one (on H100, Qwen3-32B TP 2,
  1024/128 at C=16, 841 ms TTFT: the whole wave prefilled together, docs/validation.md).
- vLLM 0.12.0 (`vllm.rule`, `cli_args.0.12.0.j2`): the rule's token budget is not emitted;
  its max_num_seqs 512 only moves vLLM's CUDA-graph capture to 512 tokens, below every
  prefill these points run.  Nothing changes.

Under the TensorRT-LLM profile's own limit (8192 tokens, chunked) a wave of C fixed-length
prompts runs as one long prefill and the clients stay in step; under the generator's a
prompt or two runs an iteration, and the clients drift apart.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from search._validate._aic_silicon import ValidationPoint

# trtllm.rule: an aggregated worker's batch cap, the KV block, the margin above the prompt
TRTLLM_AGG_MAX_BATCH = 512
TRTLLM_TOKENS_PER_BLOCK = 32
TRTLLM_TOKEN_MARGIN = 1500


def trtllm_agg_max_num_tokens(isl: int) -> int:
    """``max_num_tokens`` the generator gives an aggregated TensorRT-LLM worker: ``512 +
    ISL + 1500`` rounded up to a multiple of ``tokens_per_block`` (32)."""
    return _blocks(TRTLLM_AGG_MAX_BATCH + isl + TRTLLM_TOKEN_MARGIN)


def trtllm_prefill_max_num_tokens(isl: int) -> int:
    """``max_num_tokens`` the generator gives a disaggregated TensorRT-LLM prefill worker:
    ``ISL + 1500`` rounded up to a multiple of ``tokens_per_block`` (32)."""
    return _blocks(isl + TRTLLM_TOKEN_MARGIN)


def generated_options(point: ValidationPoint) -> dict[str, Any]:
    """The `ValidationPoint` fields of the engine options the generator set for `point`
    (module docstring; a disaggregated point's are its prefill pool's); {} for the public
    benchmark's points and where it set none."""
    if point.source != "aic-collection" or point.engine != "trtllm":
        return {}
    if point.mode == "agg":
        return {"token_budget": trtllm_agg_max_num_tokens(point.isl), "scheduler": "orca"}
    return {"token_budget": trtllm_prefill_max_num_tokens(point.isl), "scheduler": "orca"}


def _blocks(tokens: int) -> int:
    """`tokens` rounded up to whole KV blocks of ``tokens_per_block`` (TensorRT-LLM asserts
    max_num_tokens a multiple of it)."""
    block = TRTLLM_TOKENS_PER_BLOCK
    return -(-tokens // block) * block
