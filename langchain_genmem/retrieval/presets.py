"""Retriever options measured for a kind of memory.

:data:`CHAT_RETRIEVAL` is how conversation memories are recalled: the chat agent
(:mod:`langchain_genmem.agent`, which exports it too), the LangGraph store and the MCP
``recall`` tool use it by default, and the HTTP service's ``/retrieve`` with
``preset="conversation"``. Smallville personas keep the simulation's own settings (the
retriever's defaults, preset ``"simulation"``).
"""

from __future__ import annotations

from typing import Any, Literal

CHAT_RETRIEVAL: dict[str, Any] = {
    "relevance": "hybrid",
    "lexical_weight": 0.25,
    "recency_w": 0.0,
    "importance_w": 0.0,
    "idle_filter": False,
    "time_in_query": "narrow",
}
"""How conversation memories are recalled: hybrid relevance alone, narrowed to the period a
question names, and no memory dropped for saying "idle".

Chosen on the training half of the labelled conversational set
(``benchmarks/bench_quality.py --set conversations``: ten chats in English and Chinese, 305
questions, before 64 more on answers spread over sessions were added) among 60 rows (turns
embedded alone or with one to three earlier turns; lexical weight .25, .4, .5, dense or
lexical alone; ``time_in_query`` off, narrow or weight), together with the default
``context_turns=2``. Held-out recall@10, against the previous chat default
(these options without ``time_in_query``, turns embedded alone):

==========================================  =====  =====  ======  =====
configuration                               en     zh     zh>en   all
==========================================  =====  =====  ======  =====
simulation weights, turns alone             .492   .660   .406    .558
previous chat default, turns alone          .527   .727   .462    .608
this, turns alone                           .640   .771   .579    .692
this, turns with two earlier turns          .764   .897   .674    .815
==========================================  =====  =====  ======  =====

A chat asks about what was said, whenever it was said: the simulation's weights push the
answer out for the latest and most poignant memories. On the labelled Smallville questions
these options score as the hybrid relevance alone does (recall@10 .753 of all; the
simulation's weights .474), and the simulation's settings stay the default for Smallville
personas. The idle filter is off because in a chat it silently forgets "my laptop sits idle".
The figures are deterministic for one CPU; on another the embedding model's vectors differ
slightly and a figure may move in its third decimal.
"""


SIMILARITY_RETRIEVAL: dict[str, Any] = {
    "relevance": "dense",
    "recency_w": 0.0,
    "relevance_w": 1.0,
    "importance_w": 0.0,
    "gains": (1.0, 1.0, 1.0),
    "scale": "absolute",
    "idle_filter": False,
    "time_in_query": "off",
}
"""Ranking by similarity alone: the score is the cosine of the query and the memory, and the
order follows it (a LangGraph store's ``ranking="similarity"``, as LangGraph's own stores
score)."""


Preset = Literal["simulation", "conversation"]
"""A named set of retriever options: the simulation's settings, or :data:`CHAT_RETRIEVAL`."""

DEFAULT_PRESET: Preset = "simulation"
"""The preset of a retrieval that names none: the original's weights, so a replay of the
simulation ranks as it did."""
MODEL_FACING_PRESET: Preset = "conversation"
"""The preset of a recall a chat model asks for (the MCP tool ``recall``): a model recalls
what was said, for which the conversation preset measured best."""

PRESETS: dict[Preset, dict[str, Any]] = {"simulation": {}, "conversation": CHAT_RETRIEVAL}
"""The retriever options of each preset; options given beside a preset replace its own."""


def preset_options(
    preset: Preset, given: dict[str, Any], *, in_database: bool = False
) -> dict[str, Any]:
    """A preset's retriever options with the ones given (not None) on top.

    Args:
        preset: the preset's name.
        given: retriever options; None values leave the preset's.
        in_database: the retrieval ranks in the database, which always leaves idle memories
            out: a preset's ``idle_filter`` is dropped (one given is kept, and refused there).

    Returns:
        The options.
    """
    options = dict(PRESETS[preset])
    if in_database:
        options.pop("idle_filter", None)
    options.update({name: value for name, value in given.items() if value is not None})
    return options
