"""``tickwork queues|kinds|namespaces limit|unlimit`` and the listings that show limits
(``tickwork queues``, ``namespaces``, ``kinds``, ``limits``), run in-process through
:func:`tickwork.cli.main`: set and remove (audited, idempotent), the LIMIT column and the
``-o json`` keys, and one error line naming the field for every bad value."""

from __future__ import annotations

import json
from typing import Any

import psycopg
import pytest

import tickwork
from tests.support.schedule_helpers import every
from tickwork.cli import main


def run(capsys: pytest.CaptureFixture[str], database_url: str, *args: str, status: int = 0) -> str:
    code = main(list(args), {"TICKWORK_DATABASE_URL": database_url, "USER": "tester"})
    out, err = capsys.readouterr()
    assert code == status, (out, err)
    assert "Traceback" not in err
    if status:
        assert out == ""
        lines = err.splitlines()
        assert len(lines) == 1 and lines[0].startswith("tickwork: error: "), err
        return lines[0].removeprefix("tickwork: error: ")
    return out


def as_json(capsys: pytest.CaptureFixture[str], database_url: str, *args: str) -> Any:
    return json.loads(run(capsys, database_url, *args, "-o", "json"))


def test_limit_a_queue_list_it_and_unlimit_it(
    capsys: pytest.CaptureFixture[str],
    database_url: str,
    app: tickwork.App,
    conn: psycopg.Connection[Any],
) -> None:
    app.enqueue("t.cli", {}, queue="emails")
    out = run(
        capsys, database_url, "queues", "limit", "emails", "--max-running", "3",
        "--rate", "100/min", "--rate-key", "customer", "--actor", "ada", "--reason", "smtp quota",
    )  # fmt: skip
    assert out == "queue emails: max 3 running, 100/min per customer\n"
    again = run(
        capsys, database_url, "queues", "limit", "emails", "--max-running", "3",
        "--rate", "100/min", "--rate-key", "customer",
    )  # fmt: skip
    assert again == "queue emails has that limit\n"

    table = run(capsys, database_url, "queues").splitlines()
    assert table[0].split()[-1] == "LIMIT"
    assert table[1].startswith("emails") and table[1].endswith(
        "max 3 running, 100/min per customer"
    )
    [queue] = as_json(capsys, database_url, "queues")
    limit = queue["limit"]
    assert (limit["max_running"], limit["rate"], limit["rate_key"]) == (3, "100/min", "customer")
    assert (limit["rate_starts"], limit["rate_period_seconds"]) == (100, 60.0)
    assert (limit["running"], limit["recent_starts"], limit["set_by"]) == (0, 0, "ada")

    [rule] = as_json(capsys, database_url, "limits")
    assert (rule["scope"], rule["name"], rule["description"]) == (
        "queue", "emails", "max 3 running, 100/min per customer"
    )  # fmt: skip
    listing = run(capsys, database_url, "limits").splitlines()
    assert listing[0].split()[:4] == ["SCOPE", "NAME", "LIMIT", "RUNNING"]
    assert "0/3" in listing[1] and "0/100 (all keys)" in listing[1]

    assert run(capsys, database_url, "queues", "unlimit", "emails") == "queue emails: no limit\n"
    assert run(capsys, database_url, "queues", "unlimit", "emails") == (
        "queue emails has no limit\n"
    )
    [queue] = as_json(capsys, database_url, "queues")
    assert queue["limit"] is None
    actions = conn.execute(
        "SELECT actor, action, target, reason FROM tickwork.audit_log ORDER BY id"
    ).fetchall()
    assert actions == [
        ("ada", "limit", "queue:emails", "smtp quota"),
        (actions[1][0], "unlimit", "queue:emails", None),
    ]
    assert actions[1][0].startswith("tester@")


def test_a_limited_queue_with_no_jobs_is_listed(
    capsys: pytest.CaptureFixture[str], database_url: str
) -> None:
    run(capsys, database_url, "queues", "limit", "reports", "--rate", "5/10s")
    [queue] = as_json(capsys, database_url, "queues")
    assert (queue["name"], queue["available"], queue["limit"]["rate"]) == ("reports", 0, "5/10s")


def test_kinds_and_namespaces(
    capsys: pytest.CaptureFixture[str], database_url: str, app: tickwork.App
) -> None:
    assert run(capsys, database_url, "kinds") == "no kind limits\n"
    out = run(capsys, database_url, "kinds", "limit", "mail.send", "--max-running", "2")
    assert out == "kind mail.send: max 2 running\n"
    [kind] = as_json(capsys, database_url, "kinds")
    assert (kind["scope"], kind["name"], kind["max_running"], kind["running"]) == (
        "kind", "mail.send", 2, 0
    )  # fmt: skip

    app.sync_schedules("billing", [every("s", 60)])
    out = run(
        capsys, database_url, "namespaces", "limit", "billing", "--max-running", "4",
        "--weight", "3",
    )  # fmt: skip
    assert out == "namespace billing: max 4 running, weight 3\n"
    [namespace] = as_json(capsys, database_url, "namespaces")
    assert (namespace["limit"]["max_running"], namespace["limit"]["weight"]) == (4, 3)
    table = run(capsys, database_url, "namespaces").splitlines()
    assert table[1].startswith("billing") and table[1].endswith("max 4 running, weight 3")
    assert run(capsys, database_url, "namespaces", "unlimit", "billing") == (
        "namespace billing: no limit\n"
    )
    assert run(capsys, database_url, "kinds", "unlimit", "mail.send") == (
        "kind mail.send: no limit\n"
    )
    assert run(capsys, database_url, "limits") == "no limits\n"


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (("queues", "limit", "q", "--max-running", "0"), "max_running: must be from 1"),
        (("queues", "limit", "q", "--max-running", "-1"), "max_running: must be from 1"),
        (("queues", "limit", "q", "--max-running", "nan"), "max_running: must be a whole"),
        (("queues", "limit", "q", "--max-running", "2.5"), "max_running: must be a whole"),
        (("queues", "limit", "q", "--max-running", "10^12"), "max_running: must be a whole"),
        (("queues", "limit", "q", "--max-running", "1000000000000"), "max_running: must be"),
        (("queues", "limit", "q", "--rate", "5/fortnight"), "rate: '5/fortnight' is not"),
        (("queues", "limit", "q", "--rate", "0/min"), "rate: must be from 1"),
        (("queues", "limit", "q", "--rate", "nan/min"), "rate: 'nan/min' is not"),
        (("queues", "limit", "q", "--rate", "1000000000000/s"), "rate: must be from 1"),
        (("queues", "limit", "q", "--rate", "5/0s"), "rate: the period must be over 0"),
        (("queues", "limit", "q", "--rate-key", "customer"), "rate_key: needs a rate"),
        (("queues", "limit", "q"), "limit: give max_running, rate"),
        (("queues", "limit", "", "--max-running", "1"), "queue: must not be empty"),
        (("kinds", "limit", "k", "--max-running", "0"), "max_running: must be from 1"),
        (("namespaces", "limit", "n", "--weight", "0"), "weight: must be from 1"),
        (("namespaces", "limit", "n", "--weight", "nan"), "weight: must be a whole"),
        (("namespaces", "limit", "n", "--weight", "1001"), "weight: must be from 1 to 1,000"),
        (("kinds", "unlimit", " k"), "kind: ' k' has leading or trailing spaces"),
    ],
)
def test_bad_input_is_one_line_naming_the_field(
    capsys: pytest.CaptureFixture[str], database_url: str, args: tuple[str, ...], field: str
) -> None:
    assert run(capsys, database_url, *args, status=2).startswith(field)


def test_a_queue_has_no_weight(capsys: pytest.CaptureFixture[str], database_url: str) -> None:
    args = ["queues", "limit", "q", "--weight", "2"]
    assert main(args, {"TICKWORK_DATABASE_URL": database_url}) == 2
    error, usage = capsys.readouterr().err.splitlines()  # a usage error: with the usage
    assert error == "tickwork: error: queues limit: unrecognized argument --weight"
    assert usage.startswith("usage: tickwork queues limit [OPTIONS] QUEUE")
