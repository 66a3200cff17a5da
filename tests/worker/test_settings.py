"""Worker settings, pure: flags over ``TICKWORK_*`` variables over defaults; bad values are
refused with the field (flag or variable) named."""

from __future__ import annotations

import dataclasses
import os
import socket
from typing import Any

import pytest

from tickwork.errors import ConfigurationError
from tickwork.settings import WorkerSettings, default_worker_name, env_name, load

REQUIRED = {"database_url": "postgresql://db/x", "app": "mod:app"}


def build_worker_settings(flags: dict[str, Any], env: dict[str, str]) -> WorkerSettings:
    return load(WorkerSettings, flags, env)


def _build(flags: dict[str, Any] | None = None, env: dict[str, str] | None = None) -> Any:
    return build_worker_settings({**REQUIRED, **(flags or {})}, env or {})


def test_defaults() -> None:
    s = _build()
    assert s.database_url == "postgresql://db/x"
    assert s.app == "mod:app"
    assert s.queues == ()
    assert s.namespaces == ()
    assert s.concurrency == 10
    assert s.lease_seconds == 30.0
    assert s.heartbeat_seconds == 10.0
    assert s.poll_seconds == 2.0
    assert s.claim_batch == 500
    assert s.prefetch is None, "adaptive (tickwork.worker.prefetch) unless a number is given"
    assert s.shutdown_grace_seconds == 30.0
    assert s.retention_seconds == 7 * 86400.0
    assert s.maintenance_seconds == 5.0
    assert s.worker_ttl_seconds == 120.0
    assert s.gauges_seconds == 15.0
    assert s.http_port == 9090
    assert s.http_host == "0.0.0.0"


def test_every_field_is_documented_and_has_an_environment_variable() -> None:
    for f in dataclasses.fields(WorkerSettings):
        assert f.metadata["setting"].doc, f"{f.name} has no doc"
        assert env_name(WorkerSettings, f.name) == "TICKWORK_" + f.name.upper()
    assert env_name(WorkerSettings, "lease_seconds") == "TICKWORK_LEASE_SECONDS"
    assert env_name(WorkerSettings, "database_url") == "TICKWORK_DATABASE_URL"


def test_environment_overrides_defaults_with_conversion() -> None:
    s = build_worker_settings(
        {},
        {
            "TICKWORK_DATABASE_URL": "postgresql://env/db",
            "TICKWORK_APP": "envmod:app",
            "TICKWORK_CONCURRENCY": "4",
            "TICKWORK_LEASE_SECONDS": "12.5",
            "TICKWORK_HEARTBEAT_SECONDS": "2",
            "TICKWORK_QUEUES": " mail, default ,,reports ",
            "TICKWORK_NAMESPACES": "billing",
            "TICKWORK_NAME": "pod-7",
            "TICKWORK_PREFETCH": "3",
            "TICKWORK_HTTP_PORT": "9100",
            "TICKWORK_HTTP_HOST": "127.0.0.1",
        },
    )
    assert s.database_url == "postgresql://env/db"
    assert s.app == "envmod:app"
    assert s.concurrency == 4
    assert s.lease_seconds == 12.5
    assert s.heartbeat_seconds == 2.0
    assert s.queues == ("mail", "default", "reports")
    assert s.namespaces == ("billing",)
    assert s.name == "pod-7"
    assert s.prefetch == 3
    assert s.http_port == 9100
    assert s.http_host == "127.0.0.1"


def test_flags_override_environment() -> None:
    env = {
        "TICKWORK_DATABASE_URL": "postgresql://env/db",
        "TICKWORK_APP": "envmod:app",
        "TICKWORK_CONCURRENCY": "4",
        "TICKWORK_QUEUES": "from-env",
        "TICKWORK_NAME": "env-name",
    }
    s = build_worker_settings(
        {
            "database_url": "postgresql://flag/db",
            "concurrency": 8,
            "queues": "a,b",
            "name": "flag-name",
            "app": None,  # not given: the environment's value stands
        },
        env,
    )
    assert s.database_url == "postgresql://flag/db"
    assert s.concurrency == 8
    assert s.queues == ("a", "b")
    assert s.name == "flag-name"
    assert s.app == "envmod:app"


def test_a_flag_given_as_zero_is_not_mistaken_for_absent() -> None:
    s = _build({"prefetch": 0}, {"TICKWORK_PREFETCH": "9"})
    assert s.prefetch == 0


def test_http_port_zero_turns_the_http_port_off_from_a_flag_or_the_environment() -> None:
    assert _build({"http_port": "0"}).http_port == 0
    assert _build(env={"TICKWORK_HTTP_PORT": "0"}).http_port == 0
    assert _build({"http_port": "9091"}, {"TICKWORK_HTTP_PORT": "0"}).http_port == 9091


def test_name_defaults_to_pod_name_then_hostname_pid(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POD_NAME", "tickwork-worker-abc12")
    assert default_worker_name() == "tickwork-worker-abc12"
    assert _build().name == "tickwork-worker-abc12"
    monkeypatch.delenv("POD_NAME")
    assert default_worker_name() == f"{socket.gethostname()}-{os.getpid()}"
    assert _build().name == f"{socket.gethostname()}-{os.getpid()}"


@pytest.mark.parametrize(
    ("flags", "env", "named"),
    [
        ({"concurrency": "many"}, {}, "--concurrency"),
        ({}, {"TICKWORK_CONCURRENCY": "many"}, "TICKWORK_CONCURRENCY"),
        ({}, {"TICKWORK_CONCURRENCY": "2.5"}, "TICKWORK_CONCURRENCY"),
        ({}, {"TICKWORK_LEASE_SECONDS": "30s"}, "TICKWORK_LEASE_SECONDS"),
        ({"poll_seconds": "soon"}, {}, "--poll-seconds"),
        ({}, {"TICKWORK_CLAIM_BATCH": ""}, "TICKWORK_CLAIM_BATCH"),
        ({}, {"TICKWORK_HTTP_PORT": "off"}, "TICKWORK_HTTP_PORT"),
    ],
)
def test_unparsable_values_name_where_they_came_from(
    flags: dict[str, Any], env: dict[str, str], named: str
) -> None:
    with pytest.raises(ConfigurationError) as error:
        _build(flags, env)
    assert str(error.value).startswith(f"{named}:")


@pytest.mark.parametrize(
    ("flags", "field"),
    [
        ({"concurrency": 0}, "concurrency"),
        ({"lease_seconds": 0}, "lease_seconds"),
        ({"heartbeat_seconds": -1}, "heartbeat_seconds"),
        ({"poll_seconds": 0}, "poll_seconds"),
        ({"maintenance_seconds": 0}, "maintenance_seconds"),
        ({"worker_ttl_seconds": 0}, "worker_ttl_seconds"),
        ({"retention_seconds": 0}, "retention_seconds"),
        ({"gauges_seconds": 0}, "gauges_seconds"),
        ({"lease_seconds": 10, "heartbeat_seconds": 10}, "heartbeat_seconds"),
        ({"claim_batch": 0}, "claim_batch"),
        ({"retention_batch": 0}, "retention_batch"),
        ({"prefetch": -1}, "prefetch"),
        ({"shutdown_grace_seconds": -0.5}, "shutdown_grace_seconds"),
        ({"http_port": -1}, "http_port"),
        ({"http_port": 65536}, "http_port"),
        ({"http_host": ""}, "http_host"),
    ],
)
def test_invalid_values_name_the_field(flags: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigurationError) as error:
        _build(flags)
    named = f"--{field.replace('_', '-')} (TICKWORK_{field.upper()}): "
    assert str(error.value).startswith(named), "the field, by its flag and its variable"


@pytest.mark.parametrize("missing", ["database_url", "app"])
def test_required_settings_name_flag_and_variable(missing: str) -> None:
    flags = {k: v for k, v in REQUIRED.items() if k != missing}
    with pytest.raises(ConfigurationError) as error:
        build_worker_settings(flags, {})
    message = str(error.value)
    assert f"--{missing.replace('_', '-')}" in message
    assert env_name(WorkerSettings, missing) in message


def test_empty_environment_value_does_not_satisfy_a_required_setting() -> None:
    with pytest.raises(ConfigurationError, match="--database-url"):
        build_worker_settings({"app": "m:a"}, {"TICKWORK_DATABASE_URL": ""})


def test_settings_are_frozen() -> None:
    s = _build()
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.concurrency = 3  # type: ignore[misc]


def test_pooler_decides_where_notifications_are_listened_for() -> None:
    direct = _build()
    assert direct.pooler == "none"
    assert direct.notifications_url == "postgresql://db/x", "direct: LISTEN on the same URL"
    pooled = _build(env={"TICKWORK_POOLER": "transaction"})
    assert pooled.notifications_url == "", "behind a transaction pooler: polling only"
    listening = _build(
        env={"TICKWORK_POOLER": "transaction", "TICKWORK_LISTEN_URL": "postgresql://pg/x"}
    )
    assert listening.notifications_url == "postgresql://pg/x"
    with pytest.raises(
        ConfigurationError,
        match=r"^--pooler \(TICKWORK_POOLER\): must be one of none, transaction, not 'session'$",
    ):
        _build({"pooler": "session"})


@pytest.mark.parametrize(
    ("env", "prepare"),
    [
        ({}, True),
        ({"TICKWORK_POOLER": "transaction"}, False),
        ({"TICKWORK_PREPARED_STATEMENTS": "off"}, False),
        ({"TICKWORK_POOLER": "transaction", "TICKWORK_PREPARED_STATEMENTS": "on"}, True),
        ({"TICKWORK_PREPARED_STATEMENTS": "auto"}, True),
    ],
)
def test_prepared_statements_are_on_unless_behind_a_transaction_pooler(
    env: dict[str, str], prepare: bool
) -> None:
    assert _build(env=env).prepare is prepare


def test_a_bad_prepared_statements_value_is_refused_by_name() -> None:
    with pytest.raises(
        ConfigurationError,
        match=r"^--prepared-statements \(TICKWORK_PREPARED_STATEMENTS\): must be one of auto, "
        r"on, off, not 'yes'$",
    ):
        _build({"prepared_statements": "yes"})
