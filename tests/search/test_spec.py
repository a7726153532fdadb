"""Search specs: validation messages a user can act on, and the fingerprint that keys reuse."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from search._errors import SpecError
from search._spec import load_spec, parse_spec
from search.cli import cli

from .conftest import TINY_SPEC

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _error(data: dict) -> str:
    with pytest.raises(SpecError) as info:
        parse_spec(data, source="spec.yaml")
    return str(info.value)


def test_an_unknown_field_is_named_with_the_fields_allowed_there() -> None:
    message = _error(TINY_SPEC | {"capcity": {"tolerance": 0.1}})
    assert "capcity: unknown field; allowed: name, model" in message
    assert "capacity" in message.split("allowed:")[1]


def test_an_unknown_nested_field_names_its_path_and_the_allowed_fields() -> None:
    slo = {"filters": [{"metric": "ttft", "percentil": 90, "max_s": 2}]}
    message = _error(TINY_SPEC | {"slo": slo, "workload": {"sorce": "chat"}})
    assert "slo.filters.0.percentil: unknown field; allowed: metric, percentile, max_s" in message
    assert "slo.filters.0.percentile: Field required" in message
    assert "workload.sorce: unknown field; allowed: source," in message


def test_errors_show_the_expected_shape_and_where_a_misplaced_field_belongs() -> None:
    message = _error(
        TINY_SPEC
        | {"trials": 40, "strategy": "tpe", "space": {"tp": 2, "schedulers": ["sarathi"]}}
    )
    assert "  trials: unknown field (it belongs at strategy.trials); allowed: name," in message
    assert "strategy: Input should be a valid dictionary" in message
    assert "expected a section of kind, trials, seed, prune (got: 'tpe')" in message
    assert "space.tp: Input should be a valid list; expected list of integer (got: 2)" in message
    assert "space.schedulers: Input should be a valid dictionary; expected map" in message
    assert "e.g. {sarathi: {batch_size: [64, 128], chunk_size: [512]}, vllm: {}}" in message


def test_an_unknown_sku_lists_the_catalog() -> None:
    message = _error(TINY_SPEC | {"skus": ["a100-80gb", "tpu-v5"]})
    assert "skus.1: unknown GPU SKU 'tpu-v5'; allowed:" in message
    assert "h100-sxm" in message and "l40s" in message
    both = _error(TINY_SPEC | {"skus": ["tpu-v5", "a100-80gb", "mi300x"]})
    assert "skus.0: unknown GPU SKU 'tpu-v5'; skus.2: unknown GPU SKU 'mi300x'; allowed:" in both


def test_an_unknown_scheduler_or_strategy_names_the_allowed_values() -> None:
    space = {"tp": [1], "schedulers": {"fastgen": {}}}
    message = _error(TINY_SPEC | {"space": space, "strategy": {"kind": "random"}})
    assert "space.schedulers: key 'fastgen':" in message and "'sarathi'" in message
    assert "strategy.kind:" in message and "'nsga2'" in message and "(got: 'random')" in message


def _trace_spec(path: Path) -> dict:
    return TINY_SPEC | {"workload": {"source": str(path), "num_requests": 50}}


def _write_trace(path: Path, rows: list[tuple[float, int, int]]) -> Path:
    lines = ["arrived_at,num_prefill_tokens,num_decode_tokens"]
    lines += [f"{t},{p},{o}" for t, p, o in rows]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_trace_rewritten_in_place_is_a_new_workload_and_a_moved_one_is_not(
    tmp_path: Path,
) -> None:
    trace = _write_trace(tmp_path / "today.csv", [(0.0, 100, 10), (1.0, 200, 20)])
    first = parse_spec(_trace_spec(trace)).fingerprint()
    moved = shutil.copy(trace, tmp_path / "copy.csv")
    assert parse_spec(_trace_spec(Path(moved))).fingerprint() == first

    _write_trace(trace, [(0.0, 100, 10), (1.0, 300, 20)])  # the next day's trace
    assert parse_spec(_trace_spec(trace)).fingerprint() != first


def test_name_strategy_and_budget_leave_the_fingerprint_and_the_slo_does_not() -> None:
    base = parse_spec(TINY_SPEC).fingerprint()
    same = TINY_SPEC | {"name": "other", "strategy": {"kind": "tpe", "trials": 5}}
    assert parse_spec(same | {"budget": {"max_gpus": 8}}).fingerprint() == base
    stricter = {"capacity": {"metric": "scheduling_delay", "percentile": 99, "max_s": 2}}
    assert parse_spec(TINY_SPEC | {"slo": stricter}).fingerprint() != base


def test_cost_model_data_decides_results(monkeypatch) -> None:
    # a release that refits the roofline or changes an engine profile must not reuse answers
    # the old numbers gave
    import search._spec as spec_module

    base = parse_spec(TINY_SPEC).fingerprint()
    monkeypatch.setattr(spec_module, "cost_model_digest", lambda: "0" * 16)
    assert parse_spec(TINY_SPEC).fingerprint() != base


def test_cost_model_digest_follows_every_data_file(tmp_path) -> None:
    from importlib import resources

    from estimators._digest import data_digest

    names = {p.name for p in resources.files("estimators").joinpath("data").iterdir()}
    assert {"roofline.yaml", "engines.yaml"} <= names
    (tmp_path / "roofline.yaml").write_text("defaults: {matmul: {eff_max: 0.75}}\n")
    (tmp_path / "engines.yaml").write_text("engines: {}\n")
    first = data_digest(tmp_path)
    assert data_digest(tmp_path) == first and len(first) == 16
    (tmp_path / "roofline.yaml").write_text("defaults: {matmul: {eff_max: 0.76}}\n")
    refit = data_digest(tmp_path)
    assert refit != first
    (tmp_path / "notes.txt").write_text("not data")
    assert data_digest(tmp_path) == refit


def test_max_rejected_share_is_a_share_and_decides_results() -> None:
    base = parse_spec(TINY_SPEC)
    assert base.slo.max_rejected_share == 0.0
    lenient = parse_spec(TINY_SPEC | {"slo": {"max_rejected_share": 0.01}})
    assert lenient.fingerprint() != base.fingerprint()
    for bad in (-0.1, 1.5):
        assert "slo.max_rejected_share" in _error(TINY_SPEC | {"slo": {"max_rejected_share": bad}})


def test_max_requests_defaults_to_a_multiple_of_the_workload_and_never_shortens_it() -> None:
    base = parse_spec(TINY_SPEC)
    assert base.max_requests == 8 * TINY_SPEC["workload"]["num_requests"]
    fixed = parse_spec(TINY_SPEC | {"capacity": {"max_requests": 150}})
    assert fixed.max_requests == 150 and fixed.fingerprint() != base.fingerprint()
    shorter = TINY_SPEC | {"capacity": {"max_requests": 10}}
    assert "at least workload.num_requests" in _error(shorter)
    assert "capacity.max_requests" in _error(TINY_SPEC | {"capacity": {"max_requests": 10**7}})
    huge = parse_spec(TINY_SPEC | {"workload": {"source": "chat", "num_requests": 100_000}})
    assert huge.max_requests == 200_000  # capped


@pytest.mark.parametrize(
    ("example", "total", "dropped"),
    [("quick.yaml", 20, 0), ("vidur_llama2_70b_chat.yaml", 450, 50), ("prefix_cache.yaml", 4, 0),
     ("speculative.yaml", 6, 0)],
)
def test_validate_reports_the_examples_space(example: str, total: int, dropped: int) -> None:
    result = CliRunner().invoke(cli, ["search", "validate", str(EXAMPLES / example)])
    assert result.exit_code == 0, result.output
    assert f"{total} configurations: {total - dropped} feasible, {dropped} dropped" in result.output
    assert load_spec(EXAMPLES / example).fingerprint()[:16] in result.output


def test_validate_tells_apart_specs_that_differ_anywhere(tmp_path: Path) -> None:
    outputs = []
    for budget in (1, 2):  # nothing fits one GPU's budget... or two: the same results key
        path = tmp_path / f"b{budget}.yaml"
        path.write_text(yaml.safe_dump(TINY_SPEC | {"budget": {"max_gpus": budget}}))
        outputs.append(CliRunner().invoke(cli, ["search", "validate", str(path)]).output)
    whole = [re.search(r"whole spec (\w+)", " ".join(out.split())).group(1) for out in outputs]
    assert whole[0] != whole[1]
    fingerprints = [re.search(r"spec fingerprint (\w+)", out).group(1) for out in outputs]
    assert fingerprints[0] == fingerprints[1]  # the budget does not decide results
    assert parse_spec(TINY_SPEC).digest() != parse_spec(TINY_SPEC | {"name": "other"}).digest()


def test_validate_states_the_slo_semantics_in_force() -> None:
    from search._spec import slo_semantics

    at_capacity = parse_spec(TINY_SPEC)
    assert slo_semantics(at_capacity) == (
        "capacity = the largest rate with scheduling_delay_p99 < 5 s; ttft_p90 < 2 s, "
        "tbt_p99 < 0.2 s checked at that rate (capacity_meets_filters: false; true makes the "
        "capacity meet them too)"
    )
    within = parse_spec(TINY_SPEC | {"slo": {**TINY_SPEC["slo"], "capacity_meets_filters": True}})
    assert "and ttft_p90 < 2 s, tbt_p99 < 0.2 s (capacity_meets_filters: true)" in (
        slo_semantics(within)
    )
    result = CliRunner().invoke(
        cli, ["search", "validate", str(EXAMPLES / "quick.yaml")], env={"COLUMNS": "250"}
    )
    assert "SLOs: capacity = the largest rate with scheduling_delay_p99 < 5 s and" in (
        result.output
    )


def test_validate_rejects_a_bad_spec_with_exit_2_and_no_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(TINY_SPEC | {"skus": ["tpu-v5"]}))
    result = CliRunner().invoke(cli, ["search", "validate", str(bad)])
    assert result.exit_code == 2
    assert "unknown GPU SKU 'tpu-v5'" in result.output
    assert "Traceback" not in result.output
