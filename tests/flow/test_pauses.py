"""The pure rules of a pause: its audit target, the names and reasons it takes."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.support.helpers import T0
from tickwork.errors import InvalidInput
from tickwork.flow.pauses import (
    MAX_NAME,
    MAX_REASON,
    Scope,
    check_name,
    check_reason,
    paused_seconds,
    target,
)


def test_the_audit_target_names_the_scope() -> None:
    assert target(Scope.QUEUE, "emails") == "queue:emails"
    assert target(Scope.NAMESPACE, "billing") == "namespace:billing"


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("", "must not be empty"),
        ("   ", "must not be empty"),
        (" emails", "leading or trailing spaces"),
        ("x" * (MAX_NAME + 1), f"longer than {MAX_NAME}"),
        ("mail\x00", "NUL"),
    ],
)
@pytest.mark.parametrize("scope", list(Scope))
def test_a_bad_name_is_refused_naming_the_field(scope: Scope, name: str, why: str) -> None:
    with pytest.raises(InvalidInput, match=why) as caught:
        check_name(scope, name)
    assert caught.value.field == scope.value


def test_a_good_name_is_kept() -> None:
    assert check_name(Scope.QUEUE, "reports.eu-1") == "reports.eu-1"


def test_a_reason_is_trimmed_blank_is_none_and_long_is_refused() -> None:
    assert check_reason(None) is None
    assert check_reason("  ") is None
    assert check_reason(" incident 42 ") == "incident 42"
    with pytest.raises(InvalidInput, match="reason"):
        check_reason("x" * (MAX_REASON + 1))
    with pytest.raises(InvalidInput, match="NUL") as caught:
        check_reason("incident\x0042")
    assert caught.value.field == "reason"


def test_paused_seconds_never_negative() -> None:
    assert paused_seconds(T0, T0 + timedelta(hours=2)) == 7200
    assert paused_seconds(T0, T0 - timedelta(seconds=5)) == 0
