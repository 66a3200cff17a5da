"""What every console page shares: who is looking (:class:`Context`), the page frame
(:func:`layout`, :func:`document`, the error page), and the small pieces pages are built of
(times, states, tables, links, action forms, the audit, orphan-kind and history-kept
tables)."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from tickwork.admin import inputs
from tickwork.admin.auth import Namespaces, Role
from tickwork.admin.html import Child, Html, el, link, path
from tickwork.admin.security import CSRF_FIELD
from tickwork.db import admin as admin_db
from tickwork.model import JobStatus
from tickwork.schedules.options import HistoryLimits

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


def error(ctx: Context | None, code: int, message: str) -> Html:
    title = f"{code}: {message}"
    if ctx is None:
        return document(title, el("main", el("h1", title), el("p", el("a", "Back", href="/"))))
    return layout(ctx, title, el("p", el("a", "Back to the overview", href="/")))


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
