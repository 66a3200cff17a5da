"""``spec.steps``: a Schedule whose occurrence is a small pipeline (docs/workflows.md). Each
step is a job (``job``, as ``spec.job``) with a name and the names of the steps it waits for
(``after``). Pure: reading, checking, the canonical spec, and the occurrence's job.

An occurrence of such a schedule is one job, as for any schedule (one occurrence key, the same
overlap and misfire policies): of tickwork's own kind :data:`KIND`, its payload the steps.
Every worker runs that kind (:mod:`tickwork.workflows.steps_task`): it spawns the steps as jobs
wired by ``after`` (:meth:`tickwork.model.Job.spawn`, so once per occurrence even when
retried) and succeeds, which releases the first steps. The steps belong to the schedule: its
namespace, its history, its overlap policy's open jobs."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tickwork.errors import InvalidInput
from tickwork.schedules import container_jobs
from tickwork.schedules.checks import DefinitionError, type_name
from tickwork.schedules.options import JobTemplate
from tickwork.schedules.spec_fields import JOB_FIELDS, Fields, job_from_spec
from tickwork.schedules.stored import job_to_spec
from tickwork.workflows import graph

KIND = "tickwork.steps"
"""The kind of the job each occurrence of a schedule with steps enqueues."""

MAX_STEPS = 20
"""The most steps one Schedule has (the CRD's maxItems)."""

MAX_STEP_NAME = 63
STEP_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
"""A step's name: a DNS label (the CRD's pattern)."""

STEP_FIELDS = frozenset({"name", "after", "job"})


@dataclass(frozen=True)
class Step:
    """One step: its name, the steps it waits for, and its job."""

    name: str
    job: JobTemplate
    after: tuple[str, ...] = ()


def steps_from_spec(name: str, raw: Any) -> tuple[Step, ...]:
    """``spec.steps`` read and checked (names, ``after``, each job's fields, the graph);
    DefinitionError naming ``spec.steps[i]...`` otherwise. None: no steps."""
    if raw is None:
        return ()
    if not isinstance(raw, Sequence) or isinstance(raw, str | bytes):
        raise DefinitionError(name, "spec.steps", f"must be a list, not {type_name(raw)}")
    if not raw:
        raise DefinitionError(name, "spec.steps", "must list at least one step")
    if len(raw) > MAX_STEPS:
        raise DefinitionError(name, "spec.steps", f"at most {MAX_STEPS} steps, not {len(raw)}")
    steps = tuple(_step(name, i, item) for i, item in enumerate(raw))
    check_graph(name, steps)
    return steps


def _step(name: str, i: int, item: Any) -> Step:
    path = f"spec.steps[{i}]"
    fields = Fields(name, path, item, STEP_FIELDS)
    step_name = fields.string("name")
    if step_name is None:
        raise fields.error("name", "is required")
    if len(step_name) > MAX_STEP_NAME or not STEP_NAME.fullmatch(step_name):
        raise fields.error(
            "name",
            f"must be lowercase letters, digits and '-', starting and ending with a letter or "
            f"digit, at most {MAX_STEP_NAME} characters (a DNS label), not {step_name!r}",
        )
    after = fields.values.get("after") or []
    if not isinstance(after, Sequence) or isinstance(after, str | bytes):
        raise fields.error("after", f"must be a list of step names, not {type_name(after)}")
    for k, other in enumerate(after):
        if not isinstance(other, str):
            raise fields.error(f"after[{k}]", f"must be a step name, not {type_name(other)}")
    if len(set(after)) != len(after):
        raise fields.error("after", "names a step more than once")
    job = fields.values.get("job")
    if job is None:
        raise fields.error("job", "is required (its kind, as spec.job)")
    job_fields = Fields(name, f"{path}.job", job, JOB_FIELDS, limits_path="spec.job")
    template = job_from_spec(job_fields, container=False)
    if template.kind.startswith(container_jobs.RESERVED_PREFIX):
        reason = f"kinds starting {container_jobs.RESERVED_PREFIX!r} are tickwork's own"
        raise job_fields.error("kind", reason)
    if template.concurrency_limit is not None and template.concurrency_key is None:
        raise job_fields.error("concurrencyLimit", "needs this step's job.concurrencyKey")
    return Step(step_name, template, tuple(after))


def check_graph(name: str, steps: Sequence[Step]) -> None:
    """No duplicate or unknown name, no step waiting for itself, no cycle."""
    nodes = [graph.Node(step.name, step.after) for step in steps]
    try:
        graph.order(nodes, "spec.steps", MAX_STEPS, what="step")
    except InvalidInput as error:
        raise DefinitionError(name, error.field, error.reason) from None


def steps_to_spec(steps: Sequence[Step]) -> list[dict[str, Any]]:
    """The canonical ``spec.steps``."""
    return [
        {"name": s.name, "after": list(s.after), "job": job_to_spec(s.job, container=False)}
        for s in steps
    ]


def occurrence_job(steps: Sequence[Step]) -> JobTemplate:
    """The job an occurrence enqueues: :data:`KIND`, in the first step's queue."""
    return JobTemplate(kind=KIND, queue=steps[0].job.queue, payload=steps_payload(steps))


def steps_payload(steps: Sequence[Step]) -> dict[str, Any]:
    """What the occurrence's job spawns (read by :func:`steps_of_payload`)."""
    return {"steps": steps_to_spec(steps)}


def steps_of_payload(payload: Mapping[str, Any]) -> list[Step]:
    """The steps an occurrence's job carries."""
    return [
        Step(
            raw["name"],
            job_from_spec(Fields("", "steps", raw["job"], JOB_FIELDS), container=False),
            tuple(raw["after"]),
        )
        for raw in payload["steps"]
    ]
