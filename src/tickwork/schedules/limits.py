"""The limits of a ``Schedule``'s fields, in one place (pure; docs/limits.md explains each).

:data:`FIELDS` is read by the definition's validation (:mod:`tickwork.schedules.checks`),
and ``tests/schedules/test_crd.py`` checks that the CRD's ``minimum``, ``maximum``, ``minLength``
and ``maxLength`` of every field say the same. Each bound is what the column (or the value's
later use) can hold: ``tickwork.jobs.priority`` is ``smallint``, ``max_attempts`` ``integer``,
durations must stay far from ``datetime``'s and PostgreSQL ``interval``'s overflow, and text
must fit a btree index entry (at most about 2700 bytes, 4 bytes per character at worst).
The payload limits are checked without recursion by ``definition.check_payload``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta

MAX_SMALLINT = 2**15 - 1
"""PostgreSQL ``smallint``: the jobs column ``priority``."""
MAX_INT = 2**31 - 1
"""PostgreSQL ``integer``: ``max_attempts``, and the upper bound of the other integer fields."""

MAX_DURATION_SECONDS = 366 * 86_400
"""Longest ``every``, retry delay and timeout: 366 days (a leap year). Far enough from the
year 9999 that no sum of now and such a duration overflows, and exact as a double."""
MAX_EVERY = timedelta(seconds=MAX_DURATION_SECONDS)
MAX_CATCH_UP = 1000
"""CatchUp fires at most this many missed occurrences (firing sizes its look-ahead by it)."""
MAX_HISTORY_LIMIT = 1000
"""The most finished jobs of one outcome a schedule keeps (``successfulJobsHistoryLimit``,
``failedJobsHistoryLimit``): retention ranks that many per schedule it trims."""
MAX_SUSPEND_AFTER_FAILURES = 1000
"""``spec.suspendAfterFailures``: more consecutive dead occurrences than this is no safeguard."""
MAX_BACKOFF_RATE = 100
"""A rate above this reaches ``maxDelaySeconds`` by the second retry anyway."""

MAX_NAME_LENGTH = 253
"""A Kubernetes object name (DNS-1123 subdomain); also the schedule namespace."""
MAX_KIND_LENGTH = 255
MAX_QUEUE_LENGTH = 255
MAX_CONCURRENCY_KEY_LENGTH = 512
"""Indexed (``jobs_concurrency_key_idx``): 512 characters are at most 2048 bytes."""
MAX_CONCURRENCY_LIMIT = 10_000
"""``spec.job.concurrencyLimit``: the jobs column's CHECK (migration 0021) and
:data:`tickwork.flow.limits.MAX_CONCURRENCY_LIMIT`."""
MAX_SCHEDULE_LENGTH = 1024
MAX_EVERY_LENGTH = 64
MAX_TIME_ZONE_LENGTH = 64
"""The longest IANA name is 32 characters."""
MAX_EXCLUSIONS = 100
"""Items of ``spec.exclude`` (dates and cron expressions together): a few years of holidays."""
MAX_CRON_EXCLUSIONS = 16
"""Cron expressions among them: each one is matched against every candidate occurrence."""
MAX_EXCLUSION_LENGTH = 128
"""One item of ``spec.exclude``."""
MAX_EXCLUSION_SEARCH = 2_000
"""Candidate occurrences one search through a calendar looks at (validation: the first kept
occurrence; firing: the next one) before it gives up: it bounds the time a hostile
``spec.exclude`` costs."""
MIN_YEAR, MAX_YEAR = 1970, 8999
"""The years of ``spec.startTime``, ``spec.endTime`` and the dates of ``spec.exclude``:
searches run centuries past them without reaching ``datetime``'s year 9999."""

PAYLOAD_MAX_DEPTH = 64
"""Nesting levels of ``job.payload`` (a scalar payload is depth 0, ``{"a": 1}`` depth 1)."""
PAYLOAD_MAX_BYTES = 64 * 1024
"""``job.payload`` encoded as compact UTF-8 JSON."""
PAYLOAD_MAX_KEY_LENGTH = 256
PAYLOAD_MIN_INT = -(2**63)
PAYLOAD_MAX_INT = 2**63 - 1
"""Payload integers are signed 64-bit: what the Kubernetes API server keeps exactly (larger
ones it turns into floats). Inside this range jsonb and Python round-trip them unchanged; a
consumer in JavaScript loses precision beyond 2**53."""


@dataclass(frozen=True)
class Limit:
    """The range of one field: numbers (``minimum``/``maximum``) or text (lengths)."""

    minimum: float | None = None
    maximum: float | None = None
    exclusive_minimum: bool = False
    """``minimum`` itself is not allowed (``timeoutSeconds`` must be positive)."""
    min_length: int | None = None
    max_length: int | None = None


FIELDS: Mapping[str, Limit] = {
    "spec.schedule": Limit(min_length=1, max_length=MAX_SCHEDULE_LENGTH),
    "spec.every": Limit(min_length=2, max_length=MAX_EVERY_LENGTH),
    "spec.timeZone": Limit(min_length=1, max_length=MAX_TIME_ZONE_LENGTH),
    "spec.startingDeadlineSeconds": Limit(minimum=1, maximum=MAX_INT),
    "spec.catchUpLimit": Limit(minimum=1, maximum=MAX_CATCH_UP),
    "spec.jitterSeconds": Limit(minimum=0, maximum=MAX_INT),
    "spec.successfulJobsHistoryLimit": Limit(minimum=0, maximum=MAX_HISTORY_LIMIT),
    "spec.failedJobsHistoryLimit": Limit(minimum=0, maximum=MAX_HISTORY_LIMIT),
    "spec.deadline.succeedWithinSeconds": Limit(minimum=1, maximum=MAX_DURATION_SECONDS),
    "spec.suspendAfterFailures": Limit(minimum=1, maximum=MAX_SUSPEND_AFTER_FAILURES),
    "spec.scheduleNamespace": Limit(min_length=1, max_length=MAX_NAME_LENGTH),
    "spec.job.kind": Limit(min_length=1, max_length=MAX_KIND_LENGTH),
    "spec.job.queue": Limit(min_length=1, max_length=MAX_QUEUE_LENGTH),
    "spec.job.priority": Limit(minimum=0, maximum=MAX_SMALLINT),
    "spec.job.maxAttempts": Limit(minimum=1, maximum=MAX_INT),
    "spec.job.retryPolicy.baseDelaySeconds": Limit(minimum=0, maximum=MAX_DURATION_SECONDS),
    "spec.job.retryPolicy.backoffRate": Limit(minimum=1, maximum=MAX_BACKOFF_RATE),
    "spec.job.retryPolicy.maxDelaySeconds": Limit(minimum=0, maximum=MAX_DURATION_SECONDS),
    "spec.job.timeoutSeconds": Limit(
        minimum=0, maximum=MAX_DURATION_SECONDS, exclusive_minimum=True
    ),
    "spec.job.concurrencyKey": Limit(min_length=1, max_length=MAX_CONCURRENCY_KEY_LENGTH),
    "spec.job.concurrencyLimit": Limit(minimum=1, maximum=MAX_CONCURRENCY_LIMIT),
}
"""Every bounded field of a Schedule's spec, by its path."""
