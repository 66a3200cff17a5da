"""``spec.steps``: a Schedule whose occurrence is a small pipeline. The loader, the operator's
translation and the CRD refuse bad steps naming the field (a cycle, an unknown or duplicate
name, too many steps, a bad name, steps beside spec.job); an occurrence runs each step once,
in the order ``after`` says."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
import yaml

import tickwork
from tests.schedules.test_crd import schema_errors
from tests.support.helpers import running, scalar, settings, wait_status
from tickwork.clock import SettableClock
from tickwork.model import Job
from tickwork.schedules import steps
from tickwork.schedules.checks import DefinitionError
from tickwork.schedules.definition import ScheduleDefinition
from tickwork.schedules.manifests import load_documents
from tickwork.schedules.tenancy import TenantPolicy, check
from tickwork.worker.runner import Worker


def _step(name: str, *after: str, kind: str = "p.step") -> dict[str, Any]:
    return {"name": name, "after": list(after), "job": {"kind": kind, "payload": {"step": name}}}


def _spec(*items: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"every": "1h", "steps": list(items), **extra}


DIAMOND = _spec(_step("a"), _step("b", "a"), _step("c", "a"), _step("d", "b", "c"))


def _refused(spec: dict[str, Any]) -> tuple[str, str]:
    with pytest.raises(DefinitionError) as caught:
        ScheduleDefinition.from_spec("p", spec).validate("ns")
    return caught.value.field, caught.value.reason


def test_steps_round_trip_through_the_canonical_spec() -> None:
    definition = ScheduleDefinition.from_spec("p", DIAMOND)
    definition.validate("ns")
    assert [s.name for s in definition.steps] == ["a", "b", "c", "d"]
    assert definition.job.kind == steps.KIND
    canonical = definition.to_spec()
    assert "job" not in canonical
    assert ScheduleDefinition.from_spec("p", canonical) == definition


@pytest.mark.parametrize(
    ("spec", "path", "reason"),
    [
        (
            _spec(_step("a", "c"), _step("b", "a"), _step("c", "b")),
            "spec.steps[0].after",
            "a cycle: a -> c -> b -> a",
        ),
        (_spec(_step("a"), _step("b", "x")), "spec.steps[1].after[0]", "no step named 'x'"),
        (_spec(_step("a"), _step("a")), "spec.steps[1].name", "duplicate name 'a'"),
        (_spec(_step("a", "a")), "spec.steps[0].after[0]", "cannot wait for itself"),
        (_spec(*(_step(f"s{i}") for i in range(21))), "spec.steps", "at most 20 steps"),
        (_spec(_step("Bad_Name")), "spec.steps[0].name", "a DNS label"),
        (_spec(_step("a", "b", "b"), _step("b")), "spec.steps[0].after", "more than once"),
        (_spec({"name": "a"}), "spec.steps[0].job", "is required"),
        (_spec({"name": "a", "job": {"kind": "k"}, "run": 1}), "spec.steps[0].run", "unknown"),
        (
            _spec({"name": "a", "job": {"kind": "k", "priority": -1}}),
            "spec.steps[0].job.priority",
            ">= 0",
        ),
        (_spec({"name": "a", "job": {"kind": "tickwork.x"}}), "spec.steps[0].job.kind", "tickwork"),
        (_spec(), "spec.steps", "at least one step"),
        ({"every": "1h", "steps": "a"}, "spec.steps", "must be a list"),
        (_spec(_step("a"), job={"kind": "k"}), "spec.steps", "exactly one of"),
    ],
)
def test_bad_steps_are_refused_naming_the_field(
    spec: dict[str, Any], path: str, reason: str
) -> None:
    found_path, found_reason = _refused(spec)
    assert found_path == path
    assert reason in found_reason


def test_the_crd_refuses_what_it_can_and_accepts_a_pipeline() -> None:
    def doc(spec: dict[str, Any]) -> dict[str, Any]:
        return {
            "apiVersion": "tickwork.io/v1",
            "kind": "Schedule",
            "metadata": {"name": "p"},
            "spec": spec,
        }

    assert schema_errors(doc(DIAMOND)) == []
    assert schema_errors(doc(_spec(*(_step(f"s{i}") for i in range(21)))))
    assert schema_errors(doc(_spec(_step("Bad_Name"))))
    assert schema_errors(doc(_spec(_step("a"), job={"kind": "k"})))
    assert schema_errors(doc({"every": "1h", "steps": [{"name": "a"}]}))


async def test_an_occurrence_runs_each_step_once_in_order(
    app: tickwork.App,
    database_url: str,
    clock: SettableClock,
    aconn: psycopg.AsyncConnection[Any],
) -> None:
    ran: list[str] = []

    @app.task("p.step")
    async def step(job: Job) -> None:
        ran.append(job.payload["step"])

    (definition,) = load_documents(
        yaml.safe_dump(
            {
                "apiVersion": "tickwork.io/v1",
                "kind": "Schedule",
                "metadata": {"name": "nightly"},
                "spec": DIAMOND,
            }
        ),
        "pipeline.yaml",
    )
    app.sync_schedules("team", [definition])
    run_id = app.trigger("team", "nightly", actor="test")
    async with running(Worker(app, settings(database_url, concurrency=3), clock=clock)):
        await wait_status(aconn, run_id, "succeeded")
        with psycopg.connect(database_url, autocommit=True) as conn:
            last = scalar(conn, "SELECT max(id) FROM tickwork.jobs WHERE kind = 'p.step'")
        await wait_status(aconn, last, "succeeded")
    assert ran[0] == "a" and ran[-1] == "d" and sorted(ran[1:3]) == ["b", "c"]
    with psycopg.connect(database_url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT schedule_namespace, schedule_name, status::text FROM tickwork.jobs"
            " WHERE kind = 'p.step'"
        ).fetchall()
    assert rows == [("team", "nightly", "succeeded")] * 4, "the steps are the schedule's jobs"


def test_a_tenant_policy_judges_every_step_and_not_the_occurrence_job() -> None:
    policy = TenantPolicy("team-a", ("team-a",), kinds=("team-a.*",), max_priority=5)
    allowed = ScheduleDefinition.from_spec(
        "p", _spec(_step("a", kind="team-a.x"), _step("b", "a", kind="team-a.y"))
    )
    assert check("team-a", "team-a", allowed, [policy]) is None, "tickwork.steps is not judged"
    sneaky = ScheduleDefinition.from_spec(
        "p", _spec(_step("a", kind="team-a.x"), _step("b", "a", kind="payments.refund"))
    )
    refusal = check("team-a", "team-a", sneaky, [policy])
    assert refusal is not None
    assert refusal.message.startswith(
        "spec.steps[1].job.kind: kind 'payments.refund' is not allowed for namespace team-a"
    )
    loud = {"name": "c", "job": {"kind": "team-a.z", "priority": 9}}
    refusal = check("team-a", "team-a", ScheduleDefinition.from_spec("p", _spec(loud)), [policy])
    assert refusal is not None and refusal.message.startswith("spec.steps[0].job.priority")
