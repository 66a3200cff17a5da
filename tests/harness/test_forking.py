"""The processes multi-process tests start (tests/support/forking.py): each a process of its
own, with none of the test process's state, writing where the running test's output goes."""

from __future__ import annotations

import os
import sys
from typing import Any

import pytest

from tests.support.forking import process_context


def _report(queue: Any) -> None:
    print("out of the child", flush=True)
    print("err of the child", file=sys.stderr, flush=True)
    queue.put((os.getpid(), os.environ.get("PATCHED_BY_THE_TEST")))


def test_a_started_process_is_its_own_and_writes_into_the_tests_capture(
    capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATCHED_BY_THE_TEST", "yes")
    context = process_context()
    queue = context.Queue()
    children = [context.Process(target=_report, args=(queue,)) for _ in range(2)]
    for child in children:
        child.start()
    reports = [queue.get(timeout=60) for _ in children]
    for child in children:
        child.join(60)
        assert child.exitcode == 0
    pids = {pid for pid, _ in reports}
    assert len(pids) == 2 and os.getpid() not in pids
    assert {patched for _, patched in reports} == {None}  # the server's environment
    out, err = capfd.readouterr()
    assert out.count("out of the child") == 2 and err.count("err of the child") == 2
