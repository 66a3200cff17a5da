"""Who may run which container: the admission webhook's question to the API server.

A container Schedule (``spec.jobTemplate``) makes tickwork's workers create Kubernetes Jobs in
the Schedule's namespace with the workers' own rights. So before it admits one, the webhook
asks the API server, with a ``SubjectAccessReview`` (``authorization.k8s.io/v1``) made of the
requesting user's ``userInfo``, whether that user may ``create`` ``jobs.batch`` in that
namespace (:func:`may_create_jobs`), and refuses the Schedule otherwise
(:func:`denied`). The cluster's RBAC (or any authorizer it runs) decides, not tickwork.

A review that cannot be made (API server unreachable, an error answer) raises
:class:`ReviewFailed`; the webhook then refuses the container Schedule (fails closed) and
still admits every other Schedule. The operator's service account needs ``create`` on
``subjectaccessreviews.authorization.k8s.io`` (the chart grants it).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

import kubernetes

from tickwork.operator.kube import api_client

GROUP, RESOURCE, VERB = "batch", "jobs", "create"
RIGHT = f"{VERB} {RESOURCE}.{GROUP}"
REQUEST_SECONDS = 5.0
"""A review the API server has not answered within this long fails (the webhook's own
timeout, ``webhook.timeoutSeconds``, is 10 s by default)."""


class ReviewFailed(Exception):
    """The API server could not be asked, or did not answer with a decision."""


def review(user_info: Mapping[str, Any], namespace: str) -> dict[str, Any]:
    """The SubjectAccessReview asking whether ``user_info`` may create Jobs in ``namespace``."""
    spec: dict[str, Any] = {
        "resourceAttributes": {
            "namespace": namespace,
            "verb": VERB,
            "group": GROUP,
            "resource": RESOURCE,
        }
    }
    if isinstance(user_info.get("username"), str):
        spec["user"] = user_info["username"]
    if isinstance(user_info.get("uid"), str):
        spec["uid"] = user_info["uid"]
    groups = user_info.get("groups")
    if isinstance(groups, list):
        spec["groups"] = [group for group in groups if isinstance(group, str)]
    extra = user_info.get("extra")
    if isinstance(extra, Mapping):
        spec["extra"] = {
            str(key): [v for v in values if isinstance(v, str)]
            for key, values in extra.items()
            if isinstance(values, list)
        }
    return {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}


def _ask(body: dict[str, Any]) -> bool:
    """POST the review (blocking); the API server's ``status.allowed``."""
    try:
        with api_client() as client:
            api = kubernetes.client.AuthorizationV1Api(client)
            response: Any = api.create_subject_access_review(
                body,  # type: ignore[arg-type]  # a dict is serialized as it is
                _preload_content=False,
                _request_timeout=REQUEST_SECONDS,
            )
            answer = json.loads(response.data)
    except kubernetes.client.ApiException as error:
        reason = " ".join(str(error.reason or error.body or "").split())[:200]
        raise ReviewFailed(f"HTTP {error.status}: {reason}") from None
    except Exception as error:  # unreachable, TLS, no credentials, not JSON
        raise ReviewFailed(f"{type(error).__name__}: {error}"[:300]) from None
    status = answer.get("status") if isinstance(answer, Mapping) else None
    allowed = status.get("allowed") if isinstance(status, Mapping) else None
    if not isinstance(allowed, bool):
        raise ReviewFailed("the answer holds no status.allowed")
    return allowed


async def may_create_jobs(user_info: Mapping[str, Any], namespace: str) -> bool:
    """Whether the API server lets ``user_info`` create Jobs in ``namespace``; raises
    ReviewFailed when it cannot tell."""
    return await asyncio.to_thread(_ask, review(user_info, namespace))


def user_of(user_info: Mapping[str, Any]) -> str:
    name = user_info.get("username")
    return name if isinstance(name, str) and name else "(unknown)"


def denied(field: str, user_info: Mapping[str, Any], namespace: str, why: str) -> str:
    """The refusal of a user without the right: ``field: user "alice" may not create
    jobs.batch in namespace "team-a"; <why>``."""
    return (
        f"{field}: user {json.dumps(user_of(user_info))} may not {RIGHT} in namespace "
        f"{json.dumps(namespace)}; {why}"
    )


def unknown(field: str, user_info: Mapping[str, Any], namespace: str, error: Exception) -> str:
    """The refusal when the review failed: the webhook fails closed."""
    return (
        f"{field}: cannot tell whether user {json.dumps(user_of(user_info))} may {RIGHT} in "
        f"namespace {json.dumps(namespace)} (the SubjectAccessReview failed: {error}); a "
        "container Schedule is refused until the API server answers"
    )
