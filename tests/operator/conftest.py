"""The operator tests' fixtures live in ``tests/operator/harness.py`` (shared with
``tests/firing/``); the webhook's certificate is made here."""

import subprocess
from pathlib import Path

import pytest

from tests.operator.harness import cluster, kmock_options, start_operator

__all__ = ["cluster", "kmock_options", "start_operator"]


@pytest.fixture
def certificate(tmp_path: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1, made by openssl."""
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"),
            *("-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1"),
            *("-addext", "subjectAltName=IP:127.0.0.1"),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key
