"""``job.spawn``: the jobs a running task creates, wired to wait for it, for one another and
for a join, inserted in one transaction. Every spawned job waits for the spawning job, so
nothing spawned starts before that task has succeeded, and all of it is cancelled if it ends
dead or cancelled. A spawn is recorded under the spawning job and a key
(``tickwork.job_spawns``): a retried attempt spawning under the same key gets the jobs of the
first, not a second set. The jobs belong to the spawning job's tenant (its schedule), and an
``after`` id of another tenant is refused like an unknown one."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from tickwork.db import connections, store
from tickwork.db import workflows as workflows_db
from tickwork.errors import InvalidInput
from tickwork.model import Job, JobId, NewJob, Spawn, TraceContext
from tickwork.workflows import graph
from tickwork.workflows.after import MAX_PARENTS, check_after, start_of

MAX_SPAWNED = 10_000
"""The most jobs one spawn creates (the join included)."""

MAX_KEY = 200


@dataclass(frozen=True)
class Planned:
    """The spawn's entries (the join last) and the order they are inserted in."""

    entries: list[Spawn]
    order: list[int]
    waits: list[set[int]]
    """Per entry: the entries it waits for."""
    ids: list[list[int]]
    """Per entry: the existing jobs it waits for (checked ids)."""


def plan(jobs: Sequence[Spawn], join: Spawn | None, key: str) -> Planned:
    """``jobs`` and ``join`` checked (InvalidInput naming ``jobs[i]...``, ``join``, ``key``)."""
    if not isinstance(key, str) or not key or len(key) > MAX_KEY:
        raise InvalidInput("key", f"must be a non-empty string of at most {MAX_KEY} characters")
    entries = list(jobs)
    if not entries:
        raise InvalidInput("jobs", "nothing to spawn")
    names = []
    for i, entry in enumerate(entries):
        if entry.name is not None and (not entry.name or entry.name.startswith("#")):
            raise InvalidInput(f"jobs[{i}].name", "must be non-empty, not starting with '#'")
        names.append(entry.name if entry.name is not None else f"#{i}")
    if join is not None:
        entries.append(replace(join, after=(*join.after, *names)))
        names.append(join.name if join.name is not None else "#join")
    nodes, ids = [], []
    for i, (entry, name) in enumerate(zip(entries, names, strict=True)):
        field = "join" if join is not None and i == len(entries) - 1 else f"jobs[{i}]"
        if isinstance(entry.after, str | bytes):
            raise InvalidInput(f"{field}.after", "must be a list of names or job ids")
        nodes.append(graph.Node(name, tuple(a for a in entry.after if isinstance(a, str))))
        ids.append(
            check_after([a for a in entry.after if not isinstance(a, str)], f"{field}.after")
        )
    order = graph.order(nodes, "jobs", MAX_SPAWNED, what="job")
    index = {name: i for i, name in enumerate(names)}
    waits = [{index[a] for a in node.after} for node in nodes]
    return Planned(entries, order, waits, ids)


def spawn_jobs(
    conn: connections.Connection,
    parent: Job,
    planned: Planned,
    news: Sequence[NewJob],
    key: str,
    now: datetime | None,
    trace_context: TraceContext | None = None,
) -> list[JobId]:
    """Insert the planned jobs (``news``: one per entry, in the parent's tenant) in ``conn``'s
    transaction, or return those spawned under ``key`` before."""
    if not store.run(conn, workflows_db.claim_spawn(parent.id, key)):
        return store.run(conn, workflows_db.spawned(parent.id, key))
    existing = sorted({parent.id, *(i for ids in planned.ids for i in ids)})
    namespace = parent.schedule.namespace if parent.schedule else None
    found = store.run(conn, workflows_db.lock_parents(existing, namespace))
    if parent.id not in found:
        raise InvalidInput("job", f"job {parent.id} is gone")
    made: dict[int, JobId] = {}
    batch: list[int] = []
    for position, i in enumerate(planned.order):
        batch.append(i)
        following = planned.order[position + 1] if position + 1 < len(planned.order) else None
        if following is not None and _same(planned, news, i, following):
            continue  # a fan-out: consecutive alike entries go in one statement
        after = sorted({parent.id, *planned.ids[i], *(made[w] for w in planned.waits[i])})
        if len(after) > MAX_PARENTS:
            raise InvalidInput(f"jobs[{i}].after", f"at most {MAX_PARENTS} jobs, not {len(after)}")
        start = start_of(after, found, f"jobs[{i}].after")
        op = workflows_db.insert_jobs(
            news[i], [news[b].payload for b in batch], after, start, now, trace_context
        )
        inserted: list[JobId] = store.run(conn, op)
        for b, new_id in zip(batch, inserted, strict=True):
            made[b] = new_id
            found[new_id] = start.status
        batch = []
    ids = [made[i] for i in range(len(planned.entries))]
    store.run(conn, workflows_db.record_spawn(parent.id, key, ids))
    return ids


def _same(planned: Planned, news: Sequence[NewJob], a: int, b: int) -> bool:
    """Entries ``a`` and ``b`` can be inserted in one statement: alike but for the payload,
    waiting for the same jobs (so neither waits for the other)."""
    return (
        replace(news[a], payload=None) == replace(news[b], payload=None)
        and planned.ids[a] == planned.ids[b]
        and planned.waits[a] == planned.waits[b]
    )


def tenant_of(parent: Job, job: NewJob) -> NewJob:
    """``job`` in the spawning job's tenant: its schedule, if it has one (not its occurrence)."""
    if parent.schedule is None:
        return job
    return replace(
        job, schedule_namespace=parent.schedule.namespace, schedule_name=parent.schedule.name
    )
