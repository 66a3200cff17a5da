"""What a new user meets in the first hour (issue 29, item 9), as they meet it: the real
command in a process of its own, its exact stderr."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.cli.test_cli import TICKWORK, one_line_error, tickwork_cmd


def usage_error(result: subprocess.CompletedProcess[str]) -> list[str]:
    """The two stderr lines of a command line refused: the error, then the usage."""
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 2, result.stderr
    return lines


@pytest.mark.parametrize(
    ("args", "error", "usage"),
    [
        (
            ["worker", "--concurency", "20"],
            "worker: unrecognized argument --concurency (did you mean `--concurrency`?)",
            "tickwork worker [OPTIONS] (tickwork worker --help lists them)",
        ),
        (
            ["jobs", "--bogus", "--limt=3"],
            "jobs: unrecognized arguments --bogus, --limt (did you mean `--limit`?)",
            "tickwork jobs [OPTIONS] (tickwork jobs --help lists them)",
        ),
        (
            ["enqueue", "k", "surplus"],
            "enqueue: unexpected argument surplus",
            "tickwork enqueue [OPTIONS] KIND (tickwork enqueue --help lists them)",
        ),
        (
            ["jobs", "--databse-url", "x"],
            "jobs: unrecognized argument --databse-url (did you mean `--database-url`?)",
            "tickwork jobs [OPTIONS] (tickwork jobs --help lists them)",
        ),
    ],
)
def test_an_unknown_option_names_the_command_the_closest_option_and_the_usage(
    args: list[str], error: str, usage: str
) -> None:
    lines = usage_error(tickwork_cmd(*args, database_url="postgresql://nowhere/x"))
    assert lines == [f"tickwork: error: {error}", f"usage: {usage}"]


def test_a_bad_database_url_is_named_by_where_it_came_from() -> None:
    from_env = tickwork_cmd("worker", "--app", "tickwork.examples:app", database_url="mysql://x")
    line = one_line_error(from_env, 2)
    assert line.startswith("tickwork: error: TICKWORK_DATABASE_URL: not a valid connection string")
    for command in (["jobs"], ["worker", "--app", "tickwork.examples:app"]):
        from_flag = tickwork_cmd(*command, "--database-url", "mysql://x")
        line = one_line_error(from_flag, 2)
        assert line.startswith("tickwork: error: --database-url: not a valid connection string")


def test_a_bad_value_from_the_environment_leads_with_the_variable() -> None:
    result = tickwork_cmd(
        "worker", "--app", "tickwork.examples:app", database_url="x", TICKWORK_CONCURRENCY="0"
    )
    line = one_line_error(result, 2)
    assert line == "tickwork: error: TICKWORK_CONCURRENCY: must be ≥ 1, not 0 (flag --concurrency)"


@pytest.mark.parametrize("command", [["enqueue", "examples.hello"], ["jobs"], ["schedules"]])
def test_commands_on_a_database_never_migrated_say_so_first(
    empty_database_url: str, command: list[str]
) -> None:
    line = one_line_error(tickwork_cmd(*command, database_url=empty_database_url), 1)
    assert line.startswith("tickwork: error: the database is not migrated (relation ")
    assert line.endswith("run `tickwork migrate` first")


@pytest.mark.parametrize(
    ("expression", "meant"),
    [
        ("every 30s", "@every 30s"),
        ("30s", "@every 30s"),
        ("every 5 minutes", "@every 5m"),
        ("Every 1h30m", "@every 1h30m"),
    ],
)
def test_preview_of_an_interval_written_as_words_points_to_at_every(
    expression: str, meant: str
) -> None:
    line = one_line_error(tickwork_cmd("preview", expression), 2)
    assert line == (
        f"tickwork: error: EXPR: {expression!r} is not a cron expression; did you mean `{meant}`?"
    )
    assert tickwork_cmd("preview", meant, "--count", "1").returncode == 0


def test_the_operator_without_kubernetes_is_one_line(database_url: str, tmp_path: Path) -> None:
    """No service account, no $KUBECONFIG, no ~/.kube/config: one line, before kopf starts
    (whose own failure is a hundred lines of tracebacks)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("TICKWORK_", "KUBERNETES_")) and k != "KUBECONFIG"
    }
    result = subprocess.run(
        [TICKWORK, "operator", "--standalone", "--http-port", "0"],
        env={**env, "HOME": str(tmp_path), "TICKWORK_DATABASE_URL": database_url},
        capture_output=True,
        text=True,
        timeout=60,
    )
    line = one_line_error(result, 2)
    assert line.startswith("tickwork: error: no Kubernetes API to talk to: not in a cluster")
    assert line.endswith("set KUBECONFIG, or run in a pod")
