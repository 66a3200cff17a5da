"""``tickwork sync NAMESPACE -f DIR --policy FILE``: the same TenantPolicy documents the operator
watches, applied to a file deployment (the real command, a real database). A refused Schedule
fails the whole sync with one line naming the Schedule, the field and the rule, and writes
nothing."""

from __future__ import annotations

from pathlib import Path

import psycopg

from tests.cli.test_cli import ok, one_line_error, tickwork_cmd
from tests.cli.test_schedules_cli import manifest, write

POLICY = """\
apiVersion: tickwork.io/v1
kind: TenantPolicy
metadata: {name: team-a}
spec:
  namespaces: [team-a]
  scheduleNamespaces: [reports-a]
  queues: [team-a-*]
  kinds: [team-a.*]
  maxPriority: 10
  concurrencyKeyPrefix: "team-a:"
"""
GOOD = manifest("sweep", "every: 1m\njob: {kind: team-a.sweep, queue: team-a-batch, priority: 10}")


def names(url: str, namespace: str) -> list[str]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT name FROM tickwork.schedules WHERE namespace = %s ORDER BY name", (namespace,)
        ).fetchall()
    return [name for (name,) in rows]


def sync(url: str, namespace: str, directory: Path, *args: str) -> str:
    return ok(tickwork_cmd("sync", namespace, "-f", str(directory), *args, database_url=url))


def test_sync_applies_the_tenant_policy_naming_field_and_rule(
    database_url: str, tmp_path: Path
) -> None:
    policy = write(tmp_path, {"policy.yaml": POLICY}) / "policy.yaml"
    good = write(tmp_path / "good", {"sweep.yaml": GOOD})
    assert "1 created" in sync(database_url, "team-a", good, f"--policy={policy}")
    assert "1 created" in sync(
        database_url, "reports-a", good, "--policy", str(policy), "--tenant=team-a"
    )

    bad = write(
        tmp_path / "bad",
        {
            "a.yaml": GOOD,
            "b.yaml": manifest("payout", "every: 1m\njob: {kind: team-a.x, queue: payments}"),
        },
    )
    result = tickwork_cmd(
        "sync", "team-a", "-f", str(bad), "--policy", str(policy), database_url=database_url
    )
    assert one_line_error(result, 1) == (
        "tickwork: error: Schedule 'payout': spec.job.queue: queue 'payments' is not allowed "
        "for namespace team-a by TenantPolicy 'team-a' (allowed: team-a-*)"
    )
    result = tickwork_cmd(
        "sync", "team-b", "-f", str(good), "--policy", str(policy), "--tenant=team-a",
        database_url=database_url,
    )  # fmt: skip
    line = one_line_error(result, 1)
    assert line.startswith(
        "tickwork: error: Schedule 'sweep': spec.scheduleNamespace: schedule namespace 'team-b' "
        "is not allowed for namespace team-a by TenantPolicy 'team-a' (allowed: team-a, reports-a)"
    ), line
    assert names(database_url, "team-a") == ["sweep"] and names(database_url, "team-b") == []

    broken = write(
        tmp_path, {"broken.yaml": POLICY.replace("maxPriority: 10", "maxPriority: lots")}
    )
    result = tickwork_cmd(
        "sync", "team-a", "-f", str(good), "--policy", str(broken / "broken.yaml"),
        database_url=database_url,
    )  # fmt: skip
    assert one_line_error(result, 1) == (
        f"tickwork: error: {broken / 'broken.yaml'}: document 1: TenantPolicy 'team-a': "
        "spec.maxPriority: must be an integer from 0 to 32767"
    )


CONTAINER_POLICY = """\
apiVersion: tickwork.io/v1
kind: TenantPolicy
metadata: {name: team-a}
spec:
  namespaces: [team-a]
  containers:
    allowedImagePrefixes: [registry.example.com/team-a/]
"""


def container(name: str, image: str) -> str:
    pod = f"{{restartPolicy: Never, containers: [{{name: main, image: '{image}'}}]}}"
    return manifest(
        name, f'schedule: "0 3 * * *"\njobTemplate: {{spec: {{template: {{spec: {pod}}}}}}}'
    )


def test_sync_applies_the_containers_section_to_container_schedules(
    database_url: str, tmp_path: Path
) -> None:
    """The same rules as the operator: an image outside the allowed prefixes fails the sync in
    one line naming the container's field; one inside syncs."""
    policy = write(tmp_path, {"policy.yaml": CONTAINER_POLICY}) / "policy.yaml"
    good = write(tmp_path / "good", {"app.yaml": container("app", "registry.example.com/team-a/x")})
    assert "1 created" in sync(database_url, "team-a", good, f"--policy={policy}")
    bad = write(tmp_path / "bad", {"miner.yaml": container("miner", "busybox")})
    result = tickwork_cmd(
        "sync", "team-a", "-f", str(bad), "--policy", str(policy), database_url=database_url
    )
    assert one_line_error(result, 1) == (
        "tickwork: error: Schedule 'miner': spec.jobTemplate.spec.template.spec.containers[0]"
        ".image: image 'busybox' is not allowed for namespace team-a by TenantPolicy 'team-a' "
        "(allowed: images under registry.example.com/team-a/)"
    )
    assert names(database_url, "team-a") == ["app"]
