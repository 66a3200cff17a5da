-- Optional OpenTelemetry tracing (tickwork.tracing): the trace context a job was created in,
-- as the propagator's text carrier (W3C {"traceparent": ..., "tracestate": ...}), written by
-- every insert (enqueue, enqueue_many, a firing pass, fire_schedule, backfill, trigger) when a
-- valid span is current, and handed to the worker by the claim, whose execution span is its
-- child and links to it. NULL when tracing is off or no span was current: no cost, no index.
ALTER TABLE tickwork.jobs ADD COLUMN trace_context jsonb;
