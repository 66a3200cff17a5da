"""The pure graph check of spawns and ``spec.steps``, tried on random graphs: an order is
returned exactly when the graph has no cycle, and it puts every job after those it waits for;
a refused graph names a real cycle of it, from the entry whose ``after`` closes it."""

from __future__ import annotations

import itertools
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tickwork.errors import InvalidInput
from tickwork.workflows.graph import Node, order


@st.composite
def graphs(draw: st.DrawFn) -> list[Node]:
    size = draw(st.integers(1, 12))
    names = [f"n{i}" for i in range(size)]
    return [
        Node(
            name,
            tuple(
                draw(
                    st.lists(
                        st.sampled_from(names).filter(lambda o, me=name: o != me),
                        max_size=3,
                        unique=True,
                    )
                )
            ),
        )
        for name in names
    ]


def _has_cycle(nodes: list[Node]) -> bool:
    waits = {n.name: set(n.after) for n in nodes}
    done: set[str] = set()
    while True:
        ready = {name for name, w in waits.items() if name not in done and w <= done}
        if not ready:
            return len(done) < len(nodes)
        done |= ready


@given(graphs())
def test_an_order_exactly_when_there_is_no_cycle(nodes: list[Node]) -> None:
    try:
        ordered = order(nodes, "spec.steps", 20, what="step")
    except InvalidInput as error:
        assert _has_cycle(nodes)
        match = re.fullmatch(r"spec\.steps\[(\d+)\]\.after", error.field)
        assert match is not None
        path = error.reason.removeprefix("a cycle: ").split(" -> ")
        assert path[0] == path[-1] == nodes[int(match.group(1))].name
        by_name = {n.name: n for n in nodes}
        for a, b in itertools.pairwise(path):
            assert b in by_name[a].after, f"{a} waits for {b}"
        return
    assert not _has_cycle(nodes)
    assert sorted(ordered) == list(range(len(nodes)))
    position = {nodes[i].name: p for p, i in enumerate(ordered)}
    for node in nodes:
        assert all(position[a] < position[node.name] for a in node.after)


def test_too_many_entries_are_refused_before_anything_else() -> None:
    with pytest.raises(InvalidInput, match=r"^jobs: at most 3 entries, not 4$"):
        order([Node("a")] * 4, "jobs", 3)
