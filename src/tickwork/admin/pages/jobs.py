"""The job pages: the list with its filter (``/jobs``) and one job (``/jobs/{id}``) with its
actions."""

from __future__ import annotations

from collections.abc import Sequence

from tickwork.admin import inputs, reads
from tickwork.admin.html import Child, Html, el, join, link, path
from tickwork.admin.pages import job_results, workflow
from tickwork.admin.pages.layout import (
    Context,
    action_form,
    audit_table,
    dl,
    job_link,
    kept,
    layout,
    orphans_table,
    pretty,
    schedule_link,
    status,
    table,
    text,
    when,
)
from tickwork.db import admin as admin_db
from tickwork.model import Job, JobStatus
from tickwork.worker import executor


def _job_filter_form(where: admin_db.JobFilter) -> Html:
    chosen = "failing" if where.failing else (where.status.value if where.status else "")
    options = [el("option", "any status", value="")] + [
        el("option", s, value=s, selected=s == chosen) for s in inputs.STATUSES
    ]
    fields = [
        el("label", name + " ", el("input", type="text", name=name, value=value or ""))
        for name, value in (
            ("kind", where.kind),
            ("queue", where.queue),
            ("namespace", where.namespace),
            ("schedule", where.schedule),
        )
    ]
    return el(
        "form",
        el("label", "status ", el("select", options, name="status")),
        fields,
        el("button", "Filter", type="submit"),
        method="get",
        action="/jobs",
        class_="filters",
    )


def _filter_query(where: admin_db.JobFilter) -> dict[str, str | int | None]:
    return {
        "status": "failing" if where.failing else (where.status.value if where.status else None),
        "kind": where.kind,
        "queue": where.queue,
        "namespace": where.namespace,
        "schedule": where.schedule,
    }


def jobs_table(rows: Sequence[admin_db.JobSummary]) -> Html:
    return table(
        [
            "id",
            "kind",
            "queue",
            "status",
            "attempt",
            "run at",
            "picked by (last heartbeat)",
            "schedule",
            "last error",
        ],
        [
            [
                job_link(j.id),
                j.kind,
                j.queue,
                status(j.status),
                f"{j.attempt}/{j.max_attempts or '-'}",
                when(j.run_at),
                join(j.picked_by, " (", when(j.picker_seen_at), ")") if j.picked_by else None,
                schedule_link(j.schedule_namespace, j.schedule_name),
                text(executor.summary(j.last_error), "error-text") if j.last_error else None,
            ]
            for j in rows
        ],
        "No jobs match.",
    )


def jobs(ctx: Context, page: reads.JobsPage) -> Html:
    more = None
    if page.next_before is not None:
        query = _filter_query(page.filter)
        query["before"] = page.next_before
        more = el("a", "Older jobs →", href=link("/jobs", query), rel="next")
    return layout(
        ctx,
        "Jobs",
        _job_filter_form(page.filter),
        None if page.history_limits is None else kept(page.history_limits),
        jobs_table(page.jobs),
        el("p", more, class_="pager"),
        el("h2", "Orphan kinds", id="orphans"),
        orphans_table(page.orphans),
    )


def _job_actions(ctx: Context, page: reads.JobDetail) -> Html:
    job = page.job
    if not ctx.operator:
        return el("p", "Actions need the operator role.", class_="muted")
    forms = []
    base = path("jobs", job.id)
    if job.status is JobStatus.AVAILABLE and not page.due:
        forms.append(action_form(ctx, base + "/run-now", "Run now"))
    if job.status in (JobStatus.AVAILABLE, JobStatus.RUNNING, JobStatus.WAITING):
        forms.append(action_form(ctx, base + "/cancel", "Cancel job", danger=True))
    if job.status in (JobStatus.DEAD, JobStatus.CANCELLED):
        forms.append(action_form(ctx, base + "/retry", "Retry job"))
    return (
        el("div", forms, class_="actions")
        if forms
        else el("p", "No action applies to a job in this state.", class_="muted")
    )


def job(ctx: Context, page: reads.JobDetail) -> Html:
    j: Job = page.job
    ref = j.schedule
    facts: list[tuple[str, Child]] = [
        ("status", status(j.status)),
        ("kind", j.kind),
        ("queue", j.queue),
        ("priority", j.priority),
        ("attempt", f"{j.attempt} of {j.max_attempts or 'the task setting'}"),
        ("run at", when(j.run_at)),
        ("created", when(j.created_at)),
        ("started", when(j.started_at)),
        ("finished", when(j.finished_at)),
        ("picked by", j.picked_by),
        ("lease expires", when(j.lease_expires_at)),
        (
            "worker last heartbeat",
            join(when(page.picker_seen_at), " ", el("span", "stale", class_="warn"))
            if page.picker_stale
            else when(page.picker_seen_at),
        ),
        ("schedule", schedule_link(ref.namespace, ref.name) if ref else None),
        ("occurrence", when(ref.occurrence_at) if ref else None),
        ("unique key", j.unique_key),
        ("concurrency key", j.concurrency_key),
        ("timeout", f"{j.timeout:g} s" if j.timeout else None),
        ("version", j.version),
    ]
    return layout(
        ctx,
        f"Job #{j.id}",
        el("section", _job_actions(ctx, page)),
        dl(facts),
        el("h2", "Payload"),
        el("pre", pretty(j.payload), class_="payload"),
        job_results.section(page.outcome),
        workflow.section(page.graph, j.id),
        el("h2", "Last error"),
        el("pre", j.last_error, class_="error-text")
        if j.last_error
        else el("p", "None.", class_="muted"),
        el("h2", "Audit"),
        audit_table(page.audit),
    )
