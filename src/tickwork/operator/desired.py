"""The desired state: what the kopf index keeps per object, and what each schedule namespace
should hold (pure).

An :class:`Entry` is computed from each object's body as kopf sees it; entries leave the index
only when their object is gone. :func:`group` turns all entries into one :class:`Desired` per
schedule namespace: the valid definitions to sync, and the names to spare from pruning
(objects whose current spec is invalid keep their last valid definition). Objects being
deleted are in neither, so the next sync disables them.

Tenant policy (:mod:`tickwork.schedules.tenancy`) is applied here, to every object on every
round, so a policy change re-evaluates all the Schedules it covers: an object refused by it
(``NamespaceNotAllowed``, ``PolicyViolation``) is in neither either, and touches nothing in
its target (it spares no name there), so a definition it had synced is disabled. Two objects
naming the same schedule conflict (``NameConflict``): the object of the schedule namespace's
own Kubernetes namespace wins, otherwise the oldest one (``creationTimestamp``, set by the API
server; within one second, the one that won the last round, then ``uid``): a newcomer never
replaces the definition in place, whatever its name or namespace.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from tickwork.operator.translate import Translation, translate
from tickwork.schedules import tenancy
from tickwork.schedules.definition import ScheduleDefinition
from tickwork.schedules.tenancy import Refusal, TenantPolicy

ObjectKey = tuple[str, str]
"""(Kubernetes namespace, name) of a Schedule object."""
ScheduleKey = tuple[str, str]
"""(schedule namespace, name) of a definition."""
NAME_CONFLICT = "NameConflict"


@dataclass(frozen=True)
class Entry:
    """One object, as the index keeps it."""

    key: ObjectKey
    uid: str | None
    generation: int | None
    translation: Translation
    deleting: bool
    created: str | None = None
    """``metadata.creationTimestamp`` (RFC 3339, as the API server writes it)."""


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
        created=metadata.get("creationTimestamp")
        if isinstance(metadata.get("creationTimestamp"), str)
        else None,
    )


def refusal(entry: Entry, policies: Iterable[TenantPolicy]) -> Refusal | None:
    """Why tenant policy refuses the object (its target even when its spec is invalid)."""
    translation = entry.translation
    return tenancy.check(entry.key[0], translation.namespace, translation.definition, policies)


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
    refused: dict[ObjectKey, Refusal] = field(default_factory=dict)
    """Objects left out: refused by tenant policy, or another object names the same schedule."""
    sources: dict[ScheduleKey, ObjectKey] = field(default_factory=dict)
    """The object each listed or spared schedule comes from."""


def group(
    entries: Iterable[Entry],
    policies: Iterable[TenantPolicy] = (),
    previous: Mapping[ScheduleKey, ObjectKey] | None = None,
) -> DesiredState:
    """The desired state of every schedule namespace; ``previous``: the sources of the last
    round, which win ties of ``creationTimestamp`` (whole seconds) within a process."""
    policies = tuple(policies)
    previous = previous or {}
    refused: dict[ObjectKey, Refusal] = {}
    candidates: list[Entry] = []
    for entry in entries:
        if entry.deleting:
            continue
        refused_by = refusal(entry, policies)
        if refused_by is None:
            candidates.append(entry)
        else:
            refused[entry.key] = refused_by
    winners: dict[ScheduleKey, Entry] = {}
    for entry in sorted(candidates, key=lambda e: _precedence(e, previous)):
        schedule = (entry.translation.namespace, entry.translation.name)
        first = winners.setdefault(schedule, entry)
        if first is not entry:
            refused[entry.key] = Refusal(
                NAME_CONFLICT,
                f"metadata.name: schedule namespace {schedule[0]!r} already has a schedule "
                f"{schedule[1]!r}, from the Schedule in namespace {first.key[0]!r} (the "
                "Schedule of the namespace's own Kubernetes namespace wins, else the oldest)",
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
    sources = {schedule: entry.key for schedule, entry in winners.items()}
    return DesiredState(namespaces, refused, sources)


def _precedence(
    entry: Entry, previous: Mapping[ScheduleKey, ObjectKey]
) -> tuple[bool, bool, str, bool, str, ObjectKey]:
    """Who wins a name: the target's own namespace first, then the oldest object (the one in
    place first among objects of the same second, then by uid)."""
    schedule = (entry.translation.namespace, entry.translation.name)
    foreign = entry.key[0] != entry.translation.namespace
    newcomer = previous.get(schedule, entry.key) != entry.key
    created = entry.created or ""
    return (foreign, entry.created is None, created, newcomer, entry.uid or "", entry.key)
