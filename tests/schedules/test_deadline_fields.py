"""``spec.deadline`` and ``spec.suspendAfterFailures`` read and checked (pure): every valid
value round-trips through the stored spec; every hostile value is refused with an error naming
the field and the reason (hypothesis over the value space)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tickwork.schedules import limits
from tickwork.schedules.checks import DefinitionError
from tickwork.schedules.deadlines import Deadline
from tickwork.schedules.definition import ScheduleDefinition, check_manifest_rules

BASE: dict[str, Any] = {"schedule": "0 5 * * *", "timeZone": "Europe/Berlin", "job": {"kind": "k"}}
HH_MM = re.compile(r"(?:[01][0-9]|2[0-3]):[0-5][0-9]", re.ASCII)


def read(**fields: Any) -> ScheduleDefinition:
    definition = ScheduleDefinition.from_spec("guarded", {**BASE, **fields})
    definition.validate("ns")
    check_manifest_rules("guarded", {**BASE, **fields})
    return definition


def refused(field: str, **fields: Any) -> str:
    with pytest.raises(DefinitionError) as caught:
        read(**fields)
    assert caught.value.field == field, str(caught.value)
    return caught.value.reason


@given(
    st.one_of(
        st.builds(lambda h, m: {"by": f"{h:02d}:{m:02d}"}, st.integers(0, 23), st.integers(0, 59)),
        st.builds(
            lambda s: {"succeedWithinSeconds": s},
            st.integers(1, limits.MAX_DURATION_SECONDS),
        ),
    ),
    st.one_of(st.none(), st.integers(1, limits.MAX_SUSPEND_AFTER_FAILURES)),
)
def test_every_valid_value_round_trips(deadline: dict[str, Any], failures: int | None) -> None:
    fields: dict[str, Any] = {"deadline": deadline}
    if failures is not None:
        fields["suspendAfterFailures"] = failures
    definition = read(**fields)
    spec = definition.to_spec()
    assert spec["deadline"] == deadline
    assert spec.get("suspendAfterFailures") == failures
    assert ScheduleDefinition.from_spec("guarded", spec) == definition


def test_absent_fields_are_none_and_stay_out_of_the_stored_spec() -> None:
    definition = read()
    assert (definition.deadline, definition.suspend_after_failures) == (None, None)
    assert "deadline" not in definition.to_spec()
    assert "suspendAfterFailures" not in definition.to_spec()
    assert read(deadline=None, suspendAfterFailures=None) == definition  # null: not set


@given(st.text(max_size=12))
def test_a_by_that_is_not_hh_mm_is_refused_naming_the_field(text: str) -> None:
    if HH_MM.fullmatch(text):
        assert read(deadline={"by": text}).deadline == Deadline(by=text)
        return
    reason = refused("spec.deadline.by", deadline={"by": text})
    assert reason.startswith("must")


@pytest.mark.parametrize(
    "text",
    [
        "24:00",
        "23:60",
        "6:00",
        "06:00:00",
        "06.00",
        " 06:00",
        "06:00\n",
        "\u0660\u0666:\u0660\u0660",
        "0\uff16:00",
        "",
    ],
)
def test_near_misses_of_hh_mm(text: str) -> None:
    assert refused("spec.deadline.by", deadline={"by": text}).startswith("must")


@given(
    st.one_of(st.integers(), st.floats(), st.booleans(), st.text(max_size=5), st.lists(st.none()))
)
def test_succeed_within_seconds_out_of_range_or_not_an_integer(value: Any) -> None:
    valid = (
        isinstance(value, int)
        and not isinstance(value, bool)
        and 1 <= value <= limits.MAX_DURATION_SECONDS
    )
    if valid:
        assert read(deadline={"succeedWithinSeconds": value}).deadline == Deadline(value)
        return
    reason = refused("spec.deadline.succeedWithinSeconds", deadline={"succeedWithinSeconds": value})
    assert reason.startswith("must")


@given(st.one_of(st.integers(), st.floats(), st.booleans(), st.text(max_size=5)))
def test_suspend_after_failures_out_of_range_or_not_an_integer(value: Any) -> None:
    valid = (
        isinstance(value, int)
        and not isinstance(value, bool)
        and 1 <= value <= limits.MAX_SUSPEND_AFTER_FAILURES
    )
    if valid:
        assert read(suspendAfterFailures=value).suspend_after_failures == value
        return
    assert refused("spec.suspendAfterFailures", suspendAfterFailures=value).startswith("must")


@pytest.mark.parametrize(
    ("deadline", "field", "says"),
    [
        ({}, "spec.deadline", "set exactly one of succeedWithinSeconds or by (neither is set)"),
        (
            {"by": "06:00", "succeedWithinSeconds": 60},
            "spec.deadline",
            "set exactly one of succeedWithinSeconds or by (both are set)",
        ),
        ({"within": 60}, "spec.deadline.within", "unknown field"),
        ({"By": "06:00"}, "spec.deadline.By", "unknown field"),
        (
            {"succeedWithinSecond": 60},
            "spec.deadline.succeedWithinSecond",
            "unknown field (did you mean `succeedWithinSeconds`?)",
        ),
        ("06:00", "spec.deadline", "must be a mapping, not a string"),
        ([60], "spec.deadline", "must be a mapping, not a list"),
        ({"by": None, "succeedWithinSeconds": None}, "spec.deadline", "neither is set"),
        ({"succeedWithinSeconds": 10**400}, "spec.deadline.succeedWithinSeconds", "must be <="),
        ({"by": "06:00\x00"}, "spec.deadline.by", "must"),
    ],
)
def test_deadline_shapes_refused(deadline: Any, field: str, says: str) -> None:
    assert says in refused(field, deadline=deadline)


def test_a_definition_built_in_python_is_checked_too() -> None:
    base = ScheduleDefinition.from_spec("guarded", BASE)
    for definition, field in [
        (base.__class__(**{**base.__dict__, "deadline": Deadline()}), "spec.deadline"),
        (
            base.__class__(**{**base.__dict__, "deadline": Deadline(by=6)}),  # type: ignore[arg-type]
            "spec.deadline.by",
        ),
        (
            base.__class__(**{**base.__dict__, "suspend_after_failures": 2.0}),
            "spec.suspendAfterFailures",
        ),
    ]:
        with pytest.raises(DefinitionError) as caught:
            definition.validate("ns")
        assert caught.value.field == field
