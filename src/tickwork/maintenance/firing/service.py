"""One firing pass (:func:`run_once`): batches of due schedules claimed, planned
(:mod:`.planner`), settled in savepoints and advanced, one transaction each; the SQL is the
database layer's (:mod:`tickwork.db.schedules`)."""

from __future__ import annotations

import asyncio
import contextlib
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
from tickwork.maintenance.firing.floors import DueFloors
from tickwork.maintenance.firing.planner import Compiled
from tickwork.maintenance.firing.shares import Shares
from tickwork.schedules import policies
from tickwork.schedules.options import ConcurrencyPolicy

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


def _plan(due: db.DueSchedule, compiled: Compiled, planned: planner.Planned) -> _Plan:
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


@dataclass
class _Alike:
    """Plans of a batch that fire alike (one :class:`db.Outcome`), and the jobs they got by
    occurrence."""

    plans: list[_Plan]
    outcome: db.Outcome
    created: dict[datetime, int] = field(default_factory=dict)


def _alike(plan: _Plan) -> tuple[object, ...]:
    """What the plans sharing an outcome have in common: namespace, parsed definition, due
    time and decisions; a schedule whose jobs are its own (carried state, or
    :func:`policies.alike` says no) shares with no other."""
    due = plan.due
    if due.state is not None or not policies.alike(plan.compiled.definition):
        return due.namespace, due.name
    return (
        due.namespace,
        id(plan.compiled),
        due.next_run_at,
        due.missed_before,
        plan.fire,
        plan.misfired,
        plan.overlapped,
    )


def _outcome(plan: _Plan) -> db.Outcome:
    """The jobs and next run of ``plan`` (and of those alike)."""
    due = plan.due
    definition = named(plan.compiled, due.name)
    jobs = [policies.schedule_job(due.namespace, definition, o, due.state) for o in plan.fire]
    runs = {
        created: planner.advanced_runs(
            due, plan.compiled, plan.next_run_at, fired=bool(plan.fire), created=created
        )
        for created in (False, True)
    }
    return db.Outcome(
        job=jobs[0] if jobs else None,
        occurrences=[(job.occurrence_at, job.run_at) for job in jobs],  # type: ignore[misc]
        next_run_at=runs[False][0],
        missed_before=runs[False][1],
        next_run_at_created=runs[True][0],
        missed_before_created=runs[True][1],
        skipped=plan.skipped,
    )


async def _fire_batch(
    conn: connections.AsyncConnection,
    namespaces: Sequence[str],
    waits: Sequence[float] | None,
    now: datetime | None,
    cache: DefinitionCache,
    config: FiringConfig,
    floors: DueFloors | None,
) -> FireReport:
    async with conn.transaction():
        offered, claimed_at = floors.offer(namespaces) if floors is not None else (None, 0.0)
        due = await store.arun(conn, db.claim_due(namespaces, config.batch, now, waits, offered))
        if floors is not None:
            floors.note(due, claimed_at)
        if not due:
            return FireReport()
        compiled = await _compile(conn, due, cache)
        failed: dict[jobs_db.Key, tuple[db.DueSchedule, str]] = {}
        plans: list[_Plan] = []
        spent = 0
        next_after = planner.NextAfter()
        plannings: dict[tuple[int, datetime, datetime | None], planner.Planned] = {}

        def plan(row: db.DueSchedule) -> _Plan | None:
            """The schedule's plan, or None when it failed (recorded in ``failed``). Schedules
            of one parsed definition due at one time are planned once (planning is pure)."""
            entry = compiled[row.namespace, row.name]
            if not isinstance(entry, Compiled):
                failed[row.namespace, row.name] = (row, entry)
                return None
            key = (id(entry), row.next_run_at, row.missed_before)
            try:
                found = plannings.get(key)
                if found is None:
                    found = plannings[key] = planner.plan(row, entry, config.chunk, next_after)
            except Exception as exc:
                failed[row.namespace, row.name] = (row, f"planning it failed: {describe(exc)}")
                return None
            return _plan(row, entry, found)

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
            settled, deferred, alike = await _settle_apart(conn, plans, now, plan, failed)
            created = sum(sum(a.created.values()) for a in alike)
            span.counts(
                created=created, skipped=sum(p.skipped for p in settled), failed=len(failed)
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
            firing_metrics.Created(
                a.plans[0].due.namespace, a.plans[0].compiled.definition.job, occurrence, count
            )
            for a in alike
            for occurrence, count in a.created.items()
        ),
        (
            firing_metrics.Skipped(
                p.key,
                p.compiled.definition.job,
                {"misfire": p.misfired, "overlap": p.overlapped},
            )
            for p in settled
            if p.skipped
        ),
        due[0].now,
    )
    firing_metrics.failures({key: error for key, (_, error) in failed.items()}, retries)
    return FireReport(
        claimed=len(due),
        fired=created,
        skipped=sum(p.skipped for p in settled),
        existing=sum(len(p.fire) for p in settled) - created,
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
) -> tuple[list[_Plan], int, list[_Alike]]:
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
    alike: list[_Alike] = []
    while groups:
        group = groups.popleft()
        try:
            async with conn.transaction():
                done, held, fired = await _settle(conn, group, now)
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
        alike.extend(fired)
    return settled, deferred, alike


async def _settle(
    conn: connections.AsyncConnection, plans: list[_Plan], now: datetime | None
) -> tuple[list[_Plan], int, list[_Alike]]:
    """Overlap policies, then the jobs and the advance of ``plans`` (one statement); returns
    the plans settled, how many were deferred (Replace could not cancel) and the jobs created
    by the plans firing alike."""
    deferred = {p.key for p in await _apply_overlap(conn, plans, now)}
    plans = [p for p in plans if p.key not in deferred]
    alike: dict[tuple[object, ...], _Alike] = {}
    for p in plans:
        p.step = "making its jobs"
        shape = _alike(p)
        found = alike.get(shape)
        if found is None:
            alike[shape] = _Alike([p], _outcome(p))
        else:
            found.plans.append(p)
        p.step = INSERTING if p.fire else ADVANCING
    groups = list(alike.values())
    schedules = [
        (p.due.namespace, p.due.name, p.due.revision, i)
        for i, group in enumerate(groups)
        for p in group.plans
    ]
    firing = db.fire(schedules, [g.outcome for g in groups], tracing.capture())
    fired = await store.arun(conn, firing)
    if fired.stale:
        raise _Stale(", ".join(firing_metrics.label(key) for key in fired.stale))
    for (i, occurrence), count in fired.created.items():
        groups[i].created[occurrence] = count
    return plans, len(deferred), groups


INSERTING = "inserting its jobs"
ADVANCING = "advancing it to its next run"


def _inserting(plan: _Plan) -> str:
    instants = [occurrence.isoformat() for occurrence in plan.fire]
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
    """The stored error of a schedule whose writes failed: why, then what the pass was doing
    (its jobs and its advance are one statement: PostgreSQL names the table it refused)."""
    step = plan.step
    if step == INSERTING:
        refused = isinstance(exc, connections.DatabaseError) and exc.diag.table_name
        step = ADVANCING if refused == "schedules" else _inserting(plan)
    if isinstance(exc, connections.DatabaseError):
        return f"refused by PostgreSQL: {db.refusal(exc)}, {step}"
    return f"{step} failed: {describe(exc)}"


async def run_once(
    conn: connections.AsyncConnection,
    namespaces: Sequence[str],
    now: datetime | None,
    *,
    waits: Sequence[float] | None = None,
    cache: DefinitionCache | None = None,
    config: FiringConfig = DEFAULTS,
    until_busy: bool = False,
    floors: DueFloors | None = None,
) -> FireReport:
    """Fire everything due in ``namespaces`` at ``now`` (None: the database clock), batch
    after batch (one transaction each); an empty list fires nothing. ``waits`` (one per
    namespace, default none): seconds a namespace's schedules are overdue before a claim
    takes them while this worker has its own share to fire (the other workers' shares,
    :mod:`.shares`); once a claim comes back short, the next takes any due schedule. With
    ``until_busy``, it returns after the first batch that leaves more due (``busy``). With
    ``floors``, each claim starts its search where a recent one found the earliest due
    (:mod:`.floors`)."""
    report = FireReport()
    if not namespaces:
        return report
    cache = cache or DefinitionCache()
    # With waits, a claim that comes back short (this worker's share is done for now) is
    # followed by one without: the others' due schedules, which this worker has time for. A
    # worker with no share of its own claims as one without.
    scopes = (waits, None) if waits and any(waits) and 0.0 in waits else (None,)
    while True:
        for scope in scopes:
            try:
                batch = await _fire_batch(conn, namespaces, scope, now, cache, config, floors)
            except _Stale as stale:
                metrics.VERSION_MISMATCHES.labels("fire").inc()
                log.warning(
                    "version mismatch: schedules changed during a firing pass; rolled back",
                    extra=fields(
                        action="version_mismatch",
                        namespace=",".join(namespaces),
                        schedule=str(stale),
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
            if progressed and (batch.claimed == config.batch or batch.backlog):
                if until_busy:
                    report.busy = True
                    return report
                break  # more due: claim again, this worker's share first
        else:
            return report


class Firing:
    """Firing shaped as a service: :meth:`run_once` fires the namespaces it was given, their
    parsed definitions kept across passes. Not a shared duty: every worker offering a
    namespace fires it, and the claim of each due schedule (SKIP LOCKED) keeps them apart.
    With ``shares``, the other workers' shares of the namespaces wait (:mod:`.shares`), and
    with a ``pool`` too, a backlog is fired by ``config.connections`` passes at once, each
    on a connection of its own and given a part of this worker's share: while one waits for
    the database, another plans its batch.
    Its loop (:func:`tickwork.maintenance.firing.loop.loop`) sleeps until the next due run;
    :attr:`interval` is the longest it sleeps."""

    name = "firing"
    shared = False

    def __init__(
        self,
        namespaces: Sequence[str],
        config: FiringConfig = DEFAULTS,
        shares: Shares | None = None,
        pool: connections.AsyncPool | None = None,
    ) -> None:
        self.namespaces = tuple(namespaces)
        self.config = config
        self.shares = shares
        self.pool = pool
        self.cache = DefinitionCache(config.cache_size)
        self.floors = DueFloors()

    @property
    def interval(self) -> float:
        return self.config.max_sleep

    async def run_once(self, conn: connections.AsyncConnection, now: datetime | None) -> FireReport:
        if self.shares is None:
            return await self._pass(conn, now, None)
        dealt = await self.shares.update(conn, now)
        if self.pool is None or len(dealt.parts) < 2:
            return await self._pass(conn, now, dealt.whole)
        report = await self._pass(conn, now, dealt.whole, until_busy=True)
        if not report.busy:
            return report
        async with contextlib.AsyncExitStack() as stack:
            others = [
                await stack.enter_async_context(self.pool.connection()) for _ in dealt.parts[1:]
            ]
            try:  # a pass that fails stops the others before their connections go back
                async with asyncio.TaskGroup() as group:
                    passes = [
                        group.create_task(self._pass(each, now, waits))
                        for each, waits in zip((conn, *others), dealt.parts, strict=True)
                    ]
            except ExceptionGroup as failed:
                raise failed.exceptions[0] from None
        for done in passes:
            report.add(done.result())
        return report

    async def _pass(
        self,
        conn: connections.AsyncConnection,
        now: datetime | None,
        waits: Sequence[float] | None,
        until_busy: bool = False,
    ) -> FireReport:
        return await run_once(
            conn,
            self.namespaces,
            now,
            waits=waits,
            cache=self.cache,
            config=self.config,
            until_busy=until_busy,
            floors=self.floors,
        )
