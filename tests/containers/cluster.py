"""kmock standing in for the Kubernetes API server (no real one can run here), and the test
playing the Job controller.

:class:`JobsEmulator` is the operator tests' emulator (resourceVersion stamping, 404s) plus
what the worker's requests need from an API server and kmock 0.8 does not do: equality and
existence label selectors and pages (``limit``, ``continue``) on lists,
``fieldSelector=metadata.name=…`` and ``timeoutSeconds`` on watches. It
records every request the worker sends (those carrying the kubeconfig's token; the test's own
requests carry none) as :class:`Call`, so a test can assert exactly which verbs on which
resources in which namespaces the worker used.

:class:`JobController` is the test's side: it reads the Jobs kmock holds and marks them
finished by patching their status, as the Job controller would.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp.web
import kmock

from tests.operator.emulator import Emulator, prepare
from tickwork.schedules.container_jobs import LABEL_JOB_ID

JOBS = "batch/v1/jobs"
TOKEN = "kmock"


@dataclass(frozen=True)
class Call:
    """One request the worker sent: the RBAC verb, the resource, the namespace, the name and
    the query parameters."""

    verb: str
    resource: str
    namespace: str | None
    name: str | None
    params: Mapping[str, str]


_VERBS = {
    kmock.action.LIST: "list",
    kmock.action.WATCH: "watch",
    kmock.action.FETCH: "get",
    kmock.action.CREATE: "create",
    kmock.action.UPDATE: "patch",
    kmock.action.DELETE: "delete",
}


def _labels_match(body: Mapping[str, Any], selector: str) -> bool:
    """Equality (``key=value``) and existence (``key``) terms, as the API server reads them."""
    labels = body.get("metadata", {}).get("labels") or {}
    for term in filter(None, selector.split(",")):
        key, equals, value = term.partition("=")
        if key not in labels or (equals and labels[key] != value):
            return False
    return True


class JobsEmulator(Emulator):
    @property
    def calls(self) -> list[Call]:
        found: list[Call] = self.__dict__.setdefault("_calls", [])
        return found

    async def _handle(self, request: kmock.Request) -> Any:
        if request.headers.get("Authorization") == f"Bearer {TOKEN}":
            resource = request.resource
            plural = (
                f"{resource.plural}.{resource.group}".rstrip(".") if resource is not None else "?"
            )
            verb = _VERBS.get(request.action, str(request.action))
            name = request.name
            if request.action == kmock.action.CREATE and isinstance(request.data, dict):
                name = request.data.get("metadata", {}).get("name")
            self.calls.append(Call(verb, plural, request.namespace, name, dict(request.params)))
        if request.namespace in self.forbidden:
            body = {"apiVersion": "v1", "kind": "Status", "status": "Failure", "code": 403}
            message = f'jobs.batch is forbidden in the namespace "{request.namespace}"'
            return aiohttp.web.json_response(
                {**body, "reason": "Forbidden", "message": message}, status=403
            )
        if request.action == kmock.action.WATCH and self.__dict__.pop("_fail_next_watch", False):
            body = {"apiVersion": "v1", "kind": "Status", "status": "Failure", "code": 503}
            return aiohttp.web.json_response(
                {**body, "reason": "ServiceUnavailable", "message": "try again"}, status=503
            )
        if request.action == kmock.action.CREATE and isinstance(request.data, dict):
            metadata = request.data.get("metadata", {})
            key = (
                request.resource,
                request.namespace or metadata.get("namespace"),
                metadata.get("name"),
            )
            if key in self.objects and not self.objects[key].deleted:  # kmock would raise
                body = {"apiVersion": "v1", "kind": "Status", "status": "Failure", "code": 409}
                message = f'jobs.batch "{metadata.get("name")}" already exists'
                return aiohttp.web.json_response(
                    {**body, "reason": "AlreadyExists", "message": message}, status=409
                )
        return await super()._handle(request)

    @property
    def forbidden(self) -> set[str]:
        """Namespaces where every request is refused with 403 Forbidden, as RBAC refuses a
        ServiceAccount without a Role there."""
        found: set[str] = self.__dict__.setdefault("_forbidden", set())
        return found

    @property
    def unlisted(self) -> set[str]:
        """Names of Jobs that lists leave out: as if each was created by a racing worker
        between this worker's list and its create."""
        found: set[str] = self.__dict__.setdefault("_unlisted", set())
        return found

    async def _serve_list(self, request: kmock.Request) -> Any:
        """Label selectors, and pages as the API server makes them: ``limit`` items, then a
        ``continue`` token (here the offset) when more are left."""
        answer = await super()._serve_list(request)
        selector = request.params.get("labelSelector", "")
        items = sorted(
            (
                item
                for item in answer["items"]
                if _labels_match(item, selector) and item["metadata"]["name"] not in self.unlisted
            ),
            key=lambda item: str(item["metadata"]["name"]),
        )
        start = int(request.params.get("continue") or 0)
        limit = int(request.params.get("limit") or 0) or len(items)
        answer["items"] = items[start : start + limit]
        if start + limit < len(items):
            answer["metadata"] = {**answer.get("metadata", {}), "continue": str(start + limit)}
        return answer

    def fail_next_watch(self) -> None:
        """The next watch is refused with 503 ServiceUnavailable."""
        self.__dict__["_fail_next_watch"] = True

    @property
    def expire_next_watch(self) -> bool:
        """Set: the next watch is answered with an ERROR event 410 (Expired), as an API server
        does for a resourceVersion it no longer keeps."""
        return bool(self.__dict__.get("_expire_next_watch"))

    @expire_next_watch.setter
    def expire_next_watch(self, value: bool) -> None:
        self.__dict__["_expire_next_watch"] = value

    async def _serve_watch(self, request: kmock.Request) -> AsyncIterator[Any]:
        if self.expire_next_watch:
            self.expire_next_watch = False
            yield b""
            status = {"kind": "Status", "status": "Failure", "code": 410, "reason": "Expired"}
            yield {"type": "ERROR", "object": {**status, "message": "too old resource version"}}
            return
        wanted = request.params.get("fieldSelector", "").removeprefix("metadata.name=")
        seconds = float(request.params.get("timeoutSeconds", "0") or 0)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds if seconds else None
        # kmock takes its snapshot before it joins the event bus: a change in between is
        # never sent. An API server sends every change after the version watched from; here
        # the bus is joined first, then the snapshot sent (a change may come twice: harmless).
        assert request.resource is not None
        bus = self._buses[request.resource]
        marker = await bus.mark()
        try:
            yield b""
            for (resource, namespace, name), obj in list(self.objects.items()):
                if resource != request.resource or not _in(namespace, request.namespace):
                    continue
                if not obj.deleted and (not wanted or name == wanted):
                    yield {"type": "ADDED", "object": obj.raw}
            events = bus.stream(since=marker).__aiter__()
            while True:
                remaining = None if deadline is None else deadline - loop.time()
                if remaining is not None and remaining <= 0:
                    return
                try:
                    event = await asyncio.wait_for(events.__anext__(), remaining)
                except (TimeoutError, StopAsyncIteration):
                    return
                if not _in(
                    event.get("object", {}).get("metadata", {}).get("namespace"), request.namespace
                ):
                    continue
                if wanted and _name(event) != wanted:
                    continue
                yield event
        finally:
            await bus.unmark(marker)


def _in(namespace: str | None, watched: str | None) -> bool:
    """Whether an object in ``namespace`` is seen by a watch of ``watched`` (None: a
    cluster-wide watch, as the operator's, sees every namespace)."""
    return watched is None or namespace == watched


def _name(event: Mapping[str, Any]) -> Any:
    return event.get("object", {}).get("metadata", {}).get("name")


class JobController:
    """The test's side of the API server for Jobs: read them, create strangers, finish them."""

    def __init__(self, server: JobsEmulator) -> None:
        self.server = server

    @staticmethod
    def url(namespace: str, name: str | None = None) -> str:
        return f"/apis/batch/v1/namespaces/{namespace}/jobs" + (f"/{name}" if name else "")

    def jobs(self, namespace: str = "ns") -> list[dict[str, Any]]:
        """The Jobs that exist in ``namespace``, by name."""
        found = [
            dict(obj.raw)
            for (resource, ns, _), obj in self.server.objects.items()
            if resource.plural == "jobs" and ns == namespace and not obj.deleted
        ]
        return sorted(found, key=lambda body: body["metadata"]["name"])

    def names(self, namespace: str = "ns") -> list[str]:
        return [body["metadata"]["name"] for body in self.jobs(namespace)]

    def of_job(self, job_id: int, namespace: str = "ns") -> list[dict[str, Any]]:
        return [
            body
            for body in self.jobs(namespace)
            if body["metadata"].get("labels", {}).get(LABEL_JOB_ID) == str(job_id)
        ]

    def get(self, name: str, namespace: str = "ns") -> dict[str, Any] | None:
        for body in self.jobs(namespace):
            if body["metadata"]["name"] == name:
                return body
        return None

    def created(self, namespace: str = "ns") -> list[str]:
        """Names of the Jobs the worker asked to create (each request, in order)."""
        return [
            str(call.name)
            for call in self.server.calls
            if call.verb == "create" and call.namespace == namespace
        ]

    def deletes(self) -> list[Call]:
        return [call for call in self.server.calls if call.verb == "delete"]

    async def create(self, body: dict[str, Any], namespace: str = "ns") -> None:
        """A Job created by someone else (not the worker)."""
        async with self.server.post(self.url(namespace), json=body) as response:
            assert response.status < 300, await response.text()

    async def finish(
        self,
        name: str,
        condition: str,
        *,
        reason: str = "",
        message: str = "",
        start: str = "2030-01-01T00:00:00Z",
        namespace: str = "ns",
    ) -> None:
        """Mark the Job finished (``Complete`` or ``Failed``), as the Job controller would."""
        status: dict[str, Any] = {
            "startTime": start,
            "conditions": [
                {"type": condition, "status": "True", "reason": reason, "message": message}
            ],
        }
        if condition == "Complete":
            status["completionTime"] = "2030-01-01T00:01:00Z"
            status["succeeded"] = 1
        else:
            status["failed"] = 1
        headers = {"Content-Type": "application/merge-patch+json"}
        async with self.server.patch(
            self.url(namespace, name), json={"status": status}, headers=headers
        ) as response:
            assert response.status < 300, await response.text()


def kubeconfig(url: str) -> str:
    """A kubeconfig pointing at kmock, with the token that marks the worker's requests."""
    return (
        "apiVersion: v1\nkind: Config\ncurrent-context: kmock\n"
        f"clusters: [{{name: kmock, cluster: {{server: '{url}'}}}}]\n"
        f"users: [{{name: kmock, user: {{token: {TOKEN}}}}}]\n"
        "contexts: [{name: kmock, context: {cluster: kmock, user: kmock}}]\n"
    )


__all__ = ["JOBS", "Call", "JobController", "JobsEmulator", "kubeconfig", "prepare"]
