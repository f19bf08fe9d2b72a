"""A persona's statistics: counts, depths, keyword strengths, trigger, settings, clock.

What ``genmem stats`` prints and the service's ``GET /personas/{name}`` returns.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from langchain_genmem.core.state import StreamState
    from langchain_genmem.memory.stream import MemoryStream

__all__ = ["importance_gathered", "number", "plural", "stream_stats", "trigger_text"]

GATHERED = "importance since the last reflection"
"""What the original's trigger counts, in the words of every trigger report."""


def stream_stats(stream: MemoryStream, top: int) -> dict[str, Any]:
    """What ``genmem stats`` shows, as JSON-ready data.

    Args:
        stream: the stream.
        top: keyword strengths listed per type.

    Returns:
        Counts, depth histogram, strengths, trigger state, settings and clock.
    """
    state = stream.state
    nodes = stream.nodes()
    gathered = importance_gathered(state)
    return {
        "persona": stream.persona,
        "memories": len(stream),
        "types": {t: sum(n.type == t for n in nodes) for t in ("event", "thought", "chat")},
        "depths": dict(sorted(Counter(n.depth for n in nodes).items())),
        "keyword_strength": {
            t: dict(Counter(m).most_common(top)) for t, m in stream.kw_strength.items()
        },
        "trigger": {
            "importance_trigger_curr": number(state.importance_trigger_curr),
            "importance_trigger_max": number(state.importance_trigger_max),
            "importance_ele_n": state.importance_ele_n,
            "importance_gathered": number(gathered),
            "reflection_due": state.reflection_due,
            "explanation": trigger_text(
                gathered, state.importance_trigger_max, due=state.reflection_due
            ),
        },
        "settings": {
            **{
                name: number(getattr(state, name))
                for name in ("recency_w", "relevance_w", "importance_w", "recency_decay")
            },
            "relevance_mode": state.relevance_mode,
            "lexical_weight": number(state.lexical_weight),
        },
        "vector_size": state.dim,
        "clock": stream.clock(),
    }


def number(value: float) -> int | float:
    """A number as the reports show it: an int when whole, else rounded to 4 places.

    Args:
        value: the number.

    Returns:
        The number to show.
    """
    return int(value) if float(value).is_integer() else round(float(value), 4)


def importance_gathered(state: StreamState) -> float:
    """The importance gathered since the last reflection, never negative.

    The original counts ``importance_trigger_curr`` down from ``importance_trigger_max`` and
    reflects at 0 or below; this is how far it has come: ``max - curr`` (past the max once
    the count went below 0).

    Args:
        state: the persona's state.

    Returns:
        The importance gathered.
    """
    return max(0.0, float(state.importance_trigger_max - state.importance_trigger_curr))


def trigger_text(
    value: float, threshold: float, *, due: bool, hint: str | None = None, what: str = GATHERED
) -> str:
    """The reflection trigger's state in words, the one wording of stats, reflect and examples.

    Args:
        value: what was gathered (:func:`importance_gathered`, or a window's poignancy sum).
        threshold: what it must reach.
        due: whether the trigger has fired.
        hint: how to reflect anyway, added when not due (``force=True``, ``--force``).
        what: what ``value`` counts.

    Returns:
        E.g. ``importance since the last reflection 167 of 150: due`` or ``... 8 of 150: not
        due until it reaches 150; --force reflects now``.
    """
    head = f"{what} {number(max(0.0, value))} of {number(threshold)}"
    if due:
        return f"{head}: due"
    return f"{head}: not due until it reaches {number(threshold)}" + (f"; {hint}" if hint else "")


def plural(n: int, one: str, many: str | None = None) -> str:
    """A count and its noun, e.g. ``1 event``, ``54 events``, ``1 memory``, ``2 memories``.

    Args:
        n: the count.
        one: the noun for one.
        many: the noun for several (default: ``one`` and an ``s``).

    Returns:
        The words.
    """
    return f"{n} {one if n == 1 else many or one + 's'}"
