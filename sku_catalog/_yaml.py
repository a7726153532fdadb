"""Reading the YAML files users give llmcap: UTF-8 text, bounded size and depth, unique keys.

Every YAML input (GPU catalogs, search specs, ``llmcap simulate --config``) is read here, so
that all of them refuse the same things with the same messages:

- a file that is not UTF-8 text, is missing, is a directory or cannot be opened;
- a file over `MAX_YAML_BYTES` (a spec or a catalog is a few KB: a bigger file is the wrong
  file, and reading it whole would cost its size in memory);
- mappings and lists nested deeper than `MAX_YAML_DEPTH` (PyYAML composes recursively: a
  deep file would end in a RecursionError);
- more than `MAX_YAML_NODES` values once aliases are expanded (a few anchors that refer to
  each other can describe billions of values: every consumer walks the expanded tree);
- a mapping with the same key twice (PyYAML keeps the last one silently).

Dates stay text (the consumers' pydantic models parse them and name the field when they are
bad). The module lives in ``sku_catalog``, the lowest package, so that every package above it
can use it without breaking the import direction (search -> simulator -> estimators ->
sku_catalog).
"""

from __future__ import annotations

import os
from typing import Any

import yaml

__all__ = [
    "MAX_YAML_BYTES",
    "MAX_YAML_DEPTH",
    "MAX_YAML_NODES",
    "YamlInputError",
    "parse_yaml",
    "read_text_file",
    "read_yaml_file",
    "shorten",
]

MAX_YAML_BYTES = 256 * 1024  # pure-Python PyYAML reads about 100 KB/s: at most a few seconds
MAX_YAML_DEPTH = 32  # the deepest spec section nests 4 levels
MAX_YAML_NODES = 20_000  # values after expanding aliases; a spec or catalog holds hundreds

_SHOWN_PATH_CHARS = 120


class YamlInputError(ValueError):
    """A YAML input file that cannot be used; the message names the file and the problem."""


def shorten(text: object, limit: int = _SHOWN_PATH_CHARS) -> str:
    """``text`` as it is, or its start and end around "..." when longer than ``limit``."""
    text = str(text)
    if len(text) <= limit:
        return text
    half = (limit - 3) // 2
    return f"{text[:half]}...{text[-half:]}"


def read_text_file(path: str | os.PathLike[str], what: str, max_bytes: int = MAX_YAML_BYTES) -> str:
    """The UTF-8 text of ``path``; `YamlInputError` saying what is wrong otherwise.

    ``what`` names the file for the user ("spec file", "GPU catalog file").
    """
    shown = shorten(os.fspath(path))
    try:
        with open(path, "rb") as fh:
            data = fh.read(max_bytes + 1)
    except FileNotFoundError:
        raise YamlInputError(f"{what} not found: {shown}") from None
    except IsADirectoryError:
        raise YamlInputError(f"{what} {shown} is a directory, not a YAML file") from None
    except OSError as exc:
        raise YamlInputError(f"cannot read {what} {shown}: {exc.strerror or exc}") from None
    except ValueError as exc:  # e.g. a NUL byte in the path
        raise YamlInputError(f"cannot read {what} {shown}: {exc}") from None
    if len(data) > max_bytes:
        raise YamlInputError(
            f"{what} {shown} is over {max_bytes:,} bytes; a YAML input is a few KB "
            "(is it the right file?)"
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise YamlInputError(
            f"{what} {shown} is not UTF-8 text (byte {exc.object[exc.start]:#04x} at offset "
            f"{exc.start}); save it as UTF-8"
        ) from None


def read_yaml_file(path: str | os.PathLike[str], what: str) -> Any:
    """Read and parse a YAML file (see the module docstring for what is refused)."""
    return parse_yaml(read_text_file(path, what), f"{what} {shorten(os.fspath(path))}")


def parse_yaml(text: str, source: str) -> Any:
    """The document in ``text``; `YamlInputError` naming ``source``, the line and the problem."""
    loader = _SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_expanded_size(node, source)
        return loader.construct_document(node)
    except YamlInputError:
        raise
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = exc.problem or exc.context or "invalid YAML"
        syntax = isinstance(exc, yaml.scanner.ScannerError | yaml.parser.ParserError)
        kind = "YAML syntax error" if syntax else "YAML error"
        raise YamlInputError(f"{source}: {kind}{where}: {problem}") from None
    except (yaml.YAMLError, ValueError, TypeError, OverflowError) as exc:
        raise YamlInputError(f"{source}: YAML error: {exc}") from None
    finally:
        loader.dispose()


class _SafeLoader(yaml.SafeLoader):
    """PyYAML's safe loader with a depth limit, unique keys and dates kept as text."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._nodes = 0

    def compose_node(self, parent: yaml.Node | None, index: object) -> yaml.Node:
        self._depth += 1
        self._nodes += 1
        try:
            if self._depth > MAX_YAML_DEPTH:
                problem = f"nested more than {MAX_YAML_DEPTH} levels deep"
            elif self._nodes > MAX_YAML_NODES:
                problem = f"more than {MAX_YAML_NODES:,} values; a YAML input holds hundreds"
            else:
                return super().compose_node(parent, index)  # type: ignore[arg-type]
            raise yaml.composer.ComposerError(None, None, problem, self.peek_event().start_mark)
        finally:
            self._depth -= 1


def _construct_mapping_unique(loader: yaml.SafeLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        try:
            duplicate = key in seen
        except TypeError:  # unhashable key; the normal constructor reports it
            continue
        if duplicate:
            raise yaml.constructor.ConstructorError(
                "while constructing a mapping",
                node.start_mark,
                f"found duplicate key {key!r}",
                key_node.start_mark,
            )
        seen.add(key)
    return loader.construct_mapping(node, deep=True)


def _construct_timestamp_as_text(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> str:
    return str(loader.construct_scalar(node))


_SafeLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
    _construct_mapping_unique,  # type: ignore[arg-type]
)
_SafeLoader.add_constructor(
    "tag:yaml.org,2002:timestamp",
    _construct_timestamp_as_text,  # type: ignore[arg-type]
)


def _check_expanded_size(root: yaml.Node, source: str) -> None:
    """Refuse a document whose values, aliases expanded, number over `MAX_YAML_NODES`."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()

    def size(node: yaml.Node) -> int:  # depth is bounded by MAX_YAML_DEPTH
        known = sizes.get(id(node))
        if known is not None:
            return known
        if id(node) in open_nodes:
            raise YamlInputError(f"{source}: an alias (*name) refers to a value that holds it")
        open_nodes.add(id(node))
        total = 1
        if isinstance(node, yaml.SequenceNode):
            total += sum(size(child) for child in node.value)
        elif isinstance(node, yaml.MappingNode):
            total += sum(size(key) + size(value) for key, value in node.value)
        sizes[id(node)] = min(total, MAX_YAML_NODES + 1)
        return sizes[id(node)]

    if size(root) > MAX_YAML_NODES:
        raise YamlInputError(
            f"{source}: more than {MAX_YAML_NODES:,} values once its aliases (*name) are "
            "expanded; a YAML input holds hundreds"
        )
