"""The operator's own requests to the Kubernetes API (besides kopf's): how it logs in, and the
status patches of the status loop (:mod:`tickwork.operator.reporter`).

It logs in the way kubectl does (the in-cluster service account, else ``$KUBECONFIG``) through
the official client's configuration; status patches go through one aiohttp session with at
most ``concurrency`` requests in flight, so thousands of Schedules whose status changed at once
are patched at a bounded rate instead of all at the same moment.
"""

from __future__ import annotations

import asyncio
import os
import ssl
import time
from typing import Any

import aiohttp
import kubernetes

from tickwork.errors import ConfigurationError
from tickwork.operator.config import GROUP, PLURAL, VERSION

REQUEST_SECONDS = 30.0
"""A status patch the API server has not answered within this long fails (tried next round)."""
AUTH_SECONDS = 10.0
"""The credentials are read again (a rotated token, a refreshed one) at most this often."""


def configuration() -> kubernetes.client.Configuration:
    """The in-cluster service account, else the kubeconfig (``$KUBECONFIG``)."""
    config = kubernetes.client.Configuration()
    try:
        kubernetes.config.load_incluster_config(  # type: ignore[no-untyped-call]
            client_configuration=config
        )
    except kubernetes.config.ConfigException:
        kubernetes.config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=os.environ.get("KUBECONFIG"), client_configuration=config
        )
    return config


def check_login() -> None:
    """Raise one ConfigurationError when there is no Kubernetes API to log in to (neither a
    service account nor a usable kubeconfig): checked before kopf starts, whose own failure
    is a hundred lines of tracebacks."""
    try:
        configuration()
    except Exception as exc:
        raise ConfigurationError(
            "no Kubernetes API to talk to: not in a cluster (no service account) and no usable "
            f"kubeconfig ({exc}); set KUBECONFIG, or run in a pod"
        ) from None


def api_client() -> kubernetes.client.ApiClient:
    return kubernetes.client.ApiClient(configuration())


class StatusPatchFailed(Exception):
    """The API server refused a status patch, or could not be reached."""


class StatusWriter:
    """Merge-patches ``status`` of Schedule objects, ``concurrency`` requests at a time."""

    def __init__(self, concurrency: int) -> None:
        self.concurrency = concurrency
        self._config: kubernetes.client.Configuration | None = None
        self._session: aiohttp.ClientSession | None = None
        self._headers: dict[str, str] = {}
        self._headers_at = -AUTH_SECONDS

    def _open(self) -> tuple[kubernetes.client.Configuration, aiohttp.ClientSession]:
        if self._config is None or self._session is None:
            config = configuration()
            connector = aiohttp.TCPConnector(limit=self.concurrency, ssl=_tls(config))
            timeout = aiohttp.ClientTimeout(total=REQUEST_SECONDS)
            self._config = config
            self._session = aiohttp.ClientSession(connector=connector, timeout=timeout)
        return self._config, self._session

    async def patch(
        self, namespace: str, name: str, status: dict[str, Any]
    ) -> dict[str, Any] | None:
        """The object after the patch, or None when it is gone. Raises StatusPatchFailed."""
        config, session = self._open()
        path = f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/{PLURAL}/{name}/status"
        if time.monotonic() - self._headers_at >= AUTH_SECONDS:
            self._headers = {"Content-Type": "application/merge-patch+json", **_auth(config)}
            self._headers_at = time.monotonic()
        headers = self._headers
        try:
            async with session.patch(
                config.host.rstrip("/") + path, json={"status": status}, headers=headers
            ) as response:
                if response.status == 404:
                    return None
                if response.status >= 300:
                    text = " ".join((await response.text()).split())[:300]
                    raise StatusPatchFailed(f"HTTP {response.status}: {text}")
                body: dict[str, Any] = await response.json()
                return body
        except (aiohttp.ClientError, TimeoutError) as error:
            raise StatusPatchFailed(f"{type(error).__name__}: {error}") from error

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
            self._config = None
            self._headers_at = -AUTH_SECONDS
            await asyncio.sleep(0)  # let the connector close its sockets


def _auth(config: kubernetes.client.Configuration) -> dict[str, str]:
    """The headers that authenticate a request (a refreshed token when it rotates)."""
    settings: dict[str, Any] = dict(config.auth_settings())
    headers = {
        str(setting["key"]): str(setting["value"])
        for setting in settings.values()
        if setting.get("in") == "header" and setting.get("value")
    }
    if config.username or config.password:
        headers["Authorization"] = str(config.get_basic_auth_token())
    return headers


def _tls(config: kubernetes.client.Configuration) -> ssl.SSLContext | bool:
    if not config.host.startswith("https:"):
        return False
    if not config.verify_ssl:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    else:
        context = ssl.create_default_context(cafile=config.ssl_ca_cert)
    if config.cert_file:
        context.load_cert_chain(config.cert_file, config.key_file)
    return context
