"""Retriever options measured for a kind of memory.

:data:`CHAT_RETRIEVAL` is how conversation memories are recalled: the chat agent
(:mod:`langchain_genmem.agent`, which exports it too), the LangGraph store and the MCP
``recall`` tool use it by default, and the HTTP service's ``/retrieve`` with
``preset="conversation"``. Smallville personas keep the simulation's own settings (the
retriever's defaults, preset ``"simulation"``).
"""

from __future__ import annotations

from typing import Any, Literal, get_args

CHAT_RETRIEVAL: dict[str, Any] = {
    "relevance": "hybrid",
    "lexical_weight": 0.25,
    "recency_w": 0.0,
    "importance_w": 0.0,
    "idle_filter": False,
}
"""How the chat agent recalls: hybrid relevance alone, and no memory dropped for saying "idle".

Chosen by measurement on the labelled question set (``benchmarks/bench_quality.py``: 174
questions about the shipped Smallville personas with the memories that answer them: 86
English, 68 Chinese on a Chinese rendering of Maria Lopez, 20 Chinese asked of English
memories; default embedding model). Recall@10 per set, and nDCG@10 of all:

====================================================  =====  =====  ======  =====  =====
configuration                                         en     zh     zh>en   all    nDCG
====================================================  =====  =====  ======  =====  =====
simulation defaults (recency, relevance, importance)  .544   .358   .544    .471   .334
dense relevance only                                  .732   .629   .775    .697   .581
lexical relevance only                                .682   .578   .350    .603   .545
hybrid .2, relevance only                             .755   .701   .775    .736   .660
hybrid .25 (the library's default), relevance only    .774   .729   .775    .756   .668
hybrid .5, relevance only                             .748   .699   .775    .732   .658
this: hybrid .25, relevance only, idle filter off     .768   .729   .775    .753   .669
====================================================  =====  =====  ======  =====  =====

A chat asks about what was said, whenever it was said: the simulation's weights (recency,
relevance and importance alike) push the answer out for the latest and most poignant
memories. Of the lexical weights tried (.2, .25, .3, .35, .4, .5, .7, relevance only), .25
was best in both languages, and everything from .2 to .4 scored .736 to .756 (no knife
edge); on the halves of ``split_examples(examples, 0.5, seed=0)`` .25 is also the best of
.2, .25 and .3 on the training half (.716, against .708 and .706) and reaches .791 on the
held-out half (dense relevance alone .703, the simulation defaults .482). A little recency
or importance (weight .1) moved recall@10 by under .01, and not up reliably.

The original's idle filter drops every memory whose text holds "idle" (the simulation's
marker for an idle persona); in a chat that silently forgets "my laptop sits idle", so it is
off (recall@10 of all: .756 with it, .753 without). Measured with
``python benchmarks/bench_quality.py --config 'NAME={...}'`` on 2 shared, busy cores (the
quality figures are deterministic; only latencies vary).
"""


Preset = Literal["simulation", "conversation"]
"""A named set of retriever options: the simulation's settings, or :data:`CHAT_RETRIEVAL`."""

PRESET_NAMES: tuple[Preset, ...] = get_args(Preset)

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
