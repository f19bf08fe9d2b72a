"""Forgetting expired memories while a server runs (``--forget-expired-every``).

``genmem serve`` and ``genmem mcp`` (over either transport) take the option and sweep alike.

A memory whose ``expiration`` passed is never retrieved already; this deletes it for good,
as ``MemoryStream.forget(expired=True)`` does (thoughts concluded from it go too). Every
``every`` seconds a background thread sweeps the personas the server has open at that
moment (those its clients used and the pool kept: see
:class:`~langchain_genmem.service.streams.StreamPool`), one at a time, each at its own
clock. A persona the server has not opened is left alone until a client uses it; a sweep
that fails for one persona is logged and the others are swept.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from langchain_genmem.core.errors import GenMemError
from langchain_genmem.service.streams import StreamPool

logger = logging.getLogger(__name__)


class ExpirySweeper:
    """Forgets the expired memories of a pool's open personas, periodically.

    Args:
        streams: the server's stream pool.
        every: seconds between sweeps (positive).

    Raises:
        ValueError: ``every`` is not a positive number.
    """

    def __init__(self, streams: StreamPool, every: float) -> None:
        if not every > 0:
            msg = f"every: expected a positive number of seconds, got {every!r}"
            raise ValueError(msg)
        self.streams = streams
        self.every = float(every)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def sweep(self) -> dict[str, int]:
        """Forget the expired memories of every persona open now.

        Returns:
            ``{persona: how many memories were forgotten}``, for the personas that lost some.
        """
        out: dict[str, int] = {}
        for persona in self.streams.open_personas():
            try:
                with self.streams.reading(persona) as stream:
                    if stream is None:
                        continue
                    report = stream.forget(expired=True)
            except GenMemError as e:
                logger.warning("persona %r: expired memories not forgotten: %s", persona, e)
                continue
            if report.forgotten:
                out[persona] = len(report.forgotten)
                logger.info("persona %r: forgot %d expired memories", persona,
                            len(report.forgotten))
        return out

    def start(self) -> None:
        """Start sweeping in a daemon thread (the first sweep after ``every`` seconds)."""
        self._thread = threading.Thread(target=self._run, name="genmem-expiry", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop sweeping and wait for a sweep under way."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            try:
                self.sweep()
            except Exception:  # a background thread: log and sweep again next time
                logger.exception("sweeping expired memories failed")


@contextmanager
def forgetting_expired(streams: StreamPool, every: float | None) -> Iterator[ExpirySweeper | None]:
    """Sweep a pool's open personas every ``every`` seconds while the block runs (a server).

    Args:
        streams: the server's stream pool.
        every: seconds between sweeps; None sweeps never.

    Yields:
        The running sweeper (None when ``every`` is None); it is stopped when the block ends.

    Raises:
        ValueError: ``every`` is not a positive number.
    """
    if every is None:
        yield None
        return
    sweeper = ExpirySweeper(streams, every)
    sweeper.start()
    try:
        yield sweeper
    finally:
        sweeper.stop()
