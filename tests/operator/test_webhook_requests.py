"""The admission webhook's handler as kopf registers it, called with what kopf passes for an
admission request: it never blocks a delete, a finalizer's removal or any other metadata-only
update (even of an object whose stored spec is invalid), refuses a bad CREATE or spec change,
and answers with no database at all."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import kopf
import psycopg
import pytest

from tickwork.operator import webhook
from tickwork.schedules.tenancy import TenantPolicy

GOOD = {"schedule": "0 3 * * *", "job": {"kind": "k"}}
BAD = {"schedule": "0 3 * *", "job": {"kind": "k"}}


def schedule(spec: dict[str, Any], **metadata: Any) -> kopf.Body:
    meta = {"name": "nightly", "namespace": "ns", "finalizers": ["tickwork.io/schedule"]}
    return kopf.Body(
        {
            "apiVersion": "tickwork.io/v1",
            "kind": "Schedule",
            "metadata": {**meta, **metadata},
            "spec": spec,
        }
    )


@pytest.fixture
def handler() -> Any:
    """The one webhook handler ``webhook.register`` gives kopf."""
    registry = kopf.OperatorRegistry()
    webhook.register(registry, lambda: [TenantPolicy("ns", ("ns",), queues=("default",))])
    (found,) = registry._webhooks.get_all_handlers()
    return found


def request(handler: Any) -> Callable[..., None]:
    def call(operation: str, new: kopf.Body, old: kopf.Body | None = None) -> None:
        handler.fn(body=new, old=old, new=new, operation=operation)

    return call


def test_only_create_and_update_reach_the_webhook(handler: Any) -> None:
    """The configuration's rules come from these operations: DELETE is never sent."""
    assert list(handler.operations) == ["CREATE", "UPDATE"]
    assert handler.id == webhook.HANDLER_ID
    request(handler)("DELETE", schedule(BAD), schedule(BAD))


def test_a_bad_create_or_spec_change_is_refused_naming_the_field(handler: Any) -> None:
    call = request(handler)
    call("CREATE", schedule(GOOD))
    with pytest.raises(kopf.AdmissionError, match=r"^spec\.schedule: "):
        call("CREATE", schedule(BAD))
    with pytest.raises(kopf.AdmissionError, match=r"^spec\.schedule: "):
        call("UPDATE", schedule(BAD), schedule(GOOD))
    with pytest.raises(kopf.AdmissionError, match=r"^spec\.job\.queue: "):
        call("UPDATE", schedule({**GOOD, "job": {"kind": "k", "queue": "q"}}), schedule(GOOD))


def test_removing_the_finalizer_of_an_invalid_object_is_allowed(handler: Any) -> None:
    """An object stored before the webhook existed (or before a policy tightened) keeps its
    invalid spec; its deletion must still complete."""
    deleting = {"deletionTimestamp": "2026-01-01T00:00:00Z"}
    request(handler)("UPDATE", schedule(BAD, finalizers=[], **deleting), schedule(BAD, **deleting))


def test_a_metadata_only_update_of_an_invalid_object_is_allowed(handler: Any) -> None:
    old = schedule(BAD)
    request(handler)("UPDATE", schedule(BAD, labels={"team": "a"}), old)
    request(handler)(
        "UPDATE",
        schedule(BAD, annotations={"kopf.zalando.org/last-handled-configuration": "x"}),
        old,
    )


def test_a_spec_change_of_an_object_being_deleted_is_allowed(handler: Any) -> None:
    deleting = {"deletionTimestamp": "2026-01-01T00:00:00Z"}
    request(handler)("UPDATE", schedule(BAD, **deleting), schedule(GOOD, **deleting))


def test_the_webhook_answers_without_a_database(
    handler: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check reads no database: with every connection attempt failing, it still admits
    and refuses."""

    def refused(*_: Any, **__: Any) -> Any:
        raise psycopg.OperationalError("the database is down")

    monkeypatch.setattr(psycopg.Connection, "connect", refused)
    monkeypatch.setattr(psycopg.AsyncConnection, "connect", refused)
    call = request(handler)
    call("CREATE", schedule(GOOD))
    with pytest.raises(kopf.AdmissionError, match=r"^spec\.schedule: "):
        call("CREATE", schedule(BAD))
