"""Waiting and stopping: a loop told to stop stops, whatever it was waiting on.

CI once timed out a worker shutdown: a background loop went on after ``task.cancel()``
because a library's ``asyncio.wait_for`` (Python 3.11) returns normally when it is cancelled
just as what it waits for completes. These tests recreate that swallowed cancellation."""

from __future__ import annotations

import asyncio

import pytest

from tickwork.clock import cancel_all, sleep


async def test_a_sleep_cancelled_as_it_is_woken_is_still_cancelled() -> None:
    wake = asyncio.Event()
    sleeper = asyncio.create_task(sleep(60, wake))
    await asyncio.sleep(0)  # the sleeper now waits on the event
    wake.set()
    sleeper.cancel()  # in the same turn of the loop as the wake-up
    with pytest.raises(asyncio.CancelledError):
        await sleeper


async def test_sleep_with_no_limit_ends_when_woken() -> None:
    wake = asyncio.Event()
    sleeper = asyncio.create_task(sleep(None, wake))
    await asyncio.sleep(0)
    assert not sleeper.done()
    wake.set()
    await asyncio.wait_for(sleeper, 5)


async def test_sleep_returns_at_its_time_when_nobody_wakes_it() -> None:
    await asyncio.wait_for(sleep(0.01, asyncio.Event()), 5)


async def test_cancel_all_ends_a_task_that_swallows_the_first_cancellation() -> None:
    swallowed = 0

    async def stubborn() -> None:
        nonlocal swallowed
        while True:
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                swallowed += 1
                if swallowed > 1:
                    raise

    task = asyncio.create_task(stubborn())
    await asyncio.sleep(0)
    await asyncio.wait_for(cancel_all([task]), 10)
    assert task.cancelled()
    assert swallowed == 2


async def test_cancel_all_leaves_finished_tasks_and_their_errors_alone() -> None:
    async def fails() -> None:
        raise RuntimeError("boom")

    failed = asyncio.create_task(fails())
    await asyncio.sleep(0)
    await cancel_all([failed])
    assert isinstance(failed.exception(), RuntimeError)
