"""Every Prometheus metric tickwork exports, defined in one place. Names start with
``tickwork_``; labels are bounded (schedule_namespace, schedule, queue, kind, outcome, reason,
result), never a job id. No label is called ``namespace``: Prometheus's scrape gives every
series the Kubernetes namespace of its pod under that name.

Job metrics carry the ``schedule_namespace`` of the job's schedule (:data:`NO_SCHEDULE`, the
empty string, for a job enqueued outside any schedule), so alerts can be routed per tenant.

Fleet gauges (``tickwork_fleet_*``) are sampled from PostgreSQL by whichever worker claims
the sampling duty, and each worker exports its sample for a few intervals only (see
:class:`FreshGauges`), so several workers may export them with different ages: aggregate them
with ``max without (instance, pod)``. ``docs/observability.md`` explains every metric.
"""

from __future__ import annotations

import bisect
import itertools
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import Protocol

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.metrics_core import HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from tickwork.model import Job

_SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600)


class FastHistogram(Collector):
    """A labelled histogram for the worker's per-job path. Observing is a bisect and two
    additions, without locks: several times cheaper than prometheus_client's Histogram, which
    matters at tens of microseconds per job. Each child must be observed from one thread (the
    worker's event loop, which also serves the scrapes)."""

    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: Sequence[str],
        buckets: Sequence[float],
        registry: CollectorRegistry | None = REGISTRY,
    ) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = tuple(labelnames)
        self.bounds = tuple(float(bound) for bound in buckets)
        self._children: dict[tuple[str, ...], FastHistogramChild] = {}
        if registry is not None:
            registry.register(self)

    def labels(self, *values: str) -> FastHistogramChild:
        child = self._children.get(values)
        if child is None:
            child = self._children[values] = FastHistogramChild(self.bounds)
        return child

    def describe(self) -> Iterator[Metric]:
        yield HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)

    def collect(self) -> Iterator[Metric]:
        family = HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)
        edges = [repr(bound) for bound in self.bounds] + ["+Inf"]  # as prometheus_client: 1.0
        for values, child in list(self._children.items()):
            cumulative = itertools.accumulate(child.counts)
            family.add_metric(values, list(zip(edges, cumulative, strict=True)), child.sum)
        yield family


class FastHistogramChild:
    __slots__ = ("_bounds", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self._bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        """Per bucket, not cumulative; the last one is +Inf."""
        self.sum = 0.0

    def observe(self, amount: float) -> None:
        self.counts[bisect.bisect_left(self._bounds, amount)] += 1
        self.sum += amount

    def observe_many(self, amounts: Iterable[float]) -> None:
        counts, bounds, total = self.counts, self._bounds, 0.0
        for amount in amounts:
            counts[bisect.bisect_left(bounds, amount)] += 1
            total += amount
        self.sum += total


# --- jobs (counted by the process doing the work) ---------------------------------------
NO_SCHEDULE = ""
"""The ``schedule_namespace`` of a job enqueued outside any schedule."""
_JOB = ("schedule_namespace", "queue", "kind")
JOBS_ENQUEUED = Counter(
    "tickwork_jobs_enqueued_total", "Jobs enqueued by this process (not by schedules).", _JOB
)
JOBS_CLAIMED = Counter("tickwork_jobs_claimed_total", "Jobs claimed by this worker.", _JOB)
JOBS_COMPLETED = Counter(
    "tickwork_jobs_completed_total",
    "Job attempts finished by this worker, by outcome: "
    "succeeded, retried, dead, cancelled, timed_out; a sync that prunes a schedule counts "
    "its pending jobs it cancelled as cancelled.",
    [*_JOB, "outcome"],
)
JOB_DURATION = FastHistogram(
    "tickwork_job_duration_seconds",
    "Execution time of one attempt.",
    _JOB,
    buckets=_SECONDS,
)
JOB_QUEUE_LATENCY = FastHistogram(
    "tickwork_job_queue_latency_seconds",
    "Time from a job's run_at (the database's time) to the claim that started its attempt.",
    _JOB,
    buckets=_SECONDS,
)
LEASE_RECOVERIES = Counter(
    "tickwork_lease_recoveries_total",
    "Jobs whose lease expired (their worker died or hung) and that this worker recovered.",
    _JOB,
)
VERSION_MISMATCHES = Counter(
    "tickwork_version_mismatches_total",
    "Writes dropped because the row changed elsewhere, by operation: complete, retry, dead "
    "(a job's outcome), interrupt (a job handed back at shutdown), fire (a firing batch, rolled "
    "back).",
    ["operation"],
)

LOOP_LAG = Histogram(
    "tickwork_worker_loop_lag_seconds",
    "How late the worker's event loop ran a callback handed to it (probed twice a second "
    "from a thread): long ones are async tasks blocking the loop.",
    buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300),
)


class _Count(Protocol):
    def inc(self, amount: float = 1) -> None: ...


class _Observe(Protocol):
    def observe(self, amount: float) -> None: ...

    def observe_many(self, amounts: Iterable[float]) -> None: ...


class _Off:
    """Stands in for a metric child when instrumentation is off."""

    def inc(self, amount: float = 1) -> None:
        return None

    def observe(self, amount: float) -> None:
        return None

    def observe_many(self, amounts: Iterable[float]) -> None:
        return None


class JobMeter:
    """The job metrics' children for one (schedule namespace, queue, kind), looked up once:
    ``.labels()`` costs about as much as the update itself, and the worker updates them for
    every job."""

    __slots__ = (
        "cancelled",
        "claimed",
        "dead",
        "duration",
        "latency",
        "recovered",
        "retried",
        "succeeded",
        "timed_out",
    )

    def __init__(self, *labels: str, enabled: bool = True) -> None:
        off = _Off()
        self.claimed: _Count = JOBS_CLAIMED.labels(*labels) if enabled else off
        self.latency: _Observe = JOB_QUEUE_LATENCY.labels(*labels) if enabled else off
        self.duration: _Observe = JOB_DURATION.labels(*labels) if enabled else off
        self.recovered: _Count = LEASE_RECOVERIES.labels(*labels) if enabled else off

        def outcome(name: str) -> _Count:
            return JOBS_COMPLETED.labels(*labels, name) if enabled else off

        self.succeeded = outcome("succeeded")
        self.retried = outcome("retried")
        self.dead = outcome("dead")
        self.cancelled = outcome("cancelled")
        self.timed_out = outcome("timed_out")


class JobMeters:
    """A :class:`JobMeter` per (schedule namespace, queue, kind), made on first use.
    ``enabled=False`` gives meters that record nothing, and tells the worker to skip its
    per-job bookkeeping (the benchmark's baseline)."""

    def __init__(self, *, enabled: bool = True) -> None:
        self.enabled = enabled
        self._meters: dict[tuple[str, str, str], JobMeter] = {}

    def __call__(self, schedule_namespace: str | None, queue: str, kind: str) -> JobMeter:
        """``schedule_namespace`` None: the job has no schedule (:data:`NO_SCHEDULE`)."""
        key = (schedule_namespace or NO_SCHEDULE, queue, kind)
        return self._meters.get(key) or self._add(key)

    def of(self, job: Job) -> JobMeter:
        """The meter of ``job``; the worker's per-job path, so the lookup is inlined."""
        schedule = job.schedule
        key = (NO_SCHEDULE if schedule is None else schedule.namespace, job.queue, job.kind)
        return self._meters.get(key) or self._add(key)

    def _add(self, key: tuple[str, str, str]) -> JobMeter:
        meter = self._meters[key] = JobMeter(*key, enabled=self.enabled)
        return meter


# --- schedules (counted by the worker that fires) --------------------------------------
SCHEDULE_OCCURRENCES = Counter(
    "tickwork_schedule_occurrences_total",
    "Occurrences that became jobs (per namespace: a series per schedule would be a million"
    " series at a million schedules; a schedule's own are its status and row).",
    ["schedule_namespace", "queue", "kind"],
)
SCHEDULE_SKIPPED = Counter(
    "tickwork_schedule_skipped_occurrences_total",
    "Occurrences that did not become jobs, by reason: misfire, overlap.",
    ["schedule_namespace", "schedule", "queue", "kind", "reason"],
)
SCHEDULE_FIRING_LAG = Histogram(
    "tickwork_schedule_firing_lag_seconds",
    "Time from an occurrence's due instant to its job's insertion.",
    ["schedule_namespace"],
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300),
)
SCHEDULE_LAST_FIRE = Gauge(
    "tickwork_schedule_last_fire_timestamp_seconds",
    "Unix time of the newest occurrence this worker fired in the namespace.",
    ["schedule_namespace"],
)
SCHEDULE_DEADLINES_MISSED = Counter(
    "tickwork_schedule_deadlines_missed_total",
    "Occurrences that had not succeeded by their spec.deadline, counted once by the worker"
    " that found them (the check_deadlines duty).",
    ["schedule_namespace", "schedule"],
)
SCHEDULE_FIRING_FAILURES = Counter(
    "tickwork_schedule_firing_failures_total",
    "Firings of a schedule that failed (its error is on its row); it was set aside for a retry.",
    ["schedule_namespace", "schedule"],
)

# --- fleet gauges (sampled from PostgreSQL by one worker at a time) --------------------
# Not registered on their own: FLEET (below) exports them only while this worker's sample is
# fresh, so a worker that stopped winning the sampling duty stops exporting old values.
FLEET_SAMPLED = Gauge(
    "tickwork_fleet_sample_timestamp_seconds",
    "Unix time (database clock) this worker last sampled the fleet gauges.",
    registry=None,
)
FLEET_JOBS = Gauge(
    "tickwork_fleet_jobs",
    "Open and dead jobs by queue and status: available, running, dead (finished jobs are "
    "counted by tickwork_jobs_completed_total, not sampled).",
    ["queue", "status"],
    registry=None,
)
FLEET_OLDEST_DUE_AGE = Gauge(
    "tickwork_fleet_oldest_due_job_age_seconds",
    "Age of the oldest available job whose run_at has passed, per queue (0: none due).",
    ["queue"],
    registry=None,
)
FLEET_DEAD_JOBS = Gauge(
    "tickwork_fleet_dead_jobs", "Dead jobs kept, per queue.", ["queue"], registry=None
)
FLEET_SCHEDULES = Gauge(
    "tickwork_fleet_schedules",
    "Schedules per namespace and state: enabled, suspended, disabled.",
    ["schedule_namespace", "state"],
    registry=None,
)
FLEET_NAMESPACE_WORKERS = Gauge(
    "tickwork_fleet_namespace_workers",
    "Live workers offering each namespace that has enabled schedules (0: nothing fires them).",
    ["schedule_namespace"],
    registry=None,
)
FLEET_OVERDUE_SCHEDULES = Gauge(
    "tickwork_fleet_overdue_schedules",
    "Enabled, unsuspended schedules whose next run is more than a minute overdue, per namespace.",
    ["schedule_namespace"],
    registry=None,
)
FLEET_WORKERS = Gauge("tickwork_fleet_workers", "Live workers in the fleet.", registry=None)
FLEET_QUEUE_PAUSED = Gauge(
    "tickwork_fleet_queue_paused_seconds",
    "Seconds since each paused queue was paused (only paused queues have a series).",
    ["queue"],
    registry=None,
)
FLEET_NAMESPACE_PAUSED = Gauge(
    "tickwork_fleet_namespace_paused_seconds",
    "Seconds since each paused schedule namespace was paused (only paused ones have a series).",
    ["schedule_namespace"],
    registry=None,
)


class FreshGauges(Collector):
    """Exports its gauges only for ``max_age`` seconds after each :meth:`sampled`."""

    def __init__(self, gauges: Iterable[Gauge], registry: CollectorRegistry | None) -> None:
        self.gauges = tuple(gauges)
        self.max_age = 0.0
        self._sampled_at: float | None = None
        if registry is not None:
            registry.register(self)

    def sampled(self, max_age: float) -> None:
        """The gauges were just set; export them for ``max_age`` seconds."""
        self._sampled_at = time.monotonic()
        self.max_age = max_age

    @property
    def fresh(self) -> bool:
        return self._sampled_at is not None and time.monotonic() - self._sampled_at <= self.max_age

    def describe(self) -> Iterator[Metric]:
        for gauge in self.gauges:
            yield from gauge.describe()

    def collect(self) -> Iterator[Metric]:
        if self.fresh:
            for gauge in self.gauges:
                yield from gauge.collect()


FLEET_ORPHANED_JOBS = Gauge(
    "tickwork_fleet_orphaned_jobs",
    "Jobs of kinds no live worker registers, by kind and status: available, running, dead "
    "(their on_dead hook pending).",
    ["kind", "status"],
    registry=None,
)
FLEET_JOBS_HELD = Gauge(
    "tickwork_fleet_jobs_held",
    "Due waiting jobs no claim would take now, per queue, by the first reason that holds them: "
    "paused (their queue), queue_limit, kind_limit, namespace_limit (that max_running reached, "
    "fleet-wide), rate_limit (a rate used up for its last period). Every queue with open jobs "
    "has every reason (0: none held so).",
    ["reason", "queue"],
    registry=None,
)
FLEET_LIMIT_MAX_RUNNING = Gauge(
    "tickwork_fleet_limit_max_running",
    "The concurrency limit (max_running) of each limited queue, kind or schedule namespace.",
    ["scope", "name"],
    registry=None,
)
FLEET_LIMIT_RUNNING = Gauge(
    "tickwork_fleet_limit_running",
    "Running jobs of each queue, kind or schedule namespace with a concurrency limit.",
    ["scope", "name"],
    registry=None,
)
FLEET_LIMIT_RATE = Gauge(
    "tickwork_fleet_limit_rate_starts",
    "The starts a rate limit allows per its period, for each rate-limited queue, kind or "
    "schedule namespace (per value of its payload field, for a keyed rate).",
    ["scope", "name"],
    registry=None,
)
FLEET_LIMIT_RECENT_STARTS = Gauge(
    "tickwork_fleet_limit_recent_starts",
    "Starts of each rate-limited queue, kind or schedule namespace in the rate's last period "
    "(all values of a keyed rate's field together).",
    ["scope", "name"],
    registry=None,
)
FLEET = FreshGauges(
    (
        FLEET_SAMPLED,
        FLEET_JOBS,
        FLEET_OLDEST_DUE_AGE,
        FLEET_DEAD_JOBS,
        FLEET_SCHEDULES,
        FLEET_NAMESPACE_WORKERS,
        FLEET_OVERDUE_SCHEDULES,
        FLEET_WORKERS,
        FLEET_ORPHANED_JOBS,
        FLEET_QUEUE_PAUSED,
        FLEET_NAMESPACE_PAUSED,
        FLEET_JOBS_HELD,
        FLEET_LIMIT_MAX_RUNNING,
        FLEET_LIMIT_RUNNING,
        FLEET_LIMIT_RATE,
        FLEET_LIMIT_RECENT_STARTS,
    ),
    REGISTRY,
)

# --- container jobs -----------------------------------------------------------------
CONTAINER_JOB_ORPHANS_DELETED = Counter(
    "tickwork_container_jobs_orphans_deleted_total",
    "Active Kubernetes Jobs of container jobs that this worker's reconciler deleted, by reason:"
    " their tickwork job had finished (succeeded, dead, cancelled) or was gone.",
    ["reason"],
)

# --- operator -----------------------------------------------------------------------
OPERATOR_SYNCS = Counter(
    "tickwork_operator_syncs_total",
    "Namespace syncs by result: success, invalid, owned_elsewhere, database_error.",
    ["schedule_namespace", "result"],
)
OPERATOR_SYNC_DURATION = Histogram(
    "tickwork_operator_sync_duration_seconds",
    "Time one namespace sync took.",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)
OPERATOR_SCHEDULES = Gauge(
    "tickwork_operator_schedules",
    "Schedule objects seen by the operator, by Ready condition status: True, False, Unknown.",
    ["ready"],
)
OPERATOR_ACTIVE = Gauge(
    "tickwork_operator_active",
    "1 while this operator is the active one of its kopf peering (or runs --standalone), 0 "
    "while it is the standby.",
)
OPERATOR_ERRORS = Counter(
    "tickwork_operator_errors_total",
    "Operator errors by source: watch, database, status (a status patch the API server "
    "refused or did not answer).",
    ["source"],
)

# --- admin console --------------------------------------------------------------------
ADMIN_LOGIN_FAILURES = Counter(
    "tickwork_admin_login_failures_total",
    "Failed console logins by method: form, basic, bearer.",
    ["via"],
)
ADMIN_LOGIN_LOCKOUTS = Counter(
    "tickwork_admin_login_lockouts_total",
    "Console login lockouts started, by what they hold back: address, name, global.",
    ["lock"],
)
