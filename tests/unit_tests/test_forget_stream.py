"""Forgetting through MemoryStream: what is forgotten is gone from every read, and stays gone.

Every test runs on an embedded Chroma folder and on a real PostgreSQL (the `store` fixture).
A forgotten memory is searched for by id, by its exact text (dense, lexical and hybrid
retrieval, and the database's ranking), by its keywords, in stats and in an export, in the
stream that forgot it, in another stream of the store, after a reopen and in a lazy stream.
"""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from langchain_genmem import ForgetReport, MemoryStream
from langchain_genmem.backends import snapshot
from langchain_genmem.core.errors import UnknownNodeError, ValidationError
from langchain_genmem.interop.generative_agents import (
    dump_associative_memory,
    load_associative_memory,
)
from tests.support.fixtures import Store
from tests.support.forgotten import START, Seeded, assert_forgotten, memories, seen_ids

P = "玛丽亚"
DIM = 16


def fake() -> DeterministicFakeEmbedding:
    return DeterministicFakeEmbedding(size=DIM)


def seeded(store: Store) -> tuple[MemoryStream, Seeded]:
    stream = store.open(P, embeddings=fake(), clock=lambda: START + timedelta(days=1))
    return stream, memories(stream)


def gone(seeds: Seeded, *names: str) -> tuple[list[str], list[str], list[str]]:
    """ids, texts and keywords of the named memories."""
    return ([seeds[n] for n in names], [seeds.text[n] for n in names],
            [seeds.keyword[n] for n in names])


def test_forget_by_id_takes_the_thoughts_citing_it_recursively(store: Store) -> None:
    stream, seeds = seeded(store)
    other = store.open(P, embeddings=fake())  # another stream, caught up before the forget
    assert seeds["library"] in seen_ids(other, seeds.text["library"])
    report = stream.forget([seeds["library"]])
    assert isinstance(report, ForgetReport)
    assert report.forgotten == (seeds["library"], seeds["insight"], seeds["deeper"])
    assert report.derived == (seeds["insight"], seeds["deeper"])
    assert (report.kept, report.dry_run, report.live_count) == ((), False, 5)
    assert report.rev == stream.committed.rev and len(report) == 3
    names = ("library", "insight", "deeper")
    assert_forgotten(stream, *gone(seeds, *names))
    assert len(stream) == 5 and stream.committed.node_count == 8
    assert_forgotten(other, *gone(seeds, *names))  # caught up at its next read
    assert len(other) == 5
    reopened = store.open(P, embeddings=fake())
    assert_forgotten(reopened, *gone(seeds, *names))
    assert [n.node_id for n in reopened.nodes()] == [n.node_id for n in stream.nodes()]


def test_keep_derived_keeps_the_thoughts_without_the_forgotten_evidence(store: Store) -> None:
    stream, seeds = seeded(store)
    report = stream.forget([seeds["library"], seeds["breakfast"]], keep_derived=True)
    assert report.forgotten == (seeds["library"], seeds["breakfast"])
    assert report.derived == ()
    assert report.kept == (seeds["insight"], seeds["deeper"])
    assert stream.get(seeds["insight"]).filling == []
    assert stream.get(seeds["deeper"]).filling == [seeds["insight"]]
    assert stream.get(seeds["deeper"]).depth == 2  # as it was made
    assert_forgotten(stream, *gone(seeds, "library", "breakfast"))
    stream.close()
    for again in (store.open(P, embeddings=fake()), store.open(P, embeddings=fake(), lazy=True)):
        assert again.get(seeds["deeper"]).filling == [seeds["insight"]]
        assert_forgotten(again, *gone(seeds, "library", "breakfast"))


def test_selectors_combine_with_and(store: Store) -> None:
    stream, seeds = seeded(store)
    by_conversation = stream.forget(conversation="chat-上海", speaker="克劳斯", dry_run=True)
    assert by_conversation.forgotten == (seeds["turn1"], seeds["travel"])
    assert by_conversation.dry_run and by_conversation.rev is None and len(stream) == 8
    assert stream.forget(conversation="chat-上海", text="SHANGHAI").forgotten == (seeds["turn2"],)
    assert_forgotten(stream, *gone(seeds, "turn2"))
    window = stream.forget(created_after=START + timedelta(hours=2),
                           created_before=START + timedelta(hours=5), types=["event"])
    assert window.forgotten == (seeds["turn1"], seeds["cafe"], seeds["travel"])
    assert window.derived == (seeds["travel"],)
    assert_forgotten(stream, *gone(seeds, "turn1", "cafe", "travel"))
    named = stream.forget([seeds["breakfast"], seeds["insight"]], types="thought")
    assert named.forgotten == (seeds["insight"], seeds["deeper"])
    assert stream.forget(text="没有这段记忆").forgotten == ()  # nothing matches: nothing written
    assert [n.description for n in stream.nodes()] == [seeds.text["breakfast"],
                                                       seeds.text["library"]]


def test_forget_all_then_numbering_goes_on_after_the_highest_number(store: Store) -> None:
    stream, seeds = seeded(store)
    stream.forget([seeds["travel"]])  # the newest: the highest number is forgotten
    added = stream.add_event("玛丽亚去了博物馆", poignancy=3)
    assert added.node_id == "node_9" and added.type_count == 6
    report = stream.forget_all()
    assert len(report) == 8 and report.live_count == 0 and len(stream) == 0
    assert stream.nodes() == [] and seen_ids(stream, "玛丽亚") == []
    assert stream.kw_strength == {"event": {}, "thought": {}}
    assert stream.forget_all().forgotten == ()  # nothing left: nothing written
    again = store.open(P, embeddings=fake())
    assert len(again) == 0 and again.committed.node_count == 9
    new = again.add_thought("玛丽亚重新开始", poignancy=5)
    assert (new.node_id, new.type_count, new.depth) == ("node_10", 4, 1)
    assert [n.node_id for n in store.open(P, embeddings=fake()).nodes()] == ["node_10"]


def test_bad_input_is_one_error_naming_it_and_forgets_nothing(store: Store) -> None:
    stream, seeds = seeded(store)
    cases = [
        ({}, ValidationError, "nothing selected"),
        ({"node_ids": "node_1"}, ValidationError, "node_ids: expected a list"),
        ({"node_ids": ["node_1", "node_99"]}, UnknownNodeError, "node_99"),
        ({"node_ids": ["节点"]}, UnknownNodeError, "节点"),
        ({"created_after": "昨天"}, ValidationError, "created_after"),
        ({"types": ["dream"]}, ValidationError, "types: 'dream'"),
        ({"speaker": ""}, ValidationError, "speaker"),
        ({"text": "   "}, ValidationError, "text"),
    ]
    for kwargs, error, words in cases:
        with pytest.raises(error, match=words):
            stream.forget(**kwargs)
    assert len(stream) == 8 and stream.committed.forgotten == []
    stream.forget([seeds["cafe"]])
    with pytest.raises(UnknownNodeError, match=seeds["cafe"]):  # forgotten already
        stream.forget([seeds["cafe"], seeds["breakfast"]])
    assert len(stream) == 7
    with pytest.raises(UnknownNodeError, match=seeds["cafe"]):
        stream.add_thought("引用了忘记的记忆", poignancy=3, evidence=[seeds["cafe"]])


def test_the_reflection_trigger_gets_back_what_forgotten_events_counted(store: Store) -> None:
    stream, seeds = seeded(store)
    state = stream.committed
    assert (state.importance_trigger_curr, state.importance_ele_n) == (150 - 17, 5)
    stream.reset_reflection_trigger()
    later = stream.add_event("玛丽亚丢了钥匙", poignancy=8, keywords=["钥匙"])
    stream.forget([seeds["library"], later.node_id], keep_derived=True)
    state = stream.committed  # the event counted since the reset gives its 8 back; the other
    assert (state.importance_trigger_curr, state.importance_ele_n) == (150, 0)  # counted before


def test_async_forget(store: Store) -> None:
    stream, seeds = seeded(store)
    report = asyncio.run(stream.aforget([seeds["cafe"]]))
    assert report.forgotten == (seeds["cafe"],)
    assert asyncio.run(stream.aforget_all(dry_run=True)).live_count == 0
    assert len(stream) == 7


def test_a_lazy_stream_and_the_database_ranking_never_see_it(store: Store) -> None:
    stream, seeds = seeded(store)
    lazy = store.open(P, embeddings=fake(), lazy=True)
    assert len(lazy) == 8
    stream.forget([seeds["cafe"]])
    lazy.refresh()
    assert len(lazy) == 7 and lazy.lazy
    assert_forgotten(lazy, *gone(seeds, "cafe"))
    forgetting_lazy = store.open(P, embeddings=fake(), lazy=True)
    assert forgetting_lazy.forget([seeds["breakfast"]], keep_derived=True).kept == (
        seeds["deeper"],)
    assert forgetting_lazy.lazy and forgetting_lazy._mirror.cache.n == 0  # holds none again
    assert len(forgetting_lazy) == 6 and seeds["breakfast"] not in forgetting_lazy
    assert_forgotten(store.open(P, embeddings=fake(), lazy=True),
                     *gone(seeds, "cafe", "breakfast"))


def test_a_snapshot_after_a_forget_holds_no_forgotten_text(store: Store) -> None:
    if store.backend != "chroma":
        pytest.skip("snapshots are saved beside embedded folders only")
    stream, seeds = seeded(store)
    stream.forget([seeds["cafe"]])
    stream.close()
    files = list((Path(store.kwargs()["path"]) / snapshot.FOLDER).glob("*"))
    assert files
    raw = b"".join(f.read_bytes() for f in files)
    assert seeds.text["cafe"].encode() not in raw and seeds.keyword["cafe"].encode() not in raw
    assert seeds.text["turn2"].encode() in raw
    reopened = store.open(P, embeddings=fake())
    numbers = reopened.columns.node_number[: reopened.columns.n]
    assert numbers.tolist() == [1, 2, 3, 4, 6, 7, 8]
    assert reopened.row_of(seeds["insight"]) == 4 and reopened.row_of(seeds["cafe"]) is None
    assert_forgotten(reopened, *gone(seeds, "cafe"))


def test_the_export_is_numbered_without_gaps_and_loads_as_the_original_does(
    store: Store, tmp_path: Path,
) -> None:
    stream, seeds = seeded(store)
    stream.forget([seeds["breakfast"], seeds["turn1"]], keep_derived=True)
    folder = tmp_path / "Maria" / "bootstrap_memory" / "associative_memory"
    dump_associative_memory(stream, folder)
    nodes = json.loads((folder / "nodes.json").read_text(encoding="utf-8"))
    vectors = json.loads((folder / "embeddings.json").read_text(encoding="utf-8"))
    assert list(nodes) == [f"node_{n}" for n in range(6, 0, -1)]
    loaded = _original_load(nodes, vectors)
    assert loaded["node_5"] == ("thought", 2, ["node_4"])  # deeper cited insight (node_6 then)
    assert loaded["node_6"] == ("thought", 1, [])  # travel cited the forgotten turn
    assert (nodes["node_2"]["description"], nodes["node_2"]["type_count"]) == (
        seeds.text["turn2"], 2)
    back = load_associative_memory(folder, persona="Maria", path=str(tmp_path / "again"),
                                   embeddings=fake(), progress=False)
    assert [n.description for n in back.nodes()] == [n.description for n in stream.nodes()]
    assert [n.filling for n in back.nodes()] == [nodes[f"node_{n}"]["filling"]
                                                for n in range(6, 0, -1)]
    assert np.allclose(back.vector("node_1"), stream.vector(seeds["library"]), atol=1e-6)


def _original_load(nodes: dict, vectors: dict) -> dict[str, tuple[str, int, list]]:
    """What the original's ``AssociativeMemory.__init__`` does with the files, in short.

    It reads ``node_1`` .. ``node_{len}`` in order, numbers each node itself (its count of
    nodes so far + 1), looks each embedding_key up in embeddings.json and each evidence id
    of a thought up among the nodes read before (a KeyError otherwise) for its depth.
    """
    held: dict[str, tuple[str, int, list]] = {}
    for count in range(len(nodes)):
        node_id = f"node_{count + 1}"
        details = nodes[node_id]
        assert details["node_count"] == len(held) + 1
        vectors[details["embedding_key"]]  # noqa: B018 - a KeyError if missing
        depth = 0
        if details["type"] == "thought":
            depth = 1 + max((held[i][1] for i in details["filling"]), default=0)
        held[node_id] = (details["type"], depth, details["filling"])
    return held


def test_a_later_turn_no_longer_quotes_a_forgotten_turn(store: Store) -> None:
    stream, seeds = seeded(store)
    stream.forget([seeds["turn1"]])
    assert all(seeds.text["turn1"] not in n.embedding_key for n in stream.nodes())


def test_columns_taken_before_a_forget_keep_lexical_scores_of_their_own_rows(
    store: Store,
) -> None:
    stream, seeds = seeded(store)
    before = stream.columns  # a retrieval in another thread holds these
    stream.lexical_index()
    stream.forget([seeds["library"]], keep_derived=True)
    old = stream.lexical_index(before).scores("blueberry pancake", np.arange(before.n))
    assert int(np.argmax(old)) == before.row_of_number(2) == 1
    now = stream.lexical_index()
    # rows keep their numbers through a forget: the columns taken before share the index
    assert now is stream.lexical_index(stream.columns) is stream.lexical_index(before)
    after = stream.columns
    assert after is not before and after.n == before.n and after.dead == before.dead + 1
    library = before.row_of_number(1)
    assert library is not None and after.row_of_number(1) is None
    assert before.alive[library] and not after.alive[library]
    live = after.live_rows()
    new = now.scores("blueberry pancake", live)
    assert live[int(np.argmax(new))] == after.row_of_number(2) == 1
    stream.compact()  # renumbered: the columns taken before get an index of their own
    assert stream.columns.row_of_number(2) == 0
    assert stream.lexical_index(before) is not stream.lexical_index()
