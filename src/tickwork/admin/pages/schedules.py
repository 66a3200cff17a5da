"""The schedule pages: the list (``/schedules``) and one schedule
(``/schedules/{namespace}/{name}``): its ownership, next occurrences, runs and history."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC
from typing import Any

from tickwork.admin import reads
from tickwork.admin.html import Child, Html, el, join, link, path
from tickwork.admin.pages.charts import jobs_chart
from tickwork.admin.pages.jobs import jobs_table
from tickwork.admin.pages.layout import (
    Context,
    action_form,
    audit_table,
    dl,
    flag,
    job_link,
    kept,
    layout,
    pretty,
    status,
    table,
    text,
    when,
)
from tickwork.db import admin as admin_db
from tickwork.db import job_counts as job_counts_db


def _spec(s: admin_db.ScheduleSummary) -> Html:
    if s.schedule is not None:
        return join(el("code", s.schedule), " ", el("span", s.time_zone or "UTC", class_="muted"))
    return join("every ", el("code", s.every))


def _state(enabled: bool, suspended: bool, firing_error: str | None = None) -> Html:
    if not enabled:
        return el("span", "disabled", class_="warn")
    if suspended:
        return el("span", "suspended", class_="warn")
    if firing_error is not None:
        return el("span", "failing", class_="error", title=firing_error)
    return el("span", "enabled", class_="ok")


def _firing_error(s: admin_db.ScheduleSummary) -> Html | None:
    """A set-aside schedule's error, its consecutive failures and its retry time."""
    if s.firing_error is None:
        return None
    return join(
        text(s.firing_error, "error"),
        f" ({s.firing_failures} failed firings in a row; retry ",
        when(s.firing_retry_at),
        ")",
    )


def _guards(s: admin_db.ScheduleSummary) -> list[tuple[str, Child]]:
    """The deadline and auto-suspend facts (docs/deadlines.md), when they say something."""
    found: list[tuple[str, Child]] = []
    if s.late:
        found.append(
            (
                "late",
                join(
                    text("the occurrence ", "warn"),
                    when(s.late_occurrence_at),
                    " missed its deadline (job ",
                    job_link(s.late_job_id),
                    "); the next success clears it",
                ),
            )
        )
    if s.failures_suspended_at is not None:
        found.append(
            (
                "suspended after failures",
                join(
                    when(s.failures_suspended_at),
                    ": job ",
                    job_link(s.failures_suspended_job_id),
                    " ended dead, since job ",
                    job_link(s.dead_streak_job_id),
                    "; Resume fires it again",
                ),
            )
        )
    elif s.dead_streak:
        found.append(("consecutive dead occurrences", s.dead_streak))
    return found


def _runs(c: job_counts_db.RunCounts) -> Html:
    """A schedule's counted runs, titled with them by outcome."""
    title = (
        f"{c.succeeded} succeeded, {c.dead} dead, {c.cancelled} cancelled; "
        f"{c.failed_attempts} failed attempts retried"
    )
    return el("span", c.runs, title=title)


def _rate(c: job_counts_db.RunCounts) -> Html:
    """Succeeded over ended, as a percentage; "none" when none ended."""
    if c.success_rate is None:
        return el("span", "none", class_="muted")
    return el("span", f"{c.success_rate:.1%}", class_="ok" if c.failed == 0 else "warn")


def schedules(ctx: Context, page: reads.SchedulesPage) -> Html:
    spaces = table(
        [
            "namespace",
            "owner",
            "schedules",
            "enabled",
            "suspended",
            "skipped",
            "failing",
            "fired by",
        ],
        [
            [
                el("a", n.namespace, href=link("/schedules", {"namespace": n.namespace})),
                n.owner,
                n.schedules,
                n.enabled,
                n.suspended,
                n.skipped_occurrences,
                el("span", n.failing, class_="error") if n.failing else 0,
                flag(n.served, "a live worker", "no live worker offers it"),
            ]
            for n in page.namespaces
        ],
        "No schedule namespaces.",
    )
    rows = [
        [
            el("a", s.name, href=path("schedules", s.namespace, s.name)),
            s.namespace,
            _spec(s),
            s.kind,
            s.revision,
            _state(s.enabled, s.suspended, s.firing_error),
            when(s.next_run_at),
            when(s.last_occurrence_at),
            join(job_link(s.last_job_id), " ", status(s.last_job_status)),
            _runs(s.runs),
            _rate(s.runs),
            when(s.last_success_at),
            when(s.last_failure_at),
            s.skipped_occurrences,
            _firing_error(s),
        ]
        for s in page.schedules
    ]
    more = None
    if page.next_after:
        more = el(
            "a",
            "Next page →",
            href=link(
                "/schedules",
                {
                    "namespace": page.namespace,
                    "after_namespace": page.next_after[0],
                    "after_name": page.next_after[1],
                },
            ),
            rel="next",
        )
    heading = f"Schedules of {page.namespace}" if page.namespace else "All schedules"
    return layout(
        ctx,
        "Schedules",
        el("h2", "Namespaces"),
        spaces,
        el("h2", heading),
        table(
            [
                "name",
                "namespace",
                "when",
                "kind",
                "revision",
                "state",
                "next run",
                "last occurrence",
                "last job",
                "runs",
                "success",
                "last success",
                "last failure",
                "skipped",
                "firing error",
            ],
            rows,
            "No schedules.",
        ),
        el("p", more, class_="pager"),
    )


def _ownership(page: reads.ScheduleDetail) -> Html:
    owner = page.summary.owner
    s = page.summary
    if owner.startswith("operator:"):
        cluster = owner.partition(":")[2]
        return el(
            "p",
            f"Managed by the tickwork operator of cluster {cluster}: change it through its "
            "Schedule object (",
            el("code", f"kubectl edit schedule {s.name} -n {s.namespace}"),
            "). Suspending or editing it here would be undone by the operator's next sync, so "
            "the console offers no such change.",
            class_="note",
        )
    return el(
        "p",
        f"Deployed by {owner}: change its manifest and sync again (",
        el("code", f"tickwork sync {s.namespace} -f …"),
        "). The console changes no definition; it only triggers runs.",
        class_="note",
    )


def upcoming(page: reads.ScheduleDetail) -> Html:
    """The next occurrences, in UTC and in the schedule's zone, after its calendar."""
    if not page.upcoming:
        return join(
            calendar_note(page.row.spec),
            el("p", page.no_upcoming, ": the next run is at ", when(page.summary.next_run_at), "."),
        )
    return join(
        calendar_note(page.row.spec),
        el(
            "ol",
            [
                el("li", when(t), " ", el("span", t.strftime("%a %H:%M %Z"), class_="muted"))
                for t in page.upcoming
            ],
            class_="upcoming",
        ),
    )


def calendar_note(spec: Mapping[str, Any]) -> Html | None:
    """What the calendar leaves out (``spec.exclude``, ``startTime``, ``endTime``), if any."""
    parts = []
    if spec.get("exclude"):
        parts.append("not on " + ", ".join(map(str, spec["exclude"])))
    if spec.get("startTime"):
        parts.append(f"from {spec['startTime']}")
    if spec.get("endTime"):
        parts.append(f"until {spec['endTime']}")
    if not parts:
        return None
    return el("p", "Calendar: ", "; ".join(parts), ".", class_="muted calendar")


def run_strip(jobs: Sequence[admin_db.JobSummary]) -> Html:
    """One cell per recent job, oldest first, coloured by status and titled with its time."""
    if not jobs:
        return el("p", "No runs yet.", class_="muted")
    cells = [
        el(
            "li",
            el(
                "a",
                el("span", f"#{j.id} {j.status}", class_="label"),
                href=path("jobs", j.id),
                title=f"#{j.id} {j.status} · "
                + (j.occurrence_at or j.run_at).astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ"),
                class_=f"run status-{j.status}",
            ),
        )
        for j in reversed(jobs)
    ]
    return el("ol", cells, class_="strip", aria_label="recent runs, oldest first")


def run_counts(page: reads.ScheduleDetail) -> Html:
    """The schedule's counted runs (never cut by the history limits or retention)."""
    c = page.summary.runs
    if c.since is None:
        return el("p", "No run of this schedule has ended yet.", class_="muted")
    rate = "" if c.success_rate is None else f" ({c.success_rate:.1%} succeeded)"
    mean = "" if c.mean_seconds is None else f"; mean run time {c.mean_seconds:.3g} s"
    return el(
        "p",
        el("strong", f"{c.runs} runs"),
        f"{rate}: {c.succeeded} succeeded, {c.dead} dead, {c.cancelled} cancelled; "
        f"{c.failed_attempts} failed attempts retried{mean}. Counted since ",
        when(c.since),
        ".",
        class_="counts",
    )


def schedule(ctx: Context, page: reads.ScheduleDetail) -> Html:
    s = page.summary
    facts: list[tuple[str, Child]] = [
        ("namespace", el("a", s.namespace, href=link("/schedules", {"namespace": s.namespace}))),
        ("owner", s.owner),
        (
            "fired by",
            flag(
                page.namespace.served,
                "a live worker offers this namespace",
                "no live worker offers this namespace: nothing fires",
            ),
        ),
        ("when", _spec(s)),
        ("kind", s.kind),
        ("concurrency policy", s.concurrency_policy),
        ("revision", s.revision),
        ("state", _state(s.enabled, s.suspended, s.firing_error)),
        ("next run", when(s.next_run_at)),
        ("last occurrence", when(s.last_occurrence_at)),
        ("last job", join(job_link(s.last_job_id), " ", status(s.last_job_status))),
        ("last success", when(s.last_success_at)),
        ("last failure", when(s.last_failure_at)),
        ("skipped occurrences", s.skipped_occurrences),
        ("firing error", _firing_error(s) or "none: its last firing worked"),
        *_guards(s),
    ]
    trigger: Html
    if not ctx.operator:
        trigger = el("p", "Triggering needs the operator role.", class_="muted")
    elif not s.enabled:
        trigger = el("p", "Disabled schedules cannot be triggered.", class_="muted")
    else:
        trigger = action_form(ctx, path("schedules", s.namespace, s.name, "trigger"), "Trigger now")
        if s.failures_suspended_at is not None:
            resume = path("schedules", s.namespace, s.name, "resume")
            trigger = join(trigger, " ", action_form(ctx, resume, "Resume"))
    history = link("/jobs", {"namespace": s.namespace, "schedule": s.name})
    return layout(
        ctx,
        f"Schedule {s.namespace}/{s.name}",
        _ownership(page),
        el("section", trigger, class_="actions"),
        dl(facts),
        el("h2", "Next occurrences"),
        upcoming(page),
        el("h2", "Run history"),
        run_counts(page),
        el("h3", "Jobs ended per minute, by outcome"),
        jobs_chart(page.activity),
        el("h3", "Recent jobs"),
        kept(page.history_limits),
        run_strip(page.jobs),
        el("h2", "Spec"),
        el("pre", pretty(page.row.spec)),
        el("h2", "Recent jobs"),
        kept(page.history_limits),
        jobs_table(page.jobs),
        el("p", el("a", "All jobs of this schedule →", href=history)),
        el("h2", "Audit"),
        audit_table(page.audit),
    )
