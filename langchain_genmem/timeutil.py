"""Datetimes as float epochs, the form they take in store metadata.

Naive datetimes are simulation time (or local wall time) and are stored as if they were UTC,
so they come back exactly as given. Aware datetimes are converted to UTC and come back naive.
"""

from __future__ import annotations

import calendar
from datetime import datetime, timedelta, timezone

_EPOCH = datetime(1970, 1, 1)


def to_epoch(value: datetime) -> float:
    """Seconds since 1970-01-01 of a datetime (naive taken as UTC).

    Args:
        value: the datetime.

    Returns:
        The epoch seconds.
    """
    if value.tzinfo is not None:
        value = value.astimezone(timezone.utc).replace(tzinfo=None)
    return calendar.timegm(value.timetuple()) + value.microsecond / 1e6


def from_epoch(seconds: float) -> datetime:
    """The naive datetime of epoch seconds, to the microsecond.

    Args:
        seconds: epoch seconds.

    Returns:
        The naive datetime.
    """
    return _EPOCH + timedelta(microseconds=round(seconds * 1e6))


def naive(value: datetime) -> datetime:
    """A datetime as the store gives it back (aware ones converted to naive UTC).

    Args:
        value: the datetime.

    Returns:
        The naive datetime.
    """
    return from_epoch(to_epoch(value))


class SimulationClock:
    """A settable clock for simulations: pass it as ``MemoryStream(..., clock=clock)``.

    Example:
        .. code-block:: python

            clock = SimulationClock(datetime(2023, 2, 13, 7, 0))
            stream = MemoryStream("Isabella Rodriguez", clock=clock)
            clock.advance(hours=2)          # or: clock.now = datetime(2023, 2, 13, 21, 0)

    Attributes:
        now: the current simulation time.
    """

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        """The current simulation time."""
        return self.now

    def advance(self, **delta: float) -> datetime:
        """Move the clock forward by a ``timedelta(**delta)``.

        Args:
            **delta: ``days``, ``hours``, ``minutes``, ``seconds``...

        Returns:
            The new time.
        """
        self.now = self.now + timedelta(**delta)
        return self.now
