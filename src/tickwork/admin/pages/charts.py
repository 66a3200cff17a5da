"""The overview's activity charts: server-rendered SVG (no script; colours from the
stylesheet)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, timedelta

from tickwork.admin import reads
from tickwork.admin.html import Html, el, join

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


def activity(a: reads.Activity) -> Html:
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
