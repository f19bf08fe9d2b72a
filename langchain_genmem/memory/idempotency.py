"""Writes that can be retried: an idempotency key names a write, so sending it again is safe.

A client that lost the reply to a write cannot tell whether it was stored. Sent again with
the same key (by any process or replica over the same store), the write stores nothing new
and returns the memories the first one stored. The key is recorded in the persona's state
(:attr:`~langchain_genmem.core.state.StreamState.idempotency`), in the same all-or-nothing
commit as the memories, with a fingerprint of the items: the same key with other items is
refused (:class:`~langchain_genmem.core.errors.IdempotencyKeyReusedError`).

Bounds: a key is 1 to :data:`KEY_MAX_CHARS` printable ASCII characters (what an HTTP header
carries: a UUID fits), and a persona remembers the keys of its latest :data:`KEYS_KEPT`
keyed writes; a key older than that is forgotten and would write again. Memories of a keyed
write forgotten since are left out of its replay. On Chroma a keyed write stores the state
record (the key is in it) rather than the one-record commit of a single memory.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_genmem.core.errors import IdempotencyKeyReusedError, ValidationError
from langchain_genmem.core.state import Claimed, StreamState
from langchain_genmem.memory.inputs import MemoryInput, validate_items

KEY_MAX_CHARS = 128
"""The longest idempotency key (a UUID is 36 characters)."""
KEY_PATTERN = rf"^[!-~]{{1,{KEY_MAX_CHARS}}}$"
"""A key as a JSON schema states it: 1 to :data:`KEY_MAX_CHARS` printable ASCII characters."""

KEYS_KEPT = 1000
"""Keyed writes a persona remembers (its latest); each costs about 100 bytes of state."""


@dataclass(frozen=True)
class Claim:
    """A write's idempotency key and the fingerprint of its items.

    Attributes:
        key: the key the caller gave.
        fingerprint: what the items hash to (the same items always give the same one).
    """

    key: str
    fingerprint: str

    @classmethod
    def of(
        cls,
        key: str | None,
        items: Sequence[Mapping[str, Any] | MemoryInput],
        state: Mapping[str, Any] | None = None,
    ) -> Claim | None:
        """The claim of a write, or None when it has no key.

        Args:
            key: the idempotency key, or None.
            items: the write's memories, as given to ``add_many``.
            state: the state values written with them.

        Returns:
            The claim.

        Raises:
            ValidationError: a key that is not 1 to KEY_MAX_CHARS printable ASCII characters,
                or a bad item.
        """
        if key is None:
            return None
        return cls(check_key(key), fingerprint(validate_items(items), state))

    def entry(self, first: int, last: int) -> Claimed:
        """What the state records for this claim once its memories are numbered.

        Args:
            first: the number of its first memory.
            last: the number of its last memory.

        Returns:
            The entry.
        """
        return (self.key, self.fingerprint, first, last)


def check_key(key: object) -> str:
    """An idempotency key, checked.

    Args:
        key: what the caller gave.

    Returns:
        The key.

    Raises:
        ValidationError: not a str of 1 to KEY_MAX_CHARS printable ASCII characters.
    """
    if not isinstance(key, str):
        msg = f"idempotency_key: expected a str, got {type(key).__name__}"
        raise ValidationError(msg, field="idempotency_key")
    if not 1 <= len(key) <= KEY_MAX_CHARS or not all(" " < c <= "~" for c in key):
        msg = (f"idempotency_key: give 1 to {KEY_MAX_CHARS} printable ASCII characters without "
               f"spaces (e.g. a UUID), got {key[:KEY_MAX_CHARS + 2]!r}")
        raise ValidationError(msg, field="idempotency_key")
    return key


def fingerprint(batch: Sequence[MemoryInput], state: Mapping[str, Any] | None) -> str:
    """A hash of a write's validated items and state values.

    Args:
        batch: the items, validated.
        state: the state values written with them.

    Returns:
        32 hex digits.
    """
    body = [m.model_dump(exclude_none=True) for m in batch], dict(state or {})
    text = json.dumps(body, sort_keys=True, ensure_ascii=False, default=_plain)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def _plain(value: Any) -> Any:
    """A JSON value for what ``json`` cannot write (vectors, times)."""
    if hasattr(value, "tolist"):
        return value.tolist()
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return str(value)


def replayed(state: StreamState, claim: Claim, persona: str) -> list[str] | None:
    """The ids of what a write with this claim stored before, or None when it is new.

    Args:
        state: the persona's committed state.
        claim: the write's claim.
        persona: the persona (for the error).

    Returns:
        The ids of the earlier write's memories that are not forgotten, in order; None
        when the state remembers no write with this key.

    Raises:
        IdempotencyKeyReusedError: the key was used by a write of other items.
    """
    for key, seen, first, last in reversed(state.idempotency):
        if key == claim.key:
            if seen != claim.fingerprint:
                raise IdempotencyKeyReusedError(claim.key, persona=persona)
            return [f"node_{n}" for n in state.live_numbers(first, last).tolist()]
    return None


def recorded(state: StreamState, claim: Claim | None, first: int, last: int) -> StreamState:
    """``state`` remembering the claim's write (and only the latest KEYS_KEPT).

    Args:
        state: the state the write commits.
        claim: the write's claim, or None (``state`` is returned as it is).
        first: the number of its first memory.
        last: the number of its last memory.

    Returns:
        The state to commit.
    """
    if claim is None:
        return state
    kept = [*state.idempotency, claim.entry(first, last)][-KEYS_KEPT:]
    return state.model_copy(update={"idempotency": kept})
