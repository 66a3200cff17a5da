"""The firing engine's decisions, as pure functions: which due occurrences are misses and
which of them still fire (misfire policy), which fire while the schedule's previous job is
open (overlap policy), what job an occurrence makes (template, carried state, jitter), and
the jobs of a backfill (the overlap policy as a concurrency key, in occurrence order).

Nothing here reads the clock or the database; the firing pass hands in what it knows.
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from tickwork.model import NewJob, OpenJobs
from tickwork.schedules.container_jobs import KIND, ContainerJob
from tickwork.schedules.definition import ScheduleDefinition
from tickwork.schedules.limits import MAX_CATCH_UP
from tickwork.schedules.options import ConcurrencyPolicy, MisfirePolicy


def retained(policy: MisfirePolicy, catch_up_limit: int) -> int:
    """How many of the most recent misses the policy may still fire."""
    if policy is MisfirePolicy.SKIP:
        return 0
    if policy is MisfirePolicy.LATEST:
        return 1
    return min(catch_up_limit, MAX_CATCH_UP)


def is_missed(
    occurrence: datetime,
    now: datetime,
    *,
    starting_deadline_seconds: int | None,
    missed_before: datetime | None,
) -> bool:
    """Missed: before ``missed_before`` (the schedule was suspended then), or firing ``now``
    is later than the occurrence plus its starting deadline."""
    if missed_before is not None and occurrence < missed_before:
        return True
    if starting_deadline_seconds is None:
        return False
    return occurrence + timedelta(seconds=starting_deadline_seconds) < now


@dataclass(frozen=True)
class MisfireDecision:
    fire: tuple[datetime, ...]
    """Occurrences that still fire, in order."""
    skipped: int
    """Misses thrown away."""
    settled: int
    """How many of the occurrences given are dealt with (a prefix); the rest come back next pass."""


def decide_misfire(
    occurrences: Sequence[datetime],
    *,
    complete: bool,
    now: datetime,
    policy: MisfirePolicy,
    catch_up_limit: int,
    starting_deadline_seconds: int | None,
    missed_before: datetime | None,
) -> MisfireDecision:
    """Apply the misfire policy to the due ``occurrences`` (ascending, all at or before ``now``).

    ``complete`` says the list holds every due occurrence. Misses form a prefix of the list:
    with ``starting_deadline_seconds``, those fired later than the deadline; without one, every
    occurrence superseded by a later due one (all but the last of a complete list, all of a
    list cut short); with either, those before ``missed_before``.
    When the list was cut short inside the misses, how many there are in all is unknown, so
    only those that cannot be among the :func:`retained` most recent are settled (skipped);
    the caller looks again from the first unsettled one, having listed at least
    ``retained(...)`` more occurrences than it wants settled.
    Skip fires no miss; Latest fires the most recent one unless an on-time occurrence fires
    in the same pass; CatchUp fires the most recent ``catch_up_limit``. So by default (no
    deadline, Latest) a schedule whose workers were down fires once when they are back.
    """

    def on_time(occurrence: datetime) -> bool:
        return not is_missed(
            occurrence,
            now,
            starting_deadline_seconds=starting_deadline_seconds,
            missed_before=missed_before,
        )

    missed = bisect.bisect_left(occurrences, True, key=on_time)
    if starting_deadline_seconds is None:
        superseded = len(occurrences) - 1 if complete else len(occurrences)
        missed = max(missed, superseded)
    keep = retained(policy, catch_up_limit)
    if missed == len(occurrences) and not complete:
        settled = max(missed - keep, 0)
        return MisfireDecision(fire=(), skipped=settled, settled=settled)
    punctual = tuple(occurrences[missed:])
    if policy is MisfirePolicy.LATEST and punctual:
        keep = 0
    chosen = tuple(occurrences[max(missed - keep, 0) : missed])
    return MisfireDecision(
        fire=chosen + punctual, skipped=missed - len(chosen), settled=len(occurrences)
    )


@dataclass(frozen=True)
class OverlapDecision:
    fire: tuple[datetime, ...]
    skipped: int
    replace: bool
    """Cancel the schedule's open jobs before firing."""


def decide_overlap(
    candidates: Sequence[datetime], policy: ConcurrencyPolicy, open_jobs: OpenJobs | None
) -> OverlapDecision:
    """Which ``candidates`` (ascending) fire, given the schedule's open jobs.

    Allow fires all. Forbid fires the latest one only when no job is pending or running.
    BufferOne fires the latest one unless a job is already pending (waiting to start); the
    engine's concurrency key keeps it from starting before the running one finished.
    Replace fires the latest one and cancels the open jobs. Candidates not fired are skipped.
    """
    if not candidates or policy is ConcurrencyPolicy.ALLOW:
        return OverlapDecision(tuple(candidates), 0, replace=False)
    pending = open_jobs.available if open_jobs else 0
    running = open_jobs.running if open_jobs else 0
    blocked = (policy is ConcurrencyPolicy.FORBID and pending + running > 0) or (
        policy is ConcurrencyPolicy.BUFFER_ONE and pending > 0
    )
    if blocked:
        return OverlapDecision((), len(candidates), replace=False)
    replace = policy is ConcurrencyPolicy.REPLACE and pending + running > 0
    return OverlapDecision((candidates[-1],), len(candidates) - 1, replace=replace)


def jitter(namespace: str, name: str, occurrence: datetime, seconds: int) -> timedelta:
    """A delay in [0, ``seconds``] that is the same for an occurrence in every process."""
    if seconds <= 0:
        return timedelta(0)
    digest = hashlib.sha256(f"{namespace}/{name}/{occurrence.isoformat()}".encode()).digest()
    return timedelta(microseconds=int.from_bytes(digest[:8], "big") % (seconds * 1_000_000 + 1))


def concurrency_key(namespace: str, definition: ScheduleDefinition) -> str | None:
    """The template's key; BufferOne without one gets ``schedule:<namespace>/<name>``, so
    the waiting job cannot start before the running one finished."""
    if definition.concurrency_policy is ConcurrencyPolicy.BUFFER_ONE:
        return serial_key(namespace, definition)
    return definition.job.concurrency_key


def serial_key(namespace: str, definition: ScheduleDefinition) -> str:
    """The concurrency key that runs a schedule's jobs one at a time: the template's, else
    ``schedule:<namespace>/<name>`` (BufferOne's own key)."""
    key = definition.job.concurrency_key
    return f"schedule:{namespace}/{definition.name}" if key is None else key


def backfill_jobs(
    namespace: str, definition: ScheduleDefinition, found: Sequence[datetime], state: Any
) -> list[NewJob]:
    """The jobs of a backfill's occurrences ``found`` (ascending), to insert in that order.

    Allow: as the firing makes them, free to run side by side. Forbid, BufferOne and Replace:
    all under :func:`serial_key`, so at most one of them runs at a time fleet-wide (and none
    alongside a running job of the schedule that carries the key), each run_at at least its
    predecessor's (jitter can no longer reorder them), so the claim's order (run_at, id)
    takes them oldest first. Under Replace too each runs in turn, none cancelled by another
    (the schedule's own firing still replaces the open ones, as any previous job). One at a
    time even when the template's key has a ``concurrencyLimit``: those jobs carry none (1)."""
    jobs = [schedule_job(namespace, definition, occurrence, state) for occurrence in found]
    if definition.concurrency_policy is ConcurrencyPolicy.ALLOW:
        return jobs
    key = serial_key(namespace, definition)
    ordered: list[NewJob] = []
    latest = None
    for job in jobs:
        assert job.run_at is not None  # an occurrence's job has its due time
        latest = job.run_at if latest is None else max(latest, job.run_at)
        ordered.append(replace(job, run_at=latest, concurrency_key=key, concurrency_limit=None))
    return ordered


def job_payload(namespace: str, definition: ScheduleDefinition, state: Any) -> Any:
    """The payload of the schedule's next job: with a ``jobTemplate``, the
    :class:`~tickwork.schedules.container_jobs.ContainerJob` (its Jobs go to the Schedule
    object's Kubernetes namespace, else the schedule namespace; no carried state); otherwise
    the carried ``state`` when not None, else the template's payload. A container job's result
    (its Kubernetes Job's outcome) is never carried, however its schedule was defined."""
    container = definition.container
    if container is not None:
        return ContainerJob(
            namespace=container.namespace or namespace,
            schedule=definition.name,
            template=container.template,
            owner_uid=container.owner_uid,
            successful_jobs_history_limit=definition.successful_jobs_history_limit,
            failed_jobs_history_limit=definition.failed_jobs_history_limit,
        ).to_payload()
    if definition.steps:  # the steps to spawn: a step's return value is no carried state
        return definition.job.payload
    if state is None or definition.job.kind == KIND:
        return definition.job.payload
    return state


def alike(definition: ScheduleDefinition) -> bool:
    """Whether the schedules of ``definition`` (carrying no state) get the same job for an
    occurrence but for its schedule name: not with jitter (hashed with the name), a container
    (its payload names the Schedule) or BufferOne's own concurrency key (the schedule's)."""
    return (
        definition.jitter_seconds <= 0
        and definition.container is None
        and not definition.steps
        and concurrency_key("", definition) == definition.job.concurrency_key
    )


def schedule_job(
    namespace: str, definition: ScheduleDefinition, occurrence: datetime | None, state: Any
) -> NewJob:
    """The job for ``occurrence`` (None: a manual trigger, due now), with the payload of
    :func:`job_payload`."""
    template = definition.job
    key = concurrency_key(namespace, definition)
    run_at = None
    if occurrence is not None:
        run_at = occurrence + jitter(
            namespace, definition.name, occurrence, definition.jitter_seconds
        )
    return NewJob(
        schedule_namespace=namespace,
        schedule_name=definition.name,
        occurrence_at=occurrence,
        run_at=run_at,
        kind=template.kind,
        queue=template.queue,
        payload=job_payload(namespace, definition, state),
        priority=template.priority,
        max_attempts=template.max_attempts,
        retry=template.retry,
        timeout=template.timeout_seconds,
        concurrency_key=key,
        concurrency_limit=template.concurrency_limit if key == template.concurrency_key else None,
    )
