"""The operator tests' fixtures live in ``tests/operator/harness.py`` (shared with
``tests/firing/``)."""

from tests.operator.harness import cluster, kmock_options, start_operator

__all__ = ["cluster", "kmock_options", "start_operator"]
