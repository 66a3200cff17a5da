"""Who may run which container: the webhook asks the API server (a SubjectAccessReview) whether
the requesting user may create jobs.batch in a container Schedule's namespace, and refuses it
otherwise. kmock stands in for the API server and answers the reviews from a small RBAC table
of its own (alice may create Jobs in team-a, bob only in team-b, carol nowhere); the review is
the real one the operator sends through the official client."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import kmock
import pytest

from tests.operator.harness import Cluster, operator_config
from tests.operator.test_webhook_requests import free_port, post, request, schedule
from tests.support.helpers import wait_until
from tickwork.operator import access, run_now, runner, webhook
from tickwork.schedules.tenancy import TenantPolicy

REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
MAY_CREATE_JOBS = {"alice": {"team-a"}, "bob": {"team-b"}, "carol": set()}
POD = {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]}
CONTAINER = {"schedule": "0 3 * * *", "jobTemplate": {"spec": {"template": {"spec": POD}}}}
PLAIN = {"schedule": "0 3 * * *", "job": {"kind": "k"}}


def rbac(reviews: list[dict[str, Any]]) -> Any:
    """kmock's reaction: answer each review from MAY_CREATE_JOBS, keeping what was asked."""

    def answer(req: kmock.Request) -> dict[str, Any]:
        body = req.data
        reviews.append(body)
        spec, attributes = body["spec"], body["spec"]["resourceAttributes"]
        right = (attributes["verb"], attributes["group"], attributes["resource"])
        allowed = right == ("create", "batch", "jobs") and attributes["namespace"] in (
            MAY_CREATE_JOBS.get(spec.get("user"), set())
        )
        return {**body, "status": {"allowed": allowed}}

    return answer


def admission(
    operation: str, user: str, new: Any, old: Any = None, namespace: str = "team-a"
) -> dict[str, Any]:
    review = request(operation, new, old)
    review["request"]["namespace"] = namespace
    review["request"]["userInfo"] = {
        "username": user,
        "uid": f"uid-{user}",
        "groups": ["system:authenticated", f"team:{user}"],
        "extra": {"scopes.example/x": ["a", "b"]},
    }
    return review


def in_team_a(spec: dict[str, Any], **metadata: Any) -> dict[str, Any]:
    return schedule(spec, namespace="team-a", **metadata)


async def answered(review: dict[str, Any]) -> dict[str, Any]:
    async def policies() -> list[TenantPolicy]:
        return []

    response: dict[str, Any] = (await webhook.answer(review, policies, access.may_create_jobs))[
        "response"
    ]
    return response


@pytest.fixture
def reviews(cluster: Cluster, kmock: kmock.KubernetesEmulator) -> list[dict[str, Any]]:
    """The reviews kmock answered, in order."""
    asked: list[dict[str, Any]] = []
    kmock[f"post {REVIEWS}"] << rbac(asked)
    return asked


async def test_a_user_who_may_create_jobs_there_may_create_a_container_schedule(
    reviews: list[dict[str, Any]],
) -> None:
    response = await answered(admission("CREATE", "alice", in_team_a(CONTAINER)))
    assert response["allowed"], response
    assert reviews == [
        {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": "alice",
                "uid": "uid-alice",
                "groups": ["system:authenticated", "team:alice"],
                "extra": {"scopes.example/x": ["a", "b"]},
                "resourceAttributes": {
                    "namespace": "team-a",
                    "verb": "create",
                    "group": "batch",
                    "resource": "jobs",
                },
            },
        }
    ]


@pytest.mark.parametrize("user", ["bob", "carol"])
async def test_a_user_without_the_right_there_is_refused_naming_it(
    reviews: list[dict[str, Any]], user: str
) -> None:
    """bob may create Jobs elsewhere only, carol nowhere: both are refused in team-a."""
    response = await answered(admission("CREATE", user, in_team_a(CONTAINER)))
    assert not response["allowed"]
    assert response["status"] == {
        "code": 403,
        "reason": "Forbidden",
        "message": f'spec.jobTemplate: user "{user}" may not create jobs.batch in namespace '
        '"team-a"; a container Schedule runs as a Job there',
    }
    changed = in_team_a({**CONTAINER, "schedule": "0 4 * * *"})
    response = await answered(admission("UPDATE", user, changed, in_team_a(CONTAINER)))
    assert not response["allowed"], "a spec change of a container Schedule is asked about too"
    plain = in_team_a(PLAIN)
    response = await answered(admission("UPDATE", user, in_team_a(CONTAINER), plain))
    assert not response["allowed"], "so is turning a plain Schedule into a container one"
    assert len(reviews) == 3


async def test_no_review_for_plain_schedules_metadata_or_status(
    reviews: list[dict[str, Any]],
) -> None:
    """carol may write Schedules without a jobTemplate; kopf's finalizers and annotations,
    labels, a delete's finalizer removal and a container Schedule turned plain pass unasked."""
    for review in (
        admission("CREATE", "carol", in_team_a(PLAIN)),
        admission("UPDATE", "carol", in_team_a(PLAIN), in_team_a(PLAIN, labels={"a": "b"})),
        admission(
            "UPDATE", "system:serviceaccount:tickwork:operator",
            in_team_a(CONTAINER, finalizers=[]), in_team_a(CONTAINER),
        ),
        admission("UPDATE", "carol", in_team_a(CONTAINER, labels={"a": "b"}), in_team_a(CONTAINER)),
        admission("UPDATE", "carol", in_team_a(PLAIN), in_team_a(CONTAINER)),
        admission("DELETE", "carol", None, in_team_a(CONTAINER)),
    ):  # fmt: skip
        response = await answered(review)
        assert response["allowed"], (review, response)
    assert reviews == []


async def test_running_a_container_schedule_now_needs_the_right(
    reviews: list[dict[str, Any]],
) -> None:
    token = {"annotations": {run_now.ANNOTATION: "1"}}
    response = await answered(
        admission("UPDATE", "carol", in_team_a(CONTAINER, **token), in_team_a(CONTAINER))
    )
    assert not response["allowed"]
    assert response["status"]["message"] == (
        'metadata.annotations["tickwork.io/run-now"]: user "carol" may not create jobs.batch in '
        'namespace "team-a"; running a container Schedule now creates a Job there'
    )
    response = await answered(
        admission("UPDATE", "alice", in_team_a(CONTAINER, **token), in_team_a(CONTAINER))
    )
    assert response["allowed"]
    same = in_team_a(CONTAINER, labels={"x": "y"}, **token)
    response = await answered(admission("UPDATE", "carol", same, in_team_a(CONTAINER, **token)))
    assert response["allowed"], "the same token again runs nothing"
    assert len(reviews) == 2


async def test_a_review_that_fails_refuses_container_schedules_only(
    cluster: Cluster, kmock: kmock.KubernetesEmulator
) -> None:
    """The API server answers the review with an error: the webhook fails closed for the
    container Schedule, with the reason, and still admits a plain one."""
    kmock[f"post {REVIEWS}"] << 500 << {"kind": "Status", "message": "etcd is gone"}
    response = await answered(admission("CREATE", "alice", in_team_a(CONTAINER)))
    assert not response["allowed"]
    assert response["status"]["code"] == 503
    assert response["status"]["message"].startswith(
        'spec.jobTemplate: cannot tell whether user "alice" may create jobs.batch in namespace '
        '"team-a" (the SubjectAccessReview failed: HTTP 500'
    )
    assert response["status"]["message"].endswith(
        "a container Schedule is refused until the API server answers"
    )
    assert (await answered(admission("CREATE", "alice", in_team_a(PLAIN))))["allowed"]


async def test_an_answer_without_a_decision_fails_closed(
    cluster: Cluster, kmock: kmock.KubernetesEmulator
) -> None:
    kmock[f"post {REVIEWS}"] << (lambda req: {**req.data, "status": {}})
    response = await answered(admission("CREATE", "alice", in_team_a(CONTAINER)))
    assert not response["allowed"] and "holds no status.allowed" in response["status"]["message"]


def test_an_unreachable_api_server_fails_closed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "kubeconfig"
    config.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters: [{{name: c, cluster: {{server: 'http://127.0.0.1:{free_port()}'}}}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\n"
    )
    monkeypatch.setenv("KUBECONFIG", str(config))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    response = asyncio.run(answered(admission("CREATE", "alice", in_team_a(CONTAINER))))
    assert not response["allowed"] and response["status"]["code"] == 503
    assert "the SubjectAccessReview failed" in response["status"]["message"]


async def test_the_operators_webhook_asks_unless_told_not_to(
    cluster: Cluster,
    kmock: kmock.KubernetesEmulator,
    reviews: list[dict[str, Any]],
    certificate: tuple[Path, Path],
) -> None:
    """The real operator's HTTPS webhook (its database down: it needs none) refuses carol's
    container Schedule and admits alice's; with --webhook-skip-access-review it asks nothing."""
    cert, key = certificate
    for skip in (False, True):
        port = free_port()

        async def answers(port: int = port) -> bool:
            try:
                await post(port, cert, {})
            except OSError:
                return False
            return True

        config = operator_config(
            f"postgresql://127.0.0.1:{free_port()}/none",
            webhook=True,
            webhook_port=port,
            webhook_addr="127.0.0.1",
            webhook_cert_file=str(cert),
            webhook_key_file=str(key),
            webhook_skip_access_review=skip,
        )
        run = asyncio.create_task(runner.run(config))
        try:
            await wait_until(answers, timeout=20, what="the webhook to answer")
            asked = len(reviews)
            status, body = await post(
                port, cert, admission("CREATE", "carol", in_team_a(CONTAINER))
            )
            assert status == 200 and body["response"]["allowed"] == skip, json.dumps(body)
            status, body = await post(
                port, cert, admission("CREATE", "alice", in_team_a(CONTAINER))
            )
            assert status == 200 and body["response"]["allowed"]
            assert len(reviews) - asked == (0 if skip else 2)
        finally:
            run.cancel()
            with pytest.raises(asyncio.CancelledError):
                await run
