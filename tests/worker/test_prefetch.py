"""How many jobs a worker holds ahead of its free slots (tickwork.worker.prefetch), pure: fast
jobs get a deep prefetch, slow ones none, nothing measured none; the bounds and the direction
of every input checked on generated values; the worker's use of it, and the held jobs'
count of room (a finished job waiting for its write takes none)."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

import tickwork
from tests.support.helpers import settings
from tickwork.model import Job, JobId, JobStatus
from tickwork.worker.held import HeldJobs
from tickwork.worker.prefetch import Estimates, jobs_ahead
from tickwork.worker.runner import Worker


def _job(n: int) -> Job:
    return Job(
        id=JobId(n),
        kind="k",
        queue="default",
        payload={},
        priority=0,
        run_at=datetime(2026, 1, 1, tzinfo=UTC),
        status=JobStatus.RUNNING,
        attempt=1,
        max_attempts=3,
        version=1,
    )


seconds = st.floats(min_value=0.0, max_value=3600.0, allow_nan=False)
concurrency = st.integers(min_value=1, max_value=10_000)
most = st.integers(min_value=0, max_value=100_000)


def test_a_fast_workload_gets_a_deep_prefetch() -> None:
    # Default concurrency 10, a claim of 5 ms, no-op jobs of 50 µs: 2000 wanted, capped.
    assert jobs_ahead(10, 50e-6, 0.005, 1000) == 1000
    # Jobs of 1 ms: twice what 10 slots start in 5 ms.
    assert jobs_ahead(10, 0.001, 0.005, 1000) == 100


def test_slow_jobs_get_none_ahead() -> None:
    # One-second jobs against a 5 ms claim (or even a slow 40 ms one): only free slots.
    assert jobs_ahead(10, 1.0, 0.005, 1000) == 0
    assert jobs_ahead(10, 1.0, 0.040, 1000) == 0
    assert jobs_ahead(10, 0.2, 0.005, 1000) == 0


def test_nothing_measured_means_nothing_ahead() -> None:
    assert jobs_ahead(10, None, 0.005, 1000) == 0
    assert jobs_ahead(10, 50e-6, None, 1000) == 0
    assert Estimates().ahead(10, 1000) == 0


@pytest.mark.parametrize(
    ("per_job", "claim"),
    [(math.nan, 0.005), (0.001, math.nan), (math.inf, 0.005), (-1.0, 0.005), (0.001, -1.0)],
)
def test_hostile_measurements_stay_within_bounds(per_job: float, claim: float) -> None:
    ahead = jobs_ahead(10, per_job, claim, 1000)
    assert 0 <= ahead <= 1000
    if math.isnan(per_job) or math.isnan(claim) or claim < 0 or per_job == math.inf:
        assert ahead == 0


@given(concurrency, seconds, seconds, most)
def test_never_negative_never_beyond_the_cap(c: int, per_job: float, claim: float, m: int) -> None:
    assert 0 <= jobs_ahead(c, per_job, claim, m) <= m


@given(concurrency, seconds, seconds, seconds, most)
def test_a_slower_claim_holds_more_and_slower_jobs_hold_less(
    c: int, per_job: float, claim: float, more: float, m: int
) -> None:
    assert jobs_ahead(c, per_job, claim + more, m) >= jobs_ahead(c, per_job, claim, m)
    assert jobs_ahead(c, per_job + more, claim, m) <= jobs_ahead(c, per_job, claim, m)
    assert jobs_ahead(c + 1, per_job, claim, m) >= jobs_ahead(c, per_job, claim, m)


@given(concurrency, st.floats(min_value=1e-6, max_value=3600.0), seconds, most)
def test_none_ahead_exactly_when_a_job_outlasts_twice_the_claim_per_slot(
    c: int, per_job: float, claim: float, m: int
) -> None:
    if m > 0 and 2 * c * claim < per_job:
        assert jobs_ahead(c, per_job, claim, m) == 0
    if m > 0 and 2 * c * claim >= per_job * 1.000001:
        assert jobs_ahead(c, per_job, claim, m) >= 1


def test_the_time_per_job_rises_quickly_after_fast_jobs_and_falls_gradually() -> None:
    estimates = Estimates()
    estimates.claimed(0.005)
    for _ in range(1000):
        estimates.ran(50e-6)
    assert estimates.ahead(10, 1000) == 1000, "fast jobs: the whole cap"
    estimates.ran(1.0)
    estimates.ran(1.0)
    assert estimates.ahead(10, 1000) == 0, "two slow jobs stop the prefetch"
    for _ in range(5):
        estimates.ran(50e-6)
    assert estimates.ahead(10, 1000) == 0, "a few fast ones among slow ones do not restart it"
    for _ in range(200):
        estimates.ran(50e-6)
    assert estimates.ahead(10, 1000) == 1000, "a steady run of fast jobs brings it back"


def test_a_worker_that_ran_dry_forgets_the_time_per_job() -> None:
    estimates = Estimates()
    estimates.claimed(0.005)
    estimates.ran(50e-6)
    assert estimates.ahead(10, 1000) == 1000
    estimates.idle()
    assert estimates.ahead(10, 1000) == 0, "the next burst may be of slow jobs"
    assert estimates.claim_seconds == 0.005, "the claim round trip is still known"


@given(st.lists(seconds, min_size=1, max_size=50), st.lists(seconds, min_size=1, max_size=50))
def test_the_averages_stay_within_what_was_measured(jobs: list[float], claims: list[float]) -> None:
    estimates = Estimates()
    for value in jobs:
        estimates.ran(value)
    for value in claims:
        estimates.claimed(value)
    assert estimates.seconds_per_job is not None and estimates.claim_seconds is not None
    assert min(jobs) - 1e-9 <= estimates.seconds_per_job <= max(jobs) + 1e-9
    assert min(claims) - 1e-9 <= estimates.claim_seconds <= max(claims) + 1e-9


def test_the_worker_takes_a_given_prefetch_and_adapts_without_one() -> None:
    """No database involved: the worker only reads its settings and estimates here."""
    url = "postgresql://nowhere.invalid/db"
    app = tickwork.App(url)
    adaptive = Worker(app, settings(url, concurrency=10, claim_batch=500))
    assert adaptive.claimer.jobs_ahead() == 0, "nothing measured yet"
    adaptive.claimer.estimates.claimed(0.005)
    adaptive.claimer.estimates.ran(50e-6)
    assert adaptive.claimer.jobs_ahead() == 1000, "fast jobs: a full claim in hand, one in flight"
    adaptive.claimer.estimates.ran(2.0)
    assert adaptive.claimer.jobs_ahead() == 0
    fixed = Worker(app, settings(url, concurrency=10, prefetch=3))
    fixed.claimer.estimates.claimed(0.005)
    fixed.claimer.estimates.ran(50e-6)
    assert fixed.claimer.jobs_ahead() == 3
    assert Worker(app, settings(url, prefetch=0)).claimer.jobs_ahead() == 0


async def test_a_finished_job_frees_room_once_and_is_counted_until_forgotten() -> None:
    held = HeldJobs()
    room = held.room
    jobs = [_job(i) for i in range(3)]
    for job in jobs:
        held.hold(job)
    assert (len(held), held.unfinished) == (3, 3)
    held.finish(jobs[0].id)
    assert room.is_set(), "a finished task makes room for the next claim"
    held.finish(jobs[0].id)  # twice: counted once
    assert (len(held), held.unfinished) == (3, 2)
    held.forget(jobs[0].id)  # its outcome written
    held.forget(jobs[1].id)  # dropped unfinished (lost, failed)
    held.forget(jobs[1].id)  # twice: nothing more
    assert (len(held), held.unfinished) == (1, 1)
    held.finish(JobId(99))  # not held: nothing counted
    assert (len(held), held.unfinished) == (1, 1)
