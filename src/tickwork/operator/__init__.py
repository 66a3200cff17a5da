"""The Kubernetes operator (``tickwork operator``): kopf handlers that sync every ``Schedule``
resource into PostgreSQL through the same desired-state sync as ``tickwork sync``, and report
each object's state back in its status. The only package that imports kopf.

Ground floor first: ``translate`` (pure: a Schedule body → a definition or an error naming the
field), ``desired`` (the index entries and the desired state of each schedule namespace,
tenant policy applied), ``tenants`` (the TenantPolicy objects in force),
``status`` (pure: the status an object should show, and the patch that gets it there),
``database`` (the operator's few database calls), ``listing`` (the complete-view barrier),
``syncer`` (the coalescing per-namespace sync queue), ``board`` (rows read back for status),
``handlers`` (kopf registration), ``webhook`` (the optional admission check), ``runner``
(kopf plus the probe server), ``config`` (settings).
"""
