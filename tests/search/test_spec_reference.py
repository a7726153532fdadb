"""The spec reference (docs/spec.md, `llmcap search schema`) stays in step with the spec."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from click.testing import CliRunner

from search._model_fields import model_sections
from search._spec import SearchSpec
from search._spec_reference import DOC_PATH, spec_json_schema, spec_markdown
from search.cli import cli

ROOT = Path(__file__).resolve().parents[2]


def test_docs_spec_md_is_generated_from_the_models() -> None:
    checked_in = (ROOT / DOC_PATH).read_text(encoding="utf-8")
    assert checked_in == spec_markdown(), (
        f"{DOC_PATH} is out of date: run `llmcap search schema --markdown > {DOC_PATH}`"
    )


def test_every_field_of_every_section_says_what_it_means() -> None:
    sections = model_sections(SearchSpec)
    paths = {p for ps, _ in sections for p in ps}
    assert {"workload", "space", "space.schedulers.<name>", "slo.filters[]", "capacity"} <= paths
    for path, model in sections:
        for name, field in model.model_fields.items():
            assert field.description, f"{path or 'top level'}.{name} has no description"
            assert f"| `{name}` |" in spec_markdown()


def test_schema_command_prints_the_json_schema_and_the_markdown() -> None:
    result = CliRunner().invoke(cli, ["search", "schema"])
    assert result.exit_code == 0
    schema = json.loads(result.output)
    assert schema == spec_json_schema()
    assert set(schema["required"]) == {"model", "skus"}
    assert set(schema["properties"]) == set(SearchSpec.model_fields)
    markdown = CliRunner().invoke(cli, ["search", "schema", "--markdown"])
    assert markdown.output == spec_markdown()


def test_the_examples_use_only_fields_the_reference_documents() -> None:
    documented = {
        name for _, model in model_sections(SearchSpec) for name in model.model_fields
    } | {"sarathi", "vllm", "orca", "static", "sglang"}  # scheduler names as map keys

    def keys(node: object) -> set[str]:
        if isinstance(node, dict):
            return set(node) | {k for v in node.values() for k in keys(v)}
        if isinstance(node, list):
            return {k for v in node for k in keys(v)}
        return set()

    for example in (ROOT / "examples").glob("*.yaml"):
        document = yaml.safe_load(example.read_text())
        if "services" in document:
            continue  # a capacity plan (llmcap plan), not a search spec
        used = keys(document)
        assert used <= documented, f"{example.name}: {sorted(used - documented)}"
