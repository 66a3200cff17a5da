"""The operator's settings, built once by the command line with :func:`tickwork.settings.load`
(flags over ``TICKWORK_*`` variables over these defaults)."""

from __future__ import annotations

import socket
from dataclasses import dataclass
from typing import ClassVar

from tickwork.errors import ConfigurationError
from tickwork.settings import WorkerSettings, label, setting
from tickwork.settings.fields import at_least, no_blank_item, not_blank, port, positive, validate

GROUP = "tickwork.io"
VERSION = "v1"
PLURAL = "schedules"
FINALIZER = "tickwork.io/schedule"
"""Kept on every Schedule until its definition is disabled in PostgreSQL."""
ANNOTATIONS_PREFIX = "tickwork.io"
"""kopf's own bookkeeping (handler progress, last handled spec) lives in annotations here."""


@dataclass(frozen=True)
class OperatorConfig:
    ENV_PREFIX: ClassVar[str] = "TICKWORK_"

    database_url: str = setting(
        "libpq connection string of the PostgreSQL database",
        group="database",
        default_doc="none (required)",
        metavar="URL",
        required=True,
    )
    namespaces: tuple[str, ...] = setting(
        "a Kubernetes namespace to watch (the operator's scope; repeatable)",
        group="operator",
        default=(),
        default_doc="all namespaces",
        flag="--namespace",
        env="TICKWORK_NAMESPACE",
        metavar="NS",
        repeatable=True,
        checks=[no_blank_item],
    )
    cluster_name: str = setting(
        "the operator owns its schedule namespaces as operator:NAME",
        group="operator",
        default="default",
        metavar="NAME",
        checks=[not_blank],
    )
    identity: str = setting(
        "this operator's name in the operators' registry; a start under the identity of a "
        "registered operator replaces its entry",
        group="operator",
        default_factory=socket.gethostname,
        default_doc="the host name (in a pod, the pod's name)",
        metavar="NAME",
        checks=[not_blank],
    )
    registry_ttl: float = setting(
        "seconds a registry entry stays live without a heartbeat (one every third of this)",
        group="operator",
        default=30.0,
        checks=[positive],
    )
    start_wait: float = setting(
        "at start, how long to wait for a live operator of an overlapping scope to go before "
        "refusing to start",
        group="operator",
        default=60.0,
        checks=[at_least(0)],
    )
    http_port: int = setting(
        "port of /metrics, /healthz, /readyz (the worker's and the console's defaults differ, "
        "so all three run side by side on one machine; the chart sets each port explicitly)",
        group="http",
        default=9092,
        metavar="PORT",
        checks=[port],
    )
    http_host: str = setting(
        "address the HTTP port listens on",
        group="http",
        default="0.0.0.0",
        metavar="ADDRESS",
        checks=[not_blank],
    )
    peering: str = setting(
        "kopf peering object: one operator of the same name is active at a time",
        group="operator",
        default="tickwork",
        metavar="NAME",
    )
    standalone: bool = setting("no peering at all", group="operator", default=False)
    peering_priority: int | None = setting(
        "kopf peering priority: of the live operators of one peering object, the one of the "
        "highest priority is active, the others wait as standbys (equal priorities pause "
        "each other)",
        group="operator",
        default=None,
        default_doc="derived from the start time: the longest-running operator stays active",
        metavar="N",
    )
    peering_lifetime: int = setting(
        "seconds a peer counts as alive after its last keep-alive (kopf sends one every 1 to "
        "lifetime - 5 seconds): a killed active operator is replaced after at most this long",
        group="operator",
        default=10,
        checks=[at_least(2)],
    )
    status_interval: float = setting(
        "seconds between status refreshes from PostgreSQL",
        group="operator",
        default=10.0,
        checks=[positive],
    )
    status_concurrency: int = setting(
        "status patches in flight at once: each status round patches only the Schedules whose "
        "status changed, at most this many requests at a time",
        group="operator",
        default=10,
        checks=[positive],
    )
    live_worker_seconds: float = setting(
        "a worker seen within this long is alive, for the Served condition (the workers' own "
        "expiry time, --worker-ttl-seconds)",
        group="operator",
        default=WorkerSettings.worker_ttl_seconds,
        checks=[positive],
    )
    event_window_seconds: float = setting(
        "at most one Event per reason per Schedule within this many seconds (SuccessfulCreate, "
        "SawCompletedJob, JobFailed, SkippedOccurrences); what happens meanwhile is counted "
        "into the next one (0: every change posts one)",
        group="operator",
        default=60.0,
        checks=[at_least(0)],
    )
    webhook: bool = setting(
        "serve the validating admission webhook over HTTPS with --webhook-cert-file (the "
        "chart ships its ValidatingWebhookConfiguration; the operator registers none)",
        group="webhook",
        default=False,
    )
    webhook_skip_access_review: bool = setting(
        "admit container Schedules (spec.jobTemplate) without asking the API server whether "
        "the requesting user may create jobs.batch in their namespace (a SubjectAccessReview): "
        "whoever may write a Schedule may then have the workers create any Job the "
        "TenantPolicies allow there (docs/containers.md)",
        group="webhook",
        default=False,
    )
    webhook_port: int = setting(
        "the webhook's HTTPS port", group="webhook", default=9443, metavar="PORT", checks=[port]
    )
    webhook_addr: str = setting(
        "address the webhook server listens on",
        group="webhook",
        default="0.0.0.0",
        metavar="ADDRESS",
    )
    webhook_cert_file: str | None = setting(
        "TLS certificate (PEM) the webhook serves, e.g. from a cert-manager Secret; "
        "required with --webhook (read at start)",
        group="webhook",
        default=None,
        default_doc="none",
        metavar="PATH",
    )
    webhook_key_file: str | None = setting(
        "the certificate's private key (PEM)",
        group="webhook",
        default=None,
        default_doc="none",
        metavar="PATH",
    )
    coalesce_seconds: float = setting(
        "a sync round starts once no change came for this long (bursts coalesce)...",
        group="sync",
        default=0.2,
        checks=[positive],
    )
    coalesce_max_seconds: float = setting(
        "...or once the first change has waited this long",
        group="sync",
        default=2.0,
        checks=[positive],
    )
    retry_max_seconds: float = setting(
        "longest wait between retries of a failed sync (the delay doubles from 0.5 s)",
        group="sync",
        default=30.0,
        checks=[positive],
    )
    listing_interval: float = setting(
        "seconds between checks of the complete-view barrier at start, and between reads of "
        "the peering object (which operator is active)",
        group="sync",
        default=1.0,
        checks=[positive],
    )
    database_timeout: float = setting(
        "a database call waits this long for a connection before it counts as a failure",
        group="database",
        default=5.0,
        checks=[positive],
    )

    def __post_init__(self) -> None:
        if not self.database_url:
            raise ConfigurationError("--database-url (or TICKWORK_DATABASE_URL) is required")
        validate(self)
        if (self.webhook_cert_file is None) != (self.webhook_key_file is None):
            raise ConfigurationError(
                f"{label(OperatorConfig, 'webhook_cert_file')} and "
                f"{label(OperatorConfig, 'webhook_key_file')} go together"
            )
        if self.webhook and self.webhook_cert_file is None:
            raise ConfigurationError(
                f"{label(OperatorConfig, 'webhook')} needs "
                f"{label(OperatorConfig, 'webhook_cert_file')} and "
                f"{label(OperatorConfig, 'webhook_key_file')}: the API server calls it over HTTPS"
            )

    @property
    def owner(self) -> str:
        """The owner recorded for the schedule namespaces this operator syncs."""
        return f"operator:{self.cluster_name}"
