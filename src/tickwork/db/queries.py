"""The named SQL queries in ``tickwork/db/sql/*.sql``, loaded once.

A block starts with ``-- name: <name>`` and runs until the next such line. Python refers to
queries only by name; no query text is ever built from values.
"""

from __future__ import annotations

import re
from importlib import resources

_HEADER = re.compile(r"^-- name: ([a-z_][a-z0-9_]*)\s*$", re.MULTILINE)


def parse(text: str, source: str) -> dict[str, str]:
    """Split one ``.sql`` file into its named queries."""
    parts = _HEADER.split(text)
    found: dict[str, str] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        if name in found:
            raise ValueError(f"{source}: query {name!r} defined twice")
        found[name] = body.strip()
    return found


def load() -> dict[str, str]:
    """Every named query of every file in ``tickwork/db/sql``."""
    queries: dict[str, str] = {}
    for entry in sorted(resources.files("tickwork.db").joinpath("sql").iterdir(), key=str):
        if not entry.name.endswith(".sql"):
            continue
        for name, body in parse(entry.read_text("utf-8"), entry.name).items():
            if name in queries:
                raise ValueError(f"{entry.name}: query {name!r} already defined in another file")
            queries[name] = body
    return queries


QUERIES = load()
