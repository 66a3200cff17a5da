"""Firing: turn the due occurrences of the schedules a worker offers into jobs.

One transaction per batch: claim up to ``batch`` due schedules with SKIP LOCKED, compute their
due occurrences, apply the misfire and overlap policies, insert every job with one statement
(an occurrence that already has a job is left alone: the unique occurrence key makes any
number of workers harmless), and advance every schedule with one statement fenced by the
revision read at claim. A crash anywhere rolls the whole batch back; the next worker fires it.

Isolation: a schedule whose firing fails for a reason of its own is set aside and the rest of
its batch fires. Its stored spec may not be readable by this version, planning it may raise,
or PostgreSQL may refuse its job or its advance: the batch's writes go inside one savepoint,
and only when that fails (with anything but a connection or server error) are they redone in
halves, each in its own savepoint, until the culprits stand alone. A schedule that failed
before goes in a savepoint of its own from the start. Each culprit keeps its next run,
records its error on its row (``firing_error``, ``firing_failures``) and is not claimed again
before ``firing_retry_at``: RETRY_FIRST after the first failure, doubling up to RETRY_MAX.
The first firing that works, or a sync that changes the definition, clears it. A connection error
still rolls the whole batch back; the next pass retries.

A schedule with a long backlog is settled at most ``chunk`` occurrences per pass; the pass
continues with it until nothing due is left. The loop sleeps until the earliest next run of
its namespaces, or until a ``tickwork_schedules`` notification (a sync, a FixedDelay job that
finished) wakes it; the cap on its sleep covers a lost notification.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from tickwork import metrics
from tickwork.clock import Clock, sleep
from tickwork.db import connections, store
from tickwork.db import jobs as jobs_db
from tickwork.db import schedules as db
from tickwork.logs import fields
from tickwork.model import NewJob
from tickwork.schedules import occurrences, policies
from tickwork.schedules.definition import (
    ConcurrencyPolicy,
    DefinitionError,
    ScheduleDefinition,
)
from tickwork.schedules.sync import fixed_delay

log = logging.getLogger(__name__)

CHANNEL = "tickwork_schedules"
"""Notified with a namespace when its schedules changed or a FixedDelay run was set."""

RETRY_FIRST = timedelta(seconds=1)
"""A schedule whose firing failed is claimed again this much later..."""
RETRY_MAX = timedelta(minutes=5)
"""...doubling with each consecutive failure, up to this."""


@dataclass(frozen=True)
class FiringConfig:
    batch: int = 500
    """Schedules claimed by one transaction."""
    chunk: int = 1000
    """Most occurrences of one schedule settled by one pass (a backlog takes several)."""
    budget: int = 10_000
    """Occurrences computed per transaction; claimed schedules beyond it wait for the next."""
    max_sleep: float = 30.0
    """Longest sleep between passes, so a lost notification costs at most this much."""
    busy_sleep: float = 0.05
    """Sleep while due schedules are held by another worker, or were deferred."""
    error_sleep: float = 1.0
    """Sleep after a database error."""
    cache_size: int = 100_000
    """Parsed definitions kept by the loop (about 1 KB each)."""
    warm_idle: float = 0.5
    """With at least this many seconds to sleep, the loop first parses the definitions of
    the schedules due next, so parsing is off the path from due time to job."""
    warm_chunk: int = 500
    """Definitions fetched and parsed per step of warming (it stops when the sleep is up)."""


@dataclass
class FireReport:
    """What a pass did."""

    claimed: int = 0
    """Due schedules claimed."""
    fired: int = 0
    """Jobs created."""
    skipped: int = 0
    """Occurrences thrown away by a misfire or overlap policy."""
    existing: int = 0
    """Occurrences that had a job already."""
    deferred: int = 0
    """Schedules left as they were for the next pass (Replace could not cancel a job)."""
    backlog: int = 0
    """Schedules with due occurrences left for another pass (a chunk or the budget ran out)."""
    failed: int = 0
    """Schedules whose firing failed, set aside until their retry."""

    def add(self, other: FireReport) -> None:
        self.claimed += other.claimed
        self.fired += other.fired
        self.skipped += other.skipped
        self.existing += other.existing
        self.deferred += other.deferred
        self.backlog += other.backlog
        self.failed += other.failed


@dataclass(frozen=True)
class Compiled:
    """A stored definition, parsed once per (namespace, name, revision)."""

    definition: ScheduleDefinition
    timetable: occurrences.Timetable | None
    """None for FixedDelay, whose occurrences start from each due time."""
    zone: ZoneInfo
    delay: timedelta | None

    @classmethod
    def parse(cls, namespace: str, name: str, spec: dict[str, Any]) -> Compiled:
        definition = ScheduleDefinition.from_spec(name, spec)
        definition.validate(namespace)
        delay = fixed_delay(definition)
        return cls(
            definition=definition,
            timetable=None if delay is not None else definition.timetable(namespace),
            zone=occurrences.load_zone(definition.time_zone),
            delay=delay,
        )


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


class _NextAfter:
    """``next_after`` remembered for one batch: schedules due together mostly share their
    expression (hourly, daily, ...), so each distinct one is computed once."""

    def __init__(self) -> None:
        self._found: dict[tuple[occurrences.Timetable, ZoneInfo, datetime], datetime] = {}

    def __call__(
        self, timetable: occurrences.Timetable, zone: ZoneInfo, after: datetime
    ) -> datetime:
        key = (timetable, zone, after)
        found = self._found.get(key)
        if found is None:
            found = self._found[key] = timetable.next_after(after, zone)
        return found


def _due_occurrences(
    next_after: _NextAfter,
    timetable: occurrences.Timetable,
    zone: ZoneInfo,
    first: datetime,
    now: datetime,
    limit: int,
) -> tuple[list[datetime], datetime | None]:
    """Occurrences from ``first`` (due) up to ``now``, at most ``limit``, and the first one
    after ``now`` when the list is complete (None when cut short)."""
    found = [first]
    while len(found) < limit:
        following = next_after(timetable, zone, found[-1])
        if following > now:
            return found, following
        found.append(following)
    return found, None


def _plan(due: db.DueSchedule, compiled: Compiled, chunk: int, next_after: _NextAfter) -> _Plan:
    """Misfire decisions and the next run of one schedule (overlap comes later)."""
    definition = compiled.definition
    timetable: occurrences.Timetable
    if compiled.delay is not None:
        timetable = occurrences.FixedRate(compiled.delay, anchor=due.next_run_at)
    else:
        assert compiled.timetable is not None
        timetable = compiled.timetable
    keep = policies.retained(definition.misfire_policy, definition.catch_up_limit)
    found, following = _due_occurrences(
        next_after, timetable, compiled.zone, due.next_run_at, due.now, chunk + keep
    )
    decision = policies.decide_misfire(
        found,
        complete=following is not None,
        now=due.now,
        policy=definition.misfire_policy,
        catch_up_limit=definition.catch_up_limit,
        starting_deadline_seconds=definition.starting_deadline_seconds,
        missed_before=due.missed_before,
    )
    fire, skipped = decision.fire, decision.skipped
    if compiled.delay is not None and len(fire) > 1:
        # FixedDelay: one job at a time, the next run follows its end.
        fire, skipped = fire[-1:], skipped + len(fire) - 1
    if decision.settled < len(found):
        next_run_at: datetime = found[decision.settled]
    elif following is not None:
        next_run_at = following
    else:
        next_run_at = next_after(timetable, compiled.zone, found[-1])
    return _Plan(
        due,
        compiled,
        computed=len(found),
        fire=fire,
        misfired=skipped,
        next_run_at=next_run_at,
        backlog=next_run_at <= due.now,
    )


UNREADABLE = "the stored spec cannot be read by this version"


def _parse(namespace: str, name: str, spec: dict[str, Any]) -> Compiled | str:
    """The compiled definition, or why this version cannot read the stored spec (the field
    first: listings cut long errors)."""
    try:
        return Compiled.parse(namespace, name, spec)
    except DefinitionError as exc:
        return f"{exc.field}: {exc.reason} ({UNREADABLE})"
    except Exception as exc:
        return f"spec: {_describe(exc)} ({UNREADABLE})"


def _describe(exc: BaseException) -> str:
    if isinstance(exc, occurrences.InvalidExpression):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


async def warm(
    conn: connections.AsyncConnection,
    namespaces: Sequence[str],
    cache: DefinitionCache,
    before: datetime,
    deadline: float,
    config: FiringConfig = FiringConfig(),
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
            compiled = _parse(namespace, name, stored.spec)
            if isinstance(compiled, Compiled):  # else the firing pass sets it aside
                cache.put(namespace, name, stored.revision, compiled)
                parsed += 1
    return parsed


async def _compile(
    conn: connections.AsyncConnection, due: list[db.DueSchedule], cache: DefinitionCache
) -> dict[jobs_db.Key, Compiled | str]:
    """Each claimed schedule's compiled definition, or why its stored spec cannot be read."""
    compiled: dict[jobs_db.Key, Compiled | str] = {}
    missing: list[jobs_db.Key] = []
    for row in due:
        hit = cache.get(row.namespace, row.name, row.revision)
        if hit is None:
            missing.append((row.namespace, row.name))
        else:
            compiled[row.namespace, row.name] = hit
    if not missing:
        return compiled
    specs = await store.arun(conn, db.get_specs(missing))
    for row in due:
        key = (row.namespace, row.name)
        if key not in missing:
            continue
        stored = specs[key]
        if stored.revision != row.revision:
            raise _Stale(f"{row.namespace}/{row.name}")
        entry = compiled[key] = _parse(row.namespace, row.name, stored.spec)
        if isinstance(entry, Compiled):
            cache.put(row.namespace, row.name, row.revision, entry)
    return compiled


def _label(key: jobs_db.Key) -> str:
    return f"{key[0]}/{key[1]}"


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
    due, compiled = plan.due, plan.compiled
    next_run_at = plan.next_run_at
    if compiled.delay is not None and plan.fire:
        # FixedDelay: wait for the job to finish, unless its occurrence had a job already.
        next_run_at = None if plan.created else due.now + compiled.delay
    missed_before = due.missed_before
    if next_run_at is None or (missed_before is not None and next_run_at >= missed_before):
        missed_before = None
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
        next_after = _NextAfter()

        def plan(row: db.DueSchedule) -> _Plan | None:
            """The schedule's plan, or None when it failed (recorded in ``failed``)."""
            entry = compiled[row.namespace, row.name]
            if not isinstance(entry, Compiled):
                failed[row.namespace, row.name] = (row, entry)
                return None
            try:
                return _plan(row, entry, config.chunk, next_after)
            except Exception as exc:
                failed[row.namespace, row.name] = (row, f"planning it failed: {_describe(exc)}")
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
        settled, deferred = await _settle_apart(conn, plans, now, plan, failed)
        retries = {}
        if failed:
            failures = [
                db.Failure(row.namespace, row.name, row.revision, error)
                for row, error in failed.values()
            ]
            retries = await store.arun(
                conn, db.record_failures(failures, RETRY_FIRST, RETRY_MAX, now)
            )
    _count(settled)
    _count_failures(failed, retries)
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
        p.jobs = [
            policies.schedule_job(p.due.namespace, p.compiled.definition, occurrence, p.due.state)
            for occurrence in p.fire
        ]
    jobs = [job for p in plans for job in p.jobs]
    by_key = {p.key: p for p in plans}
    if jobs:
        for p in plans:
            p.step = INSERTING
        for job in await store.arun(conn, jobs_db.insert_schedule_jobs(jobs, now)):
            by_key[job.namespace, job.name].created.append(job)
    for p in plans:
        p.step = "advancing it to its next run"
    advanced = await store.arun(conn, db.advance([_advance(p) for p in plans]))
    if len(advanced) != len(plans):
        raise _Stale(", ".join(_label(p.key) for p in plans if p.key not in advanced))
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
    return f"{step} failed: {_describe(exc)}"


def _count_failures(
    failed: dict[jobs_db.Key, tuple[db.DueSchedule, str]], retries: dict[jobs_db.Key, db.Retry]
) -> None:
    """The metric and the log line of each schedule set aside by a committed batch."""
    for key, (_, error) in failed.items():
        retry = retries.get(key)
        if retry is None:
            continue  # not at the revision read: cannot happen while the batch holds it
        namespace, name = key
        metrics.SCHEDULE_FIRING_FAILURES.labels(namespace, name).inc()
        log.error(
            "schedule firing failed; set aside until %s (failure %d in a row)",
            retry.retry_at.isoformat(),
            retry.failures,
            extra=fields(
                action="schedule_firing_failed",
                namespace=namespace,
                schedule=_label(key),
                count=retry.failures,
                error=error,
            ),
        )


def _count(plans: list[_Plan]) -> None:
    """The metrics of a committed batch: occurrences fired and skipped, firing lag (from the
    occurrence to the transaction that inserted its job), last occurrence fired; and a log
    line per schedule that skipped occurrences."""
    for p in plans:
        namespace, name = p.key
        job = p.compiled.definition.job
        if p.created:
            metrics.SCHEDULE_OCCURRENCES.labels(namespace, name, job.queue, job.kind).inc(
                len(p.created)
            )
            lag = metrics.SCHEDULE_FIRING_LAG.labels(namespace)
            fired = [j.occurrence_at for j in p.created if j.occurrence_at is not None]
            for occurrence in fired:
                lag.observe((p.due.now - occurrence).total_seconds())
            if fired:
                metrics.SCHEDULE_LAST_FIRE.labels(namespace, name).set(max(fired).timestamp())
        for reason, count in (("misfire", p.misfired), ("overlap", p.overlapped)):
            if count:
                metrics.SCHEDULE_SKIPPED.labels(namespace, name, job.queue, job.kind, reason).inc(
                    count
                )
                log.info(
                    "skipped occurrences by policy",
                    extra=fields(
                        action="occurrences_skipped",
                        namespace=namespace,
                        schedule=_label(p.key),
                        kind=job.kind,
                        count=count,
                        reason=reason,
                    ),
                )


async def run_once(
    conn: connections.AsyncConnection,
    namespaces: Sequence[str],
    now: datetime | None,
    *,
    cache: DefinitionCache | None = None,
    config: FiringConfig = FiringConfig(),
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


async def loop(
    pool: connections.AsyncPool,
    namespaces: Sequence[str],
    *,
    clock: Clock,
    wake: asyncio.Event,
    alive: Callable[[FiringConfig], None] = lambda config: None,
    config: FiringConfig = FiringConfig(),
) -> None:
    """Fire ``namespaces`` until cancelled: a pass, then sleep until the earliest next run
    (at most ``config.max_sleep``) or until ``wake`` is set. ``alive`` is called before
    each pass (the worker's liveness check watches it)."""
    cache = DefinitionCache(config.cache_size)
    outage = connections.Outage(
        f"firing {','.join(namespaces)}", log, "firing_failed", most=config.error_sleep
    )
    while True:
        alive(config)
        wake.clear()
        try:
            async with pool.connection() as conn:
                report = await run_once(conn, namespaces, clock.now(), cache=cache, config=config)
                alarm = await store.arun(conn, db.next_due(namespaces, clock.now()))
                delay = _delay(report, alarm, config)
                if delay >= config.warm_idle:
                    woke_at = time.monotonic() + delay
                    horizon = alarm.now + timedelta(seconds=delay + config.max_sleep)
                    await warm(conn, namespaces, cache, horizon, woke_at - config.busy_sleep)
                    delay = max(woke_at - time.monotonic(), 0.0)
        except Exception as exc:  # any error: logged once per outage, retried with backoff
            delay = outage.failed(exc, namespace=",".join(namespaces))
            if isinstance(exc, connections.ConnectionLost):
                with contextlib.suppress(Exception):
                    await connections.discard_broken(pool)
        else:
            outage.recovered()
        await sleep(delay, wake)


def _delay(report: FireReport, alarm: db.NextDue, config: FiringConfig) -> float:
    if report.deferred:
        return config.busy_sleep
    if alarm.next_run_at is None:
        return config.max_sleep
    seconds = (alarm.next_run_at - alarm.now).total_seconds()
    if seconds <= 0:
        # Due, yet not ours: another worker holds it right now.
        return config.busy_sleep
    return min(seconds, config.max_sleep)
