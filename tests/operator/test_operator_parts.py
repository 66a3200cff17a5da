"""The operator's parts without kopf: translation, grouping, status, the syncer's coalescing,
retries and deletion wait (against a fake database), and sync's protected names (real one)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest

import tickwork
from tests.operator.rows import SPEC, stored_row
from tickwork.cli import build_parser, main
from tickwork.cli.operator import build_config
from tickwork.clock import SettableClock
from tickwork.db.schedules import ScheduleRow
from tickwork.errors import ConfigurationError
from tickwork.flow.limits import Rule, Scope
from tickwork.model import Actor
from tickwork.operator import handlers, status, webhook
from tickwork.operator.config import OperatorConfig
from tickwork.operator.database import Database
from tickwork.operator.desired import Desired, Entry, entry_of, group
from tickwork.operator.reporter import Shown
from tickwork.operator.syncer import NamespaceState, Outcome, Syncer
from tickwork.schedules import sync
from tickwork.schedules.definition import ScheduleDefinition
from tickwork.schedules.sync import SyncReport
from tickwork.schedules.tenancy import Refusal, TenantPolicy
from tickwork.transitions import Outcome as TransitionOutcome

OLD = {"creationTimestamp": "2026-01-01T00:00:00Z", "uid": "uid-z"}
NEW = {"creationTimestamp": "2026-01-01T00:00:01Z", "uid": "uid-a"}
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def body(name: str, spec: Any = SPEC, namespace: str = "ns", **metadata: Any) -> dict[str, Any]:
    meta = {"name": name, "namespace": namespace, "uid": f"uid-{name}", **metadata}
    return {"apiVersion": "tickwork.io/v1", "kind": "Schedule", "metadata": meta, "spec": spec}


# --- translation and grouping ---------------------------------------------------------------


def test_entries_translate_and_name_the_bad_field() -> None:
    good = entry_of(body("a", generation=3))
    assert good.translation.definition is not None and good.translation.error is None
    assert good.generation == 3
    bad = entry_of(body("b", {"schedule": "0 * * *", "job": {"kind": "k"}}))
    assert bad.translation.definition is None
    assert bad.translation.error is not None and bad.translation.error.startswith("spec.schedule")
    moved = entry_of(body("c", {**SPEC, "scheduleNamespace": "billing"}))
    assert moved.translation.namespace == "billing"
    assert entry_of({"metadata": {"name": "d", "namespace": "ns"}}).translation.error == (
        "spec: is required and must be a mapping"
    )


def test_group_protects_invalid_drops_deleting_and_reports_conflicts() -> None:
    allowed = TenantPolicy("p", ("aaa", "zzz"), schedule_namespaces=("ns",))
    state = group(
        [
            entry_of(body("a")),
            entry_of(body("b", {"every": "x", "job": {"kind": "k"}})),
            entry_of(body("gone", deletionTimestamp="2026-01-01T00:00:00Z")),
            entry_of(body("dup", {**SPEC, "scheduleNamespace": "ns"}, namespace="aaa")),
            entry_of(body("dup")),
            entry_of(body("c", {**SPEC, "scheduleNamespace": "ns"}, namespace="zzz", **OLD)),
            entry_of(body("c", {**SPEC, "scheduleNamespace": "ns"}, namespace="aaa", **NEW)),
        ],
        [allowed],
    )
    desired = state.namespaces["ns"]
    assert [d.name for d in desired.definitions] == ["a", "c", "dup"]
    assert desired.protected == frozenset({"b"})
    assert not desired.lists("gone")
    assert {key: r.reason for key, r in state.refused.items()} == {
        ("aaa", "dup"): "NameConflict",  # the schedule namespace's own object wins
        ("aaa", "c"): "NameConflict",  # the older object wins, whatever the namespace's name
    }
    assert state.sources[("ns", "dup")] == ("ns", "dup")
    assert state.sources[("ns", "c")] == ("zzz", "c")


def test_within_one_second_the_object_in_place_keeps_its_name() -> None:
    same = {"creationTimestamp": "2026-01-01T00:00:00Z"}
    spec = {**SPEC, "scheduleNamespace": "ns"}
    first, second = (
        entry_of(body("c", spec, namespace=n, uid=f"uid-{n}", **same)) for n in ("b", "a")
    )
    policy = TenantPolicy("p", ("*",), schedule_namespaces=("ns",))
    assert group([first, second], [policy]).sources[("ns", "c")] == ("a", "c"), "by uid"
    kept = group([first, second], [policy], previous={("ns", "c"): ("b", "c")})
    assert kept.sources[("ns", "c")] == ("b", "c")
    assert kept.refused[("a", "c")].reason == "NameConflict"


def test_group_leaves_out_what_tenant_policy_refuses_and_spares_nothing_for_it() -> None:
    policy = TenantPolicy("team-a", ("team-a",), queues=("team-a-*",))
    state = group(
        [
            entry_of(body("nightly", SPEC, namespace="victim")),
            entry_of(body("nightly", {**SPEC, "scheduleNamespace": "victim"}, namespace="evil")),
            entry_of(body("x", {"every": "x", "scheduleNamespace": "victim"}, namespace="evil")),
            entry_of(body("q", SPEC, namespace="team-a")),
        ],
        [policy],
    )
    assert state.namespaces == {"victim": Desired((state.namespaces["victim"].definitions[0],))}
    assert state.sources == {("victim", "nightly"): ("victim", "nightly")}
    reasons = {key: r.reason for key, r in state.refused.items()}
    assert reasons == {
        ("evil", "nightly"): "NamespaceNotAllowed",
        ("evil", "x"): "NamespaceNotAllowed",  # an invalid spec spares no name in the target
        ("team-a", "q"): "PolicyViolation",
    }


# --- status ---------------------------------------------------------------------------------


def test_status_patch_only_carries_changes_and_keeps_the_transition_time() -> None:
    entry = entry_of(body("a", generation=2))
    ready = status.Ready("True", "Synced", "ok")
    now = datetime(2026, 1, 1, tzinfo=UTC)
    facts = status.facts(None, [])
    first = status.patch({}, entry, ready, facts, now)
    assert first["observedGeneration"] == 2
    assert first["conditions"][0]["lastTransitionTime"] == "2026-01-01T00:00:00Z"
    current = {**first}
    later = datetime(2026, 1, 2, tzinfo=UTC)
    assert status.patch(current, entry, ready, facts, later) == {}
    failed = status.patch(current, entry, status.Ready("False", "InvalidSpec", "x"), facts, later)
    assert failed["conditions"][0]["lastTransitionTime"] == "2026-01-02T00:00:00Z"


def _ready_with(row: ScheduleRow | None) -> status.Ready:
    """Ready of a synced entry ``ns/a`` whose stored row is ``row``."""
    entry = entry_of(body("a", generation=4))
    desired = group([entry]).namespaces["ns"]
    synced = NamespaceState(Outcome.SYNCED, "", attempted=desired, synced=desired)
    return status.ready(entry, refusal=None, state=synced, database_error=None, row=row)


def test_ready_follows_the_stored_row_disabled_or_set_aside_by_a_firing_error() -> None:
    assert _ready_with(None).status == "True", "the row not read yet: the sync decides"
    assert _ready_with(stored_row()) == status.Ready(
        "True", "Synced", "the definition in PostgreSQL is current"
    )
    disabled = _ready_with(stored_row(enabled=False, next_run_at=None))
    assert (disabled.status, disabled.reason) == ("False", "Disabled")
    assert "disabled in PostgreSQL" in disabled.message and "pruned" in disabled.message
    error = "refused by PostgreSQL: no (sqlstate P0001), inserting the job of occurrence x"
    failing = stored_row(
        firing_error=error,
        firing_failures=3,
        firing_retry_at=datetime(2026, 1, 1, 0, 0, 7, tzinfo=UTC),
    )
    assert _ready_with(failing) == status.Ready(
        "False", "FiringFailed", f"firing failed, retried with backoff: {error}"
    )
    again = replace(
        failing, firing_failures=4, firing_retry_at=datetime(2026, 1, 1, 0, 0, 15, tzinfo=UTC)
    )
    assert _ready_with(again) == _ready_with(failing), "a retry changes no message (no Event)"
    # Decided for this generation: observedGeneration follows, as for Synced.
    patched = status.patch({}, entry_of(body("a", generation=4)), _ready_with(failing), {}, NOW)
    assert patched["observedGeneration"] == 4
    assert patched["conditions"][0]["reason"] == "FiringFailed"
    # A spec the sync refused says so first, whatever the row holds.
    invalid = entry_of(body("a", {"schedule": "0 * * *", "job": {"kind": "k"}}))
    refused = status.ready(invalid, refusal=None, state=None, database_error=None, row=failing)
    assert refused.reason == "InvalidSpec"


@pytest.mark.parametrize("reason", ["NamespaceNotAllowed", "PolicyViolation", "NameConflict"])
def test_a_refused_object_says_why_observes_its_generation_and_warns(reason: str) -> None:
    entry = entry_of(body("a", generation=5))
    why = Refusal(reason, "spec.job.queue: queue 'q' is not allowed")
    ready = status.ready(entry, refusal=why, state=None, database_error=None, row=None)
    assert (ready.status, ready.reason, ready.message) == ("False", reason, why.message)
    patched = status.patch({}, entry, ready, status.facts(None, []), NOW)
    assert patched["observedGeneration"] == 5
    assert reason in status.EVENT_REASONS


# --- the syncer -------------------------------------------------------------------------------


class FakeDatabase(Database):
    def __init__(self) -> None:
        super().__init__("postgresql://unused")
        self.calls: list[tuple[str, list[str], frozenset[str]]] = []
        self.holds: list[tuple[dict[str, Actor], list[str], str]] = []
        self.limits: list[tuple[dict[str, tuple[Rule, Actor]], list[str], str]] = []
        self.failing = False

    async def sync(
        self,
        namespace: str,
        definitions: Sequence[ScheduleDefinition],
        *,
        protect: frozenset[str],
        owner: str,
    ) -> SyncReport:
        if self.failing:
            raise psycopg.OperationalError("connection refused")
        self.calls.append((namespace, [d.name for d in definitions], protect))
        return SyncReport()

    async def owned_namespaces(self, owner: str) -> list[str]:
        return ["old"]

    async def hold(
        self, wanted: Mapping[str, Actor], candidates: Sequence[str], prefix: str
    ) -> list[TransitionOutcome]:
        if self.failing:
            raise psycopg.OperationalError("connection refused")
        self.holds.append((dict(wanted), list(candidates), prefix))
        return []

    async def limit(
        self, wanted: Mapping[str, tuple[Rule, Actor]], candidates: Sequence[str], prefix: str
    ) -> list[TransitionOutcome]:
        if self.failing:
            raise psycopg.OperationalError("connection refused")
        self.limits.append((dict(wanted), list(candidates), prefix))
        return []


async def run_syncer(
    entries: list[Entry],
    policies: list[TenantPolicy] | None = None,
    rounds: list[None] | None = None,
) -> tuple[Syncer, FakeDatabase, asyncio.Task[None]]:
    database = FakeDatabase()

    async def complete() -> None:
        return None

    syncer = Syncer(
        database,
        lambda: entries,
        owner="operator:test",
        coalesce_seconds=0.05,
        coalesce_max_seconds=0.5,
        retry_max_seconds=0.2,
        on_round=lambda: (rounds if rounds is not None else []).append(None),
        policies=lambda: policies or (),
    )
    task = asyncio.create_task(syncer.run(complete))
    await asyncio.wait_for(syncer.ready.wait(), 5)
    return syncer, database, task


async def until(condition: Any) -> None:
    async with asyncio.timeout(5):
        while not condition():
            await asyncio.sleep(0.01)


async def test_a_burst_costs_one_sync_and_owned_namespaces_are_pruned() -> None:
    entries: list[Entry] = []
    syncer, database, task = await run_syncer(entries)
    try:
        await until(lambda: ("old", [], frozenset()) in database.calls)
        database.calls.clear()
        for i in range(200):
            entries.append(entry_of(body(f"s{i:03d}")))
            syncer.notify()
            await asyncio.sleep(0)
        await until(lambda: database.calls)
        await asyncio.sleep(0.2)
        assert len(database.calls) == 1
        assert len(database.calls[0][1]) == 200
        state = syncer.state("ns")
        assert state is not None and state.outcome is Outcome.SYNCED
    finally:
        task.cancel()


async def test_a_failed_sync_is_retried_and_a_deletion_waits_for_it() -> None:
    entries = [entry_of(body("a")), entry_of(body("b"))]
    syncer, database, task = await run_syncer(entries)
    try:
        await until(lambda: syncer.state("ns") is not None)
        database.failing = True
        entries[1] = entry_of(body("b", deletionTimestamp="2026-01-01T00:00:00Z"))
        state = await syncer.settle("ns", "b", timeout=5)
        assert state is not None and state.outcome is Outcome.DATABASE_UNAVAILABLE
        database.failing = False
        await until(lambda: (syncer.state("ns") or state).outcome is Outcome.SYNCED)
        assert database.calls[-1] == ("ns", ["a"], frozenset())
        settled = await syncer.settle("ns", "b", timeout=5)
        assert settled is not None and settled.outcome is Outcome.SYNCED
        assert settled.synced is not None and not settled.synced.lists("b")
    finally:
        task.cancel()


async def test_pauses_ordered_by_policies_are_applied_once_per_change_not_per_round() -> None:
    """The syncer asks the database to make the pauses TenantPolicies order on its first round
    (to resume what a policy deleted meanwhile ordered), then only when what they order or the
    namespaces they apply to changed: a round that changes neither costs no query."""
    entries = [entry_of(body("a"))]
    policies: list[TenantPolicy] = []
    rounds: list[None] = []
    syncer, database, task = await run_syncer(entries, policies, rounds)
    try:
        await until(lambda: database.holds)
        assert database.holds == [({}, ["ns", "old"], "operator:test/tenantpolicy/")]

        async def another_round() -> None:
            seen = len(rounds)
            syncer.notify()
            await until(lambda: len(rounds) > seen)

        entries.append(entry_of(body("b")))  # a sync of ns: same namespaces, same order
        await another_round()
        await another_round()
        assert len(database.holds) == 1

        policies.append(TenantPolicy("freeze", ("ns",), paused=True, paused_reason="why"))
        await another_round()
        actor = Actor("operator:test/tenantpolicy/freeze", "why")
        assert database.holds[1:] == [({"ns": actor}, ["ns", "old"], syncer.pause_prefix)]
        await another_round()
        assert len(database.holds) == 2

        database.failing = True  # the database fails: retried until it answers
        policies.clear()
        await another_round()
        database.failing = False
        await until(lambda: len(database.holds) == 3)
        assert database.holds[2][0] == {}
    finally:
        task.cancel()


async def test_rules_ordered_by_policies_are_applied_once_per_change_not_per_round() -> None:
    """As the pauses: the flow rules TenantPolicies order (``maxRunning``, ``weight``) are
    written on the first round (to remove what a policy deleted meanwhile ordered), then only
    when what they order or the namespaces they apply to changed; a failure is retried."""
    entries = [entry_of(body("a"))]
    policies: list[TenantPolicy] = []
    rounds: list[None] = []
    syncer, database, task = await run_syncer(entries, policies, rounds)
    try:
        await until(lambda: database.limits)
        assert database.limits == [({}, ["ns", "old"], "operator:test/tenantpolicy/")]

        async def another_round() -> None:
            seen = len(rounds)
            syncer.notify()
            await until(lambda: len(rounds) > seen)

        entries.append(entry_of(body("b")))
        await another_round()
        assert len(database.limits) == 1

        policies.append(TenantPolicy("quota", ("ns",), max_running=4, weight=2))
        policies.append(TenantPolicy("tight", ("*",), max_running=3))
        await another_round()
        rule = Rule(Scope.NAMESPACE, "ns", max_running=3, weight=2)
        actor = Actor(
            "operator:test/tenantpolicy/tight", "TenantPolicies 'tight', 'quota' order it"
        )
        old = Rule(Scope.NAMESPACE, "old", max_running=3)
        old_actor = Actor("operator:test/tenantpolicy/tight", "TenantPolicy 'tight' orders it")
        assert database.limits[1:] == [
            ({"ns": (rule, actor), "old": (old, old_actor)}, ["ns", "old"], syncer.pause_prefix)
        ]
        await another_round()
        assert len(database.limits) == 2

        database.failing = True
        policies.clear()
        await another_round()
        database.failing = False
        await until(lambda: len(database.limits) == 3)
        assert database.limits[2][0] == {}
    finally:
        task.cancel()


async def test_a_namespace_too_long_for_a_rule_gets_none_and_the_round_goes_on() -> None:
    entries = [entry_of(body("a"))]
    policies = [TenantPolicy("quota", ("*",), max_running=2)]
    syncer, database, task = await run_syncer(entries, policies)
    try:
        syncer._known.add("n" * 250)  # a schedule namespace longer than a rule's name
        syncer.notify()
        await until(lambda: any(len(call[1]) == 3 for call in database.limits))
        assert sorted(database.limits[-1][0]) == ["ns", "old"]
    finally:
        task.cancel()


# --- sync's protected names, in PostgreSQL ------------------------------------------------------


def test_pruning_spares_protected_names(database_url: str) -> None:
    app = tickwork.App(database_url)
    try:
        definitions = [entry_of(body(n)).translation.definition for n in ("a", "b")]
        assert all(definitions)
        app.sync_schedules("ns", definitions, owner="o")  # type: ignore[arg-type]
        with app.connection() as conn:
            report = sync.sync(
                conn,
                "ns",
                definitions[:1],  # type: ignore[arg-type]
                prune=True,
                owner="o",
                take_over=False,
                dry_run=False,
                now=None,
                protect=frozenset({"b"}),
            )
        assert report.disabled == []
        assert app.get_schedule("ns", "b").enabled
    finally:
        app.close()


@pytest.mark.parametrize("reason", ["InvalidSpec", "DatabaseUnavailable"])
def test_previous_reads_the_ready_condition(reason: str) -> None:
    current = {"conditions": [{"type": "Ready", "status": "False", "reason": reason}]}
    previous = status.previous(current)
    assert previous is not None and previous.reason == reason and previous.failed


# --- the admission webhook ------------------------------------------------------------------


def test_the_webhook_refuses_what_tenant_policy_refuses() -> None:
    policy = TenantPolicy("team-a", ("team-a",), kinds=("team-a.*",))
    good = body("a", namespace="team-a", spec={**SPEC, "job": {"kind": "team-a.x"}})
    assert webhook.refused(good, [policy]) is None
    refused = webhook.refused(body("a", namespace="team-a"), [policy])
    assert refused is not None and refused.startswith("spec.job.kind: kind 'k' is not allowed")
    away = body("a", {**SPEC, "scheduleNamespace": "team-b", "every": "x"}, namespace="team-a")
    refused = webhook.refused(away)  # the target first, even for an invalid spec
    assert refused is not None and refused.startswith("spec.scheduleNamespace: ")


def test_the_webhook_refuses_what_the_operator_would_mark_invalid() -> None:
    assert webhook.refused(body("a")) is None
    spec = {"schedule": "0 3 * * *", "timeZone": "Mars/Base", "job": {"kind": "k"}}
    refused = webhook.refused(body("a", spec))
    assert refused is not None and refused.startswith("spec.timeZone:")


# --- the command line ---------------------------------------------------------------------------


def test_flags_win_over_variables_which_win_over_defaults() -> None:
    parser = build_parser()
    args = parser.parse_args(["operator", "--namespace", "a", "--namespace", "b", "--standalone"])
    env = {
        "TICKWORK_DATABASE_URL": "postgresql://db/x",
        "TICKWORK_CLUSTER_NAME": "prod",
        "TICKWORK_NAMESPACE": "ignored",
        "TICKWORK_STATUS_INTERVAL": "2.5",
        "TICKWORK_WEBHOOK": "true",
        "TICKWORK_WEBHOOK_CERT_FILE": "tls.crt",
        "TICKWORK_WEBHOOK_KEY_FILE": "tls.key",
    }
    config = build_config(args, env)
    assert config.namespaces == ("a", "b")
    assert config.standalone and config.webhook
    assert (config.cluster_name, config.owner) == ("prod", "operator:prod")
    assert config.status_interval == 2.5
    assert (config.http_port, config.peering, config.webhook_port) == (9092, "tickwork", 9443)
    defaults = build_config(parser.parse_args(["operator"]), {"TICKWORK_DATABASE_URL": "x"})
    assert defaults.namespaces == () and not defaults.standalone


def test_bad_settings_are_one_line_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["operator"], env={}) == 2
    assert "--database-url" in capsys.readouterr().err
    env = {"TICKWORK_DATABASE_URL": "x", "TICKWORK_STANDALONE": "maybe"}
    assert main(["operator"], env=env) == 2
    assert "TICKWORK_STANDALONE" in capsys.readouterr().err


def test_a_webhook_certificate_needs_its_key() -> None:
    with pytest.raises(ConfigurationError):
        OperatorConfig("postgresql://x", webhook=True, webhook_cert_file="tls.crt")


def test_status_timestamps_come_from_the_operators_clock() -> None:
    clock = SettableClock(datetime(2031, 5, 6, 7, 8, 9, tzinfo=UTC))
    runtime = handlers.Runtime(
        OperatorConfig("postgresql://unused"), Database("postgresql://unused"), clock
    )
    patch = runtime.report(Shown.of(body("a", generation=1)), {})
    assert patch["conditions"][0]["lastTransitionTime"] == "2031-05-06T07:08:09Z"
