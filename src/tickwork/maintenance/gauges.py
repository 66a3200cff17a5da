"""Fleet gauges: the worker that claims this duty samples PostgreSQL (open and dead jobs per
queue, the oldest due job, schedules per namespace and state, overdue schedules, live workers,
jobs of kinds no live worker registers, how long each paused queue and namespace has been
paused, the due jobs a pause or a flow rule holds, the rules and their use) and sets the
``tickwork_fleet_*`` gauges. Only one worker samples per interval, not every replica on every
scrape; :data:`tickwork.metrics.FLEET` exports a sample for a few intervals only, so a worker
that stopped winning the duty stops exporting old values."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from tickwork import metrics
from tickwork.db import connections, store
from tickwork.db import flow_rules as rules_db
from tickwork.db import jobs as jobs_db
from tickwork.db import pauses as pauses_db
from tickwork.db import schedules as schedules_db
from tickwork.db import workers as workers_db
from tickwork.flow.pauses import Scope, paused_seconds
from tickwork.maintenance.service import positive
from tickwork.model import JobStatus

FRESH_INTERVALS = 3
"""A sample is exported for this many sampling intervals, then hidden."""

OVERDUE_SECONDS = 60.0
"""An enabled, unsuspended schedule whose next run is later than this is overdue."""

SAMPLED_STATUSES = (JobStatus.AVAILABLE, JobStatus.RUNNING, JobStatus.DEAD)
"""Finished jobs (kept for retention, maybe millions) are not counted: that would scan them."""


@dataclass(frozen=True)
class FleetSample:
    at: datetime
    """The database's time of the sample."""
    workers: int
    jobs: list[jobs_db.QueueJobs]
    schedules: list[schedules_db.NamespaceSchedules]
    orphaned: list[jobs_db.OrphanedJobs] = field(default_factory=list)
    """Jobs of kinds no live worker registers."""
    pauses: list[pauses_db.PauseRow] = field(default_factory=list)
    """The paused queues and schedule namespaces."""
    held: list[rules_db.HeldJobs] = field(default_factory=list)
    """The due waiting jobs a pause or a flow rule holds, per queue and reason."""
    rules: list[rules_db.RuleRow] = field(default_factory=list)
    """The flow rules, with their groups' running jobs and their rates' recent starts."""


@dataclass(frozen=True)
class GaugeSamplingConfig:
    interval: float = 15.0
    """Seconds between two samples somewhere in the fleet."""
    ttl_seconds: float = 120.0
    """Workers count as live when seen within this."""
    fresh_seconds: float = FRESH_INTERVALS * 15.0
    """How long a sample stays exported: FRESH_INTERVALS of the sampling interval (the worker
    takes the longer of it and its maintenance loop's, which the duty waits for)."""

    def __post_init__(self) -> None:
        positive(self, "interval", "ttl_seconds", "fresh_seconds")


class GaugeSampling:
    name = "sample_gauges"
    shared = True

    def __init__(self, config: GaugeSamplingConfig = GaugeSamplingConfig()) -> None:
        self.config = config

    @property
    def interval(self) -> float:
        return self.config.interval

    async def run_once(
        self, conn: connections.AsyncConnection, now: datetime | None
    ) -> FleetSample:
        """Sample the fleet and export the sample."""
        result = await sample(conn, self.config.ttl_seconds, now)
        # Exported until a few samples were missed (another worker may be sampling now).
        export(result, fresh_for=self.config.fresh_seconds)
        return result


async def sample(
    conn: connections.AsyncConnection, ttl_seconds: float, now: datetime | None
) -> FleetSample:
    """Read the fleet's state; workers count as live when seen within ``ttl_seconds``."""
    async with conn.transaction():
        jobs = await store.arun(conn, jobs_db.gauge_jobs(now))
        schedules = await store.arun(
            conn, schedules_db.gauge_schedules(OVERDUE_SECONDS, ttl_seconds, now)
        )
        workers, at = await store.arun(conn, workers_db.gauge_workers(ttl_seconds, now))
        orphaned = await store.arun(conn, jobs_db.gauge_orphaned_jobs(ttl_seconds, now))
        pauses = await store.arun(conn, pauses_db.list_pauses())
        # Planned with few or no statistics on the small rules tables, the held jobs' query
        # is estimated far above jit_above_cost: compiling it took 1.4 s of a 1 ms query.
        await conn.execute("SET LOCAL jit = off")
        held = await store.arun(conn, rules_db.held_jobs(now))
        rules = await store.arun(conn, rules_db.list_rules(None, now))
    return FleetSample(at, workers, jobs, schedules, orphaned, pauses, held, rules)


def export(sample: FleetSample, fresh_for: float) -> None:
    """Replace the fleet gauges with ``sample``, exported for ``fresh_for`` seconds. Every
        queue seen gets every sampled status (0 when none); every namespace with schedules gets
        every state; namespaces with enabled schedules get their live worker count; kinds no live
    worker registers get their jobs per status (only the statuses they have); paused queues and
    namespaces get the seconds since their pause; every queue seen gets its held jobs by every
    reason (0 when none); each flow rule gets its limits and their use."""
    for gauge in (
        metrics.FLEET_JOBS,
        metrics.FLEET_OLDEST_DUE_AGE,
        metrics.FLEET_DEAD_JOBS,
        metrics.FLEET_SCHEDULES,
        metrics.FLEET_NAMESPACE_WORKERS,
        metrics.FLEET_OVERDUE_SCHEDULES,
        metrics.FLEET_ORPHANED_JOBS,
        metrics.FLEET_QUEUE_PAUSED,
        metrics.FLEET_NAMESPACE_PAUSED,
        metrics.FLEET_JOBS_HELD,
        metrics.FLEET_LIMIT_MAX_RUNNING,
        metrics.FLEET_LIMIT_RUNNING,
        metrics.FLEET_LIMIT_RATE,
        metrics.FLEET_LIMIT_RECENT_STARTS,
    ):
        gauge.clear()
    metrics.FLEET_SAMPLED.set(sample.at.timestamp())
    metrics.FLEET_WORKERS.set(sample.workers)
    counts = {(row.queue, row.status): row for row in sample.jobs}
    for queue in sorted({row.queue for row in sample.jobs}):
        for status in SAMPLED_STATUSES:
            row = counts.get((queue, status))
            metrics.FLEET_JOBS.labels(queue, status.value).set(row.count if row else 0)
        available = counts.get((queue, JobStatus.AVAILABLE))
        metrics.FLEET_OLDEST_DUE_AGE.labels(queue).set(available.oldest_due_age if available else 0)
        dead = counts.get((queue, JobStatus.DEAD))
        metrics.FLEET_DEAD_JOBS.labels(queue).set(dead.count if dead else 0)
    for ns in sample.schedules:
        for state, count in (
            ("enabled", ns.enabled),
            ("suspended", ns.suspended),
            ("disabled", ns.disabled),
        ):
            metrics.FLEET_SCHEDULES.labels(ns.namespace, state).set(count)
        metrics.FLEET_OVERDUE_SCHEDULES.labels(ns.namespace).set(ns.overdue)
        if ns.enabled:
            metrics.FLEET_NAMESPACE_WORKERS.labels(ns.namespace).set(ns.workers)
    for orphaned in sample.orphaned:
        metrics.FLEET_ORPHANED_JOBS.labels(orphaned.kind, orphaned.status.value).set(orphaned.count)
    for pause in sample.pauses:
        paused = metrics.FLEET_QUEUE_PAUSED
        if pause.scope == Scope.NAMESPACE.value:
            paused = metrics.FLEET_NAMESPACE_PAUSED
        paused.labels(pause.name).set(paused_seconds(pause.paused_at, sample.at))
    held = {(row.queue, row.reason): row.count for row in sample.held}
    for queue in sorted({row.queue for row in sample.jobs} | {q for q, _ in held}):
        for reason in rules_db.HELD_REASONS:
            metrics.FLEET_JOBS_HELD.labels(reason, queue).set(held.get((queue, reason), 0))
    for rule in sample.rules:
        labels = (rule.scope, rule.name)
        if rule.max_running is not None:
            metrics.FLEET_LIMIT_MAX_RUNNING.labels(*labels).set(rule.max_running)
            metrics.FLEET_LIMIT_RUNNING.labels(*labels).set(rule.running or 0)
        if rule.rate is not None:
            metrics.FLEET_LIMIT_RATE.labels(*labels).set(rule.rate)
            metrics.FLEET_LIMIT_RECENT_STARTS.labels(*labels).set(rule.recent_starts or 0)
    metrics.FLEET.sampled(fresh_for)
