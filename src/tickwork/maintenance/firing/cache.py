"""Parsed definitions for the firing pass: a stored spec is parsed once per (namespace,
name, revision) and kept in a :class:`DefinitionCache`; :func:`warm` fills it ahead of the
schedules due next, while the loop would otherwise sleep."""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from tickwork.db import connections, store
from tickwork.db import schedules as db
from tickwork.maintenance.firing.config import DEFAULTS, FiringConfig
from tickwork.maintenance.firing.planner import Compiled
from tickwork.schedules import occurrences
from tickwork.schedules.definition import DefinitionError, ScheduleDefinition
from tickwork.schedules.sync import fixed_delay

UNREADABLE = "the stored spec cannot be read by this version"


def compile_spec(namespace: str, name: str, spec: dict[str, Any]) -> Compiled:
    """The stored ``spec`` parsed and validated (raises what the definition raises)."""
    definition = ScheduleDefinition.from_spec(name, spec)
    definition.validate(namespace)
    delay = fixed_delay(definition)
    return Compiled(
        definition=definition,
        timetable=None if delay is not None else definition.timetable(namespace),
        zone=occurrences.load_zone(definition.time_zone),
        delay=delay,
    )


def parse(namespace: str, name: str, spec: dict[str, Any]) -> Compiled | str:
    """The compiled definition, or why this version cannot read the stored spec (the field
    first: listings cut long errors)."""
    try:
        return compile_spec(namespace, name, spec)
    except DefinitionError as exc:
        return f"{exc.field}: {exc.reason} ({UNREADABLE})"
    except Exception as exc:
        return f"spec: {describe(exc)} ({UNREADABLE})"


def describe(exc: BaseException) -> str:
    if isinstance(exc, occurrences.InvalidExpression):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


class DefinitionCache:
    """Compiled definitions by (namespace, name, revision); when full, the oldest go first."""

    def __init__(self, size: int = FiringConfig.cache_size) -> None:
        self._size = size
        self._entries: dict[tuple[str, str, int], Compiled] = {}

    def get(self, namespace: str, name: str, revision: int) -> Compiled | None:
        return self._entries.get((namespace, name, revision))

    def put(self, namespace: str, name: str, revision: int, compiled: Compiled) -> None:
        if len(self._entries) >= self._size:
            del self._entries[next(iter(self._entries))]
        self._entries[namespace, name, revision] = compiled


async def warm(
    conn: connections.AsyncConnection,
    namespaces: Sequence[str],
    cache: DefinitionCache,
    before: datetime,
    deadline: float,
    config: FiringConfig = DEFAULTS,
) -> int:
    """Parse the definitions of the schedules due before ``before`` into ``cache``, a chunk
    at a time, until done or ``time.monotonic()`` passes ``deadline``; returns how many.
    Commits after each read, so no transaction stays open while parsing."""
    soon = await store.arun(conn, db.upcoming(namespaces, before, config.cache_size))
    await conn.commit()
    missing = [(ns, name, rev) for ns, name, rev in soon if cache.get(ns, name, rev) is None]
    parsed = 0
    for start in range(0, len(missing), config.warm_chunk):
        if time.monotonic() >= deadline:
            break
        chunk = missing[start : start + config.warm_chunk]
        specs = await store.arun(conn, db.get_specs([(ns, name) for ns, name, _ in chunk]))
        await conn.commit()
        for namespace, name, _ in chunk:
            stored = specs.get((namespace, name))
            if stored is None:
                continue
            compiled = parse(namespace, name, stored.spec)
            if isinstance(compiled, Compiled):  # else the firing pass sets it aside
                cache.put(namespace, name, stored.revision, compiled)
                parsed += 1
    return parsed
