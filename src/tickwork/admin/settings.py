"""Settings of the admin server, built once by ``tickwork admin`` from flags and
``TICKWORK_ADMIN_*`` variables."""

from __future__ import annotations

from dataclasses import dataclass

from tickwork.errors import ConfigurationError
from tickwork.settings import WorkerSettings


@dataclass(frozen=True)
class AdminSettings:
    host: str = "127.0.0.1"
    """Address to listen on; 0.0.0.0 in a container (behind TLS: an Ingress, a mesh)."""
    port: int = 9091
    """Port of the console, its API and /metrics /healthz /readyz (0: any free port)."""
    session_seconds: float = 8 * 3600.0
    """How long a console login lasts."""
    max_login_failures: int = 5
    """Failed logins from one address, or for one name, within the window before a lockout."""
    max_global_login_failures: int = 100
    """Failed logins from anywhere within the window before every login is refused, but from
    addresses where that user has logged in before."""
    login_window_seconds: float = 300.0
    lockout_seconds: float = 300.0
    """How long a lockout lasts (429)."""
    read_seconds: float = 15.0
    """Longest a client may take to send a request's headers, or its body, or stay idle
    between requests; then the connection is closed (408 for a late body)."""
    secure_cookies: bool = False
    """Mark the session cookie Secure (set it when users reach the console over HTTPS)."""
    live_worker_seconds: float = WorkerSettings.worker_ttl_seconds
    """A worker seen within this long is alive (the workers' own expiry time)."""
    throughput_window_seconds: float = 3600.0
    """The overview counts jobs finished within this window."""
    page_size: int = 50
    """Rows per page of jobs, schedules and audit records."""
    statement_timeout_ms: int = 5000
    """Longest a console query may run before it is cancelled."""

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise ConfigurationError(f"port: {self.port} is not a TCP port")
        for name in ("max_login_failures", "max_global_login_failures"):
            if getattr(self, name) < 1:
                raise ConfigurationError(f"{name}: must be at least 1")
        if not 1 <= self.page_size <= 500:
            raise ConfigurationError("page_size: must be between 1 and 500")
        for name in ("session_seconds", "login_window_seconds", "lockout_seconds", "read_seconds"):
            if getattr(self, name) <= 0:
                raise ConfigurationError(f"{name}: must be positive")
