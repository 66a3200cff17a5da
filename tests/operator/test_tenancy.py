"""A Kubernetes namespace is a tenant: two tenants attack each other through the real operator
(kmock) and a real database, and each attack is refused with a reason and a Warning Event while
the victim's definition stays byte for byte what it was (spec jsonb and revision) and fires.

Attacks: another namespace as ``spec.scheduleNamespace`` (with the victim's own name, the
namespace sorting first: the report that started this), the same name in a schedule namespace
both may use (the newcomer loses, whatever its namespace's name), and a queue, kind, priority
or concurrency key beyond the tenant's TenantPolicy. A policy change re-evaluates what it
covers; a restart never applies a partial set of policies.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import psycopg

from tests.operator.harness import DEADLINE, Cluster, OperatorFactory, row
from tests.support.helpers import wait_until
from tickwork.maintenance import firing

VICTIM: dict[str, Any] = {
    "schedule": "*/5 * * * *",
    "job": {"kind": "team-b.report", "queue": "team-b-reports", "payload": {"to": "b"}},
}
ATTACK: dict[str, Any] = {
    "schedule": "* * * * *",
    "job": {"kind": "team-b.payout", "queue": "team-b-payments", "priority": 32767},
}


def stored(url: str, namespace: str, name: str) -> tuple[Any, int, bool] | None:
    """(spec jsonb, revision, enabled) of a definition."""
    found = row(url, name, namespace)
    return None if found is None else (found["spec"], found["revision"], found["enabled"])


def warnings(cluster: Cluster, namespace: str, name: str) -> list[tuple[str, str]]:
    return [
        (event["reason"], event["message"])
        for event in cluster.events(name)
        if event.get("type") == "Warning"
        and event.get("involvedObject", {}).get("namespace") == namespace
    ]


async def refused(cluster: Cluster, namespace: str, name: str, reason: str) -> str:
    """Wait for Ready=False ``reason`` and its Warning Event; returns the message."""
    body = await cluster.wait_ready(name, reason, namespace=namespace)
    (condition,) = [c for c in body["status"]["conditions"] if c["type"] == "Ready"]
    assert condition["status"] == "False"
    message = str(condition["message"])
    await wait_until(
        lambda: (reason, message) in warnings(cluster, namespace, name),
        timeout=DEADLINE,
        what=f"a Warning Event {reason} for {namespace}/{name}",
    )
    assert "revision" not in body["status"], "no facts of another tenant's definition"
    return message


async def fires(url: str, namespace: str, name: str) -> dict[str, Any]:
    """One firing pass of ``namespace`` at the schedule's next run: its job."""
    found = row(url, name, namespace)
    assert found is not None and found["next_run_at"] is not None
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await firing.run_once(conn, [namespace], found["next_run_at"] + timedelta(seconds=1))
        cursor = await conn.execute(
            "SELECT kind, queue, priority FROM tickwork.jobs"
            " WHERE schedule_namespace = %s AND schedule_name = %s",
            (namespace, name),
        )
        jobs = await cursor.fetchall()
    assert len(jobs) == 1, jobs
    return {"kind": jobs[0][0], "queue": jobs[0][1], "priority": jobs[0][2]}


async def test_another_namespace_as_target_is_refused_and_the_victim_keeps_firing(
    cluster: Cluster, start_operator: OperatorFactory, database_url: str
) -> None:
    await start_operator()
    await cluster.create("nightly", VICTIM, namespace="team-b")
    await cluster.wait_ready("nightly", "Synced", namespace="team-b")
    before = stored(database_url, "team-b", "nightly")

    # dev-sandbox sorts before team-b: on the old code its object replaced team-b's.
    await cluster.create("nightly", {**ATTACK, "scheduleNamespace": "team-b"}, "dev-sandbox")
    await cluster.create("other", {**ATTACK, "scheduleNamespace": "team-b"}, "dev-sandbox")
    message = await refused(cluster, "dev-sandbox", "nightly", "NamespaceNotAllowed")
    assert message.startswith(
        "spec.scheduleNamespace: schedule namespace 'team-b' is not allowed for namespace "
        "dev-sandbox by the default policy"
    ), message
    await refused(cluster, "dev-sandbox", "other", "NamespaceNotAllowed")

    assert row(database_url, "other", "team-b") is None
    assert stored(database_url, "team-b", "nightly") == before
    assert (cluster.ready("nightly", "team-b") or {}).get("reason") == "Synced"
    assert await fires(database_url, "team-b", "nightly") == {
        "kind": "team-b.report",
        "queue": "team-b-reports",
        "priority": 0,
    }

    # The refused object deletes at once and disables nothing of team-b's.
    await cluster.delete("nightly", namespace="dev-sandbox")
    await wait_until(lambda: cluster.get("nightly", "dev-sandbox") is None, what="deleted")
    assert stored(database_url, "team-b", "nightly") == before


async def test_the_same_name_in_a_shared_namespace_never_replaces_the_one_in_place(
    cluster: Cluster, start_operator: OperatorFactory, database_url: str
) -> None:
    await cluster.create_policy(
        "shared", {"namespaces": ["team-*"], "scheduleNamespaces": ["shared", "team-*"]}
    )
    await start_operator()
    # team-z's object is in place first; team-a sorts first and comes later: it loses.
    await cluster.create("nightly", {**VICTIM, "scheduleNamespace": "shared"}, "team-z")
    await cluster.wait_ready("nightly", "Synced", namespace="team-z")
    before = stored(database_url, "shared", "nightly")
    await cluster.create("nightly", {**ATTACK, "scheduleNamespace": "shared"}, "team-a")
    message = await refused(cluster, "team-a", "nightly", "NameConflict")
    assert "from the Schedule in namespace 'team-z'" in message, message

    # Allowed into team-b by the policy, team-a still cannot replace team-b's own schedule.
    await cluster.create("report", {**VICTIM, "scheduleNamespace": "team-b"}, "team-a")
    await cluster.wait_ready("report", "Synced", namespace="team-a")
    await cluster.create("report", VICTIM, namespace="team-b")
    await cluster.wait_ready("report", "Synced", namespace="team-b")
    await refused(cluster, "team-a", "report", "NameConflict")
    await cluster.create("nightly", ATTACK, namespace="team-b")  # its own: no conflict
    await cluster.wait_ready("nightly", "Synced", namespace="team-b")

    assert stored(database_url, "shared", "nightly") == before
    assert (await fires(database_url, "shared", "nightly"))["kind"] == "team-b.report"
    assert (cluster.ready("nightly", "team-z") or {}).get("reason") == "Synced"

    # The loser deletes without disabling the winner's definition.
    await cluster.delete("nightly", namespace="team-a")
    await wait_until(lambda: cluster.get("nightly", "team-a") is None, what="deleted")
    assert stored(database_url, "shared", "nightly") == before


async def test_job_fields_beyond_the_tenant_policy_are_refused_naming_field_and_rule(
    cluster: Cluster, start_operator: OperatorFactory, database_url: str
) -> None:
    await cluster.create_policy(
        "team-a",
        {
            "namespaces": ["team-a"],
            "queues": ["team-a-*"],
            "kinds": ["team-a.*"],
            "maxPriority": 10,
            "concurrencyKeyPrefix": "team-a:",
        },
    )
    await start_operator()
    await cluster.create(
        "nightly", {**VICTIM, "job": {**VICTIM["job"], "concurrencyKey": "b"}}, "team-b"
    )
    await cluster.wait_ready("nightly", "Synced", namespace="team-b")
    before = stored(database_url, "team-b", "nightly")
    good = {"kind": "team-a.sweep", "queue": "team-a-batch", "priority": 10}
    attacks = {
        "queue": (
            {"queue": "team-b-reports"},
            "spec.job.queue: queue 'team-b-reports'",
            "team-a-*",
        ),
        "kind": ({"kind": "team-b.report"}, "spec.job.kind: kind 'team-b.report'", "team-a.*"),
        "priority": ({"priority": 11}, "spec.job.priority: priority 11", "at most 10"),
        "key": (
            {"concurrencyKey": "b"},
            "spec.job.concurrencyKey: concurrency key 'b'",
            "keys starting with 'team-a:'",
        ),
    }
    await cluster.create("good", {"every": "1m", "job": good}, namespace="team-a")
    for name, (change, _, _) in attacks.items():
        await cluster.create(name, {"every": "1m", "job": {**good, **change}}, namespace="team-a")
    await cluster.wait_ready("good", "Synced", namespace="team-a")
    for name, (_, start, allowed) in attacks.items():
        message = await refused(cluster, "team-a", name, "PolicyViolation")
        assert message == (
            f"{start} is not allowed for namespace team-a by TenantPolicy 'team-a' "
            f"(allowed: {allowed})"
        ), message
        assert row(database_url, name, "team-a") is None
    assert stored(database_url, "team-b", "nightly") == before
    assert (await fires(database_url, "team-b", "nightly"))["queue"] == "team-b-reports"


async def test_a_policy_change_re_evaluates_and_a_restart_applies_every_policy(
    cluster: Cluster, start_operator: OperatorFactory, database_url: str
) -> None:
    await cluster.create_policy(
        "reports", {"namespaces": ["team-a"], "scheduleNamespaces": ["reports"]}
    )
    operator = await start_operator()
    await cluster.create("weekly", {**VICTIM, "scheduleNamespace": "reports"}, "team-a")
    await cluster.wait_ready("weekly", "Synced", namespace="team-a")
    synced = stored(database_url, "reports", "weekly")
    assert synced is not None and synced[1:] == (1, True)

    # A restart: no sync before the policy is known, so nothing is disabled, not for a moment.
    await operator.stop()
    operator = await start_operator()
    await cluster.create("marker", VICTIM, namespace="team-a")
    await cluster.wait_ready("marker", "Synced", namespace="team-a")
    assert stored(database_url, "reports", "weekly") == synced

    # The policy goes: the mapping is refused and its definition disabled; it comes back.
    await cluster.delete_policy("reports")
    await refused(cluster, "team-a", "weekly", "NamespaceNotAllowed")
    await wait_until(
        lambda: stored(database_url, "reports", "weekly") == (synced[0], 2, False),
        what="the refused mapping's definition disabled",
    )
    await cluster.create_policy(
        "reports", {"namespaces": ["team-a"], "scheduleNamespaces": ["reports"]}
    )
    await cluster.wait_ready("weekly", "Synced", namespace="team-a")
    assert stored(database_url, "reports", "weekly") == (synced[0], 3, True)
