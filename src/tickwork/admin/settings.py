"""Settings of the admin console, built once by ``tickwork admin`` with
:func:`tickwork.settings.load` from flags and ``TICKWORK_ADMIN_*`` variables (its HTTP address
and port: ``TICKWORK_HTTP_HOST``, ``TICKWORK_HTTP_PORT``, as every role's)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from tickwork.settings import WorkerSettings, setting
from tickwork.settings.fields import at_least, between, not_blank, port, positive, validate

HTTP = "http"
CONSOLE = "console"
LOGIN = "login"


@dataclass(frozen=True)
class AdminSettings:
    ENV_PREFIX: ClassVar[str] = "TICKWORK_ADMIN_"

    host: str = setting(
        "address to listen on; 0.0.0.0 in a container (behind TLS: an Ingress, a mesh)",
        group=HTTP,
        default="127.0.0.1",
        flag="--http-host",
        env="TICKWORK_HTTP_HOST",
        old_flag="--host",
        old_env="TICKWORK_ADMIN_HOST",
        metavar="ADDRESS",
        checks=[not_blank],
    )
    port: int = setting(
        "port of the console, its API and /metrics /healthz /readyz (0: any free port)",
        group=HTTP,
        default=9091,
        flag="--http-port",
        env="TICKWORK_HTTP_PORT",
        metavar="PORT",
        checks=[port],
    )
    session_seconds: float = setting(
        "how long a console login lasts", group=LOGIN, default=8 * 3600.0, checks=[positive]
    )
    max_login_failures: int = setting(
        "failed logins from one address, or for one name, within the window before a lockout",
        group=LOGIN,
        default=5,
        checks=[at_least(1)],
    )
    max_global_login_failures: int = setting(
        "failed logins from anywhere within the window before every login is refused, but "
        "from addresses where that user has logged in before",
        group=LOGIN,
        default=100,
        checks=[at_least(1)],
    )
    login_window_seconds: float = setting(
        "the window in which failed logins are counted",
        group=LOGIN,
        default=300.0,
        checks=[positive],
    )
    lockout_seconds: float = setting(
        "how long a lockout lasts (429)", group=LOGIN, default=300.0, checks=[positive]
    )
    read_seconds: float = setting(
        "longest a client may take to send a request's headers, or its body, or stay idle "
        "between requests; then the connection is closed (408 for a late body)",
        group=HTTP,
        default=15.0,
        checks=[positive],
    )
    secure_cookies: bool = setting(
        "mark the session cookie Secure (set it when users reach the console over HTTPS)",
        group=LOGIN,
        default=False,
    )
    live_worker_seconds: float = setting(
        "a worker seen within this long is alive (the workers' own expiry time)",
        group=CONSOLE,
        default=WorkerSettings.worker_ttl_seconds,
        checks=[positive],
    )
    throughput_window_seconds: float = setting(
        "the overview counts jobs finished within this window",
        group=CONSOLE,
        default=3600.0,
        checks=[positive],
    )
    page_size: int = setting(
        "rows per page of jobs, schedules and audit records",
        group=CONSOLE,
        default=50,
        checks=[between(1, 500)],
    )
    statement_timeout_ms: int = setting(
        "longest a console query may run before it is cancelled, in milliseconds",
        group=CONSOLE,
        default=5000,
        checks=[at_least(0)],
    )

    def __post_init__(self) -> None:
        validate(self)


@dataclass(frozen=True)
class CredentialSources:
    """Where ``tickwork admin`` finds its ``NAME:ROLE:SECRET`` entries (both are read)."""

    ENV_PREFIX: ClassVar[str] = "TICKWORK_ADMIN_"

    credentials_file: str | None = setting(
        "file of NAME:ROLE:SECRET entries, e.g. a mounted Secret (readable by its owner and "
        "group only)",
        group="credentials",
        default=None,
        default_doc="none",
        metavar="PATH",
    )
    credentials: str | None = setting(
        "the entries themselves, separated by spaces or newlines (a variable only: on the "
        "command line ps would show the secrets)",
        group="credentials",
        default=None,
        default_doc="none",
        flag="",
    )
