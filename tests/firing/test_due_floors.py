"""Firing claims start each namespace's search for due schedules at a floor, the earliest due
schedule a recent claim found there (maintenance/firing/floors.py): the index entries of the
schedules fired since lie below it, and the search no longer steps over them. A floor is a
hint: a schedule waiting to retry a failed firing is never passed by one, a schedule moved
below one is found once it expires (or at once when the loop forgets the floors on a sync's
notification), and what a claim locks is decided as before. The time floors live is driven
by hand (``monotonic``), the firing instants are pinned."""

from __future__ import annotations

from typing import Any

import psycopg
from hypothesis import given
from hypothesis import strategies as st

import tickwork
from tests.support import explain
from tests.support.schedule_helpers import NS, at, every, jobs
from tickwork.db import schedules as schedules_db
from tickwork.db import store
from tickwork.maintenance import firing
from tickwork.maintenance.firing.floors import DueFloors


class Ticks:
    """A monotonic clock moved by hand."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _due_at(conn: psycopg.Connection[Any], **due: float) -> None:
    for name, seconds in due.items():
        conn.execute(
            "UPDATE tickwork.schedules SET next_run_at = %s WHERE namespace = %s AND name = %s",
            (at(seconds), NS, name),
        )


async def test_a_schedule_waiting_to_retry_is_never_passed_by_a_floor(
    app: tickwork.App, aconn: psycopg.AsyncConnection[Any], conn: psycopg.Connection[Any]
) -> None:
    """a waits to retry a failed firing (as the firing leaves it: firing_retry_at ahead)
    while c, due after it, is claimed: that claim's floor stays at a's due time, so a is
    claimed once its retry time comes, with the floor still fresh."""
    app.sync_schedules(NS, [every("a", 3600), every("b", 3600), every("c", 3600)], owner="t")
    _due_at(conn, a=10, b=20, c=30)
    conn.execute(
        "UPDATE tickwork.schedules SET firing_retry_at = %s, firing_failures = 1"
        " WHERE namespace = %s AND name = 'a'",
        (at(100), NS),
    )
    floors = DueFloors(monotonic=Ticks())
    await firing.run_once(aconn, (NS,), at(25), floors=floors)  # b
    await firing.run_once(aconn, (NS,), at(31), floors=floors)  # c, with a waiting below it
    assert floors.offer([NS])[0] == [at(10)]
    conn.execute(
        "UPDATE tickwork.schedules SET firing_retry_at = %s WHERE namespace = %s AND name = 'a'",
        (at(32), NS),
    )
    report = await firing.run_once(aconn, (NS,), at(33), floors=floors)
    assert report.fired == 1
    assert len(jobs(conn, "a")) == 1


async def test_a_schedule_moved_below_a_floor_is_found_when_it_expires_or_is_forgotten(
    app: tickwork.App, aconn: psycopg.AsyncConnection[Any], conn: psycopg.Connection[Any]
) -> None:
    """A schedule moved back below a fresh floor (a sync does so and wakes the loop, which
    forgets the floors; here the move is made without that) waits at most until the floor
    expires; forgetting the floors finds it at once."""
    app.sync_schedules(NS, [every("a", 3600), every("b", 3600)], owner="t")
    _due_at(conn, a=10, b=20)
    ticks = Ticks()
    floors = DueFloors(monotonic=ticks)
    await firing.run_once(aconn, (NS,), at(21), floors=floors)
    assert floors.offer([NS])[0] == [at(10)]
    # Both fired (next runs an hour on); b moves back below the floor, a stays ahead.
    _due_at(conn, b=5)
    ticks.now = floors.seconds / 2
    assert (await firing.run_once(aconn, (NS,), at(22), floors=floors)).claimed == 0
    ticks.now = floors.seconds  # expired: the search starts from the earliest again
    assert (await firing.run_once(aconn, (NS,), at(22), floors=floors)).claimed == 1
    _due_at(conn, a=6)
    assert floors.offer([NS])[0] == [at(5)]
    floors.forget()
    assert (await firing.run_once(aconn, (NS,), at(23), floors=floors)).claimed == 1


@given(st.lists(st.sampled_from(["offer", "note", "forget", "tick"]), max_size=30))
def test_floors_offer_only_what_a_claim_begun_since_the_last_forget_found_within_its_life(
    steps: list[str],
) -> None:
    """Against a model: a floor is offered only if noted by a claim begun after the last
    forget and less than ``seconds`` ago; a claim begun before a forget notes nothing."""
    ticks = Ticks()
    floors = DueFloors(seconds=1.0, monotonic=ticks)
    model: dict[str, tuple[Any, float]] = {}
    forgotten = float("-inf")
    begun: list[float] = []
    for n, step in enumerate(steps):
        if step == "tick":
            ticks.now += 0.4
        elif step == "forget":
            floors.forget()
            model.clear()
            forgotten = ticks.now
        elif step == "offer":
            offered, claimed_at = floors.offer([NS])
            expected = model.get(NS)
            fresh = expected is not None and ticks.now - expected[1] < 1.0
            assert offered == [expected[0] if fresh else None]
            begun.append(claimed_at)
        elif begun:
            claimed_at = begun.pop(0)
            row = schedules_db.DueSchedule(NS, "s", 1, at(n), None, None, 0, "k", at(n), at(n))
            floors.note([row], claimed_at)
            if claimed_at > forgotten:
                model[NS] = (at(n), claimed_at)


def test_a_claim_offered_its_floor_reads_none_of_the_entries_fired_below_it(
    app: tickwork.App, conn: psycopg.Connection[Any]
) -> None:
    """5,000 schedules of a namespace due one millisecond apart, all but the last 10 fired:
    their old entries (marked dead by one walk) still cost a claim from the earliest a step
    over each, which the floor a claim found saves."""
    app.sync_schedules(NS, [every("s0000000", 3600)], owner="t")
    conn.execute(
        "INSERT INTO tickwork.schedules (namespace, name, revision, spec, next_run_at,"
        " created_at, updated_at)"
        " SELECT t.namespace, 's' || lpad(i::text, 7, '0'), t.revision, t.spec,"
        "        t.next_run_at, t.created_at, t.updated_at"
        " FROM generate_series(1, 4999) AS i, tickwork.schedules t WHERE t.namespace = %s",
        (NS,),
    )
    conn.execute(
        "UPDATE tickwork.schedules"
        " SET next_run_at = %s + substr(name, 2)::integer * interval '1 ms' WHERE namespace = %s",
        (at(0), NS),
    )
    conn.execute(
        "UPDATE tickwork.schedules SET next_run_at = next_run_at + interval '1 hour'"
        " WHERE namespace = %s AND name < 's0004990'",
        (NS,),
    )
    floor = store.run(conn, schedules_db.claim_due([NS], 1, at(10)))[0].due_floor
    assert floor == at(4.990)
    without = explain.op_buffers(conn, schedules_db.claim_due([NS], 1, at(10)))
    offered = explain.op_buffers(conn, schedules_db.claim_due([NS], 1, at(10), floors=[floor]))
    assert offered < 20 < without, (offered, without)
