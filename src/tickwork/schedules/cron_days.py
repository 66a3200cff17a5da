"""Which days of one month the two day fields of a cron expression match.

Besides day numbers and weekdays, the fields take the specials of Quartz (and croniter),
each a list item of its own, without a range or a step:

* day-of-month ``L``: the last day of the month; ``L-n`` (``n`` at most 30): ``n`` days
  before it, in months that long; ``nW``: the weekday (Monday to Friday) nearest day ``n``,
  within the month, in months that have a day ``n`` (a Saturday 1st moves to Monday the 3rd,
  a Sunday 31st to Friday the 29th); ``LW``: the last weekday of the month;
* day-of-week ``nL`` (``5L``, ``FRIL``): the last weekday ``n`` of the month; ``n#k``
  (``1#1``, ``MON#1``, ``k`` 1-5): its ``k``-th, none in a month without one.

A field's items add up: ``1,L`` is the first and the last day, ``MON#1,FRI#3,SAT`` the first
Monday, the third Friday and every Saturday. The two fields combine as cron's do: when both
are restricted a day matching either fires, otherwise it must match the restricted one.

A month is given by its length and the weekday of its 1st, so that the parser can ask
whether any month ever matches. Days are bit masks (bit ``d`` is day ``d``), like the
parser's fields.
"""

from __future__ import annotations

from dataclasses import dataclass

ALL_DATES = (1 << 32) - 2
"""Bits 1-31: a day-of-month field written ``*``."""

ALL_WEEKDAYS = 0x7F
"""Bits 0-6, Sunday first: a day-of-week field written ``*``."""

_SATURDAY, _SUNDAY = 6, 0
_FIVE_WEEKS = sum(1 << (7 * week) for week in range(5))  # one weekly pattern repeated to 35 days


@dataclass(frozen=True)
class Days:
    """The day fields of one expression; ``matching`` evaluates them for a month."""

    dates: int  # day-of-month bits, 1-31
    weekdays: int  # day-of-week bits, 0 (Sunday) to 6
    either: bool  # both fields restricted: a day matches either (Vixie cron)
    before_last: frozenset[int] = frozenset()  # ``L-n`` as n (``L`` is 0)
    nearest: frozenset[int] = frozenset()  # ``nW`` as n
    last_weekday: bool = False  # ``LW``
    nth: frozenset[tuple[int, int]] = frozenset()  # ``n#k`` as (n, k)
    last_of: int = 0  # ``nL``: day-of-week bits

    @property
    def special(self) -> bool:
        """Whether any item is a special (``L``, ``W``, ``#``)."""
        return bool(
            self.before_last or self.nearest or self.last_weekday or self.nth or self.last_of
        )

    def matching(self, length: int, first: int) -> int:
        """The days matched in a month of ``length`` days whose 1st is weekday ``first``.

        ``first`` counts from Sunday (0), as cron does.
        """
        month = (1 << (length + 1)) - 2
        by_date = self.dates & month
        for n in self.before_last:
            if n < length:
                by_date |= 1 << (length - n)
        for n in self.nearest:
            if n <= length:
                by_date |= 1 << _nearest_weekday(n, length, first)
        if self.last_weekday:
            by_date |= 1 << _nearest_weekday(length, length, first)
        rotated = ((self.weekdays >> first) | (self.weekdays << (7 - first))) & ALL_WEEKDAYS
        by_weekday = (rotated * _FIVE_WEEKS) << 1 & month
        for weekday, k in self.nth:
            day = 1 + (weekday - first) % 7 + 7 * (k - 1)
            if day <= length:
                by_weekday |= 1 << day
        if self.last_of:
            last = (first + length - 1) % 7
            for weekday in range(7):
                if self.last_of >> weekday & 1:
                    by_weekday |= 1 << (length - (last - weekday) % 7)
        return by_date | by_weekday if self.either else by_date & by_weekday


def _nearest_weekday(day: int, length: int, first: int) -> int:
    """The weekday nearest ``day`` without leaving the month (Quartz's ``W``)."""
    weekday = (first + day - 1) % 7
    if weekday == _SATURDAY:
        return day - 1 if day > 1 else day + 2
    if weekday == _SUNDAY:
        return day + 1 if day < length else day - 2
    return day
