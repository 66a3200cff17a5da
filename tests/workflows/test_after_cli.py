"""``tickwork enqueue --after``: the job waits for its parents; bad ids and unknown jobs are
refused with one line naming --after and a non-zero exit."""

from __future__ import annotations

import pytest

from tests.cli.test_cli import enqueue, job, one_line_error, tickwork_cmd


def test_enqueue_after_waits_for_the_parents(database_url: str) -> None:
    first = enqueue(database_url, "w.one")
    second = enqueue(database_url, "w.one")
    child = enqueue(database_url, "w.two", "--after", f"{first},{second}")
    assert job(database_url, child)["status"] == "waiting"


@pytest.mark.parametrize(
    ("after", "expected"),
    [
        ("x", "--after: not a job id: 'x'"),
        ("1,,2", "--after: not a job id: ''"),
        ("-3", "--after: not a job id: '-3'"),
        ("0", "--after: must be a job id"),
        ("424242", "--after: no job 424242 in this namespace"),
    ],
)
def test_enqueue_after_refuses_bad_or_unknown_ids(
    database_url: str, after: str, expected: str
) -> None:
    result = tickwork_cmd(
        "enqueue", "w.two", "--allow-unknown-kind", "--after", after, database_url=database_url
    )
    assert expected in one_line_error(result, 2)
