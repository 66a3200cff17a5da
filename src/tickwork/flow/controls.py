"""The App's flow-control methods (``app.pause_queue``, ``app.set_limit``, ...): pause and
resume queues and schedule namespaces, and set, remove and list concurrency and rate limits,
each audited. :class:`tickwork.App` inherits them; docs/flow-control.md says what they do."""

from __future__ import annotations

from collections.abc import Callable

from tickwork import transitions
from tickwork.db import pauses as pauses_db
from tickwork.db import store
from tickwork.db.connections import Connected
from tickwork.flow import limiting, limits, pausing
from tickwork.flow.pauses import Scope
from tickwork.model import Actor


class FlowControls:
    """Pause, resume and limits, for a class with a clock and connections (the App)."""

    def pause_queue(
        self: Connected,
        queue: str,
        *,
        actor: str = "api",
        reason: str | None = None,
        request_id: str | None = None,
    ) -> transitions.Outcome:
        """Pause ``queue`` fleet-wide; audited. No claim that starts after this commits takes
        its jobs (they wait, holding back no other queue); its running jobs finish. Pausing a
        paused queue changes nothing (``changed`` is False). Persisted until resumed."""
        return _pausing(self, pausing.pause, Scope.QUEUE, queue, actor, reason, request_id)

    def resume_queue(
        self: Connected,
        queue: str,
        *,
        actor: str = "api",
        reason: str | None = None,
        request_id: str | None = None,
    ) -> transitions.Outcome:
        """Resume ``queue``; audited; its workers are woken at commit."""
        return _pausing(self, pausing.resume, Scope.QUEUE, queue, actor, reason, request_id)

    def pause_namespace(
        self: Connected,
        namespace: str,
        *,
        actor: str = "api",
        reason: str | None = None,
        request_id: str | None = None,
    ) -> transitions.Outcome:
        """Pause the schedule namespace ``namespace``; audited. Its schedules fire nothing
        while paused, as if suspended (their definitions are not changed); jobs they created
        before still run (pause their queue to hold those). InvalidInput for a namespace that
        has never been synced."""
        return _pausing(self, pausing.pause, Scope.NAMESPACE, namespace, actor, reason, request_id)

    def resume_namespace(
        self: Connected,
        namespace: str,
        *,
        actor: str = "api",
        reason: str | None = None,
        request_id: str | None = None,
    ) -> transitions.Outcome:
        """Resume the schedule namespace; audited. The occurrences its schedules missed while
        paused are decided by each one's misfire policy, as after a suspend."""
        return _pausing(self, pausing.resume, Scope.NAMESPACE, namespace, actor, reason, request_id)

    def list_pauses(self: Connected) -> list[pauses_db.PauseRow]:
        """The paused queues and schedule namespaces."""
        with self.connection() as conn:
            return store.run(conn, pauses_db.list_pauses())

    def set_limit(
        self: Connected,
        scope: str,
        name: str,
        *,
        max_running: int | None = None,
        rate: str | limits.Rate | None = None,
        rate_key: str | None = None,
        weight: int | None = None,
        actor: str = "api",
        reason: str | None = None,
        request_id: str | None = None,
    ) -> transitions.Outcome:
        """Limit a ``"queue"``, ``"kind"`` or schedule ``"namespace"`` fleet-wide; audited.
        ``max_running``: at most that many of its jobs run at once; ``rate``: at most so many
        starts per period (``"100/min"``, ``"10/s"``, ``"50/10s"``), per value of the payload
        field ``rate_key`` when given; ``weight`` (a namespace): its share in fair claiming.
        Replaces the group's rule; docs/flow-control.md says how rules combine."""
        rule = limits.Rule(
            limits.scope_of(scope),
            name,
            max_running,
            limits.Rate.parse(rate) if isinstance(rate, str) else rate,
            rate_key,
            weight,
        )
        who = Actor(actor, reason, request_id)
        with self.connection() as conn:
            return limiting.set_rule(conn, rule, who, self.clock.now())

    def remove_limit(
        self: Connected,
        scope: str,
        name: str,
        *,
        actor: str = "api",
        reason: str | None = None,
        request_id: str | None = None,
    ) -> transitions.Outcome:
        """Remove the rule of a queue, kind or schedule namespace; audited."""
        which = limits.scope_of(scope)
        who = Actor(actor, reason, request_id)
        with self.connection() as conn:
            return limiting.remove_rule(conn, which, name, who, self.clock.now())

    def list_limits(self: Connected, scope: str | None = None) -> list[limiting.StoredRule]:
        """The rules, with their groups' running jobs and their rates' recent starts."""
        which = limits.scope_of(scope) if scope is not None else None
        with self.connection() as conn:
            return limiting.list_rules(conn, which, self.clock.now())


def _pausing(
    app: Connected,
    act: Callable[..., transitions.Outcome],
    scope: Scope,
    name: str,
    actor: str,
    reason: str | None,
    request_id: str | None,
) -> transitions.Outcome:
    who = Actor(actor, reason, request_id)
    with app.connection() as conn:
        return act(conn, scope, name, who, app.clock.now())
