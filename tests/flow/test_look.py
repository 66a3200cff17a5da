"""When a worker locks the flow rules before its claim, and how long it idles after a claim
that found nothing (driven by a hand-moved monotonic clock)."""

from __future__ import annotations

from tickwork.flow.look import CONTENDED_SECONDS, LOOK_SECONDS, RuleLook


class Monotonic:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_worker_locks_the_rules_every_claim_while_they_apply_else_every_look_interval() -> None:
    clock = Monotonic()
    look = RuleLook(clock)
    assert look.due(), "a new worker looks first"
    look.looked(0)
    assert not look.due()
    clock.now += LOOK_SECONDS
    assert look.due()
    look.looked(2)
    assert look.due(), "rules apply: every claim locks them"


def test_a_spent_rate_shortens_the_idle_wait_to_when_it_has_room() -> None:
    clock = Monotonic()
    look = RuleLook(clock)
    assert look.idle_seconds(2.0) == 2.0
    look.looked(1, room_in_seconds=0.3)
    assert abs(look.idle_seconds(2.0) - 0.3) < 1e-9
    clock.now += 0.2
    assert abs(look.idle_seconds(2.0) - 0.1) < 1e-9
    clock.now += 5
    assert look.idle_seconds(2.0) == 0.001, "overdue: claim again at once"
    look.looked(1, room_in_seconds=None)
    assert look.idle_seconds(2.0) == 2.0
    look.looked(1, room_in_seconds=30)
    assert look.idle_seconds(2.0) == 2.0, "never longer than the poll"


def test_a_rule_another_claimer_held_means_claim_again_in_a_moment() -> None:
    clock = Monotonic()
    look = RuleLook(clock)
    look.looked(2, room_in_seconds=None, contended=1)
    assert abs(look.idle_seconds(2.0) - CONTENDED_SECONDS) < 1e-9
    look.looked(2, room_in_seconds=None, contended=0)
    assert look.idle_seconds(2.0) == 2.0
