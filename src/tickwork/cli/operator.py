"""``tickwork operator``: the kopf operator that syncs Schedule resources into PostgreSQL.

Every field of :class:`tickwork.operator.config.OperatorConfig` is a flag and a ``TICKWORK_*``
variable (``--cluster-name`` → ``TICKWORK_CLUSTER_NAME``; ``TICKWORK_NAMESPACE`` takes a
comma-separated list; switches take true/false); flags win.
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

from tickwork.cli import common
from tickwork.errors import DatabaseUnavailable
from tickwork.operator.config import OperatorConfig
from tickwork.settings import add_arguments

log = logging.getLogger(__name__)


def register(subcommands: common.Subcommands) -> None:
    parser = subcommands.add_parser(
        "operator",
        help="run the Kubernetes operator (Schedule resources → PostgreSQL)",
        description="Watch Schedule resources and sync each schedule namespace's full set "
        "into PostgreSQL with pruning; report revision, next run and a Ready condition in "
        "each object's status. Flags win over TICKWORK_* variables, which win over defaults.",
    )
    add_arguments(parser, OperatorConfig)
    common.add_logging(parser)
    parser.set_defaults(handler=run)


def build_config(args: argparse.Namespace, env: common.Env) -> OperatorConfig:
    """Flags over ``TICKWORK_*`` variables over the defaults of :class:`OperatorConfig`."""
    return common.load(OperatorConfig, args, env)


def run(args: argparse.Namespace, env: common.Env) -> int:
    # Imported here, not at the top: kopf and the Kubernetes client take about 0.3 s to
    # import, which every command would pay (the parser imports each command's module).
    from tickwork.operator import kube, runner

    config = build_config(args, env)
    if common.configure_logging(args, env).log_level != "debug":
        logging.getLogger("kopf").setLevel(logging.WARNING)
    try:
        common.check_connection(
            config.database_url, common.source(OperatorConfig, "database_url", args, env)
        )
    except DatabaseUnavailable as error:
        log.warning("%s; starting anyway, syncs wait for the database", error)
    kube.check_login()
    fallbacks = common.port_fallbacks(OperatorConfig, "http_port", args, env)
    asyncio.run(runner.run(config, http_fallbacks=fallbacks))
    return 0
