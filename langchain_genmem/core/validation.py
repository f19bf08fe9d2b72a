"""Checks of user input shared by the library and the ``genmem`` command line.

One rule, one wording: the retriever, the stream's settings, the memory inputs and the CLI
options all call these, so a bad value is refused the same way wherever it comes in. Every
check returns the value normalised or raises :class:`~langchain_genmem.core.errors.ValidationError`
naming the field and what is allowed:

================  ==========================================================
weights, gains    finite numbers >= 0
recency decay     a number in (0, 1]
lexical weight    a number in [0, 1]
relevance mode    ``"dense"``, ``"lexical"`` or ``"hybrid"``
k                 an integer >= 0
query             a non-empty text
poignancy         a number from 1 (mundane) to 10 (poignant), the original's scale
persona name      a text of 1 to 200 characters, not only spaces, with no control
                  characters (NUL, tab, newline, ...)
conversation,     None, or text by the persona name's rules
speaker
vector            a non-empty 1-d vector of finite numbers (no NaN, no infinity)
================  ==========================================================
"""

from __future__ import annotations

import difflib
import math
import numbers
import unicodedata
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
from pydantic import ValidationError as PydanticValidationError

from langchain_genmem.core.errors import ValidationError
from langchain_genmem.core.modes import DECAY, LEXICAL_WEIGHT, POIGNANCY, RELEVANCE_MODES
from langchain_genmem.core.text import clean_text, length_error, limits

POIGNANCY_MIN = POIGNANCY.low
POIGNANCY_MAX = POIGNANCY.high
PERSONA_NAME_MAX = 200
"""The longest persona name, in characters. Names are people's names: 200 leaves room for
any real one, and keeps a name (at most 800 bytes in UTF-8) far inside what every store
keys and indexes on (PostgreSQL's index entries, Chroma's metadata) and short enough to
quote in prompts, messages, URLs and tool calls."""
K_MIN = 0
"""The fewest memories a retrieval may ask for (``k``, the service's ``top_k``): 0 asks for
none and gets none. The command line's ``-k``, the service and the MCP tools take the same."""


def finite_number(value: Any, field: str) -> float:
    """A real number that is not NaN or infinite.

    Args:
        value: the value given.
        field: its name, for the error.

    Returns:
        The value as a float.

    Raises:
        ValidationError: not a finite number.
    """
    number = _coerce(value)
    if number is None:
        msg = f"{field}: expected a finite number, got {value!r}"
        raise ValidationError(msg, field=field)
    return number


def weight(value: Any, field: str) -> float:
    """A retrieval weight or gain: finite and >= 0.

    Args:
        value: the value given.
        field: its name, for the error.

    Returns:
        The weight as a float.

    Raises:
        ValidationError: not a finite number >= 0.
    """
    number = finite_number(value, field)
    if number < 0:
        msg = f"{field}: expected a finite number >= 0, got {value!r}"
        raise ValidationError(msg, field=field)
    return number


def decay(value: Any, field: str = "recency_decay") -> float:
    """A recency decay: in (0, 1] (1 means no decay).

    Args:
        value: the value given.
        field: its name, for the error.

    Returns:
        The decay as a float.

    Raises:
        ValidationError: not a number in (0, 1].
    """
    number = _coerce(value)
    if number is None or number not in DECAY:
        msg = (
            f"{field}: expected a number in {DECAY.text()} (e.g. 0.99; 1 = no decay), "
            f"got {value!r}"
        )
        raise ValidationError(msg, field=field)
    return number


def lexical_weight(value: Any, field: str = "lexical_weight") -> float:
    """The share of the lexical signal in the hybrid relevance: in [0, 1].

    Args:
        value: the value given.
        field: its name, for the error.

    Returns:
        The weight as a float.

    Raises:
        ValidationError: not a number in [0, 1].
    """
    number = _coerce(value)
    if number is None or number not in LEXICAL_WEIGHT:
        msg = (
            f"{field}: expected a number in {LEXICAL_WEIGHT.text()} "
            "(0 = dense only, 1 = lexical only), "
            f"got {value!r}"
        )
        raise ValidationError(msg, field=field)
    return number


def one_of(value: Any, choices: Iterable[str], field: str) -> str:
    """One of a fixed set of names (a mode, a metric...).

    Args:
        value: the value given.
        choices: the names accepted.
        field: its name, for the error.

    Returns:
        The name.

    Raises:
        ValidationError: not one of the names.
    """
    names = tuple(choices)
    if not isinstance(value, str) or value not in names:
        msg = f"{field}: expected one of {', '.join(names)}, got {value!r}"
        raise ValidationError(msg, field=field)
    return value


def relevance_mode(value: Any, field: str = "relevance_mode") -> str:
    """A relevance signal: one of :data:`~langchain_genmem.core.modes.RELEVANCE_MODES`.

    Args:
        value: the value given.
        field: its name, for the error.

    Returns:
        The mode.

    Raises:
        ValidationError: not one of the modes.
    """
    return one_of(value, RELEVANCE_MODES, field)


def integer(value: Any, field: str, low: int, high: int | None = None) -> int:
    """An integer from ``low`` to ``high`` (no upper bound when None); bools are not integers.

    Args:
        value: the value given.
        field: its name, for the error.
        low: the smallest value allowed.
        high: the largest value allowed, or None.

    Returns:
        The integer.

    Raises:
        ValidationError: not an integer in the range, naming ``field``.
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < low \
            or (high is not None and value > high):
        bound = f">= {low}" if high is None else f"from {low} to {high}"
        msg = f"{field}: expected an integer {bound}, got {value!r}"
        raise ValidationError(msg, field=field)
    return value


def top_k(value: Any, field: str = "k") -> int:
    """How many documents: an integer >= 0.

    Args:
        value: the value given.
        field: its name, for the error.

    Returns:
        The integer.

    Raises:
        ValidationError: not an integer >= 0.
    """
    whole = isinstance(value, numbers.Integral) or (
        isinstance(value, float) and value.is_integer()
    )
    if isinstance(value, bool) or not whole or value < K_MIN:
        msg = f"{field}: expected an integer >= {K_MIN}, got {value!r}"
        raise ValidationError(msg, field=field)
    return int(value)


def query(value: Any, field: str = "query") -> str:
    """A focal point or search text: a non-empty text, cleaned and bounded.

    Args:
        value: the value given.
        field: its name, for the error.

    Returns:
        The text, cleaned (:func:`~langchain_genmem.core.text.clean_text`).

    Raises:
        ValidationError: not a text, only whitespace, or longer than
            ``limits().description`` characters.
    """
    if not isinstance(value, str):
        msg = f"{field}: expected a text, got {type(value).__name__}"
        raise ValidationError(msg, field=field)
    if not value.strip():
        msg = f"{field}: expected a non-empty text, got {value!r}"
        raise ValidationError(msg, field=field)
    too_long = length_error(value, limits().description)
    if too_long is not None:
        raise ValidationError(f"{field}: {too_long}", field=field)
    return clean_text(value)


def poignancy(value: Any, field: str = "poignancy") -> float:
    """An importance rating on the original's scale, 1 to 10.

    Args:
        value: the value given.
        field: its name, for the error.

    Returns:
        The rating as a float.

    Raises:
        ValidationError: not a number from 1 to 10.
    """
    number = _coerce(value)
    if number is None or number not in POIGNANCY:
        msg = (
            f"{field}: expected a number from {POIGNANCY_MIN:g} (mundane) to "
            f"{POIGNANCY_MAX:g} (poignant), got {value!r}"
        )
        raise ValidationError(msg, field=field)
    return number


def persona_name(value: Any, field: str = "persona") -> str:
    """A persona's name: 1 to :data:`PERSONA_NAME_MAX` characters, no control characters.

    Any script and inner spaces are fine (``"玛丽亚 Lopez"``); a name is kept as given, so
    ``"Maria"`` and ``"Maria "`` are two personas. Refused: a non-text, an empty or blank
    name, NUL and every other control character (tab, newline, ``\x7f`` ...), unpaired
    surrogates (not storable as UTF-8) and names over the limit. Every store keys its rows
    by this name, so the check runs before any store is asked.

    Args:
        value: the name given.
        field: its name, for the error.

    Returns:
        The name, unchanged.

    Raises:
        ValidationError: the name breaks one of the rules; the message names the persona
            (shortened) and the rule.
    """
    return _label(value, field, "persona", "a persona name")


def turn_label(value: Any, field: str) -> str | None:
    """A conversation id or a speaker's name: None, or a text held to the persona name's rules.

    Turns of one conversation carry the same id (any text: a thread or session id, a chat
    room) and the name of who said them; both are kept as given and compared exactly.

    Args:
        value: the id or name given (None: not a turn of a conversation, or no speaker).
        field: its name, for the error (``conversation`` or ``speaker``).

    Returns:
        The value, unchanged.

    Raises:
        ValidationError: a non-text, a blank text, a control character or over
            :data:`PERSONA_NAME_MAX` characters.
    """
    if value is None:
        return None
    what = "a conversation id" if field.endswith("conversation") else "a speaker's name"
    return _label(value, field, field.rsplit(".", 1)[-1], what)


def _label(value: Any, field: str, noun: str, rule: str) -> str:
    """``value`` if it is a name by :func:`persona_name`'s rules.

    ``noun`` and ``rule`` word the error.
    """
    if not isinstance(value, str) or not value.strip():
        msg = f"{field}: expected a non-empty name, got {value!r}"
        raise ValidationError(msg, field=field)
    shown = repr(value if len(value) <= 60 else value[:60] + "…")
    if len(value) > PERSONA_NAME_MAX:
        msg = (
            f"{field}: {noun} {shown} has {len(value)} characters; {rule} has at "
            f"most {PERSONA_NAME_MAX}"
        )
        raise ValidationError(msg, field=field)
    for at, char in enumerate(value):
        kind = unicodedata.category(char)
        if kind in ("Cc", "Cs"):
            what = "a control character" if kind == "Cc" else "an unpaired surrogate"
            msg = (
                f"{field}: {noun} {shown} holds {what} ({char!r} at position {at}); "
                f"{rule} may not hold control characters such as NUL, tab or newline"
            )
            raise ValidationError(msg, field=field)
    return value


def finite_vector(value: Any, field: str = "embedding") -> np.ndarray:
    """An embedding: a non-empty 1-d vector of finite numbers.

    Args:
        value: the vector (any sequence of numbers or numpy array).
        field: its name, for the error (``"query embedding"``).

    Returns:
        The vector as float64.

    Raises:
        ValidationError: not 1-d, empty, not numbers, or holding NaN or infinity (an
            embedding model that failed, e.g. on an empty or odd text).
    """
    try:
        vector = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as e:
        msg = f"{field}: expected a vector of numbers, got {type(value).__name__}"
        raise ValidationError(msg, field=field) from e
    if vector.ndim != 1 or vector.size == 0:
        msg = f"{field}: expected a non-empty 1-d vector, got shape {vector.shape}"
        raise ValidationError(msg, field=field)
    bad = ~np.isfinite(vector)
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        msg = (
            f"{field}: {int(bad.sum())} of its {vector.size} numbers are NaN or infinite "
            f"(the first at position {first}: {vector[first]}); the embedding model returned "
            "no usable vector"
        )
        raise ValidationError(msg, field=field)
    return vector


def known_arguments(given: Iterable[str], allowed: Iterable[str], owner: str) -> None:
    """Refuse arguments a constructor does not have, suggesting the closest names.

    Args:
        given: the names passed.
        allowed: the names the constructor takes.
        owner: the class or function, for the message.

    Raises:
        ValidationError: some names are unknown; the message lists them all.
    """
    allowed = sorted(set(allowed))
    unknown = [name for name in given if name not in allowed]
    if not unknown:
        return
    parts = []
    for name in unknown:
        close = difflib.get_close_matches(name, allowed, n=1)
        parts.append(f"{name!r} (did you mean {close[0]!r}?)" if close else repr(name))
    msg = (
        f"{owner}: unknown argument{'s' if len(unknown) > 1 else ''} {', '.join(parts)}; "
        f"it takes {', '.join(allowed)}"
    )
    raise ValidationError(msg, field=unknown[0])


def from_pydantic(error: PydanticValidationError, owner: str) -> ValidationError:
    """The first problem of a pydantic error as one of ours, naming the field.

    Args:
        error: pydantic's error.
        owner: the class being built, for the message.

    Returns:
        The error to raise.
    """
    first = error.errors()[0]
    ours = (first.get("ctx") or {}).get("error")
    if isinstance(ours, ValidationError):  # one of these checks, run inside a validator
        return ValidationError(f"{owner}: {ours}", field=ours.field)
    field = ".".join(str(x) for x in first["loc"]) or owner
    given = first.get("input")
    shown = "" if isinstance(given, Mapping) else f" (got {given!r})"
    return ValidationError(f"{owner}: {field}: {first['msg']}{shown}", field=field)

def _coerce(value: Any) -> float | None:
    """A real number (not a bool, not a text) as a finite float, else None."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None
    number = float(value)
    return number if math.isfinite(number) else None
