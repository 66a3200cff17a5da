"""Workers share out the namespaces they fire (maintenance/firing/shares.py). Every namespace
offered is dealt to exactly one of the live workers offering it, evenly, and every worker
seeing the same fleet deals the same hands. A pass fires its own share first. It fires the
others' due schedules once a claim of its own comes back short, or with its own when they
are ``share_wait`` seconds overdue, so a share whose worker stopped is never left unfired."""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from typing import Any

import psycopg
from hypothesis import given
from hypothesis import strategies as st

import tickwork
from tests.support.schedule_helpers import at, every, jobs
from tickwork.db import connections, store
from tickwork.db import workers as workers_db
from tickwork.db.workers import LiveWorker
from tickwork.maintenance import firing
from tickwork.maintenance.firing.shares import waits

WAIT = 10.0

fleets = st.dictionaries(
    st.sampled_from([f"w{i}" for i in range(6)]),
    st.sets(st.sampled_from([f"ns-{i}" for i in range(12)]), max_size=12),
    min_size=1,
)


def _live(fleet: dict[str, set[str]]) -> list[LiveWorker]:
    return [LiveWorker(name, sorted(offered), [], []) for name, offered in fleet.items()]


@given(fleets)
def test_each_namespace_offered_is_the_share_of_exactly_one_worker_offering_it(
    fleet: dict[str, set[str]],
) -> None:
    live = _live(fleet)
    owners: dict[str, list[str]] = {}
    for name, offered in fleet.items():
        namespaces = sorted(offered)
        for ns, wait in zip(namespaces, waits(name, namespaces, live, WAIT), strict=True):
            assert wait in (0.0, WAIT)
            if wait == 0.0:
                owners.setdefault(ns, []).append(name)
    offered_by_anyone = set().union(*fleet.values())
    assert set(owners) == offered_by_anyone
    assert all(len(names) == 1 for names in owners.values()), owners
    # Namespaces offered by the same workers are dealt evenly among them.
    groups: dict[frozenset[str], Counter[str]] = {}
    for ns, (owner,) in owners.items():
        offering = frozenset(name for name, offered in fleet.items() if ns in offered)
        groups.setdefault(offering, Counter())[owner] += 1
    for offering, dealt in groups.items():
        counts = [dealt[name] for name in offering]
        assert max(counts) - min(counts) <= 1, (offering, dealt)


@given(fleets, st.integers(1, 4))
def test_the_passes_of_a_worker_deal_its_share_among_themselves(
    fleet: dict[str, set[str]], parts: int
) -> None:
    me = sorted(fleet)[0]
    namespaces, live = sorted(fleet[me]), _live(fleet)

    def mine(part: tuple[int, int]) -> set[str]:
        dealt = waits(me, namespaces, live, WAIT, part)
        return {ns for ns, wait in zip(namespaces, dealt, strict=True) if wait == 0.0}

    share = mine((0, 1))
    dealt = [mine((i, parts)) for i in range(parts)]
    assert set().union(*dealt) == share
    assert sum(len(part) for part in dealt) == len(share)
    assert max(map(len, dealt)) - min(map(len, dealt)) <= 1


@given(fleets, st.sampled_from([f"w{i}" for i in range(6, 9)]))
def test_a_worker_not_yet_seen_counts_itself(fleet: dict[str, set[str]], newcomer: str) -> None:
    namespaces = sorted(set().union(*fleet.values())) or ["ns-0"]
    mine = waits(newcomer, namespaces, _live(fleet), WAIT)
    alone = [ns for ns in namespaces if not any(ns in offered for offered in fleet.values())]
    assert all(mine[namespaces.index(ns)] == 0.0 for ns in alone)
    joined = {**fleet, newcomer: set(namespaces)}
    assert mine == waits(newcomer, namespaces, _live(joined), WAIT)


async def _register(aconn: psycopg.AsyncConnection[Any], name: str, namespaces: list[str]) -> None:
    await store.arun(
        aconn,
        workers_db.register_worker(
            name=name,
            queues=[],
            kinds=[],
            namespaces=namespaces,
            concurrency=1,
            host="test",
            pid=1,
            now=at(0),
        ),
    )


async def _fire_as_w1(
    aconn: psycopg.AsyncConnection[Any],
    conn: psycopg.Connection[Any],
    namespaces: list[str],
    ns_b_due: datetime,
) -> tuple[firing.Shares, firing.FireReport]:
    """ns-b's schedules due at ``ns_b_due``; "w1" is dealt ns-a and "w2" ns-b, w2 registered
    and never firing (stopped); one pass of w1 at 60 s in batches of 2."""
    conn.execute(
        "UPDATE tickwork.schedules SET next_run_at = %s WHERE namespace = 'ns-b'", (ns_b_due,)
    )
    conn.commit()
    await _register(aconn, "w1", namespaces)
    await _register(aconn, "w2", namespaces)
    config = firing.FiringConfig(batch=2, share_wait=WAIT)
    shares = firing.Shares("w1", namespaces, ttl=60, wait=WAIT, refresh=60)
    return shares, await firing.Firing(namespaces, config, shares).run_once(aconn, at(60))


def _order(conn: psycopg.Connection[Any]) -> list[str]:
    """The namespace of each job, in the order the jobs were inserted."""
    return [r[0] for r in conn.execute("SELECT schedule_namespace FROM tickwork.jobs ORDER BY id")]


async def test_a_pass_fires_its_share_first_then_a_stopped_workers_share(
    app: tickwork.App, aconn: psycopg.AsyncConnection[Any], conn: psycopg.Connection[Any]
) -> None:
    namespaces = ["ns-a", "ns-b"]
    for ns in namespaces:
        app.sync_schedules(ns, [every(f"s{i}", 60) for i in range(5)])
    # ns-b's are due first, but by less than the wait.
    shares, report = await _fire_as_w1(aconn, conn, namespaces, ns_b_due=at(55))

    assert shares.dealt.whole == (0.0, WAIT)
    assert report.fired == 10  # nothing of the stopped worker's share is left
    order = _order(conn)
    assert order == ["ns-a"] * 5 + ["ns-b"] * 5, "its own share first, then the others'"
    assert len(jobs(conn)) == 10


async def test_the_others_share_overdue_by_the_wait_is_claimed_with_its_own(
    app: tickwork.App, aconn: psycopg.AsyncConnection[Any], conn: psycopg.Connection[Any]
) -> None:
    namespaces = ["ns-a", "ns-b"]
    app.sync_schedules("ns-a", [every(f"s{i}", 60) for i in range(4)])
    app.sync_schedules("ns-b", [every("late", 60)])
    await _fire_as_w1(aconn, conn, namespaces, ns_b_due=at(30))

    # ns-b's schedule was 30 s overdue, more than the wait: the first batch, earliest first.
    assert _order(conn)[0] == "ns-b"
    assert len(_order(conn)) == 5


async def test_a_share_dealt_to_a_worker_gone_quiet_is_dealt_again(
    app: tickwork.App, aconn: psycopg.AsyncConnection[Any], conn: psycopg.Connection[Any]
) -> None:
    namespaces = ["ns-a", "ns-b"]
    await _register(aconn, "w1", namespaces)
    await _register(aconn, "w2", namespaces)
    shares = firing.Shares("w1", namespaces, ttl=60, wait=WAIT, refresh=0)
    assert (await shares.update(aconn, at(30))).whole == (0.0, WAIT)
    # w2 has not been seen for longer than the ttl: w1 counts only itself.
    assert (await shares.update(aconn, at(61))).whole == (0.0, 0.0)


async def test_a_backlog_is_fired_by_passes_on_connections_of_their_own(
    app: tickwork.App,
    aconn: psycopg.AsyncConnection[Any],
    conn: psycopg.Connection[Any],
    database_url: str,
) -> None:
    namespaces = [f"ns-{i}" for i in range(4)]
    for ns in namespaces:
        app.sync_schedules(ns, [every(f"s{i}", 60) for i in range(5)])
    config = firing.FiringConfig(batch=2, connections=2)
    shares = firing.Shares("w1", namespaces, ttl=60, wait=WAIT, refresh=60, parts=2)
    pool = connections.async_pool(database_url, min_size=1, max_size=3)
    await pool.open(wait=True)
    try:
        async with pool.connection() as first:
            report = await firing.Firing(namespaces, config, shares, pool).run_once(first, at(60))
        opened = pool.get_stats()["connections_num"]
    finally:
        await pool.close()

    assert shares.dealt.parts == ((0.0, WAIT, 0.0, WAIT), (WAIT, 0.0, WAIT, 0.0))
    assert opened == 2, "the backlog's second pass took a connection of its own"
    assert report.claimed == report.fired == 20
    fired = conn.execute(
        "SELECT count(*), count(DISTINCT (schedule_namespace, schedule_name)) FROM tickwork.jobs"
    ).fetchone()
    assert fired == (20, 20)
