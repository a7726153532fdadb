"""The GPU catalog: the built-in YAML data plus user files, validated at the edge.

Catalog files have one top-level key, ``gpus``, mapping a SKU id to its fields::

    gpus:
      h100-sxm:                 # an existing id: only the fields given are replaced
        price_per_gpu_hour: 2.49
        price_source: "our negotiated rate"
        price_date: 2026-01-15
      mi300x:                   # a new id: every required field must be given
        name: MI300X
        ...

The built-in file (``sku_catalog/data/gpus.yaml``) is read with ``importlib.resources`` so
that an installed wheel works; user files are merged over it in the order given.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from functools import lru_cache
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from sku_catalog._types import GpuSku, LinkKind, NodeShape
from sku_catalog._yaml import YamlInputError, parse_yaml, read_text_file, shorten

__all__ = [
    "BUILTIN_CATALOG_FILE",
    "Catalog",
    "CatalogError",
    "UnknownSkuError",
    "load_catalog",
]

BUILTIN_CATALOG_FILE = "gpus.yaml"  # inside the package folder sku_catalog/data/

_ID_PATTERN = re.compile(r"^[a-z0-9][a-z0-9._+-]*$")

# Fields a new SKU must define (fp8_tflops, fp4_tflops and architecture have defaults: null,
# null and "").
_REQUIRED_FIELDS: tuple[str, ...] = (
    "name",
    "memory_gb",
    "memory_bandwidth_tbps",
    "fp16_tflops",
    "nodes",
    "price_per_gpu_hour",
    "price_source",
    "price_date",
    "power_w",
)
_OPTIONAL_DEFAULTS: dict[str, Any] = {"fp8_tflops": None, "fp4_tflops": None, "architecture": ""}

_PositiveFloat = Annotated[float, Field(strict=True, gt=0)]
_PositiveInt = Annotated[int, Field(strict=True, ge=1)]
_NonEmptyStr = Annotated[str, Field(strict=True, min_length=1)]


class CatalogError(ValueError):
    """A catalog file is missing, is not valid YAML, or does not validate."""


class UnknownSkuError(CatalogError, KeyError):
    """No SKU in the catalog has this id or display name.

    Also a `KeyError`, so that ``"x" in catalog`` and mapping idioms behave as usual.
    """

    def __init__(self, sku_id: object, known_ids: Iterable[str]) -> None:
        self.sku_id = sku_id
        self.known_ids = tuple(known_ids)
        super().__init__(
            f"unknown GPU SKU {sku_id!r}; known ids: {', '.join(self.known_ids) or '(none)'}"
        )

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


# --------------------------------------------------------------------------- validation models


class _NodeShapeModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    gpus_per_node: _PositiveInt
    intra_node_link: LinkKind
    intra_node_bandwidth_gbps: _PositiveFloat
    inter_node_bandwidth_gbps: _PositiveFloat


Architecture = Literal[
    "volta", "turing", "ampere", "ada", "hopper", "blackwell", "cdna2", "cdna3", "cdna4"
]


class _SkuFields(BaseModel):
    """The fields of one SKU entry; all optional so that a user file can give only some."""

    model_config = ConfigDict(extra="forbid")

    name: _NonEmptyStr | None = None
    architecture: Architecture | None = None
    memory_gb: _PositiveFloat | None = None
    memory_bandwidth_tbps: _PositiveFloat | None = None
    fp16_tflops: _PositiveFloat | None = None
    fp8_tflops: _PositiveFloat | None = None
    fp4_tflops: _PositiveFloat | None = None
    power_w: _PositiveFloat | None = None
    nodes: Annotated[list[_NodeShapeModel], Field(min_length=1)] | None = None
    price_per_gpu_hour: _PositiveFloat | None = None
    price_source: _NonEmptyStr | None = None
    price_date: str | None = None

    @field_validator("price_date", mode="before")
    @classmethod
    def _iso_date(cls, value: object) -> object:
        if value is None:
            return None
        if isinstance(value, dt.datetime):
            return value.date().isoformat()
        if isinstance(value, dt.date):
            return value.isoformat()
        if isinstance(value, str):
            try:
                return dt.date.fromisoformat(value.strip()).isoformat()
            except ValueError:
                pass
        raise ValueError(f"must be an ISO date YYYY-MM-DD, got {value!r}")


_ALLOWED_FIELDS: tuple[str, ...] = tuple(_SkuFields.model_fields)
_ALLOWED_NODE_FIELDS: tuple[str, ...] = tuple(_NodeShapeModel.model_fields)


def _format_loc(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _format_validation_error(sku_id: str, exc: ValidationError) -> list[str]:
    lines: list[str] = []
    for err in exc.errors(include_url=False):
        loc = tuple(err["loc"])
        field = _format_loc(loc) or "(entry)"
        if err["type"] == "extra_forbidden":
            allowed = _ALLOWED_NODE_FIELDS if "nodes" in loc[:-1] else _ALLOWED_FIELDS
            lines.append(
                f"SKU {sku_id!r}: unknown field {field!r} (allowed fields: {', '.join(allowed)})"
            )
            continue
        msg = str(err["msg"])
        if msg.startswith("Value error, "):
            msg = msg[len("Value error, ") :]
        if msg.startswith("Input should be "):
            msg = "must be " + msg[len("Input should be ") :]
        value = err.get("input")
        if err["type"] == "enum" and "intra_node_link" in loc:
            msg = f"must be one of {', '.join(k.value for k in LinkKind)}"
        if err["type"] == "literal_error" and "architecture" in loc:
            msg = f"must be one of {', '.join(Architecture.__args__)}"
        if err["type"] == "model_type" and "nodes" in loc:
            msg = f"must be a mapping with {', '.join(_ALLOWED_NODE_FIELDS)}"
        got = "" if err["type"] == "value_error" else f" (got {value!r})"
        lines.append(f"SKU {sku_id!r}: field {field!r}: {msg}{got}")
    return lines


# --------------------------------------------------------------------------- YAML reading


def _parse_yaml(text: str, source: str) -> Any:
    try:
        return parse_yaml(text, source)
    except YamlInputError as exc:
        raise CatalogError(str(exc)) from None


def _read_user_file(path: str | Path) -> tuple[str, str]:
    p = Path(path).expanduser()
    try:
        return read_text_file(p, "GPU catalog file"), shorten(p)
    except YamlInputError as exc:
        raise CatalogError(str(exc)) from None


def _entries(document: Any, source: str) -> dict[str, Any]:
    """The ``gpus`` mapping of one parsed file, with its top level checked."""
    if document is None:
        raise CatalogError(f"{source}: the file is empty; expected a top-level 'gpus:' mapping")
    if not isinstance(document, dict):
        raise CatalogError(
            f"{source}: expected a mapping with a top-level 'gpus' key, "
            f"got a {type(document).__name__}"
        )
    unknown = sorted(str(k) for k in document if k != "gpus")
    if unknown:
        raise CatalogError(
            f"{source}: unknown top-level key(s) {', '.join(map(repr, unknown))} (allowed: 'gpus')"
        )
    if "gpus" not in document:
        raise CatalogError(f"{source}: missing the top-level 'gpus' key")
    gpus = document["gpus"]
    if gpus is None:
        return {}
    if not isinstance(gpus, dict):
        raise CatalogError(
            f"{source}: 'gpus' must map SKU ids to their fields, got a {type(gpus).__name__}"
        )
    return gpus


# --------------------------------------------------------------------------- merging


def _merge_file(
    fields_by_id: dict[str, dict[str, Any]], document: Any, source: str
) -> dict[str, dict[str, Any]]:
    """Merge one parsed file over ``fields_by_id`` (not modified); returns the new mapping."""
    merged = {sku_id: dict(fields) for sku_id, fields in fields_by_id.items()}
    by_name = {str(f["name"]).lower(): sku_id for sku_id, f in merged.items()}
    errors: list[str] = []
    for raw_key, raw_fields in _entries(document, source).items():
        if not isinstance(raw_key, str) or not raw_key.strip():
            errors.append(f"SKU id {raw_key!r}: ids must be non-empty strings")
            continue
        key = raw_key.strip().lower()
        sku_id = key if key in merged else by_name.get(key, key)
        if sku_id not in merged and not _ID_PATTERN.match(sku_id):
            errors.append(
                f"SKU id {raw_key!r}: ids are lower-case letters, digits and . _ + - "
                "(e.g. 'h100-sxm')"
            )
            continue
        if raw_fields is None:
            raw_fields = {}
        if not isinstance(raw_fields, dict):
            errors.append(
                f"SKU {raw_key!r}: expected a mapping of fields, got {type(raw_fields).__name__}"
            )
            continue
        try:
            patch = _SkuFields.model_validate(raw_fields).model_dump(exclude_unset=True)
        except ValidationError as exc:
            errors.extend(_format_validation_error(raw_key, exc))
            continue
        is_new = sku_id not in merged
        fields = {} if is_new else merged[sku_id]
        fields.update(patch)
        missing = [f for f in _REQUIRED_FIELDS if fields.get(f) is None]
        if missing:
            if is_new:
                errors.append(
                    f"SKU {raw_key!r} is new and incomplete: missing required field(s) "
                    f"{', '.join(missing)} (a new SKU must define: {', '.join(_REQUIRED_FIELDS)})"
                )
            else:
                errors.append(
                    f"SKU {raw_key!r}: required field(s) {', '.join(missing)} cannot be null"
                )
            continue
        for name, default in _OPTIONAL_DEFAULTS.items():
            fields.setdefault(name, default)
        if fields["architecture"] is None:
            fields["architecture"] = ""
        merged[sku_id] = fields
        by_name[str(fields["name"]).lower()] = sku_id
    if errors:
        raise CatalogError(
            f"invalid GPU catalog file {source}:\n" + "\n".join(f"  {e}" for e in errors)
        )
    return merged


def _to_sku(sku_id: str, fields: Mapping[str, Any]) -> GpuSku:
    nodes = tuple(
        NodeShape(
            gpus_per_node=int(n["gpus_per_node"]),
            intra_node_link=LinkKind(n["intra_node_link"]),
            intra_node_bandwidth_gbps=float(n["intra_node_bandwidth_gbps"]),
            inter_node_bandwidth_gbps=float(n["inter_node_bandwidth_gbps"]),
        )
        for n in fields["nodes"]
    )
    fp8 = fields.get("fp8_tflops")
    fp4 = fields.get("fp4_tflops")
    return GpuSku(
        id=sku_id,
        name=str(fields["name"]),
        memory_gb=float(fields["memory_gb"]),
        memory_bandwidth_tbps=float(fields["memory_bandwidth_tbps"]),
        fp16_tflops=float(fields["fp16_tflops"]),
        fp8_tflops=None if fp8 is None else float(fp8),
        nodes=nodes,
        price_per_gpu_hour=float(fields["price_per_gpu_hour"]),
        price_source=str(fields["price_source"]),
        price_date=str(fields["price_date"]),
        power_w=float(fields["power_w"]),
        architecture=str(fields.get("architecture") or ""),
        fp4_tflops=None if fp4 is None else float(fp4),
    )


@lru_cache(maxsize=1)
def _builtin_fields() -> MappingProxyType[str, dict[str, Any]]:
    resource = resources.files("sku_catalog").joinpath("data").joinpath(BUILTIN_CATALOG_FILE)
    source = f"<built-in sku_catalog/data/{BUILTIN_CATALOG_FILE}>"
    try:
        text = resource.read_text(encoding="utf-8")
    except OSError as exc:  # a broken installation
        raise CatalogError(f"cannot read the built-in GPU catalog {source}: {exc}") from None
    return MappingProxyType(_merge_file({}, _parse_yaml(text, source), source))


# --------------------------------------------------------------------------- the catalog

_MISSING: Any = object()


class Catalog(Mapping[str, GpuSku]):
    """An immutable mapping of SKU id -> `GpuSku`, in file order.

    Lookups (``catalog[key]``, ``get``, ``in``) are case-insensitive and accept either the id
    (``"h100-sxm"``) or the display name (``"H100-80GB-SXM"``); iteration yields the ids.
    """

    __slots__ = ("_index", "_skus")

    def __init__(self, skus: Iterable[GpuSku]) -> None:
        by_id: dict[str, GpuSku] = {}
        index: dict[str, str] = {}
        for sku in skus:
            if sku.id in by_id:
                raise CatalogError(f"duplicate GPU SKU id {sku.id!r}")
            by_id[sku.id] = sku
        for sku in by_id.values():
            index[sku.id.lower()] = sku.id
        for sku in by_id.values():
            key = sku.name.lower()
            other = index.get(key)
            if other is not None and other != sku.id:
                raise CatalogError(
                    f"GPU SKU {sku.id!r} has display name {sku.name!r}, which is already "
                    f"the id or name of SKU {other!r}; display names must be unique"
                )
            index[key] = sku.id
        self._skus: Mapping[str, GpuSku] = MappingProxyType(by_id)
        self._index: Mapping[str, str] = MappingProxyType(index)

    def get(self, sku_id: str, default: Any = _MISSING) -> GpuSku:  # type: ignore[override]
        """The SKU with this id or display name (any case).

        Raises `UnknownSkuError` (listing the known ids) unless a ``default`` is given.
        """
        resolved = self._index.get(sku_id.strip().lower()) if isinstance(sku_id, str) else None
        if resolved is None:
            if default is not _MISSING:
                return default
            raise UnknownSkuError(sku_id, self._skus)
        return self._skus[resolved]

    def __getitem__(self, sku_id: str) -> GpuSku:
        return self.get(sku_id)

    def __iter__(self) -> Iterator[str]:
        return iter(self._skus)

    def __len__(self) -> int:
        return len(self._skus)

    def ids(self) -> list[str]:
        """The SKU ids, in catalog order."""
        return list(self._skus)

    def skus(self) -> list[GpuSku]:
        """The SKUs, in catalog order."""
        return list(self._skus.values())

    def __repr__(self) -> str:
        return f"Catalog({', '.join(self._skus)})"


def load_catalog(extra_files: Sequence[str | Path] = ()) -> Catalog:
    """The built-in GPU catalog, with each user file in ``extra_files`` merged over it in order.

    A user file may add SKUs (all required fields given) or override some fields of existing
    ones (e.g. only ``price_per_gpu_hour``; ``nodes``, when given, replaces the whole list).
    Raises `CatalogError` naming the file, the SKU and the field on any problem.
    """
    if isinstance(extra_files, (str, Path)):
        extra_files = [extra_files]
    fields_by_id: dict[str, dict[str, Any]] = dict(_builtin_fields())
    for path in extra_files:
        text, source = _read_user_file(path)
        fields_by_id = _merge_file(fields_by_id, _parse_yaml(text, source), source)
    try:
        return Catalog(_to_sku(sku_id, f) for sku_id, f in fields_by_id.items())
    except CatalogError as exc:
        files = ", ".join(str(p) for p in extra_files) or "the built-in catalog"
        raise CatalogError(f"{exc} (after merging {files})") from None
