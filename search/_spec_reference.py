"""The search spec's reference, made from its pydantic models (so it cannot drift from them).

`spec_json_schema()` is what `llmcap search schema` prints; `spec_markdown()` is
``docs/spec.md`` (a test checks the checked-in file against it).
"""

from __future__ import annotations

import enum
import json
import types
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

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
    for paths, model in _sections(SearchSpec):
        title = ", ".join(f"`{p}`" for p in paths) if paths[0] else "Top level"
        doc = (model.__doc__ or "").strip().split("\n\n")[0].replace("\n", " ")
        parts.append(f"\n## {title}\n\n")
        if doc and model is not SearchSpec:
            parts.append(f"{doc}\n\n")
        parts.append("| field | type | default | meaning |\n|---|---|---|---|\n")
        for name, field in model.model_fields.items():
            parts.append(
                f"| `{name}` | {_type_name(field.annotation)} | {_default(field)} | "
                f"{(field.description or '').replace('|', '/')} |\n"
            )
    return "".join(parts)


def _sections(root: type[BaseModel]) -> list[tuple[list[str], type[BaseModel]]]:
    """([dotted paths], model) of `root` and every model nested in it, in the order they
    first appear; a model used in several places (an SLO bound) lists every path."""
    found: dict[type[BaseModel], list[str]] = {}

    def walk(model: type[BaseModel], path: str) -> None:
        found.setdefault(model, []).append(path)
        if len(found[model]) > 1:
            return
        for name, field in model.model_fields.items():
            for inner in _models_in(field.annotation):
                key = f"{path}.{name}" if path else name
                if any(get_origin(m) is dict for m in _members(field.annotation)):
                    key += ".<name>"
                elif any(get_origin(m) is list for m in _members(field.annotation)):
                    key += "[]"
                walk(inner, key)

    walk(root, "")
    return [(paths, model) for model, paths in found.items()]


def _members(annotation: Any) -> tuple[Any, ...]:
    if get_origin(annotation) in (Union, types.UnionType):
        return get_args(annotation)
    return (annotation,)


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    found = []
    for member in _members(annotation):
        args = get_args(member) if get_origin(member) in (list, dict) else (member,)
        for arg in args:
            if isinstance(arg, type) and issubclass(arg, BaseModel):
                found.append(arg)
    return found


def _type_name(annotation: Any) -> str:
    members = [m for m in _members(annotation) if m is not type(None)]
    text = " or ".join(_one_type(m) for m in members)
    return text + (" or null" if len(members) < len(_members(annotation)) else "")


def _one_type(annotation: Any) -> str:
    origin = get_origin(annotation)
    if origin is Literal:
        return " / ".join(f"`{a}`" for a in get_args(annotation))
    if origin is list:
        return f"list of {_one_type(get_args(annotation)[0])}"
    if origin is dict:
        key, value = get_args(annotation)
        return f"map {_one_type(key)} -> {_one_type(value)}"
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return " / ".join(f"`{m.value}`" for m in annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "section"
    if isinstance(annotation, type) and issubclass(annotation, Path):
        return "path"
    name = getattr(annotation, "__name__", None) or str(annotation)
    if get_origin(annotation) is not None or "Annotated" in str(annotation):
        name = getattr(get_args(annotation)[0], "__name__", name) if get_args(annotation) else name
    return {"str": "string", "int": "integer", "float": "number", "bool": "true / false"}.get(
        name, name
    )


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
