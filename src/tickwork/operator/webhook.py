"""The optional validating admission webhook: ``kubectl apply`` of a Schedule the operator
would refuse (bad cron expression, unknown time zone, a value beyond docs/limits.md such as a
payload nested too deep or holding NUL, any field ``tickwork sync`` rejects), or that the tenant
policies in force refuse (a ``spec.scheduleNamespace``, queue, kind, priority or concurrency key
beyond its namespace's TenantPolicy), is refused at once, with the same message naming the
field. Name conflicts between objects are the operator's to report (they need the index).

It never stands in the way of a delete or of the finalizer's removal: it is called for CREATE
and UPDATE only, and an UPDATE that leaves the spec as it was (metadata only: finalizers,
labels, kopf's annotations) is allowed even when the stored spec is invalid. The check is pure
(the translation and the tenant policies the watch holds in memory): it answers while the
database is down. kopf serves it over TLS (the given certificate, else a self-signed one it
generates); the operator does not create or change any ValidatingWebhookConfiguration: the
chart ships it (the webhook ``WEBHOOK_NAME`` at the path ``/HANDLER_ID``; docs/operator.md
shows one to apply by hand), so the operator needs no RBAC on webhook configurations."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal

import kopf

from tickwork.operator.config import GROUP, PLURAL, VERSION, OperatorConfig
from tickwork.operator.desired import entry_of, refusal
from tickwork.schedules.tenancy import TenantPolicy

WEBHOOK_NAME = "schedule.tickwork.io"
"""The webhook's name in the ValidatingWebhookConfiguration."""
HANDLER_ID = "schedule"
"""kopf serves the check at the path ``/schedule``."""
OPERATIONS: tuple[Literal["CREATE"], Literal["UPDATE"]] = ("CREATE", "UPDATE")


def check(body: Mapping[str, Any], policies: Iterable[TenantPolicy] = ()) -> None:
    """Refuse a Schedule the operator would mark InvalidSpec, NamespaceNotAllowed or
    PolicyViolation, with the same message."""
    entry = entry_of(body)
    refused = refusal(entry, policies)
    error = refused.message if refused is not None else entry.translation.error
    if error is not None:
        raise kopf.AdmissionError(error, code=422)


def register(
    registry: kopf.OperatorRegistry, policies: Callable[[], Iterable[TenantPolicy]]
) -> None:
    """Serve the check with the policies in force (``policies`` reads them per request)."""

    def schedule(body: kopf.Body, **request: Any) -> None:
        if admitted_unchecked(str(request.get("operation")), body, request.get("old")):
            return
        check(body, policies())

    kopf.on.validate(
        GROUP, VERSION, PLURAL, id=HANDLER_ID, operations=list(OPERATIONS), registry=registry
    )(schedule)


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


def configure(settings: kopf.OperatorSettings, config: OperatorConfig) -> None:
    settings.admission.server = kopf.WebhookServer(
        addr=config.webhook_addr,
        port=config.webhook_port,
        host=config.webhook_host,
        certfile=config.webhook_cert_file,
        pkeyfile=config.webhook_key_file,
    )
