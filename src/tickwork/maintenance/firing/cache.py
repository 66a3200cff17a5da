"""Parsed definitions for the firing pass: a stored spec is parsed once and kept in a
:class:`DefinitionCache` by its content (the spec key the claim reads), so schedules with
equal specs share one parsed definition: a million schedules made from a few hundred specs
cost a few hundred parses and entries, not a million. :func:`warm` fills it ahead of the
schedules due next, while the loop would otherwise sleep."""

from __future__ import annotations

import copy
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tickwork.db import connections, store
from tickwork.db import schedules as db
from tickwork.maintenance.firing.config import DEFAULTS, FiringConfig
from tickwork.maintenance.firing.planner import Compiled
from tickwork.schedules import occurrences
from tickwork.schedules.checks import DefinitionError
from tickwork.schedules.definition import ScheduleDefinition
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
        calendar=definition.calendar(namespace),
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
    """Compiled definitions by (namespace, spec key), and by name too for a cron expression
    that may hold hashed ``H`` fields (seeded by the name). A definition found under another
    schedule's name is that one's: :func:`named` gives it the name of the schedule firing.
    When full, the oldest go first (an ordered dict: a plain dict's first key is found by
    skipping the slots its deletions left, slower the longer the cache ran full)."""

    def __init__(self, size: int = FiringConfig.cache_size) -> None:
        self.size = size
        self._entries: OrderedDict[tuple[str, str, str], Compiled] = OrderedDict()

    def get(self, namespace: str, name: str, spec_key: str) -> Compiled | None:
        shared = self._entries.get((namespace, spec_key, ""))
        return shared if shared is not None else self._entries.get((namespace, spec_key, name))

    def put(self, namespace: str, name: str, spec_key: str, compiled: Compiled) -> None:
        if len(self._entries) >= self.size:
            self._entries.popitem(last=False)
        self._entries[namespace, spec_key, name if _seeded(compiled) else ""] = compiled


def _seeded(compiled: Compiled) -> bool:
    """Whether the timetable may depend on the schedule's name (an ``H`` in the expression;
    day names such as THU count too, which only costs sharing)."""
    schedule = compiled.definition.schedule
    return schedule is not None and "H" in schedule.upper()


def named(compiled: Compiled, name: str) -> ScheduleDefinition:
    """The definition as the schedule ``name``'s own (the jobs carry its name). A copy with
    the name set, not ``dataclasses.replace``, which validates the whole definition again
    (a tenth of a firing worker's time at a million schedules): the definition was valid, and
    the name is a stored schedule's."""
    definition = compiled.definition
    if definition.name == name:
        return definition
    renamed = copy.copy(definition)
    object.__setattr__(renamed, "name", name)  # frozen
    return renamed


@dataclass(frozen=True)
class Warmed:
    """What a warming did."""

    parsed: int
    """Definitions parsed into the cache."""
    until: datetime | None
    """Every spec due until then is in the cache (the horizon it was given); None when the
    deadline or the cache's size cut it short."""


async def warm(
    conn: connections.AsyncConnection,
    namespaces: Sequence[str],
    cache: DefinitionCache,
    before: datetime,
    deadline: float,
    config: FiringConfig = DEFAULTS,
    *,
    after: datetime | None = None,
) -> Warmed:
    """Parse the definitions of the schedules due before ``before`` (and after ``after``,
    when given: an earlier warming covered those up to it) into ``cache``, a chunk at a
    time, until done or ``time.monotonic()`` passes ``deadline``. Each distinct spec of a
    namespace once (equal specs share an entry), at most the cache's size of them, the
    earliest due first: parsing more would evict the ones needed first. Commits after each
    read, so no transaction stays open while parsing."""
    soon = await store.arun(conn, db.upcoming(namespaces, after, before, cache.size))
    await conn.commit()
    missing: dict[tuple[str, str], tuple[str, str, int, str]] = {}
    for ns, name, revision, key in soon:
        if cache.get(ns, name, key) is None:
            missing.setdefault((ns, key), (ns, name, revision, key))
    wanted = list(missing.values())
    parsed = 0
    for start in range(0, len(wanted), config.warm_chunk):
        if time.monotonic() >= deadline:
            return Warmed(parsed, None)
        chunk = wanted[start : start + config.warm_chunk]
        specs = await store.arun(conn, db.get_specs([(ns, name) for ns, name, _, _ in chunk]))
        await conn.commit()
        for namespace, name, revision, key in chunk:
            stored = specs.get((namespace, name))
            if stored is None or stored.revision != revision:
                continue  # changed since: its new spec has another key
            compiled = parse(namespace, name, stored.spec)
            if isinstance(compiled, Compiled):  # else the firing pass sets it aside
                cache.put(namespace, name, key, compiled)
                parsed += 1
    return Warmed(parsed, before if len(soon) < cache.size else None)
