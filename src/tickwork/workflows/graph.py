"""A small graph of named jobs that wait for one another (a task's ``job.spawn``, a Schedule's
``spec.steps``): checked and put in an order where every job comes after those it waits for.
Pure: no database. Every refusal is an :class:`~tickwork.errors.InvalidInput` naming the exact
field (``spec.steps[2].after[0]``) and the reason: a duplicate name, an unknown name, a job
waiting for itself, a cycle (named step by step), too many jobs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tickwork.errors import InvalidInput


@dataclass(frozen=True)
class Node:
    """One job of the graph: its name and the names of the jobs it waits for."""

    name: str
    after: tuple[str, ...] = ()


def order(nodes: Sequence[Node], field: str, max_nodes: int, what: str = "entry") -> list[int]:
    """The indices of ``nodes`` in an order where each comes after every node its ``after``
    names (ties in list order); InvalidInput naming ``field[i]...`` otherwise."""
    if len(nodes) > max_nodes:
        raise InvalidInput(field, f"at most {max_nodes} entries, not {len(nodes)}")
    index: dict[str, int] = {}
    for i, node in enumerate(nodes):
        if node.name in index:
            raise InvalidInput(
                f"{field}[{i}].name",
                f"duplicate name {node.name!r} (also {field}[{index[node.name]}].name)",
            )
        index[node.name] = i
    waits: list[set[int]] = []
    for i, node in enumerate(nodes):
        parents = set()
        for k, name in enumerate(node.after):
            if name == node.name:
                raise InvalidInput(f"{field}[{i}].after[{k}]", f"{name!r} cannot wait for itself")
            if name not in index:
                raise InvalidInput(f"{field}[{i}].after[{k}]", f"no {what} named {name!r}")
            parents.add(index[name])
        waits.append(parents)
    ordered = _kahn(waits)
    if len(ordered) < len(nodes):
        cycle = _cycle(waits, set(range(len(nodes))) - set(ordered))
        path = " -> ".join(nodes[i].name for i in cycle)
        raise InvalidInput(f"{field}[{cycle[0]}].after", f"a cycle: {path}")
    return ordered


def _kahn(waits: list[set[int]]) -> list[int]:
    """Topological order, lowest index first among the ready ones."""
    left = [len(parents) for parents in waits]
    children: list[list[int]] = [[] for _ in waits]
    for i, parents in enumerate(waits):
        for p in parents:
            children[p].append(i)
    ready = sorted(i for i, n in enumerate(left) if n == 0)
    ordered: list[int] = []
    while ready:
        i = ready.pop(0)
        ordered.append(i)
        for child in children[i]:
            left[child] -= 1
            if left[child] == 0:
                ready.append(child)
        ready.sort()
    return ordered


def _cycle(waits: list[set[int]], stuck: set[int]) -> list[int]:
    """One cycle among the ``stuck`` nodes (each waits, directly or not, for one of them),
    from its lowest index round to it again."""
    start = min(stuck)
    path = [start]
    seen = {start: 0}
    while True:
        nxt = min(p for p in waits[path[-1]] if p in stuck)
        if nxt in seen:
            loop = path[seen[nxt] :]
            first = loop.index(min(loop))
            loop = loop[first:] + loop[:first]
            return [*loop, loop[0]]
        seen[nxt] = len(path)
        path.append(nxt)
