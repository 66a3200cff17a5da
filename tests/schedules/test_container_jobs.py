"""The container-job contract (pure): Job names and labels are valid, deterministic and
distinct; payloads round-trip and bad ones are refused naming the field."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tickwork.schedules import container_jobs
from tickwork.schedules.container_jobs import ContainerJob

DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
LABEL_VALUE = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
schedule_names = st.from_regex(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?", fullmatch=True)
instants = st.datetimes(
    min_value=datetime(1970, 1, 2), max_value=datetime(2200, 1, 1), timezones=st.just(UTC)
)


@given(schedule_names, st.none() | instants, st.integers(1, 2**63 - 1), st.integers(1, 10**6))
def test_job_names_are_dns_labels_and_deterministic(name, at, job_id, attempt) -> None:
    made = container_jobs.job_name(name, at, job_id, attempt)
    assert len(made) <= container_jobs.MAX_JOB_NAME
    assert DNS_LABEL.fullmatch(made), made
    assert made == container_jobs.job_name(name, at, job_id, attempt)


@given(schedule_names, schedule_names, instants)
def test_two_schedules_never_share_a_job_name(a, b, at) -> None:
    if a != b:
        assert container_jobs.job_name(a, at, 1, 1) != container_jobs.job_name(b, at, 1, 1)


@given(schedule_names, instants, st.integers(1, 50), st.integers(1, 50))
def test_attempts_get_their_own_job_and_occurrences_theirs(name, at, a, b) -> None:
    if a != b:
        assert container_jobs.job_name(name, at, 7, a) != container_jobs.job_name(name, at, 7, b)


def test_a_short_name_reads_as_cronjob_names_do() -> None:
    at = datetime(2026, 12, 3, 3, 0, tzinfo=UTC)
    assert container_jobs.job_name("nightly", at, 9, 1) == "nightly-1796266800"
    assert container_jobs.job_name("nightly", at, 9, 2) == "nightly-1796266800-a2"
    assert container_jobs.job_name("nightly", None, 9, 1) == "nightly-x9"


@given(st.text(min_size=1, max_size=300), schedule_names, st.integers(1, 10**12), instants)
def test_labels_are_valid_label_values(namespace, name, job_id, at) -> None:
    labels = container_jobs.job_labels(namespace, name, job_id, at)
    for value in labels.values():
        assert len(value) <= 63 and LABEL_VALUE.fullmatch(value), value
    assert labels[container_jobs.LABEL_JOB_ID] == str(job_id)


def test_payload_round_trips_and_defaults_history_limits() -> None:
    job = ContainerJob("team-a", "nightly", {"spec": {"template": {}}}, owner_uid="u-1")
    assert ContainerJob.from_payload(job.to_payload()) == job
    payload = job.to_payload()
    del payload["successfulJobsHistoryLimit"], payload["failedJobsHistoryLimit"]
    read = ContainerJob.from_payload(payload)
    assert (read.successful_jobs_history_limit, read.failed_jobs_history_limit) == (3, 1)


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ([], "payload"),
        ({"schedule": "x", "jobTemplate": {}}, "payload.namespace"),
        ({"namespace": "a", "schedule": "", "jobTemplate": {}}, "payload.schedule"),
        ({"namespace": "a", "schedule": "x", "jobTemplate": []}, "payload.jobTemplate"),
        ({"namespace": "a", "schedule": "x", "jobTemplate": {}, "ownerUid": 3}, "payload.ownerUid"),
        (
            {"namespace": "a", "schedule": "x", "jobTemplate": {}, "failedJobsHistoryLimit": -1},
            "payload.failedJobsHistoryLimit",
        ),
    ],
)
def test_a_bad_payload_is_refused_naming_the_field(payload, field) -> None:
    with pytest.raises(ValueError, match=re.escape(field) + ":"):
        ContainerJob.from_payload(payload)
