"""Looking for forgotten memories through every way a stream is read.

`assert_forgotten` searches one stream (in this process, in a child process, after a reopen)
for memories that were forgotten, retrieving first (a retrieval catches up with what other
streams committed, as a reader of another process does): by id, by their exact texts (the fake
embeddings make a text's own vector the query's, so dense retrieval would rank it first) and by
their keywords. `memories` seeds a persona with Chinese and English memories, conversation
turns and thoughts citing them, whose texts and keywords are unique, so a hit is never a
coincidence. """

from __future__ import annotations

import json
import tempfile
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from langchain_genmem.backends.base import ranking_of
from langchain_genmem.core.errors import UnknownNodeError
from langchain_genmem.interop.generative_agents import dump_associative_memory
from langchain_genmem.memory.stats import stream_stats
from langchain_genmem.memory.stream import MemoryStream
from langchain_genmem.retrieval.retrievers import GenerativeAgentsRetriever

__all__ = ["ALL_TYPES", "START", "Seeded", "assert_forgotten", "memories", "seen_ids"]

START = datetime(2023, 2, 13, 8, 0)
ALL_TYPES = ("event", "thought", "chat")


class Seeded(dict[str, str]):
    """``{name: node_id}`` of the seeded memories, with their texts and keywords."""

    text: dict[str, str]
    keyword: dict[str, str]


SEED: list[tuple[str, dict[str, Any]]] = [
    ("library", {"type": "event", "description": "玛丽亚在图书馆学量子物理",
                 "keywords": ["量子物理"], "poignancy": 4}),
    ("breakfast", {"type": "event", "description": "Maria eats a blueberry pancake",
                   "keywords": ["pancake"], "poignancy": 2}),
    ("turn1", {"type": "event", "description": "克劳斯说他明天去上海", "keywords": ["上海"],
               "conversation": "chat-上海", "speaker": "克劳斯", "poignancy": 3}),
    ("turn2", {"type": "event", "description": "Maria answers that Shanghai is rainy",
               "keywords": ["shanghai"], "conversation": "chat-上海", "speaker": "Maria",
               "poignancy": 3}),
    ("cafe", {"type": "event", "description": "伊莎贝拉在咖啡馆筹备情人节派对",
              "keywords": ["情人节"], "poignancy": 5}),
]
THOUGHTS: list[tuple[str, dict[str, Any], list[str]]] = [
    ("insight", {"type": "thought", "description": "玛丽亚热爱量子力学研究",
                 "keywords": ["量子力学"], "poignancy": 6}, ["library"]),
    ("deeper", {"type": "thought", "description": "Maria may become a quantum physicist",
                "keywords": ["physicist"], "poignancy": 7}, ["insight", "breakfast"]),
    ("travel", {"type": "thought", "description": "克劳斯喜欢旅行去上海",
                "keywords": ["旅行"], "poignancy": 5}, ["turn1"]),
]


def memories(stream: MemoryStream) -> Seeded:
    """Seed the stream: five events (two turns of one conversation), three thoughts.

    ``insight`` cites ``library``; ``deeper`` cites ``insight`` and ``breakfast``; ``travel``
    cites ``turn1``. Each memory is an hour after the one before, from :data:`START`.

    Returns:
        The ids by name, with ``.text`` and ``.keyword`` by name.
    """
    seeded = Seeded()
    seeded.text, seeded.keyword = {}, {}
    at = START
    for name, item in SEED:
        node = stream.add_many([{**item, "created": at}])[0]
        seeded[name] = node.node_id
        at += timedelta(hours=1)
    for name, item, cites in THOUGHTS:
        node = stream.add_many([{**item, "created": at,
                                 "evidence": [seeded[c] for c in cites]}])[0]
        seeded[name] = node.node_id
        at += timedelta(hours=1)
    for name, item in [*SEED, *((n, i) for n, i, _ in THOUGHTS)]:
        seeded.text[name] = item["description"]
        seeded.keyword[name] = item["keywords"][0]
    return seeded


def seen_ids(stream: MemoryStream, query: str, **retriever: Any) -> list[str]:
    """The ids a retrieval of every memory type returns for ``query`` (k=50, no access)."""
    r = GenerativeAgentsRetriever(memory_stream=stream, k=50, types=ALL_TYPES,
                                  update_access=False, **retriever)
    return [d.metadata["node_id"] for d in r.invoke(query)]


def assert_forgotten(
    stream: MemoryStream, ids: Sequence[str], texts: Sequence[str], keywords: Sequence[str],
) -> None:
    """Assert no read of the stream returns or counts the forgotten memories.

    Args:
        stream: the stream (any backend; lazy or not).
        ids: the forgotten ids.
        texts: their descriptions.
        keywords: keywords only forgotten memories had.
    """
    gone = set(ids)
    if ranking_of(stream.backend) is not None:  # before anything loads a lazy stream
        for text in texts:
            assert not gone & set(seen_ids(stream, text, score_in="database"))
    for text in texts:  # a retrieval catches up with what other streams committed
        for mode in ("dense", "lexical", "hybrid"):
            assert not gone & set(seen_ids(stream, text, relevance=mode)), (mode, text)
    for node_id in ids:
        assert node_id not in stream
        with pytest.raises(UnknownNodeError, match=node_id):
            stream.get(node_id)
    live = stream.nodes()
    assert len(stream) == len(live) == stream.committed.live_count
    assert not gone & {n.node_id for n in live}
    assert not {n.description for n in live} & set(texts)
    for n in live:  # evidence names no forgotten memory
        if isinstance(n.filling, list):
            assert not gone & {x for x in n.filling if isinstance(x, str)}, n.node_id
    for kw in keywords:
        found = [*stream.retrieve_relevant_events(kw, kw, kw),
                 *stream.retrieve_relevant_thoughts(kw, kw, kw)]
        assert not gone & {n.node_id for n in found}, kw
        assert all(kw.lower() not in m for m in stream.kw_strength.values()), kw
        assert all(kw.lower() not in m for m in stream.keyword_index.values()), kw
    perceived = [n for n in live if n.type == "event"][:2]
    for related in stream.keyword_retrieve(perceived).values():
        assert not gone & {n.node_id for n in [*related["events"], *related["thoughts"]]}
    assert not set(texts) & set(stream.embeddings_by_key())
    stats = stream_stats(stream, top=100)
    assert stats["memories"] == len(live) == sum(stats["types"].values())
    assert not any(set(keywords) & set(m) for m in stats["keyword_strength"].values())
    with tempfile.TemporaryDirectory() as folder:
        dump_associative_memory(stream, Path(folder) / "associative_memory")
        exported = "".join(p.read_text(encoding="utf-8") for p in Path(folder).rglob("*.json"))
        nodes = json.loads((Path(folder) / "associative_memory" / "nodes.json").read_text(
            encoding="utf-8"))
    assert len(nodes) == len(live)
    for text in texts:
        assert text not in exported
