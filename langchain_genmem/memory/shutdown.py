"""Deferred access times reach the store when the process is asked to stop.

A :class:`~langchain_genmem.memory.stream.MemoryStream` writes access times behind, within its
``flush_interval``, and flushes at interpreter exit. ``SIGTERM`` (what ``kill``, systemd,
Docker and Kubernetes send) ends a Python process without running its exit hooks, so the
access times of the last interval would be lost. :func:`flush_on_signals` installs a
handler that flushes every open stream first and then does what the signal did before: the
previous Python handler runs (``SIGINT`` still raises ``KeyboardInterrupt``), or the
default action ends the process with the signal, as if nothing had been installed.

The ``genmem`` command calls it at start. A server calls it before it starts serving (a
server that handles the signals itself, such as uvicorn, passes them on to the handler it
found once it has shut down) and may call :func:`flush_open_streams` in its own shutdown.

Example:
    .. code-block:: python

        from langchain_genmem.memory.shutdown import flush_on_signals

        restore = flush_on_signals()   # from the main thread, at start
        ...
        restore()                      # optional: put the previous handlers back

Limit: a signal that arrives while the main thread is itself inside a flush finds that
flush's access times already taken off the queue; they are written only if that flush
completes.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import weakref
from collections.abc import Callable, Sequence
from types import FrameType
from typing import Any

from langchain_genmem.core.errors import ConfigurationError, GenMemError

__all__ = ["DEFAULT_SIGNALS", "OPEN_STREAMS", "flush_on_signals", "flush_open_streams"]

logger = logging.getLogger(__name__)

DEFAULT_SIGNALS: tuple[signal.Signals, ...] = (signal.SIGTERM, signal.SIGINT)
"""The signals :func:`flush_on_signals` handles unless told otherwise."""

_previous: dict[int, Any] = {}  # signal number -> the handler found when ours was installed

OPEN_STREAMS: weakref.WeakSet[Any] = weakref.WeakSet()
"""Every open :class:`~langchain_genmem.memory.stream.MemoryStream` of this process (a stream
adds itself when it opens and leaves at ``close``): what the exit hook and the signal handler
flush."""


def flush_open_streams() -> int:
    """Write the deferred access times of every open stream of this process now.

    A stream that fails is logged and skipped, so the others are still flushed.

    Returns:
        How many access times were written.
    """
    written = 0
    for stream in list(OPEN_STREAMS):
        try:
            written += stream.flush()
        except GenMemError as e:  # the store is unavailable: one line, no traceback
            logger.warning("access times of %r not stored: %s", stream.persona, e)
    return written


def _handle(signum: int, frame: FrameType | None) -> None:
    flush_open_streams()
    previous = _previous.get(signum, signal.SIG_DFL)
    if callable(previous):
        previous(signum, frame)
    elif previous != signal.SIG_IGN:  # the default action: end the process with the signal
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)


def flush_on_signals(signals: Sequence[int] = DEFAULT_SIGNALS) -> Callable[[], None]:
    """Flush open streams on ``signals``, then let each signal do what it did before.

    Installing twice is harmless: the handler found the first time is kept.

    Args:
        signals: the signals to handle (default ``SIGTERM`` and ``SIGINT``).

    Returns:
        A function that puts the previous handlers back.

    Raises:
        ConfigurationError: not called from the main thread (Python handles signals there
            only).
    """
    if threading.current_thread() is not threading.main_thread():
        msg = "flush_on_signals: call it from the main thread (Python handles signals there)"
        raise ConfigurationError(msg)
    for signum in signals:
        current = signal.getsignal(signum)
        if current is not _handle:
            _previous[signum] = current
            signal.signal(signum, _handle)

    def restore() -> None:
        for signum in signals:
            if signal.getsignal(signum) is _handle:
                signal.signal(signum, _previous.pop(signum, signal.SIG_DFL))

    return restore
