"""``spec.job.concurrencyLimit``: how many jobs of the template's ``concurrencyKey`` run at
once. Read and written with the spec, refused naming the field without a key, above 1 with
BufferOne, or out of range; carried by the jobs the schedule fires and triggers, but not by a
backfill's jobs under Forbid, BufferOne and Replace (those run one at a time)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tickwork.schedules import policies
from tickwork.schedules.checks import DefinitionError
from tickwork.schedules.definition import ScheduleDefinition
from tickwork.schedules.options import ConcurrencyPolicy, JobTemplate

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def definition(
    limit: Any = 3, key: str | None = "db", policy: ConcurrencyPolicy = ConcurrencyPolicy.ALLOW
) -> ScheduleDefinition:
    job = JobTemplate(kind="k", concurrency_key=key, concurrency_limit=limit)
    return ScheduleDefinition(
        name="s", job=job, every=timedelta(minutes=1), concurrency_policy=policy
    )


def test_the_limit_is_read_and_written_with_the_spec() -> None:
    spec = definition().to_spec()
    assert spec["job"]["concurrencyKey"] == "db" and spec["job"]["concurrencyLimit"] == 3
    assert ScheduleDefinition.from_spec("s", spec) == definition()
    assert "concurrencyLimit" not in definition(None).to_spec()["job"]


@pytest.mark.parametrize(
    ("limit", "key", "policy", "reason"),
    [
        (3, None, ConcurrencyPolicy.ALLOW, "needs spec.job.concurrencyKey"),
        (2, "db", ConcurrencyPolicy.BUFFER_ONE, "must be 1 with concurrencyPolicy BufferOne"),
        (0, "db", ConcurrencyPolicy.ALLOW, "must be >= 1"),
        (-1, "db", ConcurrencyPolicy.ALLOW, "must be >= 1"),
        (10**12, "db", ConcurrencyPolicy.ALLOW, "must be <= 10000"),
        (float("nan"), "db", ConcurrencyPolicy.ALLOW, "must be an integer"),
        ("3", "db", ConcurrencyPolicy.ALLOW, "must be an integer"),
        (True, "db", ConcurrencyPolicy.ALLOW, "must be an integer"),
    ],
)
def test_a_bad_limit_is_refused_naming_the_field(
    limit: Any, key: str | None, policy: ConcurrencyPolicy, reason: str
) -> None:
    with pytest.raises(DefinitionError) as caught:
        definition(limit, key, policy).validate("ns")
    assert caught.value.field == "spec.job.concurrencyLimit"
    assert reason in str(caught.value)


def test_a_limit_of_1_goes_with_buffer_one_and_any_limit_with_the_other_policies() -> None:
    definition(1, "db", ConcurrencyPolicy.BUFFER_ONE).validate("ns")
    for policy in (ConcurrencyPolicy.ALLOW, ConcurrencyPolicy.FORBID, ConcurrencyPolicy.REPLACE):
        definition(10_000, "db", policy).validate("ns")


def test_fired_and_triggered_jobs_carry_the_limit_a_serial_backfill_does_not() -> None:
    fired = policies.schedule_job("ns", definition(), T0, None)
    assert (fired.concurrency_key, fired.concurrency_limit) == ("db", 3)
    triggered = policies.schedule_job("ns", definition(), None, None)
    assert triggered.concurrency_limit == 3
    found = [T0, T0 + timedelta(minutes=1)]
    allowed = policies.backfill_jobs("ns", definition(), found, None)
    assert [job.concurrency_limit for job in allowed] == [3, 3]
    for policy in (ConcurrencyPolicy.FORBID, ConcurrencyPolicy.REPLACE):
        serial = policies.backfill_jobs("ns", definition(policy=policy), found, None)
        assert [(job.concurrency_key, job.concurrency_limit) for job in serial] == [
            ("db", None),
            ("db", None),
        ]
