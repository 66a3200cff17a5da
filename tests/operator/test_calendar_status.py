"""The status of a Schedule with a calendar: ``nextOccurrences`` lists ``nextRunAt`` and the
occurrences after it as the calendar keeps them (what ``kubectl describe`` shows), and
``ended`` turns true once ``endTime`` has passed with no next run (pure: from stored rows)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import jsonschema

from tests.operator.rows import stored_row
from tests.schedules.test_crd import openapi_schema
from tickwork.db.schedules import ScheduleRow
from tickwork.operator import status

TUESDAY_9 = datetime(2030, 1, 1, 9, tzinfo=UTC)
CALENDAR = {
    "schedule": "0 9 * * *",
    "timeZone": "UTC",
    "exclude": ["* * * * 0,6", "2030-01-02"],
    "endTime": "2030-01-09T00:00:00Z",
    "job": {"kind": "k"},
}


DAILY: dict[str, Any] = {"schedule": "0 9 * * *", "job": {"kind": "k"}}


def schedule_row(next_run_at: datetime | None, spec: dict[str, Any] | None = None) -> ScheduleRow:
    """The stored row of ``ns/a`` (``spec``: a plain daily one by default)."""
    return stored_row(next_run_at=next_run_at, schedule="0 9 * * *", spec=spec or DAILY)


def test_next_occurrences_skip_what_the_calendar_excludes() -> None:
    row = schedule_row(TUESDAY_9, spec=CALENDAR)
    facts = status.facts(row, [], None, TUESDAY_9)
    # Wednesday the 2nd is excluded, then Thursday and Friday; the weekend is left out.
    assert facts["nextOccurrences"] == [
        "2030-01-01T09:00:00Z",
        "2030-01-03T09:00:00Z",
        "2030-01-04T09:00:00Z",
    ]
    assert facts["ended"] is None
    last = schedule_row(datetime(2030, 1, 8, 9, tzinfo=UTC), spec=CALENDAR)
    assert status.facts(last, [])["nextOccurrences"] == ["2030-01-08T09:00:00Z"]  # then it ends


def test_a_schedule_past_its_end_time_has_ended() -> None:
    row = schedule_row(None, spec=CALENDAR)
    assert status.facts(row, [], None, datetime(2030, 1, 10, tzinfo=UTC))["ended"] is True
    assert status.facts(row, [], None, datetime(2030, 1, 8, tzinfo=UTC))["ended"] is None
    plain = schedule_row(None)
    assert status.facts(plain, [], None, datetime(2030, 1, 10, tzinfo=UTC))["ended"] is None


def test_the_calendar_facts_match_the_crd_status_schema() -> None:
    schema = openapi_schema()["properties"]["status"]["properties"]
    facts = status.facts(schedule_row(TUESDAY_9, spec=CALENDAR), [], None, TUESDAY_9)
    jsonschema.validate(facts["nextOccurrences"], schema["nextOccurrences"])
    ended = status.facts(
        schedule_row(None, spec=CALENDAR), [], None, datetime(2031, 1, 1, tzinfo=UTC)
    )
    jsonschema.validate(ended["ended"], schema["ended"])
    unreadable = schedule_row(TUESDAY_9, spec={"schedule": "0 9 * * *", "bogus": 1})
    assert status.facts(unreadable, [])["nextOccurrences"] is None
