"""``after=[ids]``: enqueue jobs that wait for others. The parents are read and locked in the
enqueue's transaction (:func:`tickwork.db.workflows.lock_parents`), so none can end unseen
between that read and the insert; each must exist in the new job's own tenant (an id of
another tenant is refused exactly like an unknown one). The new jobs start ``waiting`` while
a parent has not succeeded, ``available`` when every parent already has, and ``cancelled``
(naming the parent) when one already ended dead or cancelled — what the trigger
``jobs_ended`` would have done had they been enqueued earlier."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from tickwork.db import connections, store
from tickwork.db import workflows as workflows_db
from tickwork.errors import InvalidInput
from tickwork.model import JobId, JobStatus, NewJob, TraceContext

MAX_PARENTS = 10_000
"""The most jobs one job may wait for (a join after a large fan-out)."""

_FAILED = (JobStatus.DEAD, JobStatus.CANCELLED)


def check_after(after: Iterable[Any] | None, field: str = "after") -> list[int]:
    """``after`` as a sorted list of distinct job ids; InvalidInput naming ``field``
    otherwise (not a list of positive integers, or too many)."""
    if after is None:
        return []
    if isinstance(after, str | bytes) or not isinstance(after, Iterable):
        raise InvalidInput(field, "must be a list of job ids")
    ids = list(after)
    for i, value in enumerate(ids):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InvalidInput(
                f"{field}[{i}]", f"must be a job id (a positive integer), not {value!r}"
            )
    if len(ids) > MAX_PARENTS:
        raise InvalidInput(field, f"at most {MAX_PARENTS} jobs, not {len(ids)}")
    return sorted(set(ids))


def start_of(
    ids: Sequence[int], found: dict[int, JobStatus], field: str = "after"
) -> workflows_db.Start:
    """How a job waiting for ``ids`` starts, given the statuses ``found`` of those that exist
    in its tenant; InvalidInput naming ``field`` when one is missing."""
    missing = [i for i in ids if i not in found]
    if missing:
        listed = ", ".join(str(i) for i in missing[:10])
        more = f" and {len(missing) - 10} more" if len(missing) > 10 else ""
        raise InvalidInput(field, f"no job {listed}{more} in this namespace (unknown job id)")
    failed = [i for i in ids if found[i] in _FAILED]
    if failed:
        parent = failed[0]
        reason = f"cancelled: parent job {parent} ended {found[parent].value}"
        return workflows_db.Start(JobStatus.CANCELLED, None, reason)
    left = sum(1 for i in ids if found[i] is not JobStatus.SUCCEEDED)
    return workflows_db.Start(JobStatus.WAITING if left else JobStatus.AVAILABLE, left)


def enqueue_after(
    conn: connections.Connection,
    template: NewJob,
    payloads: Sequence[Any],
    after: Sequence[int],
    now: datetime | None,
    trace_context: TraceContext | None = None,
) -> tuple[list[JobId], JobStatus]:
    """Insert jobs like ``template``, one per payload, waiting for ``after`` (checked ids), in
    ``conn``'s transaction; their ids and the status they start in."""
    found = store.run(conn, workflows_db.lock_parents(after, template.schedule_namespace))
    start = start_of(after, found)
    op = workflows_db.insert_jobs(template, payloads, after, start, now, trace_context)
    return store.run(conn, op), start.status
