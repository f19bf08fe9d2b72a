"""Conversation memories: turns embedded with their context, chats with their utterances.

A fake embedding model records every text it embeds, so the tests read exactly what a turn
was embedded with; the descriptions stay as said.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from langchain_core.embeddings import Embeddings
from langchain_core.messages import AIMessage

from langchain_genmem import GenerativeAgentsRetriever, MemoryStream, SimulationClock
from langchain_genmem.agent import create_memory_agent, exchange_memories
from langchain_genmem.core.errors import ValidationError
from langchain_genmem.langgraph_store import GenerativeAgentsStore
from langchain_genmem.memory.turns import CHAT_KEY_CHARS, PREVIOUS_TURN_CHARS
from langchain_genmem.numerics.lexical import indexed_text
from langchain_genmem.service.schemas import MemoryBatchRequest
from tests.support.fixtures import Store

T0 = datetime(2024, 3, 1, 22, 0)
CHAT = [("林晓", "静静！睡了没"), ("陈静", "没呢，在看《三体》"), ("林晓", "我也是，刚看完第二部"),
        ("陈静", "我也是")]


class Recording(Embeddings):
    """Embeds a text as (1, its length, its number of lines), and records it."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.texts.extend(texts)
        return [[1.0, float(len(t)), float(t.count("\n"))] for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return [1.0, float(len(text)), 0.0]


def turns(conversation: str = "夜聊", start: datetime = T0) -> list[dict]:
    return [{"type": "event", "description": text, "speaker": who, "conversation": conversation,
             "created": start + timedelta(minutes=i), "poignancy": 3}
            for i, (who, text) in enumerate(CHAT)]


def stream_on(store: Store, emb: Embeddings, **kwargs) -> MemoryStream:
    return MemoryStream("Ada", embeddings=emb, clock=SimulationClock(T0), **store.kwargs(),
                        **kwargs)


def test_a_turn_is_embedded_with_the_turns_before_it_and_the_speakers(tmp_path):
    emb = Recording()
    stream = MemoryStream("Ada", embeddings=emb, path=str(tmp_path), context_turns=2)
    nodes = stream.add_many(turns())
    assert [n.description for n in nodes] == [text for _, text in CHAT]  # as said
    assert nodes[0].embedding_key == "林晓: 静静！睡了没"
    assert nodes[3].embedding_key == "没呢，在看《三体》".join(["陈静: ", "\n"]) + \
        "林晓: 我也是，刚看完第二部\n陈静: 我也是"
    assert emb.texts == [n.embedding_key for n in nodes]
    # the two "我也是" are told apart by what came before them
    assert stream.vector(nodes[3].node_id)[1] > len("陈静: 我也是")
    stream.close()


@pytest.mark.parametrize("n", [0, 1, 3])
def test_context_turns_is_how_many_earlier_turns(tmp_path, n):
    stream = MemoryStream("Ada", embeddings=Recording(), path=str(tmp_path), context_turns=n)
    last = stream.add_many(turns())[-1]
    assert last.embedding_key.count("\n") == n
    assert last.embedding_key.endswith("陈静: 我也是")
    stream.close()


def test_other_conversations_and_plain_memories_never_leak_in(tmp_path):
    stream = MemoryStream("Ada", embeddings=Recording(), path=str(tmp_path), context_turns=3)
    stream.add_event("林晓 likes tea", poignancy=2, created=T0)
    stream.add_many(turns("另一个", T0 - timedelta(hours=1)))
    mine = stream.add_many(turns("夜聊", T0 + timedelta(hours=1)))
    assert mine[0].embedding_key == "林晓: 静静！睡了没"
    assert "tea" not in mine[-1].embedding_key
    plain = stream.add_event("a plain event", poignancy=2)
    assert plain.embedding_key == "a plain event" and plain.conversation is None
    stream.close()


def test_single_adds_and_one_batch_embed_the_same_texts(tmp_path):
    one, each = Recording(), Recording()
    batch = MemoryStream("A", embeddings=one, path=str(tmp_path / "a"))
    single = MemoryStream("A", embeddings=each, path=str(tmp_path / "b"))
    batch.add_many(turns())
    for item in turns():
        single.add_event(**{k: v for k, v in item.items() if k != "type"})
    assert one.texts == each.texts and len(one.texts) == len(CHAT)
    batch.close()
    single.close()


def test_turns_follow_created_order_not_the_order_they_were_added(tmp_path):
    stream = MemoryStream("Ada", embeddings=Recording(), path=str(tmp_path), context_turns=1)
    items = turns()
    stream.add_many([items[2]])
    late = stream.add_many([items[0]])[0]  # said earlier, added later: nothing before it
    assert late.embedding_key == "林晓: 静静！睡了没"
    stream.close()


def test_an_explicit_embedding_key_or_vector_is_kept(tmp_path):
    stream = MemoryStream("Ada", embeddings=Recording(), path=str(tmp_path))
    stream.add_many(turns()[:1])
    given = stream.add_event("我也是", conversation="夜聊", speaker="陈静", poignancy=3,
                             embedding_key="我也是 (me too)")
    vector = stream.add_event("我也是", conversation="夜聊", poignancy=3, embedding=[1, 2, 3])
    assert given.embedding_key == "我也是 (me too)" and vector.embedding_key == "我也是"
    stream.close()


def test_a_long_earlier_turn_keeps_its_end_and_the_turn_stays_whole(tmp_path):
    stream = MemoryStream("Ada", embeddings=Recording(), path=str(tmp_path), context_turns=1)
    long = "很长的一段话。" * 200 + "结尾"
    items = turns()[:2]
    items[0]["description"] = long
    second = stream.add_many(items)[1]
    first_line, own = second.embedding_key.split("\n")
    assert first_line.endswith("结尾") and len(first_line) <= PREVIOUS_TURN_CHARS + len("林晓: ")
    assert own == "陈静: 没呢，在看《三体》"
    stream.close()


def test_turn_fields_are_validated(tmp_path):
    stream = MemoryStream("Ada", embeddings=Recording(), path=str(tmp_path))
    with pytest.raises(ValidationError, match=r"items\[0\]\.speaker"):
        stream.add_event("hi", speaker="陈\n静", poignancy=1)
    with pytest.raises(ValidationError, match=r"items\[0\]\.conversation"):
        stream.add_event("hi", conversation="x" * 201, poignancy=1)
    with pytest.raises(ValidationError, match=r"items\[0\]\.conversation"):
        stream.add_event("hi", conversation="  ", poignancy=1)
    stream.close()


def test_turn_fields_round_trip_through_both_backends(backend):
    stream = stream_on(backend, Recording())
    written = stream.add_many(turns())
    stream.add_event("not a turn", poignancy=1)
    stream.close()
    again = stream_on(backend, Recording())
    read = again.nodes()[::-1][:len(CHAT)]  # nodes() is newest first
    assert [(n.conversation, n.speaker, n.description, n.embedding_key) for n in read] == [
        (n.conversation, n.speaker, n.description, n.embedding_key) for n in written]
    assert again.nodes()[0].conversation is None and again.nodes()[0].speaker is None
    doc = GenerativeAgentsRetriever(stream=again, k=10, update_access=False).invoke("三体")
    turn_docs = [d for d in doc if d.metadata.get("conversation") == "夜聊"]
    assert turn_docs and all("speaker" in d.metadata for d in turn_docs)
    assert all("conversation" not in d.metadata for d in doc if d.page_content == "not a turn")
    again.close()


def test_a_reopened_stream_continues_the_conversation(backend):
    first = stream_on(backend, Recording())
    first.add_many(turns()[:3])
    first.close()
    again = stream_on(backend, Recording(), context_turns=1)
    last = again.add_many(turns()[3:])[0]
    assert last.embedding_key == "林晓: 我也是，刚看完第二部\n陈静: 我也是"
    again.close()


def test_a_chat_is_found_by_its_utterances_densely_and_lexically(tmp_path):
    emb = Recording()
    stream = MemoryStream("Ada", embeddings=emb, path=str(tmp_path))
    chat = stream.add_chat("conversation between 林晓 and 陈静", poignancy=4,
                           filling=[list(pair) for pair in CHAT])
    assert chat.description == "conversation between 林晓 and 陈静"
    assert "陈静: 没呢，在看《三体》" in chat.embedding_key and emb.texts == [chat.embedding_key]
    assert "三体" in indexed_text(chat)
    found = GenerativeAgentsRetriever(stream=stream, relevance="lexical", types=["chat"],
                                      update_access=False).invoke("三体")
    assert [d.metadata["node_id"] for d in found] == [chat.node_id]
    huge = stream.add_chat("a long chat", poignancy=4, filling=[["A", "话" * 5000]])
    assert len(huge.embedding_key) <= CHAT_KEY_CHARS
    stream.close()


def test_imported_memories_keep_their_keys_and_lexical_text(tmp_path):
    """A chat given its embedding_key (as an import gives every node) is not re-keyed."""
    stream = MemoryStream("Ada", embeddings=Recording(), path=str(tmp_path))
    chat = stream.add_chat("conversing about 三体", poignancy=4,
                           embedding_key="conversing about 三体", filling=[["林晓", "好看"]])
    assert chat.embedding_key == chat.description
    assert "好看" not in indexed_text(chat)
    stream.close()


# ---------------------------------------------------------------------------- front ends


def test_the_service_takes_and_returns_the_turn_fields():
    request = MemoryBatchRequest.model_validate({"persona_name": "Ada", "memories": [
        {"description": "我也是", "conversation": "夜聊", "speaker": "陈静", "poignancy": 3}]})
    item = request.memories[0].as_input()
    assert (item["conversation"], item["speaker"]) == ("夜聊", "陈静")


def test_the_store_takes_the_turn_fields_from_the_value(tmp_path):
    emb = Recording()
    store = GenerativeAgentsStore(path=str(tmp_path), embeddings=emb,
                                  clock=SimulationClock(T0))
    for i, (who, text) in enumerate(CHAT):
        store.put(("chats", "u1"), f"t{i}", {"content": text, "speaker": who,
                                              "conversation": "夜聊"})
    store.put(("chats", "u1"), "fact", {"content": "陈静 likes sci-fi"})
    stream = store.stream("chats/u1")
    nodes = stream.nodes()[::-1]
    assert [n.speaker for n in nodes] == [who for who, _ in CHAT] + [None]
    assert nodes[3].embedding_key.endswith("林晓: 我也是，刚看完第二部\n陈静: 我也是")
    assert nodes[4].conversation is None
    store.close()


def test_the_agent_stores_each_turn_in_its_thread_with_its_speaker(tmp_path):
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel

    model = GenericFakeChatModel(messages=iter([AIMessage("真的吗？")]))
    stream = MemoryStream("Ada", embeddings=Recording(), path=str(tmp_path))
    agent = create_memory_agent(model, stream, user="林晓", reflect=False,
                                importance=_FixedImportance())
    agent.invoke({"messages": [("user", "我也是")]},
                 config={"configurable": {"thread_id": "thread-7"}})
    written = stream.nodes()[::-1]
    assert {n.conversation for n in written} == {"thread-7"}
    assert [n.speaker for n in written if n.type == "event"] == ["林晓", "Ada"]
    chat = next(n for n in written if n.type == "chat")
    assert "林晓: 我也是" in chat.embedding_key
    default = exchange_memories("Ada", "林晓", "你好", "你好！")
    assert {i["conversation"] for i in default} == {"林晓 and Ada"}
    stream.close()


class _FixedImportance:
    def score_many(self, persona, items):
        return [3.0] * len(items)

    async def ascore_many(self, persona, items):
        return [3.0] * len(items)
