"""Per-persona state that must survive restarts: counters, weights, keyword strengths.

The original keeps these in the persona's ``scratch.json`` (reflection trigger, retrieval
weights, ``recency_decay``) and ``kw_strength.json``. Here they live with the memories in the
store, written in the same commit as the nodes they describe.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from langchain_genmem.core.modes import DEFAULT_RELEVANCE_MODE, LEXICAL_WEIGHT, RelevanceMode

# the modes are declared in core.modes; importable from here as before
from langchain_genmem.core.modes import RELEVANCE_MODES as RELEVANCE_MODES

DEFAULT_TRIGGER_MAX = 150.0
DEFAULT_RECENCY_DECAY = 0.99
# Share of the lexical signal in the hybrid relevance (0: dense only, 1: lexical only).
# Chosen on training splits of the labelled set (benchmarks/bench_fusion.py: 0.25 is the best
# of a 0.05 grid on the training half, and on 19 of 20 random training halves).
DEFAULT_LEXICAL_WEIGHT = 0.25


# Fields a user may change through MemoryStream.update_settings().
SETTINGS = (
    "importance_trigger_max",
    "importance_trigger_curr",
    "importance_ele_n",
    "recency_w",
    "relevance_w",
    "importance_w",
    "recency_decay",
    "relevance_mode",
    "lexical_weight",
)
# Settings the original's scratch.json does not have: exported only when set or already there.
NEW_SETTINGS = ("relevance_mode", "lexical_weight")


class StreamState(BaseModel):
    """What a persona's stream remembers besides its nodes.

    Attributes:
        node_count: number of committed nodes; ``node_1`` .. ``node_{node_count}`` exist.
        type_count: committed nodes per type.
        dim: size of the persona's vectors, once one is stored.
        rev: bumped by every commit, so other processes can tell the state changed.
        importance_trigger_max: reflection threshold (the original's default is 150).
        importance_trigger_curr: counts down by each event's poignancy; reflection is due at 0.
        importance_ele_n: events added since the last reflection.
        recency_w: persona weight of recency.
        relevance_w: persona weight of relevance.
        importance_w: persona weight of importance.
        recency_decay: decay of recency per hour (or per rank, by retrieval mode).
        relevance_mode: the persona's relevance signal: ``"dense"`` (cosine, the
            original's), ``"lexical"`` or ``"hybrid"`` (both fused).
        lexical_weight: share of the lexical signal in the hybrid relevance, in [0, 1].
        kw_strength: ``{"event": {kw: n}, "thought": {kw: n}}``.
        extra: other ``scratch.json`` values kept for a faithful export.
    """

    node_count: int = 0
    type_count: dict[str, int] = Field(
        default_factory=lambda: {"event": 0, "thought": 0, "chat": 0}
    )
    dim: int | None = None
    rev: int = 0
    importance_trigger_max: float = DEFAULT_TRIGGER_MAX
    importance_trigger_curr: float = DEFAULT_TRIGGER_MAX
    importance_ele_n: int = 0
    recency_w: float = 1.0
    relevance_w: float = 1.0
    importance_w: float = 1.0
    recency_decay: float = DEFAULT_RECENCY_DECAY
    relevance_mode: RelevanceMode = DEFAULT_RELEVANCE_MODE
    lexical_weight: float = Field(DEFAULT_LEXICAL_WEIGHT, **LEXICAL_WEIGHT.field())
    kw_strength: dict[str, dict[str, int]] = Field(
        default_factory=lambda: {"event": {}, "thought": {}}
    )
    extra: dict[str, Any] = Field(default_factory=dict)

    @property
    def reflection_due(self) -> bool:
        """True when the original's trigger has fired (``importance_trigger_curr <= 0``)."""
        return self.importance_trigger_curr <= 0
