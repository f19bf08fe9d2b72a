"""Expiry: memories given a lifetime, and the durations every front accepts.

A memory is added with ``expiration`` (when it expires) or ``expires_in`` (how long after it
was made), never both: ``expiration = created + expires_in``, ``created`` being the stream
clock's now unless the item gives it. A lifetime is a positive number of seconds, a
``timedelta``, or a text of whole amounts with units: ``"30d"``, ``"12h"``, ``"90m"``,
``"45s"``, ``"1d12h"`` (``"1.5h"`` too; a bare number is seconds).

An expired memory (``expiration`` at or before the stream's clock) is never retrieved
(:class:`~langchain_genmem.GenerativeAgentsRetriever` leaves it out unless
``include_expired=True``; ``recency_mode="reverie"`` keeps the original's behaviour, which
ignores expiration; the keyword retrieval leaves it out unless ``include_expired=True``) and
``MemoryStream.forget(expired=True)`` deletes such memories for good.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from langchain_genmem.core.errors import ValidationError
from langchain_genmem.core.timeutil import naive

if TYPE_CHECKING:
    from langchain_genmem.core.nodes import MemoryNode

UNITS = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0}
_PART = re.compile(r"(\d+(?:\.\d+)?)\s*([dhms])", re.IGNORECASE)
_WHOLE = re.compile(r"(?:\s*\d+(?:\.\d+)?\s*[dhms]\s*)+", re.IGNORECASE)
FORMS = "a positive number of seconds or a duration such as 30d, 12h, 90m, 45s or 1d12h"


def lifetime(value: Any) -> timedelta:
    """A memory's lifetime from what a caller gave.

    Args:
        value: seconds (a number), a ``timedelta``, or a text such as ``"30d"`` or ``"1d12h"``.

    Returns:
        The lifetime.

    Raises:
        ValueError: not one of those forms, or not positive (the message names the forms).
    """
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    elif isinstance(value, str):
        seconds = _seconds_of(value.strip())
    else:
        seconds = math.nan
    if not math.isfinite(seconds) or seconds <= 0:
        msg = f"expected {FORMS}"
        raise ValueError(msg)
    try:
        return timedelta(seconds=seconds)
    except OverflowError as e:
        msg = f"expected {FORMS}, not longer than {timedelta.max.days} days"
        raise ValueError(msg) from e


def _seconds_of(text: str) -> float:
    """The seconds a duration text names (NaN when it is no duration)."""
    try:
        return float(text)
    except ValueError:
        pass
    if not _WHOLE.fullmatch(text):
        return math.nan
    return sum(float(n) * UNITS[u.lower()] for n, u in _PART.findall(text))


def parse_duration(text: str, option: str) -> timedelta:
    """A lifetime given on the command line (see :func:`lifetime`).

    Args:
        text: the option's value.
        option: the option's name, for the error.

    Returns:
        The lifetime.

    Raises:
        ValidationError: not a positive duration, naming the option.
    """
    try:
        return lifetime(text)
    except ValueError as e:
        msg = f"{option}: {e} (got {text!r})"
        raise ValidationError(msg, field=option.lstrip("-")) from e


def expiration_of(
    created: datetime, expiration: datetime | None, expires_in: timedelta | None
) -> datetime | None:
    """When a memory expires: its ``expiration``, or ``created + expires_in``, or never.

    Args:
        created: when the memory was made.
        expiration: the expiration given, or None.
        expires_in: the lifetime given, or None.

    Returns:
        The expiration (None: never).

    Raises:
        ValidationError: ``created + expires_in`` falls after the calendar's last day.
    """
    if expiration is not None:
        return expiration
    if expires_in is None:
        return None
    try:
        return created + expires_in
    except OverflowError:
        msg = (f"expires_in: {created.isoformat()} plus {expires_in} falls after the "
               f"calendar's last day (9999-12-31)")
        raise ValidationError(msg, field="expires_in") from None


def unexpired(nodes: Sequence[MemoryNode], now: datetime) -> list[MemoryNode]:
    """The nodes not expired at ``now`` (``expiration`` None or after it), in order.

    Args:
        nodes: the nodes.
        now: the stream's clock.

    Returns:
        The nodes still current.
    """
    at = naive(now)
    return [n for n in nodes if n.expiration is None or n.expiration > at]
