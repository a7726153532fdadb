"""The search spec's reference, made from its pydantic models (so it cannot drift from them).

`spec_json_schema()` is what `llmcap search schema` prints; `spec_markdown()` is
``docs/spec.md`` (a test checks the checked-in file against it).
"""

from __future__ import annotations

import enum
import json
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from search._model_fields import model_sections, type_name
from search._spec import SearchSpec

__all__ = ["spec_json_schema", "spec_markdown"]

DOC_PATH = "docs/spec.md"
_HEADER = """# Search spec reference

Generated from the spec's own models by `llmcap search schema --markdown` (do not edit by
hand; a test checks this file against them). `llmcap search schema` prints the JSON Schema.
A spec is YAML; every section but `model` and `skus` has defaults. Example: `examples/quick.yaml`.
"""


def spec_json_schema() -> dict[str, Any]:
    """The JSON Schema of a search spec (draft 2020-12, as pydantic writes it)."""
    return SearchSpec.model_json_schema()


def spec_markdown() -> str:
    """One table per section: field, type, default, what it means."""
    parts = [_HEADER]
    for paths, model in model_sections(SearchSpec):
        title = ", ".join(f"`{p}`" for p in paths) if paths[0] else "Top level"
        doc = (model.__doc__ or "").strip().split("\n\n")[0].replace("\n", " ")
        parts.append(f"\n## {title}\n\n")
        if doc and model is not SearchSpec:
            parts.append(f"{doc}\n\n")
        parts.append("| field | type | default | meaning |\n|---|---|---|---|\n")
        for name, field in model.model_fields.items():
            parts.append(
                f"| `{name}` | {type_name(field.annotation)} | {_default(field)} | "
                f"{(field.description or '').replace('|', '/')} |\n"
            )
    return "".join(parts)


def _default(field: Any) -> str:
    if field.is_required():
        return "required"
    value = field.default_factory() if field.default_factory is not None else field.default
    if value is PydanticUndefined:
        return "required"
    if isinstance(value, BaseModel):
        fields = value.model_dump(mode="json", exclude_defaults=False)
        if len(json.dumps(fields)) > 70:  # a long one: see its own table
            return "its section's defaults"
        return f"`{json.dumps(fields)}`"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, list):
        return f"`{json.dumps([v.value if isinstance(v, enum.Enum) else v for v in value])}`"
    if value is None:
        return "null"
    return f"`{value.value if isinstance(value, enum.Enum) else value}`"
