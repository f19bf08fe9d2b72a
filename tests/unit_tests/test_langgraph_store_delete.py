"""A delete is one write: its forget and its key records, all or nothing. A batch's puts
are a second write: stopped before them, the deletes are done and nothing shows the deleted
keys. A memory forgotten outside the store leaves its key's record naming a forgotten
memory: no reader sees it (`get`, `search`, `list_namespaces`, a retriever over the persona,
another store opened on the same data) and the next write drops the record."""

from __future__ import annotations

from datetime import datetime

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding
from langgraph.store.base import PutOp

from langchain_genmem import (
    GenerativeAgentsRetriever,
    GenerativeAgentsStore,
    MemoryStream,
    SimulationClock,
    StorageError,
)
from langchain_genmem.langgraph_store import REGISTRY
from tests.support.fixtures import Store

PERSONA = "伊莎贝拉"
PRIVATE = ("private", PERSONA)
FOOD = ("food", PERSONA)
PRIVATE_TEXT, FOOD_TEXT = '["private", "伊莎贝拉"]', '["food", "伊莎贝拉"]'  # as records hold them
OLD_PHONE = "我的电话号码是一三八零零一三八零零零"
NEW_PHONE = "我的新电话号码是一三九零零一三九零零零"
DUMPLINGS = "我喜欢饺子"


def opened(backend: Store, clock: SimulationClock) -> GenerativeAgentsStore:
    return GenerativeAgentsStore(embeddings=DeterministicFakeEmbedding(size=32), clock=clock,
                                 persona_for=lambda ns: ns[-1], **backend.kwargs())


def filled(backend: Store) -> tuple[GenerativeAgentsStore, SimulationClock]:
    """The phone number in two versions (the new supersedes the old), and a food item."""
    clock = SimulationClock(datetime(2023, 2, 13, 8, 0))
    store = opened(backend, clock)
    store.put(PRIVATE, "phone", {"content": OLD_PHONE})
    clock.advance(hours=1)
    store.put(PRIVATE, "phone", {"content": NEW_PHONE})
    store.put(FOOD, "likes", {"content": DUMPLINGS})
    return store, clock


def records(store: GenerativeAgentsStore) -> dict[str, list[str]]:
    """The key records the persona's state holds, by namespace."""
    registry = store.stream(PERSONA).committed.extra.get(REGISTRY, {})
    return {ns: sorted(entries) for ns, entries in registry.items()}


def assert_unseen(store: GenerativeAgentsStore) -> None:
    """No reader finds the phone number: the store's, and a retriever over the persona."""
    assert store.get(PRIVATE, "phone") is None
    assert store.search(PRIVATE) == []
    assert store.search(PRIVATE, query="电话号码") == []
    assert [i.key for i in store.search((), query="电话号码")] == ["likes"]
    assert [i.key for i in store.search(())] == ["likes"]
    assert store.list_namespaces() == [FOOD]
    everything = GenerativeAgentsRetriever(stream=store.stream(PERSONA), k=10,
                                           include_superseded=True, include_expired=True)
    assert [d.page_content for d in everything.invoke("电话号码")] == [DUMPLINGS]


def test_a_delete_is_one_write_all_or_nothing(backend, monkeypatch):
    store, clock = filled(backend)
    stream = store.stream(PERSONA)

    def stopped(*args: object, **kwargs: object) -> None:
        raise RuntimeError("the store stopped here")

    with monkeypatch.context() as patch:
        patch.setattr(store.backend, "forget", stopped)  # the delete's one write fails
        with pytest.raises(StorageError, match="stopped here"):
            store.delete(PRIVATE, "phone")
    assert store.get(PRIVATE, "phone").value == {"content": NEW_PHONE}  # nothing changed
    assert len(stream) == 3 and "phone" in records(store)[PRIVATE_TEXT]
    before = stream.committed.rev
    with monkeypatch.context() as patch:
        patch.setattr(MemoryStream, "set_extra", stopped)  # no second write to fail
        store.delete(PRIVATE, "phone")
    assert stream.committed.rev == before + 1
    assert len(stream) == 1 and records(store) == {FOOD_TEXT: ["likes"]}
    assert_unseen(store)
    store.close()
    again = opened(backend, clock)
    assert records(again) == {FOOD_TEXT: ["likes"]}
    assert_unseen(again)
    again.close()


def test_a_batch_stopped_between_its_deletes_and_its_puts_shows_the_deletes(backend,
                                                                               monkeypatch):
    """A batch's deletes are one write and its puts another: a stop between leaves the
    deletes done, their key records with them, and none of the puts."""
    store, clock = filled(backend)

    def stopped(*args: object, **kwargs: object) -> None:
        raise RuntimeError("the process stopped here")

    with monkeypatch.context() as patch:
        patch.setattr(MemoryStream, "add_many", stopped)
        with pytest.raises(RuntimeError, match="stopped here"):
            store.batch([PutOp(PRIVATE, "phone", None),
                         PutOp(FOOD, "drinks", {"content": "我喜欢茉莉花茶"})])
    assert records(store) == {FOOD_TEXT: ["likes"]} and len(store.stream(PERSONA)) == 1
    assert_unseen(store)
    store.close()
    again = opened(backend, clock)
    assert_unseen(again)
    again.close()


def test_memories_forgotten_outside_the_store_leave_its_items(backend):
    store, clock = filled(backend)
    assert store.get(PRIVATE, "phone").value == {"content": NEW_PHONE}  # read before
    report = store.stream(PERSONA).forget(text="电话号码")  # e.g. genmem forget --text
    assert len(report.forgotten) == 2
    assert_unseen(store)
    store.close()
    again = opened(backend, clock)
    assert_unseen(again)
    assert "phone" in records(again)[PRIVATE_TEXT]  # still there, naming a forgotten memory
    again.put(FOOD, "drinks", {"content": "我喜欢茉莉花茶"})  # the next write drops it
    assert records(again) == {FOOD_TEXT: ["drinks", "likes"]}
    again.delete(PRIVATE, "phone")  # deleting what is gone: no error
    again.put(PRIVATE, "phone", {"content": NEW_PHONE})  # a new item, not a new version
    item = again.get(PRIVATE, "phone")
    assert item.created_at == item.updated_at and item.value == {"content": NEW_PHONE}
    assert "superseded" not in again.stream(PERSONA).committed.extra[REGISTRY][
        PRIVATE_TEXT]["phone"]
    again.close()
