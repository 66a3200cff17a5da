"""Background services. Each duty shared by the fleet is one module shaped the same way
(:mod:`.service`: a config, ``run_once(conn, now)`` that tests call with a pinned ``now``, an
interval), listed in :mod:`.duties`; the worker runs them on a timer after claiming the duty's
row in ``tickwork.duties`` with SKIP LOCKED, so no leader is needed. Schedule firing has a
loop of its own (:mod:`.firing`), which sleeps until the next due run."""
