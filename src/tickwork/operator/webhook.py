"""The optional validating admission webhook: ``kubectl apply`` of a Schedule the operator
would refuse (bad cron expression, unknown time zone, a value beyond docs/limits.md such as a
payload nested too deep or holding NUL, any field ``tickwork sync`` rejects), or that the tenant
policies in force refuse (a ``spec.scheduleNamespace``, queue, kind, priority or concurrency key
beyond its namespace's TenantPolicy), is refused at once, with the same message naming the
field. Name conflicts between objects are the operator's to report (they need the index). kopf
serves it over TLS (the given certificate, else a self-signed one it generates) and keeps the
ValidatingWebhookConfiguration up to date."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import kopf

from tickwork.operator.config import GROUP, PLURAL, VERSION, OperatorConfig
from tickwork.operator.desired import entry_of, refusal
from tickwork.schedules.tenancy import TenantPolicy

CONFIGURATION_NAME = "tickwork.io"
"""The ValidatingWebhookConfiguration kopf creates and patches."""


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

    def schedule(body: kopf.Body, **_: Any) -> None:
        check(body, policies())

    kopf.on.validate(
        GROUP, VERSION, PLURAL, id="schedule", operations=["CREATE", "UPDATE"], registry=registry
    )(schedule)


def configure(settings: kopf.OperatorSettings, config: OperatorConfig) -> None:
    settings.admission.server = kopf.WebhookServer(
        addr=config.webhook_addr,
        port=config.webhook_port,
        host=config.webhook_host,
        certfile=config.webhook_cert_file,
        pkeyfile=config.webhook_key_file,
        cafile=config.webhook_ca_file,
    )
    settings.admission.managed = CONFIGURATION_NAME
