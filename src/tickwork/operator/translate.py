"""A ``Schedule`` object's body → the definition it asks for, or the reason it cannot (pure).

The same checks as ``tickwork sync -f`` (``ScheduleDefinition.from_spec`` and ``validate``), so an
object and a manifest file with the same spec are accepted or refused alike; the error names
the field (``spec.schedule: ...``). A ``spec.jobTemplate``'s Jobs go to the object's own
Kubernetes namespace, owned by the object (its ``metadata.uid``). Nothing in a body makes it
raise: values beyond the limits (docs/limits.md) are errors like any other, and as a last
resort anything unforeseen becomes ``spec: cannot be read: <type>``, so a hostile object is
always indexed, reported and deletable.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tickwork.schedules import limits, manifests
from tickwork.schedules.checks import DefinitionError
from tickwork.schedules.definition import ScheduleDefinition, check_manifest_rules

DEFAULT_NAMESPACE = "default"


@dataclass(frozen=True)
class Translation:
    """Where an object's schedule lives and what it is: ``definition`` or ``error``."""

    namespace: str
    """The schedule namespace: ``spec.scheduleNamespace``, else the object's namespace."""
    name: str
    definition: ScheduleDefinition | None
    error: str | None
    """``field: reason`` when the spec is invalid, else None."""


def translate(body: Mapping[str, Any]) -> Translation:
    """Translate one object; never raises (the error is in the result)."""
    metadata = body.get("metadata")
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
    name = name if isinstance(name, str) else ""
    try:
        return _translate(body, name)
    except Exception as error:  # the last resort: a bad object must never stop the operator
        fallback = _own_namespace(body)
        return Translation(fallback, name, None, f"spec: cannot be read: {type(error).__name__}")


def _translate(body: Mapping[str, Any], name: str) -> Translation:
    namespace = manifests.target_namespace(body) or DEFAULT_NAMESPACE
    spec = body.get("spec")
    if not isinstance(spec, Mapping):
        return Translation(namespace, name, None, "spec: is required and must be a mapping")
    if len(namespace) > limits.MAX_NAME_LENGTH or any(
        c.isspace() or c == "\x00" for c in namespace
    ):
        reason = (
            "spec.scheduleNamespace: must be a name without spaces, "
            f"at most {limits.MAX_NAME_LENGTH} characters"
        )
        return Translation(_own_namespace(body), name, None, reason)
    try:
        definition = ScheduleDefinition.from_spec(name, spec)
        check_manifest_rules(name, spec)
        definition = definition.owned_by(_own_namespace(body), _uid(body))
        definition.validate(namespace)
    except DefinitionError as error:
        return Translation(namespace, name, None, f"{error.field}: {error.reason}")
    return Translation(namespace, name, definition, None)


def _uid(body: Mapping[str, Any]) -> str | None:
    metadata = body.get("metadata")
    uid = metadata.get("uid") if isinstance(metadata, Mapping) else None
    return uid if isinstance(uid, str) and uid else None


def _own_namespace(body: Mapping[str, Any]) -> str:
    """The object's Kubernetes namespace, read defensively."""
    try:
        metadata = body.get("metadata")
        namespace = metadata.get("namespace") if isinstance(metadata, Mapping) else None
    except Exception:
        return DEFAULT_NAMESPACE
    return namespace if isinstance(namespace, str) and namespace else DEFAULT_NAMESPACE
