"""A persona's statistics: counts, depths, keyword strengths, trigger, settings, clock.

What ``genmem stats`` prints and the service's ``GET /personas/{name}`` returns.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from langchain_genmem.memory.stream import MemoryStream

__all__ = ["number", "stream_stats"]


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
            "reflection_due": state.reflection_due,
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
