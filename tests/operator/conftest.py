"""The operator tests' fixtures live in ``tests/operator_harness.py`` (shared with
``tests/reliability/``)."""

from operator_harness import cluster, kmock_options, start_operator

__all__ = ["cluster", "kmock_options", "start_operator"]
