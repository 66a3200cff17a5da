"""Each role's HTTP port: the defaults differ, so a worker, the console, the operator and
``tickwork dev`` run side by side on one machine; a port that is taken is one line naming it
(exit 2), never a traceback."""

from __future__ import annotations

import socket

import pytest

from tests.cli.test_cli import one_line_error, tickwork_cmd
from tickwork import devmode
from tickwork.admin.settings import AdminSettings
from tickwork.operator.config import OperatorConfig
from tickwork.settings import WorkerSettings


def test_the_roles_default_to_different_ports() -> None:
    ports = {
        WorkerSettings(database_url="x", app="a:b").http_port,
        AdminSettings().port,
        OperatorConfig("x").http_port,
        devmode.HTTP_PORT,
    }
    assert ports == {9090, 9091, 9092, 9093}


@pytest.mark.parametrize(
    "args",
    [
        ["worker", "--app", "tickwork.examples:app", "--http-host", "127.0.0.1"],
        ["admin", "--http-host", "127.0.0.1"],
        ["operator", "--standalone"],
    ],
    ids=lambda args: args[0],
)
def test_a_taken_port_is_one_line(database_url: str, args: list[str]) -> None:
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        result = tickwork_cmd(
            *args,
            "--http-port",
            port,
            database_url=database_url,
            TICKWORK_ADMIN_CREDENTIALS="alice:operator:a-long-random-secret-for-tests",
            KUBECONFIG="/nonexistent",
        )
        line = one_line_error(result, 2)
    assert "--http-port: cannot listen on " in line and f":{port}: " in line
