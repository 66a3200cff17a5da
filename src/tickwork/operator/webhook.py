"""The optional validating admission webhook: ``kubectl apply`` of a Schedule the operator
would refuse (bad cron expression, unknown time zone, a value beyond docs/limits.md such as a
payload nested too deep or holding NUL, any field ``tickwork sync`` rejects), or that the tenant
policies in force refuse (a ``spec.scheduleNamespace``, queue, kind, priority or concurrency key
beyond its namespace's TenantPolicy), is refused at once, with the same message naming the
field. Name conflicts between objects are the operator's to report (they need the index).

A container Schedule (``spec.jobTemplate``) makes tickwork's workers create Jobs in its
namespace, so unless the operator runs with ``--webhook-skip-access-review`` the webhook also
asks the API server whether the requesting user may ``create`` ``jobs.batch`` there
(:mod:`tickwork.operator.access`) and refuses the Schedule otherwise: on CREATE, on an UPDATE
that changes the spec of a Schedule that has (or gets) a ``jobTemplate``, and on one that sets
a new ``tickwork.io/run-now`` token on it. Other metadata-only updates (kopf's finalizer and
annotations, labels) and status writes are not asked about. A review that fails refuses the
container Schedule (fails closed); other Schedules need no review.

It never stands in the way of a delete or of the finalizer's removal: it is called for CREATE
and UPDATE only, and an UPDATE that leaves the spec as it was (metadata only: finalizers,
labels, kopf's annotations) is allowed even when the stored spec is invalid.

The check reads no database (the translation, the tenant policies, the access review), so it
answers while the database is down, and its server (:class:`WebhookServer`, HTTPS with the given
certificate) starts with the probes, before the operator joins the registry — which needs the
database — and before kopf watches anything. Until the operator's own TenantPolicy watch has
its complete view, the policies come from a listing of the API server (:class:`PolicySource`).
The operator does not create or change any ValidatingWebhookConfiguration: the chart ships it
(the webhook ``WEBHOOK_NAME`` at the path ``/HANDLER_ID``; docs/operator.md shows one to apply
by hand), so the operator needs no RBAC on webhook configurations; it needs ``create`` on
``subjectaccessreviews`` for the access review."""

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
from tickwork.operator import access, run_now
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


def runs_jobs(
    operation: str, body: Mapping[str, Any], old: Mapping[str, Any] | None
) -> tuple[str, str] | None:
    """(field, why) when the request makes a container Schedule's Jobs run on the requesting
    user's behalf: a CREATE, a spec change, or a new run-now token; else None."""
    spec = body.get("spec")
    if operation not in OPERATIONS or not isinstance(spec, Mapping):
        return None
    if spec.get("jobTemplate") is None:
        return None
    if not admitted_unchecked(operation, body, old):
        return "spec.jobTemplate", "a container Schedule runs as a Job there"
    metadata = body.get("metadata")
    if old is None or not isinstance(metadata, Mapping) or metadata.get("deletionTimestamp"):
        return None
    token = _run_now(body)
    if token is None or token == _run_now(old):
        return None
    return (
        f'metadata.annotations["{run_now.ANNOTATION}"]',
        "running a container Schedule now creates a Job there",
    )


def _run_now(body: Mapping[str, Any]) -> Any:
    metadata = body.get("metadata")
    annotations = metadata.get("annotations") if isinstance(metadata, Mapping) else None
    return annotations.get(run_now.ANNOTATION) if isinstance(annotations, Mapping) else None


class BadReview(Exception):
    """The request is not an AdmissionReview (answered 400)."""


AccessCheck = Callable[[Mapping[str, Any], str], Awaitable[bool]]
"""Whether a user (an AdmissionReview's ``userInfo``) may create Jobs in a namespace
(:func:`tickwork.operator.access.may_create_jobs`)."""


async def answer(
    review: Any,
    policies: Callable[[], Awaitable[Iterable[TenantPolicy]]],
    may_create_jobs: AccessCheck | None = None,
) -> dict[str, Any]:
    """The AdmissionReview answering ``review`` (``admission.k8s.io/v1``). ``policies`` is
    awaited only when the check runs; ``may_create_jobs`` (None: no access review) only for
    a request that makes a container Schedule's Jobs run."""
    request = review.get("request") if isinstance(review, Mapping) else None
    if not isinstance(request, Mapping) or not isinstance(request.get("uid"), str):
        raise BadReview("not an AdmissionReview: request.uid is missing")
    body, old = request.get("object"), request.get("oldObject")
    body = body if isinstance(body, Mapping) else {}
    old = old if isinstance(old, Mapping) else None
    operation = str(request.get("operation"))
    problem = None
    if not admitted_unchecked(operation, body, old):
        message = refused(body, await policies())
        problem = None if message is None else (422, "Invalid", message)
    jobs = runs_jobs(operation, body, old)
    if problem is None and jobs is not None and may_create_jobs is not None:
        problem = await _access_problem(request, body, jobs, may_create_jobs)
    response: dict[str, Any] = {"uid": request["uid"], "allowed": problem is None}
    if problem is not None:
        code, reason, message = problem
        response["status"] = {"code": code, "reason": reason, "message": message}
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}


async def _access_problem(
    request: Mapping[str, Any],
    body: Mapping[str, Any],
    jobs: tuple[str, str],
    may_create_jobs: AccessCheck,
) -> tuple[int, str, str] | None:
    user = request.get("userInfo")
    user = user if isinstance(user, Mapping) else {}
    metadata = body.get("metadata")
    namespace = request.get("namespace") or (
        metadata.get("namespace") if isinstance(metadata, Mapping) else None
    )
    namespace = namespace if isinstance(namespace, str) else ""
    field, why = jobs
    try:
        if await may_create_jobs(user, namespace):
            return None
    except access.ReviewFailed as error:
        log.warning(
            "webhook: cannot review %s's access: %s",
            access.user_of(user),
            error,
            extra=fields(action="refuse"),
        )
        return 503, "ServiceUnavailable", access.unknown(field, user, namespace, error)
    return 403, "Forbidden", access.denied(field, user, namespace, why)


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

    def __init__(
        self,
        config: OperatorConfig,
        policies: PolicySource,
        may_create_jobs: AccessCheck | None = access.may_create_jobs,
    ) -> None:
        self.config = config
        self.policies = policies
        self.may_create_jobs = None if config.webhook_skip_access_review else may_create_jobs
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
            answered = await answer(
                json.loads(await request.read()), self.policies.current, self.may_create_jobs
            )
        except (ValueError, RecursionError, BadReview) as error:  # JSONDecodeError: ValueError
            return web.Response(status=400, text=f"{error}\n")
        except Exception as error:  # the API server's listing: failurePolicy decides
            log.warning(
                "webhook: cannot read the tenant policies: %s", error, extra=fields(action="refuse")
            )
            return web.Response(status=503, text="cannot read the TenantPolicies\n")
        return web.json_response(answered)
