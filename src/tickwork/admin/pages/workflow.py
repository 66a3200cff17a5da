"""The graph of a run on a job's page (docs/workflows.md): the jobs linked to it by ``after``
edges, drawn server-side as an SVG (columns by depth, parents left of their dependents, each
job a link to its page), followed by the same facts as text: what the job waits for and what
waits for it. Built with :func:`~tickwork.admin.html.el` only, so kinds are escaped."""

from __future__ import annotations

from tickwork.admin import reads
from tickwork.admin.html import Child, Html, el, path
from tickwork.admin.pages.layout import job_link, status, table
from tickwork.db.workflows import Linked
from tickwork.model import JobStatus

BOX_W, BOX_H, GAP_X, GAP_Y, MARGIN = 170, 34, 50, 14, 10
KIND_SHOWN = 20

FILL = {
    JobStatus.WAITING: "#eef0f3",
    JobStatus.AVAILABLE: "#e3f0ff",
    JobStatus.RUNNING: "#fff4d6",
    JobStatus.SUCCEEDED: "#e2f5e6",
    JobStatus.DEAD: "#fbe0e0",
    JobStatus.CANCELLED: "#f0e6f5",
}


def depths(ids: list[int], edges: list[tuple[int, int]]) -> dict[int, int]:
    """Each job's column: 0 for a job none of whose parents is drawn, else one more than its
    deepest drawn parent."""
    parents: dict[int, list[int]] = {i: [] for i in ids}
    for child, parent in edges:
        parents[child].append(parent)
    found: dict[int, int] = {}
    todo = list(ids)
    while todo:  # edges never make a cycle (checked at enqueue): this ends
        waiting = []
        for i in todo:
            if all(p in found for p in parents[i]):
                found[i] = 1 + max((found[p] for p in parents[i]), default=-1)
            else:
                waiting.append(i)
        if len(waiting) == len(todo):  # cannot happen; never loop for ever on bad data
            found.update((i, 0) for i in waiting)
            break
        todo = waiting
    return found


def _svg(graph: reads.RunGraph, current: int) -> Html:
    column = depths([j.id for j in graph.jobs], graph.edges)
    rows: dict[int, int] = {}
    place: dict[int, tuple[int, int]] = {}
    for j in sorted(graph.jobs, key=lambda j: (column[j.id], j.id)):
        row = rows.get(column[j.id], 0)
        rows[column[j.id]] = row + 1
        place[j.id] = (
            MARGIN + column[j.id] * (BOX_W + GAP_X),
            MARGIN + row * (BOX_H + GAP_Y),
        )
    width = MARGIN * 2 + (max(column.values()) + 1) * (BOX_W + GAP_X) - GAP_X
    height = MARGIN * 2 + max(rows.values()) * (BOX_H + GAP_Y) - GAP_Y
    lines = [
        el(
            "line",
            x1=place[parent][0] + BOX_W,
            y1=place[parent][1] + BOX_H // 2,
            x2=place[child][0],
            y2=place[child][1] + BOX_H // 2,
            stroke="#8a94a6",
        )
        for child, parent in graph.edges
    ]
    boxes = []
    for j in graph.jobs:
        x, y = place[j.id]
        kind = j.kind if len(j.kind) <= KIND_SHOWN else j.kind[: KIND_SHOWN - 1] + "…"
        boxes.append(
            el(
                "a",
                el("title", f"job #{j.id} {j.kind}: {j.status.value}"),
                el(
                    "rect",
                    x=x,
                    y=y,
                    width=BOX_W,
                    height=BOX_H,
                    rx=4,
                    fill=FILL.get(j.status, "#ffffff"),
                    stroke="#1f2937" if j.id == current else "#8a94a6",
                    stroke_width=3 if j.id == current else 1,
                ),
                el("text", f"#{j.id} {kind}", x=x + 6, y=y + 14, font_size=11),
                el("text", j.status.value, x=x + 6, y=y + 28, font_size=10, fill="#4b5563"),
                href=path("jobs", j.id),
            )
        )
    return el(
        "svg",
        lines,
        boxes,
        xmlns="http://www.w3.org/2000/svg",
        width=width,
        height=height,
        viewBox=f"0 0 {width} {height}",
        role="img",
        aria_label="the graph of the run this job is part of",
        class_="run-graph",
    )


def section(graph: reads.RunGraph | None, current: int) -> list[Child]:
    """The "Run graph" part of a job page (nothing for a job with no edges)."""
    if graph is None:
        return []
    by_id: dict[int, Linked] = {j.id: j for j in graph.jobs}
    parents = [by_id[p] for c, p in graph.edges if c == current and p in by_id]
    children = [by_id[c] for c, p in graph.edges if p == current and c in by_id]
    rows = [["waits for", job_link(j.id), j.kind, status(j.status)] for j in parents] + [
        ["waited for by", job_link(j.id), j.kind, status(j.status)] for j in children
    ]
    note = (
        el("p", f"Only the {len(graph.jobs)} jobs nearest to this one are drawn.", class_="muted")
        if graph.cut
        else None
    )
    return [
        el("h2", "Run graph"),
        el("div", _svg(graph, current), class_="table"),
        note,
        table(["", "job", "kind", "status"], rows, "No edge of this job is drawn."),
    ]
