"""The metrics and log lines of a committed firing batch."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from tickwork import metrics
from tickwork.db import jobs as jobs_db
from tickwork.db import schedules as db
from tickwork.logs import fields
from tickwork.schedules.definition import JobTemplate

log = logging.getLogger(__package__)


def label(key: jobs_db.Key) -> str:
    return f"{key[0]}/{key[1]}"


@dataclass(frozen=True)
class Fired:
    """What one schedule of a committed batch did."""

    key: jobs_db.Key
    job: JobTemplate
    occurrences: list[datetime]
    """Of the jobs created."""
    skipped: Mapping[str, int]
    """Occurrences thrown away, by reason."""


def fired(schedules: Iterable[Fired], now: datetime) -> None:
    """The schedules of a committed batch: jobs created per namespace, queue and kind; the
    firing lag of each occurrence (to ``now``, the transaction that inserted its job); the
    newest occurrence fired per namespace; occurrences skipped per schedule and reason (rare:
    a series only for a schedule that skips), with a log line each."""
    created: Counter[tuple[str, str, str]] = Counter()
    newest: dict[str, datetime] = {}
    lags: dict[str, list[float]] = {}
    for one in schedules:
        namespace = one.key[0]
        if one.occurrences:
            created[namespace, one.job.queue, one.job.kind] += len(one.occurrences)
            lags.setdefault(namespace, []).extend(
                (now - occurrence).total_seconds() for occurrence in one.occurrences
            )
            latest = max(one.occurrences)
            if namespace not in newest or latest > newest[namespace]:
                newest[namespace] = latest
        for reason, count in one.skipped.items():
            if count:
                _skipped(one, reason, count)
    for labels, count in created.items():
        metrics.SCHEDULE_OCCURRENCES.labels(*labels).inc(count)
    for namespace, seconds in lags.items():
        histogram = metrics.SCHEDULE_FIRING_LAG.labels(namespace)
        for lag in seconds:
            histogram.observe(lag)
    for namespace, instant in newest.items():
        metrics.SCHEDULE_LAST_FIRE.labels(namespace).set(instant.timestamp())


def _skipped(one: Fired, reason: str, count: int) -> None:
    namespace, name = one.key
    job = one.job
    metrics.SCHEDULE_SKIPPED.labels(namespace, name, job.queue, job.kind, reason).inc(count)
    log.info(
        "skipped occurrences by policy",
        extra=fields(
            action="occurrences_skipped",
            namespace=namespace,
            schedule=label(one.key),
            kind=job.kind,
            count=count,
            reason=reason,
        ),
    )


def failures(errors: Mapping[jobs_db.Key, str], retries: Mapping[jobs_db.Key, db.Retry]) -> None:
    """The metric and the log line of each schedule set aside by a committed batch."""
    for key, error in errors.items():
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
                schedule=label(key),
                count=retry.failures,
                error=error,
            ),
        )
