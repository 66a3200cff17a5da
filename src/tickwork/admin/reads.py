"""What the console shows, read in one transaction per request: one function per view, each
returning a frozen page object that both the HTML page and the JSON API render. Every read
is bounded (a LIMIT, keyset pages), so a page costs the same with a million jobs.

Each read takes the caller's ``scope`` (schedule namespaces; None: all): a listing shows only
what is in it, and asking for anything outside it (a namespace, a schedule, a job) raises
:class:`OutOfScope` (403)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from tickwork.admin.settings import AdminSettings
from tickwork.db import admin as admin_db
from tickwork.db import clock as clock_db
from tickwork.db import job_counts as job_counts_db
from tickwork.db import jobs as jobs_db
from tickwork.db import pauses as pauses_db
from tickwork.db import results as results_db
from tickwork.db import schedules as schedules_db
from tickwork.db import store
from tickwork.db import workers as workers_db
from tickwork.db import workflows as workflows_db
from tickwork.db.connections import Connection
from tickwork.errors import JobNotFound, ScheduleNotFound
from tickwork.flow import limiting
from tickwork.model import Job
from tickwork.schedules import calendars, occurrences
from tickwork.schedules.checks import DefinitionError
from tickwork.schedules.definition import ScheduleDefinition
from tickwork.schedules.options import HistoryLimits, IntervalMode
from tickwork.schedules.stored import stored_history_limits
from tickwork.transitions import job_target

ERROR_CHARS = 300
"""Characters of a job's last error read for listings, from its end (where a traceback names
the exception; listings show that last line, the job's page the whole error)."""
MAX_ROWS = 1000
"""Most workers, queues, namespaces and orphan kinds listed."""
RECENT_AUDIT = 10
CHART_WINDOW_SECONDS = 3 * 3600
"""The charts: jobs that ended in the last 3 hours, per minute (the current one last)."""
CHART_STEP_SECONDS = 60


class OutOfScope(Exception):
    """The target lies outside the caller's schedule namespaces."""


def require(scope: admin_db.Scope, namespace: str | None, what: str) -> None:
    """Raise :class:`OutOfScope` unless ``scope`` covers ``namespace`` (jobs enqueued outside
    any schedule, with no namespace, are covered only by the unscoped)."""
    if scope is not None and namespace not in scope:
        raise OutOfScope(f"{what} is outside your schedule namespaces ({', '.join(sorted(scope))})")


def schedule_target(namespace: str, name: str) -> str:
    return f"schedule:{namespace}/{name}"


@dataclass(frozen=True)
class Activity:
    """The charts' data: jobs that ended from ``since`` on, per step, of one queue, one
    namespace and one schedule when given; counted (``tickwork.job_counts``), so the jobs that
    retention or history limits deleted are in it."""

    since: datetime
    step_seconds: int
    steps: int
    queue: str | None
    namespace: str | None
    slots: list[job_counts_db.ActivitySlot]
    """Only the steps in which some job ended, oldest first."""


def activity(
    conn: Connection,
    now: datetime,
    scope: admin_db.Scope,
    *,
    queue: str | None,
    namespace: str | None,
    schedule: str | None = None,
) -> Activity:
    """The last :data:`CHART_WINDOW_SECONDS` up to ``now``'s minute, per minute."""
    minute = now.replace(second=0, microsecond=0)
    since = minute + timedelta(seconds=CHART_STEP_SECONDS - CHART_WINDOW_SECONDS)
    slots = store.run(
        conn,
        job_counts_db.activity(
            since,
            CHART_WINDOW_SECONDS,
            CHART_STEP_SECONDS,
            queue=queue,
            namespace=namespace,
            schedule=schedule,
            scope=scope,
        ),
    )
    return Activity(
        since=since,
        step_seconds=CHART_STEP_SECONDS,
        steps=CHART_WINDOW_SECONDS // CHART_STEP_SECONDS,
        queue=queue,
        namespace=namespace,
        slots=slots,
    )


@dataclass(frozen=True)
class Overview:
    now: datetime
    totals: admin_db.Totals
    activity: Activity
    workers: list[admin_db.WorkerRow]
    queues: list[admin_db.QueueRow]
    waits: list[admin_db.QueueWait]
    """Per queue, its waiting jobs (available and due) and their oldest wait, in all and per
    schedule namespace of the caller's scope (jobs enqueued outside any: ``namespace`` None)."""
    orphans: list[admin_db.OrphanRow]
    recent_audit: list[admin_db.AuditRow]
    pauses: list[pauses_db.PauseRow]
    """The paused queues, and the paused namespaces of the caller's scope."""
    limits: list[limiting.StoredRule]
    """The limits of queues and kinds, and of the namespaces of the caller's scope, with
    their groups' running jobs and their rates' starts of the last period."""


def overview(
    conn: Connection,
    settings: AdminSettings,
    now: datetime | None,
    scope: admin_db.Scope,
    *,
    queue: str | None,
    namespace: str | None,
) -> Overview:
    """The overview; ``queue`` and ``namespace`` narrow its charts."""
    if namespace is not None:
        require(scope, namespace, f"namespace {namespace}")
    totals = store.run(conn, admin_db.totals(now, scope))
    live, window = settings.live_worker_seconds, settings.throughput_window_seconds
    return Overview(
        now=totals.now,
        totals=totals,
        activity=activity(conn, totals.now, scope, queue=queue, namespace=namespace),
        workers=store.run(conn, admin_db.workers(live, MAX_ROWS, now, scope)),
        queues=store.run(conn, admin_db.queues(window, MAX_ROWS, now, scope)),
        waits=store.run(conn, admin_db.queue_waits(MAX_ROWS, now, scope)),
        orphans=store.run(conn, admin_db.orphans(live, MAX_ROWS, now, scope)),
        recent_audit=store.run(
            conn, admin_db.audit(None, before=None, limit=RECENT_AUDIT, scope=scope)
        ),
        pauses=[
            p
            for p in store.run(conn, pauses_db.list_pauses())
            if p.scope == "queue" or scope is None or p.name in scope
        ],
        limits=[
            r
            for r in limiting.list_rules(conn, None, now)
            if r.rule.scope.value != "namespace" or scope is None or r.rule.name in scope
        ],
    )


def with_runs(
    conn: Connection, rows: list[admin_db.ScheduleSummary]
) -> list[admin_db.ScheduleSummary]:
    """``rows`` with their counted runs (``tickwork.job_counts``)."""
    counts = store.run(conn, job_counts_db.of_schedules((r.namespace, r.name) for r in rows))
    return [replace(r, runs=counts[r.namespace, r.name]) for r in rows]


@dataclass(frozen=True)
class SchedulesPage:
    namespace: str | None
    namespaces: list[admin_db.NamespaceRow]
    schedules: list[admin_db.ScheduleSummary]
    next_after: tuple[str, str] | None
    """Key of the last schedule shown, when more follow."""


def schedules(
    conn: Connection,
    settings: AdminSettings,
    now: datetime | None,
    *,
    namespace: str | None,
    after: tuple[str, str] | None,
    scope: admin_db.Scope,
) -> SchedulesPage:
    if namespace is not None:
        require(scope, namespace, f"namespace {namespace}")
    size = settings.page_size
    rows = store.run(
        conn, admin_db.schedules(namespace=namespace, after=after, limit=size + 1, scope=scope)
    )
    more = len(rows) > size
    rows = with_runs(conn, rows[:size])
    return SchedulesPage(
        namespace=namespace,
        namespaces=store.run(
            conn,
            admin_db.namespaces(namespace, settings.live_worker_seconds, MAX_ROWS, now, scope),
        ),
        schedules=rows,
        next_after=(rows[-1].namespace, rows[-1].name) if more else None,
    )


@dataclass(frozen=True)
class JobsPage:
    filter: admin_db.JobFilter
    jobs: list[admin_db.JobSummary]
    next_before: int | None
    """Id to continue from (older jobs), when more follow."""
    orphans: list[admin_db.OrphanRow]
    history_limits: HistoryLimits | None
    """The history limits of the schedule filtered on (None: not one schedule, or none such):
    how many of its finished jobs the list can show."""


def jobs(
    conn: Connection,
    settings: AdminSettings,
    now: datetime | None,
    *,
    where: admin_db.JobFilter,
    before: int | None,
    scope: admin_db.Scope,
) -> JobsPage:
    if where.namespace is not None:
        require(scope, where.namespace, f"namespace {where.namespace}")
    size = settings.page_size
    rows = store.run(
        conn,
        admin_db.jobs(where, before=before, limit=size + 1, error_chars=ERROR_CHARS, scope=scope),
    )
    more = len(rows) > size
    rows = rows[:size]
    return JobsPage(
        filter=where,
        jobs=rows,
        next_before=rows[-1].id if more else None,
        orphans=store.run(
            conn, admin_db.orphans(settings.live_worker_seconds, MAX_ROWS, now, scope)
        ),
        history_limits=_history_limits(conn, where.namespace, where.schedule),
    )


def _history_limits(
    conn: Connection, namespace: str | None, name: str | None
) -> HistoryLimits | None:
    if namespace is None or name is None:
        return None
    found = store.run(conn, schedules_db.list_schedules(namespace, name))
    return stored_history_limits(found[0].spec) if found else None


@dataclass(frozen=True)
class JobDetail:
    job: Job
    picker_seen_at: datetime | None
    """The last heartbeat of the worker process holding the job (running jobs)."""
    picker_stale: bool
    """That heartbeat is older than two of the worker's heartbeat intervals."""
    due: bool
    """Available and due: nothing for "run now" to do."""
    now: datetime
    audit: list[admin_db.AuditRow]
    outcome: results_db.JobResult = results_db.NO_RESULT
    """What its task returned (result, or why it was not kept) and last reported."""
    graph: RunGraph | None = None
    """The graph of the run the job is part of (None: it waits for no job and none for it)."""


GRAPH_JOBS = 60
"""The most jobs of a run's graph a job page draws, nearest to the job first."""


@dataclass(frozen=True)
class RunGraph:
    """The jobs linked to a job by ``after`` edges, and those edges (dependent, parent)."""

    jobs: list[workflows_db.Linked]
    edges: list[tuple[int, int]]
    cut: bool
    """More jobs are linked than are drawn."""


def run_graph(conn: Connection, job: Job) -> RunGraph | None:
    namespace = job.schedule.namespace if job.schedule else None
    found = store.run(conn, workflows_db.graph_jobs(job.id, namespace, GRAPH_JOBS + 1))
    if len(found) <= 1:
        return None
    jobs = found[:GRAPH_JOBS]
    edges = store.run(conn, workflows_db.graph_edges([j.id for j in jobs]))
    return RunGraph(jobs, [(int(a), int(b)) for a, b in edges], len(found) > GRAPH_JOBS)


def job(
    conn: Connection,
    settings: AdminSettings,
    now: datetime | None,
    job_id: int,
    scope: admin_db.Scope,
) -> JobDetail:
    found = store.run(conn, jobs_db.get_job(job_id))
    if found is None:
        raise JobNotFound(f"no job with id {job_id}")
    require(scope, found.schedule.namespace if found.schedule else None, f"job {job_id}")
    seen = store.run(conn, workers_db.seen_of_job(job_id, now))
    instant = store.run(conn, clock_db.database_now(now))
    return JobDetail(
        job=found,
        picker_seen_at=seen.last_seen_at if seen else None,
        picker_stale=seen.stale if seen else False,
        due=found.run_at <= instant,
        now=instant,
        audit=store.run(
            conn,
            admin_db.audit(job_target(job_id), before=None, limit=settings.page_size, scope=None),
        ),
        outcome=store.run(conn, results_db.job_results([job_id])).get(
            found.id, results_db.NO_RESULT
        ),
        graph=run_graph(conn, found),
    )


UPCOMING = 10
"""Next occurrences shown on a schedule's page."""


@dataclass(frozen=True)
class ScheduleDetail:
    summary: admin_db.ScheduleSummary
    row: schedules_db.ScheduleRow
    namespace: admin_db.NamespaceRow
    upcoming: list[datetime]
    """Its next occurrences after now, in its zone, as ``tickwork preview`` computes them
    (its calendar applied: ``spec.exclude``, ``startTime``, ``endTime``)."""
    no_upcoming: str | None
    """Why none are listed (a fixed-delay interval, a spec this version cannot read)."""
    activity: Activity
    """Its jobs that ended in the charts' window, per minute (counted)."""
    history_limits: HistoryLimits
    """How many of its finished jobs retention keeps: the rows ``jobs`` can show."""
    jobs: list[admin_db.JobSummary]
    audit: list[admin_db.AuditRow]


def upcoming(row: schedules_db.ScheduleRow, after: datetime) -> tuple[list[datetime], str | None]:
    """The next occurrences of ``row`` after ``after`` (jitter aside), or none and why."""
    if row.spec.get("intervalMode") == IntervalMode.FIXED_DELAY:
        return [], "A fixed-delay interval counts from each run's end"
    expression = row.schedule if row.schedule is not None else f"@every {row.every}"
    seed = f"{row.namespace}/{row.name}"
    try:
        occurrences.parse_expression(expression, seed=seed)  # its own errors first
        found = calendars.preview(
            expression,
            ScheduleDefinition.from_spec(row.name, row.spec).calendar(row.namespace),
            time_zone=row.time_zone,
            start=after,
            count=UPCOMING,
            seed=seed,
        )
    except (occurrences.InvalidExpression, DefinitionError) as exc:
        return [], f"The stored spec cannot be read ({exc})"
    if not found:
        return [], "The schedule has ended (spec.endTime)"
    return found, None


def schedule(
    conn: Connection,
    settings: AdminSettings,
    now: datetime | None,
    namespace: str,
    name: str,
    scope: admin_db.Scope,
) -> ScheduleDetail:
    require(scope, namespace, f"namespace {namespace}")
    summaries = store.run(
        conn, admin_db.schedules(namespace=namespace, name=name, after=None, limit=1, scope=None)
    )
    rows = store.run(conn, schedules_db.list_schedules(namespace, name))
    if not summaries or not rows:
        raise ScheduleNotFound(f"no schedule {name!r} in namespace {namespace!r}")
    spaces = store.run(
        conn, admin_db.namespaces(namespace, settings.live_worker_seconds, 1, now, None)
    )
    history = admin_db.JobFilter(namespace=namespace, schedule=name)
    instant = store.run(conn, clock_db.database_now(now))
    next_ones, why = upcoming(rows[0], instant)
    return ScheduleDetail(
        summary=with_runs(conn, summaries)[0],
        row=rows[0],
        namespace=spaces[0],
        upcoming=next_ones,
        no_upcoming=why,
        activity=activity(conn, instant, None, queue=None, namespace=namespace, schedule=name),
        history_limits=stored_history_limits(rows[0].spec),
        jobs=store.run(
            conn,
            admin_db.jobs(
                history, before=None, limit=settings.page_size, error_chars=ERROR_CHARS, scope=None
            ),
        ),
        audit=store.run(
            conn,
            admin_db.audit(
                schedule_target(namespace, name),
                before=None,
                limit=settings.page_size,
                scope=None,
            ),
        ),
    )


@dataclass(frozen=True)
class AuditPage:
    records: list[admin_db.AuditRow]
    next_before: int | None


def audit(
    conn: Connection, settings: AdminSettings, *, before: int | None, scope: admin_db.Scope
) -> AuditPage:
    size = settings.page_size
    rows = store.run(conn, admin_db.audit(None, before=before, limit=size + 1, scope=scope))
    more = len(rows) > size
    rows = rows[:size]
    return AuditPage(records=rows, next_before=rows[-1].id if more else None)
