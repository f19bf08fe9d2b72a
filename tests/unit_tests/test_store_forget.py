"""GenerativeAgentsStore.delete forgets: afterwards no retriever over the persona finds the item,
exports leave it out and its key record (with the value) is gone; keep_history=True keeps the
memories as history, as delete did before."""

from __future__ import annotations

import json
from datetime import datetime

from langchain_core.embeddings import DeterministicFakeEmbedding
from langgraph.store.base import PutOp

from langchain_genmem import GenerativeAgentsRetriever, GenerativeAgentsStore, SimulationClock
from langchain_genmem.interop.generative_agents import dump_associative_memory
from langchain_genmem.langgraph_store import REGISTRY
from tests.support.fixtures import Store

T0 = datetime(2023, 2, 13, 8, 0)
NS = ("用户", "张三")
PERSONA = "用户/张三"
SECRET = "我的身份证号码是一二三四五六"


def make(backend: Store, **kwargs) -> GenerativeAgentsStore:
    return GenerativeAgentsStore(embeddings=DeterministicFakeEmbedding(size=32),
                                 clock=SimulationClock(T0), retriever_kwargs={}, **kwargs,
                                 **backend.kwargs())


def everything(store: GenerativeAgentsStore, query: str) -> list[str]:
    """Every memory of the stream a retriever over the persona finds (superseded ones too)."""
    retriever = GenerativeAgentsRetriever(stream=store.stream(PERSONA), k=50,
                                          types=["event", "thought", "chat"],
                                          include_superseded=True)
    return [d.page_content for d in retriever.invoke(query)]


def records(store: GenerativeAgentsStore) -> str:
    """The store's key records of the persona, as the stream's state holds them."""
    return json.dumps(store.stream(PERSONA).committed.extra.get(REGISTRY, {}),
                      ensure_ascii=False)


def exported(store: GenerativeAgentsStore, tmp_path) -> str:
    folder = tmp_path / "export" / "associative_memory"
    dump_associative_memory(store.stream(PERSONA), folder)
    return (folder / "nodes.json").read_text(encoding="utf-8")


def test_delete_forgets_the_item_and_every_version_it_superseded(backend, tmp_path):
    store = make(backend)
    try:
        store.put(NS, "id", {"content": "我的身份证号码是旧的九八七六"})
        store.put(NS, "food", {"content": "我喜欢吃饺子"})
        store.put(NS, "id", {"content": SECRET})  # supersedes node_1
        assert everything(store, "身份证号码").count("我的身份证号码是旧的九八七六") == 1
        store.delete(NS, "id")
        assert store.get(NS, "id") is None
        assert [i.key for i in store.search(NS, query="身份证号码")] == ["food"]
        assert everything(store, "身份证号码") == ["我喜欢吃饺子"]
        assert "身份证" not in records(store)
        text = exported(store, tmp_path)
        assert "身份证" not in text and "我喜欢吃饺子" in text
        assert len(store.stream(PERSONA)) == 1
        store.delete(NS, "id")  # deleting it again is no error
        store.put(NS, "id", {"content": "新的号码"})  # numbered after every number used
        assert store.stream(PERSONA).nodes()[0].node_id == "node_4"
        assert store.get(NS, "id").value == {"content": "新的号码"}
        assert [i.key for i in store.search(NS, query="新的号码", limit=1)] == ["id"]
    finally:
        store.close()
    reopened = make(backend)  # another process sees it forgotten
    try:
        assert sorted(i.key for i in reopened.search(NS)) == ["food", "id"]
        assert "身份证" not in " ".join(everything(reopened, "身份证号码"))
    finally:
        reopened.close()


def test_batch_deletes_and_put_none_forget_in_one_call(backend):
    store = make(backend)
    try:
        store.batch([PutOp(NS, f"k{i}", {"content": f"第{i}条秘密"}) for i in range(4)])
        store.batch([PutOp(NS, "k0", None), PutOp(NS, "k2", None),
                     PutOp(NS, "k4", {"content": "新的一条"})])
        store.put(NS, "k3", None)
        assert sorted(i.key for i in store.search(NS)) == ["k1", "k4"]
        assert sorted(everything(store, "秘密")) == ["新的一条", "第1条秘密"]
    finally:
        store.close()


def test_keep_history_retires_the_key_and_keeps_its_memories(backend):
    store = make(backend, keep_history=True)
    try:
        store.put(NS, "id", {"content": SECRET})
        store.put(NS, "food", {"content": "我喜欢吃饺子"})
        store.delete(NS, "id")
        assert store.get(NS, "id") is None
        assert [i.key for i in store.search(NS, query="身份证号码")] == ["food"]
        assert SECRET in everything(store, "身份证号码")  # history a retriever still finds
        assert len(store.stream(PERSONA)) == 2
    finally:
        store.close()
