"""Time to live: items that expire some minutes after they were last written or read.

LangGraph's ``TTLConfig`` (``default_ttl`` minutes, ``refresh_on_read``,
``sweep_interval_minutes``) and ``put(..., ttl=minutes)``. An item's record holds its TTL and
when it expires (the stream's clock plus the TTL); a read that refreshes moves that time on.
An expired item is never returned, swept or not; a sweep deletes expired items as a delete
does (their memories forgotten with the thoughts concluded from them). The sweeper is a
thread that sweeps every ``sweep_interval_minutes``.
"""

from __future__ import annotations

import concurrent.futures
import logging
import math
import threading
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

from langgraph.store.base import TTLConfig

from langchain_genmem.core.errors import ValidationError

__all__ = ["DEFAULT_SWEEP_MINUTES", "REFRESH_STEP", "Sweeper", "expiry", "ttl_config",
           "ttl_minutes"]

LOGGER = logging.getLogger(__name__)

DEFAULT_SWEEP_MINUTES = 5.0
"""How often the sweeper sweeps when neither its start nor the config says."""

REFRESH_STEP = 0.01
"""A read writes a new expiry only when it moves it by at least this share of the TTL (so a
hot item is not rewritten on every read; its lifetime is then at least 99% of the TTL)."""


def ttl_minutes(value: Any, field: str = "ttl") -> float | None:
    """A TTL in minutes as given: None (never expires) or a finite number > 0.

    Args:
        value: the TTL.
        field: its name, for the error.

    Returns:
        The minutes, or None.

    Raises:
        ValidationError: not None and not a positive finite number.
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
        math.isfinite(value) and value > 0
    ):
        msg = f"{field}: expected None or a number of minutes > 0, got {value!r}"
        raise ValidationError(msg, field=field)
    return float(value)


def ttl_config(given: TTLConfig | Mapping[str, Any] | None) -> TTLConfig | None:
    """A ``TTLConfig`` checked key by key.

    Args:
        given: the config (None: items never expire unless a put gives a TTL).

    Returns:
        The config, as a new dict.

    Raises:
        ValidationError: an unknown key or a bad value, naming it.
    """
    if given is None:
        return None
    if not isinstance(given, Mapping):
        msg = f"ttl: expected a TTLConfig dict, got {type(given).__name__}"
        raise ValidationError(msg, field="ttl")
    known = ("default_ttl", "refresh_on_read", "sweep_interval_minutes", "omit_expired")
    for key in given:
        if key not in known:
            msg = f"ttl: unknown key {key!r}; a TTLConfig has {', '.join(known)}"
            raise ValidationError(msg, field="ttl")
    ttl_minutes(given.get("default_ttl"), "ttl.default_ttl")
    ttl_minutes(given.get("sweep_interval_minutes"), "ttl.sweep_interval_minutes")
    for key in ("refresh_on_read", "omit_expired"):
        flag = given.get(key, False)  # absent is fine
        if not isinstance(flag, bool):
            msg = f"ttl.{key}: expected True or False, got {flag!r}"
            raise ValidationError(msg, field=f"ttl.{key}")
    return dict(given)  # type: ignore[return-value]


def expiry(now: datetime, minutes: float) -> datetime:
    """When an item written or read at ``now`` with a TTL of ``minutes`` expires.

    Args:
        now: the stream's clock.
        minutes: the TTL.

    Returns:
        The expiry time.
    """
    return now + timedelta(minutes=minutes)


class Sweeper:
    """A thread that calls ``sweep`` every interval until stopped."""

    def __init__(self, sweep: Callable[[], int]) -> None:
        self._sweep = sweep
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._future: concurrent.futures.Future[None] | None = None

    def start(self, minutes: float) -> concurrent.futures.Future[None]:
        """Start sweeping every ``minutes`` (the running sweeper's future if there is one).

        Args:
            minutes: the interval, > 0.

        Returns:
            A future done when the sweeper stops.
        """
        if self._thread is not None and self._thread.is_alive():
            return self._future  # type: ignore[return-value]
        self._stop.clear()
        future: concurrent.futures.Future[None] = concurrent.futures.Future()
        future.set_running_or_notify_cancel()
        thread = threading.Thread(target=self._loop, args=(minutes * 60.0, future),
                                  name="genmem-ttl-sweeper", daemon=True)
        self._thread, self._future = thread, future
        thread.start()
        return future

    def _loop(self, seconds: float, future: concurrent.futures.Future[None]) -> None:
        while not self._stop.wait(seconds):
            try:
                swept = self._sweep()
            except Exception:  # a failed sweep is told; the next one tries again
                LOGGER.exception("the store's TTL sweep failed")
            else:
                if swept:
                    LOGGER.info("the store's TTL sweep deleted %d expired items", swept)
        future.set_result(None)

    def stop(self, timeout: float | None = None) -> bool:
        """Stop sweeping.

        Args:
            timeout: seconds to wait for a sweep under way (None: as long as it takes).

        Returns:
            True when no sweeper runs any more, False when ``timeout`` passed first.
        """
        thread = self._thread
        if thread is None or not thread.is_alive():
            return True
        self._stop.set()
        thread.join(timeout)
        return not thread.is_alive()
