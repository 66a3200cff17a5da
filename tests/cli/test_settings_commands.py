"""Every command's settings through the one loader: generated --help (default and variable
of every flag), flags over variables over defaults, one-line errors naming flag and
variable for a bad value of each kind, the renamed console address, and docs/settings.md."""

from __future__ import annotations

import argparse
import dataclasses
import re
from pathlib import Path
from typing import TypeVar

import pytest

from tickwork.admin.settings import AdminSettings, CredentialSources
from tickwork.cli import build_parser, common, main
from tickwork.operator.config import OperatorConfig
from tickwork.settings import (
    DatabaseSettings,
    LogSettings,
    QuietLogSettings,
    WorkerSettings,
    default_text,
    env_name,
    flag_name,
    table,
)
from tickwork.settings.dev import DevSettings
from tickwork.settings.sync import SyncSettings

T = TypeVar("T")
DOCS = Path(__file__).resolve().parents[2] / "docs" / "settings.md"

COMMANDS: dict[str, tuple[type, ...]] = {
    "worker": (WorkerSettings, LogSettings),
    "operator": (OperatorConfig, LogSettings),
    "admin": (AdminSettings, CredentialSources, DatabaseSettings, LogSettings),
    "dev": (DevSettings, QuietLogSettings),
    "sync": (SyncSettings, DatabaseSettings),
    "migrate": (DatabaseSettings, LogSettings),
    "jobs": (DatabaseSettings,),
    "enqueue": (DatabaseSettings,),
    "schedules": (DatabaseSettings,),
    "backfill": (DatabaseSettings,),
    "trigger": (DatabaseSettings,),
    "cancel": (DatabaseSettings,),
    "retry": (DatabaseSettings,),
    "workers": (DatabaseSettings,),
    "queues": (DatabaseSettings,),
    "namespaces": (DatabaseSettings,),
    "kinds": (DatabaseSettings,),
    "limits": (DatabaseSettings,),
    "doctor": (DatabaseSettings,),
    "preview": (),
}


def test_every_command_is_listed_with_the_settings_it_reads() -> None:
    assert set(_subparsers()) == set(COMMANDS)


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def _options(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {option: a for a in parser._actions for option in a.option_strings}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_settings_flag_has_help_with_its_default_and_variable(command: str) -> None:
    options = _options(_subparsers()[command])
    for cls in COMMANDS[command]:
        for f in dataclasses.fields(cls):
            flag = flag_name(f)
            if not flag:
                assert env_name(cls, f.name) == "TICKWORK_ADMIN_CREDENTIALS", "variable only"
                continue
            text = str(options[flag].help)
            assert f"(default: {default_text(f)}; " in text, (command, flag, text)
            assert f"env {env_name(cls, f.name)}" in text, (command, flag, text)


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_no_flag_of_a_command_retypes_a_default_by_hand(command: str) -> None:
    """Any help text that names a variable is one generated from a settings field."""
    generated = {flag_name(f) for cls in COMMANDS[command] for f in dataclasses.fields(cls)}
    for option, action in _options(_subparsers()[command]).items():
        if action.help and "TICKWORK_" in action.help and option.startswith("--"):
            assert option in generated, (command, option)


def _load(cls: type[T], argv: list[str], env: dict[str, str]) -> T:
    return common.load(cls, build_parser().parse_args(argv), env)


def test_flags_win_over_variables_which_win_over_defaults_for_every_command() -> None:
    env = {
        "TICKWORK_HTTP_PORT": "7001",
        "TICKWORK_ADMIN_SESSION_SECONDS": "60",
        "TICKWORK_ADMIN_SECURE_COOKIES": "true",
        "TICKWORK_DEV_PORT": "6000",
        "TICKWORK_SYNC_OWNER": "from-env",
        "TICKWORK_LOG_LEVEL": "DEBUG",
        "TICKWORK_DATABASE_URL": "postgresql://env/db",
    }
    admin = _load(AdminSettings, ["admin", "--http-port", "7002"], env)
    assert admin == AdminSettings(port=7002, session_seconds=60.0, secure_cookies=True)
    assert _load(AdminSettings, ["admin"], {}) == AdminSettings()
    assert _load(DevSettings, ["dev", "--data-dir", "/tmp/d"], env) == DevSettings("/tmp/d", 6000)
    assert _load(DevSettings, ["dev"], {}) == DevSettings()
    assert _load(SyncSettings, ["sync", "ns", "-f", "x", "--owner", "ci"], env).owner == "ci"
    assert _load(SyncSettings, ["sync", "ns", "-f", "x"], env).owner == "from-env"
    assert _load(SyncSettings, ["sync", "ns", "-f", "x"], {}).owner == "tickwork-sync"
    assert _load(LogSettings, ["worker"], env) == LogSettings("text", "debug")
    assert _load(LogSettings, ["worker", "--log-level", "error"], env) == LogSettings(
        "text", "error"
    )
    assert _load(QuietLogSettings, ["dev"], {}).log_level == "warning"
    url = _load(DatabaseSettings, ["--database-url", "postgresql://flag/db", "jobs"], env)
    assert url == DatabaseSettings("postgresql://flag/db")
    assert _load(DatabaseSettings, ["jobs"], env) == DatabaseSettings("postgresql://env/db")


BAD_VALUES = [
    # (argv, env, expected line after "tickwork: error: ") — one per kind of field
    (["worker"], {"TICKWORK_CONCURRENCY": "0"},
     "TICKWORK_CONCURRENCY: must be ≥ 1, not 0 (flag --concurrency)"),
    (["worker", "--concurrency", "two"], {},
     "--concurrency: 'two' is not a valid int (variable TICKWORK_CONCURRENCY)"),
    (["worker"], {"TICKWORK_LEASE_SECONDS": "soon"},
     "TICKWORK_LEASE_SECONDS: 'soon' is not a valid float (flag --lease-seconds)"),
    (["worker"], {"TICKWORK_POLL_SECONDS": "nan"},
     "TICKWORK_POLL_SECONDS: 'nan' is not a valid float (flag --poll-seconds)"),
    (["worker", "--poll-seconds", "0"], {},
     "--poll-seconds (TICKWORK_POLL_SECONDS): must be > 0, not 0"),
    (["worker", "--heartbeat-seconds", "40"], {},
     "--heartbeat-seconds (TICKWORK_HEARTBEAT_SECONDS): must be shorter than --lease-seconds "
     "(TICKWORK_LEASE_SECONDS) = 30, not 40"),
    (["worker", "--pooler", "session"], {},
     "--pooler (TICKWORK_POOLER): must be one of none, transaction, not 'session'"),
    (["worker", "--http-port", "70000"], {},
     "--http-port (TICKWORK_HTTP_PORT): must be a TCP port (0 to 65535), not 70000"),
    (["worker", "--http-host", " "], {},
     "--http-host (TICKWORK_HTTP_HOST): must not be empty"),
    (["worker", "--log-format", "xml"], {},
     "--log-format (TICKWORK_LOG_FORMAT): must be one of text, json, not 'xml'"),
    (["operator"], {"TICKWORK_STANDALONE": "maybe"},
     "TICKWORK_STANDALONE: 'maybe' is not true or false (flag --standalone)"),
    (["operator", "--namespace", ""], {},
     "--namespace (TICKWORK_NAMESPACE): must not be empty"),
    (["operator", "--webhook-cert-file", "tls.crt"], {},
     "--webhook-cert-file (TICKWORK_WEBHOOK_CERT_FILE) and --webhook-key-file "
     "(TICKWORK_WEBHOOK_KEY_FILE) go together"),
    (["admin"], {"TICKWORK_ADMIN_PAGE_SIZE": "501"},
     "TICKWORK_ADMIN_PAGE_SIZE: must be between 1 and 500, not 501 (flag --page-size)"),
    (["admin"], {"TICKWORK_ADMIN_SECURE_COOKIES": "sometimes"},
     "TICKWORK_ADMIN_SECURE_COOKIES: 'sometimes' is not true or false (flag --secure-cookies)"),
    (["dev"], {"TICKWORK_DEV_PORT": "-1"},
     "TICKWORK_DEV_PORT: must be a TCP port (0 to 65535), not -1 (flag --port)"),
    (["dev", "--port", "-1"], {},
     "--port (TICKWORK_DEV_PORT): must be a TCP port (0 to 65535), not -1"),
    (["sync", "ns", "-f", "x", "--owner", ""], {},
     "--owner (TICKWORK_SYNC_OWNER): must not be empty"),
]  # fmt: skip


@pytest.mark.parametrize(("argv", "env", "expected"), BAD_VALUES)
def test_a_bad_value_is_one_line_naming_flag_and_variable(
    capsys: pytest.CaptureFixture[str], argv: list[str], env: dict[str, str], expected: str
) -> None:
    env = {"TICKWORK_DATABASE_URL": "postgresql://nowhere/x", "TICKWORK_APP": "m:a", **env}
    assert main(argv, env=env) == 2
    captured = capsys.readouterr()
    assert captured.err == f"tickwork: error: {expected}\n"
    assert captured.out == ""


def test_the_console_address_renamed_still_works_by_its_old_names_and_warns(
    capsys: pytest.CaptureFixture[str],
) -> None:
    by_flag = _load(AdminSettings, ["admin", "--host", "10.0.0.1"], {})
    assert by_flag == AdminSettings(host="10.0.0.1")
    assert capsys.readouterr().err == (
        "tickwork: warning: --host is deprecated (read until the next release): use --http-host\n"
    )
    by_variable = _load(AdminSettings, ["admin"], {"TICKWORK_ADMIN_HOST": "10.0.0.2"})
    assert by_variable == AdminSettings(host="10.0.0.2")
    assert capsys.readouterr().err == (
        "tickwork: warning: TICKWORK_ADMIN_HOST is deprecated (read until the next release): "
        "use TICKWORK_HTTP_HOST\n"
    )
    new = {"TICKWORK_HTTP_HOST": "10.0.0.3", "TICKWORK_ADMIN_HOST": "10.0.0.2"}
    assert _load(AdminSettings, ["admin"], new) == AdminSettings(host="10.0.0.3")
    assert _load(AdminSettings, ["admin", "--http-host", "10.0.0.4"], new) == AdminSettings(
        host="10.0.0.4"
    )
    assert capsys.readouterr().err == "", "the new names warn about nothing"


def test_the_renamed_variable_is_in_the_changelog() -> None:
    changelog = (DOCS.parents[1] / "CHANGELOG.md").read_text()
    assert re.search(r"`TICKWORK_ADMIN_HOST`.*`TICKWORK_HTTP_HOST`", changelog)
    assert re.search(r"`--host`.*`--http-host`", changelog)


TABLES = {
    "worker": (WorkerSettings, LogSettings),
    "operator": (OperatorConfig, LogSettings),
    "admin": (AdminSettings, CredentialSources, DatabaseSettings, LogSettings),
    "dev": (DevSettings, QuietLogSettings),
    "sync": (SyncSettings, DatabaseSettings),
    "database": (DatabaseSettings,),
}
"""The generated tables: ``<!-- settings:NAME -->`` … ``<!-- /settings -->`` in a document."""

BLOCK = re.compile(r"(<!-- settings:(\w+) -->\n)(.*?)(<!-- /settings -->)", re.DOTALL)
DOCUMENTS = [DOCS.parents[1] / "README.md", *sorted(DOCS.parent.glob("*.md"))]


def regenerated(text: str) -> str:
    return BLOCK.sub(lambda m: m[1] + table.markdown(*TABLES[m[2]]) + m[4], text)


def test_every_table_of_settings_is_documented() -> None:
    assert {m[2] for m in BLOCK.finditer(DOCS.read_text())} == set(TABLES)
    assert "<!-- settings:admin -->" in (DOCS.parent / "admin.md").read_text()
    assert "<!-- settings:operator -->" in (DOCS.parent / "operator.md").read_text()


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: path.name)
def test_documented_settings_tables_match_the_dataclasses(document: Path) -> None:
    text = document.read_text()
    assert text == regenerated(text), (
        f"{document.name}: a settings table differs from the dataclasses; regenerate them with "
        "`python tests/cli/test_settings_commands.py`"
    )


if __name__ == "__main__":
    for path in DOCUMENTS:
        path.write_text(regenerated(path.read_text()))
