"""The reflection graph: exact prompts, parsed results, memory written, triggers, bad replies."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langgraph.checkpoint.memory import InMemorySaver

from langchain_genmem import (
    GenerativeAgentsRetriever,
    MemoryStream,
    ReflectionSettings,
    ValidationError,
)
from langchain_genmem.core.timeutil import SimulationClock as Clock
from langchain_genmem.llm.importance import ImportanceScorer, UnratedWarning, unrated_ids
from langchain_genmem.llm.limits import FALLBACK_IMPORTANCE
from langchain_genmem.llm.parsers import format_numbered
from langchain_genmem.llm.prompts import (
    DEFAULT_BATCH_IMPORTANCE_PROMPT,
    DEFAULT_BATCH_TRIPLE_PROMPT,
    DEFAULT_CONDENSE_PROMPT,
    DEFAULT_CONDENSE_SYSTEM_PROMPT,
    DEFAULT_FOCAL_POINTS_PROMPT,
    DEFAULT_IMPORTANCE_SYSTEM_PROMPT,
    DEFAULT_INSIGHTS_PROMPT,
    DEFAULT_INSIGHTS_SYSTEM_PROMPT,
    DEFAULT_QUESTIONS_SYSTEM_PROMPT,
)
from langchain_genmem.reflection import create_reflection_graph
from tests.support.reflection_script import (
    CONDENSE,
    FOCAL,
    INSIGHTS,
    KEYS,
    MEMORIES,
    NOW,
    ONE,
    PERSONA,
    QUESTIONS,
    RATINGS,
    T0,
    TRIPLES,
    ScriptedChatModel,
    fill,
    new_stream,
    scripted,
)

SNAPSHOT = Path(__file__).parent / "snapshots" / "reflection_graph.mmd"



# --- a scripted chat model ------------------------------------------------------------------------












# --- a small stream -------------------------------------------------------------------------------



@pytest.fixture
def clock() -> Clock:
    return Clock(T0)






@pytest.fixture
def stream(clock: Clock) -> MemoryStream:
    return fill(new_stream(clock), clock)


def focal_human(*keys: str) -> str:
    return DEFAULT_FOCAL_POINTS_PROMPT.format(statements="".join(f"{k}\n" for k in keys), n=3)


def insights_human(entry: dict[str, Any], n: int = 5) -> str:
    shown = format_numbered([KEYS[i] for i in entry["retrieved"]])
    return DEFAULT_INSIGHTS_PROMPT.format(statements=shown, n=n)


def assert_counts(out: dict[str, Any], model: ScriptedChatModel) -> None:
    assert out["llm_calls"] == len(model.calls)


# --- the graph's shape ----------------------------------------------------------------------------


def test_mermaid_drawing_matches_the_snapshot(stream):
    # After an intended change of the graph's shape, regenerate the snapshot with
    #   GENMEM_UPDATE_SNAPSHOTS=1 .venv/bin/python -m pytest \
    #       tests/unit_tests/test_reflection_graph.py -k mermaid
    # and review the diff of tests/unit_tests/snapshots/reflection_graph.mmd.
    drawing = create_reflection_graph(scripted(), stream).get_graph().draw_mermaid()
    if os.environ.get("GENMEM_UPDATE_SNAPSHOTS"):
        SNAPSHOT.write_text(drawing, encoding="utf-8")
    assert drawing == SNAPSHOT.read_text(encoding="utf-8")


def test_updates_stream_names_the_stages_in_order(stream):
    graph = create_reflection_graph(scripted(), stream)
    names = [next(iter(update)) for update in graph.stream({}, stream_mode="updates")]
    assert names == ["check_trigger", "focal_points", "retrieve", "retrieve", "retrieve",
                     "insights", "condense", "write_back", "reset_trigger"]


def test_compile_options_pass_through(stream):
    saver = InMemorySaver()
    graph = create_reflection_graph(scripted(), stream, checkpointer=saver, name="maria")
    assert graph.name == "maria"
    assert graph.checkpointer is saver


# --- a whole reflection, exactly ------------------------------------------------------------------


def test_full_reflection_sends_exact_prompts_and_writes_the_thoughts(stream):
    model = scripted(
        insights="Maria Lopez loves physics (because of 0, 1)\n"
        "2. Maria Lopez works hard [2]"
    )
    out = create_reflection_graph(model, stream).invoke({})

    # focal points: the 3 (importance_ele_n) most recently accessed, oldest first
    assert model.sent(FOCAL) == [
        (DEFAULT_QUESTIONS_SYSTEM_PROMPT,
         focal_human(KEYS["node_6"], KEYS["node_7"], KEYS["node_8"]))
    ]
    assert model.sent(FOCAL)[0][1].startswith(
        "Maria Lopez enjoys physics\nMaria Lopez is eating lunch at Hobbs Cafe\n"
        "Isabella Rodriguez is planning a party\n\n\n"
    )
    assert out["memories"] == ["node_6", "node_7", "node_8"]
    assert out["focal_points"] == [
        "What does Maria Lopez study?", "Who is Klaus Mueller?", "How does Maria spend her day?"
    ]
    # insights: one call per question, evidence numbered from 0 in retrieval order
    assert sorted(model.sent(INSIGHTS)) == sorted(
        (DEFAULT_INSIGHTS_SYSTEM_PROMPT, insights_human(entry)) for entry in out["insights"]
    )
    first = out["insights"][0]
    shown = model.sent(INSIGHTS)[0][1]
    assert shown.startswith("Input:\n0. ") and "\n5. " in shown and "\n6. " not in shown
    assert set(first["retrieved"]) == {"node_2", "node_3", "node_5", "node_6", "node_7", "node_8"}
    assert first["insights"] == [
        {"text": "Maria Lopez loves physics", "evidence": first["retrieved"][:2],
         "cited": [0, 1], "dropped_numbers": []},
        {"text": "Maria Lopez works hard", "evidence": first["retrieved"][2:3],
         "cited": [2], "dropped_numbers": []},
    ]
    # no question had more than max_insights: condense made no call
    assert model.sent(CONDENSE) == []
    # the same two insights for three questions: written once each, evidence united
    def union(text: str) -> list[str]:
        given = [x["evidence"] for e in out["insights"] for x in e["insights"] if x["text"] == text]
        return list(dict.fromkeys(i for evidence in given for i in evidence))

    assert out["written"] == ["node_9", "node_10"]
    loves, works = (stream.get(i) for i in out["written"])
    assert loves.description == "Maria Lopez loves physics"
    assert loves.filling == union("Maria Lopez loves physics")
    assert works.filling == union("Maria Lopez works hard")
    assert [d["reason"] for d in out["dropped"]] == ["duplicate"] * 4
    # one triple call and one importance call for both thoughts, exactly
    statements = "1. Maria Lopez loves physics\n2. Maria Lopez works hard\n"
    triples = DEFAULT_BATCH_TRIPLE_PROMPT.format(n=2, statements=statements)
    assert model.sent(TRIPLES) == [("", triples)]
    memories = "1. [thought] Maria Lopez loves physics\n2. [thought] Maria Lopez works hard\n"
    assert model.sent(RATINGS) == [
        (DEFAULT_IMPORTANCE_SYSTEM_PROMPT, DEFAULT_BATCH_IMPORTANCE_PROMPT.format(
            persona=PERSONA, persona_description="", n=2, memories=memories))
    ]
    # the memory written
    for number, node in enumerate((loves, works), 1):
        assert node.type == "thought"
        assert node.spo == (PERSONA, "think about", f"topic {number}")
        assert node.keywords == [PERSONA, "think about", f"topic {number}"]
        assert node.poignancy == 6
        assert node.created == NOW and node.last_accessed == NOW
        assert node.expiration == NOW + timedelta(days=30)
        assert node.depth == 1 + max(stream.get(i).depth for i in node.filling)
    assert loves.depth == 2  # node_6 (a thought of depth 1) is among its evidence
    # counters reset, calls counted
    assert (stream.state.importance_trigger_curr, stream.state.importance_ele_n) == (150, 0)
    assert out["status"] == "reflected" and out["reset"] is True
    assert out["llm_calls"] == 6 == len(model.calls)
    assert out["original_llm_calls"] == 1 + 3 + 2 * 2


def test_output_has_the_keys_the_cli_reads(stream):
    out = create_reflection_graph(scripted(), stream).invoke({})
    assert set(out) == {"status", "trigger", "memories", "focal_points", "insights", "dropped",
                        "written", "llm_calls", "original_llm_calls", "reset", "reasons"}


# --- retrieval in parallel ------------------------------------------------------------------------


def test_parallel_branches_see_the_same_state_and_mark_access_once(stream, clock):
    questions = [ONE, "Who is Klaus Mueller?", "How does Maria spend her day?"]
    fixed = GenerativeAgentsRetriever(stream=stream, update_access=False)
    expected = [[n.node_id for n in fixed.nodes_for(q, k=4)] for q in questions]
    before = {n.node_id: n.last_accessed for n in stream.nodes()}
    retriever = GenerativeAgentsRetriever(stream=stream, update_access=True)
    out = create_reflection_graph(scripted(), stream, retriever=retriever, k=4).invoke({})
    assert [e["retrieved"] for e in out["insights"]] == expected
    assert retriever.update_access is True  # the caller's retriever is left as it was
    accessed = {i for ids in expected for i in ids}
    for node in stream.nodes():
        if node.node_id in accessed:
            assert node.last_accessed == NOW
        elif node.node_id not in out["written"]:
            assert node.last_accessed == before[node.node_id]


# --- triggers -------------------------------------------------------------------------------------


def test_not_due_ends_at_check_trigger_without_calls(stream):
    stream.update_settings(importance_trigger_curr=5)
    model = scripted()
    graph = create_reflection_graph(model, stream)
    updates = list(graph.stream({}, stream_mode="updates"))
    assert [next(iter(u)) for u in updates] == ["check_trigger"]
    out = graph.invoke({})
    assert out["status"] == "not_due" and out["written"] == [] and out["llm_calls"] == 0
    # reported as importance gathered vs the max, as the window policy reads: value >= threshold
    assert out["trigger"] == {
        "policy": "counters", "due": False, "forced": False, "value": 145.0, "threshold": 150.0,
        "explanation": "importance since the last reflection 145 of 150: not due until it "
                       "reaches 150; force=True (a deployed graph: the input "
                       '{"force": true}) reflects now'}
    assert model.calls == []
    assert stream.state.importance_trigger_curr == 5


@pytest.mark.parametrize(("built", "given", "reflects"), [
    (False, {"force": True}, True),
    (True, {}, True),
    (True, {"force": None}, True),
    (True, {"force": False}, False),
])
def test_force_at_build_time_and_per_run(stream, built, given, reflects):
    stream.update_settings(importance_trigger_curr=5)
    out = create_reflection_graph(scripted(), stream, force=built).invoke(given)
    assert out["status"] == ("reflected" if reflects else "not_due")
    assert out["trigger"]["due"] is False and out["trigger"]["forced"] is reflects


def test_counters_take_the_last_ele_n_by_last_access_without_idle_or_chats(stream):
    stream.mark_accessed(["node_2"], when=T0 + timedelta(minutes=30))
    model = scripted()
    out = create_reflection_graph(model, stream).invoke({})
    assert out["memories"] == ["node_7", "node_8", "node_2"]
    assert model.sent(FOCAL)[0][1] == focal_human(KEYS["node_7"], KEYS["node_8"], KEYS["node_2"])


def test_counters_after_a_reset_use_the_window(stream):
    stream.update_settings(importance_ele_n=0)
    out = create_reflection_graph(scripted(), stream, window=2).invoke({})
    assert out["memories"] == ["node_7", "node_8"]


def test_counters_need_a_memory(clock):
    empty = new_stream(clock)
    empty.update_settings(importance_trigger_curr=-1)
    out = create_reflection_graph(scripted(), empty).invoke({})
    assert out["status"] == "not_due"


def test_window_policy_sums_the_newest_memories(stream):
    # newest non-idle events and thoughts: node_8 (4), node_7 (3), node_6 (5)
    model = scripted()
    graph = create_reflection_graph(model, stream, trigger="window", window=3, threshold=12)
    out = graph.invoke({})
    assert out["trigger"] == {"policy": "window", "due": True, "forced": False,
                              "value": 12.0, "threshold": 12.0,
                              "explanation": "the newest 3 memories' poignancy sums to 12 of 12: "
                                             "due"}
    assert out["memories"] == ["node_6", "node_7", "node_8"]
    assert model.sent(FOCAL)[0][1] == focal_human(KEYS["node_6"], KEYS["node_7"], KEYS["node_8"])
    assert out["status"] == "reflected" and out["reset"] is False
    assert stream.state.importance_trigger_curr == -1  # the counters are not the window's


def test_window_policy_not_due_below_the_threshold(stream):
    stream.update_settings(importance_trigger_curr=150)
    graph = create_reflection_graph(scripted(), stream, trigger="window", window=3, threshold=12.5)
    assert graph.invoke({})["status"] == "not_due"
    # threshold None: the persona's importance_trigger_max
    stream.update_settings(importance_trigger_max=12)
    out = create_reflection_graph(scripted(), stream, trigger="window", window=3).invoke({})
    assert out["trigger"]["threshold"] == 12 and out["status"] == "reflected"


# --- condense -------------------------------------------------------------------------------------

TWO = "A insight [0]\n2. B insight [1]"
SEVEN = "\n".join(f"{i}. insight number {i} [{i - 1}]" for i in range(1, 8))


def test_condense_asks_once_per_question_over_the_maximum(stream):
    condensed = "1. Maria Lopez studies a lot [0, 1]\n2. short [9]"
    model = scripted(insights=SEVEN, condense=condensed, focal=ONE)
    out = create_reflection_graph(model, stream, n_focal_points=1).invoke({})
    listed = "".join(f"{i}. insight number {i} [{i - 1}]\n" for i in range(1, 7))
    assert model.sent(CONDENSE) == [(DEFAULT_CONDENSE_SYSTEM_PROMPT.format(n=5),
                                     DEFAULT_CONDENSE_PROMPT.format(insights=listed))]
    entry = out["insights"][0]
    assert entry["condensed"] is True
    assert [x["text"] for x in entry["insights"]] == ["Maria Lopez studies a lot"]
    assert {"stage": "condense", "reason": "no_evidence", "question": entry["question"],
            "text": "short"} in out["dropped"]
    assert out["llm_calls"] == 1 + 1 + 1 + 2 == len(model.calls)


def test_an_unreadable_condensed_reply_keeps_the_first_insights(stream):
    model = scripted(insights=SEVEN, condense="", focal=ONE)
    out = create_reflection_graph(model, stream, n_focal_points=1, max_insights=5).invoke({})
    entry = out["insights"][0]
    assert entry["condensed"] is False
    assert [x["text"] for x in entry["insights"]] == [f"insight number {i}" for i in range(1, 6)]
    reasons = [d["reason"] for d in out["dropped"] if d["stage"] == "condense"]
    # the 7th insight cites 6, which a 6-memory prompt does not show
    assert reasons == ["unreadable_reply", "over_max"]
    assert len(out["written"]) == 5


def test_a_condensed_reply_over_the_maximum_is_cut(stream):
    model = scripted(insights=SEVEN, condense="\n".join(f"c{i} [0]" for i in range(4)), focal=ONE)
    out = create_reflection_graph(model, stream, n_focal_points=1, max_insights=3).invoke({})
    assert [x["text"] for x in out["insights"][0]["insights"]] == ["c0", "c1", "c2"]
    assert [d["text"] for d in out["dropped"] if d["reason"] == "over_max"] == ["c3"]


# --- malformed replies ----------------------------------------------------------------------------


@pytest.mark.parametrize("reply", ["", "   \n", "1)\n2)", "```\n```"])
def test_no_usable_question_writes_nothing_and_keeps_the_trigger(stream, reply):
    model = scripted(focal=reply)
    out = create_reflection_graph(model, stream).invoke({})
    assert out["status"] == "no_questions" and out["written"] == []
    assert [d["reason"] for d in out["dropped"]] == ["unreadable_reply"]
    assert out["llm_calls"] == 1 == len(model.calls) and out["original_llm_calls"] == 1
    assert stream.state.importance_trigger_curr == -1 and out["reset"] is False
    assert len(stream) == len(MEMORIES)


def test_extra_questions_are_dropped(stream):
    model = scripted(focal=QUESTIONS + "\n4) One too many?")
    out = create_reflection_graph(model, stream).invoke({})
    assert len(out["focal_points"]) == 3
    extra = {"stage": "focal_points", "reason": "over_max", "text": "One too many?"}
    assert extra in out["dropped"]
    assert len(model.sent(INSIGHTS)) == 3


def test_forced_run_without_memories_makes_no_call(clock):
    empty = new_stream(clock)
    model = scripted()
    out = create_reflection_graph(model, empty, force=True).invoke({})
    assert out["status"] == "no_questions" and model.calls == []
    assert out["dropped"] == [{"stage": "focal_points", "reason": "no_memories"}]


@pytest.mark.parametrize("reply", [
    "",
    "I am sorry, I cannot help with that.",
    "1. Maria Lopez likes physics\n2. Klaus Mueller writes",
    "Maria Lopez likes physics (because of 6, 40)",
    "[]",
])
def test_insight_replies_without_usable_evidence_write_nothing(stream, reply):
    model = scripted(insights=reply)
    out = create_reflection_graph(model, stream).invoke({})
    assert out["status"] == "no_insights" and out["written"] == []
    assert all(e["insights"] == [] for e in out["insights"])
    assert {d["reason"] for d in out["dropped"]} <= {"unreadable_reply", "no_evidence",
                                                      "evidence_out_of_range"}
    assert out["llm_calls"] == 4 == len(model.calls)  # no triple or rating call
    assert out["original_llm_calls"] == 4
    assert len(stream) == len(MEMORIES)
    assert out["reset"] is True  # the original resets after a failed reflection too


def test_numbers_out_of_range_are_dropped_alone_and_reported(stream):
    # 6 memories are shown, numbered 0-5: a 1-based numbering cites 6, which does not exist
    reply = "Maria Lopez likes physics (because of 5, 6)\n2. Maria Lopez naps (because of 7)"
    model = scripted(insights=reply, focal=ONE)
    out = create_reflection_graph(model, stream, n_focal_points=1).invoke({})
    entry = out["insights"][0]
    assert entry["insights"] == [{"text": "Maria Lopez likes physics",
                                  "evidence": [entry["retrieved"][5]], "cited": [5],
                                  "dropped_numbers": [6]}]
    question = entry["question"]
    assert out["dropped"] == [
        {"stage": "insights", "reason": "evidence_out_of_range", "question": question,
         "text": "Maria Lopez likes physics", "numbers": [6]},
        {"stage": "insights", "reason": "evidence_out_of_range", "question": question,
         "text": "Maria Lopez naps", "numbers": [7]},
        {"stage": "insights", "reason": "no_evidence", "question": question,
         "text": "Maria Lopez naps"},
    ]
    assert [stream.get(i).filling for i in out["written"]] == [[entry["retrieved"][5]]]


def test_one_bad_reply_does_not_drop_the_other_questions(stream):
    model = scripted(insights=["", "Maria Lopez is curious [1]", "no evidence here"])
    out = create_reflection_graph(model, stream).invoke({}, {"max_concurrency": 1})
    assert [len(e["insights"]) for e in out["insights"]] == [0, 1, 0]
    assert [stream.get(i).description for i in out["written"]] == ["Maria Lopez is curious"]


def test_duplicate_insights_in_one_reply_are_merged(stream):
    reply = "Maria Lopez likes physics [0]\n2. maria lopez  likes physics. [3, 0]"
    model = scripted(insights=reply, focal=ONE)
    out = create_reflection_graph(model, stream, n_focal_points=1).invoke({})
    entry = out["insights"][0]
    merged = [(x["text"], x["cited"]) for x in entry["insights"]]
    assert merged == [("Maria Lopez likes physics", [0, 3])]
    assert len(out["written"]) == 1


def test_unreadable_triples_fall_back_and_are_reported(stream):
    model = scripted(insights=TWO, triples="1. (Maria Lopez, like, physics)", focal=ONE)
    out = create_reflection_graph(model, stream, n_focal_points=1).invoke({})
    first, second = (stream.get(i) for i in out["written"])
    assert first.spo == (PERSONA, "like", "physics")
    assert second.spo == (PERSONA, "reflect", out["focal_points"][0])
    assert second.keywords == [PERSONA, "reflect", out["focal_points"][0]]
    fallback = {"stage": "write_back", "reason": "triple_fallback", "text": "B insight"}
    assert fallback in out["dropped"]


def test_unreadable_batched_ratings_are_asked_alone_and_counted(stream):
    ratings = ["prose only", "7", "8"]
    model = scripted(insights=TWO, ratings=ratings, focal=ONE)
    graph = create_reflection_graph(model, stream, n_focal_points=1)
    out = graph.invoke({}, {"max_concurrency": 1})
    assert [stream.get(i).poignancy for i in out["written"]] == [7, 8]
    assert out["llm_calls"] == 1 + 1 + 1 + 3 == len(model.calls)


@pytest.mark.parametrize("run", ["sync", "async"])
async def test_unratable_thoughts_get_the_fail_safe_poignancy(stream, run):
    model = scripted(insights=TWO, ratings="no idea", focal=ONE)
    graph = create_reflection_graph(model, stream, n_focal_points=1)
    with pytest.warns(UnratedWarning) as caught:
        out = graph.invoke({}) if run == "sync" else await graph.ainvoke({})
    assert ["'A insight'" in str(w.message) for w in caught] == [True, False]
    assert [stream.get(i).poignancy for i in out["written"]] == [FALLBACK_IMPORTANCE] * 2
    assert out["dropped"] == [{"stage": "write_back", "reason": "rating_fallback", "text": text}
                              for text in ("A insight", "B insight")]
    assert unrated_ids(stream) == out["written"]  # listed, to be rated again later
    assert out["reasons"][0] == ("write_back: no rating for 'A insight'; it got the fallback "
                                 "importance and is listed as unrated")
    # focal points, insights, triples, the batch of ratings, then each thought alone
    assert out["llm_calls"] == len(model.calls) == 1 + 1 + 1 + 1 + 2


def test_a_question_with_nothing_to_retrieve_is_not_asked(clock):
    # only expired thoughts: the focal points see them, the retriever skips them
    stream = new_stream(clock)
    stream.add_thought("Maria Lopez liked chess", poignancy=5, expiration=T0)
    clock.now = NOW
    model = scripted(focal=ONE)
    out = create_reflection_graph(model, stream, force=True, n_focal_points=1).invoke({})
    assert out["status"] == "no_insights"
    assert [d["reason"] for d in out["dropped"]] == ["no_retrieved"]
    assert len(model.calls) == 1 == out["llm_calls"]


# --- async ----------------------------------------------------------------------------------------


async def test_async_run_matches_the_sync_run(clock):
    results = []
    for run in ("sync", "async"):
        clock.now = T0
        stream = fill(new_stream(clock), clock)
        model = scripted(insights="Maria Lopez loves physics (because of 0, 1)\n2. naps [9]")
        graph = create_reflection_graph(model, stream)
        out = graph.invoke({}) if run == "sync" else await graph.ainvoke({})
        nodes = [stream.get(i).model_dump() for i in out["written"]]
        results.append((out, sorted(model.calls), nodes))
    assert results[0] == results[1]
    assert results[1][0]["llm_calls"] == 6


async def test_async_stream_of_updates(stream):
    graph = create_reflection_graph(scripted(), stream)
    names = [next(iter(u)) async for u in graph.astream({}, stream_mode="updates")]
    assert names[0] == "check_trigger" and names[-1] == "reset_trigger"


# --- counting, checkpointing, callbacks -----------------------------------------------------------


class Starts(BaseCallbackHandler):
    def __init__(self) -> None:
        self.starts = 0

    def on_chat_model_start(self, serialized: Any, messages: Any, **kwargs: Any) -> None:
        self.starts += 1


def test_user_callbacks_see_the_calls_and_the_count_stays_per_run(stream):
    handler = Starts()
    model = scripted()
    graph = create_reflection_graph(model, stream, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "maria"}, "callbacks": [handler]}
    first = graph.invoke({}, config)
    second = graph.invoke({"force": True}, config)
    assert handler.starts == len(model.calls) == first["llm_calls"] + second["llm_calls"]
    assert first["llm_calls"] == second["llm_calls"] == 6
    assert len(second["insights"]) == 3  # the first run's retrievals are not carried over
    third = graph.invoke({}, config)  # the earlier run's force does not stick
    assert third["status"] == "not_due" and third["written"] == [] and third["llm_calls"] == 0


def test_a_given_importance_scorer_is_used(stream):
    model = scripted()
    scorer_model = scripted(ratings="1. 9")
    scorer = ImportanceScorer(scorer_model)
    out = create_reflection_graph(model, stream, importance=scorer).invoke({})
    assert stream.get(out["written"][0]).poignancy == 9
    assert out["llm_calls"] == len(model.calls) + len(scorer_model.calls) == 6


# --- prompts and arguments ------------------------------------------------------------------------


def test_prompts_are_overridable_by_name(stream):
    model = scripted(focal="Q1", insights="I [0]")
    prompts = {
        "focal_points": "{persona} FOCAL most salient high-level questions {n}:\n{statements}",
        "focal_points_system": "",
        "insights": "high-level insights can you infer about {question}? {n}\n{statements}",
        "insights_system": "sys {persona}",
    }
    out = create_reflection_graph(model, stream, prompts=prompts, n_focal_points=1).invoke({})
    assert model.sent(FOCAL)[0] == ("", f"{PERSONA} FOCAL most salient high-level questions 1:\n"
                                        f"{KEYS['node_6']}\n{KEYS['node_7']}\n{KEYS['node_8']}\n")
    shown = format_numbered([KEYS[i] for i in out["insights"][0]["retrieved"]])
    assert model.sent(INSIGHTS) == [(f"sys {PERSONA}",
                                     f"high-level insights can you infer about Q1? 5\n{shown}")]


@pytest.mark.parametrize(("prompts", "message"), [
    ({"insight": "x"}, "unknown names ['insight']"),
    ({"planning": "x"}, "unknown names ['planning']"),
    ({"insights": "{statements} {evidence}"}, "prompts['insights']: cannot be filled"),
    ({"focal_points": "{0}"}, "prompts['focal_points']: cannot be filled"),
    ({"triples": ""}, "prompts['triples']: expected a non-empty text"),
    ({"condense": None}, "prompts['condense']: expected a non-empty text"),
])
def test_bad_prompts_are_refused(stream, prompts, message):
    with pytest.raises(ValidationError, match=re.escape(message)):
        create_reflection_graph(scripted(), stream, prompts=prompts)


def test_bad_arguments_are_refused(stream, clock):
    other = new_stream(clock, "Klaus Mueller")
    cases = [
        ({"trigger": "sometimes"}, "trigger"),
        ({"window": 0}, "window"),
        ({"k": True}, "k"),
        ({"max_insights": 2.5}, "max_insights"),
        ({"threshold": "high"}, "threshold"),
        ({"retriever": GenerativeAgentsRetriever(stream=other)}, "retriever"),
    ]
    for kwargs, field in cases:
        with pytest.raises(ValidationError) as error:
            create_reflection_graph(scripted(), stream, **kwargs)
        assert error.value.field == field
    with pytest.raises(ValidationError, match="model"):
        create_reflection_graph("gpt-4o", stream)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="stream"):
        create_reflection_graph(scripted(), "Maria")  # type: ignore[arg-type]


# --- imports --------------------------------------------------------------------------------------


@pytest.mark.slow
def test_modules_import_alone_in_fresh_processes():
    # importance imports reflection.prompts, which runs reflection/__init__ first; the other
    # way round, reflection.conversation imports graph, which imports importance: no cycle
    modules = ["langchain_genmem.llm.importance", "langchain_genmem.reflection.conversation"]
    runs = [
        subprocess.Popen([sys.executable, "-c", f"import {m}"], stderr=subprocess.PIPE, text=True)
        for m in modules
    ]
    for module, run in zip(modules, runs, strict=False):
        _, errors = run.communicate(timeout=120)
        assert run.returncode == 0, f"{module}: {errors}"


def test_reflection_package_exports():
    import langchain_genmem.reflection as reflection

    for name in reflection.__all__:
        assert getattr(reflection, name) is not None
    with pytest.raises(AttributeError):
        reflection.nothing_here  # noqa: B018


def test_a_reflection_without_questions_says_why(stream):
    out = create_reflection_graph(scripted(focal="```\n```"), stream).invoke({})
    assert out["status"] == "no_questions" and out["written"] == []
    assert out["reasons"] == ["focal_points: the reply held nothing usable: '``` ```'"]
    out = create_reflection_graph(scripted(focal=""), stream).invoke({})
    assert out["reasons"] == [
        "focal_points: the reply was empty, cut at its max_tokens or not valid for its schema"
    ]


def test_the_budget_of_calls_skips_the_rest_and_says_so(stream):
    model = scripted(insights=TWO, focal=ONE)
    settings = ReflectionSettings(max_calls=2, n_focal_points=1)
    with pytest.warns(UnratedWarning):
        out = create_reflection_graph(model, stream, settings=settings).invoke({})
    assert out["llm_calls"] == len(model.calls) == 2  # the questions, the insights
    # the insights are kept: written with the fallback triple and importance, unrated
    assert out["status"] == "reflected" and unrated_ids(stream) == out["written"]
    assert [stream.get(i).predicate for i in out["written"]] == ["reflect", "reflect"]
    assert out["reasons"][-2:] == [
        "write_back: 1 call skipped: the budget of 2 model calls was spent (raise max_calls)",
        "write_back: 2 ratings skipped: the budget of 2 model calls was spent (raise max_calls)",
    ]
    skipped = [d for d in out["dropped"] if d["reason"] == "budget_spent"]
    assert [(d["stage"], d["numbers"]) for d in skipped] == [("write_back", [1]),
                                                             ("write_back", [2])]


def test_settings_and_keyword_arguments_are_one_path(stream):
    model = scripted(insights=TWO, focal=ONE)
    settings = ReflectionSettings(n_focal_points=3, k=2, output="text")
    out = create_reflection_graph(model, stream, settings=settings, n_focal_points=1).invoke({})
    assert out["focal_points"] == [ONE]  # the keyword argument wins over the settings
    assert all(len(e["retrieved"]) <= 2 for e in out["insights"])  # the settings' k
    with pytest.raises(ValidationError) as caught:
        create_reflection_graph(model, stream, settings=settings, k=0)
    assert caught.value.field == "k"
