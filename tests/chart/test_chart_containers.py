"""Container jobs in the chart (``containerJobs``): the pool that runs the Kubernetes Jobs of
Schedules with a ``spec.jobTemplate`` gets, in each namespace it serves, a Role with exactly
create/get/list/watch/delete on batch jobs and list on pods (for a finished Job's termination
message; nothing else on pods, nothing cluster-wide), bound to
its ServiceAccount, its token mounted and ``TICKWORK_CONTAINER_JOBS`` set; every other pool
has no Role, no binding and no token. Rendered with a real ``helm``; ``check_worker_has_no_api_
access`` (tests/chart/chart_checks.py) holds the same over the whole values matrix."""

from __future__ import annotations

from typing import Any

from tests.chart import chart_checks
from tests.chart.chart_render import NAMESPACE, QUICK_START, Helm, Rendering

JOBS = "tw-tickwork-worker-jobs"
TASKS = "tw-tickwork-worker-tasks"


def worker(rendering: Rendering, name: str) -> dict[str, Any]:
    (found,) = [d for d in rendering.of_kind("Deployment") if d["metadata"]["name"] == name]
    return found


def env(deployment: dict[str, Any]) -> dict[str, Any]:
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return {e["name"]: e.get("value") for e in container["env"]}


def test_only_the_container_pool_gets_roles_on_jobs_in_each_namespace_it_serves(
    rendered: dict[str, Rendering],
) -> None:
    r = rendered["containers"]
    roles = r.of_kind("Role")
    assert {(role["metadata"]["namespace"], role["metadata"]["name"]) for role in roles} == {
        ("team-a", f"{JOBS}-jobs"),
        ("team-b", f"{JOBS}-jobs"),
    }
    for role in roles:
        assert role["rules"] == [
            {
                "apiGroups": ["batch"],
                "resources": ["jobs"],
                "verbs": ["create", "get", "list", "watch", "delete"],
            },
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
        ]
    bindings = r.of_kind("RoleBinding")
    assert {b["metadata"]["namespace"] for b in bindings} == {"team-a", "team-b"}
    for binding in bindings:
        assert binding["roleRef"] == {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "Role",
            "name": f"{JOBS}-jobs",
        }
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": JOBS, "namespace": NAMESPACE}
        ]
    # Nothing cluster-wide mentions jobs or binds a worker.
    for role in r.of_kind("ClusterRole"):
        assert all("jobs" not in rule["resources"] for rule in role["rules"])
    for binding in r.of_kind("ClusterRoleBinding"):
        assert {s["name"] for s in binding["subjects"]}.isdisjoint({JOBS, TASKS})


def test_the_container_pool_mounts_its_token_and_runs_container_jobs(
    rendered: dict[str, Rendering],
) -> None:
    r = rendered["containers"]
    jobs, tasks = worker(r, JOBS), worker(r, TASKS)
    assert jobs["spec"]["template"]["spec"]["automountServiceAccountToken"] is True
    assert env(jobs)["TICKWORK_CONTAINER_JOBS"] == "true"
    assert tasks["spec"]["template"]["spec"]["automountServiceAccountToken"] is False
    assert "TICKWORK_CONTAINER_JOBS" not in env(tasks)
    accounts = {a["metadata"]["name"]: a for a in r.of_kind("ServiceAccount")}
    assert accounts[JOBS]["automountServiceAccountToken"] is False  # the pod's setting wins
    chart_checks.check_worker_has_no_api_access(r)


def test_no_pool_has_roles_by_default(rendered: dict[str, Rendering]) -> None:
    for case in ("defaults", "pools"):
        assert rendered[case].of_kind("Role") == [] or all(
            "jobs" not in rule["resources"]
            for role in rendered[case].of_kind("Role")
            for rule in role["rules"]
        )
        for deployment in rendered[case].of_kind("Deployment"):
            assert "TICKWORK_CONTAINER_JOBS" not in env(deployment)


def test_the_single_worker_pool_can_run_container_jobs(helm: Helm) -> None:
    values = {**QUICK_START, "worker": {"namespaces": ["default", "batch"], "containerJobs": True}}
    r = helm.render("single-containers", values)
    roles = [role for role in r.of_kind("Role") if role["metadata"]["name"].endswith("-jobs")]
    assert sorted(role["metadata"]["namespace"] for role in roles) == ["batch", "default"]
    assert env(worker(r, "tw-tickwork-worker"))["TICKWORK_CONTAINER_JOBS"] == "true"
    chart_checks.check_worker_has_no_api_access(r)


def test_a_broken_container_pool_rendering_is_caught(rendered: dict[str, Rendering]) -> None:
    """The matrix check fails when a Role gets one verb more (get on pods, or update)."""
    import copy

    import pytest

    broken = copy.deepcopy(rendered["containers"])
    for document in broken.documents:
        if document.kind == "Role":
            document.obj["rules"][0]["verbs"].append("update")
    with pytest.raises(AssertionError, match="worker-jobs"):
        chart_checks.check_worker_has_no_api_access(broken)
