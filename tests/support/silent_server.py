"""A server on 127.0.0.1 that accepts connections and never answers (a hung model server)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["silent_server"]


@contextmanager
def silent_server() -> Iterator[str]:
    """Run the server for a ``with`` block.

    Yields:
        Its base URL, ``http://127.0.0.1:PORT/v1``.
    """
    listener = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []
    stop = threading.Event()

    def hold() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=hold, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
    finally:
        stop.set()
        thread.join()
        for conn in held:
            conn.close()
        listener.close()
