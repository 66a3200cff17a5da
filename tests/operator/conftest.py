"""The operator tests' fixtures live in ``tests/operator/harness.py`` (shared with
``tests/reliability/``)."""

from tests.operator.harness import cluster, kmock_options, start_operator

__all__ = ["cluster", "kmock_options", "start_operator"]
