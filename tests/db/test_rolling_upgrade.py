"""A rolling upgrade from the previous release to the head (issue 31, docs/releases.md).

The previous release (the highest ``v*`` tag below the head's version, tests/support/releases.py)
is installed from its tag into a virtualenv of its own, and the upgrade runs as the chart runs
it: the database at that release's schema with its workers running; the head's migrations
applied under them; the head syncs schedules (as its operator would) while only old workers
fire them; head workers start next to the old ones on the same queue and namespaces, jobs are
enqueued by both versions' code; the old workers stop (SIGTERM); the head ones carry on.

Then: old and head workers each claimed and completed jobs (``picked_by``), plain, fired and
retried (a tenth fail their first attempt); every attempt ran once (one trace each, the last by
the worker its row names) and no job was recovered or retried but those, once; each
schedule's occurrences, those synced by the old release and by the head, fired each exactly
once with none missing from the first to the last; no job is left waiting or running and
every worker stopped cleanly. A missing release tag fails the test (fetch the tags).
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from packaging.version import Version

import tickwork
from tests.db import upgrade_app
from tests.support import releases
from tests.support.helpers import scalar, wait_until_sync
from tickwork.db import migrate

HERE = Path(__file__).resolve().parent
HEAD_SRC = releases.ROOT / "src"
OLD_NS, HEAD_NS = "up-old", "up-head"
"""Schedule namespaces synced by the previous release's code and by the head's."""
OLD, HEAD = ("old-0", "old-1"), ("head-0", "head-1")
WORKER_ENV = {
    "TICKWORK_NAMESPACES": f"{OLD_NS},{HEAD_NS}",
    "TICKWORK_HTTP_PORT": "0",
    "TICKWORK_CONCURRENCY": "2",
    "TICKWORK_CLAIM_BATCH": "2",  # a wave of jobs is shared out, not taken by one claim
    "TICKWORK_PREFETCH": "0",
    "TICKWORK_POLL_SECONDS": "0.2",
    "TICKWORK_HEARTBEAT_SECONDS": "1",
    "TICKWORK_LEASE_SECONDS": "15",
    "TICKWORK_MAINTENANCE_SECONDS": "1",  # the maintenance duties run on both versions too
    "TICKWORK_SHUTDOWN_GRACE_SECONDS": "5",
}
HEAD_CLI = "import sys; from tickwork.cli import main; sys.exit(main())"
WAVE = 40
DEADLINE = 30.0


@pytest.fixture(scope="session")
def previous_release(tmp_path_factory: pytest.TempPathFactory) -> releases.Installed:
    """The previous release, installed once per session."""
    return releases.install(releases.previous(), tmp_path_factory.mktemp("previous-release"))


@dataclass
class Fleet:
    """Worker processes of either version, by name; their logs and traces in ``directory``."""

    database_url: str
    directory: Path
    old: releases.Installed
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def start(self, name: str) -> None:
        variables = {
            **WORKER_ENV,
            "TICKWORK_DATABASE_URL": self.database_url,
            "TICKWORK_NAME": name,
            "UPGRADE_DIR": str(self.directory),
        }
        if name in OLD:
            command = [str(self.old.tickwork), "worker", "--app", "upgrade_app:app"]
            env = self.old.env(PYTHONPATH=str(HERE), **variables)
        else:
            command = [sys.executable, "-c", HEAD_CLI, "worker", "--app", "upgrade_app:app"]
            env = self.old.env(PYTHONPATH=os.pathsep.join([str(HEAD_SRC), str(HERE)]), **variables)
        with (self.directory / f"{name}.log").open("w") as log:
            self.processes[name] = subprocess.Popen(
                command, env=env, stdout=subprocess.DEVNULL, stderr=log
            )

    def report(self, name: str) -> dict[str, Any]:
        """What the worker process says it imported (upgrade_app.py)."""
        path = self.directory / f"{name}.json"
        wait_until_sync(
            lambda: path.exists() or self.processes[name].poll() is not None,
            timeout=DEADLINE,
            what=f"{name} to start",
        )
        assert path.exists(), f"{name} exited: {self.log(name)}"
        report: dict[str, Any] = json.loads(path.read_text())
        return report

    def stop(self, names: tuple[str, ...]) -> None:
        """SIGTERM, then each must exit 0 within its shutdown grace and a little more."""
        for name in names:
            self.processes[name].send_signal(signal.SIGTERM)
        for name in names:
            code = self.processes[name].wait(DEADLINE)
            assert code == 0, f"{name} exited with {code}: {self.log(name)}"

    def log(self, name: str) -> str:
        return (self.directory / f"{name}.log").read_text()[-3000:]

    def kill_all(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.kill()
                process.wait(10)


@pytest.fixture
def fleet(
    empty_database_url: str, previous_release: releases.Installed, tmp_path: Path
) -> Iterator[Fleet]:
    (tmp_path / "runs").mkdir()
    fleet = Fleet(empty_database_url, tmp_path, previous_release)
    yield fleet
    fleet.kill_all()


def _old_code(fleet: Fleet, *args: str) -> None:
    """upgrade_app.py run by the previous release's interpreter (``enqueue N``, ``sync NS``)."""
    result = subprocess.run(
        [str(fleet.old.python), str(HERE / "upgrade_app.py"), *args],
        env=fleet.old.env(TICKWORK_DATABASE_URL=fleet.database_url),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr[-3000:]


@dataclass(frozen=True)
class Row:
    id: int
    kind: str
    worker: str | None
    attempt: int
    status: str
    fired: bool


def _rows(conn: psycopg.Connection[Any]) -> list[Row]:
    return [
        Row(*row)
        for row in conn.execute(
            "SELECT id, kind, picked_by, attempt, status::text, occurrence_at IS NOT NULL"
            " FROM tickwork.jobs ORDER BY id"
        )
    ]


def _fleets(rows: list[Row]) -> set[str]:
    """Which versions' workers ran (and completed) these jobs."""
    return {"old" if r.worker in OLD else "head" for r in rows if r.status == "succeeded"}


def _plain_done(conn: psycopg.Connection[Any]) -> bool:
    return all(r.status == "succeeded" for r in _rows(conn) if not r.fired)


def _fired(conn: psycopg.Connection[Any], namespace: str, name: str) -> list[datetime]:
    rows = conn.execute(
        "SELECT occurrence_at FROM tickwork.jobs WHERE schedule_namespace = %s"
        " AND schedule_name = %s AND occurrence_at IS NOT NULL ORDER BY occurrence_at",
        (namespace, name),
    ).fetchall()
    return [row[0] for row in rows]


def _wait(condition: Callable[[], bool], what: str) -> None:
    wait_until_sync(condition, timeout=DEADLINE, what=what)


def test_previous_release_workers_run_beside_head_workers_on_the_head_schema(
    fleet: Fleet, previous_release: releases.Installed
) -> None:
    url = fleet.database_url
    old_version = previous_release.release.version
    assert old_version != releases.head_version()

    # The database as the previous release left it, its workers running.
    result = subprocess.run(
        [str(previous_release.tickwork), "migrate"],
        env=previous_release.env(TICKWORK_DATABASE_URL=url),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    for name in OLD:
        fleet.start(name)
    for name in OLD:
        report = fleet.report(name)
        assert report["installed"] == old_version, report
        assert Path(report["file"]).is_relative_to(previous_release.venv), report
    with psycopg.connect(url, autocommit=True) as conn:
        shipped_then = scalar(conn, "SELECT max(version) FROM tickwork.migrations")
        _old_code(fleet, "sync", OLD_NS)
        _old_code(fleet, "enqueue", str(WAVE))
        _wait(lambda: _plain_done(conn), "the old workers to run the old code's jobs")

        # The upgrade: the head's migrations under the running old fleet, then the head's
        # sync (its operator), whose schedules the old workers fire while they are alone.
        applied = migrate.apply(url)
        assert all(s.applied for s in migrate.status(url))
        assert all(m.version > shipped_then for m in applied)
        head_app = tickwork.App(url)
        try:
            head_app.sync_schedules(HEAD_NS, upgrade_app.definitions())
            _wait(
                lambda: len(_fired(conn, HEAD_NS, upgrade_app.SCHEDULES[0])) >= 2,
                "old workers to fire the head's schedules",
            )

            # Head workers join on the same queue and namespaces; both versions enqueue.
            for name in HEAD:
                fleet.start(name)
            for name in HEAD:
                report = fleet.report(name)
                assert report["version"] == releases.head_version(), report
                assert Path(report["file"]).is_relative_to(HEAD_SRC), report
            joined = scalar(conn, "SELECT max(id) FROM tickwork.jobs")

            def mixed() -> set[str]:
                return _fleets([r for r in _rows(conn) if r.id > joined and not r.fired])

            for _ in range(20):
                upgrade_app.enqueue(head_app, WAVE)
                _old_code(fleet, "enqueue", str(WAVE))
                _wait(lambda: _plain_done(conn), "a wave to be run")
                if mixed() == {"old", "head"}:
                    break
            assert mixed() == {"old", "head"}, "old and head workers share the waves"

            # The old workers go; the head ones carry on, firing and running.
            fleet.stop(OLD)
            gone = scalar(conn, "SELECT now()")
            upgrade_app.enqueue(head_app, WAVE)
            _wait(
                lambda: all(
                    _fired(conn, ns, name)[-1] > gone + timedelta(seconds=2)
                    for ns in (OLD_NS, HEAD_NS)
                    for name in upgrade_app.SCHEDULES
                ),
                "head workers to fire after the old ones stopped",
            )

            # Firing stops (every schedule suspended); what was fired drains.
            suspended = [replace(d, suspend=True) for d in upgrade_app.definitions()]
            head_app.sync_schedules(OLD_NS, suspended)
            head_app.sync_schedules(HEAD_NS, suspended)
            _wait(lambda: all(r.status == "succeeded" for r in _rows(conn)), "every job to succeed")
        finally:
            head_app.close()
        fleet.stop(HEAD)

        rows = _rows(conn)
        assert {r.status for r in rows} == {"succeeded"}, "nothing waiting or running"
        flaky = [r for r in rows if r.kind == upgrade_app.FLAKY]
        assert all((r.attempt == 2) == (r.kind == upgrade_app.FLAKY) for r in rows), (
            "no job was recovered or retried but the flaky ones, once"
        )
        runs = Counter(path.name.split("-", 1)[0] for path in (fleet.directory / "runs").iterdir())
        assert runs == Counter({str(r.id): r.attempt for r in rows}), "each attempt ran once"
        for r in rows:
            assert (fleet.directory / "runs" / f"{r.id}-{r.attempt}-{r.worker}").exists(), r
        assert _fleets(flaky) == {"old", "head"}, "old and head workers retried jobs"
        assert _fleets([r for r in rows if not r.fired]) == {"old", "head"}
        assert _fleets([r for r in rows if r.fired]) == {"old", "head"}
        for namespace in (OLD_NS, HEAD_NS):
            for name, every in zip(upgrade_app.SCHEDULES, (1, 2), strict=True):
                fired = _fired(conn, namespace, name)
                steps = {b - a for a, b in itertools.pairwise(fired)}
                assert steps == {timedelta(seconds=every)}, (namespace, name, fired)
        assert scalar(conn, "SELECT count(*) FROM tickwork.workers") == 0


def test_the_previous_release_is_the_highest_older_tag_or_its_recorded_commit(
    tmp_path: Path,
) -> None:
    """``git clone`` copies the tags: the previous release is found by its tag. Without them
    (a clone made with --no-tags, or a CI checkout that fetched none), by its recorded commit:
    the same tree. With neither (a history that lacks the commit), the test fails and says how
    to get the tags: it never skips."""
    with_tags, without = tmp_path / "with-tags", tmp_path / "without"
    for target, extra in ((with_tags, []), (without, ["--no-tags"])):
        subprocess.run(
            ["git", "clone", "--quiet", *extra, str(releases.ROOT), str(target)],
            check=True,
            capture_output=True,
            timeout=60,
        )
    found = releases.previous(with_tags)
    assert found.tag == f"v{found.version}"
    assert Version(found.version) < Version(releases.head_version(with_tags))
    by_commit = releases.previous(without)
    commit = releases.RECORDED[found.version]
    assert by_commit == releases.Release(found.tag, found.version, commit)

    def tree(ref: str, clone: Path) -> str:
        command = ["git", "rev-parse", f"{ref}^{{tree}}"]
        return subprocess.run(command, cwd=clone, capture_output=True, text=True).stdout

    assert tree(found.ref, with_tags) == tree(by_commit.ref, without), "the same tree"
    shallow = tmp_path / "shallow"
    source = f"file://{releases.ROOT}"  # --depth needs a URL, not a path
    subprocess.run(
        ["git", "clone", "--quiet", "--no-tags", "--depth", "1", source, str(shallow)],
        check=True,
        capture_output=True,
        timeout=60,
    )
    with pytest.raises(AssertionError, match="git fetch --tags"):
        releases.previous(shallow)
