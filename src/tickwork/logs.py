"""Structured logging: a message plus stable keys (action, job_id, kind, schedule, worker,
attempt, ...), printed as ``key=value`` pairs or as one JSON object per line.

Records logged while a worker runs carry ``worker`` (its name) without each call saying so:
the worker sets :data:`CURRENT_WORKER` for its tasks. Payloads are never logged.
"""

from __future__ import annotations

import json
import logging
import sys
from contextvars import ContextVar
from typing import Any

KEYS = (
    "action",
    "worker",
    "job_id",
    "kind",
    "queue",
    "attempt",
    "namespace",
    "schedule",
    "occurrence",
    "count",
    "reason",
    "error",
)

CURRENT_WORKER: ContextVar[str | None] = ContextVar("tickwork_worker", default=None)
"""The worker whose task is logging (set by the worker for every task it starts)."""


def fields(**values: Any) -> dict[str, Any]:
    """``logger.info(msg, extra=fields(action=..., job_id=...))``"""
    unknown = set(values) - set(KEYS)
    if unknown:
        raise ValueError(f"unknown log keys: {sorted(unknown)}")
    return values


class KeyValueFormatter(logging.Formatter):
    def __init__(self, as_json: bool) -> None:
        super().__init__()
        self.as_json = as_json

    def format(self, record: logging.LogRecord) -> str:
        data = {}
        for key in KEYS:
            if hasattr(record, key):
                data[key] = getattr(record, key)
            elif key == "worker" and (worker := CURRENT_WORKER.get()) is not None:
                data[key] = worker
        if self.as_json:
            data = {
                "time": self.formatTime(record),
                "level": record.levelname.lower(),
                "logger": record.name,
                "message": record.getMessage(),
                **data,
            }
            return json.dumps(data, default=str)
        pairs = " ".join(f"{k}={v}" for k, v in data.items())
        line = f"{self.formatTime(record)} {record.levelname:<7} {record.getMessage()}"
        return f"{line} {pairs}" if pairs else line


def configure(level: str = "INFO", *, as_json: bool = False) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(KeyValueFormatter(as_json))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
