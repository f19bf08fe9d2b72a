"""Readiness and outages: what the service answers while its store cannot be reached.

``GET /healthz`` is liveness: the process answers (200) whatever the store does, so an
orchestrator does not restart a replica for a database outage. ``GET /readyz`` is readiness:
200 once the store answers a read, 503 while it does not (a load balancer sends requests
elsewhere), and 200 again as soon as it is back.

While the store cannot be reached, every request that needs it (retrieval, keyword
retrieval, statistics, the persona list, writes, forgetting) answers 503 with the service's
one error shape, ``{"status": "error", "message": ..., "field": null}``, and a
``Retry-After`` header of :data:`RETRY_AFTER_SECONDS` - the same whether or not the replica
had the persona open. Over MCP the tool call fails with that message and the same advice.
A request waits for a PostgreSQL store at most :data:`DEFAULT_STORE_TIMEOUT` seconds
(``--store-timeout``), and not at all once the store is known to be down, so a readiness
probe with a timeout of a few seconds gets its 503 in time.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from langchain_genmem.core.errors import GenMemError, StorageError
from langchain_genmem.service.streams import StreamPool

RETRY_AFTER_SECONDS = 5
"""What ``Retry-After`` says while the store is unavailable (seconds)."""

DEFAULT_STORE_TIMEOUT = 2.0
"""The most seconds a request of ``genmem serve`` or ``genmem mcp`` waits for its PostgreSQL
store before it fails (503); under a readiness probe's usual timeout."""

PROBE_PERSONA = "genmem readiness probe"
"""The persona whose head the readiness check reads (it need not exist)."""


class Ready(BaseModel):
    """The store answered: the service is ready."""

    status: Literal["ok"] = "ok"


def retry_headers(error: GenMemError) -> dict[str, str] | None:
    """The headers of an error reply: ``Retry-After`` for a store that failed.

    Args:
        error: what the request raised.

    Returns:
        The headers, or None.
    """
    if isinstance(error, StorageError):
        return {"Retry-After": str(RETRY_AFTER_SECONDS)}
    return None


def retry_advice(error: GenMemError) -> str:
    """An error's message, with when to retry for a store that failed (for MCP).

    Args:
        error: what the tool call raised.

    Returns:
        The message.
    """
    if isinstance(error, StorageError):
        return f"{error} (the memory store is unavailable; retry in {RETRY_AFTER_SECONDS} s)"
    return str(error)


def check_store(streams: StreamPool) -> None:
    """Read the store once: nothing when it answers.

    Args:
        streams: the service's streams (their backend is the store).

    Raises:
        StorageError: the store could not be reached or failed the read.
    """
    try:
        streams.backend.read_head(PROBE_PERSONA)
    except StorageError:
        raise
    except Exception as e:  # noqa: BLE001 - a backend not yet opened may fail in its own words
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]  # one line of it
        msg = f"the memory store is unreachable: {first}"
        raise StorageError(msg) from e
