"""Forgetting a conversation turn re-keys the kept turns whose embedded text quoted it.

A turn is embedded with up to ``context_turns`` turns before it; once one of those is
forgotten, the kept turn's ``embedding_key`` is made again from the turns that remain (as an
add makes it) and embedded again, in the forget's own write. Every test runs on an embedded
Chroma folder and on a real PostgreSQL (the ``store`` fixture); the turns are Chinese.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

import numpy as np
import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from langchain_genmem import MemoryStream
from langchain_genmem.backends.base import StoredNode
from langchain_genmem.core.errors import ValidationError
from langchain_genmem.core.state import StreamState
from tests.support.fixtures import Store
from tests.support.forgotten import seen_ids

P = "林晓"
DIM = 16
START = datetime(2024, 3, 1, 21, 0)
TURNS = [("林晓", "静静！睡了没"), ("陈静", "没呢，在看书"), ("林晓", "看什么书呀"),
         ("陈静", "《三体》，第二部")]


def fake() -> DeterministicFakeEmbedding:
    return DeterministicFakeEmbedding(size=DIM)


def embedded(text: str) -> np.ndarray:
    """The fake model's vector of a text, as a store keeps it (float32)."""
    return np.asarray(fake().embed_documents([text])[0], dtype=np.float32)


def chat(store: Store, **kwargs: Any) -> tuple[MemoryStream, list[str]]:
    """A stream holding the four turns of one conversation, a minute apart; their ids."""
    kwargs.setdefault("embeddings", fake())
    stream = store.open(P, clock=lambda: START + timedelta(hours=1), **kwargs)
    ids = [stream.add_many([{"type": "event", "description": text, "speaker": who,
                             "conversation": "夜聊", "poignancy": 3,
                             "created": START + timedelta(minutes=i)}])[0].node_id
           for i, (who, text) in enumerate(TURNS)]
    return stream, ids


def key(stream: MemoryStream, node_id: str) -> str:
    return stream.get(node_id).embedding_key


def test_kept_turns_get_a_text_and_vector_without_the_forgotten_turn(store: Store) -> None:
    stream, ids = chat(store)
    before = {i: stream.vector(i).copy() for i in ids}
    assert key(stream, ids[1]) == "林晓: 静静！睡了没\n陈静: 没呢，在看书"
    report = stream.forget([ids[0]])
    assert report.rekeyed == (ids[1], ids[2]) and report.to_dict()["rekeyed"] == ids[1:3]
    assert key(stream, ids[1]) == "陈静: 没呢，在看书"
    assert key(stream, ids[2]) == "陈静: 没呢，在看书\n林晓: 看什么书呀"
    assert key(stream, ids[3]) == "陈静: 没呢，在看书\n林晓: 看什么书呀\n陈静: 《三体》，第二部"
    for node_id in ids[1:3]:
        assert not np.allclose(stream.vector(node_id), before[node_id])
        assert np.allclose(stream.vector(node_id), embedded(key(stream, node_id)))
    assert np.array_equal(stream.vector(ids[3]), before[ids[3]])  # never quoted it
    assert all("静静" not in n.embedding_key for n in stream.nodes())
    assert stream.committed.rekeyed == [(2, 3, stream.committed.rev)]


def test_the_new_texts_are_what_retrieval_finds(store: Store) -> None:
    stream, ids = chat(store)
    stream.update_settings(recency_w=0.0, importance_w=0.0)  # relevance alone ranks
    old_text = key(stream, ids[1])
    assert seen_ids(stream, old_text)[0] == ids[1]
    stream.forget([ids[0]])
    assert seen_ids(stream, key(stream, ids[1]))[0] == ids[1]
    assert seen_ids(stream, key(stream, ids[2]))[0] == ids[2]
    assert old_text not in stream.embeddings_by_key()
    assert key(stream, ids[1]) in stream.embeddings_by_key()


def test_other_streams_and_a_reopen_read_the_new_texts(store: Store) -> None:
    stream, ids = chat(store)
    other = store.open(P, embeddings=fake())  # caught up before the forget
    assert key(other, ids[2]).startswith("林晓: 静静")
    held = other.columns
    old_vector = held.vectors[held.row_of_number(3)].copy()
    stream.forget([ids[0]])
    other.refresh()
    for reader in (other, store.open(P, embeddings=fake()),
                   store.open(P, embeddings=fake(), lazy=True)):
        assert [key(reader, i) for i in ids[1:]] == [key(stream, i) for i in ids[1:]]
        assert np.allclose(reader.vector(ids[2]), stream.vector(ids[2]))
    assert not np.allclose(other.vector(ids[2]), old_vector)
    assert np.array_equal(held.vectors[held.row_of_number(3)], old_vector)  # one moment
    assert other.columns is not held
    stream.close()
    other.close()
    for _ in range(2):  # a folder's second open is from the snapshot saved at close
        again = store.open(P, embeddings=fake())
        assert [key(again, i) for i in ids[1:]] == [key(stream, i) for i in ids[1:]]
        assert np.allclose(again.vector(ids[1]), embedded("陈静: 没呢，在看书"))
        again.close()


def test_a_dry_run_reports_the_turns_it_would_re_key_and_changes_nothing(store: Store) -> None:
    stream, ids = chat(store)
    old = [key(stream, i) for i in ids]
    report = stream.forget([ids[0]], dry_run=True)
    assert report.rekeyed == (ids[1], ids[2]) and report.dry_run
    assert [key(stream, i) for i in ids] == old and stream.committed.rekeyed == []


def test_one_context_turn_re_keys_only_the_next_turn(store: Store) -> None:
    stream, ids = chat(store, context_turns=1)
    assert stream.forget([ids[1]]).rekeyed == (ids[2],)
    assert key(stream, ids[2]) == "林晓: 静静！睡了没\n林晓: 看什么书呀"  # the turn before now


def test_forgetting_the_whole_conversation_re_keys_nothing(store: Store) -> None:
    stream, ids = chat(store)
    report = stream.forget(conversation="夜聊")
    assert report.forgotten == tuple(ids) and report.rekeyed == ()
    assert "rekeyed" not in stream.committed.model_dump()


def test_a_turn_with_its_own_embedding_key_keeps_it(store: Store) -> None:
    stream, ids = chat(store)
    own = stream.add_many([{"type": "event", "description": "晚安", "speaker": "林晓",
                            "conversation": "夜聊", "poignancy": 1,
                            "embedding_key": "道晚安",
                            "created": START + timedelta(minutes=9)}])[0]
    assert stream.forget([ids[3]]).rekeyed == ()
    assert key(stream, own.node_id) == "道晚安"


def test_a_second_forget_re_keys_again_and_the_state_keeps_the_latest(store: Store) -> None:
    stream, ids = chat(store)
    other = store.open(P, embeddings=fake())
    first = stream.forget([ids[0]]).rev
    second = stream.forget([ids[1]])
    assert second.rekeyed == (ids[2], ids[3])
    assert key(stream, ids[2]) == "林晓: 看什么书呀"
    assert stream.committed.rekeyed == [(3, 4, second.rev)] and first != second.rev
    other.refresh()  # two forgets behind: reads each re-keyed row once
    assert [key(other, i) for i in ids[2:]] == [key(stream, i) for i in ids[2:]]


HOLDING: list[bool] = []
CALLS: list[bool] = []


class Watched(DeterministicFakeEmbedding):
    """Records, at each embedding of stored texts, whether the write right was held."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        CALLS.append(bool(HOLDING))
        return super().embed_documents(texts)


def test_the_new_texts_are_embedded_before_the_write_right_is_taken(
    store: Store, monkeypatch: pytest.MonkeyPatch,
) -> None:
    stream, ids = chat(store, embeddings=Watched(size=DIM))
    backend = stream.backend
    taken = backend.write_lock

    @contextmanager
    def recorded(persona: str) -> Iterator[None]:
        with taken(persona):
            HOLDING.append(True)
            try:
                yield
            finally:
                HOLDING.pop()

    monkeypatch.setattr(backend, "write_lock", recorded)
    CALLS.clear()
    stream.forget([ids[0]])
    assert CALLS == [False]
    assert np.allclose(stream.vector(ids[1]), embedded("陈静: 没呢，在看书"))


def test_a_text_another_writer_made_necessary_meanwhile_is_embedded_in_the_write(
    store: Store,
) -> None:
    stream, ids = chat(store, embeddings=Watched(size=DIM))
    other = store.open(P, embeddings=fake())
    late = {"type": "event", "description": "你也没睡？", "speaker": "陈静", "conversation": "夜聊",
            "poignancy": 2, "created": START + timedelta(seconds=30)}  # said before turn 2
    original = Watched.embed_documents
    added: list[str] = []

    def add_meanwhile(self: Watched, texts: list[str]) -> list[list[float]]:
        if not added:  # the first embedding, before the write right
            added.append(other.add_many([late])[0].node_id)
        return original(self, texts)

    CALLS.clear()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Watched, "embed_documents", add_meanwhile)
        report = stream.forget([ids[0]])
    assert len(CALLS) == 2  # the texts planned first, then the ones the late turn changed
    assert report.rekeyed == (ids[1], ids[2], added[0])  # the late turn quoted turn 1 too
    assert key(stream, added[0]) == "陈静: 你也没睡？"
    assert key(stream, ids[1]) == "陈静: 你也没睡？\n陈静: 没呢，在看书"
    assert np.allclose(stream.vector(ids[1]), embedded(key(stream, ids[1])))
    assert key(store.open(P, embeddings=fake()), ids[1]) == key(stream, ids[1])


def test_a_backend_refuses_re_keyed_nodes_the_state_does_not_list(store: Store) -> None:
    stream, ids = chat(store)
    node = stream.get(ids[1]).model_copy(update={"embedding_key": "陈静: 没呢，在看书"})
    replaced = [StoredNode(node, embedded(node.embedding_key))]
    state = stream.committed.forgetting([1])
    with pytest.raises(ValidationError, match="re-keyed"), stream.backend.write_lock(P):
        stream.backend.forget(P, [1], state, replaced)
    assert len(store.open(P, embeddings=fake())) == 4  # nothing was forgotten


def test_rekeying_keeps_each_number_at_its_latest_revision() -> None:
    state = StreamState(node_count=9, rev=4).forgetting([1]).rekeying([2, 3, 5])
    assert state.rekeyed == [(2, 3, 5), (5, 5, 5)]
    state = state.forgetting([3]).rekeying([5, 6])
    assert state.rekeyed == [(2, 2, 5), (5, 6, 6)]
    assert state.rekeyed_since(5) == [5, 6] and state.rekeyed_since(4) == [2, 5, 6]
    assert StreamState.model_validate_json(state.model_dump_json()) == state
    assert "rekeyed" not in StreamState().model_dump_json()
