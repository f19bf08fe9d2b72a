"""Writes that can be retried: an idempotency key makes a repeated write store nothing new.

Every test runs on an embedded Chroma folder and on a real PostgreSQL (the `store` fixture):
the key is committed with the memories, so a second stream (another process or replica)
and a reopened one find it.
"""

from __future__ import annotations

import asyncio

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from langchain_genmem import IdempotencyKeyReusedError, MemoryStream, ValidationError
from langchain_genmem.memory import idempotency
from tests.support.fixtures import Store

P = "玛丽亚"
DIM = 16


def fake() -> DeterministicFakeEmbedding:
    return DeterministicFakeEmbedding(size=DIM)


def opened(store: Store, **kwargs: object) -> MemoryStream:
    return store.open(P, embeddings=fake(), **kwargs)


BATCH = [
    {"type": "event", "description": "玛丽亚在图书馆读书", "poignancy": 3},
    {"type": "thought", "description": "她喜欢安静", "poignancy": 5, "evidence": ["node_1"]},
]


def test_same_key_twice_stores_once_and_returns_the_first_write(store: Store) -> None:
    stream = opened(store)
    first = stream.add_many(BATCH, idempotency_key="k-1")
    again = stream.add_many(BATCH, idempotency_key="k-1")
    assert [n.node_id for n in first] == ["node_1", "node_2"]
    assert again == first
    assert len(stream) == 2 and stream.committed.node_count == 2
    one = stream.add_event("门开了", poignancy=2, idempotency_key="k-2")
    assert stream.add_event("门开了", poignancy=2, idempotency_key="k-2") == one
    assert len(stream) == 3


def test_same_key_other_memories_is_refused_and_writes_nothing(store: Store) -> None:
    stream = opened(store)
    stream.add_many(BATCH, idempotency_key="k-1")
    rev = stream.committed.rev
    other = [{**BATCH[0], "description": "玛丽亚去了公园"}]
    with pytest.raises(IdempotencyKeyReusedError, match="'k-1' was used by an earlier write"):
        stream.add_many(other, idempotency_key="k-1")
    with pytest.raises(IdempotencyKeyReusedError):
        stream.add_event("门开了", poignancy=2, idempotency_key="k-1")
    assert stream.committed.rev == rev and len(stream) == 2


def test_a_key_is_seen_by_another_stream_and_after_a_reopen(store: Store) -> None:
    writer, other = opened(store), opened(store)
    first = writer.add_many(BATCH, idempotency_key="shared")
    assert other.add_many(BATCH, idempotency_key="shared") == first  # other process/replica
    writer.close()
    reopened = opened(store)
    assert reopened.add_many(BATCH, idempotency_key="shared") == first
    assert asyncio.run(reopened.aadd_many(BATCH, idempotency_key="shared")) == first
    assert len(reopened) == 2 and reopened.committed.node_count == 2


def test_a_check_under_the_write_lock_catches_a_write_made_meanwhile(store: Store) -> None:
    """A stream that read the state before another committed the key still writes once."""
    stream, other = opened(store), opened(store)
    claim = idempotency.Claim.of("late", BATCH)
    assert stream._writer.replay(claim) is None  # not yet committed: scores and embeds
    prepared = stream._writer.prepare(BATCH, None)
    first = other.add_many(BATCH, idempotency_key="late")
    texts = stream._writer.texts_to_embed(prepared)
    vectors = stream._writer.pair(texts, fake().embed_documents(texts))
    assert stream._writer.commit(prepared, [], vectors, claim) == first
    assert len(stream) == 2


def test_replay_leaves_out_memories_forgotten_since(store: Store) -> None:
    stream = opened(store)
    stream.add_many([BATCH[0], {**BATCH[0], "description": "又一件事"}], idempotency_key="f")
    stream.forget(["node_1"])
    again = stream.add_many([BATCH[0], {**BATCH[0], "description": "又一件事"}],
                            idempotency_key="f")
    assert [n.node_id for n in again] == ["node_2"]
    assert stream.committed.node_count == 2


def test_only_the_latest_keys_are_kept(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(idempotency, "KEYS_KEPT", 2)
    stream = opened(store)
    for i in range(3):
        stream.add_event(f"事件 {i}", poignancy=1, idempotency_key=f"k{i}")
    assert [e[0] for e in stream.committed.idempotency] == ["k1", "k2"]
    stream.add_event("事件 0", poignancy=1, idempotency_key="k0")  # forgotten: written again
    assert len(stream) == 4


@pytest.mark.parametrize("key", ["", "has space", "x" * 129, "中文", 7])
def test_bad_keys_are_refused_naming_the_field(store: Store, key: object) -> None:
    stream = opened(store)
    with pytest.raises(ValidationError, match="^idempotency_key: ") as caught:
        stream.add_many(BATCH, idempotency_key=key)  # type: ignore[arg-type]
    assert caught.value.field == "idempotency_key"
    assert len(stream) == 0


def test_writes_without_a_key_store_no_key(store: Store) -> None:
    stream = opened(store)
    stream.add_many(BATCH)
    stream.add_many(BATCH[:1])
    assert len(stream) == 3 and stream.committed.idempotency == []
    assert "idempotency" not in stream.committed.model_dump()
