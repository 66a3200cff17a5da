"""``tickwork operator``: the kopf operator that syncs Schedule resources into PostgreSQL.

Every flag has a ``TICKWORK_*`` variable (``--cluster-name`` → ``TICKWORK_CLUSTER_NAME``;
``TICKWORK_NAMESPACE`` takes a comma-separated list; switches take true/false); flags win.
It logs in with the in-cluster service account, else ``$KUBECONFIG`` (as kubectl does). An
unreachable database at start is not fatal: the operator waits for it to register (see
:mod:`tickwork.operator.registry`), then reports ``DatabaseUnavailable`` while it is gone. A
live operator of the same cluster name watching an overlapping scope makes it refuse to start
(one line on stderr, exit status 1) once ``--start-wait`` has passed.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
from collections.abc import Callable
from typing import Any

from tickwork.cli import common
from tickwork.errors import DatabaseUnavailable
from tickwork.operator import runner
from tickwork.operator.config import OperatorConfig

log = logging.getLogger(__name__)

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off", "")


def register(subcommands: common.Subcommands) -> None:
    parser = subcommands.add_parser(
        "operator",
        help="run the Kubernetes operator (Schedule resources → PostgreSQL)",
        description="Watch Schedule resources and sync each schedule namespace's full set "
        "into PostgreSQL with pruning; report revision, next run and a Ready condition in "
        "each object's status. Flags win over TICKWORK_* variables, which win over defaults.",
    )
    common.add_database_url(parser)
    add = parser.add_argument
    add(
        "--namespace",
        action="append",
        metavar="NS",
        help="watch only this Kubernetes namespace (repeatable; default: all namespaces; "
        "env TICKWORK_NAMESPACE, comma-separated)",
    )
    add(
        "--cluster-name",
        metavar="NAME",
        help="owner of the synced schedule namespaces is operator:NAME (default 'default'; "
        "env TICKWORK_CLUSTER_NAME)",
    )
    add(
        "--identity",
        metavar="NAME",
        help="this operator's name in the operators' registry; a start under a registered "
        "identity replaces its entry (default: the host name, in a pod the pod's name; "
        "env TICKWORK_IDENTITY)",
    )
    add(
        "--registry-ttl",
        type=float,
        metavar="SECONDS",
        help=_env("REGISTRY_TTL", "seconds a registry entry lives without a heartbeat", 30.0),
    )
    add(
        "--start-wait",
        type=float,
        metavar="SECONDS",
        help=_env(
            "START_WAIT",
            "how long a start waits for a live operator of an overlapping scope to go",
            60.0,
        ),
    )
    add(
        "--http-port",
        type=int,
        metavar="PORT",
        help=_env("HTTP_PORT", "/metrics /healthz /readyz port", 9092),
    )
    add(
        "--peering",
        metavar="NAME",
        help=_env("PEERING", "kopf peering object: one active operator per name", "tickwork"),
    )
    add(
        "--standalone",
        action="store_true",
        default=None,
        help="no peering (env TICKWORK_STANDALONE)",
    )
    add(
        "--status-interval",
        type=float,
        metavar="SECONDS",
        help=_env("STATUS_INTERVAL", "how often status is refreshed from PostgreSQL", 10.0),
    )
    add(
        "--webhook",
        action="store_true",
        default=None,
        help="serve the validating admission webhook (env TICKWORK_WEBHOOK)",
    )
    add(
        "--webhook-port",
        type=int,
        metavar="PORT",
        help=_env("WEBHOOK_PORT", "webhook HTTPS port", 9443),
    )
    add(
        "--webhook-host",
        metavar="HOST",
        help="host name the API server calls the webhook at, e.g. the Service's DNS name "
        "(also in its certificate; env TICKWORK_WEBHOOK_HOST)",
    )
    add(
        "--webhook-addr",
        metavar="ADDR",
        help=_env("WEBHOOK_ADDR", "address the webhook listens on", "0.0.0.0"),
    )
    for name, what in (
        ("cert", "TLS certificate (PEM) the webhook serves; default: a self-signed one"),
        ("key", "the certificate's private key (PEM)"),
        ("ca", "CA bundle for the API server; default: the certificate"),
    ):
        add(
            f"--webhook-{name}-file",
            metavar="PATH",
            help=f"{what} (env TICKWORK_WEBHOOK_{name.upper()}_FILE)",
        )
    common.add_logging(parser, "info")
    parser.set_defaults(handler=run)


def _env(variable: str, text: str, default: object) -> str:
    return f"{text} (default {default}; env TICKWORK_{variable})"


def build_config(args: argparse.Namespace, env: common.Env) -> OperatorConfig:
    """Flags over ``TICKWORK_*`` variables over the defaults of :class:`OperatorConfig`."""
    values: dict[str, Any] = {}

    def take(name: str, convert: Callable[[str], Any] = str) -> None:
        flag = getattr(args, name, None)
        variable = "TICKWORK_" + name.upper()
        if flag is not None:
            values[name] = flag
        elif variable in env:
            try:
                values[name] = convert(env[variable])
            except ValueError:
                raise common.UsageError(f"{variable}: {env[variable]!r} is not valid") from None

    take("database_url")
    take("cluster_name")
    take("identity")
    take("registry_ttl", float)
    take("start_wait", float)
    take("http_port", int)
    take("peering")
    take("standalone", _switch)
    take("status_interval", float)
    take("webhook", _switch)
    take("webhook_port", int)
    take("webhook_host")
    take("webhook_addr")
    take("webhook_cert_file")
    take("webhook_key_file")
    take("webhook_ca_file")
    if args.namespace:
        values["namespaces"] = tuple(args.namespace)
    elif env.get("TICKWORK_NAMESPACE"):
        values["namespaces"] = tuple(
            part.strip() for part in env["TICKWORK_NAMESPACE"].split(",") if part.strip()
        )
    return OperatorConfig(**{"database_url": "", **values})


def _switch(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ValueError(text)


def run(args: argparse.Namespace, env: common.Env) -> int:
    config = build_config(args, env)
    common.configure_logging(args, env)
    if (args.log_level or env.get(common.LOG_LEVEL_ENV, "info")).lower() != "debug":
        logging.getLogger("kopf").setLevel(logging.WARNING)
    try:
        common.check_connection(config.database_url)
    except DatabaseUnavailable as error:
        log.warning("%s; starting anyway, syncs wait for the database", error)
    asyncio.run(runner.run(config))
    return 0
