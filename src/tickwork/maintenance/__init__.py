"""Background duties shared by the fleet. Each module holds one duty: a ``run_once`` that
tests call directly with a pinned ``now``; the worker runs them on a timer after claiming
the duty's row in ``tickwork.duties`` with SKIP LOCKED, so no leader is needed."""
