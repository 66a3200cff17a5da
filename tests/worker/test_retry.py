"""The retry policy, pure: ``min(base * rate^(attempt-1), max)`` and who decides it."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import pytest

from tickwork.errors import InvalidInput
from tickwork.model import Backoff, Job, JobId, JobStatus
from tickwork.tasks import DEFAULT_BACKOFF, Task
from tickwork.worker import retry
from tickwork.worker.retry import GiveUp, RetryLater


def _job(attempt: int, max_attempts: int = 25, policy: Backoff | None = None) -> Job:
    return Job(
        id=JobId(1),
        kind="k",
        queue="default",
        payload={},
        priority=0,
        run_at=datetime(2030, 1, 1, tzinfo=UTC),
        status=JobStatus.RUNNING,
        attempt=attempt,
        max_attempts=max_attempts,
        version=1,
        retry=policy,
    )


def _task(policy: Backoff = DEFAULT_BACKOFF) -> Task:
    def function(job: Job) -> Any:
        return None

    return Task("k", function, retry=policy)


# --- Backoff.delay -------------------------------------------------------------------------


def test_defaults_are_30s_times_1_5_capped_at_an_hour() -> None:
    assert Backoff() == Backoff(base=30.0, rate=1.5, max=3600.0)
    assert Backoff() == DEFAULT_BACKOFF


@pytest.mark.parametrize(
    ("attempt", "expected"),
    [
        (1, 30.0),
        (2, 45.0),
        (3, 67.5),
        (4, 101.25),
        (5, 151.875),
        (12, 30 * 1.5**11),  # 2594.6...: still under the cap
        (13, 3600.0),  # 30 * 1.5^12 = 3892.0...: capped
        (25, 3600.0),
    ],
)
def test_default_delays(attempt: int, expected: float) -> None:
    assert Backoff().delay(attempt) == pytest.approx(expected, rel=1e-12)


def test_delay_formula_matches_for_many_policies() -> None:
    for base in (0.0, 0.5, 1.0, 7.0, 30.0):
        for rate in (1.0, 1.25, 2.0, 3.0):
            for cap in (base, base + 1, 100.0, 86400.0):
                policy = Backoff(base, rate, max(cap, base))
                for attempt in range(1, 40):
                    expected = min(base * rate ** (attempt - 1), max(cap, base))
                    assert policy.delay(attempt) == pytest.approx(expected), (policy, attempt)


def test_rate_one_is_a_constant_delay() -> None:
    assert {Backoff(5, 1, 60).delay(a) for a in range(1, 100)} == {5.0}


def test_delay_never_exceeds_max_and_never_decreases() -> None:
    policy = Backoff(2, 1.7, 500)
    delays = [policy.delay(a) for a in range(1, 200)]
    assert max(delays) == 500
    assert delays == sorted(delays)


def test_attempt_zero_or_below_is_treated_as_the_first() -> None:
    assert Backoff(10, 2, 100).delay(0) == 10
    assert Backoff(10, 2, 100).delay(-3) == 10


@pytest.mark.parametrize("attempt", [2_000, 10**6, 2**31 - 1])
def test_huge_attempts_overflow_to_the_cap(attempt: int) -> None:
    started = time.perf_counter()
    assert Backoff().delay(attempt) == 3600.0
    assert Backoff(1, 2, 100).delay(attempt) == 100.0, "an int rate gives the same answer"
    assert Backoff(0, 2.0, 60).delay(attempt) == 0.0, "zero base stays zero, overflow or not"
    # An int rate once meant 2 ** (2 ** 31) as an exact integer: a minute and 256 MB.
    assert time.perf_counter() - started < 2.0


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"base": -1}, "retry.base"),
        ({"rate": 0.99}, "retry.rate"),
        ({"base": 10, "max": 5}, "retry.max"),
    ],
)
def test_invalid_policies_name_the_field(kwargs: dict[str, float], field: str) -> None:
    with pytest.raises(InvalidInput) as error:
        Backoff(**kwargs)
    assert error.value.field == field


# --- after_failure -------------------------------------------------------------------------


def test_gives_up_when_attempts_are_exhausted() -> None:
    assert retry.after_failure(_job(attempt=3, max_attempts=3), _task()) == GiveUp()
    assert retry.after_failure(_job(attempt=1, max_attempts=1), _task()) == GiveUp()
    assert retry.after_failure(_job(attempt=4, max_attempts=3), None) == GiveUp()


def test_retries_while_attempts_are_left() -> None:
    assert retry.after_failure(_job(attempt=2, max_attempts=3), _task()) == RetryLater(45.0)


def test_the_jobs_policy_wins_over_the_tasks_which_wins_over_the_default() -> None:
    job_policy, task_policy = Backoff(1, 2, 100), Backoff(7, 1, 7)
    assert retry.after_failure(_job(3, policy=job_policy), _task(task_policy)) == RetryLater(4.0)
    assert retry.after_failure(_job(3), _task(task_policy)) == RetryLater(7.0)
    assert retry.after_failure(_job(3), None) == RetryLater(67.5)
    assert retry.after_failure(_job(3, policy=job_policy), None) == RetryLater(4.0)
