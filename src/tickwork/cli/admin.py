"""``tickwork admin``: the admin console, its JSON API and the probes, on one port.

Off unless credentials are configured: the command refuses to start without at least one
``NAME:ROLE:SECRET`` entry (``--credentials-file``, ``$TICKWORK_ADMIN_CREDENTIALS_FILE``, or
the entries themselves in ``$TICKWORK_ADMIN_CREDENTIALS``; secrets never on the command line,
where ``ps`` shows them), and a credentials file that other users may read or change. It
listens on 127.0.0.1 unless ``--http-host`` says otherwise.
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
from tickwork.admin.settings import AdminSettings, CredentialSources
from tickwork.app import App
from tickwork.cli import common
from tickwork.errors import ConfigurationError
from tickwork.settings import add_arguments, env_name

CREDENTIALS_ENV = env_name(CredentialSources, "credentials")


def register(subcommands: common.Subcommands) -> None:
    parser = subcommands.add_parser(
        "admin",
        help="serve the admin console and its API",
        description="Serve the admin console (pages and a JSON API under /api/) with "
        "/metrics, /healthz and /readyz on one port. Refuses to start without credentials: "
        "NAME:ROLE:SECRET entries (role viewer or operator, or viewer@NS1,NS2 / "
        f"operator@NS1,NS2 for some schedule namespaces only) in ${CREDENTIALS_ENV} or in the "
        "file given by --credentials-file (readable by its owner and group only).",
    )
    add_arguments(parser, AdminSettings)
    add_arguments(parser, CredentialSources)
    common.add_database_url(parser)
    common.add_logging(parser)
    parser.set_defaults(handler=run)


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


def credentials(sources: CredentialSources) -> Credentials:
    """Every entry of the variable and the file; names and secrets must be unique."""
    found: list[Credential] = []
    if sources.credentials:
        found += parse_credentials(sources.credentials, CREDENTIALS_ENV)
    if path := sources.credentials_file:
        found += parse_credentials(_read_private(path), path)
    if not found:
        raise ConfigurationError(
            f"no admin credentials: set {CREDENTIALS_ENV} or --credentials-file "
            "(NAME:ROLE:SECRET entries); the console never runs without authentication"
        )
    return Credentials(found)


def run(args: argparse.Namespace, env: common.Env) -> int:
    admin_settings = common.load(AdminSettings, args, env)
    accepted = credentials(common.load(CredentialSources, args, env))
    common.configure_logging(args, env)
    app = App(common.database_url(args, env), check_connections=True)
    fallbacks = common.port_fallbacks(AdminSettings, "port", args, env)
    try:
        asyncio.run(_serve(Console(app, admin_settings, accepted), fallbacks))
    finally:
        app.close()
    return 0


async def _serve(console: Console, fallbacks: tuple[int, ...]) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    await server.serve(console, stop, fallbacks)
