"""``tickwork admin``: the admin console, its JSON API and the probes, on one port.

Off unless credentials are configured: the command refuses to start without at least one
``NAME:ROLE:SECRET`` entry (``--credentials-file``, ``$TICKWORK_ADMIN_CREDENTIALS_FILE``, or
the entries themselves in ``$TICKWORK_ADMIN_CREDENTIALS``; secrets never on the command line,
where ``ps`` shows them), and a credentials file that other users may read or change. It
listens on 127.0.0.1 unless ``--host`` says otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import stat
from pathlib import Path

from tickwork.admin import server
from tickwork.admin.auth import Credential, Credentials, parse_credentials
from tickwork.admin.console import Console
from tickwork.admin.settings import AdminSettings
from tickwork.app import App
from tickwork.cli import common
from tickwork.errors import ConfigurationError

CREDENTIALS_ENV = "TICKWORK_ADMIN_CREDENTIALS"
CREDENTIALS_FILE_ENV = "TICKWORK_ADMIN_CREDENTIALS_FILE"
HOST_ENV = "TICKWORK_ADMIN_HOST"
PORT_ENV = "TICKWORK_HTTP_PORT"
SESSION_ENV = "TICKWORK_ADMIN_SESSION_SECONDS"
SECURE_ENV = "TICKWORK_ADMIN_SECURE_COOKIES"
_DEFAULTS = AdminSettings()


def register(subcommands: common.Subcommands) -> None:
    parser = subcommands.add_parser(
        "admin",
        help="serve the admin console and its API",
        description="Serve the admin console (pages and a JSON API under /api/) with "
        "/metrics, /healthz and /readyz on one port. Refuses to start without credentials: "
        f"NAME:ROLE:SECRET entries (role viewer or operator, or viewer@NS1,NS2 / "
        f"operator@NS1,NS2 for some schedule namespaces only) in ${CREDENTIALS_ENV} or in the "
        "file given by --credentials-file (readable by its owner and group only).",
    )
    parser.add_argument(
        "--host", help=f"address to listen on (default {_DEFAULTS.host}; env {HOST_ENV})"
    )
    parser.add_argument(
        "--http-port",
        type=int,
        metavar="PORT",
        help=f"port (default {_DEFAULTS.port}; env {PORT_ENV})",
    )
    parser.add_argument(
        "--credentials-file",
        metavar="PATH",
        help="file of NAME:ROLE:SECRET entries, e.g. a mounted Secret "
        f"(env {CREDENTIALS_FILE_ENV})",
    )
    parser.add_argument(
        "--session-seconds",
        type=float,
        metavar="SECONDS",
        help=f"how long a login lasts (default {_DEFAULTS.session_seconds:g}; env {SESSION_ENV})",
    )
    parser.add_argument(
        "--secure-cookies",
        action="store_true",
        default=None,
        help=f"mark the session cookie Secure: set it when users come over HTTPS "
        f"(env {SECURE_ENV}=true)",
    )
    common.add_database_url(parser)
    common.add_logging(parser, "info")
    parser.set_defaults(handler=run)


def _number(name: str, raw: str) -> float:
    try:
        return float(raw)
    except ValueError:
        raise common.UsageError(f"{name}: {raw!r} is not a number") from None


def settings(args: argparse.Namespace, env: common.Env) -> AdminSettings:
    """Flags over ``TICKWORK_*`` variables over defaults."""
    port = args.http_port
    if port is None and PORT_ENV in env:
        port = int(_number(PORT_ENV, env[PORT_ENV]))
    session = args.session_seconds
    if session is None and SESSION_ENV in env:
        session = _number(SESSION_ENV, env[SESSION_ENV])
    secure = args.secure_cookies
    if secure is None:
        secure = env.get(SECURE_ENV, "").lower() in ("1", "true", "yes")
    return AdminSettings(
        host=args.host or env.get(HOST_ENV) or _DEFAULTS.host,
        port=_DEFAULTS.port if port is None else port,
        session_seconds=_DEFAULTS.session_seconds if session is None else session,
        secure_cookies=secure,
    )


def _read_private(path: str) -> str:
    """The file's text, refused when other users may read or change it."""
    try:
        mode = Path(path).stat().st_mode
        if mode & (stat.S_IROTH | stat.S_IWOTH):
            raise ConfigurationError(
                f"--credentials-file: {path} is readable or writable by every user (mode "
                f"{stat.filemode(mode)}): make it 0600 or 0640 (a Secret volume: defaultMode 0440)"
            )
        return Path(path).read_text("utf-8")
    except OSError as exc:
        raise ConfigurationError(
            f"--credentials-file: cannot read {path}: {exc.strerror}"
        ) from None
    except UnicodeDecodeError:
        raise ConfigurationError(f"--credentials-file: {path} is not UTF-8 text") from None


def credentials(args: argparse.Namespace, env: common.Env) -> Credentials:
    """Every entry of the variable and the file; names and secrets must be unique."""
    found: list[Credential] = []
    if inline := env.get(CREDENTIALS_ENV):
        found += parse_credentials(inline, CREDENTIALS_ENV)
    if path := args.credentials_file or env.get(CREDENTIALS_FILE_ENV):
        found += parse_credentials(_read_private(path), path)
    if not found:
        raise ConfigurationError(
            f"no admin credentials: set {CREDENTIALS_ENV} or --credentials-file "
            "(NAME:ROLE:SECRET entries); the console never runs without authentication"
        )
    return Credentials(found)


def run(args: argparse.Namespace, env: common.Env) -> int:
    admin_settings = settings(args, env)
    accepted = credentials(args, env)
    common.configure_logging(args, env)
    app = App(common.database_url(args, env), check_connections=True)
    try:
        asyncio.run(_serve(Console(app, admin_settings, accepted)))
    finally:
        app.close()
    return 0


async def _serve(console: Console) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    await server.serve(console, stop)
