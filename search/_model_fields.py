"""Walking pydantic models for people: every nested section with its paths, type names.

Used by the spec reference (`search._spec_reference`) and by validation messages
(`search._errors`), so both describe fields the same way.
"""

from __future__ import annotations

import enum
import types
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel

__all__ = ["model_sections", "type_name"]


def model_sections(root: type[BaseModel]) -> list[tuple[list[str], type[BaseModel]]]:
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


def type_name(annotation: Any) -> str:
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
