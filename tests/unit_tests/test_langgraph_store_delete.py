"""A delete that stops between its forget and the write of its key records, and memories
forgotten outside the store: the key's record names a forgotten memory, and no reader sees it
(`get`, `search`, `list_namespaces`, a retriever over the persona, another store opened on
the same data); the next write drops the record."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from langchain_genmem import (
    GenerativeAgentsRetriever,
    GenerativeAgentsStore,
    MemoryStream,
    SimulationClock,
)
from langchain_genmem.langgraph_store import REGISTRY
from tests.support.fixtures import Store, open_store

PERSONA = "伊莎贝拉"
PRIVATE = ("private", PERSONA)
FOOD = ("food", PERSONA)
OLD_PHONE = "我的电话号码是一三八零零一三八零零零"
NEW_PHONE = "我的新电话号码是一三九零零一三九零零零"
DUMPLINGS = "我喜欢饺子"


@pytest.fixture(params=["chroma", "postgres"])
def backend(request, tmp_path) -> Iterator[Store]:
    with open_store(request, request.param, tmp_path) as store:
        yield store


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


def test_a_delete_stopped_after_its_forget_is_unseen_and_cleaned_by_the_next_write(
    backend, monkeypatch
):
    store, clock = filled(backend)
    written = MemoryStream.set_extra

    def crash(self: MemoryStream, **values: object) -> None:
        raise RuntimeError("the process stopped here")

    monkeypatch.setattr(MemoryStream, "set_extra", crash)
    with pytest.raises(RuntimeError, match="stopped here"):
        store.delete(PRIVATE, "phone")
    monkeypatch.setattr(MemoryStream, "set_extra", written)
    stream = store.stream(PERSONA)
    assert len(stream) == 1  # the forget was committed: both versions are gone
    assert "phone" in records(store)['["private", "伊莎贝拉"]']  # its record was not rewritten
    assert_unseen(store)
    store.close()

    again = opened(backend, clock)  # as a process started after the stop reads it
    assert_unseen(again)
    again.put(FOOD, "drinks", {"content": "我喜欢茉莉花茶"})  # the next write drops the record
    assert records(again) == {'["food", "伊莎贝拉"]': ["drinks", "likes"]}
    again.put(PRIVATE, "phone", {"content": NEW_PHONE})  # a new item, not a new version
    item = again.get(PRIVATE, "phone")
    assert item.created_at == item.updated_at and item.value == {"content": NEW_PHONE}
    assert "superseded" not in again.stream(PERSONA).committed.extra[REGISTRY][
        '["private", "伊莎贝拉"]']["phone"]
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
    again.delete(PRIVATE, "phone")  # deleting what is gone: no error, the record goes
    assert records(again) == {'["food", "伊莎贝拉"]': ["likes"]}
    assert_unseen(again)
    again.close()
