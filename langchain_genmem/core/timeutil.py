"""Datetimes as float epochs, the form they take in store metadata.

Naive datetimes are simulation time (or local wall time) and are stored as if they were UTC,
so they come back exactly as given. Aware datetimes are converted to UTC and come back naive.
"""

from __future__ import annotations

import calendar
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from langchain_genmem.core.errors import InteropError, ValidationError

_EPOCH = datetime(1970, 1, 1)
# How the original simulation writes times: nodes.json, and scratch.json's curr_time.
NODE_TIME_FORMAT = "%Y-%m-%d %H:%M:%S"
SCRATCH_TIME_FORMAT = "%B %d, %Y, %H:%M:%S"


def to_epoch(value: datetime) -> float:
    """Seconds since 1970-01-01 of a datetime (naive taken as UTC).

    Args:
        value: the datetime.

    Returns:
        The epoch seconds.
    """
    offset = value.utcoffset()  # not astimezone: UTC may fall outside the calendar
    local = value.replace(tzinfo=None)
    seconds = calendar.timegm(local.timetuple()) + local.microsecond / 1e6
    return seconds if offset is None else seconds - offset.total_seconds()


def from_epoch(seconds: float) -> datetime:
    """The naive datetime of epoch seconds, to the microsecond.

    Args:
        seconds: epoch seconds.

    Returns:
        The naive datetime.
    """
    return _EPOCH + timedelta(microseconds=round(seconds * 1e6))


def naive(value: datetime, field: str | None = None) -> datetime:
    """A datetime as the store gives it back (aware ones converted to naive UTC).

    Args:
        value: the datetime.
        field: the input it came from, named in the error.

    Returns:
        The naive datetime.

    Raises:
        ValidationError: in UTC it falls outside Python's calendar (years 1 to 9999), e.g.
            ``9999-12-31T23:59:59-23:59``.
    """
    try:
        return from_epoch(to_epoch(value))
    except OverflowError:
        where = f"{field}: " if field else ""
        msg = (f"{where}{value.isoformat()} is outside the calendar in UTC (years 1 to "
               f"9999)")
        raise ValidationError(msg, field=field) from None


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


@dataclass(frozen=True)
class FixedClock:
    """A clock that always gives the same (simulation) time.

    Attributes:
        now: the time it gives.
    """

    now: datetime

    def __call__(self) -> datetime:
        """The fixed time."""
        return self.now


def scratch_time(values: Mapping[str, Any], *, path: str | None = None) -> datetime | None:
    """The ``curr_time`` of scratch values (``"February 13, 2023, 15:17:40"``).

    Args:
        values: scratch values (``scratch.json`` or a stream's ``state.extra``).
        path: the file named in errors.

    Returns:
        The time, or None when there is none.

    Raises:
        InteropError: ``curr_time`` is not in the original's format.
    """
    text = values.get("curr_time")
    if text is None:
        return None
    return parse_saved_time(text, SCRATCH_TIME_FORMAT, path=path, where="curr_time")


def parse_saved_time(
    value: Any, fmt: str, *, where: str, path: str | None, node_id: str | None = None
) -> datetime:
    """A time as the original simulation saved it, in ``fmt``.

    Args:
        value: the saved text.
        fmt: :data:`NODE_TIME_FORMAT` or :data:`SCRATCH_TIME_FORMAT`.
        where: the field, named in the error.
        path: the file, named in the error.
        node_id: the node, named in the error.

    Returns:
        The (naive) datetime.

    Raises:
        InteropError: the text is not in ``fmt``.
    """
    try:
        return datetime.strptime(value, fmt)
    except (TypeError, ValueError) as e:
        example = datetime(2023, 2, 13, 15, 17, 40).strftime(fmt)
        msg = f"{where}: {value!r} is not a datetime like {example!r}"
        raise InteropError(msg, path=path, node_id=node_id) from e
