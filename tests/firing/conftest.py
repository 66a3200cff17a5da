"""The firing tests' operator fixtures (``test_firing_isolation.py`` shows a firing error on the
Schedule's status) live in ``tests/operator/harness.py``, shared with ``tests/operator/``."""

from tests.operator.harness import cluster, kmock_options, start_operator

__all__ = ["cluster", "kmock_options", "start_operator"]
