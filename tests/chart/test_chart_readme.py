"""The README's ``helm install`` line, as written, renders with a real ``helm`` (as
``helm template``): the one required value is there, and the image is the one the line
before it builds and pushes."""

from __future__ import annotations

import shlex
import subprocess

import yaml

from tests.chart import chart_render

README = chart_render.ROOT / "README.md"


def readme_install() -> list[str]:
    text = README.read_text().split("## On Kubernetes\n", 1)[1].split("\n## ", 1)[0]
    block = text.split("```sh\n", 1)[1].split("```", 1)[0].replace("\\\n", " ")
    (line,) = [line for line in block.splitlines() if line.startswith("helm install")]
    return shlex.split(line)


def test_the_readme_install_line_renders(helm: chart_render.Helm) -> None:
    argv = readme_install()
    assert argv[:4] == ["helm", "install", "tickwork", "./helm/tickwork"]
    result = subprocess.run(
        [str(helm.binary), "template", *argv[2:]],
        cwd=chart_render.ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    images = {
        container["image"]
        for doc in yaml.safe_load_all(result.stdout)
        if doc and doc.get("kind") in ("Deployment", "Job")
        for container in doc["spec"]["template"]["spec"]["containers"]
    }
    app_version = yaml.safe_load((chart_render.CHART / "Chart.yaml").read_text())["appVersion"]
    assert images == {f"registry.example.com/tickwork:{app_version}"}
