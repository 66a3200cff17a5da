"""Tenant policy, pure (src/tickwork/schedules/tenancy.py): the default, globs, prefixes,
ceilings and several policies at once, over large input spaces (hypothesis); documents read
strictly, naming the field, as the CRD's schema reads them; a broken policy fails closed."""

from __future__ import annotations

import fnmatch
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.schedules.test_crd import CRDS, to_json_schema
from tickwork.schedules.container_policy import ContainerRules
from tickwork.schedules.definition import ScheduleDefinition
from tickwork.schedules.options import JobTemplate
from tickwork.schedules.tenancy import (
    NAMESPACE_NOT_ALLOWED,
    POLICY_VIOLATION,
    Limit,
    PolicyError,
    TenantPolicy,
    check,
    held,
    limited,
    load,
    parse,
    pause_actor,
    pausing_policy,
    policy_of,
)

CRD = yaml.safe_load((CRDS / "tenantpolicies.tickwork.io.yaml").read_text())
SCHEMA = to_json_schema(CRD["spec"]["versions"][0]["schema"]["openAPIV3Schema"])

names = st.text("abz-.:*", min_size=1, max_size=8)
"""Values and patterns from a small alphabet (glob characters included), so matches happen."""
literals = st.text("abz-.:", min_size=1, max_size=8)


def definition(
    queue: str = "default", kind: str = "k", priority: int = 0, key: str | None = None
) -> ScheduleDefinition:
    job = JobTemplate(kind=kind, queue=queue, priority=priority, concurrency_key=key)
    return ScheduleDefinition(name="s", job=job, every=None, schedule="* * * * *")


def document(spec: Any, name: str = "p") -> dict[str, Any]:
    metadata = {"name": name}
    return {
        "apiVersion": "tickwork.io/v1",
        "kind": "TenantPolicy",
        "metadata": metadata,
        "spec": spec,
    }


# --- the default and targets ----------------------------------------------------------------


@given(tenant=literals, target=literals, queue=names, priority=st.integers(0, 32767))
def test_without_a_policy_only_the_own_namespace_and_everything_else_goes(
    tenant: str, target: str, queue: str, priority: int
) -> None:
    refusal = check(tenant, target, definition(queue, priority=priority), [])
    if target == tenant:
        assert refusal is None
    else:
        assert refusal is not None and refusal.reason == NAMESPACE_NOT_ALLOWED
        assert refusal.message.startswith(
            f"spec.scheduleNamespace: schedule namespace {target!r} is not allowed for "
            f"namespace {tenant} by the default policy"
        )


@given(tenant=literals, target=literals, patterns=st.lists(names, max_size=3))
def test_another_target_needs_the_policy_to_allow_it(
    tenant: str, target: str, patterns: list[str]
) -> None:
    policy = TenantPolicy("p", (tenant,), schedule_namespaces=tuple(patterns))
    refusal = check(tenant, target, None, [policy])
    allowed = target == tenant or any(fnmatch.fnmatchcase(target, p) for p in patterns)
    assert (refusal is None) == allowed
    if refusal is not None:
        assert refusal.reason == NAMESPACE_NOT_ALLOWED and "TenantPolicy 'p'" in refusal.message


def test_a_policy_covers_by_name_or_pattern_only() -> None:
    policy = TenantPolicy("teams", ("team-*", "ops"), queues=("q",))
    assert policy.covers("team-a") and policy.covers("ops")
    assert not policy.covers("ops-2") and not policy.covers("dev-team-a")
    assert check("dev-team-a", "dev-team-a", definition("other"), [policy]) is None


# --- job fields -----------------------------------------------------------------------------


@given(prefix=literals, queue=names)
def test_a_prefix_glob_allows_exactly_the_queues_with_that_prefix(prefix: str, queue: str) -> None:
    policy = TenantPolicy("team-a", ("team-a",), queues=(prefix + "*",))
    refusal = check("team-a", "team-a", definition(queue), [policy])
    assert (refusal is None) == queue.startswith(prefix)
    if refusal is not None:
        assert refusal.reason == POLICY_VIOLATION
        assert refusal.message == (
            f"spec.job.queue: queue {queue!r} is not allowed for namespace team-a by "
            f"TenantPolicy 'team-a' (allowed: {prefix}*)"
        )


@given(pattern=literals, kind=literals)
def test_a_pattern_without_glob_characters_allows_only_itself(pattern: str, kind: str) -> None:
    policy = TenantPolicy("p", ("ns",), kinds=(pattern,))
    assert (check("ns", "ns", definition(kind=kind), [policy]) is None) == (kind == pattern)


@given(priority=st.integers(0, 32767), ceiling=st.integers(0, 32767))
def test_the_priority_ceiling(priority: int, ceiling: int) -> None:
    policy = TenantPolicy("p", ("ns",), max_priority=ceiling)
    refusal = check("ns", "ns", definition(priority=priority), [policy])
    assert (refusal is None) == (priority <= ceiling)
    if refusal is not None:
        assert refusal.message.startswith(f"spec.job.priority: priority {priority} is not allowed")
        assert refusal.message.endswith(f"(allowed: at most {ceiling})")


@given(prefix=literals, key=st.none() | names)
def test_the_concurrency_key_prefix(prefix: str, key: str | None) -> None:
    policy = TenantPolicy("p", ("ns",), concurrency_key_prefix=prefix)
    refusal = check("ns", "ns", definition(key=key), [policy])
    assert (refusal is None) == (key is None or key.startswith(prefix))
    if refusal is not None:
        assert refusal.message.startswith(f"spec.job.concurrencyKey: concurrency key {key!r}")


policies = st.builds(
    TenantPolicy,
    name=literals,
    namespaces=st.tuples(names),
    schedule_namespaces=st.lists(names, max_size=2).map(tuple),
    queues=st.none() | st.lists(names, max_size=2).map(tuple),
    kinds=st.none() | st.lists(names, max_size=2).map(tuple),
    max_priority=st.none() | st.integers(0, 20),
    concurrency_key_prefix=st.none() | literals,
)


@settings(max_examples=300)
@given(
    some=st.lists(policies, max_size=3),
    more=st.lists(policies, min_size=1, max_size=2),
    tenant=literals,
    target=literals,
    queue=names,
    kind=names,
    priority=st.integers(0, 30),
    key=st.none() | names,
)
def test_adding_policies_never_allows_more(
    some: list[TenantPolicy],
    more: list[TenantPolicy],
    tenant: str,
    target: str,
    queue: str,
    kind: str,
    priority: int,
    key: str | None,
) -> None:
    """Once a policy covers a tenant, every covering policy must allow a Schedule: more policies
    only refuse more. (Without one, the default policy applies, which a first policy may widen:
    it can allow another schedule namespace.)"""
    schedule = definition(queue, kind, priority, key)
    covered = any(p.covers(tenant) for p in some)
    if covered and check(tenant, target, schedule, some) is not None:
        assert check(tenant, target, schedule, some + more) is not None
    # and the rule is per policy: allowed by all of them == allowed by each covering one
    allowed_by_each = all(
        check(tenant, target, schedule, [p]) is None for p in some if p.covers(tenant)
    )
    if any(p.covers(tenant) for p in some):
        assert (check(tenant, target, schedule, some) is None) == allowed_by_each


# --- documents ------------------------------------------------------------------------------


FULL = {
    "namespaces": ["team-a"],
    "scheduleNamespaces": ["reports-*"],
    "queues": ["team-a-*"],
    "kinds": ["team-a.*"],
    "maxPriority": 10,
    "concurrencyKeyPrefix": "team-a:",
    "containers": {
        "allowedImagePrefixes": ["registry.example.com/team-a/"],
        "allowPrivileged": True,
    },
    "paused": True,
    "pausedReason": "incident 42",
    "maxRunning": 20,
    "weight": 3,
}


def test_a_full_document_reads_as_written() -> None:
    assert parse(document(FULL, "team-a")) == TenantPolicy(
        "team-a",
        ("team-a",),
        schedule_namespaces=("reports-*",),
        queues=("team-a-*",),
        kinds=("team-a.*",),
        max_priority=10,
        concurrency_key_prefix="team-a:",
        containers=ContainerRules(("registry.example.com/team-a/",), allow_privileged=True),
        paused=True,
        paused_reason="incident 42",
        max_running=20,
        weight=3,
    )


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({}, "spec.namespaces: is required"),
        ({"namespaces": []}, "spec.namespaces: is required"),
        ({"namespaces": "team-a"}, "spec.namespaces: must be a list"),
        ({"namespaces": ["a"], "queues": [""]}, "spec.queues: must be a list"),
        ({"namespaces": ["a"], "kinds": ["a\x00"]}, "spec.kinds: must be a list"),
        ({"namespaces": ["a"], "maxPriority": True}, "spec.maxPriority: must be an integer"),
        ({"namespaces": ["a"], "maxPriority": 40000}, "spec.maxPriority: must be an integer"),
        ({"namespaces": ["a"], "concurrencyKeyPrefix": ""}, "spec.concurrencyKeyPrefix: must"),
        ({"namespaces": ["a"], "tenant": "me"}, "spec.tenant: unknown field"),
        ({"namespaces": ["a"], "paused": "yes"}, "spec.paused: must be true or false"),
        ({"namespaces": ["a"], "pausedReason": ""}, "spec.pausedReason: must be a string"),
        ({"namespaces": ["a"], "pausedReason": "x" * 1001}, "spec.pausedReason: must be"),
        ({"namespace": ["a"]}, "spec.namespace: unknown field (did you mean `namespaces`?)"),
        ({"namespaces": ["a"], "maxRunning": 0}, "spec.maxRunning: must be an integer from 1 to"),
        ({"namespaces": ["a"], "maxRunning": -1}, "spec.maxRunning: must be an integer from 1"),
        ({"namespaces": ["a"], "maxRunning": 10**12}, "spec.maxRunning: must be an integer"),
        ({"namespaces": ["a"], "maxRunning": 100001}, "spec.maxRunning: must be an integer"),
        ({"namespaces": ["a"], "maxRunning": float("nan")}, "spec.maxRunning: must be an"),
        ({"namespaces": ["a"], "maxRunning": 2.5}, "spec.maxRunning: must be an integer"),
        ({"namespaces": ["a"], "maxRunning": "5"}, "spec.maxRunning: must be an integer"),
        ({"namespaces": ["a"], "maxRunning": True}, "spec.maxRunning: must be an integer"),
        ({"namespaces": ["a"], "weight": 0}, "spec.weight: must be an integer from 1 to 1000"),
        ({"namespaces": ["a"], "weight": 1001}, "spec.weight: must be an integer from 1 to"),
        ({"namespaces": ["a"], "weight": "x" * 10**5}, "spec.weight: must be an integer"),
        ({"namespaces": ["a"], "wieght": 2}, "spec.wieght: unknown field (did you mean `weight`?)"),
        ("x", "spec: is required and must be a mapping"),
    ],
)
def test_a_bad_document_names_the_field(spec: Any, message: str) -> None:
    with pytest.raises(PolicyError, match="^" + re.escape(message)):
        parse(document(spec))


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 40000) | names,
    lambda inner: st.lists(inner, max_size=3),
    max_leaves=5,
)


@settings(max_examples=300)
@given(
    spec=st.dictionaries(
        st.sampled_from([*FULL, "other"]), json_values | st.sampled_from(list(FULL.values()))
    )
)
def test_the_crd_schema_and_the_reader_accept_the_same_documents(spec: dict[str, Any]) -> None:
    # The API server prunes nulls before storing; the reader treats them as absent alike.
    spec = {key: value for key, value in spec.items() if value is not None}
    try:
        jsonschema.validate({"spec": spec}, SCHEMA)
        valid_for_crd = True
    except jsonschema.ValidationError:
        valid_for_crd = False
    try:
        parse(document(spec))
        valid_for_reader = True
    except PolicyError:
        valid_for_reader = False
    assert valid_for_crd == valid_for_reader, spec


@pytest.mark.parametrize(
    ("body", "covers"),
    [
        (document({"namespaces": ["team-a"], "maxPriority": "high"}), "team-a"),
        (document({"queues": ["x"]}), "anything"),  # cannot tell whom: covers everyone
        ({"metadata": {"name": "p"}, "spec": 5}, "anything"),
    ],
)
def test_a_broken_policy_refuses_every_schedule_it_may_cover(body: Any, covers: str) -> None:
    policy = policy_of(body)
    assert policy.error is not None and policy.covers(covers)
    refusal = check(covers, covers, definition(), [policy])
    assert refusal is not None and refusal.reason == POLICY_VIOLATION
    assert refusal.message.startswith(f"spec: namespace {covers} is covered by TenantPolicy")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "no TenantPolicy documents found"),
        ("a: [", "invalid YAML"),
        ("[" * 5000, "invalid YAML"),
        (yaml.safe_dump(document(FULL)) + "---\n" + yaml.safe_dump(document(FULL)), "duplicate"),
        ("kind: Schedule\n", "document 1: not a tickwork.io/v1 TenantPolicy"),
    ],
)
def test_a_policy_file_fails_in_one_line(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(text)
    with pytest.raises(PolicyError) as caught:
        load(path)
    assert str(caught.value).startswith(f"{path}: ") and message in str(caught.value)
    assert "\n" not in str(caught.value)


# --- spec.paused: the schedule namespaces a paused policy holds ----------------------------


def test_a_paused_policy_holds_its_tenants_own_namespaces_and_its_schedule_namespaces() -> None:
    freeze = TenantPolicy(
        "freeze", ("team-*",), schedule_namespaces=("shared-?",), paused=True, paused_reason="x"
    )
    known = ["team-a", "team-b", "shared-1", "shared-10", "other", "team"]
    assert held([freeze], known) == {"team-a": freeze, "team-b": freeze, "shared-1": freeze}
    assert held([replace(freeze, paused=False)], known) == {}
    assert held([freeze], []) == {}, "only the namespaces given (those the operator syncs)"


def test_an_invalid_policy_holds_nothing_and_the_first_paused_policy_by_name_is_named() -> None:
    broken = replace(policy_of(document({"namespaces": ["a"], "paused": "yes"})), paused=True)
    assert broken.error is not None and held([broken], ["a"]) == {}
    first = TenantPolicy("a-first", ("a",), paused=True)
    second = TenantPolicy("b-second", ("*",), paused=True)
    assert held([second, first], ["a", "z"]) == {"a": first, "z": second}


@given(
    policies=st.lists(
        st.builds(
            TenantPolicy,
            name=literals,
            namespaces=st.tuples(names),
            schedule_namespaces=st.lists(names, max_size=2).map(tuple),
            paused=st.booleans(),
        ),
        max_size=4,
    ),
    known=st.lists(literals, max_size=6),
)
def test_a_namespace_is_held_exactly_when_a_paused_policy_may_be_synced_into_it(
    policies: list[TenantPolicy], known: list[str]
) -> None:
    found = held(policies, known)
    for namespace in known:
        governing = [
            p
            for p in policies
            if p.paused
            and any(
                fnmatch.fnmatchcase(namespace, pattern)
                for pattern in (*p.namespaces, *p.schedule_namespaces)
            )
        ]
        if governing:
            assert found[namespace] == min(governing, key=lambda p: p.name)
        else:
            assert namespace not in found
    assert set(found) <= set(known)


@given(owner=st.text(min_size=1, max_size=10), policy=literals)
def test_the_actor_of_a_policy_pause_names_its_policy_and_no_person_looks_like_one(
    owner: str, policy: str
) -> None:
    assert pausing_policy(pause_actor("operator:" + owner, policy)) == policy
    assert pausing_policy("alice") is None
    assert pausing_policy("operator:prod/tenantpolicy/") is None


# --- spec.maxRunning and spec.weight: the flow rules of the namespaces a policy governs -----


def test_a_limiting_policy_orders_a_rule_for_each_namespace_it_governs() -> None:
    quota = TenantPolicy(
        "quota", ("team-*",), schedule_namespaces=("shared-?",), max_running=5, weight=2
    )
    known = ["team-a", "shared-1", "shared-10", "other"]
    rule = Limit(5, 2, ("quota",))
    assert limited([quota], known) == {"team-a": rule, "shared-1": rule}
    assert limited([replace(quota, max_running=None, weight=None)], known) == {}
    assert limited([replace(quota, weight=None)], ["team-a"]) == {
        "team-a": Limit(5, None, ("quota",))
    }
    assert limited([quota], []) == {}, "only the namespaces given (those the operator syncs)"


def test_of_two_policies_the_smaller_max_running_and_weight_win_each_naming_its_policy() -> None:
    wide = TenantPolicy("a-wide", ("*",), max_running=10, weight=1)
    tight = TenantPolicy("b-tight", ("team-a",), max_running=3, weight=5)
    assert limited([tight, wide], ["team-a", "team-b"]) == {
        "team-a": Limit(3, 1, ("b-tight", "a-wide")),
        "team-b": Limit(10, 1, ("a-wide",)),
    }
    same = TenantPolicy("c-same", ("team-a",), max_running=3)
    assert limited([same, tight], ["team-a"])["team-a"].policies == ("b-tight",)


def test_an_invalid_policy_orders_no_limit() -> None:
    broken = replace(policy_of(document({"namespaces": ["a"], "weight": 0})), max_running=3)
    assert broken.error is not None and limited([broken], ["a"]) == {}


@given(
    policies=st.lists(
        st.builds(
            TenantPolicy,
            name=literals,
            namespaces=st.tuples(names),
            schedule_namespaces=st.lists(names, max_size=2).map(tuple),
            max_running=st.none() | st.integers(1, 100_000),
            weight=st.none() | st.integers(1, 1000),
        ),
        max_size=4,
    ),
    known=st.lists(literals, max_size=6),
)
def test_a_namespace_gets_the_smallest_values_of_the_policies_governing_it(
    policies: list[TenantPolicy], known: list[str]
) -> None:
    found = limited(policies, known)
    for namespace in known:
        governing = [
            p
            for p in policies
            if any(
                fnmatch.fnmatchcase(namespace, pattern)
                for pattern in (*p.namespaces, *p.schedule_namespaces)
            )
        ]
        running = [p.max_running for p in governing if p.max_running is not None]
        weights = [p.weight for p in governing if p.weight is not None]
        if not running and not weights:
            assert namespace not in found
            continue
        limit = found[namespace]
        assert limit.max_running == (min(running) if running else None)
        assert limit.weight == (min(weights) if weights else None)
        assert limit.policies and set(limit.policies) <= {p.name for p in governing}
    assert set(found) <= set(known)
