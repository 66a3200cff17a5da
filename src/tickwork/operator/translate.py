"""A ``Schedule`` object's body → the definition it asks for, or the reason it cannot (pure).

The same checks as ``tickwork sync -f`` (``ScheduleDefinition.from_spec`` and ``validate``), so an
object and a manifest file with the same spec are accepted or refused alike; the error names
the field (``spec.schedule: ...``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tickwork.schedules import manifests
from tickwork.schedules.definition import (
    DefinitionError,
    ScheduleDefinition,
    check_manifest_rules,
)


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
    """Translate one object; never raises for a bad spec (the error is in the result)."""
    metadata = body.get("metadata") or {}
    name = str(metadata.get("name") or "")
    namespace = manifests.target_namespace(body) or "default"
    spec = body.get("spec")
    if not isinstance(spec, Mapping):
        return Translation(namespace, name, None, "spec: is required and must be a mapping")
    if not namespace or any(c.isspace() for c in namespace) or len(namespace) > 253:
        reason = "spec.scheduleNamespace: must be a name without spaces, at most 253 characters"
        return Translation(namespace, name, None, reason)
    try:
        definition = ScheduleDefinition.from_spec(name, spec)
        check_manifest_rules(name, spec)
        definition.validate(namespace)
    except DefinitionError as error:
        return Translation(namespace, name, None, f"{error.field}: {error.reason}")
    return Translation(namespace, name, definition, None)
