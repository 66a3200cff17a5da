"""``tickwork jobs get JOB_ID``: one job with what its task returned and reported (its result,
why a result was not kept, its latest progress), as ``key: value`` lines or, with ``-o json``,
the jobs object of the ``-o json`` contract plus ``result``, ``result_error`` and
``progress``. Text from tasks is shown with its control characters escaped: a result or a
progress message cannot move the cursor or change the terminal's colours."""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from datetime import UTC
from typing import Any

from tickwork.cli import common, output
from tickwork.db.results import JobResult, Progress
from tickwork.model import Job


def add_get(jobs: argparse.ArgumentParser) -> None:
    """``get`` under ``tickwork jobs`` (``tickwork jobs`` alone still lists)."""
    views = jobs.add_subparsers(metavar="{get}", title="one job")
    parser = views.add_parser(
        "get",
        help="one job: its fields, result and progress",
        description="One job: its fields, what its task returned (result, or why the result "
        "was not kept) and the progress it last reported.",
    )
    parser.add_argument("job_id", metavar="JOB_ID", type=int)
    common.add_database_url(parser)
    parser.add_argument(
        "-o",
        "--output",
        choices=("table", "json"),
        default=argparse.SUPPRESS,
        help="table for people (default), json for programs",
    )
    parser.set_defaults(handler=get_job)


def get_job(args: argparse.Namespace, env: common.Env) -> int:
    with common.app(args, env) as app:
        job = app.get_job(args.job_id)
        returned = app.job_result(args.job_id)
    if args.output == "json":
        print(output.dumps(job_json(job, returned)))
    else:
        print(job_text(job, returned))
    return 0


def progress_json(progress: Progress | None) -> Mapping[str, Any] | None:
    if progress is None:
        return None
    return {
        "fraction": progress.fraction,
        "message": progress.message,
        "attempt": progress.attempt,
        "updated_at": output.iso(progress.at),
    }


def job_json(job: Job, returned: JobResult) -> Mapping[str, Any]:
    return {
        **output.job_object(job),
        "result": returned.result,
        "result_error": returned.result_error,
        "progress": progress_json(returned.progress),
    }


def progress_text(progress: Progress | None) -> str | None:
    """``40% copied 4 of 10 tables (attempt 1, at 2030-01-01 00:00:02Z)``."""
    if progress is None:
        return None
    parts = []
    if progress.fraction is not None:
        parts.append(f"{progress.fraction:.0%}")
    if progress.message:
        parts.append(safe(progress.message))
    facts = [f"attempt {progress.attempt}"] if progress.attempt is not None else []
    if progress.at is not None:
        facts.append(f"at {progress.at.astimezone(UTC):%Y-%m-%d %H:%M:%SZ}")
    return " ".join(parts + ([f"({', '.join(facts)})"] if facts else []))


def job_text(job: Job, returned: JobResult) -> str:
    fields = {key: value for key, value in output.job_object(job).items() if key != "payload"}
    lines = [
        f"{key}: {'-' if value is None else safe(str(value))}" for key, value in fields.items()
    ]
    lines.append("payload: " + _json_block(job.payload))
    lines.append(f"progress: {progress_text(returned.progress) or '-'}")
    lines.append("result: " + ("-" if returned.result is None else _json_block(returned.result)))
    lines.append(f"result error: {safe(returned.result_error or '-')}")
    return "\n".join(lines)


def _json_block(value: Any) -> str:
    """Indented JSON (non-ASCII kept, control characters escaped by JSON itself)."""
    return json.dumps(value, indent=2, ensure_ascii=False)


def safe(text: str) -> str:
    """``text`` with every control character other than a newline escaped (``\\x1b``)."""
    return "".join(c if c.isprintable() or c == "\n" else _escaped(c) for c in text)


def _escaped(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
