"""``TenantPolicy.spec.maxRunning`` and ``spec.weight``: the flow rules of the schedule
namespaces a policy governs, from kubectl. The real operator (kopf) runs against kmock
standing in for the API server, with a real PostgreSQL: the operator writes each governed
namespace's rule to ``tickwork.flow_rules`` through the audited flow code, set by the policy's
actor; the smaller ``maxRunning`` of two policies wins; changing or removing the fields (or the
policy) changes or removes the rule; a rule a person set is never touched; nothing changed
writes no audit record."""

from __future__ import annotations

from typing import Any

import psycopg

import tickwork
from tests.operator.harness import DEADLINE, Cluster, OperatorFactory
from tests.support.helpers import wait_until

HOURLY: dict[str, Any] = {"every": "1h", "job": {"kind": "k"}}
PREFIX = "operator:default/tenantpolicy/"


def rule(url: str, namespace: str) -> tuple[int | None, int | None, str] | None:
    """(max_running, weight, set_by) of the namespace's flow rule (None: it has none)."""
    with psycopg.connect(url) as conn:
        found = conn.execute(
            "SELECT max_running, weight, set_by FROM tickwork.flow_rules"
            " WHERE scope = 'namespace' AND name = %s",
            (namespace,),
        ).fetchone()
    return None if found is None else (found[0], found[1], str(found[2]))


def audit(url: str, namespace: str) -> list[tuple[str, str, str | None]]:
    """(action, actor, reason) of the limit records of ``namespace``, oldest first."""
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT action, actor, reason FROM tickwork.audit_log"
            " WHERE target = %s AND action IN ('limit', 'unlimit') ORDER BY id",
            (f"namespace:{namespace}",),
        ).fetchall()
    return [(str(a), str(b), c) for a, b, c in rows]


async def wait_rule(
    url: str, namespace: str, wanted: tuple[int | None, int | None, str] | None
) -> None:
    await wait_until(
        lambda: rule(url, namespace) == wanted,
        timeout=DEADLINE,
        what=f"schedule namespace {namespace} with rule {wanted}",
    )


async def test_max_running_and_weight_become_the_rules_of_the_governed_namespaces(
    cluster: Cluster, start_operator: OperatorFactory, database_url: str
) -> None:
    await cluster.create_policy(
        "quota", {"namespaces": ["team-a"], "scheduleNamespaces": ["team-a-batch"]}
    )
    await start_operator()
    await cluster.create("nightly", HOURLY, namespace="team-a")
    await cluster.create("batch", {**HOURLY, "scheduleNamespace": "team-a-batch"}, "team-a")
    await cluster.create("other", HOURLY, namespace="team-b")  # not governed: never limited
    for name, namespace in [("nightly", "team-a"), ("batch", "team-a"), ("other", "team-b")]:
        await cluster.wait_ready(name, "Synced", namespace=namespace)
    assert rule(database_url, "team-a") is None

    await cluster.patch_policy("quota", {"maxRunning": 5, "weight": 3})
    await wait_rule(database_url, "team-a", (5, 3, PREFIX + "quota"))
    await wait_rule(database_url, "team-a-batch", (5, 3, PREFIX + "quota"))
    assert rule(database_url, "team-b") is None
    assert audit(database_url, "team-a") == [
        ("limit", PREFIX + "quota", "TenantPolicy 'quota' orders it")
    ]

    # Resyncs and unrelated changes re-audit nothing.
    await cluster.create("later", HOURLY, namespace="team-a")
    await cluster.patch_policy("quota", {"maxPriority": 5})
    await cluster.create("marker", HOURLY, namespace="team-b")
    await cluster.wait_ready("later", "Synced", namespace="team-a")
    await cluster.wait_ready("marker", "Synced", namespace="team-b")
    assert len(audit(database_url, "team-a")) == 1

    # A second policy governing team-a with a smaller maxRunning wins; removed, the first's
    # value is back.
    await cluster.create_policy("tight", {"namespaces": ["team-a"], "maxRunning": 2})
    await wait_rule(database_url, "team-a", (2, 3, PREFIX + "tight"))
    assert rule(database_url, "team-a-batch") == (5, 3, PREFIX + "quota")
    await cluster.delete_policy("tight")
    await wait_rule(database_url, "team-a", (5, 3, PREFIX + "quota"))

    # A changed value changes the rule; the fields removed (null in a merge patch), the rule
    # goes; then the policy deleted with a rule: it goes too.
    await cluster.patch_policy("quota", {"maxRunning": 8})
    await wait_rule(database_url, "team-a", (8, 3, PREFIX + "quota"))
    await cluster.patch_policy("quota", {"maxRunning": None, "weight": None})
    await wait_rule(database_url, "team-a", None)
    await wait_rule(database_url, "team-a-batch", None)
    assert [action for action, _, _ in audit(database_url, "team-a")][-1] == "unlimit"
    assert audit(database_url, "team-a")[-1][2] == "TenantPolicy 'quota' no longer limits it"
    await cluster.patch_policy("quota", {"weight": 7})
    await wait_rule(database_url, "team-a", (None, 7, PREFIX + "quota"))
    await cluster.delete_policy("quota")
    await wait_rule(database_url, "team-a", None)


async def test_a_rule_a_person_set_is_never_changed_nor_removed_by_a_policy(
    cluster: Cluster, start_operator: OperatorFactory, database_url: str
) -> None:
    await cluster.create_policy("quota", {"namespaces": ["team-a", "team-b"]})
    await start_operator()
    for namespace in ("team-a", "team-b"):
        await cluster.create("nightly", HOURLY, namespace=namespace)
        await cluster.wait_ready("nightly", "Synced", namespace=namespace)
    app = tickwork.App(database_url)
    try:
        app.set_limit("namespace", "team-b", max_running=50, actor="alice", reason="load test")

        # The policy limits team-a (the signal that it was applied); team-b stays alice's.
        await cluster.patch_policy("quota", {"maxRunning": 4})
        await wait_rule(database_url, "team-a", (4, None, PREFIX + "quota"))
        assert rule(database_url, "team-b") == (50, None, "alice")

        await cluster.patch_policy("quota", {"maxRunning": None})
        await wait_rule(database_url, "team-a", None)
        assert rule(database_url, "team-b") == (50, None, "alice")
        assert audit(database_url, "team-b") == [("limit", "alice", "load test")]

        # alice takes over team-a's rule: it is hers from then on.
        await cluster.patch_policy("quota", {"maxRunning": 4})
        await wait_rule(database_url, "team-a", (4, None, PREFIX + "quota"))
        app.set_limit("namespace", "team-a", max_running=9, actor="alice")
        await cluster.delete_policy("quota")
        await cluster.create("marker", HOURLY, namespace="team-b")
        await cluster.wait_ready("marker", "Synced", namespace="team-b")
        assert rule(database_url, "team-a") == (9, None, "alice")
    finally:
        app.close()


async def test_a_policy_deleted_while_the_operator_was_down_loses_its_rules_at_the_start(
    cluster: Cluster, start_operator: OperatorFactory, database_url: str
) -> None:
    await cluster.create_policy("quota", {"namespaces": ["team-a"], "maxRunning": 3})
    first = await start_operator()
    await cluster.create("nightly", HOURLY, namespace="team-a")
    await wait_rule(database_url, "team-a", (3, None, PREFIX + "quota"))
    await first.stop()

    await cluster.delete_policy("quota")
    await start_operator()
    await wait_rule(database_url, "team-a", None)
    assert [action for action, _, _ in audit(database_url, "team-a")] == ["limit", "unlimit"]
