"""Turning user-input errors into one clear line (and exit code 2), never a traceback."""

from __future__ import annotations

import reprlib
import sys
from types import UnionType
from typing import Union, get_args, get_origin

from pydantic import BaseModel, ValidationError


class SpecError(ValueError):
    """A spec or config file that cannot be read."""


class PlotError(ValueError):
    """A plot that cannot be drawn (nothing to plot, an unknown file type, plotly missing)."""


class OutputError(ValueError):
    """An output file that cannot be written (unknown type, no such folder, not writable)."""


# errors whose message is written for the user as it stands, by where they are defined: an
# exception can only be of a class whose module is loaded, so checking needs no import (and a
# command does not load the database, Ray or the validation datasets to report its errors)
_USER_ERRORS = (
    "sku_catalog._loader:CatalogError",
    "estimators._models:UnknownModelError",
    "estimators._models:ModelConfigError",
    "estimators._memory:ParallelismError",
    "estimators._memory:DoesNotFitError",
    "estimators._memory:MemoryFractionError",
    "estimators._profiled:ProfiledDataMissing",
    "simulator._deployment:DecodePoolError",
    "estimators._aic_tables:AicTableError",
    "estimators._op_tables:OpTablesError",
    "estimators.profiler._device:ProfilerError",
    "estimators.profiler._vidur_import:VidurImportError",
    "workloads._errors:WorkloadError",
    "search._db.errors:DatabaseError",
    "search._executors:ExecutorError",
    "search._ray_jobs:RayJobsError",
    "search._upload:UploadError",
    "search._validate._aic_silicon:DatasetError",
)


def user_error_classes() -> list[str]:
    """The module:Class paths of the errors written for the user (for tests)."""
    return list(_USER_ERRORS)


def is_user_error(exc: BaseException) -> bool:
    """Whether `exc`'s message is written for the user (print it as it stands, exit 2)."""
    if isinstance(exc, SpecError | PlotError | OutputError | FileNotFoundError):
        return True
    for path in _USER_ERRORS:
        module_name, name = path.split(":")
        module = sys.modules.get(module_name)
        if module is not None and isinstance(exc, getattr(module, name)):
            return True
    return False


def format_validation_error(
    error: ValidationError, source: str, model: type[BaseModel] | None = None
) -> str:
    """Each problem as `field: message (got: value)`, one per line.

    With the validated `model`, an unknown field is shown with the fields allowed there.
    """
    lines = [f"invalid {source}:"]
    for item in error.errors():
        loc = [str(part) for part in item["loc"]]
        message = item["msg"].removeprefix("Value error, ")
        if loc and loc[-1] == "[key]":  # a mapping key that is not allowed
            loc, message = loc[:-2], f"key {loc[-2]!r}: {message}"
        elif item["type"] == "extra_forbidden":
            message = "unknown field"
            elsewhere = _paths_of_field(model, str(item["loc"][-1])) if model else []
            if elsewhere:
                message += f" (it belongs at {' or '.join(elsewhere)})"
            allowed = _fields_at(model, item["loc"][:-1]) if model else None
            if allowed:
                message += f"; allowed: {', '.join(allowed)}"
        elif model is not None and item["type"] != "missing":
            message += _expected(model, item["loc"])
        got = item.get("input")
        shown = (
            "" if isinstance(got, dict) or item["type"] in _NO_INPUT else f" (got: {_brief(got)})"
        )
        field = ".".join(loc)
        lines.append(f"  {field}: {message}{shown}" if field else f"  {message}{shown}")
    return "\n".join(lines)


_NO_INPUT = frozenset({"missing", "extra_forbidden"})  # the value says nothing new

_BRIEF = reprlib.Repr()
_BRIEF.maxlevel, _BRIEF.maxlist, _BRIEF.maxdict = 3, 8, 8
_BRIEF.maxstring, _BRIEF.maxlong, _BRIEF.maxother = 120, 60, 120


def _brief(value: object) -> str:
    """repr of a value, cut short: an input can be megabytes of text or deeply nested."""
    return _BRIEF.repr(value)


def _paths_of_field(model: type[BaseModel], name: str) -> list[str]:
    """Where in `model`'s sections a field called `name` lives (``strategy.trials``)."""
    from search._model_fields import model_sections

    return [
        f"{path}.{name}" if path else name
        for paths, section in model_sections(model)
        if name in section.model_fields
        for path in paths[:1]
    ]


def _expected(model: type[BaseModel], loc: tuple) -> str:
    """"; expected TYPE (e.g. EXAMPLE)" for the field `loc` names, or "" for an element."""
    from search._model_fields import type_name

    parent = _model_at(model, loc[:-1])
    field = parent.model_fields.get(str(loc[-1])) if parent is not None and loc else None
    if field is None:
        return ""
    expected = type_name(field.annotation)
    section = _model_at(model, loc)
    if section is not None:  # a section: name its fields
        expected = expected.replace("section", f"a section of {', '.join(section.model_fields)}")
    text = f"; expected {expected}"
    description = field.description or ""
    if "e.g. " in description:
        example = description.split("e.g. ", 1)[1].split("; ")[0].rstrip(".")
        text += f", e.g. {example}"
    return text


def _model_at(model: type[BaseModel], loc: tuple) -> type[BaseModel] | None:
    """The model that `loc` points into (through lists and mappings), or None."""
    annotation: object = model
    for part in loc:
        annotation = _without_none(annotation)
        if _is_model(annotation):
            field = annotation.model_fields.get(str(part))
            if field is None:
                return None
            annotation = field.annotation
        elif get_origin(annotation) in (list, tuple, set, frozenset, dict):
            annotation = get_args(annotation)[-1]
        else:
            return None
    annotation = _without_none(annotation)
    return annotation if _is_model(annotation) else None


def _fields_at(model: type[BaseModel], loc: tuple) -> list[str] | None:
    """The field names of the model that `loc` points into (through lists and mappings)."""
    section = _model_at(model, loc)
    return list(section.model_fields) if section is not None else None


def _without_none(annotation: object) -> object:
    """X for an optional X (X | None), else the annotation as it is."""
    if get_origin(annotation) in (Union, UnionType):
        members = [a for a in get_args(annotation) if a is not type(None)]
        if len(members) == 1:
            return members[0]
    return annotation


def _is_model(annotation: object) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)
