"""Slow clients are cut off: a request's headers and its body each have a deadline.

A client that opens a connection and never finishes its headers (or dribbles them) holds a
socket and a slot of the server for as long as it likes; so does one that sends a body a
byte at a time. :class:`HeaderDeadline` is the HTTP protocol ``genmem serve`` and
``genmem mcp --transport http`` run uvicorn with: a connection whose request headers are not
complete ``HEADER_TIMEOUT`` seconds after it opened (or after its previous response)
is closed. :class:`BodyDeadline` is an ASGI middleware: a body not received in full within
``BODY_TIMEOUT`` seconds of its first read answers 408. Both are shown in
``GET /healthz`` with the other limits (:mod:`langchain_genmem.operations.fields`).
"""

from __future__ import annotations

import asyncio
import math
import time

from langchain_genmem.core.extras import require_extra
from langchain_genmem.operations.fields import BODY_TIMEOUT, HEADER_TIMEOUT

require_extra("uvicorn", "service", "genmem serve")

from starlette.exceptions import HTTPException  # noqa: E402 - after the extra's check
from starlette.types import ASGIApp, Message, Receive, Scope, Send  # noqa: E402
from uvicorn.protocols.http.h11_impl import H11Protocol  # noqa: E402


def header_protocol(seconds: float) -> type[H11Protocol]:
    """The HTTP/1.1 protocol of uvicorn, with a header deadline of ``seconds``.

    Args:
        seconds: how long headers may take.

    Returns:
        The protocol class, for ``uvicorn.run(..., http=...)``.
    """
    return type("HeaderDeadline", (HeaderDeadline,), {"header_timeout": seconds})


class HeaderDeadline(H11Protocol):
    """HTTP/1.1 whose connections close when a request's headers take too long."""

    header_timeout = HEADER_TIMEOUT
    _deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Open the connection and start the clock on its first request's headers."""
        super().connection_made(transport)
        self._arm()

    def handle_events(self) -> None:
        """Read what arrived; a request whose headers are complete stops the clock."""
        super().handle_events()
        if self.cycle is not None and not self.cycle.response_complete:
            self._disarm()

    def on_response_complete(self) -> None:
        """Finish the response and start the clock on the next request's headers."""
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        """Forget the clock of a connection that ended."""
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(self.header_timeout, self._too_slow)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _too_slow(self) -> None:
        self._deadline = None
        if not self.transport.is_closing():
            self.transport.close()


class BodyDeadline:
    """ASGI middleware: 408 for a request body not received in full within ``seconds``.

    Args:
        app: the wrapped app.
        seconds: how long a body may take, from its first read.
    """

    def __init__(self, app: ASGIApp, seconds: float = BODY_TIMEOUT) -> None:
        self.app = app
        self.seconds = seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on, each read of its body bounded by what is left of the time."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        deadline, received = math.inf, False

        async def timed() -> Message:
            nonlocal deadline, received
            if received:  # the body is in: waiting for a disconnect is not the client's delay
                return await receive()
            if deadline == math.inf:
                deadline = time.monotonic() + self.seconds
            try:
                message = await asyncio.wait_for(receive(), max(deadline - time.monotonic(), 0))
            except TimeoutError:
                raise HTTPException(408, f"body: not received within {self.seconds:g} "
                                    "seconds") from None
            received = not message.get("more_body", False)
            return message

        await self.app(scope, timed, send)
