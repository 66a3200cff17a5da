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
from tickwork.schedules.options import JobTemplate

log = logging.getLogger(__package__)


def label(key: jobs_db.Key) -> str:
    return f"{key[0]}/{key[1]}"


@dataclass(frozen=True)
class Created:
    """Jobs a committed batch created for one occurrence, in one namespace, of one template."""

    namespace: str
    job: JobTemplate
    occurrence: datetime
    count: int


@dataclass(frozen=True)
class Skipped:
    """Occurrences one schedule of a committed batch threw away, by reason."""

    key: jobs_db.Key
    job: JobTemplate
    reasons: Mapping[str, int]


def fired(created: Iterable[Created], skipped: Iterable[Skipped], now: datetime) -> None:
    """The schedules of a committed batch: jobs created per namespace, queue and kind; the
    firing lag of each occurrence (to ``now``, the transaction that inserted its job); the
    newest occurrence fired per namespace; occurrences skipped per schedule and reason (rare:
    a series only for a schedule that skips), with a log line each."""
    counts: Counter[tuple[str, str, str]] = Counter()
    newest: dict[str, datetime] = {}
    for one in created:
        counts[one.namespace, one.job.queue, one.job.kind] += one.count
        histogram = metrics.SCHEDULE_FIRING_LAG.labels(one.namespace)
        lag = (now - one.occurrence).total_seconds()
        for _ in range(one.count):
            histogram.observe(lag)
        if one.namespace not in newest or one.occurrence > newest[one.namespace]:
            newest[one.namespace] = one.occurrence
    for one_skipped in skipped:
        for reason, count in one_skipped.reasons.items():
            if count:
                _skipped(one_skipped, reason, count)
    for labels, count in counts.items():
        metrics.SCHEDULE_OCCURRENCES.labels(*labels).inc(count)
    for namespace, instant in newest.items():
        metrics.SCHEDULE_LAST_FIRE.labels(namespace).set(instant.timestamp())


def _skipped(one: Skipped, reason: str, count: int) -> None:
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
