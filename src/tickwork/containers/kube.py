"""The worker's small asyncio client of the Kubernetes API, for batch/v1 Jobs and their pods.

It sends exactly the requests container jobs need — create, get, list (in pages), watch and
delete of ``batch/v1`` Jobs in one namespace, and list of the pods of a finished Job (for its
container's termination message) — and nothing else, so the worker's Role grants exactly those
verbs. Where to connect and how to authenticate comes from the ``kubernetes`` package's
loaders (the pod's service account in a cluster, else the kubeconfig: ``$KUBECONFIG`` or
``~/.kube/config``); the requests go through aiohttp on the worker's loop, so a watch waiting
for a Job to finish holds no thread. A session (:meth:`Client.session`) is opened per job
attempt and closed with it.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any, cast
from urllib.parse import quote

import aiohttp
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config

from tickwork.errors import ConfigurationError

REQUEST_SECONDS = 30.0
"""Bound on one request other than a watch."""
WATCH_MARGIN_SECONDS = 15.0
"""A watch asks the server to end it after its ``timeoutSeconds``; the client gives up this
much later (a server or proxy that never ends it)."""

PAGE = 500
"""Most Jobs one list request returns; a longer list is read in pages."""

Body = dict[str, Any]


class ApiError(Exception):
    """The API server refused a request (``status``, its ``reason`` and ``message``)."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        self.status = status
        self.reason = reason
        self.message = message
        super().__init__(f"{status} {reason}: {message}")


class WatchExpired(Exception):
    """The watch's resourceVersion is too old (410 Gone): read the object again."""


def load_configuration() -> k8s_client.Configuration:
    """The pod's service account when running in a cluster, else the kubeconfig; a
    ConfigurationError naming both when neither is there."""
    configuration = k8s_client.Configuration()
    try:
        k8s_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    except k8s_config.ConfigException as in_cluster:
        try:
            k8s_config.load_kube_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        except Exception as kubeconfig:
            raise ConfigurationError(
                "--container-jobs: no Kubernetes API to talk to: not in a cluster "
                f"({in_cluster}) and no usable kubeconfig ({kubeconfig})"
            ) from None
    return configuration


class Client:
    """Where the API server is and how to talk to it (no connection is opened here)."""

    def __init__(self, configuration: k8s_client.Configuration) -> None:
        self._configuration = configuration
        self.host = str(configuration.host).rstrip("/")
        self._ssl: ssl.SSLContext | bool = True
        if self.host.startswith("https"):
            if configuration.verify_ssl:
                context = ssl.create_default_context(cafile=configuration.ssl_ca_cert or None)
            else:
                context = ssl.create_default_context()
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
            if configuration.cert_file:
                context.load_cert_chain(configuration.cert_file, configuration.key_file)
            self._ssl = context

    def _headers(self) -> dict[str, str]:
        configuration = self._configuration
        if configuration.refresh_api_key_hook is not None:
            configuration.refresh_api_key_hook(configuration)  # a rotated service-account token
        headers = {"Accept": "application/json"}
        for setting in configuration.auth_settings().values():  # the bearer token, if any
            auth = cast(dict[str, Any], setting)
            if auth.get("in") == "header" and auth.get("value"):
                headers[str(auth["key"]).title()] = str(auth["value"])
        return headers

    @asynccontextmanager
    async def session(self) -> AsyncIterator[Jobs]:
        connector = aiohttp.TCPConnector(ssl=self._ssl)
        auth = None
        if self._configuration.username:
            auth = aiohttp.BasicAuth(
                self._configuration.username, self._configuration.password or ""
            )
        async with aiohttp.ClientSession(connector=connector, auth=auth) as http:
            yield Jobs(self, http)


class Jobs:
    """batch/v1 Jobs over one HTTP session."""

    def __init__(self, client: Client, http: aiohttp.ClientSession) -> None:
        self._client = client
        self._http = http

    def _url(self, namespace: str, name: str | None = None) -> str:
        path = f"/apis/batch/v1/namespaces/{quote(namespace, safe='')}/jobs"
        return self._client.host + path + (f"/{quote(name, safe='')}" if name else "")

    async def _request(
        self,
        method: str,
        url: str,
        *,
        params: Mapping[str, str] | None = None,
        body: Body | None = None,
    ) -> Body:
        timeout = aiohttp.ClientTimeout(total=REQUEST_SECONDS)
        async with self._http.request(
            method,
            url,
            params=params,
            json=body,
            headers=self._client._headers(),
            timeout=timeout,
        ) as response:
            text = await response.text()
            if response.status >= 400:
                raise _error(response.status, text)
            answer = json.loads(text) if text else {}
            return answer if isinstance(answer, dict) else {}

    async def _list(self, url: str, selector: str) -> list[Body]:
        found: list[Body] = []
        params = {"labelSelector": selector, "limit": str(PAGE)}
        while True:
            answer = await self._request("GET", url, params=params)
            found += [item for item in answer.get("items") or [] if isinstance(item, dict)]
            metadata = answer.get("metadata")
            token = metadata.get("continue") if isinstance(metadata, dict) else None
            if not token:
                return found
            params = {**params, "continue": str(token)}

    async def pods(self, namespace: str, selector: str) -> list[Body]:
        """The pods in ``namespace`` matching the label ``selector`` (a Job's: read for the
        termination message of its container, :mod:`tickwork.containers.termination`)."""
        path = f"/api/v1/namespaces/{quote(namespace, safe='')}/pods"
        return await self._list(self._client.host + path, selector)

    async def list(self, namespace: str, selector: str) -> list[Body]:
        """The Jobs in ``namespace`` matching the label ``selector``, read :data:`PAGE` at a
        time (each page's ``continue`` token asks for the next)."""
        return await self._list(self._url(namespace), selector)

    async def get(self, namespace: str, name: str) -> Body | None:
        try:
            return await self._request("GET", self._url(namespace, name))
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    async def create(self, namespace: str, body: Body) -> Body:
        """The created Job; ApiError 409 (AlreadyExists) when the name is taken."""
        return await self._request("POST", self._url(namespace), body=body)

    async def delete(self, namespace: str, name: str) -> bool:
        """Delete the Job, its pods by background propagation; False when it was gone."""
        params = {"propagationPolicy": "Background"}
        try:
            await self._request("DELETE", self._url(namespace, name), params=params)
        except ApiError as exc:
            if exc.status == 404:
                return False
            raise
        return True

    async def watch(
        self, namespace: str, name: str, resource_version: str, seconds: float
    ) -> AsyncIterator[tuple[str, Body]]:
        """Events ``(type, object)`` of the Job ``name`` after ``resource_version``, until the
        server ends the watch (after about ``seconds``). WatchExpired when the version is too
        old; the caller reads the Job again and watches from there."""
        params = {
            "watch": "true",
            "fieldSelector": f"metadata.name={name}",
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(max(1, int(seconds))),
        }
        if resource_version:
            params["resourceVersion"] = resource_version
        timeout = aiohttp.ClientTimeout(total=seconds + WATCH_MARGIN_SECONDS)
        async with self._http.get(
            self._url(namespace), params=params, headers=self._client._headers(), timeout=timeout
        ) as response:
            if response.status == 410:
                raise WatchExpired(await response.text())
            if response.status >= 400:
                raise _error(response.status, await response.text())
            pending = b""
            async for chunk in response.content.iter_any():
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    if not line.strip():
                        continue
                    event = json.loads(line)
                    kind, obj = str(event.get("type", "")), event.get("object") or {}
                    if kind == "ERROR":
                        if obj.get("code") == 410:
                            raise WatchExpired(str(obj.get("message", "")))
                        raise _error(int(obj.get("code") or 500), json.dumps(obj))
                    yield kind, obj


def _error(status: int, text: str) -> ApiError:
    try:
        body = json.loads(text)
    except ValueError:
        body = None
    if isinstance(body, dict):
        return ApiError(status, str(body.get("reason", "")), str(body.get("message", text)))
    return ApiError(status, "", text.strip()[:300])
