"""``Schedule`` manifests: the YAML users ``kubectl apply`` and ``tickwork sync -f`` reads.

Loading stops at the first problem (files in sorted order, documents in file order) and raises
:class:`ManifestError`, whose one-line message names the file, the document, the schedule and the
field, for example ``schedules/a.yaml: document 2: Schedule 'nightly': spec.schedule: ...``.
Every document is checked before anything is returned, so a caller writes nothing on error.
Whatever a file holds (binary junk, YAML nested thousands of levels, values beyond every limit)
ends as a :class:`ManifestError`, never another exception.
"""

from __future__ import annotations

import os
from collections.abc import Hashable, Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

from tickwork.errors import TickworkError, did_you_mean
from tickwork.schedules.checks import DefinitionError, key_name, shown
from tickwork.schedules.definition import ScheduleDefinition, check_manifest_rules

API_VERSION = "tickwork.io/v1"
KIND = "Schedule"
LIST_KINDS = {"List": "v1", "ScheduleList": API_VERSION}
"""Kinds of list documents whose ``items`` are Schedules, with their apiVersion."""

MAX_FILE_BYTES = 8 * 1024 * 1024
"""A larger manifest file is refused unread (a Kubernetes object is at most 1.5 MiB)."""
MAX_YAML_DEPTH = 100
"""Deeper YAML is refused while parsing, with its position (a payload nests at most 64)."""

_DOCUMENT_FIELDS = frozenset({"apiVersion", "kind", "metadata", "spec", "status"})
_SUFFIXES = (".yaml", ".yml")


class ManifestError(TickworkError):
    """A manifest cannot be loaded; the message names file, document, schedule and field."""

    def __init__(self, where: str, reason: str) -> None:
        super().__init__(f"{where}: {reason}")
        self.where = where
        self.reason = reason


def load_path(path: str | Path, *, namespace: str | None = None) -> list[ScheduleDefinition]:
    """Load the Schedules of a file, or of every ``*.yaml``/``*.yml`` file under a directory.

    Directories are read recursively in sorted order, skipping names that start with ``.``
    (which also skips the ``..data`` links of a mounted ConfigMap). With ``namespace``, a
    Schedule that names another namespace is an error, as with ``kubectl apply -n``.
    """
    root = Path(path)
    if root.is_dir():
        files = _manifest_files(root)
        if not files:
            raise ManifestError(str(path), "no *.yaml or *.yml files found")
    elif root.exists():
        files = [root]
    else:
        raise ManifestError(str(path), "no such file or directory")
    loaded: list[tuple[str, ScheduleDefinition]] = []
    for file in files:
        try:
            if file.stat().st_size > MAX_FILE_BYTES:
                raise ManifestError(str(file), f"larger than {MAX_FILE_BYTES} bytes")
            text = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise ManifestError(str(file), f"cannot read: {error}") from None
        loaded.extend(_load(text, str(file), namespace))
    return _unique(loaded, str(path))


def load_documents(
    text: str, source: str, *, namespace: str | None = None
) -> list[ScheduleDefinition]:
    """Load the Schedules of one YAML text (one or more documents); ``source`` names it."""
    return _unique(_load(text, source, namespace), source)


def target_namespace(document: Mapping[str, Any]) -> str | None:
    """The schedule namespace a Schedule asks for: ``spec.scheduleNamespace``, else its own."""
    spec = document.get("spec")
    if isinstance(spec, Mapping) and isinstance(spec.get("scheduleNamespace"), str):
        return str(spec["scheduleNamespace"])
    metadata = document.get("metadata")
    if isinstance(metadata, Mapping) and isinstance(metadata.get("namespace"), str):
        return str(metadata["namespace"])
    return None


def _manifest_files(root: Path) -> list[Path]:
    found: list[Path] = []
    for directory, subdirectories, names in os.walk(root):
        subdirectories[:] = [name for name in subdirectories if not name.startswith(".")]
        found.extend(
            Path(directory, name)
            for name in names
            if name.endswith(_SUFFIXES) and not name.startswith(".")
        )
    return sorted(found)


def _unique(loaded: list[tuple[str, ScheduleDefinition]], source: str) -> list[ScheduleDefinition]:
    if not loaded:
        raise ManifestError(source, f"no {KIND} documents found")
    first: dict[str, str] = {}
    for where, definition in loaded:
        name = definition.name
        if name in first:
            raise ManifestError(
                f"{where}: {KIND} {name!r}",
                f"metadata.name: duplicate name, first defined at {first[name]}",
            )
        first[name] = where
    return [definition for _, definition in loaded]


def _load(text: str, source: str, namespace: str | None) -> list[tuple[str, ScheduleDefinition]]:
    """Each Schedule of ``text`` with where it was found (``file: document 2``)."""
    loaded = []
    for where, document in _schedule_documents(text, source):
        name = _name(where, document)
        label = f"{where}: {KIND} {shown(name)}"
        if document.get("spec") is None:
            raise ManifestError(label, "spec: is required")
        wanted = target_namespace(document)
        try:
            definition = ScheduleDefinition.from_spec(name, document["spec"])
            check_manifest_rules(name, document["spec"])
            definition.validate(namespace or wanted or "default")
        except DefinitionError as error:
            raise ManifestError(label, f"{error.field}: {error.reason}") from None
        except Exception as error:  # a value no check foresaw: still one line, not a traceback
            raise ManifestError(label, f"spec: cannot be read: {type(error).__name__}") from None
        if namespace is not None and wanted is not None and wanted != namespace:
            raise ManifestError(label, f"belongs to namespace {shown(wanted)}, not {namespace!r}")
        loaded.append((where, definition))
    return loaded


def _schedule_documents(text: str, source: str) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """The Schedule documents of a YAML text (list items included), each with its location."""
    for number, document in enumerate(_parse(text, source), start=1):
        where = f"{source}: document {number}"
        if document is None:
            continue
        if not isinstance(document, Mapping):
            raise ManifestError(where, f"must be a mapping, not {type(document).__name__}")
        kind = document.get("kind")
        if isinstance(kind, str) and kind in LIST_KINDS:
            yield from _list_items(where, document, LIST_KINDS[kind])
        else:
            _check_type(where, document)
            yield where, document


def _list_items(
    where: str, document: Mapping[str, Any], api_version: str
) -> Iterator[tuple[str, Mapping[str, Any]]]:
    if document.get("apiVersion") != api_version:
        raise ManifestError(where, f"apiVersion: must be {api_version!r} for a {document['kind']}")
    items = document.get("items")
    if not isinstance(items, list):
        raise ManifestError(where, "items: must be a list")
    for index, item in enumerate(items):
        item_where = f"{where}: items[{index}]"
        if not isinstance(item, Mapping):
            raise ManifestError(item_where, f"must be a mapping, not {type(item).__name__}")
        _check_type(item_where, item)
        yield item_where, item


def _check_type(where: str, document: Mapping[str, Any]) -> None:
    api_version, kind = document.get("apiVersion"), document.get("kind")
    if api_version != API_VERSION or kind != KIND:
        raise ManifestError(
            where,
            f"not a {API_VERSION} {KIND} (apiVersion: {shown(api_version)}, kind: {shown(kind)})",
        )
    for key in document:
        if key not in _DOCUMENT_FIELDS:
            hint = did_you_mean(key, _DOCUMENT_FIELDS) if isinstance(key, str) else ""
            raise ManifestError(where, f"{key_name(key)}: unknown field{hint}")


def _name(where: str, document: Mapping[str, Any]) -> str:
    metadata = document.get("metadata")
    if not isinstance(metadata, Mapping):
        raise ManifestError(where, "metadata: is required and must be a mapping")
    name = metadata.get("name")
    if not isinstance(name, str) or not name:
        raise ManifestError(where, "metadata.name: is required and must be a string")
    if not isinstance(metadata.get("namespace", ""), str | None):
        raise ManifestError(where, "metadata.namespace: must be a string")
    return name


def _parse(text: str, source: str) -> list[Any]:
    try:
        return list(yaml.load_all(text, Loader=_Loader))
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ManifestError(source, f"invalid YAML{at}: {error.problem}") from None
    except yaml.YAMLError as error:
        raise ManifestError(source, f"invalid YAML: {' '.join(str(error).split())}") from None
    except RecursionError:
        raise ManifestError(source, "invalid YAML: nested too deeply") from None
    except Exception as error:  # a scalar PyYAML cannot build (an int of 5000 digits, ...)
        reason = " ".join(str(error).split())[:200] or type(error).__name__
        raise ManifestError(source, f"invalid YAML: {reason}") from None


class _Loader(yaml.SafeLoader):
    """Safe YAML read as the Kubernetes API reads it: dates stay strings, repeated keys fail;
    and within bounds: nesting (PyYAML recurses per level) and integer digits."""

    _depth = 0

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        self._depth += 1
        try:
            if self._depth > MAX_YAML_DEPTH:
                mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
                reason = f"nested deeper than {MAX_YAML_DEPTH} levels"
                raise yaml.composer.ComposerError(None, None, reason, mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Hashable, Any]:
        seen: set[str] = set()
        for key_node, _ in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.tag != "tag:yaml.org,2002:merge":
                if key_node.value in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"duplicate key {key_node.value!r}", key_node.start_mark
                    )
                seen.add(key_node.value)
        return super().construct_mapping(node, deep=deep)

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        try:
            return super().construct_yaml_int(node)
        except ValueError:  # beyond Python's 4300 digits: it cannot be a valid value anyway
            message = "integer with too many digits"
            raise yaml.constructor.ConstructorError(None, None, message, node.start_mark) from None


_Loader.add_constructor("tag:yaml.org,2002:int", _Loader.construct_yaml_int)


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
