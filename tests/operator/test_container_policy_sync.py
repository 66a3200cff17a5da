"""A TenantPolicy's ``containers`` section is enforced where the desired state is made, not only
by the webhook: the real operator (kmock stands in for the API server; no webhook runs) and a
real database. A container Schedule with an image outside the allowed prefixes, or a privileged
container, is refused (``PolicyViolation``, the field named) and never synced; a policy added
later that refuses a synced one disables its definition."""

from __future__ import annotations

from typing import Any

from tests.operator.harness import Cluster, OperatorFactory, row
from tests.operator.test_tenancy import refused
from tests.support.helpers import wait_until

PREFIXES = {"allowedImagePrefixes": ["registry.example.com/team-a/"]}
POLICY = {"namespaces": ["team-a"], "containers": PREFIXES}
POD = "spec.jobTemplate.spec.template.spec"


def container(image: str, **fields: Any) -> dict[str, Any]:
    pod = {"restartPolicy": "Never", "containers": [{"name": "main", "image": image, **fields}]}
    return {"schedule": "0 3 * * *", "jobTemplate": {"spec": {"template": {"spec": pod}}}}


async def test_container_rules_refuse_at_sync_and_a_new_rule_disables(
    cluster: Cluster, start_operator: OperatorFactory, database_url: str
) -> None:
    await cluster.create_policy("team-a", POLICY)
    await start_operator()
    await cluster.create("good", container("registry.example.com/team-a/app:1"), "team-a")
    await cluster.create("miner", container("evil.io/miner"), "team-a")
    root = container("registry.example.com/team-a/app:1", securityContext={"privileged": True})
    await cluster.create("root", root, "team-a")
    await cluster.wait_ready("good", "Synced", namespace="team-a")
    assert (row(database_url, "good", "team-a") or {}).get("enabled") is True

    message = await refused(cluster, "team-a", "miner", "PolicyViolation")
    assert message == (
        f"{POD}.containers[0].image: image 'evil.io/miner' is not allowed for namespace team-a "
        "by TenantPolicy 'team-a' (allowed: images under registry.example.com/team-a/)"
    )
    message = await refused(cluster, "team-a", "root", "PolicyViolation")
    assert message.startswith(f"{POD}.containers[0].securityContext.privileged: ")
    assert row(database_url, "miner", "team-a") is None
    assert row(database_url, "root", "team-a") is None

    # A second policy allows only the batch-runner service account: the synced one (running as
    # the default account) is refused now, and its definition disabled.
    runner = {"allowedServiceAccounts": ["batch-runner"]}
    accounts = {"namespaces": ["team-*"], "containers": runner}
    await cluster.create_policy("accounts", accounts)
    message = await refused(cluster, "team-a", "good", "PolicyViolation")
    assert message.startswith(f"{POD}.serviceAccountName: service account 'default' (unset) ")
    await wait_until(
        lambda: (row(database_url, "good", "team-a") or {}).get("enabled") is False,
        what="the refused container Schedule's definition disabled",
    )
