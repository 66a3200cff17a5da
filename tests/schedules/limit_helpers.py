"""Schedule specs at and beyond each field's limit (``tickwork.schedules.limits``), shared by
the tests of the limits in ``tests/schedules/`` and ``tests/operator/``. Import as
``from tests.schedules import limit_helpers``."""

from __future__ import annotations

import contextlib
import copy
import io
import json
from decimal import Decimal
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from tickwork.cli import main
from tickwork.schedules import limits

CRD_PATH = Path(__file__).resolve().parents[2] / "crds" / "schedules.tickwork.io.yaml"
LONGEST_ZONE = "America/Argentina/ComodRivadavia"
"""The longest IANA time zone name (32 characters)."""
WIDE = "\N{MUSICAL SYMBOL G CLEF}"
"""A character of four bytes in UTF-8: the worst case for a text column's index entry."""

BASE: dict[str, Any] = {"schedule": "@daily", "job": {"kind": "k"}}


@cache
def crd_spec_schema() -> dict[str, Any]:
    document = yaml.safe_load(CRD_PATH.read_text())
    [version] = document["spec"]["versions"]
    return version["schema"]["openAPIV3Schema"]["properties"]["spec"]  # type: ignore[no-any-return]


def crd_field(path: str) -> dict[str, Any]:
    """The CRD schema node of ``spec.a.b``."""
    node = crd_spec_schema()
    for part in path.split(".")[1:]:
        node = node["properties"][part]
    return node


def is_integer(path: str) -> bool:
    return crd_field(path).get("type") == "integer"


def spec_with(path: str, value: Any, base: dict[str, Any] | None = None) -> dict[str, Any]:
    """``base`` (default :data:`BASE`) with the field at ``path`` set to ``value``, and what
    that field needs: ``every`` replaces ``schedule``, ``catchUpLimit`` comes with CatchUp, a
    ``baseDelaySeconds`` with the largest ``maxDelaySeconds``, a ``maxDelaySeconds`` with a
    zero ``baseDelaySeconds``, a ``concurrencyLimit`` with a ``concurrencyKey``."""
    spec = copy.deepcopy(BASE if base is None else base)
    parts = path.split(".")[1:]
    if parts == ["every"]:
        spec.pop("schedule", None)
    if parts == ["catchUpLimit"]:
        spec["misfirePolicy"] = "CatchUp"
    if parts[-1] == "baseDelaySeconds":
        spec["job"].setdefault("retryPolicy", {})["maxDelaySeconds"] = limits.MAX_DURATION_SECONDS
    if parts[-1] == "maxDelaySeconds":
        spec["job"].setdefault("retryPolicy", {})["baseDelaySeconds"] = 0
    if parts[-1] == "concurrencyLimit":
        spec["job"].setdefault("concurrencyKey", "key")
    target = spec
    for part in parts[:-1]:
        target = target.setdefault(part, {})
    target[parts[-1]] = value
    return spec


def text_of_length(path: str, length: int) -> str:
    """A value for the text field ``path``, ``length`` characters long, valid when it can be
    (no time zone name is longer than :data:`LONGEST_ZONE`)."""
    if path == "spec.schedule":
        return "0" * (length - len(" 3 * * *")) + " 3 * * *"
    if path == "spec.every":
        return "0" * (length - 2) + "1s"
    if path in ("spec.timeZone", "spec.scheduleNamespace"):
        return "n" * length
    return (WIDE * length)[:length]


def edges(path: str) -> list[tuple[Any, bool]]:
    """Values of the field at ``path`` at and just beyond its limits, each with whether
    the definition accepts it (lengths: the largest, one more, and a NUL inside; for the time
    zone, whose longest name is shorter than its limit, that name)."""
    limit = limits.FIELDS[path]
    if limit.max_length is not None:
        most = limit.max_length
        largest = LONGEST_ZONE if path == "spec.timeZone" else text_of_length(path, most)
        return [
            (largest, True),
            (text_of_length(path, most + 1), False),
            ("a\x00b", False),
        ]
    assert limit.minimum is not None and limit.maximum is not None
    step = 1 if is_integer(path) else 0.5
    low, high = limit.minimum, limit.maximum
    found: list[tuple[Any, bool]] = [(high, True), (high + step, False), (low - step, False)]
    found.append((low, not limit.exclusive_minimum))
    if limit.exclusive_minimum:
        found.append((low + 0.001, True))
    return found


def nested(levels: int, leaf: Any = 1) -> Any:
    """``leaf`` inside ``levels`` objects: ``{"a": {"a": ... leaf}}``."""
    value = leaf
    for _ in range(levels):
        value = {"a": value}
    return value


def encoded_size(payload: Any) -> int:
    """The payload's size as the limit counts it: compact UTF-8 JSON, numbers as jsonb
    prints them (in full: 1.5e-300 as 304 characters)."""
    text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    return len(text.encode()) + sum(
        len(format(Decimal(repr(number)), "f")) - len(repr(number)) for number in floats(payload)
    )


def floats(value: Any) -> list[float]:
    if isinstance(value, float):
        return [value]
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else []
    return [number for item in items for number in floats(item)]


def largest_payload() -> dict[str, Any]:
    """A payload at every payload limit at once: exactly ``PAYLOAD_MAX_BYTES`` encoded, nested
    ``PAYLOAD_MAX_DEPTH`` levels, a key of the longest length, the extreme 64-bit integers,
    floats jsonb prints long or as integers, and text with four-byte characters."""
    payload: dict[str, Any] = {
        "deep": nested(limits.PAYLOAD_MAX_DEPTH - 1),
        "k" * limits.PAYLOAD_MAX_KEY_LENGTH: [limits.PAYLOAD_MIN_INT, limits.PAYLOAD_MAX_INT],
        "floats": [1.5e-300, -9.2e18, 0.1],
        "wide": WIDE * 10,
        "pad": "",
    }
    payload["pad"] = "p" * (limits.PAYLOAD_MAX_BYTES - encoded_size(payload))
    assert encoded_size(payload) == limits.PAYLOAD_MAX_BYTES
    return payload


def manifest(name: str, spec: dict[str, Any]) -> str:
    """One Schedule document as YAML (``.nan``/``.inf`` for those floats, NUL escaped)."""
    document = {
        "apiVersion": "tickwork.io/v1",
        "kind": "Schedule",
        "metadata": {"name": name},
        "spec": spec,
    }
    return yaml.safe_dump(document, sort_keys=False)


def sync(database_url: str, namespace: str, path: Path) -> tuple[int, str]:
    """``tickwork sync NAMESPACE -f PATH`` in this process: its exit status and stderr."""
    stderr, stdout = io.StringIO(), io.StringIO()
    argv = ["sync", namespace, "-f", str(path), "--database-url", database_url]
    with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(stdout):
        status = main(argv, env={})
    return status, stderr.getvalue()
