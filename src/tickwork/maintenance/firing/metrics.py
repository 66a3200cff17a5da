"""The metrics and log lines of a committed firing batch."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime

from tickwork import metrics
from tickwork.db import jobs as jobs_db
from tickwork.db import schedules as db
from tickwork.logs import fields
from tickwork.schedules.definition import JobTemplate

log = logging.getLogger(__package__)


def label(key: jobs_db.Key) -> str:
    return f"{key[0]}/{key[1]}"


def fired(
    key: jobs_db.Key,
    job: JobTemplate,
    now: datetime,
    created: int,
    occurrences: list[datetime],
    skipped: Mapping[str, int],
) -> None:
    """One schedule of a committed batch: ``created`` jobs of ``occurrences``, firing lag
    (from each occurrence to ``now``, the transaction that inserted its job), the last
    occurrence fired; occurrences skipped by reason, with a log line per reason."""
    namespace, name = key
    if created:
        metrics.SCHEDULE_OCCURRENCES.labels(namespace, name, job.queue, job.kind).inc(created)
        lag = metrics.SCHEDULE_FIRING_LAG.labels(namespace)
        for occurrence in occurrences:
            lag.observe((now - occurrence).total_seconds())
        if occurrences:
            metrics.SCHEDULE_LAST_FIRE.labels(namespace, name).set(max(occurrences).timestamp())
    for reason, count in skipped.items():
        if count:
            metrics.SCHEDULE_SKIPPED.labels(namespace, name, job.queue, job.kind, reason).inc(count)
            log.info(
                "skipped occurrences by policy",
                extra=fields(
                    action="occurrences_skipped",
                    namespace=namespace,
                    schedule=label(key),
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
