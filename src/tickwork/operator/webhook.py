"""The optional validating admission webhook: ``kubectl apply`` of a Schedule the operator
would refuse (bad cron expression, unknown time zone, a value beyond docs/limits.md such as a
payload nested too deep or holding NUL, any field ``tickwork sync`` rejects), or that the tenant
policies in force refuse (a ``spec.scheduleNamespace``, queue, kind, priority or concurrency key
beyond its namespace's TenantPolicy), is refused at once, with the same message naming the
field. Name conflicts between objects are the operator's to report (they need the index).

It never stands in the way of a delete or of the finalizer's removal: it is called for CREATE
and UPDATE only, and an UPDATE that leaves the spec as it was (metadata only: finalizers,
labels, kopf's annotations) is allowed even when the stored spec is invalid.

The check is pure (the translation and the tenant policies), so it answers while the database
is down, and its server (:class:`WebhookServer`, HTTPS with the given certificate) starts with
the probes, before the operator joins the registry — which needs the database — and before kopf
watches anything. Until the operator's own TenantPolicy watch has its complete view, the
policies come from a listing of the API server (:class:`PolicySource`). The operator does not
create or change any ValidatingWebhookConfiguration: the chart ships it (the webhook
``WEBHOOK_NAME`` at the path ``/HANDLER_ID``; docs/operator.md shows one to apply by hand), so
the operator needs no RBAC on webhook configurations."""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from aiohttp import web

from tickwork.errors import ConfigurationError
from tickwork.http import listen, server_name
from tickwork.logs import fields
from tickwork.operator.config import OperatorConfig
from tickwork.operator.desired import entry_of, refusal
from tickwork.schedules.tenancy import TenantPolicy

log = logging.getLogger(__name__)

WEBHOOK_NAME = "schedule.tickwork.io"
"""The webhook's name in the ValidatingWebhookConfiguration."""
HANDLER_ID = "schedule"
"""The check is served at the path ``/schedule``."""
OPERATIONS = ("CREATE", "UPDATE")
MAX_REVIEW_BYTES = 8 * 1024 * 1024
"""Largest AdmissionReview read: an object and its old version, each at most the API server's
request limit (3 MiB), with room for the envelope."""
LISTING_TTL_SECONDS = 5.0
"""Before the watch's complete view, a listing of the TenantPolicies is reused this long."""


def refused(body: Mapping[str, Any], policies: Iterable[TenantPolicy] = ()) -> str | None:
    """Why the operator would mark ``body`` InvalidSpec, NamespaceNotAllowed or
    PolicyViolation (the same message), or None."""
    entry = entry_of(body)
    refused = refusal(entry, policies)
    return refused.message if refused is not None else entry.translation.error


def admitted_unchecked(
    operation: str, body: Mapping[str, Any], old: Mapping[str, Any] | None
) -> bool:
    """Whether a request passes without the check: anything but CREATE and UPDATE, an UPDATE
    that leaves the spec as it was, and an UPDATE of an object being deleted."""
    if operation not in OPERATIONS:
        return True
    if operation == "CREATE" or old is None:
        return False
    metadata = body.get("metadata")
    deleting = isinstance(metadata, Mapping) and bool(metadata.get("deletionTimestamp"))
    return deleting or body.get("spec") == old.get("spec")


class BadReview(Exception):
    """The request is not an AdmissionReview (answered 400)."""


async def answer(
    review: Any, policies: Callable[[], Awaitable[Iterable[TenantPolicy]]]
) -> dict[str, Any]:
    """The AdmissionReview answering ``review`` (``admission.k8s.io/v1``). ``policies`` is
    awaited only when the check runs."""
    request = review.get("request") if isinstance(review, Mapping) else None
    if not isinstance(request, Mapping) or not isinstance(request.get("uid"), str):
        raise BadReview("not an AdmissionReview: request.uid is missing")
    body, old = request.get("object"), request.get("oldObject")
    body = body if isinstance(body, Mapping) else {}
    old = old if isinstance(old, Mapping) else None
    problem = None
    if not admitted_unchecked(str(request.get("operation")), body, old):
        problem = refused(body, await policies())
    response: dict[str, Any] = {"uid": request["uid"], "allowed": problem is None}
    if problem is not None:
        response["status"] = {"code": 422, "reason": "Invalid", "message": problem}
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}


class PolicySource:
    """The tenant policies the check applies: the operator's watch once it holds every
    TenantPolicy (``complete`` says when), until then a listing of the API server (``list``,
    blocking: run in a thread), reused for :data:`LISTING_TTL_SECONDS`."""

    def __init__(
        self,
        watched: Callable[[], Iterable[TenantPolicy]],
        complete: Callable[[], bool],
        list: Callable[[], Iterable[TenantPolicy]],
    ) -> None:
        self._watched, self._complete, self._list = watched, complete, list
        self._listed: tuple[float, tuple[TenantPolicy, ...]] | None = None

    async def current(self) -> tuple[TenantPolicy, ...]:
        if self._complete():
            return tuple(self._watched())
        now = time.monotonic()
        if self._listed is None or now - self._listed[0] > LISTING_TTL_SECONDS:
            self._listed = (now, tuple(await asyncio.to_thread(self._list)))
        return self._listed[1]


class WebhookServer:
    """Serve the check over HTTPS at ``/HANDLER_ID`` on the configured address and port."""

    def __init__(self, config: OperatorConfig, policies: PolicySource) -> None:
        self.config = config
        self.policies = policies
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        config = self.config
        assert config.webhook_cert_file is not None and config.webhook_key_file is not None
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        try:
            context.load_cert_chain(config.webhook_cert_file, config.webhook_key_file)
        except (OSError, ssl.SSLError) as error:
            files = f"{config.webhook_cert_file}, {config.webhook_key_file}"
            raise ConfigurationError(
                f"--webhook-cert-file, --webhook-key-file: cannot load {files}: {error}"
            ) from None
        app = web.Application(middlewares=[server_name], client_max_size=MAX_REVIEW_BYTES)
        app.add_routes([web.post(f"/{HANDLER_ID}", self._review)])
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(
            self._runner, config.webhook_addr, config.webhook_port, ssl_context=context
        )
        await listen(site, config.webhook_addr, config.webhook_port, flag="--webhook-port")

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _review(self, request: web.Request) -> web.Response:
        try:
            answered = await answer(json.loads(await request.read()), self.policies.current)
        except (ValueError, RecursionError, BadReview) as error:  # JSONDecodeError: ValueError
            return web.Response(status=400, text=f"{error}\n")
        except Exception as error:  # the API server's listing: failurePolicy decides
            log.warning(
                "webhook: cannot read the tenant policies: %s", error, extra=fields(action="refuse")
            )
            return web.Response(status=503, text="cannot read the TenantPolicies\n")
        return web.json_response(answered)
