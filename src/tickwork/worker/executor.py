"""Runs one job's task function: async ones on the loop, sync ones in a thread pool (in a copy
of the context, so the task sees the worker's context variables and its trace), both bounded
by the job's timeout, in the attempt's span (:func:`tickwork.tracing.execution`). Returns an
outcome; never raises for the task's errors."""

from __future__ import annotations

import asyncio
import contextvars
import traceback
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from tickwork import tracing
from tickwork.errors import summary as summary
from tickwork.model import Job
from tickwork.tasks import Task


@dataclass(frozen=True)
class Succeeded:
    result: Any


@dataclass(frozen=True)
class Failed:
    error: str
    timed_out: bool = False
    """The attempt ran past its timeout."""


Outcome = Succeeded | Failed

_MAX_ERROR = 4000


def describe(exc: BaseException) -> str:
    """One error text for ``last_error``: the exception and the innermost frames."""
    text = "".join(traceback.format_exception(exc, limit=-3)).strip()
    return text if len(text) <= _MAX_ERROR else text[-_MAX_ERROR:]


async def _call(job: Job, task: Task, threads: ThreadPoolExecutor) -> Any:
    if task.is_async:
        return await task.function(job)
    context = contextvars.copy_context()
    return await asyncio.get_running_loop().run_in_executor(
        threads, context.run, task.function, job
    )


def _failed(span: tracing.Span, exc: Exception) -> Failed:
    failed = Failed(describe(exc))
    span.failed(summary(failed.error), exc)
    return failed


async def execute(job: Job, task: Task, threads: ThreadPoolExecutor) -> Outcome:
    timeout = job.timeout if job.timeout is not None else task.timeout
    if task.own_timeout:
        timeout = None
    deadline = None if timeout is None else asyncio.timeout(timeout)
    with tracing.execution(job) as span:
        try:
            if deadline is None:
                return Succeeded(await _call(job, task, threads))
            async with deadline:
                result = await _call(job, task, threads)
            return Succeeded(result)
        except TimeoutError as exc:
            if deadline is not None and deadline.expired():
                timed_out = Failed(f"timed out after {timeout:g}s", timed_out=True)
                span.failed(timed_out.error, exc, "timeout")
                return timed_out
            if task.own_timeout:  # the task enforcing the timeout says it ran out
                timed_out = Failed(describe(exc), timed_out=True)
                span.failed(summary(timed_out.error), exc, "timeout")
                return timed_out
            return _failed(span, exc)  # the task's own TimeoutError: its error, not ours
        except Exception as exc:
            return _failed(span, exc)
