"""The admission webhook as kopf serves it: AdmissionReview requests go through kopf's own
admission dispatch (``serve_admission_request``, what its webhook server calls) to the handler
``webhook.register`` gave it. It never blocks a delete, a finalizer's removal or any other
metadata-only update (even of an object whose stored spec is invalid), refuses a bad CREATE
or spec change naming the field, and answers with no database at all."""

from __future__ import annotations

import asyncio
from typing import Any

import kopf
import psycopg
import pytest
from kopf._cogs.structs import references
from kopf._core.engines.admission import serve_admission_request
from kopf._core.reactor.inventory import ResourceMemories

from tickwork.operator import webhook
from tickwork.schedules.tenancy import TenantPolicy

GOOD = {"schedule": "0 3 * * *", "job": {"kind": "k"}}
BAD = {"schedule": "0 3 * *", "job": {"kind": "k"}}
DELETING = {"deletionTimestamp": "2026-01-01T00:00:00Z"}


def schedule(spec: dict[str, Any], **metadata: Any) -> dict[str, Any]:
    meta = {"name": "nightly", "namespace": "ns", "finalizers": ["tickwork.io/schedule"]}
    return {
        "apiVersion": "tickwork.io/v1",
        "kind": "Schedule",
        "metadata": {**meta, **metadata},
        "spec": spec,
    }


@pytest.fixture
def registry() -> kopf.OperatorRegistry:
    """A kopf registry holding what ``webhook.register`` registers."""
    registry = kopf.OperatorRegistry()
    webhook.register(registry, lambda: [TenantPolicy("ns", ("ns",), queues=("default",))])
    return registry


class Refused(Exception):
    """The webhook's answer: not allowed, with this message."""


def review(
    registry: kopf.OperatorRegistry,
    operation: str,
    new: dict[str, Any] | None,
    old: dict[str, Any] | None = None,
) -> None:
    """Send one AdmissionReview through kopf; raise Refused with its message if not allowed."""
    insights = references.Insights()
    insights.webhook_resources.add(
        references.Resource("tickwork.io", "v1", "schedules", namespaced=True)
    )
    request: Any = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "uid-1",
            "operation": operation,
            "userInfo": {"username": "tenant"},
            "resource": {"group": "tickwork.io", "version": "v1", "resource": "schedules"},
            "kind": {"group": "tickwork.io", "version": "v1", "kind": "Schedule"},
            "object": new,
            "oldObject": old,
            "dryRun": False,
        },
    }
    answer = asyncio.run(
        serve_admission_request(
            request,
            webhook=webhook.HANDLER_ID,
            settings=kopf.OperatorSettings(),
            memories=ResourceMemories(),
            memobase=kopf.Memo(),
            registry=registry,
            insights=insights,
            indices={},
        )
    )
    response = answer["response"]
    if not response["allowed"]:
        raise Refused(response["status"]["message"])


def test_only_create_and_update_reach_the_webhook(registry: kopf.OperatorRegistry) -> None:
    """The configuration's rules name these operations: DELETE is never sent (and passes)."""
    (handler,) = registry._webhooks.get_all_handlers()
    assert list(handler.operations) == ["CREATE", "UPDATE"]
    assert handler.id == webhook.HANDLER_ID
    review(registry, "DELETE", None, schedule(BAD))


def test_a_bad_create_or_spec_change_is_refused_naming_the_field(
    registry: kopf.OperatorRegistry,
) -> None:
    review(registry, "CREATE", schedule(GOOD))
    review(registry, "UPDATE", schedule({**GOOD, "suspend": True}), schedule(GOOD))
    with pytest.raises(Refused, match=r"^spec\.schedule: "):
        review(registry, "CREATE", schedule(BAD))
    with pytest.raises(Refused, match=r"^spec\.schedule: "):
        review(registry, "UPDATE", schedule(BAD), schedule(GOOD))
    queue = {**GOOD, "job": {"kind": "k", "queue": "q"}}
    with pytest.raises(Refused, match=r"^spec\.job\.queue: "):
        review(registry, "UPDATE", schedule(queue), schedule(GOOD))


def test_removing_the_finalizer_of_an_invalid_object_is_allowed(
    registry: kopf.OperatorRegistry,
) -> None:
    """An object stored before the webhook existed (or before a policy tightened) keeps its
    invalid spec; its deletion must still complete."""
    review(registry, "UPDATE", schedule(BAD, finalizers=[], **DELETING), schedule(BAD, **DELETING))


def test_a_metadata_only_update_of_an_invalid_object_is_allowed(
    registry: kopf.OperatorRegistry,
) -> None:
    old = schedule(BAD)
    review(registry, "UPDATE", schedule(BAD, labels={"team": "a"}), old)
    review(registry, "UPDATE", schedule(BAD, finalizers=[]), old)
    kopfs = {"kopf.zalando.org/last-handled-configuration": "x"}
    review(registry, "UPDATE", schedule(BAD, annotations=kopfs), old)


def test_a_spec_change_of_an_object_being_deleted_is_allowed(
    registry: kopf.OperatorRegistry,
) -> None:
    review(registry, "UPDATE", schedule(BAD, **DELETING), schedule(GOOD, **DELETING))


def test_the_webhook_answers_without_a_database(
    registry: kopf.OperatorRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check reads no database: with every connection attempt failing, it still admits
    and refuses."""

    def refused(*_: Any, **__: Any) -> Any:
        raise psycopg.OperationalError("the database is down")

    monkeypatch.setattr(psycopg.Connection, "connect", refused)
    monkeypatch.setattr(psycopg.AsyncConnection, "connect", refused)
    review(registry, "CREATE", schedule(GOOD))
    with pytest.raises(Refused, match=r"^spec\.schedule: "):
        review(registry, "CREATE", schedule(BAD))
