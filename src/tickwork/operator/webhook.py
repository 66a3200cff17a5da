"""The optional validating admission webhook: ``kubectl apply`` of a Schedule the operator
would refuse (bad cron expression, unknown time zone, a value beyond docs/limits.md such as a
payload nested too deep or holding NUL, any field ``tickwork sync`` rejects) is refused at once,
with the same message naming the field. kopf serves it over TLS (the given
certificate, else a self-signed one it generates) and keeps the ValidatingWebhookConfiguration
up to date."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import kopf

from tickwork.operator.config import GROUP, PLURAL, VERSION, OperatorConfig
from tickwork.operator.translate import translate

CONFIGURATION_NAME = "tickwork.io"
"""The ValidatingWebhookConfiguration kopf creates and patches."""


def check(body: Mapping[str, Any], **_: Any) -> None:
    """Refuse a Schedule the operator would mark InvalidSpec, with the same message."""
    error = translate(body).error
    if error is not None:
        raise kopf.AdmissionError(error, code=422)


def register(registry: kopf.OperatorRegistry) -> None:
    kopf.on.validate(
        GROUP, VERSION, PLURAL, id="schedule", operations=["CREATE", "UPDATE"], registry=registry
    )(check)


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
