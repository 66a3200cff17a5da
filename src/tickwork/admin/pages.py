"""The console's HTML pages, rendered from the page objects of :mod:`reads`. Everything goes
through :func:`html.el`, which escapes text and attributes: job payloads, errors, names and
audit reasons are user data and stay inert."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from tickwork.admin import inputs, reads
from tickwork.admin.auth import Namespaces, Role
from tickwork.admin.html import Child, Html, el, join, link, path
from tickwork.admin.security import CSRF_FIELD
from tickwork.db import admin as admin_db
from tickwork.db import job_counts as job_counts_db
from tickwork.db import pauses as pauses_db
from tickwork.flow import limiting
from tickwork.model import Job, JobStatus
from tickwork.schedules.definition import HistoryLimits
from tickwork.worker import executor

FLASH = {
    "changed": "Done.",
    "unchanged": "Nothing to do: the target was already in that state.",
    "replayed": "Already done: this form was submitted before.",
}
"""Messages after an action, chosen by a fixed key (never text from the request)."""


@dataclass(frozen=True)
class Context:
    """Who is looking, and what their forms need."""

    user: str
    role: Role
    csrf_token: str
    request_id: str
    """Fresh per page: a form submitted twice acts once."""
    flash: str | None = None
    namespaces: Namespaces = None
    """The schedule namespaces the user sees (None: all)."""

    @property
    def operator(self) -> bool:
        return self.role.allows(Role.OPERATOR)

    @property
    def who(self) -> str:
        scope = "" if self.namespaces is None else " of " + ", ".join(sorted(self.namespaces))
        return f"{self.user} ({self.role.value}{scope})"


# --- small pieces ---------------------------------------------------------------------------


def when(value: datetime | None) -> Html:
    if value is None:
        return el("span", "—", class_="muted")
    utc = value.astimezone(UTC)
    return el("time", utc.strftime("%Y-%m-%d %H:%M:%SZ"), datetime=utc.isoformat())


NO_NAMESPACE = "(no namespace)"
"""Jobs enqueued outside any schedule."""


def wait(seconds: float) -> str:
    """A wait to the second: ``45s``, ``3m 05s``, ``2h 00m 10s``, ``3d 4h 00m 00s``."""
    total = max(0, int(seconds))
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h {minutes:02d}m {secs:02d}s"
    if hours:
        return f"{hours}h {minutes:02d}m {secs:02d}s"
    if minutes:
        return f"{minutes}m {secs:02d}s"
    return f"{secs}s"


def status(value: JobStatus | str | None) -> Html:
    if value is None:
        return el("span", "—", class_="muted")
    text = str(value)
    return el("span", text, class_=f"status status-{text}")


def flag(ok: bool, yes: str, no: str) -> Html:
    return el("span", yes if ok else no, class_="ok" if ok else "warn")


def worker_state(w: admin_db.WorkerRow) -> Html:
    """alive; stale once it missed two heartbeats (stopped, or cut off: its jobs' leases are
    running out); gone after the worker TTL."""
    if w.alive and w.stale:
        return el("span", "stale", class_="warn", title="missed two heartbeats")
    return flag(w.alive, "alive", "gone")


def pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str)


def table(headers: Sequence[str], rows: Sequence[Sequence[Child]], empty: str) -> Html:
    if not rows:
        return el("p", empty, class_="muted")
    return el(
        "div",
        el(
            "table",
            el("thead", el("tr", [el("th", h, scope="col") for h in headers])),
            el("tbody", [el("tr", [el("td", cell) for cell in row]) for row in rows]),
        ),
        class_="table",
    )


_PLAIN_WORD = re.compile(r"[\w.,:;()'\"]*")
"""A word with no line-break opportunity inside it (a hyphen or a slash is one)."""


def text(value: str, cls: str | None = None) -> Html:
    """Free text in a table cell (errors, reasons, lists): it wraps at spaces, never inside a
    word (a word that could break at a hyphen or a slash is a nowrap ``.word``); other cells
    never wrap."""
    words = [w if _PLAIN_WORD.fullmatch(w) else el("span", w, class_="word") for w in value.split()]
    return el("span", [[w, " "] for w in words], class_=f"text {cls}" if cls else "text")


def job_link(job_id: int | None) -> Html:
    return (
        el("span", "—", class_="muted")
        if job_id is None
        else el("a", f"#{job_id}", href=path("jobs", job_id))
    )


def schedule_link(namespace: str | None, name: str | None) -> Html:
    if namespace is None or name is None:
        return el("span", "—", class_="muted")
    return el("a", f"{namespace}/{name}", href=path("schedules", namespace, name))


def dl(items: Sequence[tuple[str, Child]]) -> Html:
    return el("dl", [[el("dt", k), el("dd", v)] for k, v in items])


def action_form(ctx: Context, action: str, label: str, *, danger: bool = False) -> Html:
    return el(
        "form",
        el("input", type="hidden", name=CSRF_FIELD, value=ctx.csrf_token),
        el("input", type="hidden", name="request_id", value=ctx.request_id),
        el(
            "label",
            "Reason ",
            el(
                "input",
                type="text",
                name="reason",
                maxlength=inputs.MAX_REASON,
                placeholder="why (for the audit log)",
            ),
        ),
        el("button", label, type="submit", class_="danger" if danger else None),
        method="post",
        action=action,
        class_="action",
    )


def layout(ctx: Context, title: str, *body: Child) -> Html:
    nav = [
        el("a", label, href=href)
        for label, href in (
            ("Overview", "/"),
            ("Schedules", "/schedules"),
            ("Jobs", "/jobs"),
            ("Audit", "/audit"),
        )
    ]
    logout = el(
        "form",
        el("span", ctx.who, class_="who"),
        el("input", type="hidden", name=CSRF_FIELD, value=ctx.csrf_token),
        el("button", "Log out", type="submit"),
        method="post",
        action="/logout",
        class_="logout",
    )
    return document(
        title,
        el("header", el("strong", "tickwork admin"), el("nav", nav), logout),
        el(
            "main",
            el("h1", title),
            el("p", ctx.flash, class_="flash", role="status") if ctx.flash else None,
            body,
        ),
    )


def document(title: str, *body: Child) -> Html:
    head = el(
        "head",
        el("meta", charset="utf-8"),
        el("meta", name="viewport", content="width=device-width, initial-scale=1"),
        el("title", f"{title} · tickwork"),
        el("link", rel="stylesheet", href="/static/admin.css"),
    )
    return Html("<!doctype html>\n" + el("html", head, el("body", body), lang="en"))


def audit_table(records: Sequence[admin_db.AuditRow], *, with_target: bool = False) -> Html:
    headers = [
        "#",
        "at",
        "actor",
        "action",
        *(["target"] if with_target else []),
        "reason",
        "request id",
        "details",
    ]
    rows = [
        [
            r.id,
            when(r.at),
            r.actor,
            el("span", r.action, class_="audit-action"),
            *([_target_link(r.target)] if with_target else []),
            text(r.reason) if r.reason else None,
            el("code", r.request_id) if r.request_id else None,
            el("details", el("summary", "before / after"), el("pre", pretty(r.details))),
        ]
        for r in records
    ]
    return table(headers, rows, "No audit records.")


def _target_link(target: str) -> Html:
    kind, _, rest = target.partition(":")
    if kind == "job" and rest.isdigit():
        return job_link(int(rest))
    namespace, _, name = rest.partition("/")
    if kind == "schedule" and name:
        return schedule_link(namespace, name)
    return el("code", target)


# --- pages ----------------------------------------------------------------------------------


def login(error: str | None, next_path: str, login_token: str) -> Html:
    return document(
        "Log in",
        el(
            "main",
            el("h1", "tickwork admin"),
            el("p", error, class_="error", role="alert") if error else None,
            el(
                "form",
                el("input", type="hidden", name="login_token", value=login_token),
                el("input", type="hidden", name="next", value=next_path),
                el(
                    "label",
                    "Name ",
                    el(
                        "input",
                        type="text",
                        name="username",
                        autocomplete="username",
                        required=True,
                    ),
                ),
                el(
                    "label",
                    "Secret ",
                    el(
                        "input",
                        type="password",
                        name="password",
                        autocomplete="current-password",
                        required=True,
                    ),
                ),
                el("button", "Log in", type="submit"),
                method="post",
                action="/login",
                class_="login",
            ),
            class_="narrow",
        ),
    )


def error(ctx: Context | None, code: int, message: str) -> Html:
    title = f"{code}: {message}"
    if ctx is None:
        return document(title, el("main", el("h1", title), el("p", el("a", "Back", href="/"))))
    return layout(ctx, title, el("p", el("a", "Back to the overview", href="/")))


# --- charts: server-rendered SVG (no script; colours from the stylesheet) ---------------------

BAR = 4
"""Width of one step in the charts' coordinates."""
PLOT = 120
"""Height of the plot area; the time axis's labels sit below it."""
OUTCOMES = ("succeeded", "dead", "cancelled")


def _minute(a: reads.Activity, slot: int) -> str:
    return (a.since + timedelta(seconds=slot * a.step_seconds)).astimezone(UTC).strftime("%H:%MZ")


def _chart(a: reads.Activity, label: str, peak: str, bars: Sequence[Html]) -> Html:
    width = a.steps * BAR
    axis = [
        el("text", peak, x=2, y=10, class_="axis"),
        el("text", _minute(a, 0), x=0, y=PLOT + 14, class_="axis"),
        el("text", _minute(a, a.steps), x=width, y=PLOT + 14, class_="axis end"),
    ]
    return el(
        "svg",
        el("title", label),
        el("line", x1=0, y1=PLOT, x2=width, y2=PLOT, class_="base"),
        bars,
        axis,
        viewBox=f"0 0 {width} {PLOT + 18}",
        role="img",
        aria_label=label,
        class_="chart",
    )


def _bar(slot: int, bottom: float, height: float, cls: str, title: str) -> Html:
    return el(
        "rect",
        el("title", title),
        x=slot * BAR,
        y=round(PLOT - bottom - height, 2),
        width=BAR - 1,
        height=round(height, 2),
        class_=cls,
    )


def jobs_chart(a: reads.Activity) -> Html:
    """Jobs finished per step, stacked by outcome."""
    if not a.slots:
        return el("p", "No job finished in this window.", class_="muted")
    peak = max(s.succeeded + s.dead + s.cancelled for s in a.slots)
    bars = []
    for s in a.slots:
        bottom = 0.0
        for outcome in OUTCOMES:
            count: int = getattr(s, outcome)
            if count:
                height = count / peak * PLOT
                title = f"{_minute(a, s.slot)}: {count} {outcome}"
                bars.append(_bar(s.slot, bottom, height, f"bar {outcome}", title))
                bottom += height
    key = [el("span", o, class_=f"key {o}") for o in OUTCOMES]
    label = f"Jobs finished per minute (peak {peak})"
    return join(_chart(a, label, f"{peak} / min", bars), el("p", key, class_="legend"))


def lag_chart(a: reads.Activity) -> Html:
    """The worst start lag of the scheduled jobs finished in each step."""
    lags = [s for s in a.slots if s.max_lag is not None]
    if not lags:
        return el("p", "No scheduled job finished in this window.", class_="muted")
    peak = max(max(s.max_lag or 0.0 for s in lags), 1.0)
    bars = [
        _bar(
            s.slot,
            0.0,
            max(s.max_lag or 0.0, 0.0) / peak * PLOT,
            "bar lag",
            f"{_minute(a, s.slot)}: worst {s.max_lag:.1f} s, mean {s.mean_lag or 0.0:.1f} s",
        )
        for s in lags
    ]
    return _chart(a, f"Worst start lag per minute (peak {peak:.1f} s)", f"{peak:.1f} s", bars)


def _activity(a: reads.Activity) -> Html:
    fields = [
        el("label", name + " ", el("input", type="text", name=name, value=value or ""))
        for name, value in (("queue", a.queue), ("namespace", a.namespace))
    ]
    form = el(
        "form",
        fields,
        el("button", "Show", type="submit"),
        method="get",
        action="/",
        class_="filters",
    )
    hours = a.steps * a.step_seconds / 3600
    return join(
        el("h2", f"Last {hours:g} hours"),
        form,
        el("h3", "Jobs finished per minute, by outcome"),
        jobs_chart(a),
        el("h3", "Start lag of scheduled jobs (occurrence to start), worst per minute"),
        lag_chart(a),
    )


def overview(ctx: Context, page: reads.Overview) -> Html:
    t = page.totals
    cards = el(
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
    workers = table(
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
    queue_limits = {r.rule.name: r for r in page.limits if r.rule.scope.value == "queue"}
    queues = table(
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
    waits = table(
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
    return layout(
        ctx,
        "Overview",
        el("p", "As of ", when(page.now), class_="muted"),
        cards,
        _activity(page.activity),
        el("h2", "Workers"),
        workers,
        el("h2", "Queues"),
        queues,
        el("h3", "Waiting jobs per schedule namespace"),
        waits,
        el("h2", "Paused"),
        paused(ctx, page.pauses),
        el("h2", "Limits"),
        limited(ctx, page.limits),
        el("h2", "Orphan kinds"),
        orphans_table(page.orphans),
        el("h2", "Recent actions"),
        audit_table(page.recent_audit, with_target=True),
    )


_PAUSE_EFFECT = {
    "queue": "no worker will start its jobs until it is resumed; running jobs finish",
    "namespace": "its schedules fire nothing until it is resumed; then their misfire policy "
    "decides about the occurrences missed",
}


def pause_form(ctx: Context, scope: str, action: str, name: str | None = None) -> Html:
    """A pause or resume form: the target's name (typed in, for a pause), a reason, and a
    box to tick that confirms the effect (the server refuses the form without it)."""
    if name is None:
        target: Html = el(
            "label", f"{scope} ", el("input", type="text", name="name", required=True)
        )
    else:
        target = el("input", type="hidden", name="name", value=name)
    effect = _PAUSE_EFFECT[scope] if action == "pause" else "its work starts again at once"
    return el(
        "form",
        el("input", type="hidden", name=CSRF_FIELD, value=ctx.csrf_token),
        el("input", type="hidden", name="request_id", value=ctx.request_id),
        target,
        el(
            "label",
            "Reason ",
            el("input", type="text", name="reason", maxlength=inputs.MAX_REASON),
        ),
        el(
            "label",
            el("input", type="checkbox", name="confirm", value="yes", required=True),
            f" I confirm: {effect}",
        ),
        el("button", f"{action.capitalize()} {scope}", type="submit", class_="danger"),
        method="post",
        action=path("pauses", scope, action),
        class_="action",
    )


def paused(ctx: Context, pauses: Sequence[pauses_db.PauseRow]) -> Html:
    """The paused queues and namespaces, with a resume form each, and the pause forms (for
    operators; a queue's only for the unscoped, whose pause holds every namespace)."""
    rows = [
        [
            p.scope,
            text(p.name),
            text(p.paused_by),
            when(p.paused_at),
            text(p.reason or ""),
            pause_form(ctx, p.scope, "resume", p.name) if ctx.operator else "",
        ]
        for p in pauses
    ]
    listing = table(["paused", "name", "by", "since", "reason", ""], rows, "Nothing is paused.")
    if not ctx.operator:
        return join(listing, el("p", "Pausing needs the operator role.", class_="muted"))
    forms = [pause_form(ctx, "namespace", "pause")]
    if ctx.namespaces is None:
        forms.insert(0, pause_form(ctx, "queue", "pause"))
    return join(listing, el("section", forms, class_="actions"))


def running_use(row: limiting.StoredRule) -> Html | None:
    """``2/3 running`` (``warn`` when full): a concurrency limit's use now."""
    most = row.rule.max_running
    if most is None:
        return None
    used = row.running or 0
    full = used >= most
    title = "no room: its waiting jobs are held" if full else None
    return el("span", f"{used}/{most} running", class_="warn" if full else None, title=title)


def rate_use(row: limiting.StoredRule) -> Html | None:
    """``40 of 100/min started`` (``warn`` when used up): a rate's starts of its last period,
    all keys together for a keyed rate (each key has the whole rate)."""
    rate = row.rule.rate
    if rate is None:
        return None
    used = row.recent_starts or 0
    if row.rule.rate_key:
        return el("span", f"{used} started (all keys)", title=f"{rate} per {row.rule.rate_key}")
    full = used >= rate.starts
    title = "no room: its waiting jobs are held" if full else None
    return el("span", f"{used} of {rate} started", class_="warn" if full else None, title=title)


def limit_use(row: limiting.StoredRule | None) -> Html:
    """A group's limit and its use: running against max, recent starts against the rate."""
    if row is None:
        return el("span", "none", class_="muted")
    parts = [part for part in (running_use(row), rate_use(row)) if part is not None]
    if not parts:  # a namespace's weight only
        return el("span", "—", class_="muted")
    return join(*[[part, " · "] for part in parts[:-1]], parts[-1])


_LIMIT_EFFECT = {
    "limit": "it replaces the limit the {scope} had; jobs over it wait, fleet-wide",
    "unlimit": "its jobs start as fast as workers claim them",
}


def _field(label: str, name: str, hint: str) -> Html:
    return el("label", f"{label} ", el("input", type="text", name=name, placeholder=hint))


def limit_form(ctx: Context, scope: str, action: str, name: str | None = None) -> Html:
    """A limit form (the target's name typed in, and its limits) or a remove form, with a
    reason and a box to tick that confirms the effect (the server refuses the form without
    it)."""
    if name is None:
        target: Html = el(
            "label", f"{scope} ", el("input", type="text", name="name", required=True)
        )
    else:
        target = el("input", type="hidden", name="name", value=name)
    fields: list[Html] = []
    if action == "limit":
        fields = [
            _field("Max running", "max_running", "e.g. 3"),
            _field("Rate", "rate", "e.g. 100/min"),
            _field("Rate key", "rate_key", "payload field, e.g. customer"),
        ]
        if scope == "namespace":
            fields.append(_field("Weight", "weight", "e.g. 2 (against 1)"))
    label = f"Limit {scope}" if action == "limit" else f"Remove {scope} limit"
    return el(
        "form",
        el("input", type="hidden", name=CSRF_FIELD, value=ctx.csrf_token),
        el("input", type="hidden", name="request_id", value=ctx.request_id),
        target,
        fields,
        el(
            "label",
            "Reason ",
            el("input", type="text", name="reason", maxlength=inputs.MAX_REASON),
        ),
        el(
            "label",
            el("input", type="checkbox", name="confirm", value="yes", required=True),
            " I confirm: " + _LIMIT_EFFECT[action].format(scope=scope),
        ),
        el("button", label, type="submit", class_="danger"),
        method="post",
        action=path("limits", scope, action),
        class_="action",
    )


def limited(ctx: Context, rules: Sequence[limiting.StoredRule]) -> Html:
    """The limits of queues, kinds and namespaces with their use, a remove form each, and the
    limit forms (for unscoped operators: a limit shares the fleet between namespaces)."""
    may = ctx.operator and ctx.namespaces is None
    rows = [
        [
            r.rule.scope.value,
            text(r.rule.name),
            text(r.rule.describe()),
            limit_use(r),
            text(r.set_by),
            when(r.set_at),
            limit_form(ctx, r.rule.scope.value, "unlimit", r.rule.name) if may else "",
        ]
        for r in rules
    ]
    listing = table(
        ["limit on", "name", "limit", "use now", "set by", "since", ""],
        rows,
        "No queue, kind or namespace is limited.",
    )
    if not may:
        return join(listing, el("p", "Limiting needs an unscoped operator.", class_="muted"))
    forms = [limit_form(ctx, scope, "limit") for scope in ("queue", "kind", "namespace")]
    return join(listing, el("section", forms, class_="actions"))


def orphans_table(rows: Sequence[admin_db.OrphanRow]) -> Html:
    return table(
        ["kind", "queue", "available jobs", "oldest run at", "why"],
        [
            [
                el("a", o.kind, href=link("/jobs", {"kind": o.kind, "status": "available"})),
                o.queue,
                o.jobs,
                when(o.oldest_run_at),
                text(
                    "workers run this kind, but none claims from this queue"
                    if o.kind_served
                    else "no live worker runs this kind"
                ),
            ]
            for o in rows
        ],
        "Every waiting job has a live worker for its kind and queue.",
    )


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
    if job.status in (JobStatus.AVAILABLE, JobStatus.RUNNING):
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
        el("h2", "Last error"),
        el("pre", j.last_error, class_="error-text")
        if j.last_error
        else el("p", "None.", class_="muted"),
        el("h2", "Audit"),
        audit_table(page.audit),
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
    """The next occurrences, in UTC and in the schedule's zone."""
    if not page.upcoming:
        return el(
            "p", page.no_upcoming, ": the next run is at ", when(page.summary.next_run_at), "."
        )
    return el(
        "ol",
        [
            el("li", when(t), " ", el("span", t.strftime("%a %H:%M %Z"), class_="muted"))
            for t in page.upcoming
        ],
        class_="upcoming",
    )


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


def kept(limits: HistoryLimits) -> Html:
    """How many of a schedule's finished jobs a list of its jobs can show."""
    return el(
        "p",
        f"Showing the jobs retention keeps: the last {limits.succeeded} succeeded and "
        f"{limits.failed} failed (dead or cancelled), by the history limits "
        "(successfulJobsHistoryLimit, failedJobsHistoryLimit), and the open ones; the "
        "schedule's counted runs include every run.",
        class_="muted",
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
    ]
    trigger: Html
    if not ctx.operator:
        trigger = el("p", "Triggering needs the operator role.", class_="muted")
    elif not s.enabled:
        trigger = el("p", "Disabled schedules cannot be triggered.", class_="muted")
    else:
        trigger = action_form(ctx, path("schedules", s.namespace, s.name, "trigger"), "Trigger now")
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


def audit(ctx: Context, page: reads.AuditPage) -> Html:
    more = None
    if page.next_before is not None:
        more = el("a", "Older →", href=link("/audit", {"before": page.next_before}), rel="next")
    return layout(
        ctx,
        "Audit log",
        audit_table(page.records, with_target=True),
        el("p", more, class_="pager"),
    )
