"""Migrations are expand-then-contract (docs/releases.md): during a rolling upgrade the previous
release's workers run on the head's schema (tests/db/test_rolling_upgrade.py), so a migration
never takes away what the previous release reads or writes. A column, table, view, function or
type is dropped, renamed, or made NOT NULL, a default dropped or a unique index dropped (an
ON CONFLICT may name it) only in a release after the last one whose code used it; each such
statement is named below with that last release and why, and a new one fails this test until
it is.

For a migration the previous release did not ship, the lint also checks what it can: the named
last release is older than the previous release, and the previous release's code (its tree at
the tag, migrations left out) never mentions the object.

The existing ones, classified: 0009 and 0030 drop a trigger function that only its trigger
called (a new function with another name replaces both in the same migration); 0011, 0015
and 0021 drop indexes they replace in the same migration, of which 0021's was unique (the
claim of the same release reads its successor). No migration drops or renames a column or a table.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass

import pytest
from packaging.version import Version

from tests.support import migration_sql, releases


@dataclass(frozen=True)
class Contract:
    last_reader: str | None
    """The last release whose code reads or writes the object (None: no release's code ever
    did: the database alone used it, e.g. a trigger function)."""
    why: str


CONTRACTS: dict[tuple[str, str], Contract] = {
    ("0009_schedule_jobs_ended.sql", "drop function tickwork.schedule_job_ended"): Contract(
        None,
        "the row trigger's function, called by the trigger this migration replaces with the"
        " statement trigger of tickwork.schedule_jobs_ended; no code calls it",
    ),
    ("0030_deadlines_per_statement.sql", "drop function tickwork.occurrence_deadline_watch"): (
        Contract(
            None,
            "the row trigger's function, called only by the trigger this migration replaces"
            " with the statement trigger of tickwork.occurrence_deadlines_noted; no code calls"
            " it, and no release shipped it (0025 is after 0.1.0)",
        )
    ),
    ("0021_flow_rules.sql", "drop unique index tickwork.jobs_concurrency_key_idx"): Contract(
        None,
        "replaced by jobs_concurrency_slot_idx in the same migration; no statement names it"
        " (the claim takes an advisory lock per key, the index is the final guard); shipped"
        " before the first release",
    ),
}
"""(migration, what it takes away) -> the last release that used it, and why it was accepted."""

_IDENT = r"[\w.\"]+"
_NOT_A_COLUMN = {"constraint", "default", "not", "expression", "identity"}


def _name(identifier: str) -> str:
    return identifier.replace('"', "").lower()


def _takes_away(statement: str, unique_indexes: set[str]) -> set[str]:
    """What a statement takes away from the previous release: 'drop column t.c', 'rename
    table t', 'set not null t.c', 'drop default t.c', 'drop function f', 'drop unique index i'
    (among ``unique_indexes``), ..."""
    s = statement.lower()
    found = set()
    if match := re.match(rf"alter table (?:only )?(?:if exists )?(?:only )?({_IDENT}) (.*)", s):
        table, clauses = _name(match.group(1)), match.group(2)
        for clause in re.split(r",(?![^()]*\))", clauses):
            clause = clause.strip()
            m = re.match(rf"drop (?:column )?(?:if exists )?({_IDENT})", clause)
            if m and m.group(1) not in _NOT_A_COLUMN:
                found.add(f"drop column {table}.{_name(m.group(1))}")
            m = re.match(rf"rename (?:column )?({_IDENT}) to ", clause)
            if m and m.group(1) != "constraint":
                found.add(f"rename column {table}.{_name(m.group(1))}")
            if re.match(r"rename to ", clause):
                found.add(f"rename table {table}")
            if m := re.match(rf"alter (?:column )?({_IDENT}) set not null", clause):
                found.add(f"set not null {table}.{_name(m.group(1))}")
            if m := re.match(rf"alter (?:column )?({_IDENT}) drop default", clause):
                found.add(f"drop default {table}.{_name(m.group(1))}")
    if m := re.match(
        rf"drop (table|view|materialized view|function|procedure|type|schema|sequence)"
        rf" (?:if exists )?({_IDENT})",
        s,
    ):
        found.add(f"drop {m.group(1)} {_name(m.group(2))}")
    m = re.match(rf"drop index (?:concurrently )?(?:if exists )?({_IDENT})", s)
    if m and _name(m.group(1)) in unique_indexes:
        found.add(f"drop unique index {_name(m.group(1))}")
    m = re.match(rf"alter (view|function|type|sequence) ({_IDENT}).* rename to ", s)
    if m:  # ALTER TABLE ... RENAME TO: above
        found.add(f"rename {m.group(1)} {_name(m.group(2))}")
    return found


def _recreated(text: str) -> set[str]:
    """Objects a migration creates (``create [or replace] function|table|view|...``)."""
    made = set()
    for kind, name in re.findall(
        rf"create (?:or replace )?(?:unique )?(table|view|function|type|index)"
        rf" (?:if not exists )?({_IDENT})",
        text.lower(),
    ):
        kind = "unique index" if kind == "index" else kind
        made.add(f"drop {kind} {_name(name)}")
        made.add(f"drop {kind} tickwork.{_name(name)}")
    return made


def _found() -> dict[tuple[str, str], list[str]]:
    """(migration, what it takes away) -> its statements, over every shipped migration; an
    object dropped and created again under the same name in one migration is a replacement."""
    found: dict[tuple[str, str], list[str]] = {}
    unique: set[str] = set()
    for name, text in migration_sql.shipped():
        recreated = _recreated(text)
        for statement in migration_sql.statements(text):
            for taken in _takes_away(statement, unique) - recreated:
                found.setdefault((name, taken), []).append(statement[:120])
            for created in re.findall(
                rf"create unique index (?:concurrently )?(?:if not exists )?({_IDENT})",
                statement.lower(),
            ):
                unique.add(_name(created))
                unique.add(f"tickwork.{_name(created)}")
    return found


def test_every_contracting_statement_is_a_reviewed_one() -> None:
    unreviewed = {key: s for key, s in _found().items() if key not in CONTRACTS}
    assert not unreviewed, (
        "migrations that take away what the previous release may use (expand first, stop "
        "using it in a release, take it away in a later one; then name it in CONTRACTS):\n"
        + "\n".join(f"{name}: {taken}: {s}" for (name, taken), s in unreviewed.items())
    )


def test_every_reviewed_contract_is_still_there() -> None:
    stale = set(CONTRACTS) - set(_found())
    assert not stale, f"reviewed but not found: {sorted(stale)}"


def _shipped_by(tag: str) -> set[str]:
    listing = subprocess.run(
        ["git", "ls-tree", "--name-only", f"{tag}:src/tickwork/db/migrations"],
        cwd=releases.ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    return set(listing.split())


_NO_MIGRATIONS = ":(exclude)src/tickwork/db/migrations"
"""A pathspec: the release's code without its migrations."""


def _mentions(tag: str, word: str) -> list[str]:
    """Where the code of release ``tag`` (its migrations left out) names ``word``."""
    grep = ["git", "grep", "-n", "-w", "-i", "-I", "-e", word, tag]
    result = subprocess.run(
        [*grep, "--", "src/tickwork", _NO_MIGRATIONS],
        cwd=releases.ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return result.stdout.splitlines()


def check_new_contract(taken: str, contract: Contract, previous: releases.Release) -> list[str]:
    """What is wrong with taking ``taken`` away in the release after ``previous``."""
    problems = []
    if contract.last_reader is not None and Version(contract.last_reader.lstrip("v")) >= Version(
        previous.version
    ):
        problems.append(
            f"{taken}: {contract.last_reader} still uses it and the previous release is"
            f" {previous.tag}: take it away in the release after the first one that does not"
        )
    word = taken.rsplit(" ", 1)[1].rsplit(".", 1)[-1]
    if mentions := _mentions(previous.ref, word):
        problems.append(f"{taken}: {previous.tag} still names {word}: {mentions[:5]}")
    return problems


def test_what_a_new_migration_takes_away_is_unused_by_the_previous_release() -> None:
    previous = releases.previous()
    before = _shipped_by(previous.ref)
    problems = []
    for (name, taken), contract in CONTRACTS.items():
        if name not in before:
            problems += check_new_contract(taken, contract, previous)
    assert not problems, "\n".join(problems)


def test_the_check_of_a_new_contract_catches_a_column_the_previous_release_reads() -> None:
    previous = releases.previous()
    used = check_new_contract("drop column tickwork.jobs.picked_by", Contract(None, "x"), previous)
    assert used and "still names picked_by" in used[0]
    too_soon = check_new_contract(
        "drop column tickwork.jobs.no_such_column", Contract(previous.tag, "x"), previous
    )
    assert too_soon and "still uses it" in too_soon[0]
    fine = Contract("v0.0.1", "x") if Version(previous.version) > Version("0.0.1") else None
    if fine is not None:
        assert check_new_contract("drop column tickwork.jobs.no_such_column", fine, previous) == []


@pytest.mark.parametrize(
    ("statement", "taken"),
    [
        ("ALTER TABLE tickwork.jobs DROP COLUMN foo", {"drop column tickwork.jobs.foo"}),
        (
            "ALTER TABLE tickwork.jobs DROP foo, DROP COLUMN IF EXISTS bar",
            {
                "drop column tickwork.jobs.foo",
                "drop column tickwork.jobs.bar",
            },
        ),
        ("ALTER TABLE tickwork.jobs DROP CONSTRAINT c", set()),
        ("ALTER TABLE tickwork.jobs ALTER COLUMN foo DROP NOT NULL", set()),
        (
            "ALTER TABLE tickwork.jobs ALTER COLUMN foo DROP DEFAULT",
            {"drop default tickwork.jobs.foo"},
        ),
        (
            "ALTER TABLE tickwork.jobs ALTER COLUMN foo SET NOT NULL",
            {"set not null tickwork.jobs.foo"},
        ),
        ("ALTER TABLE tickwork.jobs RENAME COLUMN foo TO bar", {"rename column tickwork.jobs.foo"}),
        ("ALTER TABLE tickwork.jobs RENAME foo TO bar", {"rename column tickwork.jobs.foo"}),
        ("ALTER TABLE tickwork.jobs RENAME TO tasks", {"rename table tickwork.jobs"}),
        ("ALTER TABLE tickwork.jobs RENAME CONSTRAINT a TO b", set()),
        ("ALTER TABLE tickwork.jobs ADD COLUMN foo integer", set()),
        ("DROP TABLE IF EXISTS tickwork.old_things", {"drop table tickwork.old_things"}),
        ("DROP VIEW tickwork.v", {"drop view tickwork.v"}),
        ("DROP FUNCTION tickwork.f(integer)", {"drop function tickwork.f"}),
        ("DROP TYPE tickwork.t", {"drop type tickwork.t"}),
        ("ALTER FUNCTION tickwork.f(integer) RENAME TO g", {"rename function tickwork.f"}),
        ("DROP INDEX tickwork.jobs_unique_idx", {"drop unique index tickwork.jobs_unique_idx"}),
        ("DROP INDEX tickwork.jobs_plain_idx", set()),
        ("DROP TRIGGER t ON tickwork.jobs", set()),
    ],
)
def test_the_lint_flags_what_takes_something_away(statement: str, taken: set[str]) -> None:
    assert _takes_away(statement, {"tickwork.jobs_unique_idx"}) == taken


def test_an_object_created_again_in_the_same_migration_is_a_replacement() -> None:
    text = "DROP FUNCTION tickwork.f(); CREATE FUNCTION tickwork.f() RETURNS int AS $$ 1 $$"
    assert "drop function tickwork.f" in _recreated(text)
