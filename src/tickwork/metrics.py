"""Every Prometheus metric tickwork exports, defined in one place. Names start with
``tickwork_``; labels are bounded (namespace, schedule, queue, kind, outcome, reason, result),
never a job id.

Fleet gauges (``tickwork_fleet_*``) are sampled from PostgreSQL by whichever worker claims
the sampling duty, so several workers may export them with different ages: aggregate them
with ``max without (instance, pod)``.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

_SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600)

# --- jobs (counted by the process doing the work) ---------------------------------------
JOBS_ENQUEUED = Counter(
    "tickwork_jobs_enqueued_total", "Jobs enqueued by this process.", ["queue", "kind"]
)
JOBS_CLAIMED = Counter(
    "tickwork_jobs_claimed_total", "Jobs claimed by this worker.", ["queue", "kind"]
)
JOBS_COMPLETED = Counter(
    "tickwork_jobs_completed_total",
    "Job attempts finished by this worker, by outcome: "
    "succeeded, retried, dead, cancelled, timed_out.",
    ["queue", "kind", "outcome"],
)
JOB_DURATION = Histogram(
    "tickwork_job_duration_seconds",
    "Execution time of one attempt.",
    ["queue", "kind"],
    buckets=_SECONDS,
)
JOB_QUEUE_LATENCY = Histogram(
    "tickwork_job_queue_latency_seconds",
    "Time from a job's run_at to the start of its attempt.",
    ["queue", "kind"],
    buckets=_SECONDS,
)
LEASE_RECOVERIES = Counter(
    "tickwork_lease_recoveries_total",
    "Jobs whose lease expired (their worker died or hung) and that this worker recovered.",
    ["queue", "kind"],
)
VERSION_MISMATCHES = Counter(
    "tickwork_version_mismatches_total",
    "Writes dropped because the job was changed elsewhere (cancelled, recovered, retried).",
    ["operation"],
)

# --- schedules (counted by the worker that fires) --------------------------------------
SCHEDULE_OCCURRENCES = Counter(
    "tickwork_schedule_occurrences_total",
    "Occurrences that became jobs.",
    ["namespace", "schedule", "queue", "kind"],
)
SCHEDULE_SKIPPED = Counter(
    "tickwork_schedule_skipped_occurrences_total",
    "Occurrences that did not become jobs, by reason: misfire, overlap.",
    ["namespace", "schedule", "queue", "kind", "reason"],
)
SCHEDULE_FIRING_LAG = Histogram(
    "tickwork_schedule_firing_lag_seconds",
    "Time from an occurrence's due instant to its job's insertion.",
    ["namespace"],
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300),
)
SCHEDULE_LAST_FIRE = Gauge(
    "tickwork_schedule_last_fire_timestamp_seconds",
    "Unix time of the last occurrence fired by this worker.",
    ["namespace", "schedule"],
)

# --- fleet gauges (sampled from PostgreSQL by one worker at a time) --------------------
FLEET_SAMPLED = Gauge(
    "tickwork_fleet_sample_timestamp_seconds",
    "Unix time this worker last sampled the fleet gauges.",
)
FLEET_JOBS = Gauge("tickwork_fleet_jobs", "Jobs by queue and status.", ["queue", "status"])
FLEET_OLDEST_DUE_AGE = Gauge(
    "tickwork_fleet_oldest_due_job_age_seconds",
    "Age of the oldest available job whose run_at has passed, per queue (0: none due).",
    ["queue"],
)
FLEET_DEAD_JOBS = Gauge("tickwork_fleet_dead_jobs", "Dead jobs kept, per queue.", ["queue"])
FLEET_SCHEDULES = Gauge(
    "tickwork_fleet_schedules",
    "Schedules per namespace and state: enabled, suspended, disabled.",
    ["namespace", "state"],
)
FLEET_NAMESPACE_WORKERS = Gauge(
    "tickwork_fleet_namespace_workers",
    "Live workers offering each namespace that has enabled schedules (0: nothing fires them).",
    ["namespace"],
)
FLEET_OVERDUE_SCHEDULES = Gauge(
    "tickwork_fleet_overdue_schedules",
    "Enabled, unsuspended schedules whose next run is overdue, per namespace.",
    ["namespace"],
)
FLEET_WORKERS = Gauge("tickwork_fleet_workers", "Live workers in the fleet.")

# --- operator -----------------------------------------------------------------------
OPERATOR_SYNCS = Counter(
    "tickwork_operator_syncs_total",
    "Namespace syncs by result: success, invalid, owned_elsewhere, database_error.",
    ["namespace", "result"],
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
OPERATOR_ERRORS = Counter(
    "tickwork_operator_errors_total",
    "Operator errors by source: watch, database.",
    ["source"],
)
