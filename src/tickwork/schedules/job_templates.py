"""A Schedule's ``spec.jobTemplate``, validated as a batch/v1 ``JobTemplateSpec`` (pure).

Two layers, both refusing with the field named
(``spec.jobTemplate.spec.template.spec.containers[0].image: is required``):

* the **Kubernetes schema** of ``io.k8s.api.batch.v1.JobTemplateSpec`` (types, 32/64-bit
  integers, unknown fields refused at every level), shipped trimmed in
  ``job_template_schema.json``: the closure of that definition in the OpenAPI schema of
  Kubernetes :data:`KUBERNETES_VERSION`, descriptions left out (about 55 KB), extracted from the
  schemas ``kubernetes-validate`` bundles and checked against them by
  ``tests/schedules/test_job_template_schema.py``. The package does not depend on
  ``kubernetes-validate`` (108 MB of schemas for every Kubernetes version, and ``jsonschema``
  with a compiled ``rpds-py``) for one definition;
* the **rules the API server applies to a Job** beyond its schema, those a user meets first:
  at least one container, each with a DNS-label ``name`` (unique) and an ``image``;
  ``restartPolicy`` ``Never`` or ``OnFailure`` (a Job refuses ``Always``, the Pod default);
  the counts and durations not negative; label keys and values as Kubernetes allows them; and
  in ``metadata`` only ``labels`` and ``annotations`` (the worker names the Job, places it in
  its namespace and sets its owner).

The template must first pass :func:`tickwork.schedules.checks.check_payload` (plain JSON
within the payload limits: depth, 64 KiB, no NUL), so the walk here is bounded; it is
iterative anyway.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from functools import cache
from importlib import resources
from typing import Any

KUBERNETES_VERSION = "1.37.0"
"""The Kubernetes release whose schema is shipped (the newest ``kubernetes-validate`` bundles):
fields added later are refused as unknown; a cluster older than it drops the fields it does not
know when the Job is created."""
SCHEMA_FILE = "job_template_schema.json"
PATH = "spec.jobTemplate"

RESTART_POLICIES = ("Never", "OnFailure")
METADATA_FIELDS = frozenset({"labels", "annotations"})
MAX_LABEL_VALUE = 63
MAX_ANNOTATIONS_BYTES = 256 * 1024
"""What the API server allows for all annotations of one object together."""

_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_LABEL_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)

Fail = Callable[[str, str], Exception]
"""Builds the error for a field's path and the reason."""


@cache
def schema() -> Mapping[str, Any]:
    """The shipped definitions (read once)."""
    text = resources.files("tickwork.schedules").joinpath(SCHEMA_FILE).read_text()
    document: Mapping[str, Any] = json.loads(text)
    return document


def check(fail: Fail, template: Any, path: str = PATH) -> None:
    """Raise ``fail(field, reason)`` at the first thing in ``template`` a Kubernetes API server
    would refuse in a Job made from it (or that tickwork sets itself)."""
    _check_schema(fail, template, path)
    _check_job_rules(fail, template, path)


def _check_schema(fail: Fail, template: Any, path: str) -> None:
    document = schema()
    definitions: Mapping[str, Any] = document["definitions"]
    todo: list[tuple[str, Any, Mapping[str, Any]]] = [
        (path, template, definitions[document["root"]])
    ]
    while todo:
        where, value, node = todo.pop()
        while "$ref" in node:
            node = definitions[node["$ref"]]
        if value is None:
            continue  # null is "not set", as the API server reads it
        if "oneOf" in node:
            kinds = [kind for option in node["oneOf"] for kind in _types(option)]
            if not any(_is(value, kind) for kind in kinds):
                raise fail(where, f"must be {_either(kinds)}, not {_type_name(value)}")
            continue
        kinds = _types(node)
        if kinds and not any(_is(value, kind) for kind in kinds):
            raise fail(where, f"must be {_either(kinds)}, not {_type_name(value)}")
        if isinstance(value, int) and not isinstance(value, bool):
            bounds = {"int32": _INT32, "int64": _INT64}.get(node.get("format", ""))
            if bounds is not None and not bounds[0] <= value <= bounds[1]:
                raise fail(where, f"must fit in {node['format']} ({value} does not)")
        if "enum" in node and value not in node["enum"]:
            raise fail(where, f"must be one of {', '.join(map(str, node['enum']))}")
        if isinstance(value, list) and "items" in node:
            for index, item in enumerate(value):
                if item is None:  # a list's null is no "not set": Kubernetes refuses it
                    raise fail(f"{where}[{index}]", "must not be null")
            todo.extend(
                (f"{where}[{index}]", item, node["items"]) for index, item in enumerate(value)
            )
        if isinstance(value, Mapping):
            todo.extend(reversed(_children(fail, where, value, node)))


def _children(
    fail: Fail, where: str, value: Mapping[str, Any], node: Mapping[str, Any]
) -> list[tuple[str, Any, Mapping[str, Any]]]:
    properties: Mapping[str, Any] = node.get("properties", {})
    extra = node.get("additionalProperties")
    children = []
    for key in value:
        child = f"{where}.{key}" if isinstance(key, str) and _PLAIN.fullmatch(key) else None
        child = child or f"{where}[{json.dumps(key)[:60]}]"
        if key in properties:
            children.append((child, value[key], properties[key]))
        elif isinstance(extra, Mapping):
            children.append((child, value[key], extra))
        elif properties or extra is False:
            raise fail(child, "unknown field")
    for key in node.get("required", ()):
        if value.get(key) is None:
            raise fail(f"{where}.{key}", "is required")
    return children


_PLAIN = re.compile(r"[A-Za-z0-9_-]{1,60}")


def _check_job_rules(fail: Fail, template: Mapping[str, Any], path: str) -> None:
    metadata = template.get("metadata") or {}
    for key in metadata:
        if key not in METADATA_FIELDS:
            raise fail(
                f"{path}.metadata.{key}",
                "is set by tickwork (only labels and annotations may be given)",
            )
    _check_metadata(fail, metadata, f"{path}.metadata")
    spec = _required(fail, template, "spec", path)
    for key in ("parallelism", "completions", "backoffLimit", "ttlSecondsAfterFinished"):
        _not_negative(fail, spec, key, f"{path}.spec")
    deadline = spec.get("activeDeadlineSeconds")
    if deadline is not None and deadline <= 0:
        raise fail(f"{path}.spec.activeDeadlineSeconds", f"must be > 0, not {deadline}")
    pod = _required(fail, spec, "template", f"{path}.spec")
    _check_metadata(fail, pod.get("metadata") or {}, f"{path}.spec.template.metadata")
    where = f"{path}.spec.template.spec"
    pod_spec = _required(fail, pod, "spec", f"{path}.spec.template")
    restart = pod_spec.get("restartPolicy")
    if restart not in RESTART_POLICIES:
        reason = "is required" if restart is None else f"must not be {restart!r}"
        raise fail(f"{where}.restartPolicy", f"{reason}: a Job's pods restart Never or OnFailure")
    if not pod_spec.get("containers"):
        raise fail(f"{where}.containers", "is required: at least one container")
    names: set[str] = set()
    for group in ("initContainers", "containers"):
        for index, container in enumerate(pod_spec.get(group) or ()):
            at = f"{where}.{group}[{index}]"
            name = container.get("name")
            if not _DNS_LABEL.fullmatch(name) or len(name) > MAX_LABEL_VALUE:
                raise fail(
                    f"{at}.name",
                    "must be a DNS label: at most 63 lowercase letters, digits and '-', "
                    "starting and ending with a letter or digit",
                )
            if name in names:
                raise fail(f"{at}.name", f"{name!r} is the name of another container")
            names.add(name)
            image = container.get("image")
            if group == "containers" and (image is None or not image.strip()):
                raise fail(f"{at}.image", "is required")


def _required(fail: Fail, parent: Mapping[str, Any], key: str, path: str) -> Mapping[str, Any]:
    value = parent.get(key)
    if value is None:
        raise fail(f"{path}.{key}", "is required")
    if not isinstance(value, Mapping):  # the schema walk has already refused it
        raise fail(f"{path}.{key}", "must be an object")
    return value


def _not_negative(fail: Fail, spec: Mapping[str, Any], key: str, path: str) -> None:
    value = spec.get(key)
    if value is not None and value < 0:
        raise fail(f"{path}.{key}", f"must be >= 0, not {value}")


def _check_metadata(fail: Fail, metadata: Mapping[str, Any], path: str) -> None:
    for key, value in (metadata.get("labels") or {}).items():
        where = f"{path}.labels[{json.dumps(key)[:70]}]"
        problem = _qualified_name_problem(key)
        if problem is not None:
            raise fail(where, f"key {problem}")
        if value and (len(value) > MAX_LABEL_VALUE or not _LABEL_NAME.fullmatch(value)):
            raise fail(
                where,
                "value must be at most 63 letters, digits, '-', '_' or '.', starting and "
                "ending with a letter or digit",
            )
    annotations = metadata.get("annotations") or {}
    size = 0
    for key, value in annotations.items():
        problem = _qualified_name_problem(key)
        if problem is not None:
            raise fail(f"{path}.annotations[{json.dumps(key)[:70]}]", f"key {problem}")
        size += len(key.encode()) + len((value or "").encode())
    if size > MAX_ANNOTATIONS_BYTES:
        raise fail(f"{path}.annotations", f"must total at most {MAX_ANNOTATIONS_BYTES} bytes")


def _qualified_name_problem(key: str) -> str | None:
    """Why ``key`` is not a Kubernetes qualified name (``[prefix/]name``), or None."""
    prefix, _, name = key.rpartition("/")
    if "/" in prefix:
        return "must have at most one '/'"
    if "/" in key and (not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN.fullmatch(prefix)):
        return "prefix must be a DNS subdomain (lowercase), at most 253 characters"
    if len(name) > MAX_LABEL_VALUE or not _LABEL_NAME.fullmatch(name):
        return (
            "name must be at most 63 letters, digits, '-', '_' or '.', starting and ending "
            "with a letter or digit"
        )
    return None


def _types(node: Mapping[str, Any]) -> list[str]:
    kind = node.get("type")
    kinds = [kind] if isinstance(kind, str) else list(kind or ())
    return [k for k in kinds if k != "null"]


def _is(value: Any, kind: str) -> bool:
    if kind == "object":
        return isinstance(value, Mapping)
    if kind == "array":
        return isinstance(value, list)
    if kind == "string":
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    return False


def _either(kinds: list[str]) -> str:
    names = {"object": "an object", "array": "a list", "integer": "an integer"}
    shown = [names.get(kind, f"a {kind}") for kind in dict.fromkeys(kinds)]
    return " or ".join(shown)


def _type_name(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list):
        return "a list"
    return type(value).__name__
