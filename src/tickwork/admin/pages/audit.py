"""The audit log page (``/audit``)."""

from __future__ import annotations

from tickwork.admin import reads
from tickwork.admin.html import Html, el, link
from tickwork.admin.pages.layout import Context, audit_table, layout


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
