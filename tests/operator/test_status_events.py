"""The pure parts of the status that tells the truth: the rate-limited CronJob-like Events
(``tickwork.operator.events``), the Served condition (``tickwork.operator.served``) and
``status.lastJob``. The clock is a value passed in: no waiting."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tickwork.db.jobs import LastJob
from tickwork.db.pauses import PauseRow
from tickwork.db.workers import LiveWorker
from tickwork.model import JobId, JobStatus
from tickwork.operator import events, served, status
from tickwork.operator.desired import entry_of
from tickwork.operator.events import Event, Recorder, Seen

T = datetime(2026, 12, 1, 3, 0, tzinfo=UTC)
KEY = ("team", "nightly")
UID = "uid-1"


def at(seconds: float) -> datetime:
    return T + timedelta(seconds=seconds)


def created(job: int, skipped: int = 0) -> Seen:
    return Seen(skipped=skipped, job_id=job, job_status="available", occurrence_at=at(job))


def reasons(found: list[Event]) -> list[str]:
    return [event.reason for event in found]


def test_the_first_round_only_records_the_baseline() -> None:
    """After a start (or for a new object) nothing is posted, whatever the row holds."""
    recorder = Recorder(window=60)
    assert recorder.observe(KEY, UID, Seen(skipped=7, job_id=3, job_status="dead"), T) == []
    assert recorder.observe(KEY, UID, Seen(skipped=7, job_id=3, job_status="dead"), at(1)) == []


def test_each_change_posts_its_cronjob_like_event() -> None:
    recorder = Recorder(window=0)
    recorder.observe(KEY, UID, Seen(skipped=0), T)

    (event,) = recorder.observe(KEY, UID, created(1), at(1))
    assert event == Event(
        "Normal", events.SUCCESSFUL_CREATE, "Created job 1 for the occurrence 2026-12-01T03:00:01Z"
    )
    running = Seen(skipped=0, job_id=1, job_status="running", occurrence_at=at(1))
    assert recorder.observe(KEY, UID, running, at(2)) == []
    done = Seen(0, 1, "succeeded", at(1), duration_seconds=41.25)
    (event,) = recorder.observe(KEY, UID, done, at(3))
    assert event == Event(
        "Normal", events.SAW_COMPLETED_JOB, "Saw completed job 1: succeeded after 41.25s"
    )

    dead = Seen(0, 2, "dead", at(2), attempt=5, error="ValueError:\n  bad   input")
    found = recorder.observe(KEY, UID, dead, at(4))
    assert reasons(found) == [events.SUCCESSFUL_CREATE, events.JOB_FAILED]
    assert found[1] == Event(
        "Warning", events.JOB_FAILED, "Job 2 is dead after 5 attempts: ValueError: bad input"
    )

    (event,) = recorder.observe(KEY, UID, Seen(3, 2, "dead", at(2), attempt=5), at(5))
    assert event == Event(
        "Warning", events.SKIPPED_OCCURRENCES, "Skipped 3 occurrences (3 since creation)"
    )
    trigger = Seen(3, 9, "cancelled", None)
    found = recorder.observe(KEY, UID, trigger, at(6))
    assert [e.message for e in found] == [
        "Created job 9 outside the timetable (a trigger)",
        "Saw completed job 9: cancelled",
    ]


def test_one_event_per_reason_per_window_and_the_rest_counted_into_the_next() -> None:
    recorder = Recorder(window=60)
    recorder.observe(KEY, UID, Seen(skipped=0), T)
    assert reasons(recorder.observe(KEY, UID, created(1), at(10))) == [events.SUCCESSFUL_CREATE]
    assert recorder.observe(KEY, UID, created(2), at(20)) == []
    assert recorder.observe(KEY, UID, created(3, skipped=2), at(30)) == [
        Event("Warning", events.SKIPPED_OCCURRENCES, "Skipped 2 occurrences (2 since creation)")
    ]  # another reason has a window of its own
    assert recorder.observe(KEY, UID, created(3, skipped=2), at(69)) == []
    (event,) = recorder.observe(KEY, UID, created(3, skipped=2), at(70))  # no change: the window
    assert event == Event(
        "Normal",
        events.SUCCESSFUL_CREATE,
        "2 jobs created since 2026-12-01T03:00:20Z "
        "(the last: Created job 3 for the occurrence 2026-12-01T03:00:03Z)",
    )
    assert recorder.observe(KEY, UID, created(3, skipped=2), at(200)) == []  # nothing held


def test_held_skipped_counts_add_up() -> None:
    recorder = Recorder(window=60)
    recorder.observe(KEY, UID, Seen(skipped=0), T)
    recorder.observe(KEY, UID, Seen(skipped=1), at(1))
    recorder.observe(KEY, UID, Seen(skipped=4), at(2))
    recorder.observe(KEY, UID, Seen(skipped=5), at(3))
    (event,) = recorder.observe(KEY, UID, None, at(61))  # nothing read this round: only due ones
    assert event.message == (
        "4 occurrences skipped since 2026-12-01T03:00:02Z "
        "(the last: Skipped 1 occurrence (5 since creation))"
    )


def test_objects_are_kept_apart_and_a_recreated_one_starts_over() -> None:
    recorder = Recorder(window=60)
    other = ("team", "other")
    recorder.observe(KEY, UID, Seen(skipped=0), T)
    recorder.observe(other, "uid-2", Seen(skipped=0), T)
    assert recorder.observe(KEY, UID, created(1), at(1)) != []
    assert recorder.observe(other, "uid-2", created(5), at(1)) != []  # its own window
    recorder.observe(KEY, UID, created(2), at(2))  # held
    assert recorder.observe(KEY, "uid-new", created(7), at(100)) == []  # new object: baseline
    assert recorder.observe(KEY, "uid-new", created(7), at(200)) == []  # the held one went
    recorder.forget(other)
    assert recorder.observe(other, "uid-2", created(6), at(300)) == []  # baseline again


def test_a_dead_jobs_event_shows_the_exception_of_its_traceback() -> None:
    """``last_error`` is a traceback (the worker's ``describe``): the Event shows its last
    line, the exception, not the frames that lead to it."""
    error = (
        "Traceback (most recent call last):\n"
        '  File "/app/tasks.py", line 3, in nightly\n'
        "    raise RuntimeError('upstream said no')\n"
        "RuntimeError: upstream said no\n"
    )
    before, after = Seen(0, 1, "running"), Seen(0, 1, "dead", attempt=2, error=error)
    (failed,) = events.happenings(before, after)
    assert failed.message == "Job 1 is dead after 2 attempts: RuntimeError: upstream said no"


def test_a_long_error_is_cut() -> None:
    before, after = Seen(0, 1, "running"), Seen(0, 1, "dead", attempt=1, error="x" * 500)
    (failed,) = events.happenings(before, after)
    assert len(failed.message) < 260 and failed.message.endswith("…")


def fleet(
    *workers: tuple[list[str], list[str]] | tuple[list[str], list[str], list[str]],
) -> served.Fleet:
    """Live workers as (namespaces, kinds[, queues]); queues default to ``default``."""
    return served.Fleet.of(
        LiveWorker(f"w{i}", worker[0], worker[1], worker[2] if len(worker) > 2 else ["default"])
        for i, worker in enumerate(workers)
    )


def test_served_needs_a_live_worker_offering_the_namespace_and_one_registering_the_kind() -> None:
    nobody = served.served(fleet(), "team", "k", "default", database_error=None)
    assert (nobody.status, nobody.reason) == ("False", served.NO_WORKER)
    assert "'team'" in nobody.message and "live workers: 0" in nobody.message

    elsewhere = served.served(
        fleet((["other"], ["k"])), "team", "k", "default", database_error=None
    )
    assert (elsewhere.status, elsewhere.reason) == ("False", served.NO_WORKER)

    kindless = served.served(
        fleet((["team"], ["a"]), (["team", "x"], ["b"])),
        "team",
        "k",
        "default",
        database_error=None,
    )
    assert (kindless.status, kindless.reason) == ("False", served.KIND_NOT_REGISTERED)
    assert kindless.message == (
        "2 live workers offer schedule namespace 'team', but none of the 2 live workers "
        "registers kind 'k': its jobs wait unclaimed"
    )

    # Firing and running may be different workers: a worker claims any namespace's jobs.
    split = served.served(
        fleet((["team"], []), (["team"], []), ([], ["k"])),
        "team",
        "k",
        "default",
        database_error=None,
    )
    assert (split.status, split.reason) == ("True", served.WORKERS_AVAILABLE)
    assert split.message == (
        "2 live workers offer schedule namespace 'team'; 1 live worker registers kind 'k' "
        "and serves queue 'default'"
    )
    # A worker listing a namespace twice counts once.
    assert (
        "1 live worker offers"
        in served.served(
            fleet((["team", "team"], ["k"])), "team", "k", "default", database_error=None
        ).message
    )


def test_served_needs_the_kind_and_the_queue_on_one_live_worker() -> None:
    """A worker claims jobs of the kinds it registers from the queues it serves: a worker
    serving the queue without the kind, beside one with the kind in other queues, claims
    nothing of the schedule's."""
    other_queue = fleet((["team"], ["k"], ["a", "b"]))
    waiting = served.served(other_queue, "team", "k", "reports", database_error=None)
    assert (waiting.status, waiting.reason) == ("False", served.QUEUE_NOT_SERVED)
    assert waiting.message == (
        "1 live worker registers kind 'k', but none of them serves queue 'reports' (a worker "
        "claims from the queues of its --queues): its jobs wait unclaimed"
    )
    crossed = fleet((["team"], ["k"], ["default"]), ([], ["other"], ["reports"]))
    assert served.served(crossed, "team", "k", "reports", database_error=None).reason == (
        served.QUEUE_NOT_SERVED
    )
    both = fleet((["team"], ["k"], ["default"]), ([], ["k", "other"], ["reports", "x"]))
    condition = served.served(both, "team", "k", "reports", database_error=None)
    assert (condition.status, condition.reason) == ("True", served.WORKERS_AVAILABLE)
    assert condition.message.endswith("1 live worker registers kind 'k' and serves queue 'reports'")
    # Namespace and kind come first: no namespace is still NoWorker, no kind KindNotRegistered.
    assert served.served(
        fleet(([], ["k"], ["q"])), "team", "k", "r", database_error=None
    ).reason == (served.NO_WORKER)
    assert served.served(
        fleet((["team"], [], ["r"])), "team", "k", "r", database_error=None
    ).reason == (served.KIND_NOT_REGISTERED)


@pytest.mark.parametrize(
    ("known", "kind", "error", "reason"),
    [
        (True, "k", "database unavailable: gone", served.DATABASE_UNAVAILABLE),
        (False, "k", None, served.PENDING),
        (True, None, None, served.NO_DEFINITION),
    ],
)
def test_served_is_unknown_when_it_cannot_be_told(
    known: bool, kind: str | None, error: str | None, reason: str
) -> None:
    condition = served.served(
        fleet() if known else None, "team", kind, "default", database_error=error
    )
    assert (condition.status, condition.reason) == ("Unknown", reason)


def test_last_job_keeps_what_the_schedule_row_has_once_the_job_row_is_gone() -> None:
    ended = LastJob("team", "a", JobId(7), JobStatus.SUCCEEDED, at(0), at(1), at(3.5), 1, None)
    assert status.present(status.last_job(ended)) == {
        "id": 7,
        "outcome": "succeeded",
        "occurrenceAt": "2026-12-01T03:00:00Z",
        "startedAt": "2026-12-01T03:00:01Z",
        "finishedAt": "2026-12-01T03:00:03Z",
        "durationSeconds": 2.5,
    }
    deleted = LastJob("team", "a", JobId(7), JobStatus.SUCCEEDED, None, None, None, None, None)
    shown = status.last_job(deleted)
    assert status.present(shown) == {"id": 7, "outcome": "succeeded"}


def test_a_new_last_job_removes_the_fields_of_the_old_one() -> None:
    """The merge patch sends None for a field the new last job lacks, so no stale finishedAt
    stays; a status that already shows the job is not patched again."""
    current = {
        "lastJob": {"id": 7, "outcome": "succeeded", "finishedAt": "2026-12-01T03:00:03Z"},
    }
    opened = LastJob("team", "a", JobId(8), JobStatus.AVAILABLE, at(60), None, None, 0, None)
    found = {"lastJob": status.last_job(opened)}
    ready = status.Ready("True", "Synced", "current")
    entry = entry_of({"metadata": {"name": "a", "namespace": "team"}, "spec": {}})
    changes = status.patch(current, entry, ready, found, T)
    assert changes["lastJob"]["finishedAt"] is None and changes["lastJob"]["id"] == 8
    shown = {
        **current,
        "lastJob": status.present(changes["lastJob"]),
        "conditions": changes["conditions"],
    }
    assert status.patch(shown, entry, ready, found, T) == {}


def test_served_says_when_the_namespace_or_the_queue_is_paused() -> None:
    workers = [LiveWorker("w", ["team"], ["k"], ["default"])]
    pauses = [PauseRow("namespace", "team", "alice", datetime(2030, 1, 1, tzinfo=UTC), None)]
    held = served.served(
        served.Fleet.of(workers, pauses), "team", "k", "default", database_error=None
    )
    assert (held.status, held.reason) == ("False", served.NAMESPACE_PAUSED)
    assert held.message == (
        "schedule namespace 'team' is paused (by alice): its schedules fire nothing until it "
        "is resumed (tickwork namespaces resume team)"
    )
    by_policy = "operator:prod/tenantpolicy/freeze"
    pauses = [PauseRow("namespace", "team", by_policy, datetime(2030, 1, 1, tzinfo=UTC), None)]
    held = served.served(
        served.Fleet.of(workers, pauses), "team", "k", "default", database_error=None
    )
    assert held.message == (
        f"schedule namespace 'team' is paused (by {by_policy}): its schedules fire nothing "
        "until it is resumed (TenantPolicy 'freeze' sets spec.paused: false)"
    )
    pauses = [PauseRow("queue", "default", "bob", datetime(2030, 1, 1, tzinfo=UTC), None)]
    waiting = served.served(
        served.Fleet.of(workers, pauses), "team", "k", "default", database_error=None
    )
    assert (waiting.status, waiting.reason) == ("False", served.QUEUE_PAUSED)
    assert "queue 'default' is paused (by bob)" in waiting.message
    other = served.served(
        served.Fleet.of(workers, pauses), "team", "k", "other", database_error=None
    )
    assert other.reason != served.QUEUE_PAUSED  # another queue's pause is not this one's
