"""The pure firing decisions: misses, misfire policies (including backlogs settled over
several passes), overlap policies, jitter and the job an occurrence makes."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import pytest

from tickwork.model import Backoff, OpenJobs
from tickwork.schedules import policies
from tickwork.schedules.definition import ScheduleDefinition
from tickwork.schedules.options import ConcurrencyPolicy, JobTemplate, MisfirePolicy

T0 = datetime(2030, 1, 1, tzinfo=UTC)
SKIP, LATEST, CATCH_UP = MisfirePolicy.SKIP, MisfirePolicy.LATEST, MisfirePolicy.CATCH_UP
ALLOW, FORBID = ConcurrencyPolicy.ALLOW, ConcurrencyPolicy.FORBID
BUFFER_ONE, REPLACE = ConcurrencyPolicy.BUFFER_ONE, ConcurrencyPolicy.REPLACE


def minutes(*values: int) -> list[datetime]:
    return [T0 + timedelta(minutes=v) for v in values]


def decide(
    found: list[datetime],
    now: datetime,
    policy: MisfirePolicy,
    *,
    deadline: int | None = 60,
    limit: int = 3,
    missed_before: datetime | None = None,
    complete: bool = True,
) -> policies.MisfireDecision:
    return policies.decide_misfire(
        found,
        complete=complete,
        now=now,
        policy=policy,
        catch_up_limit=limit,
        starting_deadline_seconds=deadline,
        missed_before=missed_before,
    )


# --- misses ----------------------------------------------------------------------------------


def test_without_deadline_lateness_alone_is_no_miss() -> None:
    late = T0 + timedelta(days=365)
    assert not policies.is_missed(T0, late, starting_deadline_seconds=None, missed_before=None)


def test_an_occurrence_is_missed_once_its_deadline_passed() -> None:
    def missed(seconds_late: float) -> bool:
        now = T0 + timedelta(seconds=seconds_late)
        return policies.is_missed(T0, now, starting_deadline_seconds=30, missed_before=None)

    assert not missed(0)
    assert not missed(30)
    assert missed(30.001)


def test_occurrences_before_missed_before_are_missed_even_without_deadline() -> None:
    resumed = T0 + timedelta(minutes=5)
    kwargs = {"starting_deadline_seconds": None, "missed_before": resumed}
    assert policies.is_missed(T0, resumed, **kwargs)
    assert not policies.is_missed(resumed, resumed, **kwargs)


# --- misfire policies --------------------------------------------------------------------------


def test_on_time_occurrences_all_fire_under_every_policy() -> None:
    found = minutes(0, 1, 2)
    for policy in MisfirePolicy:
        decision = decide(found, found[-1], policy, deadline=300)
        assert decision == policies.MisfireDecision(tuple(found), 0, 3)


@pytest.mark.parametrize(
    ("policy", "fired", "skipped"),
    [(SKIP, [], 5), (LATEST, [4], 4), (CATCH_UP, [2, 3, 4], 2)],
)
def test_misfire_policies_choose_among_the_misses(
    policy: MisfirePolicy, fired: list[int], skipped: int
) -> None:
    found = minutes(0, 1, 2, 3, 4)
    decision = decide(found, T0 + timedelta(minutes=10), policy)
    assert decision.fire == tuple(minutes(*fired))
    assert decision.skipped == skipped
    assert decision.settled == 5


def test_latest_fires_no_miss_when_an_on_time_occurrence_fires_in_the_same_pass() -> None:
    found = minutes(0, 1, 2, 3)
    decision = decide(found, found[-1] + timedelta(seconds=10), LATEST)
    assert decision.fire == (found[-1],)
    assert decision.skipped == 3


def test_catch_up_fires_misses_and_on_time_occurrences_in_order() -> None:
    found = minutes(0, 1, 2, 3)
    decision = decide(found, found[-1] + timedelta(seconds=10), CATCH_UP, limit=2)
    assert decision.fire == tuple(minutes(1, 2, 3))
    assert decision.skipped == 1


def test_catch_up_limit_is_capped() -> None:
    found = [T0 + timedelta(seconds=s) for s in range(policies.MAX_CATCH_UP + 5)]
    decision = decide(found, T0 + timedelta(days=1), CATCH_UP, limit=10**9)
    assert len(decision.fire) == policies.MAX_CATCH_UP
    assert decision.skipped == 5


def test_resume_marks_the_suspended_stretch_as_missed() -> None:
    found = minutes(0, 1, 2, 3)
    resumed = T0 + timedelta(minutes=2, seconds=30)
    for policy, fired in ((SKIP, [3]), (LATEST, [3]), (CATCH_UP, [0, 1, 2, 3])):
        decision = decide(
            found, resumed + timedelta(minutes=1), policy, deadline=None, missed_before=resumed
        )
        assert decision.fire == tuple(minutes(*fired)), policy


@pytest.mark.parametrize(
    ("policy", "fired", "skipped"),
    [(SKIP, [4], 4), (LATEST, [4], 4), (CATCH_UP, [1, 2, 3, 4], 1)],
)
def test_without_deadline_an_occurrence_superseded_by_a_later_due_one_is_missed(
    policy: MisfirePolicy, fired: list[int], skipped: int
) -> None:
    found = minutes(0, 1, 2, 3, 4)
    decision = decide(found, T0 + timedelta(hours=5), policy, deadline=None)
    assert decision == policies.MisfireDecision(tuple(minutes(*fired)), skipped, 5)


def test_without_deadline_a_day_long_outage_fires_once_by_default() -> None:
    outage = [T0 + timedelta(minutes=m) for m in range(24 * 60 + 1)]
    now = outage[-1] + timedelta(seconds=20)
    fired, skipped = _passes(outage, now, LATEST, None, 10, chunk=1000)
    assert (fired, skipped) == ([outage[-1]], 24 * 60)
    fired, skipped = _passes(outage, now, CATCH_UP, None, 5, chunk=1000)
    assert (fired, skipped) == (outage[-6:], 24 * 60 - 5)


def test_without_deadline_a_single_due_occurrence_fires_however_late() -> None:
    for policy in MisfirePolicy:
        decision = decide(minutes(0), T0 + timedelta(days=3), policy, deadline=None)
        assert decision == policies.MisfireDecision(tuple(minutes(0)), 0, 1)


def test_a_list_cut_short_inside_the_misses_settles_only_what_cannot_fire() -> None:
    found = minutes(*range(10))
    now = T0 + timedelta(hours=1)
    assert decide(found, now, SKIP, complete=False) == policies.MisfireDecision((), 10, 10)
    assert decide(found, now, LATEST, complete=False) == policies.MisfireDecision((), 9, 9)
    assert decide(found, now, CATCH_UP, complete=False) == policies.MisfireDecision((), 7, 7)


def _passes(
    timeline: list[datetime],
    now: datetime,
    policy: MisfirePolicy,
    deadline: int | None,
    limit: int,
    chunk: int,
) -> tuple[list[datetime], int]:
    """Settle ``timeline`` the way the firing pass does: ``chunk`` plus the retained count
    listed per pass, again from the first unsettled occurrence."""
    fired: list[datetime] = []
    skipped = 0
    start = 0
    while start < len(timeline):
        listed = timeline[start : start + chunk + policies.retained(policy, limit)]
        complete = start + len(listed) == len(timeline)
        decision = decide(listed, now, policy, deadline=deadline, limit=limit, complete=complete)
        assert decision.settled > 0, "a pass must make progress"
        fired += decision.fire
        skipped += decision.skipped
        start += decision.settled
    return fired, skipped


@pytest.mark.parametrize(("policy", "deadline"), itertools.product(MisfirePolicy, [None, 0, 90]))
def test_a_backlog_settled_in_chunks_decides_as_if_seen_at_once(
    policy: MisfirePolicy, deadline: int | None
) -> None:
    timeline = minutes(*range(25))
    now = timeline[-1] + timedelta(seconds=30)
    whole = decide(timeline, now, policy, deadline=deadline, limit=4)
    for chunk in (1, 2, 3, 7, 24, 25, 100):
        fired, skipped = _passes(timeline, now, policy, deadline, 4, chunk)
        assert (fired, skipped) == (list(whole.fire), whole.skipped), chunk
        assert len(fired) + skipped == len(timeline)


# --- overlap policies --------------------------------------------------------------------------

THREE = minutes(0, 1, 2)
NONE_OPEN = None
PENDING = OpenJobs(available=1, running=0)
RUNNING = OpenJobs(available=0, running=1)


@pytest.mark.parametrize(
    ("policy", "open_jobs", "fired", "skipped", "replace"),
    [
        (ALLOW, PENDING, THREE, 0, False),
        (FORBID, NONE_OPEN, THREE[-1:], 2, False),
        (FORBID, PENDING, [], 3, False),
        (FORBID, RUNNING, [], 3, False),
        (BUFFER_ONE, NONE_OPEN, THREE[-1:], 2, False),
        (BUFFER_ONE, RUNNING, THREE[-1:], 2, False),
        (BUFFER_ONE, PENDING, [], 3, False),
        (REPLACE, NONE_OPEN, THREE[-1:], 2, False),
        (REPLACE, RUNNING, THREE[-1:], 2, True),
        (REPLACE, PENDING, THREE[-1:], 2, True),
    ],
)
def test_overlap_policies(
    policy: ConcurrencyPolicy,
    open_jobs: OpenJobs | None,
    fired: list[datetime],
    skipped: int,
    replace: bool,
) -> None:
    decision = policies.decide_overlap(THREE, policy, open_jobs)
    assert decision == policies.OverlapDecision(tuple(fired), skipped, replace)


def test_no_candidates_means_nothing_to_decide() -> None:
    for policy in ConcurrencyPolicy:
        assert policies.decide_overlap([], policy, RUNNING) == policies.OverlapDecision(
            (), 0, False
        )


# --- jitter and the job of an occurrence --------------------------------------------------------


def test_jitter_is_stable_bounded_and_spread() -> None:
    instants = [T0 + timedelta(minutes=m) for m in range(200)]
    delays = [policies.jitter("ns", "a", o, 30) for o in instants]
    assert delays == [policies.jitter("ns", "a", o, 30) for o in instants]
    assert all(timedelta(0) <= d <= timedelta(seconds=30) for d in delays)
    assert len(set(delays)) > 150
    assert min(delays) < timedelta(seconds=5) and max(delays) > timedelta(seconds=25)
    assert policies.jitter("ns", "b", T0, 30) != policies.jitter("ns", "a", T0, 30)
    assert policies.jitter("ns", "a", T0, 0) == timedelta(0)


def _definition(**fields: object) -> ScheduleDefinition:
    template = JobTemplate(
        kind="report",
        queue="q",
        payload={"day": "x"},
        priority=3,
        max_attempts=4,
        retry=Backoff(1, 2, 8),
        timeout_seconds=9.5,
    )
    return ScheduleDefinition(name="a", job=template, schedule="* * * * *", **fields)  # type: ignore[arg-type]


def test_an_occurrence_job_carries_the_template() -> None:
    job = policies.schedule_job("ns", _definition(jitter_seconds=20), T0, None)
    assert (job.schedule_namespace, job.schedule_name, job.occurrence_at) == ("ns", "a", T0)
    assert T0 <= job.run_at <= T0 + timedelta(seconds=20)  # type: ignore[operator]
    assert job.run_at == T0 + policies.jitter("ns", "a", T0, 20)
    assert (job.kind, job.queue, job.payload, job.priority) == ("report", "q", {"day": "x"}, 3)
    assert (job.max_attempts, job.retry, job.timeout) == (4, Backoff(1, 2, 8), 9.5)
    assert job.concurrency_key is None


def test_carried_state_replaces_the_payload_and_a_trigger_runs_now() -> None:
    job = policies.schedule_job("ns", _definition(), None, {"cursor": 7})
    assert job.payload == {"cursor": 7}
    assert job.occurrence_at is None and job.run_at is None


def test_buffer_one_gets_an_implicit_concurrency_key_unless_the_template_has_one() -> None:
    buffered = _definition(concurrency_policy=BUFFER_ONE)
    assert policies.concurrency_key("ns", buffered) == "schedule:ns/a"
    keyed = ScheduleDefinition(
        name="a",
        job=JobTemplate(kind="k", concurrency_key="mine"),
        schedule="* * * * *",
        concurrency_policy=BUFFER_ONE,
    )
    assert policies.concurrency_key("ns", keyed) == "mine"
    assert policies.concurrency_key("ns", _definition(concurrency_policy=FORBID)) is None


@pytest.mark.parametrize("policy", list(ConcurrencyPolicy))
def test_backfill_jobs_keep_the_overlap_policy_and_the_occurrence_order(
    policy: ConcurrencyPolicy,
) -> None:
    """Allow: the firing's jobs. Otherwise: one key for all (BufferOne's), and due times that
    never go back although the jitter of each occurrence (up to 5 minutes on a per-minute
    schedule) would."""
    definition = _definition(concurrency_policy=policy, jitter_seconds=300)
    found = [T0 + timedelta(minutes=k) for k in range(30)]
    jobs = policies.backfill_jobs("ns", definition, found, {"cursor": 7})
    fired = [policies.schedule_job("ns", definition, o, {"cursor": 7}) for o in found]
    assert [j.occurrence_at for j in jobs] == found
    assert [j.run_at for j in fired] != sorted(j.run_at for j in fired)  # type: ignore[type-var]
    if policy is ConcurrencyPolicy.ALLOW:
        assert jobs == fired
        return
    assert {j.concurrency_key for j in jobs} == {"schedule:ns/a"}
    run_ats = [j.run_at for j in jobs]
    assert run_ats == sorted(run_ats)  # type: ignore[type-var]
    assert all(f.run_at <= j.run_at for f, j in zip(fired, jobs, strict=True))  # type: ignore[operator]
    assert {j.payload["cursor"] for j in jobs} == {7}


def test_backfill_jobs_take_the_templates_key() -> None:
    keyed = ScheduleDefinition(
        name="a",
        job=JobTemplate(kind="k", concurrency_key="mine"),
        schedule="* * * * *",
        concurrency_policy=REPLACE,
    )
    (job,) = policies.backfill_jobs("ns", keyed, [T0], None)
    assert job.concurrency_key == "mine"
