"""The overview page (``/``): totals, queues, workers, the activity charts, pauses, limits,
orphan kinds and the latest audit records."""

from __future__ import annotations

from tickwork.admin import reads
from tickwork.admin.html import Html, el, link
from tickwork.admin.pages.charts import activity
from tickwork.admin.pages.flow import limit_use, limited, paused
from tickwork.admin.pages.layout import (
    NO_NAMESPACE,
    Context,
    audit_table,
    layout,
    orphans_table,
    table,
    text,
    wait,
    when,
    worker_state,
)


def overview(ctx: Context, page: reads.Overview) -> Html:
    return layout(
        ctx,
        "Overview",
        el("p", "As of ", when(page.now), class_="muted"),
        cards(page),
        activity(page.activity),
        el("h2", "Workers"),
        workers(page),
        el("h2", "Queues"),
        queues(page),
        el("h3", "Waiting jobs per schedule namespace"),
        waits(page),
        el("h2", "Paused"),
        paused(ctx, page.pauses),
        el("h2", "Limits"),
        limited(ctx, page.limits),
        el("h2", "Orphan kinds"),
        orphans_table(page.orphans),
        el("h2", "Recent actions"),
        audit_table(page.recent_audit, with_target=True),
    )


def cards(page: reads.Overview) -> Html:
    """The counts at the top, each a link to what it counts (warnings stand out)."""
    t = page.totals
    return el(
        "ul",
        [
            el("li", el("a", el("strong", value), label, href=href), class_=cls)
            for value, label, href, cls in (
                (
                    t.dead_jobs,
                    " dead jobs",
                    link("/jobs", {"status": "dead"}),
                    "warn" if t.dead_jobs else None,
                ),
                (
                    t.failing_jobs,
                    " failing (retrying)",
                    link("/jobs", {"status": "failing"}),
                    "warn" if t.failing_jobs else None,
                ),
                (
                    t.skipped_occurrences,
                    " skipped occurrences",
                    "/schedules",
                    "warn" if t.skipped_occurrences else None,
                ),
                (t.enabled_schedules, " enabled schedules", "/schedules", None),
                (t.namespaces, " namespaces", "/schedules", None),
                (
                    len(page.orphans),
                    " orphan kinds",
                    "/jobs#orphans",
                    "warn" if page.orphans else None,
                ),
            )
        ],
        class_="cards",
    )


def workers(page: reads.Overview) -> Html:
    return table(
        ["worker", "alive", "queues", "namespaces fired", "kinds", "running", "last seen"],
        [
            [
                w.name,
                worker_state(w),
                text(", ".join(w.queues)),
                text(", ".join(w.namespaces))
                if w.namespaces
                else el("span", "none", class_="muted"),
                text(", ".join(w.kinds)),
                f"{w.running}/{w.concurrency}",
                when(w.last_seen_at),
            ]
            for w in page.workers
        ],
        "No worker has registered.",
    )


def queues(page: reads.Overview) -> Html:
    queue_limits = {r.rule.name: r for r in page.limits if r.rule.scope.value == "queue"}
    return table(
        [
            "queue",
            "due (backlog)",
            "due later",
            "running",
            "succeeded (window)",
            "died (window)",
            "dead",
            "limit",
        ],
        [
            [
                el("a", q.queue, href=link("/jobs", {"queue": q.queue})),
                q.due,
                q.later,
                q.running,
                q.succeeded,
                q.failed,
                el("a", q.dead, href=link("/jobs", {"queue": q.queue, "status": "dead"})),
                limit_use(queue_limits.get(q.queue)),
            ]
            for q in page.queues
        ],
        "No jobs.",
    )


def waits(page: reads.Overview) -> Html:
    """Waiting jobs per queue and schedule namespace, with the oldest wait."""
    return table(
        ["queue", "schedule namespace", "waiting (due)", "oldest wait"],
        [
            [
                el("a", w.queue, href=link("/jobs", {"queue": w.queue})),
                el("strong", "all")
                if w.by_queue
                else (
                    el("span", NO_NAMESPACE, class_="muted")
                    if w.namespace is None
                    else el("a", w.namespace, href=link("/jobs", {"namespace": w.namespace}))
                ),
                w.waiting,
                wait(w.oldest_wait_seconds),
            ]
            for w in page.waits
        ],
        "No job is waiting.",
    )
