"""Schedule definitions: validation, and the spec form they are stored and compared in."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from datetime import date, timedelta
from typing import Any

import pytest

from tests.schedules import limit_helpers
from tickwork.errors import InvalidInput, TickworkError
from tickwork.model import Backoff
from tickwork.schedules import checks as checks_module
from tickwork.schedules import limits, occurrences
from tickwork.schedules.checks import DefinitionError
from tickwork.schedules.checks import shown as definition_shown
from tickwork.schedules.definition import ScheduleDefinition, validate_all
from tickwork.schedules.limits import MAX_INT
from tickwork.schedules.options import (
    ConcurrencyPolicy,
    IntervalMode,
    JobTemplate,
    MisfirePolicy,
    PendingJobsOnDelete,
)
from tickwork.schedules.stored import format_duration

NAMESPACE = "billing"


def cron(**changes: Any) -> ScheduleDefinition:
    base = ScheduleDefinition(
        name="nightly", job=JobTemplate(kind="report.nightly"), schedule="0 3 * * *"
    )
    return dataclasses.replace(base, **changes)


def interval(**changes: Any) -> ScheduleDefinition:
    base = ScheduleDefinition(
        name="poll", job=JobTemplate(kind="poll.feed"), every=timedelta(seconds=30)
    )
    return dataclasses.replace(base, **changes)


def with_job(definition: ScheduleDefinition, **changes: Any) -> ScheduleDefinition:
    return dataclasses.replace(definition, job=dataclasses.replace(definition.job, **changes))


def invalid(definition: ScheduleDefinition) -> DefinitionError:
    with pytest.raises(DefinitionError) as caught:
        definition.validate(NAMESPACE)
    return caught.value


def from_spec_error(spec: Any, name: str = "nightly") -> DefinitionError:
    with pytest.raises(DefinitionError) as caught:
        ScheduleDefinition.from_spec(name, spec)
    return caught.value


FULL_SPEC: dict[str, Any] = {
    "schedule": "0 3 * * *",
    "timeZone": "Europe/London",
    "suspend": True,
    "concurrencyPolicy": "Forbid",
    "startingDeadlineSeconds": 300,
    "misfirePolicy": "CatchUp",
    "catchUpLimit": 3,
    "jitterSeconds": 5,
    "pendingJobsOnDelete": "Keep",
    "successfulJobsHistoryLimit": 10,
    "failedJobsHistoryLimit": 0,
    "job": {
        "kind": "report.nightly",
        "queue": "reports",
        "payload": {"format": "pdf", "pages": [1, 2], "draft": False, "scale": 0.5, "n": None},
        "priority": 7,
        "maxAttempts": 5,
        "retryPolicy": {"baseDelaySeconds": 30, "backoffRate": 1.5, "maxDelaySeconds": 3600},
        "timeoutSeconds": 600,
        "concurrencyKey": "reports",
    },
}

FULL = ScheduleDefinition(
    name="nightly",
    schedule="0 3 * * *",
    time_zone="Europe/London",
    suspend=True,
    concurrency_policy=ConcurrencyPolicy.FORBID,
    starting_deadline_seconds=300,
    misfire_policy=MisfirePolicy.CATCH_UP,
    catch_up_limit=3,
    jitter_seconds=5,
    pending_jobs_on_delete=PendingJobsOnDelete.KEEP,
    successful_jobs_history_limit=10,
    failed_jobs_history_limit=0,
    job=JobTemplate(
        kind="report.nightly",
        queue="reports",
        payload={"format": "pdf", "pages": [1, 2], "draft": False, "scale": 0.5, "n": None},
        priority=7,
        max_attempts=5,
        retry=Backoff(base=30, rate=1.5, max=3600),
        timeout_seconds=600,
        concurrency_key="reports",
    ),
)


# --- valid definitions -------------------------------------------------------------------


@pytest.mark.parametrize(
    "definition",
    [
        cron(),
        interval(),
        FULL,
        interval(interval_mode=IntervalMode.FIXED_DELAY, jitter_seconds=29),
        cron(schedule="*/15 * * * * *", time_zone="America/New_York"),
        cron(schedule="@daily"),
        cron(schedule="H H * * *"),
        cron(starting_deadline_seconds=1, catch_up_limit=1, jitter_seconds=3600),
        with_job(cron(), payload=None),
        with_job(cron(), payload=[1, "two", {"three": 3.0}]),
        with_job(cron(), priority=limits.MAX_SMALLINT, max_attempts=MAX_INT, timeout_seconds=0.5),
    ],
)
def test_valid_definitions_pass(definition: ScheduleDefinition) -> None:
    definition.validate(NAMESPACE)


def test_the_error_names_definition_field_and_reason() -> None:
    error = invalid(cron(schedule="61 * * * *"))
    assert error.name == "nightly"
    assert error.field == "spec.schedule"
    assert error.reason
    assert str(error) == f"schedule 'nightly': spec.schedule: {error.reason}"
    assert isinstance(error, InvalidInput)
    assert isinstance(error, TickworkError)


# --- names -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["a", "0", "nightly-report", "a.b-c.d", "x" * 253])
def test_dns_names_are_accepted(name: str) -> None:
    cron(name=name).validate(NAMESPACE)


@pytest.mark.parametrize(
    "name",
    ["", "Nightly", "nightly_report", "-a", "a-", "a..b", ".a", "a.", "a b", "x" * 254, "é"],
)
def test_other_names_are_rejected(name: str) -> None:
    error = invalid(cron(name=name))
    assert error.field == "metadata.name"
    assert str(error).startswith(f"schedule {definition_shown(name)}: metadata.name: ")


# --- schedule or every -------------------------------------------------------------------


def test_both_schedule_and_every_is_an_error_naming_both() -> None:
    error = invalid(cron(every=timedelta(seconds=5)))
    assert error.field == "spec"
    assert "spec.schedule" in error.reason and "spec.every" in error.reason
    assert "both" in error.reason


def test_neither_schedule_nor_every_is_an_error_naming_both() -> None:
    error = invalid(cron(schedule=None))
    assert error.field == "spec"
    assert "spec.schedule" in error.reason and "spec.every" in error.reason
    assert "neither" in error.reason
    with pytest.raises(DefinitionError):
        cron(schedule=None).timetable(NAMESPACE)


@pytest.mark.parametrize(
    "expression", ["61 * * * *", "* * *", "", "not cron", "0 3 * * * * * *", "@fortnightly"]
)
def test_invalid_cron_expressions_are_rejected(expression: str) -> None:
    error = invalid(cron(schedule=expression))
    assert error.field == "spec.schedule"
    assert str(error).startswith("schedule 'nightly': spec.schedule: ")


@pytest.mark.parametrize(
    "every", [timedelta(0), timedelta(seconds=-5), timedelta(milliseconds=999)]
)
def test_every_must_be_at_least_a_second(every: timedelta) -> None:
    assert invalid(interval(every=every)).field == "spec.every"


def test_interval_mode_is_only_for_every() -> None:
    error = invalid(cron(interval_mode=IntervalMode.FIXED_DELAY))
    assert error.field == "spec.intervalMode"
    assert "spec.every" in error.reason


@pytest.mark.parametrize("zone", ["Mars/Olympus_Mons", "", "europe/london/x"])
def test_unknown_time_zones_are_rejected(zone: str) -> None:
    assert invalid(cron(time_zone=zone)).field == "spec.timeZone"


# --- ranges ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"starting_deadline_seconds": 0}, "spec.startingDeadlineSeconds"),
        ({"starting_deadline_seconds": -1}, "spec.startingDeadlineSeconds"),
        ({"catch_up_limit": 0}, "spec.catchUpLimit"),
        ({"catch_up_limit": 1001}, "spec.catchUpLimit"),
        ({"jitter_seconds": -1}, "spec.jitterSeconds"),
    ],
)
def test_schedule_ranges(changes: dict[str, Any], field: str) -> None:
    error = invalid(cron(**changes))
    assert error.field == field
    assert str(error).startswith(f"schedule 'nightly': {field}: must be ")


def test_jitter_must_be_shorter_than_the_interval() -> None:
    error = invalid(interval(jitter_seconds=30))
    assert error.field == "spec.jitterSeconds"
    assert "30s" in error.reason
    interval(jitter_seconds=29).validate(NAMESPACE)


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"kind": ""}, "spec.job.kind"),
        ({"kind": "  "}, "spec.job.kind"),
        ({"queue": ""}, "spec.job.queue"),
        ({"priority": -1}, "spec.job.priority"),
        ({"priority": limits.MAX_SMALLINT + 1}, "spec.job.priority"),
        ({"max_attempts": MAX_INT + 1}, "spec.job.maxAttempts"),
        ({"kind": "a\x00b"}, "spec.job.kind"),
        ({"queue": "q" * 256}, "spec.job.queue"),
        ({"concurrency_key": "\ud800"}, "spec.job.concurrencyKey"),
        ({"timeout_seconds": limits.MAX_DURATION_SECONDS + 1}, "spec.job.timeoutSeconds"),
        ({"retry": Backoff(rate=101)}, "spec.job.retryPolicy.backoffRate"),
        ({"max_attempts": 0}, "spec.job.maxAttempts"),
        ({"timeout_seconds": 0}, "spec.job.timeoutSeconds"),
        ({"timeout_seconds": -3.5}, "spec.job.timeoutSeconds"),
        ({"timeout_seconds": math.inf}, "spec.job.timeoutSeconds"),
        ({"timeout_seconds": math.nan}, "spec.job.timeoutSeconds"),
        ({"concurrency_key": ""}, "spec.job.concurrencyKey"),
        ({"retry": Backoff(max=math.inf)}, "spec.job.retryPolicy.maxDelaySeconds"),
    ],
)
def test_job_ranges(changes: dict[str, Any], field: str) -> None:
    error = invalid(with_job(cron(), **changes))
    assert error.field == field
    assert str(error).startswith(f"schedule 'nightly': {field}: ")


@pytest.mark.parametrize(
    ("payload", "field", "reason"),
    [
        ({"day": date(2026, 12, 1)}, "spec.job.payload.day", "not a JSON value (date)"),
        ({"a": [1, {2, 3}]}, "spec.job.payload.a[1]", "not a JSON value (set)"),
        ((1, 2), "spec.job.payload", "not a JSON value (tuple)"),
        ({1: "one"}, "spec.job.payload", "key 1 is not a string"),
        ({"x": math.nan}, "spec.job.payload.x", "not a JSON number"),
        (b"raw", "spec.job.payload", "not a JSON value (bytes)"),
        ({"a": {"b": [0, 1, 2, "x\x00"]}}, "spec.job.payload.a.b[3]", "NUL"),
        ({"a b": {"c\x00": 1}}, "spec.job.payload['a b']", "key 'c\\x00': must not contain NUL"),
        ({"k" * 257: 1}, "spec.job.payload", "must be at most 256 characters"),
        ([2**63], "spec.job.payload[0]", "outside the signed 64-bit integer range"),
        ([-(2**63) - 1], "spec.job.payload[0]", "outside the signed 64-bit integer range"),
        ([10**5000], "spec.job.payload[0]", "an integer of about 5000 digits is outside"),
        ({"s": "\udc00"}, "spec.job.payload.s", "unpaired surrogate"),
        ({"x": -math.inf}, "spec.job.payload.x", "not a JSON number"),
        ([1e19], "spec.job.payload[0]", "1e+19 is outside the signed 64-bit integer range"),
        ([-1.7976931348623157e308], "spec.job.payload[0]", "outside the signed 64-bit"),
    ],
)
def test_payload_must_be_plain_json(payload: Any, field: str, reason: str) -> None:
    error = invalid(with_job(cron(), payload=payload))
    assert error.field == field
    assert reason in error.reason


# --- limits --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "value", "accepted"),
    [(path, value, ok) for path in limits.FIELDS for value, ok in limit_helpers.edges(path)],
    ids=lambda v: v if isinstance(v, str) and v.startswith("spec.") else None,
)
def test_each_field_at_and_beyond_its_limit(path: str, value: Any, accepted: bool) -> None:
    spec = limit_helpers.spec_with(path, value)
    try:
        definition = ScheduleDefinition.from_spec("a", spec)
        definition.validate(spec.get("scheduleNamespace", NAMESPACE))
    except DefinitionError as error:
        assert not accepted, str(error)
        assert error.field == path
        assert error.reason.startswith("must") or "duration" in error.reason, error.reason
        return
    assert accepted, f"{path}={value!r} was accepted"


def test_a_time_zone_of_the_longest_length_is_refused_only_as_unknown() -> None:
    spec = limit_helpers.spec_with("spec.timeZone", "x" * limits.MAX_TIME_ZONE_LENGTH)
    error = invalid(ScheduleDefinition.from_spec("a", spec))
    assert error.field == "spec.timeZone" and "unknown time zone" in error.reason


def test_the_largest_payload_passes_and_one_byte_more_does_not() -> None:
    payload = limit_helpers.largest_payload()
    with_job(cron(), payload=payload).validate(NAMESPACE)
    payload["pad"] += "p"
    error = invalid(with_job(cron(), payload=payload))
    assert error.field == "spec.job.payload"
    assert error.reason == f"is larger than {limits.PAYLOAD_MAX_BYTES} bytes encoded as JSON"


@pytest.mark.parametrize("text", ["\u00e9", "\\", '"', "\n", "\x01", limit_helpers.WIDE])
def test_payload_size_counts_escapes_as_json_does(text: str) -> None:
    """Characters JSON escapes (or encodes in several bytes) count as encoded."""
    payload = {"pad": ""}
    overhead = limit_helpers.encoded_size(payload)
    unit = limit_helpers.encoded_size(text) - 2
    count = (limits.PAYLOAD_MAX_BYTES - overhead) // unit
    payload["pad"] = text * count
    fits = limit_helpers.encoded_size(payload) <= limits.PAYLOAD_MAX_BYTES
    assert fits
    with_job(cron(), payload=payload).validate(NAMESPACE)
    payload["pad"] = text * (count + 1)
    assert invalid(with_job(cron(), payload=payload)).field == "spec.job.payload"


def test_payload_depth_limit() -> None:
    with_job(cron(), payload=limit_helpers.nested(limits.PAYLOAD_MAX_DEPTH)).validate(NAMESPACE)
    error = invalid(with_job(cron(), payload=limit_helpers.nested(limits.PAYLOAD_MAX_DEPTH + 1)))
    assert error.field == "spec.job.payload" + ".a" * limits.PAYLOAD_MAX_DEPTH
    assert error.reason == f"nests deeper than {limits.PAYLOAD_MAX_DEPTH} levels"


@pytest.mark.parametrize("levels", [600, 5000, 100_000])
def test_very_deep_payloads_are_refused_without_recursion(levels: int) -> None:
    spec = {"every": "1m", "job": {"kind": "k", "payload": limit_helpers.nested(levels)}}
    error = from_spec_error(spec)
    assert error.reason == f"nests deeper than {limits.PAYLOAD_MAX_DEPTH} levels"


def test_a_payload_that_contains_itself_is_refused() -> None:
    cycle: list[Any] = []
    cycle.append(cycle)
    error = invalid(with_job(cron(), payload=cycle))
    assert error.field == "spec.job.payload" + "[0]" * limits.PAYLOAD_MAX_DEPTH


def test_a_wide_shared_payload_stops_at_the_size_limit() -> None:
    """Shared references (what a YAML alias bomb builds) are counted as encoded, and the walk
    stops at the limit instead of visiting 10**12 values."""
    layer: Any = "x"
    for _ in range(12):
        layer = [layer] * 10
    error = invalid(with_job(cron(), payload=layer))
    assert error.field == "spec.job.payload" and "larger than" in error.reason


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (10**5000, "an integer of about 5000 digits"),
        (2**63, "9223372036854775808"),
        ("x" * 1000, repr("x" * 60) + "..."),
        ("a\x00b", "'a\\x00b'"),
    ],
    ids=["huge-int", "int64-plus-one", "long-text", "nul"],
)
def test_values_in_messages_are_short(value: Any, shown: str) -> None:
    assert definition_shown(value) == shown


def test_validate_all_rejects_duplicate_names() -> None:
    validate_all(NAMESPACE, [cron(), interval()])
    validate_all(NAMESPACE, [])
    with pytest.raises(DefinitionError) as caught:
        validate_all(NAMESPACE, [cron(), interval(), cron(schedule="@hourly")])
    assert caught.value.field == "metadata.name"
    assert str(caught.value) == "schedule 'nightly': metadata.name: is defined more than once"


def test_validate_all_validates_each_definition() -> None:
    with pytest.raises(DefinitionError) as caught:
        validate_all(NAMESPACE, [cron(), interval(name="Bad")])
    assert caught.value.name == "Bad"


# --- timetable ---------------------------------------------------------------------------


def test_timetable_of_a_cron_schedule() -> None:
    assert isinstance(cron().grid(NAMESPACE), occurrences.CronTimetable)


def test_hashed_fields_are_seeded_by_namespace_and_name() -> None:
    hashed = cron(schedule="H H * * *")
    expected = occurrences.CronTimetable.parse("H H * * *", seed="billing/nightly")
    assert hashed.grid("billing") == expected
    others = {hashed.grid(f"team-{n}") for n in range(20)}
    assert len(others) > 1


def test_timetable_of_an_interval() -> None:
    assert isinstance(interval().grid(NAMESPACE), occurrences.FixedRate)


# --- spec form ---------------------------------------------------------------------------


def test_to_spec_of_a_full_definition() -> None:
    assert FULL.to_spec() == FULL_SPEC


def test_to_spec_writes_defaults_and_omits_unset_fields() -> None:
    assert interval().to_spec() == {
        "every": "30s",
        "intervalMode": "FixedRate",
        "timeZone": "UTC",
        "suspend": False,
        "concurrencyPolicy": "Allow",
        "misfirePolicy": "Latest",
        "catchUpLimit": 10,
        "jitterSeconds": 0,
        "pendingJobsOnDelete": "Cancel",
        "successfulJobsHistoryLimit": 3,
        "failedJobsHistoryLimit": 1,
        "job": {
            "kind": "poll.feed",
            "queue": "default",
            "payload": {},
            "priority": 0,
        },
    }


def test_to_spec_uses_plain_json_types() -> None:
    spec = FULL.to_spec()
    assert type(spec["concurrencyPolicy"]) is str
    assert type(spec["job"]["retryPolicy"]["baseDelaySeconds"]) is int
    assert spec["job"]["retryPolicy"]["backoffRate"] == 1.5
    assert with_job(cron(), timeout_seconds=2.5).to_spec()["job"]["timeoutSeconds"] == 2.5


def test_to_spec_copies_the_payload() -> None:
    spec = FULL.to_spec()
    spec["job"]["payload"]["pages"].append(3)
    assert FULL.job.payload["pages"] == [1, 2]


ROUND_TRIP = [
    cron(),
    interval(),
    FULL,
    interval(interval_mode=IntervalMode.FIXED_DELAY),
    interval(every=timedelta(hours=2, minutes=5, seconds=1, milliseconds=250)),
    with_job(cron(), payload=None, retry=Backoff(base=0.5, rate=1, max=0.5)),
    with_job(cron(), payload="text"),
]


@pytest.mark.parametrize("definition", ROUND_TRIP)
def test_spec_round_trip(definition: ScheduleDefinition) -> None:
    again = ScheduleDefinition.from_spec(definition.name, definition.to_spec())
    assert again == definition
    assert again.to_spec() == definition.to_spec()


def test_equal_definitions_give_equal_specs() -> None:
    twin = ScheduleDefinition.from_spec("nightly", dict(FULL_SPEC))
    assert twin == FULL
    assert twin.to_spec() == FULL.to_spec()
    # An explicit default and a missing field are the same definition.
    explicit = ScheduleDefinition.from_spec(
        "nightly", {"schedule": "0 3 * * *", "suspend": False, "job": {"kind": "report.nightly"}}
    )
    assert explicit.to_spec() == cron().to_spec()


CHANGES: list[Callable[[ScheduleDefinition], ScheduleDefinition]] = [
    lambda d: dataclasses.replace(d, schedule="0 4 * * *"),
    lambda d: dataclasses.replace(d, schedule=None, every=timedelta(minutes=1)),
    lambda d: dataclasses.replace(d, time_zone="UTC"),
    lambda d: dataclasses.replace(d, suspend=False),
    lambda d: dataclasses.replace(d, concurrency_policy=ConcurrencyPolicy.REPLACE),
    lambda d: dataclasses.replace(d, starting_deadline_seconds=None),
    lambda d: dataclasses.replace(d, starting_deadline_seconds=301),
    lambda d: dataclasses.replace(d, misfire_policy=MisfirePolicy.SKIP),
    lambda d: dataclasses.replace(d, catch_up_limit=4),
    lambda d: dataclasses.replace(d, jitter_seconds=0),
    lambda d: dataclasses.replace(d, pending_jobs_on_delete=PendingJobsOnDelete.CANCEL),
    lambda d: dataclasses.replace(d, successful_jobs_history_limit=11),
    lambda d: dataclasses.replace(d, failed_jobs_history_limit=1),
    lambda d: with_job(d, kind="report.weekly"),
    lambda d: with_job(d, queue="default"),
    lambda d: with_job(d, payload={"format": "pdf"}),
    lambda d: with_job(d, priority=8),
    lambda d: with_job(d, max_attempts=6),
    lambda d: with_job(d, retry=None),
    lambda d: with_job(d, retry=Backoff(base=30, rate=2, max=3600)),
    lambda d: with_job(d, timeout_seconds=None),
    lambda d: with_job(d, timeout_seconds=601),
    lambda d: with_job(d, concurrency_key=None),
]


@pytest.mark.parametrize("change", CHANGES)
def test_a_changed_field_changes_the_spec(
    change: Callable[[ScheduleDefinition], ScheduleDefinition],
) -> None:
    assert change(FULL).to_spec() != FULL.to_spec()


def test_interval_changes_change_the_spec() -> None:
    base = interval()
    assert interval(every=timedelta(seconds=31)).to_spec() != base.to_spec()
    assert interval(interval_mode=IntervalMode.FIXED_DELAY).to_spec() != base.to_spec()


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (timedelta(seconds=30), "30s"),
        (timedelta(minutes=5), "5m"),
        (timedelta(hours=1, minutes=30), "1h30m"),
        (timedelta(hours=1, seconds=1), "1h1s"),
        (timedelta(days=2), "2d"),
        (timedelta(days=1, hours=12, microseconds=1), "1d12h0.000001s"),
        (timedelta(seconds=1, milliseconds=500), "1.5s"),
        (timedelta(hours=1, seconds=59, milliseconds=250), "1h59.25s"),
    ],
)
def test_format_duration_round_trips_through_parse_duration(value: timedelta, text: str) -> None:
    assert format_duration(value) == text
    assert occurrences.parse_duration(text) == value


def test_format_duration_of_short_values() -> None:
    assert format_duration(timedelta(0)) == "0s"
    assert format_duration(timedelta(milliseconds=250)) == "0.25s"


# --- from_spec ---------------------------------------------------------------------------


def test_from_spec_reads_a_full_spec() -> None:
    assert ScheduleDefinition.from_spec("nightly", FULL_SPEC) == FULL


def test_from_spec_reads_every_and_interval_mode() -> None:
    definition = ScheduleDefinition.from_spec(
        "poll", {"every": "1m30s", "intervalMode": "FixedDelay", "job": {"kind": "poll.feed"}}
    )
    assert definition.every == timedelta(seconds=90)
    assert definition.interval_mode is IntervalMode.FIXED_DELAY
    assert definition.schedule is None


def test_null_means_not_set_except_for_the_payload() -> None:
    spec = {
        "schedule": "0 3 * * *",
        "timeZone": None,
        "suspend": None,
        "startingDeadlineSeconds": None,
        "concurrencyPolicy": None,
        "job": {"kind": "report.nightly", "retryPolicy": None, "queue": None, "payload": None},
    }
    definition = ScheduleDefinition.from_spec("nightly", spec)
    assert definition == with_job(cron(), payload=None)


def test_a_partial_retry_policy_takes_the_other_values_from_the_defaults() -> None:
    spec = {"schedule": "@daily", "job": {"kind": "k", "retryPolicy": {"backoffRate": 2}}}
    definition = ScheduleDefinition.from_spec("nightly", spec)
    assert definition.job.retry == Backoff(base=30, rate=2, max=3600)


def test_schedule_namespace_is_accepted_and_not_part_of_the_definition() -> None:
    spec = {**FULL_SPEC, "scheduleNamespace": "billing-production"}
    definition = ScheduleDefinition.from_spec("nightly", spec)
    assert definition == FULL
    assert "scheduleNamespace" not in definition.to_spec()


@pytest.mark.parametrize(
    ("spec", "field", "hint"),
    [
        ({**FULL_SPEC, "schedual": "x"}, "spec.schedual", " (did you mean `schedule`?)"),
        (
            {**FULL_SPEC, "concurrencyPolcy": "Forbid"},
            "spec.concurrencyPolcy",
            " (did you mean `concurrencyPolicy`?)",
        ),
        (
            {**FULL_SPEC, "job": {**FULL_SPEC["job"], "attempts": 3}},
            "spec.job.attempts",
            " (did you mean `maxAttempts`?)",
        ),
        (
            {**FULL_SPEC, "job": {"kind": "k", "retryPolicy": {"base": 1}}},
            "spec.job.retryPolicy.base",
            "",  # nothing close enough
        ),
    ],
)
def test_unknown_fields_are_rejected_with_their_path_and_the_closest_known_one(
    spec: dict[str, Any], field: str, hint: str
) -> None:
    error = from_spec_error(spec)
    assert error.field == field
    assert str(error) == f"schedule 'nightly': {field}: unknown field{hint}"


@pytest.mark.parametrize(
    ("schedule", "every"),
    [("every 30s", "30s"), ("@every 1h", "1h"), ("5 minutes", "5m")],
)
def test_an_interval_given_as_the_cron_schedule_points_to_every(schedule: str, every: str) -> None:
    error = invalid(ScheduleDefinition.from_spec("nightly", {**FULL_SPEC, "schedule": schedule}))
    assert error.field == "spec.schedule"
    assert error.reason == f"{schedule!r} is an interval: use `every: {every}` instead"


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("schedule", 5, "must be a string"),
        ("every", 30, "must be a string"),
        ("timeZone", ["UTC"], "must be a string"),
        ("suspend", "false", "must be a boolean"),
        ("suspend", 0, "must be a boolean"),
        ("startingDeadlineSeconds", "300", "must be an integer"),
        ("startingDeadlineSeconds", 1.5, "must be an integer"),
        ("catchUpLimit", True, "must be an integer"),
        ("jitterSeconds", {}, "must be an integer"),
        ("concurrencyPolicy", "forbid", "must be one of Allow, Forbid, BufferOne, Replace"),
        ("misfirePolicy", 1, "must be a string"),
        ("misfirePolicy", "Never", "must be one of Skip, Latest, CatchUp"),
        ("pendingJobsOnDelete", "cancel", "must be one of Cancel, Keep"),
        ("pendingJobsOnDelete", False, "must be a string"),
        ("successfulJobsHistoryLimit", "3", "must be an integer"),
        ("successfulJobsHistoryLimit", -1, "must be >= 0, not -1"),
        ("successfulJobsHistoryLimit", 1001, "must be <= 1000, not 1001"),
        ("failedJobsHistoryLimit", 1.5, "must be an integer"),
        ("failedJobsHistoryLimit", 1001, "must be <= 1000, not 1001"),
        ("scheduleNamespace", 3, "must be a string"),
        ("scheduleNamespace", "", "must not be empty"),
        ("job", "report", "must be a mapping"),
        ("job.kind", 1, "must be a string"),
        ("job.queue", False, "must be a string"),
        ("job.priority", "high", "must be an integer"),
        ("job.maxAttempts", 2.0, "must be an integer"),
        ("job.retryPolicy", [], "must be a mapping"),
        ("job.retryPolicy.backoffRate", "2", "must be a number"),
        ("job.retryPolicy.baseDelaySeconds", -1, "must be >= 0"),
        ("job.retryPolicy.backoffRate", 0.5, "must be >= 1"),
        ("job.retryPolicy.maxDelaySeconds", 10, "must be >= baseDelaySeconds (30)"),
        ("job.retryPolicy.maxDelaySeconds", math.inf, "must be a finite number"),
        ("job.timeoutSeconds", "10m", "must be a number"),
        ("job.timeoutSeconds", True, "must be a number"),
        ("job.concurrencyKey", 7, "must be a string"),
    ],
)
def test_wrong_types_are_rejected_with_their_path(field: str, value: Any, reason: str) -> None:
    spec: dict[str, Any] = {
        "schedule": "0 3 * * *",
        "job": {"kind": "report.nightly", "retryPolicy": {}},
    }
    *parents, last = field.split(".")
    target = spec
    for part in parents:
        target = target[part]
    target[last] = value
    error = from_spec_error(spec)
    assert error.field == f"spec.{field}"
    assert error.reason.startswith(reason)


def test_every_must_parse_as_a_duration() -> None:
    error = from_spec_error({"every": "soon", "job": {"kind": "k"}})
    assert error.field == "spec.every"
    assert error.reason


def test_interval_mode_without_every_is_rejected_even_when_it_is_the_default() -> None:
    error = from_spec_error(
        {"schedule": "@daily", "intervalMode": "FixedRate", "job": {"kind": "k"}}
    )
    assert error.field == "spec.intervalMode"


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"schedule": "@daily"}, "spec.job"),
        ({"schedule": "@daily", "job": None}, "spec.job"),
        ({"schedule": "@daily", "job": {"queue": "q"}}, "spec.job.kind"),
    ],
)
def test_required_fields(spec: dict[str, Any], field: str) -> None:
    """Required, unless ``spec.jobTemplate`` replaces the kind (test_job_templates.py)."""
    error = from_spec_error(spec)
    assert error.field == field
    assert error.reason.startswith("is required (") and "spec.jobTemplate" in error.reason


@pytest.mark.parametrize("spec", [None, [], "schedule: x"])
def test_the_spec_must_be_a_mapping(spec: Any) -> None:
    assert from_spec_error(spec).field == "spec"


def test_a_reason_quoting_a_long_value_is_cut_short() -> None:
    error = invalid(cron(schedule="a" * limits.MAX_SCHEDULE_LENGTH))
    assert error.field == "spec.schedule"
    assert len(error.reason) == checks_module.MAX_REASON_LENGTH
    assert error.reason.endswith("...")
