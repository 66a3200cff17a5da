"""Hypothesis strategies for Schedule field values near and beyond their limits
(``tickwork.schedules.limits``), shared by the tests of ``tickwork sync``
(``tests/schedules/test_limits.py``) and of the operator
(``tests/operator/test_operator_limits.py``). Import as
``from tests.schedules import limit_strategies``."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from tests.schedules import limit_helpers
from tests.schedules.limit_helpers import WIDE
from tickwork.schedules import limits

TEXT_ALPHABET = st.sampled_from(["a", "0", " ", "é", WIDE, "\x00", "\ud800", "\n", '"', "\\"])


def text_values(path: str) -> st.SearchStrategy[Any]:
    limit = limits.FIELDS[path]
    assert limit.max_length is not None
    most = limit.max_length
    lengths = st.sampled_from([0, 1, most - 1, most, most + 1, 10 * most])
    return st.one_of(
        lengths.map(lambda n: limit_helpers.text_of_length(path, max(n, 1))),
        st.text(TEXT_ALPHABET, max_size=most + 2),
        st.builds(lambda n, c: c * n, lengths, TEXT_ALPHABET),
    )


def number_values(path: str) -> st.SearchStrategy[Any]:
    limit = limits.FIELDS[path]
    assert limit.minimum is not None and limit.maximum is not None
    low, high = int(limit.minimum), int(limit.maximum)
    edges = [low - 1, low, high, high + 1, 2**31, 2**63, -(2**63) - 1, 10**30]
    return st.one_of(
        st.sampled_from(edges),
        st.integers(low - 10, high + 10),
        st.floats(allow_nan=True, allow_infinity=True),
        st.sampled_from([high + 0.5, low - 0.5, low + 0.5, 1e308]),
    )


def field_values(path: str) -> st.SearchStrategy[Any]:
    if limits.FIELDS[path].max_length is not None:
        return text_values(path)
    return number_values(path)


JSON_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**64), 2**64),
    st.sampled_from([limits.PAYLOAD_MIN_INT, limits.PAYLOAD_MAX_INT, 2**63, 10**40]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(TEXT_ALPHABET, max_size=20),
)
PAYLOADS = st.one_of(
    st.recursive(
        JSON_SCALARS,
        lambda inner: (
            st.lists(inner, max_size=4)
            | st.dictionaries(st.text(TEXT_ALPHABET, max_size=8), inner, max_size=4)
        ),
        max_leaves=12,
    ),
    st.sampled_from([63, 64, 65, 99]).map(limit_helpers.nested),
    st.integers(-3, 3).map(lambda d: {"pad": "p" * (limits.PAYLOAD_MAX_BYTES - 10 + d)}),
    st.sampled_from([257, 256]).map(lambda n: {"k" * n: 1}),
)
"""Payloads near and beyond each payload limit (a dict ``{"pad": ...}`` encodes in 10 bytes
plus its text)."""
