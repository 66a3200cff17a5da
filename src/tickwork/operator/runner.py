"""Run the operator: kopf with tickwork's handlers and settings, plus the probe server
(``/metrics``, ``/healthz``, ``/readyz``) on the configured port."""

from __future__ import annotations

import logging
from typing import Any

import kopf

from tickwork.http import ProbeServer, database_readiness
from tickwork.operator import handlers, webhook
from tickwork.operator.config import ANNOTATIONS_PREFIX, FINALIZER, OperatorConfig
from tickwork.operator.database import Database

WATCH_SERVER_TIMEOUT_SECONDS = 300
"""The API server ends each watch request after this long; kopf reconnects at once."""


def operator_settings(config: OperatorConfig) -> kopf.OperatorSettings:
    settings = kopf.OperatorSettings()
    settings.persistence.finalizer = FINALIZER
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(
        prefix=ANNOTATIONS_PREFIX
    )
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=ANNOTATIONS_PREFIX, key="last-handled-configuration"
    )
    settings.posting.level = logging.WARNING
    settings.watching.server_timeout = WATCH_SERVER_TIMEOUT_SECONDS
    if config.webhook:
        webhook.configure(settings, config)
    return settings


async def run(config: OperatorConfig, **kopf_options: Any) -> None:
    """Serve until kopf stops (a signal in the main thread, or ``stop_flag`` among
    ``kopf_options``, which go to :func:`kopf.operator` as they are: ``ready_flag`` too)."""
    database = Database(config.database_url, timeout=config.database_timeout)
    runtime = handlers.Runtime(config, database)
    registry = kopf.OperatorRegistry()
    handlers.register(registry, runtime)
    if config.webhook:
        webhook.register(registry)
    probes = ProbeServer(
        config.http_port,
        host=config.http_host,
        liveness=runtime.alive,
        readiness=database_readiness(config.database_url),
    )
    await probes.start()
    try:
        await kopf.operator(
            registry=registry,
            settings=operator_settings(config),
            clusterwide=not config.namespaces,
            namespaces=list(config.namespaces),
            standalone=config.standalone,
            peering_name=None if config.standalone else config.peering,
            **kopf_options,
        )
    finally:
        await probes.stop()
        database.close()
