"""What a reflection dropped or skipped, in words: one line per record, for people.

:func:`reasons` turns the :class:`~langchain_genmem.reflection.state.Dropped` records of a
run into the ``reasons`` of its output (``genmem reflect`` prints them, one a line), so a
reflection that writes nothing says why.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from langchain_genmem.reflection.state import Dropped

__all__ = ["reasons"]

_SHOWN = 80


def _quoted(text: str) -> str:
    text = " ".join(text.split())
    return repr(text if len(text) <= _SHOWN else text[:_SHOWN] + "…")


def _about(record: Dropped) -> str:
    return f" for the question {_quoted(record['question'])}" if record.get("question") else ""


def _unreadable(record: Dropped) -> str:
    text = record.get("text", "")
    if not text.strip():
        return (f"the reply{_about(record)} was empty, cut at its max_tokens or not valid for "
                "its schema")
    return f"the reply{_about(record)} held nothing usable: {_quoted(text)}"


_TEXTS: dict[str, Callable[[Dropped], str]] = {
    "no_memories": lambda r: "there was no memory to ask questions about",
    "unreadable_reply": _unreadable,
    "over_max": lambda r: f"{_quoted(r.get('text', ''))} was beyond the number asked for",
    "no_retrieved": lambda r: f"no memory was retrieved{_about(r)}; it was not asked",
    "evidence_out_of_range": lambda r: (
        f"the insight {_quoted(r.get('text', ''))} cited statements "
        f"{r.get('numbers', [])} that were not shown (dropped alone)"
    ),
    "no_evidence": lambda r: (
        f"the insight {_quoted(r.get('text', ''))} cited no statement shown; not written"
    ),
    "duplicate": lambda r: (
        f"the insight {_quoted(r.get('text', ''))} repeated an earlier one; written once"
    ),
    "triple_fallback": lambda r: (
        f"no (subject, predicate, object) for {_quoted(r.get('text', ''))}; a fallback was used"
    ),
    "rating_fallback": lambda r: (
        f"no rating for {_quoted(r.get('text', ''))}; it got the fallback importance and is "
        "listed as unrated"
    ),
    "budget_spent": lambda r: f"{r.get('text', 'calls skipped')} (raise max_calls)",
}


def reason(record: Dropped) -> str:
    """One record in words: ``"<stage>: <what happened>"``.

    Args:
        record: a record of ``dropped``.

    Returns:
        The line.
    """
    text = _TEXTS.get(record["reason"])
    what = text(record) if text else record["reason"].replace("_", " ")
    return f"{record['stage']}: {what}"


def reasons(dropped: Sequence[Dropped]) -> list[str]:
    """The records in words, one line each, repeated lines once, in record order.

    Args:
        dropped: the records of a run.

    Returns:
        The lines.
    """
    return list(dict.fromkeys(reason(record) for record in dropped))
