"""Text at the package's boundary: cleaned, bounded, and checked for letters.

Every text that comes from outside (a memory's description on ``add``, a model's reply
before it is parsed, a query before it is embedded) passes through here, so that what is
stored, parsed or embedded is always valid Unicode of a known size:

* :func:`clean_text` replaces lone surrogates (``"\\ud800"``, which no encoder accepts)
  with U+FFFD and removes NUL characters (which PostgreSQL and many tools refuse); a
  valid surrogate pair becomes the character it encodes.
* :func:`prepare_reply` also truncates a model reply to ``limits().reply`` characters,
  reporting it with a :class:`ReplyTruncatedWarning`, so that no reply costs the parsers
  more than a bounded, linear amount of work.
* :func:`length_error` says why a text is over its limit (the caller raises, naming the
  field: :mod:`langchain_genmem.memory.inputs` refuses such a description).

The limits (:class:`TextLimits`) are process-wide and read at each call; change them with
:func:`set_text_limits`, which returns the previous limits so a caller can restore them::

    from langchain_genmem.core.text import set_text_limits

    previous = set_text_limits(description=50_000)
    ...
    set_text_limits(**previous.as_dict())
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from langchain_genmem.core.errors import ValidationError

__all__ = [
    "DEFAULT_TEXT_LIMITS",
    "MAX_DESCRIPTION_CHARS",
    "MAX_REPLY_CHARS",
    "MAX_THOUGHT_CHARS",
    "ReplyTruncatedWarning",
    "TextLimits",
    "clean_text",
    "has_letter",
    "length_error",
    "limits",
    "prepare_reply",
    "set_text_limits",
]


MAX_REPLY_CHARS = 64_000
"""Default most characters of a model reply that are parsed (a long answer is ~4,000)."""
MAX_DESCRIPTION_CHARS = 20_000
"""Default most characters of a description, embedding key, triple part or query."""
MAX_THOUGHT_CHARS = 1_000
"""Default most characters of an insight or question read from a reply."""


@dataclass(frozen=True)
class TextLimits:
    """The most characters a text may have, by kind.

    Attributes:
        reply: a model reply; longer ones are truncated before parsing (and reported).
        description: a memory's description, embedding key, subject, predicate or object;
            longer ones are refused on ``add``.
        thought: an insight or question (focal point) read from a reply; longer ones are
            dropped by the parsers, so a reflection never writes one.
    """

    reply: int = MAX_REPLY_CHARS
    description: int = MAX_DESCRIPTION_CHARS
    thought: int = MAX_THOUGHT_CHARS

    def as_dict(self) -> dict[str, int]:
        """The limits by name, as :func:`set_text_limits` takes them."""
        return dataclasses.asdict(self)


DEFAULT_TEXT_LIMITS = TextLimits()
"""The defaults: replies of 64,000 characters, descriptions of 20,000, thoughts of 1,000."""

_limits = DEFAULT_TEXT_LIMITS


class ReplyTruncatedWarning(UserWarning):
    """A model reply was longer than ``limits().reply`` and only its start was parsed."""


def limits() -> TextLimits:
    """Return the text limits in force."""
    return _limits


def set_text_limits(**changes: int) -> TextLimits:
    """Change some text limits for the whole process.

    Args:
        **changes: new values by name (``reply``, ``description``, ``thought``), each an
            integer of at least 1.

    Returns:
        The limits in force before the change.

    Raises:
        ValidationError: an unknown name or a value that is not an integer >= 1.
    """
    global _limits  # noqa: PLW0603 - the one process-wide setting of this module
    known = set(DEFAULT_TEXT_LIMITS.as_dict())
    for name, value in changes.items():
        if name not in known:
            msg = f"{name}: not a text limit; expected some of {sorted(known)}"
            raise ValidationError(msg, field=name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            msg = f"{name}: expected an integer >= 1, got {value!r}"
            raise ValidationError(msg, field=name)
    previous = _limits
    _limits = dataclasses.replace(previous, **changes)
    return previous


def clean_text(text: str) -> str:
    """Return ``text`` as valid Unicode without NUL characters.

    Lone surrogates become U+FFFD (the replacement character); a surrogate pair becomes the
    character it encodes. Linear in the length of the text.

    Args:
        text: any string.

    Returns:
        The cleaned string (``text`` itself when nothing needed cleaning).
    """
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text.replace("\x00", "") if "\x00" in text else text


def prepare_reply(text: Any) -> str:
    """Return a model reply cleaned and cut to ``limits().reply`` characters.

    A longer reply is truncated and a :class:`ReplyTruncatedWarning` says by how much.

    Args:
        text: the reply (anything else is turned into its ``str``).

    Returns:
        The text the parsers read.
    """
    text = text if isinstance(text, str) else str(text)
    limit = _limits.reply
    if len(text) > limit:
        msg = (
            f"model reply of {len(text)} characters truncated to its first {limit} "
            "(raise the limit with langchain_genmem.core.text.set_text_limits(reply=...))"
        )
        warnings.warn(msg, ReplyTruncatedWarning, stacklevel=3)
        text = text[:limit]
    return clean_text(text)


def length_error(text: str, limit: int) -> str | None:
    """Say why ``text`` is too long for ``limit`` characters, or None if it fits.

    Args:
        text: the text.
        limit: the most characters allowed.

    Returns:
        A message naming both sizes and where to change the limit, or None.
    """
    if len(text) <= limit:
        return None
    return (
        f"{len(text)} characters, more than the limit of {limit} "
        "(see langchain_genmem.core.text.set_text_limits)"
    )


def has_letter(text: str) -> bool:
    """Whether ``text`` holds a letter of any script (``"½"`` and ``"⑦"`` hold none)."""
    return any(map(str.isalpha, text))


def unique(items: Iterable[str]) -> list[str]:
    """Items without repeats, in first-seen order.

    Args:
        items: the items.

    Returns:
        The distinct items.
    """
    return list(dict.fromkeys(items))
