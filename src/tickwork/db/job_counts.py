"""Operations on ``tickwork.job_counts`` (``db/sql/job_counts.sql``, migration 0017): the rollup
of how jobs ended, per minute, schedule, queue, kind and outcome, which the trigger
``jobs_ended`` (migrations 0017, 0028) writes in the statement that ends them. What users
count (the console's charts, queue and schedule totals, success rates, ``tickwork
schedules``) is read here, never from job rows, which retention and the schedules' history
limits delete; retention deletes these counts after ``--stats-retention-seconds``."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from datetime import datetime

from tickwork.db.store import Op, Row

Key = tuple[str, str]
"""(namespace, name) of a schedule."""


@dataclass(frozen=True)
class RunCounts:
    """A schedule's counted runs: its jobs that ended, by outcome, and its failed attempts."""

    succeeded: int
    dead: int
    cancelled: int
    failed_attempts: int
    """Attempts that failed and were retried (or whose lease ran out): no end of the job."""
    run_seconds: float
    """Run time (start to end) of the ended jobs that ran."""
    timed: int
    """The ended jobs that ran (a job cancelled before it started did not)."""
    since: datetime | None
    """The first minute counted (None: nothing counted yet)."""
    runs: int = field(init=False)
    """Jobs that ended: succeeded, dead or cancelled."""
    failed: int = field(init=False)
    """Jobs that ended without success (dead or cancelled), as ``failedJobsHistoryLimit``
    counts them."""
    success_rate: float | None = field(init=False)
    """Succeeded over ended (None: none ended)."""
    mean_seconds: float | None = field(init=False)
    """Mean run time of the ended jobs that ran (None: none)."""

    def __post_init__(self) -> None:
        runs = self.succeeded + self.dead + self.cancelled
        object.__setattr__(self, "runs", runs)
        object.__setattr__(self, "failed", self.dead + self.cancelled)
        object.__setattr__(self, "success_rate", self.succeeded / runs if runs else None)
        mean = self.run_seconds / self.timed if self.timed else None
        object.__setattr__(self, "mean_seconds", mean)


NONE = RunCounts(0, 0, 0, 0, 0.0, 0, None)


def _counts(row: Row) -> RunCounts:
    return RunCounts(
        succeeded=int(row["succeeded"]),
        dead=int(row["dead"]),
        cancelled=int(row["cancelled"]),
        failed_attempts=int(row["failed_attempts"]),
        run_seconds=float(row["run_seconds"]),
        timed=int(row["timed"]),
        since=row["since"],
    )


def of_schedules(keys: Iterable[Key]) -> Op[dict[Key, RunCounts]]:
    """The counts of each schedule of ``keys`` (zeros for one with none)."""
    ordered = sorted(set(keys))
    return Op(
        "job_counts_of_schedules",
        {"namespaces": [k[0] for k in ordered], "names": [k[1] for k in ordered]},
        lambda rows: {(row["namespace"], row["name"]): _counts(row) for row in rows},
    )


@dataclass(frozen=True)
class ActivitySlot:
    """The jobs that ended in one step of the charts' window."""

    slot: int
    """Steps since the window's start."""
    succeeded: int
    failed: int
    """Attempts that failed and were retried."""
    dead: int
    cancelled: int
    mean_lag: float | None
    """Seconds from occurrence to start, of the scheduled jobs (None: none ended)."""
    max_lag: float | None


def activity(
    since: datetime,
    window_seconds: float,
    step_seconds: float,
    *,
    queue: str | None,
    namespace: str | None,
    schedule: str | None = None,
    scope: Collection[str] | None,
) -> Op[list[ActivitySlot]]:
    """Jobs that ended from ``since`` on for ``window_seconds``, per step (only steps with
    any), of one queue, namespace or schedule when given, of the ``scope`` namespaces (None:
    all)."""
    return Op(
        "job_counts_activity",
        {
            "since": since,
            "window_seconds": window_seconds,
            "step_seconds": step_seconds,
            "queue": queue,
            "namespace": namespace,
            "schedule": schedule,
            "scope": None if scope is None else sorted(scope),
        },
        lambda rows: [ActivitySlot(**row) for row in rows],
    )


def delete_old(age_seconds: float, limit: int, now: datetime | None) -> Op[int]:
    """Delete up to ``limit`` counts of minutes older than ``age_seconds``; returns how many."""
    return Op(
        "job_counts_delete_old",
        {"age_seconds": age_seconds, "limit": limit, "now": now},
        len,
    )


def compact(unit: str, age_seconds: float, limit: int, now: datetime | None) -> Op[int]:
    """Merge up to ``limit`` counts older than ``age_seconds`` into one row per ``unit``
    ('hour', 'day') and group; returns how many rows were merged away."""
    return Op(
        "job_counts_compact",
        {"unit": unit, "age_seconds": age_seconds, "limit": limit, "now": now},
        lambda rows: int(rows[0]["moved"]),
    )
