"""What a job keeps of a return value (pure, :func:`tickwork.results.keep`), over any value
hypothesis can build: it never raises; what it keeps is JSON that ``jsonb`` takes and within
the payload's size; what it refuses it names, starting ``not kept: result``."""

from __future__ import annotations

import json
import math
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tickwork import results
from tickwork.schedules import limits

SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text()
    | st.binary(max_size=4)
    | st.sets(st.integers(), max_size=2)
)
VALUES = st.recursive(
    SCALARS,
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.text(max_size=8) | st.integers(), children, max_size=4)
        | st.tuples(children)
    ),
    max_leaves=30,
)


@settings(max_examples=400, deadline=None)
@given(VALUES)
def test_any_value_is_kept_as_storable_json_or_refused_by_name(value: Any) -> None:
    kept = results.keep(value)
    if kept.error is None:
        assert kept.value is value
        if value is not None:
            text = json.dumps(value, allow_nan=False, ensure_ascii=False)
            assert "\\u0000" not in text
            assert len(text.encode("utf-8", "surrogatepass")) <= 2 * limits.PAYLOAD_MAX_BYTES
    else:
        assert kept.value is None
        assert kept.error.startswith("not kept: result")
        assert len(kept.error) <= results.MAX_ERROR_LENGTH


def test_the_errors_name_the_part_at_fault() -> None:
    assert results.keep({"a": [1, {"b": math.nan}]}).error == (
        "not kept: result.a[1].b: nan is not a JSON number"
    )
    assert results.keep({"a key": b"x"}).error == (
        "not kept: result['a key']: b'x' is not a JSON value (bytes)"
    )
    assert results.keep(None) == results.NOTHING
