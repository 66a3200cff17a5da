"""The pure rules of a limit: counts, rates, keys and weights, and the bad input each refuses
with the field's name."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tickwork.errors import InvalidInput
from tickwork.flow.limits import (
    MAX_PERIOD_SECONDS,
    MAX_RUNNING,
    Rate,
    Rule,
    Scope,
    check_concurrency_limit,
    check_count,
    scope_of,
)


@pytest.mark.parametrize(
    ("text", "starts", "seconds"),
    [
        ("100/min", 100, 60),
        ("10/s", 10, 1),
        ("50/10s", 50, 10),
        ("1000/hour", 1000, 3600),
        ("5/day", 5, 86400),
        (" 7 / 2 minutes ", 7, 120),
        ("3/1.5s", 3, 1.5),
    ],
)
def test_a_rate_reads_starts_per_period(text: str, starts: int, seconds: float) -> None:
    assert Rate.parse(text) == Rate(starts, seconds)


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("5/fortnight", "not STARTS/PERIOD"),
        ("100", "not STARTS/PERIOD"),
        ("-1/s", "not STARTS/PERIOD"),
        ("1.5/s", "not STARTS/PERIOD"),
        ("NaN/s", "not STARTS/PERIOD"),
        ("0/s", "from 1 to"),
        ("1000000000000/s", "from 1 to"),
        ("1/2day", "at most a day"),
        ("1/0s", "over 0"),
        (None, "must be text"),
    ],
)
def test_a_bad_rate_is_refused_naming_the_field(text: object, why: str) -> None:
    with pytest.raises(InvalidInput, match=why) as caught:
        Rate.parse(text, "rate")
    assert caught.value.field == "rate"


@given(
    st.integers(1, 1_000_000),
    st.sampled_from([1.0, 2.0, 10.0, 60.0, 90.0, 3600.0, 86400.0, 0.5]),
)
def test_a_rate_reads_back_what_it_prints(starts: int, seconds: float) -> None:
    rate = Rate(starts, seconds)
    assert Rate.parse(str(rate)) == rate


@pytest.mark.parametrize(
    "value", [0, -1, 10**12, math.nan, math.inf, -math.inf, 2.5, True, "3", None]
)
def test_a_bad_count_is_refused_naming_the_field(value: object) -> None:
    with pytest.raises(InvalidInput) as caught:
        check_count(value, "max_running", MAX_RUNNING)
    assert caught.value.field == "max_running"
    with pytest.raises(InvalidInput) as caught:
        check_concurrency_limit(value)
    assert caught.value.field == "concurrency_limit"


def test_a_whole_float_count_is_taken() -> None:
    assert check_count(3.0, "max_running", MAX_RUNNING) == 3


def test_a_rule_holds_at_least_one_limit_and_keys_only_a_rate() -> None:
    with pytest.raises(InvalidInput, match="give max_running") as caught:
        Rule(Scope.QUEUE, "emails")
    assert caught.value.field == "limit"
    with pytest.raises(InvalidInput, match="needs a rate") as caught:
        Rule(Scope.QUEUE, "emails", max_running=3, rate_key="customer")
    assert caught.value.field == "rate_key"
    with pytest.raises(InvalidInput, match="only a schedule namespace") as caught:
        Rule(Scope.QUEUE, "emails", weight=2)
    assert caught.value.field == "weight"
    with pytest.raises(InvalidInput, match="NUL") as caught:
        Rule(Scope.KIND, "mail", rate=Rate(1, 1), rate_key="cust\x00omer")
    assert caught.value.field == "rate_key"
    with pytest.raises(InvalidInput, match="empty") as caught:
        Rule(Scope.NAMESPACE, "", weight=2)
    assert caught.value.field == "namespace"


def test_a_rule_describes_itself_in_one_line() -> None:
    rule = Rule(Scope.QUEUE, "emails", 3, Rate(100, 60), "customer")
    assert rule.describe() == "max 3 running, 100/min per customer"
    assert Rule(Scope.NAMESPACE, "team-a", weight=4).describe() == "weight 4"


def test_a_scope_is_one_of_three() -> None:
    assert scope_of("kind") is Scope.KIND
    with pytest.raises(InvalidInput, match="queue, kind or namespace") as caught:
        scope_of("tenant")
    assert caught.value.field == "scope"


def test_the_longest_period_is_a_day() -> None:
    assert Rate.parse("1/day").period_seconds == MAX_PERIOD_SECONDS
