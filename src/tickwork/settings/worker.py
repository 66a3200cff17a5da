"""The worker's settings (``tickwork worker``, and ``tickwork dev``'s worker)."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from typing import ClassVar

from tickwork.errors import ConfigurationError
from tickwork.settings.fields import at_least, label, not_blank, port, positive, setting, validate


def default_worker_name() -> str:
    """``$POD_NAME`` in Kubernetes, otherwise ``hostname-pid``."""
    return os.environ.get("POD_NAME") or f"{socket.gethostname()}-{os.getpid()}"


POOLERS = ("none", "transaction")
PREPARED_STATEMENTS = ("auto", "on", "off")

DATABASE = "database"
WORKER = "worker"
MAINTENANCE = "maintenance"
HTTP = "http"


@dataclass(frozen=True)
class WorkerSettings:
    ENV_PREFIX: ClassVar[str] = "TICKWORK_"

    database_url: str = setting(
        "libpq connection string of the PostgreSQL database",
        group=DATABASE,
        default="",
        default_doc="none (required)",
        metavar="URL",
        required=True,
    )
    app: str = setting(
        "the App to serve, as MODULE:ATTRIBUTE",
        group=WORKER,
        default="",
        default_doc="none (required)",
        metavar="MODULE:APP",
        required=True,
    )
    pooler: str = setting(
        "'transaction' when --database-url goes through a transaction-mode pooler "
        "(PgBouncer pool_mode=transaction): no LISTEN on it, notifications come from "
        "--listen-url or, without one, by polling; 'none': direct, or a session-mode pooler",
        group=DATABASE,
        default="none",
        metavar="none|transaction",
        choices=POOLERS,
    )
    prepared_statements: str = setting(
        "server-side prepared statements on the worker's pool (its claims, outcomes, firing "
        "and maintenance): parsed once per connection, planned once when "
        "PostgreSQL's generic plan is as cheap; 'auto': on, unless --pooler transaction "
        "(PgBouncer before 1.21, or without max_prepared_statements, cannot keep them)",
        group=DATABASE,
        default="auto",
        metavar="auto|on|off",
        choices=PREPARED_STATEMENTS,
    )
    listen_url: str = setting(
        "connection string for LISTEN (a direct connection to PostgreSQL, past the pooler)",
        group=DATABASE,
        default="",
        default_doc="--database-url unless --pooler transaction",
        metavar="URL",
    )
    queues: tuple[str, ...] = setting(
        "queues to claim from",
        group=WORKER,
        default=(),
        default_doc="'default' plus the queues of the registered tasks",
        metavar="Q1,Q2",
    )
    namespaces: tuple[str, ...] = setting(
        "schedule namespaces this worker fires",
        group=WORKER,
        default=(),
        default_doc="none (fires nothing)",
        metavar="NS1,NS2",
    )
    concurrency: int = setting(
        "jobs run at the same time", group=WORKER, default=10, checks=[at_least(1)]
    )
    name: str = setting(
        "worker name, for people (leases, heartbeats and adoption go by the process's own "
        "incarnation); a name a live worker holds is refused, or, when it is the default, "
        "given a suffix",
        group=WORKER,
        default="",
        default_doc="$POD_NAME, else hostname-pid",
        metavar="NAME",
        computed_default=default_worker_name,
    )
    lease_seconds: float = setting(
        "how long a claimed job stays ours without a heartbeat",
        group=WORKER,
        default=30.0,
        checks=[positive],
    )
    heartbeat_seconds: float = setting(
        "how often leases are extended (and cancellation requests seen); shorter than "
        "--lease-seconds",
        group=WORKER,
        default=10.0,
        checks=[positive],
    )
    poll_seconds: float = setting(
        "fallback poll interval when no notification arrives",
        group=WORKER,
        default=2.0,
        checks=[positive],
    )
    claim_batch: int = setting(
        "most jobs claimed by one statement",
        group=WORKER,
        default=500,
        checks=[at_least(1)],
    )
    prefetch: int | None = setting(
        "jobs claimed ahead of free slots, handed back at shutdown; a number fixes it",
        group=WORKER,
        default=None,
        default_doc="adaptive: twice what the slots start during one claim round trip "
        "(2 * concurrency * claim time / time per job), at most 2 * --claim-batch; none "
        "for jobs much slower than a claim, nor before the first jobs have run",
        checks=[at_least(0)],
    )
    shutdown_grace_seconds: float = setting(
        "on SIGTERM/SIGINT, how long running jobs may take to finish",
        group=WORKER,
        default=30.0,
        checks=[at_least(0)],
    )
    max_interruptions: int = setting(
        "a running job interrupted when the shutdown grace runs out is handed back at once, "
        "its attempt not spent; one interrupted more than this many times ends dead",
        group=WORKER,
        default=10,
        checks=[at_least(0)],
    )
    retention_seconds: float = setting(
        "finished jobs older than this are deleted (604800: 7 days)",
        group=MAINTENANCE,
        default=7 * 86400.0,
        checks=[positive],
    )
    stats_retention_seconds: float = setting(
        "counts of how jobs ended (the console's charts and totals, tickwork schedules' runs; "
        "per minute, merged per hour after 6 hours and per day after 7 days) are deleted after "
        "this (7776000: 90 days); history limits and --retention-seconds never delete them",
        group=MAINTENANCE,
        default=90 * 86400.0,
        checks=[positive],
    )
    retention_batch: int = setting(
        "jobs (and counts) deleted per retention statement",
        group=MAINTENANCE,
        default=1000,
        checks=[at_least(1)],
    )
    maintenance_seconds: float = setting(
        "how often each maintenance duty (lease recovery, retention, worker expiry, claim floors) "
        "runs somewhere in the fleet",
        group=MAINTENANCE,
        default=5.0,
        checks=[positive],
    )
    worker_ttl_seconds: float = setting(
        "a worker row not refreshed for this long is removed",
        group=MAINTENANCE,
        default=120.0,
        checks=[positive],
    )
    gauges_seconds: float = setting(
        "how often one worker in the fleet samples the fleet gauges (tickwork_fleet_*) from "
        "the database",
        group=MAINTENANCE,
        default=15.0,
        checks=[positive],
    )
    container_jobs: bool = setting(
        "run container jobs (kind tickwork.kubernetes-job): one Kubernetes Job per attempt, "
        "created and watched through the Kubernetes API (the pod's service account, else "
        "the kubeconfig); docs/containers.md",
        group=WORKER,
        default=False,
    )
    http_port: int = setting(
        "port serving /metrics, /healthz and /readyz; 0 turns it off",
        group=HTTP,
        default=9090,
        metavar="PORT",
        checks=[port],
    )
    http_host: str = setting(
        "address the HTTP port listens on (0.0.0.0: every interface)",
        group=HTTP,
        default="0.0.0.0",
        metavar="ADDRESS",
        checks=[not_blank],
    )

    def __post_init__(self) -> None:
        validate(self)
        if self.heartbeat_seconds >= self.lease_seconds:
            raise ConfigurationError(
                f"{label(WorkerSettings, 'heartbeat_seconds')}: must be shorter than "
                f"{label(WorkerSettings, 'lease_seconds')} = {self.lease_seconds:g}, "
                f"not {self.heartbeat_seconds:g}"
            )

    @property
    def prepare(self) -> bool:
        """Whether the worker's connections use server-side prepared statements."""
        if self.prepared_statements == "auto":
            return self.pooler != "transaction"
        return self.prepared_statements == "on"

    @property
    def notifications_url(self) -> str:
        """Where the worker LISTENs; empty: nowhere (it polls)."""
        if self.listen_url:
            return self.listen_url
        return "" if self.pooler == "transaction" else self.database_url
