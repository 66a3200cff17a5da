"""A schedule's row as PostgreSQL holds it after a sync: what the operator's status is
computed from, for tests that need no database."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from tickwork.db.schedules import ScheduleRow

SPEC: dict[str, Any] = {"schedule": "0 * * * *", "job": {"kind": "k"}}


def stored_row(**changes: Any) -> ScheduleRow:
    """The row of ``ns/a`` after a sync of :data:`SPEC`, with ``changes``."""
    at = datetime(2026, 1, 1, tzinfo=UTC)
    row = ScheduleRow(
        namespace="ns",
        name="a",
        revision=1,
        enabled=True,
        suspend=False,
        schedule="0 * * * *",
        every=None,
        time_zone="UTC",
        next_run_at=at,
        last_occurrence_at=None,
        last_job_id=None,
        last_job_status=None,
        last_success_at=None,
        skipped_occurrences=0,
        owner="operator:test",
        spec=SPEC,
        state=None,
        created_at=at,
        updated_at=at,
        firing_error=None,
        firing_failures=0,
        firing_retry_at=None,
    )
    return replace(row, **changes)
