"""One firing pass (:func:`run_once`): batches of due schedules claimed, planned
(:mod:`.planner`), settled in savepoints and advanced, one transaction each; the SQL is the
database layer's (:mod:`tickwork.db.schedules`)."""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from tickwork import metrics, tracing
from tickwork.db import connections, store
from tickwork.db import jobs as jobs_db
from tickwork.db import schedules as db
from tickwork.logs import fields
from tickwork.maintenance.firing import metrics as firing_metrics
from tickwork.maintenance.firing import planner
from tickwork.maintenance.firing.cache import DefinitionCache, describe, named, parse
from tickwork.maintenance.firing.config import (
    DEFAULTS,
    RETRY_FIRST,
    RETRY_MAX,
    FireReport,
    FiringConfig,
)
from tickwork.maintenance.firing.planner import Compiled
from tickwork.model import NewJob
from tickwork.schedules import policies
from tickwork.schedules.definition import ConcurrencyPolicy

log = logging.getLogger(__package__)


@dataclass
class _Plan:
    """One claimed schedule through a pass."""

    due: db.DueSchedule
    compiled: Compiled
    computed: int = 0
    fire: tuple[datetime, ...] = ()
    misfired: int = 0
    """Occurrences thrown away by the misfire policy (and FixedDelay's one-at-a-time)."""
    overlapped: int = 0
    """Occurrences thrown away by the overlap (concurrency) policy."""
    next_run_at: datetime | None = None
    backlog: bool = False
    replace: bool = False
    jobs: list[NewJob] = field(default_factory=list)
    created: list[jobs_db.CreatedJob] = field(default_factory=list)
    step: str = "firing it"
    """What the pass was doing for this schedule (named when it fails)."""

    @property
    def key(self) -> jobs_db.Key:
        return self.due.namespace, self.due.name

    @property
    def skipped(self) -> int:
        return self.misfired + self.overlapped

    @property
    def policy(self) -> ConcurrencyPolicy:
        return self.compiled.definition.concurrency_policy


class _Stale(Exception):
    """A schedule changed under the pass; the batch is rolled back."""


def _plan(
    due: db.DueSchedule, compiled: Compiled, chunk: int, next_after: planner.NextAfter
) -> _Plan:
    planned = planner.plan(due, compiled, chunk, next_after)
    return _Plan(
        due,
        compiled,
        computed=planned.computed,
        fire=planned.fire,
        misfired=planned.misfired,
        next_run_at=planned.next_run_at,
        backlog=planned.backlog,
    )


async def _compile(
    conn: connections.AsyncConnection, due: list[db.DueSchedule], cache: DefinitionCache
) -> dict[jobs_db.Key, Compiled | str]:
    """Each claimed schedule's compiled definition, or why its stored spec cannot be read.
    A spec not cached is read and parsed once for all the schedules of the batch sharing it."""
    compiled: dict[jobs_db.Key, Compiled | str] = {}
    missing: list[db.DueSchedule] = []
    for row in due:
        hit = cache.get(row.namespace, row.name, row.spec_key)
        if hit is None:
            missing.append(row)
        else:
            compiled[row.namespace, row.name] = hit
    if not missing:
        return compiled
    specs = await store.arun(conn, db.get_specs([(row.namespace, row.name) for row in missing]))
    for row in missing:
        key = (row.namespace, row.name)
        stored = specs[key]
        if stored.revision != row.revision:
            raise _Stale(f"{row.namespace}/{row.name}")
        hit = cache.get(row.namespace, row.name, row.spec_key)  # parsed for another row
        entry = compiled[key] = hit or parse(row.namespace, row.name, stored.spec)
        if hit is None and isinstance(entry, Compiled):
            cache.put(row.namespace, row.name, row.spec_key, entry)
    return compiled


async def _apply_overlap(
    conn: connections.AsyncConnection, plans: list[_Plan], now: datetime | None
) -> list[_Plan]:
    """Overlap policies with one query for the batch (plus one for Replace cancellations);
    returns the plans deferred because a job to replace was held by someone else."""
    guarded = [p for p in plans if p.fire and p.policy is not ConcurrencyPolicy.ALLOW]
    if not guarded:
        return []
    for p in guarded:
        p.step = "reading its open jobs for its concurrencyPolicy"
    open_jobs = await store.arun(conn, jobs_db.open_jobs([p.key for p in guarded]))
    for p in guarded:
        decision = policies.decide_overlap(p.fire, p.policy, open_jobs.get(p.key))
        p.fire, p.overlapped, p.replace = decision.fire, decision.skipped, decision.replace
    replacing = [p for p in guarded if p.replace]
    if not replacing:
        return []
    for p in replacing:
        p.step = "cancelling its open jobs (concurrencyPolicy Replace)"
    cancelled = await store.arun(conn, jobs_db.cancel_open_jobs([p.key for p in replacing], now))
    deferred = []
    for p in replacing:
        held = open_jobs[p.key]
        if cancelled.get(p.key, 0) < held.available + held.running:
            deferred.append(p)
    return deferred


def _advance(plan: _Plan) -> db.Advance:
    due = plan.due
    next_run_at, missed_before = planner.advanced_runs(
        due, plan.compiled, plan.next_run_at, fired=bool(plan.fire), created=bool(plan.created)
    )
    newest = max(plan.created, key=lambda job: job.id, default=None)
    return db.Advance(
        namespace=due.namespace,
        name=due.name,
        revision=due.revision,
        next_run_at=next_run_at,
        missed_before=missed_before,
        last_occurrence_at=newest.occurrence_at if newest else None,
        skipped=plan.skipped,
        last_job_id=newest.id if newest else None,
    )


async def _fire_batch(
    conn: connections.AsyncConnection,
    namespaces: Sequence[str],
    now: datetime | None,
    cache: DefinitionCache,
    config: FiringConfig,
) -> FireReport:
    async with conn.transaction():
        due = await store.arun(conn, db.claim_due(namespaces, config.batch, now))
        if not due:
            return FireReport()
        compiled = await _compile(conn, due, cache)
        failed: dict[jobs_db.Key, tuple[db.DueSchedule, str]] = {}
        plans: list[_Plan] = []
        spent = 0
        next_after = planner.NextAfter()

        def plan(row: db.DueSchedule) -> _Plan | None:
            """The schedule's plan, or None when it failed (recorded in ``failed``)."""
            entry = compiled[row.namespace, row.name]
            if not isinstance(entry, Compiled):
                failed[row.namespace, row.name] = (row, entry)
                return None
            try:
                return _plan(row, entry, config.chunk, next_after)
            except Exception as exc:
                failed[row.namespace, row.name] = (row, f"planning it failed: {describe(exc)}")
                return None

        processed = 0
        for row in due:
            if spent >= config.budget:
                break
            processed += 1
            planned = plan(row)
            spent += planned.computed if planned else 1
            if planned is not None:
                plans.append(planned)
        with tracing.firing(namespaces, len(due)) as span:  # the jobs carry its context
            settled, deferred = await _settle_apart(conn, plans, now, plan, failed)
            span.counts(
                created=sum(len(p.created) for p in settled),
                skipped=sum(p.skipped for p in settled),
                failed=len(failed),
            )
        retries = {}
        if failed:
            failures = [
                db.Failure(row.namespace, row.name, row.revision, error)
                for row, error in failed.values()
            ]
            retries = await store.arun(
                conn, db.record_failures(failures, RETRY_FIRST, RETRY_MAX, now)
            )
    firing_metrics.fired(
        (
            firing_metrics.Fired(
                p.key,
                p.compiled.definition.job,
                [j.occurrence_at for j in p.created if j.occurrence_at is not None],
                {"misfire": p.misfired, "overlap": p.overlapped},
            )
            for p in settled
        ),
        due[0].now,
    )
    firing_metrics.failures({key: error for key, (_, error) in failed.items()}, retries)
    created = sum(len(p.created) for p in settled)
    return FireReport(
        claimed=len(due),
        fired=created,
        skipped=sum(p.skipped for p in settled),
        existing=sum(len(p.jobs) for p in settled) - created,
        deferred=deferred,
        backlog=sum(p.backlog for p in settled) + len(due) - processed,
        failed=len(failed),
    )


async def _settle_apart(
    conn: connections.AsyncConnection,
    plans: list[_Plan],
    now: datetime | None,
    replan: Callable[[db.DueSchedule], _Plan | None],
    failed: dict[jobs_db.Key, tuple[db.DueSchedule, str]],
) -> tuple[list[_Plan], int]:
    """:func:`_settle` in savepoints, so that one schedule's error sets only that one aside.
    The schedules that failed before get a savepoint each, the rest share one. A shared one
    that fails (for a reason of its rows: ``_tied_to_rows``) is redone in halves, with fresh
    plans from ``replan``, until each culprit stands alone: a few savepoints per culprit, not
    one per schedule. The culprits' errors go into ``failed``."""
    groups = deque([[p] for p in plans if p.due.failures])
    fresh = [p for p in plans if not p.due.failures]
    if fresh:
        groups.appendleft(fresh)
    settled: list[_Plan] = []
    deferred = 0
    while groups:
        group = groups.popleft()
        try:
            async with conn.transaction():
                done, held = await _settle(conn, group, now)
        except Exception as exc:
            if not _tied_to_rows(exc):
                raise
            if len(group) == 1:
                failed[group[0].key] = (group[0].due, _failure(group[0], exc))
            else:
                again = [p for p in map(replan, (p.due for p in group)) if p is not None]
                half = len(again) // 2
                groups.extendleft(g for g in (again[half:], again[:half]) if g)  # first half first
            continue
        settled.extend(done)
        deferred += held
    return settled, deferred


async def _settle(
    conn: connections.AsyncConnection, plans: list[_Plan], now: datetime | None
) -> tuple[list[_Plan], int]:
    """Overlap policies, the jobs (one insert) and the advance (one update) of ``plans``;
    returns the plans settled and how many were deferred (Replace could not cancel)."""
    deferred = {p.key for p in await _apply_overlap(conn, plans, now)}
    plans = [p for p in plans if p.key not in deferred]
    for p in plans:
        p.step = "making its jobs"
        definition = named(p.compiled, p.due.name)
        p.jobs = [
            policies.schedule_job(p.due.namespace, definition, occurrence, p.due.state)
            for occurrence in p.fire
        ]
    jobs = [job for p in plans for job in p.jobs]
    by_key = {p.key: p for p in plans}
    if jobs:
        for p in plans:
            p.step = INSERTING
        inserting = jobs_db.insert_schedule_jobs(jobs, now, tracing.capture())
        for job in await store.arun(conn, inserting):
            by_key[job.namespace, job.name].created.append(job)
    for p in plans:
        p.step = "advancing it to its next run"
    advanced = await store.arun(conn, db.advance([_advance(p) for p in plans]))
    if len(advanced) != len(plans):
        raise _Stale(", ".join(firing_metrics.label(p.key) for p in plans if p.key not in advanced))
    return plans, len(deferred)


INSERTING = "inserting its jobs"


def _inserting(plan: _Plan) -> str:
    instants = [job.occurrence_at.isoformat() for job in plan.jobs if job.occurrence_at]
    if len(instants) == 1:
        return f"inserting the job of occurrence {instants[0]}"
    more = f" and {len(instants) - 3} more" if len(instants) > 3 else ""
    return f"inserting the jobs of occurrences {', '.join(instants[:3])}{more}"


def _tied_to_rows(exc: Exception) -> bool:
    """An error of the schedules written (a value refused, a Python error while making their
    jobs), not of the connection or the server, and not a definition changed mid-pass."""
    if isinstance(exc, _Stale):
        return False
    if isinstance(exc, connections.DatabaseError):
        return isinstance(exc, db.ROW_ERRORS)
    return True


def _failure(plan: _Plan, exc: Exception) -> str:
    """The stored error of a schedule whose writes failed: why, then what the pass was doing."""
    step = _inserting(plan) if plan.step == INSERTING else plan.step
    if isinstance(exc, connections.DatabaseError):
        return f"refused by PostgreSQL: {db.refusal(exc)}, {step}"
    return f"{step} failed: {describe(exc)}"


async def run_once(
    conn: connections.AsyncConnection,
    namespaces: Sequence[str],
    now: datetime | None,
    *,
    cache: DefinitionCache | None = None,
    config: FiringConfig = DEFAULTS,
) -> FireReport:
    """Fire everything due in ``namespaces`` at ``now`` (None: the database clock), batch
    after batch (one transaction each); an empty list fires nothing."""
    report = FireReport()
    if not namespaces:
        return report
    cache = cache or DefinitionCache()
    while True:
        try:
            batch = await _fire_batch(conn, namespaces, now, cache, config)
        except _Stale as stale:
            metrics.VERSION_MISMATCHES.labels("fire").inc()
            log.warning(
                "version mismatch: schedules changed during a firing pass; rolled back",
                extra=fields(
                    action="version_mismatch", namespace=",".join(namespaces), schedule=str(stale)
                ),
            )
            return report
        report.add(batch)
        log.debug(
            "fired due schedules",
            extra=fields(
                action="schedules_fired", namespace=",".join(namespaces), count=batch.fired
            ),
        )
        progressed = batch.claimed > batch.deferred
        if not progressed or (batch.claimed < config.batch and not batch.backlog):
            return report


class Firing:
    """Firing shaped as a service: :meth:`run_once` fires the namespaces it was given, their
    parsed definitions kept across passes. Not a shared duty: every worker offering a
    namespace fires it, and the claim of each due schedule (SKIP LOCKED) keeps them apart.
    Its loop (:func:`tickwork.maintenance.firing.loop.loop`) sleeps until the next due run;
    :attr:`interval` is the longest it sleeps."""

    name = "firing"
    shared = False

    def __init__(self, namespaces: Sequence[str], config: FiringConfig = DEFAULTS) -> None:
        self.namespaces = tuple(namespaces)
        self.config = config
        self.cache = DefinitionCache(config.cache_size)

    @property
    def interval(self) -> float:
        return self.config.max_sleep

    async def run_once(self, conn: connections.AsyncConnection, now: datetime | None) -> FireReport:
        return await run_once(conn, self.namespaces, now, cache=self.cache, config=self.config)
