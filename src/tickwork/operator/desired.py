"""The desired state: what the kopf index keeps per object, and what each schedule namespace
should hold (pure).

An :class:`Entry` is computed from each object's body as kopf sees it; entries leave the index
only when their object is gone. :func:`group` turns all entries into one :class:`Desired` per
schedule namespace: the valid definitions to sync, and the names to spare from pruning
(objects whose current spec is invalid keep their last valid definition). Objects being
deleted are in neither, so the next sync disables them. Two objects naming the same schedule
(through ``spec.scheduleNamespace``) conflict: the one in the first Kubernetes namespace (by
name) wins, the other is reported.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from tickwork.operator.translate import Translation, translate
from tickwork.schedules.definition import ScheduleDefinition

ObjectKey = tuple[str, str]
"""(Kubernetes namespace, name) of a Schedule object."""


@dataclass(frozen=True)
class Entry:
    """One object, as the index keeps it."""

    key: ObjectKey
    uid: str | None
    generation: int | None
    translation: Translation
    deleting: bool


def entry_of(body: Mapping[str, Any]) -> Entry:
    """The entry of one object; never raises (``translate`` reports a bad spec)."""
    metadata = body.get("metadata")
    if not isinstance(metadata, Mapping):
        metadata = {}
    generation = metadata.get("generation")
    return Entry(
        key=(_text(metadata.get("namespace")), _text(metadata.get("name"))),
        uid=metadata.get("uid") if isinstance(metadata.get("uid"), str) else None,
        generation=generation if isinstance(generation, int) else None,
        translation=translate(body),
        deleting=metadata.get("deletionTimestamp") is not None,
    )


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


@dataclass(frozen=True)
class Desired:
    """What one schedule namespace should hold; equal values need no new sync."""

    definitions: tuple[ScheduleDefinition, ...] = ()
    """By name."""
    protected: frozenset[str] = frozenset()
    """Names pruning spares: their objects' specs are invalid just now."""

    @cached_property
    def _by_name(self) -> dict[str, ScheduleDefinition]:
        return {definition.name: definition for definition in self.definitions}

    def definition(self, name: str) -> ScheduleDefinition | None:
        return self._by_name.get(name)

    def lists(self, name: str) -> bool:
        """Whether a sync of this state keeps ``name`` (listed or spared)."""
        return name in self.protected or name in self._by_name


@dataclass(frozen=True)
class DesiredState:
    namespaces: dict[str, Desired] = field(default_factory=dict)
    conflicts: dict[ObjectKey, str] = field(default_factory=dict)
    """Objects left out because another object names the same schedule; why."""


def group(entries: Iterable[Entry]) -> DesiredState:
    winners: dict[tuple[str, str], Entry] = {}
    conflicts: dict[ObjectKey, str] = {}
    for entry in sorted(entries, key=lambda e: e.key):
        if entry.deleting:
            continue
        schedule = (entry.translation.namespace, entry.translation.name)
        first = winners.setdefault(schedule, entry)
        if first is not entry:
            conflicts[entry.key] = (
                f"metadata.name: schedule namespace {schedule[0]!r} already has a schedule "
                f"{schedule[1]!r}, from the Schedule in namespace {first.key[0]!r}"
            )
    definitions: dict[str, list[ScheduleDefinition]] = {}
    protected: dict[str, set[str]] = {}
    for (namespace, name), entry in winners.items():
        definition = entry.translation.definition
        if definition is None:
            protected.setdefault(namespace, set()).add(name)
        else:
            definitions.setdefault(namespace, []).append(definition)
    namespaces = {
        namespace: Desired(
            tuple(sorted(definitions.get(namespace, ()), key=lambda d: d.name)),
            frozenset(protected.get(namespace, ())),
        )
        for namespace in definitions.keys() | protected.keys()
    }
    return DesiredState(namespaces, conflicts)
