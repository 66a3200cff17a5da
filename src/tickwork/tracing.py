"""Optional OpenTelemetry tracing (``pip install tickwork[tracing]``, the ``opentelemetry-api``
package; spans go wherever the application's tracer provider sends them).

* A job remembers the trace context it was created in: :func:`capture` is what
  ``App.enqueue``/``enqueue_many`` (and so an enqueue from inside a running task), the firing
  pass, ``fire_schedule``, ``backfill`` and ``trigger`` store in ``jobs.trace_context`` — the
  global propagator's text carrier (W3C ``traceparent``/``tracestate`` by default), or None
  when no valid span is current, so that nothing is written per job without a tracer.
* A firing pass that claimed due schedules runs in a ``tickwork.fire`` span (:func:`firing`,
  kind PRODUCER, one per batch of schedules, a root of its own): the jobs it creates carry it.
* Each attempt of a job runs in one ``tickwork.run <kind>`` span (:func:`execution`, kind
  CONSUMER), the child of the context the job was created in and linked to it (the messaging
  conventions require the link; the parent too because each execution processes one job), so
  the retries of a job are siblings in its creator's trace. A job created outside any span
  starts a trace of its own. The task's own spans nest under it (sync tasks run in a copy of
  the context). A failed attempt sets status ERROR with the error and records the exception.

Without the package every hook is a no-op: nothing imported, nothing serialized, nothing
stored. With the API but no SDK (no tracer provider configured), no span context is valid, so
:func:`capture` stores nothing either, and an attempt of a job that carries no trace context
opens no span (the API's would record nothing and carry nothing: a worker's per-job cost);
one that carries a context runs in the API's non-recording span, which propagates it.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextvars import Token
from types import TracebackType

from tickwork.model import Job, TraceContext

try:
    from opentelemetry import context as otel_context
    from opentelemetry import propagate, trace
    from opentelemetry.trace import Link, SpanKind, Status, StatusCode
except ImportError:  # the tracing extra is not installed: every hook below is a no-op
    AVAILABLE = False
else:
    AVAILABLE = True

SYSTEM = "tickwork"
"""``messaging.system`` of tickwork's spans, and the name of its instrumentation scope."""


class Span:
    """A span tickwork opened, as a context manager that makes it current; this base class is
    the no-op one (tracing off)."""

    def __enter__(self) -> Span:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        trace_back: TracebackType | None,
    ) -> None:
        return None

    def failed(self, error: str, exc: BaseException, error_type: str | None = None) -> None:
        """The work failed: status ERROR described by ``error``, ``exc`` recorded as an
        exception event, ``error.type`` set to ``error_type`` (default: the exception's
        qualified type name)."""

    def counts(self, **counts: int) -> None:
        """What a firing pass found out while its span ran (``tickwork.fire.<name>``)."""


OFF = Span()
"""What every hook returns when tracing is off."""


class _Live(Span):
    """An OpenTelemetry span (recording or not) and the context it is current in."""

    def __init__(self, span: trace.Span, context: otel_context.Context) -> None:
        self._span = span
        self._context = context
        self._token: Token[otel_context.Context] | None = None

    def __enter__(self) -> Span:
        self._token = otel_context.attach(self._context)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        trace_back: TracebackType | None,
    ) -> None:
        try:
            if exc is not None and self._span.is_recording():
                # Not a task's error (execution returns those): the task was interrupted (a
                # stop request, a lost lease, a shutdown) or tickwork's own step failed.
                what = type(exc).__name__
                self._span.set_status(
                    Status(StatusCode.ERROR, f"{what}: {exc}" if str(exc) else what)
                )
        finally:
            assert self._token is not None, "entered before exited"
            otel_context.detach(self._token)
            self._span.end()

    def failed(self, error: str, exc: BaseException, error_type: str | None = None) -> None:
        if not self._span.is_recording():
            return
        self._span.record_exception(exc)
        kind = type(exc)
        self._span.set_attribute("error.type", error_type or f"{kind.__module__}.{kind.__name__}")
        self._span.set_status(Status(StatusCode.ERROR, error))

    def counts(self, **counts: int) -> None:
        if self._span.is_recording():
            self._span.set_attributes({f"tickwork.fire.{k}": v for k, v in counts.items()})


_tracer_of: list[tuple[trace.TracerProvider, trace.Tracer]] = []
"""The global tracer provider last seen and its tracer (the provider may be set later)."""


def _tracer() -> trace.Tracer:
    provider = trace.get_tracer_provider()
    if not _tracer_of or _tracer_of[0][0] is not provider:
        _tracer_of[:] = [(provider, provider.get_tracer(SYSTEM))]
    return _tracer_of[0][1]


def _no_provider() -> bool:
    """No tracer provider is configured: spans record nothing."""
    return isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)


def capture() -> TraceContext | None:
    """The current trace context to store with a new job; None when tracing is off or no
    valid span is current (nothing to link to, nothing written)."""
    if not AVAILABLE or not trace.get_current_span().get_span_context().is_valid:
        return None
    carrier: TraceContext = {}
    propagate.inject(carrier)
    return carrier or None


def execution(job: Job) -> Span:
    """The span of one attempt of ``job`` (enter it around the task)."""
    if not AVAILABLE or (job.trace_context is None and _no_provider()):
        return OFF
    root = otel_context.Context()  # never the worker's own context: the job's, or none
    parent = root if job.trace_context is None else propagate.extract(job.trace_context, root)
    created = trace.get_current_span(parent).get_span_context()
    attributes: dict[str, str | int] = {
        "messaging.system": SYSTEM,
        "messaging.operation.type": "process",
        "messaging.destination.name": job.queue,
        "messaging.message.id": str(job.id),
        "tickwork.job.id": job.id,
        "tickwork.job.kind": job.kind,
        "tickwork.job.queue": job.queue,
        "tickwork.job.attempt": job.attempt,
    }
    if job.picked_by is not None:
        attributes["tickwork.worker"] = job.picked_by
    if job.schedule is not None:
        attributes["tickwork.schedule.namespace"] = job.schedule.namespace
        attributes["tickwork.schedule.name"] = job.schedule.name
        if job.schedule.occurrence_at is not None:  # None: a manual trigger
            attributes["tickwork.schedule.occurrence"] = job.schedule.occurrence_at.isoformat()
    span = _tracer().start_span(
        f"tickwork.run {job.kind}",
        context=parent,
        kind=SpanKind.CONSUMER,
        attributes=attributes,
        links=[Link(created)] if created.is_valid else None,
    )
    return _Live(span, trace.set_span_in_context(span, parent))


def firing(namespaces: Sequence[str], claimed: int) -> Span:
    """The span of a firing pass's batch of ``claimed`` due schedules (enter it while the
    batch creates its jobs); :meth:`Span.counts` adds what it did."""
    if not AVAILABLE:
        return OFF
    root = otel_context.Context()
    span = _tracer().start_span(
        "tickwork.fire",
        context=root,
        kind=SpanKind.PRODUCER,
        attributes={
            "messaging.system": SYSTEM,
            "messaging.operation.type": "create",
            "tickwork.namespaces": list(namespaces),
            "tickwork.fire.claimed": claimed,
        },
    )
    return _Live(span, trace.set_span_in_context(span, root))
