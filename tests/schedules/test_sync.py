"""Desired-state sync: all or nothing, revisions that bump only on real change, pruning that
disables, namespaces kept apart by owner, and the revision fence of fire_schedule."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import psycopg
import pytest

import tickwork
from tests.support.schedule_helpers import NS, at, cron, every, jobs, schedule
from tickwork.clock import SettableClock
from tickwork.errors import InvalidInput, NamespaceOwned, ScheduleNotFound
from tickwork.schedules.checks import DefinitionError
from tickwork.schedules.options import IntervalMode, JobTemplate
from tickwork.schedules.sync import SyncReport


def _count(conn: psycopg.Connection[Any], table: str) -> int:
    row = conn.execute(f"SELECT count(*) FROM tickwork.{table}").fetchone()
    assert row is not None
    return int(row[0])


def test_new_schedules_start_at_their_first_occurrence_after_now(
    app: tickwork.App, conn: psycopg.Connection[Any], clock: SettableClock
) -> None:
    clock.set(at(30))
    report = app.sync_schedules(
        NS,
        [
            cron("hourly", "0 * * * *"),
            every("tick", 10),
            every("delayed", 45, interval_mode=IntervalMode.FIXED_DELAY),
        ],
    )
    assert report == SyncReport(created=["hourly", "tick", "delayed"])
    assert schedule(conn, "hourly")["next_run_at"] == at(3600)
    assert schedule(conn, "tick")["next_run_at"] == at(40)
    delayed = schedule(conn, "delayed")
    assert delayed["next_run_at"] == at(75)
    assert delayed["fixed_delay"] == timedelta(seconds=45)
    for name in ("hourly", "tick", "delayed"):
        row = schedule(conn, name)
        assert (row["revision"], row["enabled"], row["skipped_occurrences"]) == (1, True, 0)


def test_an_unchanged_definition_keeps_its_revision_and_next_run(
    app: tickwork.App, conn: psycopg.Connection[Any], clock: SettableClock
) -> None:
    definitions = [cron("a", "*/5 * * * *"), every("b", 60)]
    app.sync_schedules(NS, definitions)
    before = {name: schedule(conn, name) for name in ("a", "b")}
    clock.set(at(3600))  # next runs now lie in the past: unchanged rows must keep them
    report = app.sync_schedules(NS, definitions)
    assert report == SyncReport(unchanged=["a", "b"])
    for name in ("a", "b"):
        after = schedule(conn, name)
        assert after["revision"] == 1
        assert after["next_run_at"] == before[name]["next_run_at"]
        assert after["updated_at"] == before[name]["updated_at"]


def test_a_real_change_bumps_the_revision_and_recomputes_the_next_run(
    app: tickwork.App, conn: psycopg.Connection[Any], clock: SettableClock
) -> None:
    app.sync_schedules(NS, [cron("a", "0 * * * *"), cron("b", "0 * * * *")])
    clock.set(at(600))
    report = app.sync_schedules(NS, [cron("a", "*/15 * * * *"), cron("b", "0 * * * *")])
    assert report == SyncReport(updated=["a"], unchanged=["b"])
    a = schedule(conn, "a")
    assert (a["revision"], a["next_run_at"]) == (2, at(900))
    assert a["spec"]["schedule"] == "*/15 * * * *"
    assert schedule(conn, "b")["revision"] == 1


def test_a_change_keeps_an_occurrence_that_is_due_but_not_fired_yet(
    app: tickwork.App, conn: psycopg.Connection[Any], clock: SettableClock
) -> None:
    app.sync_schedules(NS, [cron("a", "*/10 * * * *")])
    clock.set(at(601))  # the 00:10 occurrence is due, no worker fired it yet
    changed = cron("a", "*/10 * * * *", job=JobTemplate(kind="s.job", payload={"v": 2}))
    app.sync_schedules(NS, [changed])
    assert schedule(conn, "a")["next_run_at"] == at(600)


def test_one_invalid_definition_fails_the_whole_sync_and_writes_nothing(
    app: tickwork.App, conn: psycopg.Connection[Any]
) -> None:
    definitions = [cron("good", "0 * * * *"), cron("bad", "61 * * * *"), every("also-good", 5)]
    with pytest.raises(DefinitionError) as caught:
        app.sync_schedules(NS, definitions)
    assert caught.value.name == "bad"
    assert caught.value.field == "spec.schedule"
    assert "'bad'" in str(caught.value) and "spec.schedule" in str(caught.value)
    assert _count(conn, "schedules") == 0
    assert _count(conn, "schedule_namespaces") == 0


def test_a_failed_sync_leaves_the_previous_state_intact(
    app: tickwork.App, conn: psycopg.Connection[Any]
) -> None:
    app.sync_schedules(NS, [cron("a", "0 * * * *"), cron("b", "0 * * * *")])
    with pytest.raises(DefinitionError):
        app.sync_schedules(NS, [cron("a", "*/5 * * * *"), cron("a", "*/5 * * * *")])
    assert schedule(conn, "a")["spec"]["schedule"] == "0 * * * *"
    assert schedule(conn, "b")["enabled"]


def test_pruning_disables_and_relisting_re_enables(
    app: tickwork.App, conn: psycopg.Connection[Any], clock: SettableClock
) -> None:
    app.sync_schedules(NS, [cron("keep", "0 * * * *"), cron("drop", "0 * * * *")])
    report = app.sync_schedules(NS, [cron("keep", "0 * * * *")])
    assert report == SyncReport(unchanged=["keep"], disabled=["drop"])
    dropped = schedule(conn, "drop")
    assert (dropped["enabled"], dropped["next_run_at"], dropped["revision"]) == (False, None, 2)
    # Disabled, not deleted; pruning again changes nothing.
    assert app.sync_schedules(NS, [cron("keep", "0 * * * *")]).disabled == []
    assert schedule(conn, "drop")["revision"] == 2

    clock.set(at(7200 + 5))
    report = app.sync_schedules(NS, [cron("keep", "0 * * * *"), cron("drop", "0 * * * *")])
    assert report == SyncReport(updated=["drop"], unchanged=["keep"])
    back = schedule(conn, "drop")
    # Re-enabled as a change, starting after now: no backlog of the disabled stretch.
    assert (back["enabled"], back["revision"], back["next_run_at"]) == (True, 3, at(3 * 3600))


def test_without_pruning_unlisted_schedules_stay(
    app: tickwork.App, conn: psycopg.Connection[Any]
) -> None:
    app.sync_schedules(NS, [cron("a", "0 * * * *")])
    report = app.sync_schedules(NS, [cron("b", "0 * * * *")], prune=False)
    assert report == SyncReport(created=["b"])
    assert schedule(conn, "a")["enabled"]


def test_namespaces_are_kept_apart(app: tickwork.App, conn: psycopg.Connection[Any]) -> None:
    app.sync_schedules("billing", [cron("a", "0 * * * *")])
    app.sync_schedules("reports", [cron("a", "0 * * * *"), cron("b", "0 * * * *")])
    assert app.sync_schedules("billing", []).disabled == ["a"]
    assert schedule(conn, "a", "reports")["enabled"]
    assert schedule(conn, "b", "reports")["enabled"]
    assert [(r.namespace, r.name) for r in app.list_schedules("reports")] == [
        ("reports", "a"),
        ("reports", "b"),
    ]


def test_another_owner_is_refused_unless_it_takes_over(
    app: tickwork.App, conn: psycopg.Connection[Any]
) -> None:
    app.sync_schedules(NS, [cron("a", "0 * * * *")], owner="operator:prod")
    with pytest.raises(NamespaceOwned) as caught:
        app.sync_schedules(NS, [], owner="file:deploy")
    assert "'operator:prod'" in str(caught.value) and "'file:deploy'" in str(caught.value)
    assert schedule(conn, "a")["enabled"]

    report = app.sync_schedules(NS, [], owner="file:deploy", take_over=True)
    assert report.disabled == ["a"]
    assert {r.owner for r in app.list_schedules(NS)} == {"file:deploy"}
    with pytest.raises(NamespaceOwned):
        app.sync_schedules(NS, [], owner="operator:prod")


def test_a_dry_run_reports_and_writes_nothing(
    app: tickwork.App, conn: psycopg.Connection[Any]
) -> None:
    app.sync_schedules(NS, [cron("a", "0 * * * *"), cron("b", "0 * * * *")])
    report = app.sync_schedules(
        NS, [cron("a", "*/5 * * * *"), cron("c", "0 * * * *")], dry_run=True
    )
    assert report == SyncReport(created=["c"], updated=["a"], disabled=["b"])
    assert [r.name for r in app.list_schedules(NS)] == ["a", "b"]
    assert schedule(conn, "a")["revision"] == 1
    assert schedule(conn, "b")["enabled"]
    with pytest.raises(NamespaceOwned):
        app.sync_schedules(NS, [], owner="someone-else", dry_run=True)


def test_namespace_and_owner_are_checked(app: tickwork.App) -> None:
    for namespace in ("", " padded"):
        with pytest.raises(InvalidInput, match="namespace"):
            app.sync_schedules(namespace, [])
    with pytest.raises(InvalidInput, match="owner"):
        app.sync_schedules(NS, [], owner=" ")


def test_a_sync_that_changes_something_notifies_the_workers(
    app: tickwork.App, database_url: str
) -> None:
    with psycopg.connect(database_url, autocommit=True) as listener:
        listener.execute("LISTEN tickwork_schedules")
        app.sync_schedules(NS, [cron("a", "0 * * * *")])
        notices = list(listener.notifies(timeout=2, stop_after=1))
        assert [(n.channel, n.payload) for n in notices] == [("tickwork_schedules", NS)]
        app.sync_schedules(NS, [cron("a", "0 * * * *")])  # unchanged: nothing to wake for
        assert list(listener.notifies(timeout=0.3)) == []


def test_listing_shows_what_operators_need(app: tickwork.App) -> None:
    app.sync_schedules(
        NS,
        [cron("c", "0 9 * * *", time_zone="Europe/Berlin", suspend=True), every("e", 90)],
        owner="file",
    )
    c, e = app.list_schedules()
    assert (c.namespace, c.name, c.revision, c.enabled, c.suspend) == (NS, "c", 1, True, True)
    assert (c.schedule, c.every, c.time_zone, c.owner) == (
        "0 9 * * *",
        None,
        "Europe/Berlin",
        "file",
    )
    assert (e.schedule, e.every, e.next_run_at) == (None, "1m30s", at(90))
    assert (e.last_occurrence_at, e.last_job_status, e.skipped_occurrences) == (None, None, 0)
    assert app.get_schedule(NS, "e") == e
    with pytest.raises(ScheduleNotFound):
        app.get_schedule(NS, "nope")


# --- the revision fence ------------------------------------------------------------------------


def test_fire_schedule_fires_only_under_the_current_revision(
    app: tickwork.App, conn: psycopg.Connection[Any]
) -> None:
    app.sync_schedules(NS, [cron("a", "*/5 * * * *")])
    evaluated = schedule(conn, "a")  # a worker reads revision 1 and decides 00:05 is due ...
    app.sync_schedules(NS, [cron("a", "*/10 * * * *")])  # ... a deployment changes it ...
    assert app.fire_schedule(NS, "a", evaluated["revision"], at(300)) is None  # ... no stale job
    assert jobs(conn) == []

    job_id = app.fire_schedule(NS, "a", 2, at(600))
    assert job_id is not None
    (job,) = jobs(conn)
    assert (job["id"], job["schedule_name"], job["occurrence_at"]) == (job_id, "a", at(600))
    assert app.fire_schedule(NS, "a", 2, at(600)) is None  # the occurrence has its job
    row = schedule(conn, "a")
    assert (row["last_job_id"], row["last_occurrence_at"]) == (job_id, at(600))


def test_fire_schedule_fires_nothing_for_a_disabled_or_unknown_schedule(
    app: tickwork.App, conn: psycopg.Connection[Any]
) -> None:
    app.sync_schedules(NS, [cron("a", "*/5 * * * *")])
    app.sync_schedules(NS, [])
    assert app.fire_schedule(NS, "a", 2, at(300)) is None
    assert app.fire_schedule(NS, "unknown", 1, at(300)) is None
    assert jobs(conn) == []


def test_fire_schedule_refuses_an_instant_that_is_not_an_occurrence(app: tickwork.App) -> None:
    app.sync_schedules(NS, [cron("a", "*/5 * * * *")])
    with pytest.raises(InvalidInput, match="not an occurrence"):
        app.fire_schedule(NS, "a", 1, at(301))
    with pytest.raises(InvalidInput, match="timezone-aware"):
        app.fire_schedule(NS, "a", 1, at(300).replace(tzinfo=None))


def test_carried_state_survives_changes_except_to_the_job_payload_or_kind(
    app: tickwork.App, conn: psycopg.Connection[Any]
) -> None:
    template = JobTemplate(kind="s.job", payload={"n": 0})
    app.sync_schedules(NS, [cron("a", "0 * * * *", job=template)])
    conn.execute("UPDATE tickwork.schedules SET state = '{\"n\": 5}', state_job_id = 1")
    app.sync_schedules(NS, [cron("a", "*/30 * * * *", job=template)])
    assert schedule(conn, "a")["state"] == {"n": 5}
    app.sync_schedules(NS, [cron("a", "*/30 * * * *", job=JobTemplate(kind="s.job"))])
    assert schedule(conn, "a")["state"] is None
