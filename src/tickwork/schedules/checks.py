"""The checks of single values of a Schedule spec, and how messages quote them.

Each check says why a value is outside the limits of its field (:mod:`tickwork.schedules.limits`,
docs/limits.md): text too long, holding NUL or unpaired surrogates; numbers out of range or not
finite; payloads (and container templates) that are not plain JSON within the payload limits.
:class:`DefinitionError` names the schedule, the field and the reason. Nothing here recurses over
a user's value, and values quoted in messages are cut short (:func:`shown`).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any

from tickwork.errors import InvalidInput
from tickwork.schedules import job_templates, limits

SHOWN_LENGTH = 60
"""Values quoted in an error message are cut to about this many characters."""


MAX_REASON_LENGTH = 300


class DefinitionError(InvalidInput):
    """A schedule definition is invalid; names the definition, the spec field and the reason
    (cut to :data:`MAX_REASON_LENGTH` characters: it may quote a long value)."""

    def __init__(self, name: str, field: str, reason: str) -> None:
        if len(reason) > MAX_REASON_LENGTH:
            reason = reason[: MAX_REASON_LENGTH - 3] + "..."
        super().__init__(field, reason, where=f"schedule {shown(name)}")
        self.name = name


def limit_problem(path: str, value: str | float) -> str | None:
    """Why ``value`` is outside the limits of the field at ``path``, or None when it is not."""
    limit = limits.FIELDS[path]
    if isinstance(value, str):
        return text_problem(value, limit.min_length or 0, limit.max_length)
    if isinstance(value, float) and not math.isfinite(value):
        return "must be a finite number"
    if limit.minimum is not None:
        if limit.exclusive_minimum and value <= limit.minimum:
            return f"must be > {tidy_number(limit.minimum)}, not {shown(value)}"
        if value < limit.minimum:
            return f"must be >= {tidy_number(limit.minimum)}, not {shown(value)}"
    if limit.maximum is not None and value > limit.maximum:
        return f"must be <= {tidy_number(limit.maximum)}, not {shown(value)}"
    return None


def text_problem(value: str, min_length: int, max_length: int | None) -> str | None:
    """Why ``value`` cannot be stored as this text, or None: too long, NUL (PostgreSQL text
    and jsonb cannot hold U+0000), not UTF-8 (an unpaired surrogate), or blank."""
    if max_length is not None and len(value) > max_length:
        return f"must be at most {max_length} characters, not {len(value)}"
    if "\x00" in value:
        return "must not contain NUL (U+0000) characters"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "must be valid Unicode (it contains an unpaired surrogate)"
    if min_length and not value.strip():
        return "must not be empty"
    return None


def check_payload(error: Callable[[str, str], Exception], path: str, payload: Any) -> None:
    """Raise ``error(where, reason)`` at the first value of ``payload`` that is not plain JSON
    within the payload limits (depth, encoded size, key length, numbers finite and within 64
    bits, text without NUL), so that it round-trips through jsonb and passes this check again
    when firing reads it back. Walks iteratively, so any depth (even a cycle) is safe, and
    stops once the size is exceeded, so any breadth (even a YAML alias bomb) is cheap."""
    budget = limits.PAYLOAD_MAX_BYTES
    todo: list[tuple[str, Any, int]] = [(path, payload, 0)]
    while todo:
        where, value, depth = todo.pop()
        size, children = _payload_node(error, where, value, depth)
        budget -= size
        if budget < 0:
            reason = f"is larger than {limits.PAYLOAD_MAX_BYTES} bytes encoded as JSON"
            raise error(path, reason)
        todo.extend(reversed(children))


def _payload_node(
    error: Callable[[str, str], Exception], where: str, value: Any, depth: int
) -> tuple[int, list[tuple[str, Any, int]]]:
    """The bytes ``value`` adds to the compact JSON encoding (its own, not its children's)
    and its children; raises for a value that is not within the limits."""
    if value is None or isinstance(value, bool):
        return len(json.dumps(value)), []
    if isinstance(value, int):
        if not limits.PAYLOAD_MIN_INT <= value <= limits.PAYLOAD_MAX_INT:
            raise error(where, f"{shown(value)} is outside the signed 64-bit integer range")
        return len(str(value)), []
    if isinstance(value, float):
        if not math.isfinite(value):
            raise error(where, f"{value} is not a JSON number")
        if not -_FLOAT_BOUND <= value < _FLOAT_BOUND:
            raise error(where, f"{value!r} is outside the signed 64-bit integer range")
        # jsonb prints numbers in full (1e-300 as 302 characters; 1e16 as an integer).
        return len(format(Decimal(repr(value)), "f")), []
    if isinstance(value, str):
        problem = text_problem(value, 0, None)
        if problem is not None:
            raise error(where, problem)
        return len(json.dumps(value, ensure_ascii=False).encode()), []
    if isinstance(value, list | dict) and depth >= limits.PAYLOAD_MAX_DEPTH:
        raise error(where, f"nests deeper than {limits.PAYLOAD_MAX_DEPTH} levels")
    if isinstance(value, list):
        items = [(f"{where}[{index}]", item, depth + 1) for index, item in enumerate(value)]
        return 2 + max(len(value) - 1, 0), items
    if isinstance(value, dict):
        size = 2 + max(len(value) - 1, 0)
        children = []
        for key in value:
            if not isinstance(key, str):
                raise error(where, f"key {shown(key)} is not a string")
            problem = text_problem(key, 0, limits.PAYLOAD_MAX_KEY_LENGTH)
            if problem is not None:
                raise error(where, f"key {shown(key)}: {problem}")
            size += len(json.dumps(key, ensure_ascii=False).encode()) + 1
            children.append((f"{where}{_key_path(key)}", value[key], depth + 1))
        return size, children
    raise error(where, f"{shown(value)} is not a JSON value ({type(value).__name__}); quote it")


_FLOAT_BOUND = float(2**63)
"""A float outside ±2**63 would come back from jsonb as an integer beyond 64 bits."""


def _key_path(key: str) -> str:
    """``.key``, or ``["a key"]`` for a key that is not a plain word."""
    return f".{key}" if _PLAIN_KEY.fullmatch(key) else f"[{shown(key)}]"


_PLAIN_KEY = re.compile(r"[A-Za-z0-9_-]{1,60}")


def shown(value: Any) -> str:
    """``value`` for a message: a repr cut to about :data:`SHOWN_LENGTH` characters, and a
    huge integer as its size (its digits would not even convert to text)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 100:
        return f"an integer of about {int(value.bit_length() * math.log10(2))} digits"
    if isinstance(value, str):
        text = repr(value[:SHOWN_LENGTH])
        return text + "..." if len(value) > SHOWN_LENGTH else text
    if isinstance(value, list | dict | Mapping):
        return f"a {type(value).__name__}"
    text = repr(value)
    return text if len(text) <= SHOWN_LENGTH else text[:SHOWN_LENGTH] + "..."


def key_name(key: Any) -> str:
    """A mapping key as a field name in a message: itself when it is a short string."""
    return key if isinstance(key, str) and len(key) <= SHOWN_LENGTH else shown(key)


def check_container_template(error: Callable[[str, str], Exception], template: Any) -> None:
    """Raise ``error(field, reason)`` unless ``template`` is a valid batch/v1 JobTemplateSpec
    within the payload limits (it travels in each job's payload)."""
    if not isinstance(template, Mapping):
        raise error(job_templates.PATH, f"must be a mapping, not {type_name(template)}")
    check_payload(error, job_templates.PATH, template)
    job_templates.check(error, template)


def tidy_number(value: float) -> float:
    """Whole floats as ints (``30`` rather than ``30.0``), for a tidy canonical spec."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def type_name(value: Any) -> str:
    """The JSON/YAML name of a value's type, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return f"a number ({shown(value)})"
    if isinstance(value, str):
        return f"a string ({shown(value)})"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return type(value).__name__
