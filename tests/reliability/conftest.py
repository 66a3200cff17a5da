"""Reliability tests: each tries to break one guarantee from outside, as a user or a fault
would, on a real PostgreSQL, with worker processes and the real operator against kmock
(kmock stands in for the Kubernetes API server, which cannot run on these machines)."""

from tests.operator.harness import cluster, kmock_options, start_operator

__all__ = ["cluster", "kmock_options", "start_operator"]
