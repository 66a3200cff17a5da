"""Typed settings for the long-running processes, built once from flags and ``TICKWORK_*``
environment variables (flags win). Every field's default is documented here, and
``tickwork worker --help`` prints the same text."""

from __future__ import annotations

import dataclasses
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tickwork.errors import ConfigurationError


def default_worker_name() -> str:
    """``$POD_NAME`` in Kubernetes, otherwise ``hostname-pid``."""
    return os.environ.get("POD_NAME") or f"{socket.gethostname()}-{os.getpid()}"


POOLERS = ("none", "transaction")


def _doc(text: str) -> dict[str, Any]:
    return {"doc": text}


@dataclass(frozen=True)
class WorkerSettings:
    database_url: str = field(
        default="", metadata=_doc("libpq connection string of the PostgreSQL database (required)")
    )
    app: str = field(default="", metadata=_doc("the App to serve, as MODULE:ATTRIBUTE (required)"))
    pooler: str = field(
        default="none",
        metadata=_doc(
            "'transaction' when --database-url goes through a transaction-mode pooler "
            "(PgBouncer pool_mode=transaction): no LISTEN on it, notifications come from "
            "--listen-url or, without one, by polling; default 'none' (direct, or a "
            "session-mode pooler)"
        ),
    )
    listen_url: str = field(
        default="",
        metadata=_doc(
            "connection string for LISTEN (a direct connection to PostgreSQL, past the "
            "pooler); default: --database-url unless --pooler transaction"
        ),
    )
    queues: tuple[str, ...] = field(
        default=(),
        metadata=_doc(
            "queues to claim from; default: 'default' plus the queues of the registered tasks"
        ),
    )
    namespaces: tuple[str, ...] = field(
        default=(),
        metadata=_doc("schedule namespaces this worker fires; default: none (fires nothing)"),
    )
    concurrency: int = field(default=10, metadata=_doc("jobs run at the same time"))
    name: str = field(
        default="",
        metadata=_doc(
            "worker name in leases and the workers table; default $POD_NAME or hostname-pid"
        ),
    )
    lease_seconds: float = field(
        default=30.0, metadata=_doc("how long a claimed job stays ours without a heartbeat")
    )
    heartbeat_seconds: float = field(
        default=10.0, metadata=_doc("how often leases are extended (missed cancellations seen)")
    )
    poll_seconds: float = field(
        default=2.0, metadata=_doc("fallback poll interval when no notification arrives")
    )
    claim_batch: int = field(default=500, metadata=_doc("most jobs claimed by one statement"))
    prefetch: int = field(
        default=0,
        metadata=_doc(
            "jobs claimed ahead of free slots, handed back at shutdown; default: concurrency"
        ),
    )
    shutdown_grace_seconds: float = field(
        default=30.0, metadata=_doc("on SIGTERM/SIGINT, how long running jobs may take to finish")
    )
    retention_seconds: float = field(
        default=7 * 86400.0,
        metadata=_doc("finished jobs older than this are deleted (default 7 days)"),
    )
    retention_batch: int = field(
        default=1000, metadata=_doc("jobs deleted per retention statement")
    )
    maintenance_seconds: float = field(
        default=5.0,
        metadata=_doc(
            "how often each maintenance duty (lease recovery, retention, worker expiry) runs "
            "somewhere in the fleet"
        ),
    )
    worker_ttl_seconds: float = field(
        default=120.0, metadata=_doc("a worker row not refreshed for this long is removed")
    )
    gauges_seconds: float = field(
        default=15.0,
        metadata=_doc(
            "how often one worker in the fleet samples the fleet gauges (tickwork_fleet_*) "
            "from the database (default 15)"
        ),
    )
    http_port: int = field(
        default=9090,
        metadata=_doc("port serving /metrics, /healthz and /readyz (default 9090); 0 turns it off"),
    )
    http_host: str = field(
        default="0.0.0.0",
        metadata=_doc("address the HTTP port listens on (default 0.0.0.0: every interface)"),
    )

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise ConfigurationError("concurrency: must be at least 1")
        for name in (
            "lease_seconds",
            "heartbeat_seconds",
            "poll_seconds",
            "maintenance_seconds",
            "worker_ttl_seconds",
            "retention_seconds",
            "gauges_seconds",
        ):
            if getattr(self, name) <= 0:
                raise ConfigurationError(f"{name}: must be positive")
        if self.heartbeat_seconds >= self.lease_seconds:
            raise ConfigurationError("heartbeat_seconds: must be shorter than lease_seconds")
        if self.claim_batch < 1 or self.retention_batch < 1:
            raise ConfigurationError("claim_batch and retention_batch must be at least 1")
        if self.prefetch < 0 or self.shutdown_grace_seconds < 0:
            raise ConfigurationError("prefetch and shutdown_grace_seconds must be >= 0")
        if not 0 <= self.http_port <= 65535:
            raise ConfigurationError("http_port: must be between 0 (off) and 65535")
        if self.pooler not in POOLERS:
            raise ConfigurationError(f"pooler: {self.pooler!r} is not one of {', '.join(POOLERS)}")
        if not self.http_host:
            raise ConfigurationError("http_host: must not be empty")

    @property
    def notifications_url(self) -> str:
        """Where the worker LISTENs; empty: nowhere (it polls)."""
        if self.listen_url:
            return self.listen_url
        return "" if self.pooler == "transaction" else self.database_url

    @property
    def effective_prefetch(self) -> int:
        return self.prefetch or self.concurrency


def env_name(field_name: str) -> str:
    return "TICKWORK_" + field_name.upper()


def _convert(name: str, kind: Any, raw: Any) -> Any:
    try:
        if kind in ("tuple[str, ...]",) and isinstance(raw, str):
            return tuple(part.strip() for part in raw.split(",") if part.strip())
        if kind == "int":
            return int(raw)
        if kind == "float":
            return float(raw)
    except ValueError:
        raise ConfigurationError(f"{name}: {raw!r} is not a valid {kind}") from None
    return raw


def build_worker_settings(flags: Mapping[str, Any], env: Mapping[str, str]) -> WorkerSettings:
    """Flags (``None`` = not given) over ``TICKWORK_*`` variables over defaults."""
    values: dict[str, Any] = {}
    for f in dataclasses.fields(WorkerSettings):
        raw = flags.get(f.name)
        source = f"--{f.name.replace('_', '-')}"
        if raw is None and env_name(f.name) in env:
            raw, source = env[env_name(f.name)], env_name(f.name)
        if raw is not None:
            values[f.name] = _convert(source, f.type, raw)
    values.setdefault("name", default_worker_name())
    for required in ("database_url", "app"):
        if not values.get(required):
            raise ConfigurationError(
                f"--{required.replace('_', '-')} (or {env_name(required)}) is required"
            )
    return WorkerSettings(**values)
