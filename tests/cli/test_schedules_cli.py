"""The schedule commands as users run them: ``sync``, ``schedules``, ``preview``, ``backfill``
and ``trigger``, each a real ``tickwork`` subprocess against a real database."""

from __future__ import annotations

import json
import textwrap
from datetime import datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.cli.test_cli import jobs_json, ok, one_line_error, tickwork_cmd

NS = "billing"
SCHEDULE_KEYS = frozenset(
    {
        "namespace", "name", "revision", "enabled", "schedule", "every", "time_zone",
        "next_run_at", "last_occurrence_at", "skipped_occurrences", "owner", "suspend",
        "last_job_id", "last_job_status",
    }
)  # fmt: skip


def manifest(name: str, spec: str, *, kind: str = "Schedule") -> str:
    """One Schedule document; ``spec`` is the YAML body of its spec, unindented."""
    body = textwrap.indent(textwrap.dedent(spec).strip(), "  ")
    return f"apiVersion: tickwork.io/v1\nkind: {kind}\nmetadata:\n  name: {name}\nspec:\n{body}\n"


NIGHTLY = manifest(
    "nightly",
    """
    schedule: "0 2 * * *"
    timeZone: Europe/Berlin
    job:
      kind: report.nightly
      payload: {format: pdf}
    """,
)
PING = manifest("ping", "every: 30s\njob: {kind: health.ping}")
MINUTELY = manifest("minutely", 'schedule: "* * * * *"\njob: {kind: report.minutely}')


def write(directory: Path, files: dict[str, str]) -> Path:
    for relative, text in files.items():
        path = directory / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return directory


def sync(database_url: str, path: Path, *args: str, namespace: str = NS) -> str:
    return ok(tickwork_cmd("sync", namespace, "-f", str(path), *args, database_url=database_url))


def schedules_json(database_url: str, *args: str) -> list[dict[str, Any]]:
    result: list[dict[str, Any]] = json.loads(
        ok(tickwork_cmd("schedules", "-o", "json", *args, database_url=database_url))
    )
    return result


def by_name(database_url: str) -> dict[str, dict[str, Any]]:
    return {row["name"]: row for row in schedules_json(database_url)}


def counts(database_url: str) -> tuple[int, int, int]:
    """Rows in schedule_namespaces, schedules and jobs."""
    with psycopg.connect(database_url) as conn:
        row = conn.execute(
            "SELECT (SELECT count(*) FROM tickwork.schedule_namespaces),"
            " (SELECT count(*) FROM tickwork.schedules), (SELECT count(*) FROM tickwork.jobs)"
        ).fetchone()
    assert row is not None
    return row[0], row[1], row[2]


def audit(database_url: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(database_url) as conn:
        return conn.execute(
            "SELECT actor, action, target, reason, request_id, details"
            " FROM tickwork.audit_log ORDER BY id"
        ).fetchall()


# --- sync ----------------------------------------------------------------------------------


def test_sync_a_directory_then_again_changes_nothing(database_url: str, tmp_path: Path) -> None:
    manifests = write(
        tmp_path, {"nightly.yaml": NIGHTLY, "more/ping.yml": PING, "notes.txt": "not yaml"}
    )

    first = sync(database_url, manifests).splitlines()
    assert first[0] == f"namespace {NS}: 2 created, 0 updated, 0 unchanged, 0 disabled"
    assert first[1].split() == ["created:", "ping,", "nightly"]  # files in sorted order

    listed = by_name(database_url)
    assert set(listed) == {"nightly", "ping"}
    assert listed["nightly"]["schedule"] == "0 2 * * *"
    assert listed["nightly"]["time_zone"] == "Europe/Berlin"
    assert listed["ping"]["every"] == "30s"
    assert all(row["owner"] == "tickwork-sync" for row in listed.values())

    again = json.loads(sync(database_url, manifests, "-o", "json"))
    assert again == {
        "namespace": NS,
        "owner": "tickwork-sync",
        "dry_run": False,
        "prune": True,
        "created": [],
        "updated": [],
        "unchanged": ["ping", "nightly"],
        "disabled": [],
        "cancelled": {},
    }
    assert by_name(database_url) == listed  # same revisions, same next runs


def test_a_changed_manifest_is_an_update_and_bumps_the_revision(
    database_url: str, tmp_path: Path
) -> None:
    sync(database_url, write(tmp_path, {"nightly.yaml": NIGHTLY, "ping.yaml": PING}))
    write(tmp_path, {"ping.yaml": PING.replace("30s", "45s")})

    out = sync(database_url, tmp_path)
    assert out.splitlines()[0] == f"namespace {NS}: 0 created, 1 updated, 1 unchanged, 0 disabled"
    listed = by_name(database_url)
    assert (listed["ping"]["revision"], listed["ping"]["every"]) == (2, "45s")
    assert listed["nightly"]["revision"] == 1


def test_dry_run_reports_and_writes_nothing(database_url: str, tmp_path: Path) -> None:
    manifests = write(tmp_path, {"nightly.yaml": NIGHTLY, "ping.yaml": PING})

    out = sync(database_url, manifests, "--dry-run")
    assert out.splitlines()[0] == (
        f"namespace {NS}: 2 created, 0 updated, 0 unchanged, 0 disabled (dry run: nothing written)"
    )
    assert counts(database_url) == (0, 0, 0)

    sync(database_url, manifests)
    (tmp_path / "ping.yaml").unlink()
    report = json.loads(sync(database_url, manifests, "--dry-run", "-o", "json"))
    assert (report["dry_run"], report["disabled"]) == (True, ["ping"])
    assert by_name(database_url)["ping"]["enabled"] is True


def test_pruning_disables_what_is_no_longer_listed_unless_no_prune(
    database_url: str, tmp_path: Path
) -> None:
    sync(database_url, write(tmp_path / "all", {"nightly.yaml": NIGHTLY, "ping.yaml": PING}))
    only_nightly = write(tmp_path / "one", {"nightly.yaml": NIGHTLY})

    kept = sync(database_url, only_nightly, "--no-prune")
    assert kept.splitlines()[0].endswith("1 unchanged, 0 disabled")
    assert by_name(database_url)["ping"]["enabled"] is True

    pruned = sync(database_url, only_nightly)
    assert pruned.splitlines()[0].endswith("1 unchanged, 1 disabled")
    assert pruned.splitlines()[1:] == ["  unchanged: nightly", "  disabled:  ping"]
    ping = by_name(database_url)["ping"]
    assert (ping["enabled"], ping["next_run_at"], ping["revision"]) == (False, None, 2)

    table = ok(tickwork_cmd("schedules", database_url=database_url)).splitlines()
    assert table[0].split()[:5] == ["NAMESPACE", "NAME", "REV", "STATE", "SCHEDULE"]
    assert table[1].split()[:5] == [NS, "nightly", "1", "active", "0"]
    assert table[2].split()[:6] == [NS, "ping", "2", "disabled", "every", "30s"]


def test_another_owners_namespace_is_refused_unless_taken_over(
    database_url: str, tmp_path: Path
) -> None:
    manifests = write(tmp_path, {"nightly.yaml": NIGHTLY})
    sync(database_url, manifests, "--owner", "cluster-a")
    other = write(tmp_path / "other", {"ping.yaml": PING})

    line = one_line_error(tickwork_cmd("sync", NS, "-f", str(other), database_url=database_url), 1)
    assert f"namespace '{NS}' is owned by 'cluster-a', not 'tickwork-sync'" in line
    assert "--take-over" in line
    assert set(by_name(database_url)) == {"nightly"}

    taken = sync(database_url, other, "--take-over", "-o", "json")
    assert json.loads(taken)["disabled"] == ["nightly"]
    assert {row["owner"] for row in schedules_json(database_url)} == {"tickwork-sync"}


def test_the_owner_may_come_from_the_environment(database_url: str, tmp_path: Path) -> None:
    manifests = write(tmp_path, {"ping.yaml": PING})
    ok(
        tickwork_cmd(
            "sync", NS, "-f", str(manifests), database_url=database_url,
            TICKWORK_SYNC_OWNER="deploy-bot",
        )
    )  # fmt: skip
    assert by_name(database_url)["ping"]["owner"] == "deploy-bot"


# --- invalid manifests: one line naming file, document, schedule and field; nothing written --

BAD_MANIFESTS = {
    "invalid cron": (
        manifest("nightly", 'schedule: "0 25 * * *"\njob: {kind: k}'),
        "bad.yaml: document 1: Schedule 'nightly': spec.schedule: hour field: 25 is out of "
        "range 0-23",
    ),
    "unknown time zone": (
        manifest("nightly", 'schedule: "0 2 * * *"\ntimeZone: Europe/Berlim\njob: {kind: k}'),
        "bad.yaml: document 1: Schedule 'nightly': spec.timeZone: unknown time zone "
        "'Europe/Berlim'",
    ),
    "schedule and every": (
        manifest("nightly", 'schedule: "0 2 * * *"\nevery: 1h\njob: {kind: k}'),
        "bad.yaml: document 1: Schedule 'nightly': spec: set exactly one of spec.schedule or "
        "spec.every (both are set)",
    ),
    "neither schedule nor every": (
        manifest("nightly", "job: {kind: k}"),
        "bad.yaml: document 1: Schedule 'nightly': spec: set exactly one of spec.schedule or "
        "spec.every (neither is set)",
    ),
    "negative catchUpLimit": (
        manifest("nightly", "every: 1h\nmisfirePolicy: CatchUp\ncatchUpLimit: -3\njob: {kind: k}"),
        "bad.yaml: document 1: Schedule 'nightly': spec.catchUpLimit: must be >= 1, not -3",
    ),
    "another kind": (
        PING + "---\n" + manifest("nightly", "every: 1h\njob: {kind: k}", kind="CronJob"),
        "bad.yaml: document 2: not a tickwork.io/v1 Schedule (apiVersion: 'tickwork.io/v1', "
        "kind: 'CronJob')",
    ),
    "YAML that does not parse": (
        "apiVersion: tickwork.io/v1\nkind: Schedule\nmetadata: {name: nightly\nspec: {}\n",
        "bad.yaml: invalid YAML at line 4, column 5",
    ),
    "unknown field": (
        manifest("nightly", 'schedule: "0 2 * * *"\nshedule: x\njob: {kind: k}'),
        "bad.yaml: document 1: Schedule 'nightly': spec.shedule: unknown field",
    ),
    "a history limit past its range": (
        PING.replace("every: 30s", "every: 30s\n  successfulJobsHistoryLimit: 1001"),
        "bad.yaml: document 1: Schedule 'ping': spec.successfulJobsHistoryLimit: "
        "must be <= 1000, not 1001",
    ),
    "a negative history limit": (
        PING.replace("every: 30s", "every: 30s\n  failedJobsHistoryLimit: -1"),
        "bad.yaml: document 1: Schedule 'ping': spec.failedJobsHistoryLimit: must be >= 0, not -1",
    ),
    "another namespace": (
        PING.replace("name: ping", "name: ping\n  namespace: shipping"),
        "bad.yaml: document 1: Schedule 'ping': belongs to namespace 'shipping', not 'billing'",
    ),
}


@pytest.mark.parametrize(("text", "expected"), BAD_MANIFESTS.values(), ids=BAD_MANIFESTS.keys())
def test_an_invalid_manifest_fails_the_sync_and_writes_nothing(
    database_url: str, tmp_path: Path, text: str, expected: str
) -> None:
    manifests = write(tmp_path, {"a-good.yaml": MINUTELY, "bad.yaml": text})
    for args in ([], ["--dry-run"], ["-o", "json"]):
        result = tickwork_cmd("sync", NS, "-f", str(manifests), *args, database_url=database_url)
        line = one_line_error(result, 1)
        assert f"{tmp_path}/{expected}" in line
    assert counts(database_url) == (0, 0, 0)


def test_sync_needs_a_file_that_exists(database_url: str, tmp_path: Path) -> None:
    line = one_line_error(
        tickwork_cmd("sync", NS, "-f", str(tmp_path / "nope"), database_url=database_url), 1
    )
    assert line.endswith(f"{tmp_path}/nope: no such file or directory")
    line = one_line_error(tickwork_cmd("sync", NS, database_url=database_url), 2)
    assert "the following arguments are required: -f/--filename" in line


# --- schedules -----------------------------------------------------------------------------


def test_schedules_json_has_the_contract_keys(database_url: str, tmp_path: Path) -> None:
    sync(database_url, write(tmp_path / "a", {"nightly.yaml": NIGHTLY}))
    sync(database_url, write(tmp_path / "b", {"ping.yaml": PING}), namespace="ops")

    rows = schedules_json(database_url)
    assert [(row["namespace"], row["name"]) for row in rows] == [(NS, "nightly"), ("ops", "ping")]
    for row in rows:
        assert set(row) >= SCHEDULE_KEYS
        assert row["revision"] == 1 and row["enabled"] is True and row["suspend"] is False
        assert row["skipped_occurrences"] == 0
        assert row["last_occurrence_at"] is None and row["last_job_status"] is None
        assert datetime.fromisoformat(row["next_run_at"]).utcoffset() is not None
    assert (rows[0]["schedule"], rows[0]["every"]) == ("0 2 * * *", None)
    assert (rows[1]["schedule"], rows[1]["every"]) == (None, "30s")

    # The history limits retention applies: CronJob's defaults, or the spec's.
    limits = [(r["successful_jobs_history_limit"], r["failed_jobs_history_limit"]) for r in rows]
    assert limits == [(3, 1), (3, 1)]
    limited = PING.replace("every: 30s", "every: 30s\n  successfulJobsHistoryLimit: 0")
    limited = limited.replace("job:", "failedJobsHistoryLimit: 1000\n  job:")
    sync(database_url, write(tmp_path / "c", {"ping.yaml": limited}), namespace="ops")
    [ping] = schedules_json(database_url, "--namespace", "ops")
    assert (ping["successful_jobs_history_limit"], ping["failed_jobs_history_limit"]) == (0, 1000)
    assert ping["spec"]["successfulJobsHistoryLimit"] == 0

    assert [row["name"] for row in schedules_json(database_url, "--namespace", "ops")] == ["ping"]
    assert schedules_json(database_url, "--namespace", "nothing") == []
    empty = ok(tickwork_cmd("schedules", "--namespace", "nothing", database_url=database_url))
    assert empty.strip() == "no schedules found"


# --- preview (needs no database) ------------------------------------------------------------


def preview(*args: str) -> list[str]:
    return ok(tickwork_cmd("preview", *args)).splitlines()


def preview_json(*args: str) -> list[str]:
    result: list[str] = json.loads(ok(tickwork_cmd("preview", *args, "-o", "json")))
    return result


def test_preview_cron_in_utc() -> None:
    lines = preview("*/15 9 * * MON-FRI", "--from", "2026-01-02T09:20:00Z", "--count", "4")
    assert lines == [
        "2026-01-02T09:30:00+00:00  Fri  UTC",
        "2026-01-02T09:45:00+00:00  Fri  UTC",
        "2026-01-05T09:00:00+00:00  Mon  UTC",
        "2026-01-05T09:15:00+00:00  Mon  UTC",
    ]


def test_preview_six_fields_macros_and_intervals() -> None:
    assert preview_json("*/20 0 12 * * *", "--from", "2026-01-01T12:00:30Z", "--count", "3") == [
        "2026-01-01T12:00:40+00:00",
        "2026-01-02T12:00:00+00:00",
        "2026-01-02T12:00:20+00:00",
    ]
    assert preview_json("@weekly", "--from", "2026-01-01T00:00:00Z", "--count", "2") == [
        "2026-01-04T00:00:00+00:00",
        "2026-01-11T00:00:00+00:00",
    ]
    assert preview_json("@every 90s", "--from", "2026-01-01T00:00:00Z", "--count", "2") == [
        "2026-01-01T00:01:30+00:00",
        "2026-01-01T00:03:00+00:00",
    ]


def test_preview_follows_daylight_saving_in_the_zone() -> None:
    args = ("30 2 * * *", "--timezone", "America/New_York", "--from", "2026-03-06T12:00:00-05:00")
    assert preview_json(*args, "--count", "3") == [
        "2026-03-07T02:30:00-05:00",
        "2026-03-08T03:00:00-04:00",  # 02:30 does not exist that night: right after the jump
        "2026-03-09T02:30:00-04:00",
    ]
    assert preview(*args, "--count", "2")[1] == "2026-03-08T03:00:00-04:00  Sun  EDT"
    fall_back = preview_json(
        "30 1 * * *", "--timezone", "America/New_York", "--from", "2026-11-01T00:00:00-04:00",
        "--count", "2",
    )  # fmt: skip
    assert fall_back == ["2026-11-01T01:30:00-04:00", "2026-11-02T01:30:00-05:00"]


def test_preview_defaults_to_ten_occurrences_from_now() -> None:
    instants = [datetime.fromisoformat(text) for text in preview_json("@hourly")]
    assert len(instants) == 10
    assert all(i.minute == 0 and i.second == 0 for i in instants)
    assert instants == sorted(instants) and instants[0] > datetime.now(instants[0].tzinfo)


def test_preview_hashes_h_fields_from_the_seed() -> None:
    seeded = preview_json("H H * * *", "--seed", "billing/nightly", "--from", "2026-01-01T00:00Z")
    assert seeded == preview_json(
        "H H * * *", "--seed", "billing/nightly", "--from", "2026-01-01T00:00Z"
    )
    unseeded = tickwork_cmd("preview", "H H * * *")
    assert "pass --seed NS/NAME" in unseeded.stderr and unseeded.returncode == 0


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["61 * * * *"], "EXPR: minute field: 61 is out of range 0-59"),
        (["* * *"], "EXPR: expected 5 fields, or 6 with seconds first; got 3"),
        (["@every 0s"], "EXPR: invalid duration '0s': must be at least 1s"),
        (["@reboot"], "EXPR: @reboot is not supported"),
        (["* * * * *", "--timezone", "Mars/Base"], "--timezone: unknown time zone 'Mars/Base'"),
        (["* * * * *", "--from", "2026-01-01T00:00"], "--from: '2026-01-01T00:00' has no UTC"),
        (["* * * * *", "--count", "0"], "--count: must be between 1 and 10000"),
        (["H * * * *", "--seed", "nightly"], "--seed: expected NAMESPACE/NAME, got 'nightly'"),
    ],
)
def test_preview_bad_input_is_one_line(args: list[str], expected: str) -> None:
    assert expected in one_line_error(tickwork_cmd("preview", *args), 2)


# --- backfill and trigger -----------------------------------------------------------------


def test_backfill_creates_the_missing_occurrences_once(database_url: str, tmp_path: Path) -> None:
    sync(database_url, write(tmp_path, {"minutely.yaml": MINUTELY}))
    span = ("--from", "2026-01-01T00:00:00Z", "--to", "2026-01-01T00:04:00Z")

    out = ok(tickwork_cmd("backfill", NS, "minutely", *span, "--reason", "outage",
                          database_url=database_url, USER="ann"))  # fmt: skip
    assert out.strip() == f"schedule {NS}/minutely: 5 jobs created, 0 occurrences already had one"
    again = json.loads(
        ok(tickwork_cmd("backfill", NS, "minutely", *span, "-o", "json", database_url=database_url))
    )
    assert again == {"namespace": NS, "name": "minutely", "created": 0, "existing": 5}

    jobs = jobs_json(database_url)
    minutes = sorted(datetime.fromisoformat(j["occurrence_at"]).minute for j in jobs)
    assert minutes == [0, 1, 2, 3, 4]
    assert {(j["kind"], j["schedule_namespace"], j["schedule_name"]) for j in jobs} == {
        ("report.minutely", NS, "minutely")
    }
    first, second = audit(database_url)
    assert first[0].startswith("ann@")
    assert first[1:4] == ("backfill", f"schedule:{NS}/minutely", "outage")
    assert (first[5]["created"], second[5]["created"], second[5]["existing"]) == (5, 0, 5)


def test_backfill_refuses_a_bad_range(database_url: str, tmp_path: Path) -> None:
    sync(database_url, write(tmp_path, {"minutely.yaml": MINUTELY}))
    future = tickwork_cmd(
        "backfill", NS, "minutely", "--from", "2026-01-01T00:00:00Z", "--to", "2999-01-01T00:00Z",
        database_url=database_url,
    )  # fmt: skip
    assert "--to: is in the future" in one_line_error(future, 2)
    backwards = tickwork_cmd(
        "backfill", NS, "minutely", "--from", "2026-01-02T00:00:00Z", "--to", "2026-01-01T00:00Z",
        database_url=database_url,
    )  # fmt: skip
    assert "--to: must not be before start" in one_line_error(backwards, 2)
    naive = tickwork_cmd(
        "backfill", NS, "minutely", "--from", "2026-01-01", "--to", "2026-01-01T00:00Z",
        database_url=database_url,
    )  # fmt: skip
    assert "--from: '2026-01-01' has no UTC offset" in one_line_error(naive, 2)
    a_day = tickwork_cmd(
        "backfill", NS, "minutely", "--from", "2026-01-01T00:00:00Z", "--to", "2026-01-01T23:59Z",
        database_url=database_url,
    )  # fmt: skip
    assert one_line_error(a_day, 2) == (
        "tickwork: error: --to: 1,440 occurrences from 2026-01-01T00:00:00+00:00 to"
        " 2026-01-01T23:59:00+00:00; at most 1,000 in one call — split the range"
    )
    assert counts(database_url)[2] == 0
    assert audit(database_url) == []


def test_trigger_prints_the_job_id_and_is_audited(database_url: str, tmp_path: Path) -> None:
    sync(database_url, write(tmp_path, {"nightly.yaml": NIGHTLY}))

    result = tickwork_cmd(
        "trigger", NS, "nightly", "--actor", "ops-bot", "--reason", "rerun after fix",
        "--request-id", "INC-42", database_url=database_url,
    )  # fmt: skip
    job_id = int(ok(result))

    (job,) = jobs_json(database_url)
    assert job["id"] == job_id
    assert (job["kind"], job["payload"], job["status"]) == (
        "report.nightly",
        {"format": "pdf"},
        "available",
    )
    assert (job["schedule_namespace"], job["schedule_name"], job["occurrence_at"]) == (
        NS,
        "nightly",
        None,
    )
    ((actor, action, target, reason, request_id, details),) = audit(database_url)
    assert (actor, action, target, reason, request_id) == (
        "ops-bot",
        "trigger",
        f"schedule:{NS}/nightly",
        "rerun after fix",
        "INC-42",
    )
    assert details == {"job_id": job_id}
    assert by_name(database_url)["nightly"]["last_job_id"] == job_id

    again = tickwork_cmd(
        "trigger", NS, "nightly", "--actor", "ops-bot", "--request-id", "INC-42",
        database_url=database_url,
    )  # fmt: skip
    assert int(ok(again)) == job_id  # the same request id: the job of the first, no second
    assert len(jobs_json(database_url)) == len(audit(database_url)) == 1

    as_json = json.loads(ok(tickwork_cmd("trigger", NS, "nightly", "-o", "json",
                                         database_url=database_url)))  # fmt: skip
    assert as_json["schedule_name"] == "nightly" and as_json["id"] > job_id


@pytest.mark.parametrize(
    "command",
    [
        ["trigger", NS, "nope"],
        ["backfill", NS, "nope", "--from", "2026-01-01T00:00Z", "--to", "2026-01-01T01:00Z"],
    ],
)
def test_an_unknown_schedule_is_one_line(database_url: str, command: list[str]) -> None:
    line = one_line_error(tickwork_cmd(*command, database_url=database_url), 1)
    assert line.endswith(f"no schedule 'nope' in namespace '{NS}'")


def test_a_disabled_schedule_is_not_triggered(database_url: str, tmp_path: Path) -> None:
    sync(database_url, write(tmp_path / "a", {"nightly.yaml": NIGHTLY, "ping.yaml": PING}))
    sync(database_url, write(tmp_path / "b", {"ping.yaml": PING}))
    line = one_line_error(tickwork_cmd("trigger", NS, "nightly", database_url=database_url), 1)
    assert line.endswith(f"schedule {NS}/nightly is disabled")
    assert counts(database_url)[2] == 0
