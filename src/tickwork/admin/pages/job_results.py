"""What a job's task returned and reported, on the job's page: its progress (a bar, the
fraction, the message, when it was written and by which attempt) and its result (pretty JSON,
or why it was not kept). Everything shown is the task's own text: escaped like every value
(:mod:`tickwork.admin.html`)."""

from __future__ import annotations

from tickwork.admin.html import Html, el
from tickwork.admin.pages.layout import dl, pretty, when
from tickwork.db.results import JobResult, Progress


def _progress(progress: Progress | None) -> Html:
    if progress is None:
        return el("p", "None reported.", class_="muted")
    fraction = progress.fraction
    shown = "not known" if fraction is None else f"{fraction:.0%}"
    bar = (
        None
        if fraction is None
        else el("progress", shown, value=f"{fraction:g}", max="1", class_="job-progress")
    )
    return el(
        "div",
        bar,
        dl(
            [
                ("done", shown),
                ("message", progress.message),
                ("attempt", progress.attempt),
                ("written", when(progress.at)),
            ]
        ),
        class_="progress",
    )


def _result(outcome: JobResult) -> Html:
    if outcome.result_error is not None:
        return el("pre", outcome.result_error, class_="error-text result-error")
    if outcome.result is None:
        return el("p", "None.", class_="muted")
    return el("pre", pretty(outcome.result), class_="payload result")


def section(outcome: JobResult) -> Html:
    """The "Progress" and "Result" headings and their contents."""
    return el(
        "section",
        el("h2", "Progress"),
        _progress(outcome.progress),
        el("h2", "Result"),
        _result(outcome),
    )
