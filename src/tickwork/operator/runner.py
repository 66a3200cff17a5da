"""Run the operator: kopf with tickwork's handlers and settings, plus the probe server
(``/metrics``, ``/healthz``, ``/readyz``) on the configured port, the admission webhook when
asked (served from the start: it needs no database), and the operator's entry in the registry
(:mod:`tickwork.operator.registry`): kopf starts only once this operator has joined, and stops
when its entry goes to an overlapping operator. kopf peers under the registry's identity, with
the priority and lifetime of :mod:`tickwork.operator.peers`."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from typing import Any

import kopf
from kopf._core.engines import peering as kopf_peering

from tickwork.clock import Clock
from tickwork.db import budget, server
from tickwork.http import ProbeServer, database_readiness
from tickwork.logs import fields
from tickwork.operator import handlers, registry, tenants, webhook
from tickwork.operator.config import ANNOTATIONS_PREFIX, FINALIZER, OperatorConfig
from tickwork.operator.database import Database

log = logging.getLogger(__name__)

WATCH_SERVER_TIMEOUT_SECONDS = 300
"""The API server ends each watch request after this long; kopf reconnects at once."""


def operator_settings(config: OperatorConfig) -> kopf.OperatorSettings:
    settings = kopf.OperatorSettings()
    settings.peering.lifetime = config.peering_lifetime
    settings.persistence.finalizer = FINALIZER
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(
        prefix=ANNOTATIONS_PREFIX
    )
    # The payload (up to 64 KiB, and a refused one may be larger) stays out of kopf's
    # annotation: the API server limits all of an object's annotations to 256 KiB, and a
    # failing annotation patch would keep the object from ever showing why it is refused.
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=ANNOTATIONS_PREFIX,
        key="last-handled-configuration",
        ignored_fields=[("spec", "job", "payload")],
    )
    settings.posting.level = logging.WARNING
    settings.watching.server_timeout = WATCH_SERVER_TIMEOUT_SECONDS
    return settings


async def run(
    config: OperatorConfig,
    clock: Clock | None = None,
    http_fallbacks: Sequence[int] = (),
    **kopf_options: Any,
) -> None:
    """Serve until kopf stops (a signal in the main thread, or ``stop_flag`` among
    ``kopf_options``, which go to :func:`kopf.operator` as they are: ``ready_flag`` too).
    ``clock`` dates the status it writes (default: the database clock's wall time); the
    probes move to the first free one of ``http_fallbacks`` when their port is in use. Raises
    OperatorConflict when it may not start, or may not go on."""
    database = Database(
        config.database_url, timeout=config.database_timeout, scope=config.namespaces
    )
    membership = registry.Membership(database, config)
    runtime = handlers.Runtime(config, database, clock)
    kopf_registry = kopf.OperatorRegistry()
    handlers.register(kopf_registry, runtime)
    admission = None
    if config.webhook:
        policies = webhook.PolicySource(
            runtime.policies.current, lambda: runtime.policies_complete, tenants.listed_policies
        )
        admission = webhook.WebhookServer(config, policies)
    database_ready = database_readiness(config.database_url)

    async def readiness() -> str | None:
        return await database_ready() or await runtime.readiness()

    probes = ProbeServer(
        config.http_port,
        host=config.http_host,
        fallbacks=http_fallbacks,
        liveness=runtime.alive,
        readiness=readiness,
    )
    await probes.start()
    try:
        if admission is not None:  # before joining: it needs no database
            await admission.start()
        await asyncio.to_thread(server.check_at_start, config.database_url, budget.operator(), log)
        await membership.join()
        log.info(
            "metrics on http://%s:%d/metrics, with /healthz and /readyz%s",
            config.http_host,
            probes.port,
            probes.moved,
            extra=fields(action="http_started"),
        )
        operator = asyncio.create_task(
            kopf.operator(
                registry=kopf_registry,
                settings=operator_settings(config),
                clusterwide=not config.namespaces,
                namespaces=list(config.namespaces),
                standalone=config.standalone,
                peering_name=None if config.standalone else config.peering,
                identity=kopf_peering.Identity(config.identity),
                priority=runtime.priority,
                **kopf_options,
            )
        )
        heartbeat = asyncio.create_task(membership.keep())
        await asyncio.wait({operator, heartbeat}, return_when=asyncio.FIRST_COMPLETED)
        for task in (operator, heartbeat):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task  # raises what ended the run: OperatorConflict, kopf's error
    finally:
        await membership.leave()
        if admission is not None:
            await admission.stop()
        await probes.stop()
        database.close()
