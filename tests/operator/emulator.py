"""kmock's Kubernetes emulator, made just real enough for kopf (and shared with the benchmark).

kmock 0.8 keeps no ``resourceVersion``, ``uid``, ``creationTimestamp`` or ``generation``, and
answers a JSON patch whose ``test`` fails, or a write to a missing object, with a 500 (counted as
a server error). kopf needs the versions (it JSON-patches finalizers with a ``test`` on
``resourceVersion`` and waits to see its own writes come back), so this subclass stamps them on
every write and answers like the API server: 422 for a failed test, 404 for a missing object.

kmock also matches every request against its whole request history through its DSL (about
50 ms of CPU per request after a few hundred, quadratic overall: thousands of objects stall
it). Here, object requests go straight to the emulator's own handlers, and the history keeps
only the requests in flight (nothing here asserts on the request log).

Reviews (``authorization.k8s.io`` ``subjectaccessreviews``) are questions, not objects: the API
server stores none. Here they skip the object store and go to kmock's DSL, so a test answers them
with a reaction (``kmock["post /apis/authorization.k8s.io/v1/subjectaccessreviews"] << ...``);
with none, the strict emulator fails the test.

kmock cannot parse ``/api/v1/namespaces`` at all (a 500), which kopf lists and watches when it
watches chosen namespaces (``--namespace``). Here a namespace exists while an object lives in
it: the list names those, and a watch reports every one (ADDED) at once, then each namespace
that appears (ADDED) or goes (DELETED) within a tenth of a second.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import uuid
from datetime import UTC, datetime
from typing import Any, cast

import aiohttp.web
import kmock

SCHEDULES = "tickwork.io/v1/schedules"
TENANT_POLICIES = "tickwork.io/v1/tenantpolicies"
PEERINGS = "kopf.dev/v1/clusterkopfpeerings"
NAMESPACES_PATH = "/api/v1/namespaces"
NAMESPACE_POLL_SECONDS = 0.1
REVIEWS = frozenset({"subjectaccessreviews", "localsubjectaccessreviews"})

_versions = itertools.count(1)


def _status(code: int, reason: str, message: str) -> aiohttp.web.StreamResponse:
    body = {"apiVersion": "v1", "kind": "Status", "status": "Failure", "code": code}
    return aiohttp.web.json_response({**body, "reason": reason, "message": message}, status=code)


class _Dispatch(kmock.RawHandler):
    """Placed after KubernetesEmulator in the MRO: its state-keeping ``_handle`` ends by calling
    this one, which serves object requests directly instead of through the DSL."""

    async def _handle(self, request: kmock.Request) -> aiohttp.web.StreamResponse:
        emulator = cast(kmock.KubernetesEmulator, self)
        serve = {
            kmock.action.LIST: emulator._serve_list,
            kmock.action.WATCH: emulator._serve_watch,
            kmock.action.FETCH: emulator._serve_fetch,
            kmock.action.CREATE: emulator._serve_create,
            kmock.action.UPDATE: emulator._serve_update,
            kmock.action.DELETE: emulator._serve_delete,
        }.get(request.action)
        if serve is None or request.resource is None or not request.resource.plural:
            return await super()._handle(request)
        return await kmock.Response.guess(serve)(request)


class Emulator(kmock.KubernetesEmulator, _Dispatch):
    async def __call__(self, raw_request: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        if raw_request.path.rstrip("/") != NAMESPACES_PATH or raw_request.method != "GET":
            return await super().__call__(raw_request)
        if raw_request.query.get("watch") == "true":
            return await self._watch_namespaces(raw_request)
        items = [_namespace(name) for name in sorted(self.namespace_names())]
        body = {"apiVersion": "v1", "kind": "NamespaceList", "items": items}
        return aiohttp.web.json_response({**body, "metadata": {"resourceVersion": "1"}})

    def namespace_names(self) -> set[str]:
        """The namespaces some object lives in."""
        return {ns for (_, ns, _), obj in self.objects.items() if ns and not obj.deleted}

    async def _watch_namespaces(
        self, raw_request: aiohttp.web.BaseRequest
    ) -> aiohttp.web.StreamResponse:
        response = aiohttp.web.StreamResponse()
        await response.prepare(raw_request)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + float(raw_request.query.get("timeoutSeconds", "300"))
        known: set[str] = set()  # as a watch without resourceVersion: ADDED for every one
        while loop.time() < deadline:
            now = self.namespace_names()
            events = [("ADDED", name) for name in sorted(now - known)]
            events += [("DELETED", name) for name in sorted(known - now)]
            for kind, name in events:
                line = json.dumps({"type": kind, "object": _namespace(name)}) + "\n"
                await response.write(line.encode())
            known = now
            await asyncio.sleep(NAMESPACE_POLL_SECONDS)
        return response

    async def _handle(self, request: kmock.Request) -> aiohttp.web.StreamResponse:
        in_flight: set[int] = self.__dict__.setdefault("in_flight", set())
        in_flight.add(id(request))
        try:
            if len(self._requests) > 2 * len(in_flight) + 100:
                self._requests[:] = [r for r in self._requests if id(r) in in_flight]
            return await self._emulate(request)
        finally:
            in_flight.discard(id(request))

    async def _emulate(self, request: kmock.Request) -> aiohttp.web.StreamResponse:
        if request.resource is None:
            return await super()._handle(request)
        if request.resource.plural in REVIEWS:
            return await kmock.RawHandler._handle(self, request)  # the DSL only
        action = request.action
        key = (request.resource, request.namespace, request.name)
        if action in (kmock.action.UPDATE, kmock.action.DELETE, kmock.action.FETCH) and (
            key not in self.objects or self.objects[key].deleted
        ):
            return _status(404, "NotFound", f"{request.name} not found")
        if action == kmock.action.CREATE and isinstance(request.data, dict):
            metadata = request.data.setdefault("metadata", {})
            if "name" not in metadata and "generateName" in metadata:
                metadata["name"] = metadata["generateName"] + uuid.uuid4().hex[:8]
            metadata.setdefault("uid", str(uuid.uuid4()))
            metadata.setdefault("creationTimestamp", _now())
            metadata["resourceVersion"] = str(next(_versions))
            metadata.setdefault("generation", 1)
        elif action == kmock.action.UPDATE:
            current = self.objects[key].raw
            if isinstance(request.data, list):
                if not _tests_pass(current, request.data):
                    return _status(422, "Invalid", "the JSON patch test failed")
                version = {"op": "add", "path": "/metadata/resourceVersion"}
                request.data.append({**version, "value": str(next(_versions))})
            elif isinstance(request.data, dict):
                metadata = request.data.setdefault("metadata", {})
                metadata["resourceVersion"] = str(next(_versions))
                if request.subresource is None and "spec" in request.data:
                    metadata["generation"] = current.get("metadata", {}).get("generation", 1) + 1
        elif action == kmock.action.DELETE and self.objects[key].get("metadata", {}).get(
            "finalizers"
        ):
            self.objects[key].patch({"metadata": {"resourceVersion": str(next(_versions))}})
        return await super()._handle(request)

    # kmock finds an object by scanning them all; these look it up by its key instead.

    def _stored(self, request: kmock.Request) -> Any:
        namespace, name = request.namespace, request.name
        if request.action == kmock.action.CREATE:
            metadata = request.data.get("metadata", {})
            namespace, name = namespace or metadata.get("namespace"), name or metadata.get("name")
        key = (request.resource, namespace, name)
        if key not in self.objects:
            raise kmock.KubernetesObjectNotFoundError()
        stored = self.objects[key]
        if stored.deleted and request.action == kmock.action.FETCH:
            raise kmock.KubernetesObjectNotFoundError()
        return stored

    async def _serve_fetch(self, request: kmock.Request) -> Any:
        return self._stored(request).raw

    async def _serve_create(self, request: kmock.Request) -> Any:
        return self._stored(request).raw

    async def _serve_update(self, request: kmock.Request) -> Any:
        return self._stored(request).last.raw

    async def _serve_delete(self, request: kmock.Request) -> Any:
        return self._stored(request).last.raw


def _tests_pass(current: dict[str, Any], ops: list[Any]) -> bool:
    for op in ops:
        if isinstance(op, dict) and op.get("op") == "test":
            value: Any = current
            for part in str(op["path"]).strip("/").split("/"):
                value = value.get(part) if isinstance(value, dict) else None
            if value != op.get("value"):
                return False
    return True


def _namespace(name: str) -> dict[str, Any]:
    metadata = {"name": name, "resourceVersion": "1"}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": metadata}


def _now() -> str:
    return datetime.now(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def prepare(server: kmock.KubernetesEmulator) -> None:
    """Discovery: the built-in resources, the Schedule resource with its status, and the
    cluster-scoped TenantPolicy resource."""
    server.resources.load_bundled()
    server.resources[SCHEDULES] = kmock.ResourceInfo(
        kind="Schedule",
        singular="schedule",
        namespaced=True,
        verbs={"get", "list", "watch", "create", "update", "patch", "delete"},
        subresources={"status"},
    )
    server.resources[TENANT_POLICIES] = kmock.ResourceInfo(
        kind="TenantPolicy",
        singular="tenantpolicy",
        namespaced=False,
        verbs={"get", "list", "watch", "create", "update", "patch", "delete"},
    )


async def add_peering(server: kmock.KubernetesEmulator, name: str = "tickwork") -> None:
    """kopf's cluster-wide peering resource in discovery, and the ClusterKopfPeering ``name``
    (what the chart creates for the operator's replicas)."""
    server.resources[PEERINGS] = kmock.ResourceInfo(
        kind="ClusterKopfPeering",
        singular="clusterkopfpeering",
        namespaced=False,
        verbs={"get", "list", "watch", "create", "update", "patch", "delete"},
    )
    body = {"apiVersion": "kopf.dev/v1", "kind": "ClusterKopfPeering"}
    async with server.post(f"/apis/{PEERINGS}", json={**body, "metadata": {"name": name}}) as r:
        assert r.status < 300, await r.text()


def kubeconfig(url: str) -> str:
    """A kubeconfig (YAML text) pointing at ``url``."""
    return (
        "apiVersion: v1\nkind: Config\ncurrent-context: kmock\n"
        f"clusters: [{{name: kmock, cluster: {{server: '{url}'}}}}]\n"
        "users: [{name: kmock, user: {token: kmock}}]\n"
        "contexts: [{name: kmock, context: {cluster: kmock, user: kmock}}]\n"
    )
