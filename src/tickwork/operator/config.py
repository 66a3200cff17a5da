"""The operator's settings, built once by the command line (flags and ``TICKWORK_*``)."""

from __future__ import annotations

import socket
from dataclasses import dataclass, field

from tickwork.errors import ConfigurationError

GROUP = "tickwork.io"
VERSION = "v1"
PLURAL = "schedules"
FINALIZER = "tickwork.io/schedule"
"""Kept on every Schedule until its definition is disabled in PostgreSQL."""
ANNOTATIONS_PREFIX = "tickwork.io"
"""kopf's own bookkeeping (handler progress, last handled spec) lives in annotations here."""


@dataclass(frozen=True)
class OperatorConfig:
    database_url: str
    """libpq connection string of the PostgreSQL database."""
    namespaces: tuple[str, ...] = ()
    """Kubernetes namespaces to watch (the operator's scope); empty: all of them."""
    cluster_name: str = "default"
    """The operator owns its schedule namespaces as ``operator:<cluster_name>``."""
    identity: str = field(default_factory=socket.gethostname)
    """This operator's name in the registry (default: the host name, in a pod the pod's
    name); a start under the identity of a registered operator replaces its entry."""
    registry_ttl: float = 30.0
    """Seconds a registry entry stays live without a heartbeat (one every third of this)."""
    start_wait: float = 60.0
    """At start, how long to wait for a live operator of an overlapping scope to go before
    refusing to start."""
    http_port: int = 9092
    """/metrics, /healthz, /readyz (the worker defaults to 9090 and the console to 9091, so all
    three run side by side on one machine; the chart sets each port explicitly)."""
    http_host: str = "0.0.0.0"
    peering: str = "tickwork"
    """kopf peering object: one operator of the same name is active at a time."""
    standalone: bool = False
    """No peering at all."""
    status_interval: float = 10.0
    """Seconds between status refreshes from PostgreSQL."""
    webhook: bool = False
    """Serve kopf's validating admission webhook (and register it with the API server)."""
    webhook_port: int = 9443
    webhook_addr: str = "0.0.0.0"
    """Address the webhook server listens on."""
    webhook_host: str | None = None
    """Host name the API server calls the webhook at (the Service's DNS name); default: the
    pod's own address as kopf detects it."""
    webhook_cert_file: str | None = None
    """TLS certificate (PEM) the webhook serves, e.g. from a cert-manager Secret; unset: kopf
    generates a self-signed one, which needs the ``certbuilder`` package."""
    webhook_key_file: str | None = None
    """Its private key (PEM)."""
    webhook_ca_file: str | None = None
    """CA bundle the API server verifies the webhook with; default: the certificate itself."""
    coalesce_seconds: float = 0.2
    """A sync round starts once no change came for this long (bursts coalesce)..."""
    coalesce_max_seconds: float = 2.0
    """...or once the first change has waited this long."""
    retry_max_seconds: float = 30.0
    """Longest wait between retries of a failed sync (the delay doubles from 0.5 s)."""
    listing_interval: float = 1.0
    """Seconds between checks of the complete-view barrier at start."""
    database_timeout: float = 5.0
    """A database call waits this long for a connection before it counts as a failure."""

    def __post_init__(self) -> None:
        if not self.database_url:
            raise ConfigurationError("--database-url (or TICKWORK_DATABASE_URL) is required")
        if not self.cluster_name.strip():
            raise ConfigurationError("--cluster-name: must not be empty")
        if not self.identity.strip():
            raise ConfigurationError("--identity: must not be empty")
        if any(not ns.strip() for ns in self.namespaces):
            raise ConfigurationError("--namespace: must not be empty")
        if self.start_wait < 0:
            raise ConfigurationError("start_wait: must not be negative")
        for name in (
            "registry_ttl",
            "status_interval",
            "coalesce_seconds",
            "coalesce_max_seconds",
            "retry_max_seconds",
        ):
            if getattr(self, name) <= 0:
                raise ConfigurationError(f"{name}: must be positive")
        if (self.webhook_cert_file is None) != (self.webhook_key_file is None):
            raise ConfigurationError("--webhook-cert-file and --webhook-key-file go together")
        for name in ("http_port", "webhook_port"):
            if not 0 <= getattr(self, name) <= 65535:
                raise ConfigurationError(f"{name}: must be a port number")

    @property
    def owner(self) -> str:
        """The owner recorded for the schedule namespaces this operator syncs."""
        return f"operator:{self.cluster_name}"
