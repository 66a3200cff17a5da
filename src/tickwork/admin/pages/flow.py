"""The overview's flow-control sections: what is paused and what is limited, with the forms
that pause, resume, limit and unlimit (shown to operators)."""

from __future__ import annotations

from collections.abc import Sequence

from tickwork.admin import inputs
from tickwork.admin.html import Html, el, join, path
from tickwork.admin.pages.layout import Context, table, text, when
from tickwork.admin.security import CSRF_FIELD
from tickwork.db import pauses as pauses_db
from tickwork.flow import limiting

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
