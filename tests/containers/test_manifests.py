"""The pure side of container jobs: the Job made from a template for one attempt, what a Job's
status means, which finished Jobs the history limits let go, and which active Jobs outlived
their tickwork job (property-tested)."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from tickwork.containers import manifests
from tickwork.model import Job, JobId, JobStatus, ScheduleRef
from tickwork.schedules.container_jobs import (
    ANNOTATION_ATTEMPT,
    LABEL_JOB_ID,
    LABEL_OCCURRENCE,
    LABEL_SCHEDULE,
    LABEL_SCHEDULE_NAMESPACE,
    ContainerJob,
    job_name,
)

AT = datetime(2030, 1, 1, 3, tzinfo=UTC)
TEMPLATE: dict[str, Any] = {
    "metadata": {"labels": {"team": "a", LABEL_JOB_ID: "forged"}, "annotations": {"x": "y"}},
    "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}},
}


def _job(attempt: int = 1, timeout: float | None = None, scheduled: bool = True) -> Job:
    return Job(
        id=JobId(42),
        kind="tickwork.kubernetes-job",
        queue="default",
        payload=None,
        priority=0,
        run_at=AT,
        status=JobStatus.RUNNING,
        attempt=attempt,
        max_attempts=3,
        version=1,
        timeout=timeout,
        schedule=ScheduleRef("tenant-a", "nightly", AT) if scheduled else None,
    )


def _container(**overrides: Any) -> ContainerJob:
    fields: dict[str, Any] = {"namespace": "team-a", "schedule": "nightly", "template": TEMPLATE}
    return ContainerJob(**{**fields, **overrides})


def test_the_attempt_job_carries_tickwork_labels_on_job_and_pods_and_leaves_the_template() -> None:
    template = copy.deepcopy(TEMPLATE)
    made = manifests.attempt(_container(owner_uid="u-1"), _job(attempt=2, timeout=90.2))
    assert template == TEMPLATE  # not changed in place
    labels = {
        LABEL_SCHEDULE_NAMESPACE: "tenant-a",  # the tickwork schedule namespace
        LABEL_SCHEDULE: "nightly",
        LABEL_JOB_ID: "42",  # tickwork's own, whatever the template said
        LABEL_OCCURRENCE: str(int(AT.timestamp())),
    }
    metadata = made.body["metadata"]
    assert metadata["name"] == made.name == job_name("nightly", AT, 42, 2)
    assert metadata["namespace"] == "team-a"
    assert metadata["labels"] == {"team": "a", **labels}
    assert metadata["annotations"] == {"x": "y", ANNOTATION_ATTEMPT: "2"}
    assert metadata["ownerReferences"][0]["uid"] == "u-1"
    assert made.body["spec"]["template"]["metadata"]["labels"] == labels
    assert made.body["spec"]["activeDeadlineSeconds"] == 91  # rounded up: never shorter
    assert made.deadline_seconds == 91
    assert made.selector == "tickwork.io/job-id=42"
    assert made.history_selector == (
        "tickwork.io/schedule=nightly,tickwork.io/schedule-namespace=tenant-a"
    )


def test_without_timeout_owner_or_schedule_the_job_has_no_deadline_nor_owner() -> None:
    made = manifests.attempt(_container(), _job(scheduled=False))
    assert "activeDeadlineSeconds" not in made.body["spec"]
    assert "ownerReferences" not in made.body["metadata"]
    assert made.name == "nightly-x42"
    assert made.labels[LABEL_SCHEDULE_NAMESPACE] == "team-a"
    assert LABEL_OCCURRENCE not in made.labels
    assert made.deadline_seconds is None


def _status(*conditions: tuple[str, str, str]) -> dict[str, Any]:
    listed = [{"type": t, "status": s, "reason": r} for t, s, r in conditions]
    return {"metadata": {"name": "j"}, "status": {"conditions": listed}}


def test_only_a_true_complete_or_failed_condition_finishes_a_job() -> None:
    assert manifests.state({}) == manifests.RUNNING
    assert not manifests.state(_status(("Failed", "False", "X"))).finished
    assert not manifests.state(_status(("SuccessCriteriaMet", "True", ""))).finished
    assert not manifests.state(_status(("FailureTarget", "True", "BackoffLimitExceeded"))).finished
    assert manifests.state(_status(("Complete", "True", ""))).succeeded
    failed = manifests.state(_status(("Failed", "True", "BackoffLimitExceeded")))
    assert failed.finished and not failed.succeeded and not failed.deadline_exceeded
    assert manifests.state(_status(("Failed", "True", "DeadlineExceeded"))).deadline_exceeded


_OUTCOMES = st.sampled_from(["Complete", "Failed", None])


@given(
    st.lists(st.tuples(_OUTCOMES, st.integers(0, 50)), max_size=12),
    st.integers(0, 4),
    st.integers(0, 4),
)
def test_pruning_keeps_the_newest_finished_jobs_of_each_outcome_and_every_running_one(
    jobs: list[tuple[str | None, int]], successful: int, failed: int
) -> None:
    bodies = []
    for number, (outcome, second) in enumerate(jobs):
        body: dict[str, Any] = {
            "metadata": {"name": f"job-{number}"},
            "status": {"startTime": f"2030-01-01T00:00:{second:02d}Z"},
        }
        if outcome is not None:
            body["status"]["conditions"] = [{"type": outcome, "status": "True"}]
        bodies.append(body)
    pruned = set(manifests.to_prune(bodies, successful, failed))
    for outcome, limit in (("Complete", successful), ("Failed", failed)):
        group = [(s, f"job-{n}") for n, (o, s) in enumerate(jobs) if o == outcome]
        newest_first = sorted(group, reverse=True)
        assert {name for _, name in newest_first[limit:]} <= pruned
        assert not {name for _, name in newest_first[:limit]} & pruned
    running = {f"job-{n}" for n, (o, _) in enumerate(jobs) if o is None}
    assert not running & pruned


_LABELS = st.sampled_from([None, "1", "2", "3", "4", "5", "6", "x7", "-1", "٣"])
_JOB_STATE = st.sampled_from(["active", "complete", "failed", "deleting"])


@given(
    st.lists(st.tuples(_LABELS, _JOB_STATE), max_size=12),
    st.dictionaries(st.integers(1, 6).map(JobId), st.sampled_from(list(JobStatus))),
)
def test_an_orphan_is_an_active_labelled_job_whose_job_is_finished_or_gone(
    jobs: list[tuple[str | None, str]], statuses: dict[JobId, JobStatus]
) -> None:
    bodies = []
    for number, (label, state) in enumerate(jobs):
        metadata: dict[str, Any] = {"name": f"j{number}", "labels": {}}
        if label is not None:
            metadata["labels"][LABEL_JOB_ID] = label
        if state == "deleting":
            metadata["deletionTimestamp"] = "2030-01-01T00:00:00Z"
        body: dict[str, Any] = {"metadata": metadata}
        if state in ("complete", "failed"):
            condition = {"type": state.title(), "status": "True"}
            body["status"] = {"conditions": [condition]}
        bodies.append(body)

    found = {o.name: o for o in manifests.orphans(bodies, statuses)}

    for number, (label, state) in enumerate(jobs):
        orphan = found.get(f"j{number}")
        if label is None or not label.isascii() or not label.isdigit() or state != "active":
            assert orphan is None  # not ours, or not running: left alone
            continue
        status = statuses.get(JobId(int(label)))
        if status in (JobStatus.AVAILABLE, JobStatus.RUNNING, JobStatus.WAITING):
            assert orphan is None  # its next attempt adopts it
        else:
            expected = manifests.GONE if status is None else status.value
            assert orphan == manifests.Orphan(f"j{number}", JobId(int(label)), expected)
