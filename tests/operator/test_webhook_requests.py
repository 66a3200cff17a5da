"""The admission webhook: AdmissionReview requests answered by ``webhook.answer`` (what its
HTTPS server runs per request), and the server itself, started by the real operator with a
real certificate. It never blocks a delete, a finalizer's removal or any other metadata-only
update (even of an object whose stored spec is invalid), refuses a bad CREATE or spec change
naming the field, and answers with no database at all — also when the operator was started
while the database was down (it serves before joining the registry)."""

from __future__ import annotations

import asyncio
import json
import socket
import ssl
from pathlib import Path
from typing import Any

import aiohttp
import psycopg
import pytest

from tests.operator.harness import Cluster, operator_config
from tests.support.helpers import wait_until
from tickwork.errors import ConfigurationError
from tickwork.operator import runner, webhook
from tickwork.operator.config import OperatorConfig
from tickwork.schedules.tenancy import TenantPolicy

GOOD = {"schedule": "0 3 * * *", "job": {"kind": "k"}}
BAD = {"schedule": "0 3 * *", "job": {"kind": "k"}}
DELETING = {"deletionTimestamp": "2026-01-01T00:00:00Z"}
POLICY = TenantPolicy("ns", ("ns",), queues=("default",))


def schedule(spec: dict[str, Any], **metadata: Any) -> dict[str, Any]:
    meta = {"name": "nightly", "namespace": "ns", "finalizers": ["tickwork.io/schedule"]}
    return {
        "apiVersion": "tickwork.io/v1",
        "kind": "Schedule",
        "metadata": {**meta, **metadata},
        "spec": spec,
    }


def request(operation: str, new: Any, old: Any = None) -> dict[str, Any]:
    return {
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


class Refused(Exception):
    """The webhook's answer: not allowed, with this message."""


def review(operation: str, new: Any, old: Any = None) -> None:
    """Answer one AdmissionReview; raise Refused with its message if not allowed."""

    async def policies() -> list[TenantPolicy]:
        return [POLICY]

    answer = asyncio.run(webhook.answer(request(operation, new, old), policies))
    response = answer["response"]
    assert response["uid"] == "uid-1"
    if not response["allowed"]:
        assert response["status"]["code"] == 422
        raise Refused(response["status"]["message"])


def test_only_create_and_update_reach_the_webhook() -> None:
    """The configuration's rules name these operations: DELETE is never sent (and passes)."""
    assert webhook.OPERATIONS == ("CREATE", "UPDATE")
    review("DELETE", None, schedule(BAD))


def test_a_bad_create_or_spec_change_is_refused_naming_the_field() -> None:
    review("CREATE", schedule(GOOD))
    review("UPDATE", schedule({**GOOD, "suspend": True}), schedule(GOOD))
    with pytest.raises(Refused, match=r"^spec\.schedule: "):
        review("CREATE", schedule(BAD))
    with pytest.raises(Refused, match=r"^spec\.schedule: "):
        review("UPDATE", schedule(BAD), schedule(GOOD))
    queue = {**GOOD, "job": {"kind": "k", "queue": "q"}}
    with pytest.raises(Refused, match=r"^spec\.job\.queue: "):
        review("UPDATE", schedule(queue), schedule(GOOD))


def test_a_bad_job_template_is_refused_naming_the_field() -> None:
    """The same checks as the operator and ``tickwork sync``: the template as a batch/v1
    JobTemplateSpec, and exactly one of spec.job.kind and spec.jobTemplate."""
    pod = {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]}
    template = {"spec": {"template": {"spec": pod}}}
    good = {"schedule": "0 3 * * *", "jobTemplate": template}
    review("CREATE", schedule(good, uid="u-1"))
    imageless = {"restartPolicy": "Never", "containers": [{"name": "main"}]}
    bad = {**good, "jobTemplate": {"spec": {"template": {"spec": imageless}}}}
    with pytest.raises(
        Refused, match=r"^spec\.jobTemplate\.spec\.template\.spec\.containers\[0\]\.image: "
    ):
        review("CREATE", schedule(bad))
    with pytest.raises(Refused, match=r"^spec\.job\.kind: set exactly one of"):
        review("UPDATE", schedule({**good, "job": {"kind": "k"}}), schedule(good))


def test_removing_the_finalizer_of_an_invalid_object_is_allowed() -> None:
    """An object stored before the webhook existed (or before a policy tightened) keeps its
    invalid spec; its deletion must still complete."""
    review("UPDATE", schedule(BAD, finalizers=[], **DELETING), schedule(BAD, **DELETING))


def test_a_metadata_only_update_of_an_invalid_object_is_allowed() -> None:
    old = schedule(BAD)
    review("UPDATE", schedule(BAD, labels={"team": "a"}), old)
    review("UPDATE", schedule(BAD, finalizers=[]), old)
    kopfs = {"kopf.zalando.org/last-handled-configuration": "x"}
    review("UPDATE", schedule(BAD, annotations=kopfs), old)


def test_a_spec_change_of_an_object_being_deleted_is_allowed() -> None:
    review("UPDATE", schedule(BAD, **DELETING), schedule(GOOD, **DELETING))


def test_the_webhook_answers_without_a_database(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check reads no database: with every connection attempt failing, it still admits
    and refuses."""

    def refused(*_: Any, **__: Any) -> Any:
        raise psycopg.OperationalError("the database is down")

    monkeypatch.setattr(psycopg.Connection, "connect", refused)
    monkeypatch.setattr(psycopg.AsyncConnection, "connect", refused)
    review("CREATE", schedule(GOOD))
    with pytest.raises(Refused, match=r"^spec\.schedule: "):
        review("CREATE", schedule(BAD))


def test_what_is_not_an_admission_review_is_a_bad_request() -> None:
    async def policies() -> list[TenantPolicy]:
        raise AssertionError("not asked")

    for body in ({}, [], {"request": {"operation": "CREATE"}}, {"request": {"uid": 5}}):
        with pytest.raises(webhook.BadReview, match=r"request\.uid"):
            asyncio.run(webhook.answer(body, policies))


def test_policies_come_from_a_listing_until_the_watch_has_them_all() -> None:
    listed: list[int] = []
    complete = False
    watched = [TenantPolicy("w", ("ns",))]

    def listing() -> list[TenantPolicy]:
        listed.append(1)
        return [TenantPolicy("listed", ("ns",))]

    source = webhook.PolicySource(lambda: watched, lambda: complete, listing)
    assert asyncio.run(source.current())[0].name == "listed"
    assert asyncio.run(source.current())[0].name == "listed"
    assert len(listed) == 1, "a listing is reused for a few seconds"
    complete = True
    assert asyncio.run(source.current()) == tuple(watched)
    assert len(listed) == 1


# --- the server, started by the real operator (kmock plays the API server) ------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def post(port: int, cert: Path, body: Any) -> tuple[int, Any]:
    context = ssl.create_default_context(cafile=str(cert))
    url = f"https://127.0.0.1:{port}/{webhook.HANDLER_ID}"
    async with aiohttp.ClientSession() as session:
        data = json.dumps(body)
        async with session.post(url, data=data, ssl=context) as response:
            text = await response.text()
            return response.status, json.loads(text) if response.status == 200 else text


async def test_an_operator_started_while_the_database_is_down_serves_the_webhook(
    cluster: Cluster, certificate: tuple[Path, Path]
) -> None:
    """Nothing answers on the database's port: the operator waits to join the registry, and
    meanwhile its webhook answers over HTTPS, with the TenantPolicies listed from the API
    server (a policy allowing only the kind ``team.*`` refuses kind ``k``)."""
    await cluster.create_policy("ns", {"namespaces": ["ns"], "kinds": ["team.*"]})
    cert, key = certificate
    port = free_port()
    config = operator_config(
        f"postgresql://127.0.0.1:{free_port()}/none",
        webhook=True,
        webhook_port=port,
        webhook_addr="127.0.0.1",
        webhook_cert_file=str(cert),
        webhook_key_file=str(key),
    )
    run = asyncio.create_task(runner.run(config))
    try:

        async def answers() -> bool:
            try:
                await post(port, cert, {})
            except aiohttp.ClientConnectionError:
                return False
            return True

        await wait_until(answers, timeout=20, what="the webhook to answer")
        status, body = await post(port, cert, request("CREATE", schedule(BAD)))
        assert status == 200 and not body["response"]["allowed"]
        assert body["response"]["status"]["message"].startswith("spec.schedule: ")
        good = {**GOOD, "job": {"kind": "team.report"}}
        status, body = await post(port, cert, request("CREATE", schedule(good)))
        assert (status, body["response"]["allowed"]) == (200, True)
        status, body = await post(port, cert, request("CREATE", schedule(GOOD)))
        assert status == 200 and not body["response"]["allowed"]
        assert body["response"]["status"]["message"].startswith("spec.job.kind: ")
        status, text = await post(port, cert, {"kind": "AdmissionReview"})
        assert status == 400 and "request.uid" in text
        assert not run.done(), "still waiting to join: the database is down"
    finally:
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run


def test_the_webhook_needs_a_certificate() -> None:
    with pytest.raises(ConfigurationError, match=r"--webhook .*needs --webhook-cert-file"):
        OperatorConfig("postgresql://x", webhook=True)
