"""Fixtures of the container-job tests: kmock standing in for the Kubernetes API server (see
``cluster.py``), the test playing the Job controller, and an App whose worker runs container
jobs against it. Every test ends by checking that the worker sent only the requests its Role
grants (:data:`USED`)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config

import tickwork
from tests.containers.cluster import JobController, JobsEmulator, kubeconfig, prepare
from tickwork import containers
from tickwork.containers import kube

ALLOWED = {"create", "get", "list", "watch", "delete"}
"""The verbs on batch/v1 jobs the chart's Role grants the container-jobs worker pool (and list
on pods, for a finished Job's termination message)."""
NAMESPACE = "ns"
USED = {(verb, "jobs.batch", NAMESPACE) for verb in ALLOWED} | {("list", "pods", NAMESPACE)}
"""(verb, resource, namespace): all the worker may send, as the chart's Role grants it."""


@pytest.fixture
def kmock_options() -> dict[str, Any]:
    return {"cls": JobsEmulator, "strict": True}


@pytest.fixture
async def controller(
    kmock: JobsEmulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[JobController]:
    prepare(kmock)
    config = tmp_path / "kubeconfig"
    config.write_text(kubeconfig(str(kmock.url)))
    monkeypatch.setenv("KUBECONFIG", str(config))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    yield JobController(kmock)
    used = {
        (call.verb, call.resource, call.namespace)
        for call in kmock.calls
        if call.namespace not in kmock.forbidden  # refused: no permission was used
    }
    assert used <= USED, used


@pytest.fixture
def client(controller: JobController, tmp_path: Path) -> kube.Client:
    """The worker's client, configured from the kubeconfig pointing at kmock (its token marks
    the worker's requests). The file is named: ``kubernetes.config`` read $KUBECONFIG at
    import."""
    configuration = k8s_client.Configuration()
    k8s_config.load_kube_config(
        config_file=str(tmp_path / "kubeconfig"), client_configuration=configuration
    )
    return kube.Client(configuration)


@pytest.fixture
async def app(database_url: str, client: kube.Client) -> AsyncIterator[tickwork.App]:
    """An App whose workers run container jobs (as ``tickwork worker --container-jobs``)."""
    made = tickwork.App(database_url)
    containers.register(made, client)
    yield made
    await made.close_async()
