"""The test servers of `tests.support` behave as the other tests assume."""

from __future__ import annotations

import sys
from pathlib import Path

import openai
import pytest
from langchain_core.messages import HumanMessage, SystemMessage
from langchain_openai import ChatOpenAI

from tests.support.chroma_server import ChromaServer
from tests.support.openai_server import ScriptedOpenAI
from tests.support.processes import ServerStartError, pid_is_running, spawn, wait_until_ready

WEATHER = {"when": "天气", "reply": "今天是晴天，气温二十五度。"}


def chat(srv: ScriptedOpenAI, **kwargs: object) -> ChatOpenAI:
    return ChatOpenAI(model="scripted-model", api_key="test-key", base_url=srv.base_url,
                      max_retries=0, timeout=10, **kwargs)


def test_invoke_gets_the_scripted_reply(scripted_openai) -> None:
    srv = scripted_openai([WEATHER])
    reply = chat(srv).invoke("今天天气怎么样?")
    assert reply.content == WEATHER["reply"]
    assert reply.usage_metadata["total_tokens"] > 0


def test_stream_gets_the_reply_in_chunks(scripted_openai) -> None:
    srv = scripted_openai([WEATHER])
    chunks = [chunk.content for chunk in chat(srv, stream_usage=True).stream("天气?")]
    assert "".join(chunks) == WEATHER["reply"]
    assert len([c for c in chunks if c]) > 1
    assert srv.requests()[0]["stream"] is True


async def test_ainvoke_gets_the_scripted_reply(scripted_openai) -> None:
    srv = scripted_openai([WEATHER])
    assert (await chat(srv).ainvoke("明天天气呢?")).content == WEATHER["reply"]


def test_rules_are_tried_in_order_and_times_is_a_budget(scripted_openai) -> None:
    srv = scripted_openai([{"when": "问题", "reply": "第一次", "times": 1},
                           {"when": "问题", "reply": "以后"},
                           {"when": ".", "reply": "never reached"}], default="默认")
    model = chat(srv)
    replies = [model.invoke(p).content for p in ["一个问题", "一个问题", "另一个问题"]]
    assert replies == ["第一次", "以后", "以后"]
    assert model.invoke("").content == "默认"
    assert [r["rule"] for r in srv.requests()] == [0, 1, 1, "default"]


def test_unmatched_prompt_fails_loudly(scripted_openai) -> None:
    srv = scripted_openai([WEATHER])
    with pytest.raises(openai.InternalServerError, match="没有匹配的提示"):
        chat(srv).invoke("没有匹配的提示")
    assert srv.requests()[0]["rule"] is None


def test_log_records_the_exact_messages(scripted_openai) -> None:
    srv = scripted_openai([WEATHER])
    chat(srv).invoke([SystemMessage("你是玛丽亚。"), HumanMessage("天气如何?")])
    (request,) = srv.requests()
    assert request["messages"] == [{"role": "system", "content": "你是玛丽亚。"},
                                   {"role": "user", "content": "天气如何?"}]
    assert request["rule"] == 0
    assert request["reply"] == WEATHER["reply"]


def test_env_points_a_subprocess_at_the_server(scripted_openai) -> None:
    srv = scripted_openai([WEATHER])
    env = srv.env()
    assert env == {"OPENAI_API_KEY": "test-key", "OPENAI_BASE_URL": srv.base_url}
    assert srv.base_url.startswith("http://127.0.0.1:") and srv.base_url.endswith("/v1")


def test_openai_server_is_gone_after_exit(tmp_path: Path) -> None:
    with ScriptedOpenAI([WEATHER], tmp_path=tmp_path) as srv:
        assert pid_is_running(srv.pid)
        assert chat(srv).invoke("天气").content == WEATHER["reply"]
    assert not pid_is_running(srv.pid)


def test_bad_script_is_rejected_before_starting(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="script entry 0"):
        ScriptedOpenAI([{"reply": "no when"}], tmp_path=tmp_path)  # type: ignore[list-item]


def test_a_server_that_dies_explains_itself(tmp_path: Path) -> None:
    log_path = tmp_path / "server.out"
    proc = spawn([sys.executable, "-c", "print('port already taken'); raise SystemExit(3)"],
                 log_path=log_path)
    with pytest.raises(ServerStartError, match=r"(?s)exited with code 3.*port already taken"):
        wait_until_ready(lambda: False, proc=proc, log_path=log_path, what="doomed server")
    assert not pid_is_running(proc.pid)


def test_two_chroma_clients_share_a_collection(chroma_server: ChromaServer) -> None:
    writer, reader = chroma_server.client(), chroma_server.client()
    collection = writer.get_or_create_collection("support-shared", embedding_function=None)
    collection.add(ids=["a"], embeddings=[[0.1, 0.2, 0.3]], documents=["玛丽亚在学习"])
    seen = reader.get_collection("support-shared", embedding_function=None)
    assert seen.get(ids=["a"])["documents"] == ["玛丽亚在学习"]


def test_chroma_server_is_gone_after_exit(tmp_path: Path) -> None:
    with ChromaServer(tmp_path / "chroma") as server:
        assert pid_is_running(server.pid)
        assert server.client().heartbeat() > 0
    assert not pid_is_running(server.pid)


