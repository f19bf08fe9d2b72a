"""Every call is bounded; structured where the server takes schemas, text otherwise.

The OpenAI model here talks to an httpx transport in this process (no socket): it answers
like llama.cpp's server, refusing a schema with HTTP 400, or cutting a reply at max_tokens.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from langchain_core.language_models import (
    FakeListChatModel,
    FakeMessagesListChatModel,
    GenericFakeChatModel,
)
from langchain_core.messages import AIMessage, HumanMessage
from langchain_openai import ChatOpenAI

from langchain_genmem import CallLimits, ReflectionSettings
from langchain_genmem.core.errors import ChatModelError, ValidationError
from langchain_genmem.llm.calls import Call, ModelCaller, bounded, takes_call_options
from langchain_genmem.llm.chat import chat_model_from_env, model_error
from langchain_genmem.llm.importance import ImportanceScorer
from langchain_genmem.llm.shapes import questions_shape, rating_shape

REFUSAL = {"error": {"code": 400, "type": "invalid_request_error", "message":
                     "Unable to generate parser for this template. Automatic parser generation "
                     "failed: JSON schema error at #: unrecognized type strnig"}}


class Server:
    """Answers chat completions in this process; records every request body."""

    def __init__(self, replies: list[Any]) -> None:
        self.replies = list(replies)
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        self.bodies.append(body)
        reply = self.replies.pop(0)
        if reply == "refuse":
            return httpx.Response(400, json=REFUSAL)
        content, finish = reply if isinstance(reply, tuple) else (reply, "stop")
        return httpx.Response(200, json={
            "id": "x", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "finish_reason": finish,
                         "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})


def clients(server: Any = None) -> dict[str, Any]:
    """httpx clients that never open a socket."""
    transport = httpx.MockTransport(server or Server([]))
    return {"http_client": httpx.Client(transport=transport),
            "http_async_client": httpx.AsyncClient(transport=transport)}


def openai_model(server: Server) -> ChatOpenAI:
    return ChatOpenAI(model="m", api_key="k", base_url="http://server.test/v1", max_retries=0,
                      **clients(server))


def rating_call(text: str = "Rate: ") -> Call:
    return Call([HumanMessage(text + "(text)")], "rating", shape=rating_shape(),
                structured=[HumanMessage(text + "(json)")])


def test_calls_carry_the_max_tokens_of_their_kind_and_the_timeout():
    server = Server(['{"rating": 7}', '{"questions": ["Why?"]}'])
    caller = ModelCaller(openai_model(server), CallLimits(rating=50, timeout=7))
    assert caller.batch([rating_call()]) == ["7"]
    questions = Call([HumanMessage("q")], "questions", shape=questions_shape(3))
    assert caller.batch([questions]) == ["1) Why?\n"]
    first, second = server.bodies
    assert first["max_completion_tokens"] == 50 and second["max_completion_tokens"] == 300
    assert first["response_format"]["json_schema"]["schema"]["properties"]["rating"] == {
        "type": "integer", "minimum": 1, "maximum": 10}
    assert first["messages"][-1]["content"] == "Rate: (json)"
    assert second["response_format"]["json_schema"]["schema"]["properties"]["questions"][
        "maxItems"] == 3


def test_a_refused_schema_is_asked_again_as_text_and_remembered():
    server = Server(["refuse", "7", "8"])
    caller = ModelCaller(openai_model(server))
    assert caller.batch([rating_call()]) == ["7"]
    assert caller.batch([rating_call("Again: ")]) == ["8"]  # text at once: not asked twice
    refused, text, again = server.bodies
    assert "response_format" in refused
    assert "response_format" not in text and text["messages"][-1]["content"] == "Rate: (text)"
    assert "response_format" not in again
    assert not caller.structured()


def test_output_structured_refuses_to_fall_back():
    caller = ModelCaller(openai_model(Server(["refuse"])), output="structured")
    with pytest.raises(ChatModelError, match='refuses JSON schemas.*output="auto" or "text"'):
        caller.batch([rating_call()])
    fake = ModelCaller(FakeListChatModel(responses=["7"]), output="structured")
    with pytest.raises(ChatModelError, match="FakeListChatModel takes no JSON schema"):
        fake.batch([rating_call()])


def test_a_structured_reply_cut_at_max_tokens_or_off_schema_is_a_failed_reply():
    server = Server([('{"rating": ', "length"), '{"rating": 11}', '{"rating": 3}'])
    caller = ModelCaller(openai_model(server))
    assert caller.batch([rating_call(), rating_call(), rating_call()],
                        {"max_concurrency": 1}) == ["", "", "3"]


def test_output_text_sends_the_text_prompt_bounded():
    server = Server(["7"])
    assert ModelCaller(openai_model(server), output="text").batch([rating_call()]) == ["7"]
    [body] = server.bodies
    assert "response_format" not in body and body["max_completion_tokens"] == 64


@pytest.mark.parametrize("fake", [
    FakeListChatModel(responses=["7"]),
    FakeMessagesListChatModel(responses=[AIMessage("7")]),
    GenericFakeChatModel(messages=iter([AIMessage("7")])),
])
def test_fake_models_get_the_text_prompt_and_no_options(fake):
    assert not takes_call_options(fake)
    assert bounded(fake, CallLimits(), "rating") is fake
    caller = ModelCaller(fake)
    assert not caller.structured()
    assert caller.batch([rating_call()]) == ["7"]


def test_a_bound_openai_model_is_still_recognised():
    model = openai_model(Server([]))
    assert takes_call_options(model.bind(temperature=0))
    assert bounded(model, CallLimits(timeout=3), "answer").kwargs == {"max_tokens": 512,
                                                                       "timeout": 3.0}


def test_chat_model_from_env_has_the_package_timeout_and_retries():
    env = {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}
    model = chat_model_from_env(env, **clients())
    assert (model.request_timeout, model.max_retries) == (120.0, 1)
    model = chat_model_from_env(env, limits=CallLimits(timeout=5, max_retries=0), **clients())
    assert (model.request_timeout, model.max_retries) == (5.0, 0)
    assert chat_model_from_env(env, max_retries=3, **clients()).max_retries == 3


def test_a_timeout_says_after_how_long_and_what_to_raise():
    import openai

    error = openai.APITimeoutError(request=httpx.Request("POST", "http://x/v1"))
    hint = model_error(error, base="http://x/v1", timeout=2.5)
    assert str(hint) == (
        "the chat model at http://x/v1 did not answer in time (timed out after 2.5 s); raise "
        "the timeout (CallLimits(timeout=...) in the settings, genmem reflect --timeout) or "
        "use a faster model")


def test_the_scorer_falls_back_to_text_against_a_refusing_server():
    server = Server(["refuse", "1. 7\n2. 3"])
    scorer = ImportanceScorer(openai_model(server))
    assert scorer.score_many("Maria", [("event", "a"), ("chat", "玛丽亚：你好")]) == [7.0, 3.0]
    assert "response_format" not in server.bodies[1]
    assert server.bodies[1]["max_completion_tokens"] == 64 + 2 * 24


# --- settings -------------------------------------------------------------------------------


@pytest.mark.parametrize(("values", "field"), [
    ({"k": 0}, "k"),
    ({"k": True}, "k"),
    ({"max_insights": 2.5}, "max_insights"),
    ({"trigger": "sometimes"}, "trigger"),
    ({"output": "json"}, "output"),
    ({"threshold": "high"}, "threshold"),
    ({"relevance_min": float("nan")}, "relevance_min"),
    ({"max_calls": 0}, "max_calls"),
    ({"limits": {"timeout": -1}}, "CallLimits: timeout"),
    ({"window_size": 3}, "window_size"),
])
def test_bad_settings_are_one_line_naming_the_field(values, field):
    with pytest.raises(ValidationError) as caught:
        ReflectionSettings(**values)
    assert caught.value.field == field.rpartition(" ")[2]
    assert str(caught.value).startswith(f"ReflectionSettings: {field}: ")
    assert "\n" not in str(caught.value)


def test_call_limits_are_checked_and_frozen():
    with pytest.raises(ValidationError, match=r"^CallLimits: rating: "):
        CallLimits(rating=0)
    limits = CallLimits()
    with pytest.raises(Exception, match="frozen"):
        limits.timeout = 5  # type: ignore[misc]
    assert limits.max_tokens("ratings", 3) == 64 + 3 * 24
    assert limits.max_tokens("triples", 2) == 64 + 2 * 64
    assert limits.max_tokens("insights", 9) == 600


def test_keyword_arguments_override_the_settings_fields():
    base = ReflectionSettings(k=10, output="text")
    merged = ReflectionSettings.merged(base, k=5, window=ReflectionSettings.model_fields[
        "window"].default)
    assert (merged.k, merged.output, merged.window) == (5, "text", 50)
    from langchain_genmem.reflection.settings import UNSET

    assert ReflectionSettings.merged(base, k=UNSET) is base
    assert ReflectionSettings.merged(None) == ReflectionSettings()
    with pytest.raises(ValidationError, match="settings: expected a ReflectionSettings"):
        ReflectionSettings.merged({"k": 3})  # type: ignore[arg-type]


def test_any_openai_model_that_times_out_is_a_one_line_chat_model_error():
    def silent(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("no answer", request=request)

    model = openai_model(silent)  # type: ignore[arg-type]
    with pytest.raises(ChatModelError, match=r"^the chat model at http://server.test/v1 did not "
                                             r"answer in time \(timed out after 2 s\)"):
        ModelCaller(model, CallLimits(timeout=2)).batch([rating_call()])


def test_the_scorer_refuses_an_unknown_output_form_or_limits():
    fake = FakeListChatModel(responses=["7"])
    with pytest.raises(ValidationError, match="^output: expected one of auto, structured, text"):
        ImportanceScorer(fake, output="json")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="^limits: expected a CallLimits, got dict"):
        ImportanceScorer(fake, limits={"timeout": 5})  # type: ignore[arg-type]
