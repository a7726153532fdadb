"""Rows of aiconfigurator-core's silicon_sample.csv as the `llmcap validate` tests build
them: a measured aggregated vLLM point by default, any column overridden."""

from __future__ import annotations

from search._validate._launch_scripts import record_field


def row(**overrides: str) -> dict[str, str]:
    """A silicon_sample.csv row; its batch_size, unless given, the dataset's own: the
    concurrency over the attention-DP ranks (`_aic_silicon.unrecorded_workers`)."""
    base = {
        "id": "p1",
        "silicon_data_source": "source_file=x.csv; silicon_concurrency=16",
        "backend": "vllm",
        "backend_version": "0.12.0",
        "model_path": "meta-llama/Llama-3.1-70B",
        "system": "h200_sxm",
        "mode": "agg",
        "isl": "1024",
        "osl": "128",
        "gemm_quant_mode": "fp8",
        "batch_size": "",  # below
        "tp_size": "4.0",
        "pp_size": "1.0",
        "attention_dp_size": "",
        "silicon_ttft_ms": "120.5",
        "silicon_tpot_ms": "9.5",
    }
    fields = {**base, **overrides}
    if "batch_size" not in overrides:
        fields["batch_size"] = str(_dataset_batch(fields))
    return fields


def _dataset_batch(fields: dict[str, str]) -> int:
    """The batch a row records for its concurrency: per attention-DP rank."""
    found = record_field(fields["silicon_data_source"], "silicon_concurrency")
    ranks = max(int(float(fields.get("attention_dp_size") or 1)), 1)
    return int(found) // ranks if found.isdigit() else 16
