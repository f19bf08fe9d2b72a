"""The Python design's functions: generate_insight, condense_insights, generate_reflection.

They run the reflection graph's stages one by one: the tests check their exact prompts, seed
004's shapes and examples, and that they write what the graph writes for the same replies.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

from langchain_genmem import GenerativeAgentsRetriever, ImportanceScorer, MemoryStream
from langchain_genmem.core.errors import ValidationError
from langchain_genmem.core.nodes import node_number
from langchain_genmem.core.timeutil import SimulationClock as Clock
from langchain_genmem.llm.parsers import format_numbered
from langchain_genmem.llm.prompts import (
    DEFAULT_CONDENSE_PROMPT,
    DEFAULT_CONDENSE_SYSTEM_PROMPT,
    DEFAULT_FOCAL_POINTS_PROMPT,
    DEFAULT_INSIGHTS_PROMPT,
    DEFAULT_INSIGHTS_SYSTEM_PROMPT,
    DEFAULT_QUESTIONS_SYSTEM_PROMPT,
)
from langchain_genmem.reflection import (
    acondense_insights,
    agenerate_insight,
    agenerate_reflection,
    condense_insights,
    create_reflection_graph,
    generate_insight,
    generate_reflection,
    parse_insights,
)
from tests.support.reflection_script import (
    CONDENSE,
    FOCAL,
    INSIGHTS,
    KEYS,
    MEMORIES,
    NOW,
    PERSONA,
    QUESTIONS,
    T0,
    ScriptedChatModel,
    fill,
    new_stream,
    scripted,
    scripted_stream,
)

FOCAL_POINTS = ["What does Maria Lopez study?", "Who is Klaus Mueller?",
                "How does Maria spend her day?"]
TWO_INSIGHTS = "Maria Lopez loves physics (because of 0, 1)\n2. Maria Lopez works hard [2]"

# --- the design's examples, verbatim --------------------------------------------------------------

SEED_INSIGHT_RESPONSES = """1. Missing data in user_dims table for country may impact accuracy of data analysis and decision-making for marketing campaigns and user segmentation. [7, 52, 47]
2. Inconsistent information in user_dims table may lead to incorrect analysis and decision-making for user segmentation and marketing campaigns. [22, 40]
3. Duplicated and inconsistent data in user_dims table may impact accuracy of data-driven decisions for user segmentation and marketing campaigns. [3, 57, 62, 42]
4. Large number of missing values in bitcoin_price_data table may affect accuracy of analysis and decision-making for cryptocurrency investments. [14]"""  # noqa: E501

SEED_PARSED = [
    (
        "Missing data in user_dims table for country may impact accuracy of data analysis and decision-making for marketing campaigns and user segmentation.",  # noqa: E501
        [7, 52, 47]
    ),
    (
        "Inconsistent information in user_dims table may lead to incorrect analysis and decision-making for user segmentation and marketing campaigns.",  # noqa: E501
        [22, 40]
    ),
    (
        "Duplicated and inconsistent data in user_dims table may impact accuracy of data-driven decisions for user segmentation and marketing campaigns.",  # noqa: E501
        [3, 57, 62, 42]
    ),
    (
        "Large number of missing values in bitcoin_price_data table may affect accuracy of analysis and decision-making for cryptocurrency investments.",  # noqa: E501
        [14]
    )
]

SEED_INSIGHT_LIST = """1. The user_dims table appears to have significant data quality issues affecting country information which could impact marketing campaigns [7, 52, 47]
2. There are inconsistencies in the user_dims table that might lead to problems in user segmentation [22, 40]  
3. The user_dims table has duplicate entries for some users which is problematic [3, 57]
4. Missing country data in user_dims affects geographical analysis [62, 42]
5. The bitcoin_price_data table has a large number of missing values which is concerning for analysis [14]
6. Data quality issues in user_dims extend beyond just country information [26, 7]
7. User segmentation accuracy is compromised due to data inconsistencies [22, 12]
8. Marketing campaign effectiveness may be reduced due to missing geographical data [47, 52]"""  # noqa: E501, W291

SEED_CONDENSE_SYSTEM_PROMPT = '''
You are an AI who is an expert at condensing information into concise numbered, bullet points. 
Please condense the following insights into a maximum of 5 bullet points, each starting with a number followed by a period.
Include all the appropriate index numbers referencing the information in square brackets, listed at the end of each insight.
Do not include multiple, unrelated insights in one bullet point. Ensure each insight explicitly mentions the subject by name. 
'''  # noqa: E501, W291

SEED_CONDENSED_OUTPUT = """1. Missing data in user_dims table for country may impact accuracy of data analysis and decision-making for marketing campaigns and user segmentation. [7, 52, 47]
2. Inconsistent information in user_dims table may lead to incorrect analysis and decision-making for user segmentation and marketing campaigns. [22, 40]
3. Duplicated and inconsistent data in user_dims table may impact accuracy of data-driven decisions for user segmentation and marketing campaigns. [3, 57, 62, 42]
4. Large number of missing values in bitcoin_price_data table may affect accuracy of analysis and decision-making for cryptocurrency investments. [14]
5. The user_dims table has data issues for many users. [26, 7, 22, 12, 17, 62, 47, 57, 52]"""  # noqa: E501


def condenser(reply: Any) -> ScriptedChatModel:
    return ScriptedChatModel(rules=[(CONDENSE, reply)])


@pytest.fixture
def clock() -> Clock:
    return Clock(T0)


@pytest.fixture
def stream(clock: Clock) -> MemoryStream:
    return fill(new_stream(clock), clock)


def relevant(stream: MemoryStream, question: str, k: int = 30) -> list[str]:
    """The Python design's per-question retrieval, computed apart: relevance > 0.5, best k."""
    peek = GenerativeAgentsRetriever(stream=stream, update_access=False)
    docs = peek.invoke(question, k=len(stream))
    return [d.metadata["node_id"] for d in docs if d.metadata["relevance"] > 0.5][:k]


# --- parse_insights and condense_insights: the design's examples ----------------------------------


def test_parse_insights_reads_seed_004s_example_exactly():
    assert parse_insights(SEED_INSIGHT_RESPONSES) == SEED_PARSED


def test_condense_insights_sends_seed_004s_prompts_and_returns_its_example_output():
    model = condenser(SEED_CONDENSED_OUTPUT)
    out = condense_insights(SEED_INSIGHT_LIST, model)
    assert out == SEED_CONDENSED_OUTPUT
    [(system, human)] = model.calls
    seed_lines = SEED_CONDENSE_SYSTEM_PROMPT.strip().splitlines()
    seed_system = "\n".join(line.rstrip() for line in seed_lines)
    assert system == seed_system == DEFAULT_CONDENSE_SYSTEM_PROMPT.format(n=5)
    listed = "".join(f"{line.rstrip()}\n" for line in SEED_INSIGHT_LIST.splitlines())
    assert human == DEFAULT_CONDENSE_PROMPT.format(insights=listed)
    assert human.startswith("Please condense the insights generated in this list:\n\n1. The ")
    assert parse_insights(out)[4] == ("The user_dims table has data issues for many users.",
                                      [26, 7, 22, 12, 17, 62, 47, 57, 52])


def test_condense_insights_takes_pairs_and_keeps_at_most_five_cited_bullets():
    pairs = [(f"用户表 user_dims 的问题 {i}", [i, i + 1]) for i in range(1, 8)]
    reply = "\n".join(f"{i}. 洞察 {i} [{i}]" for i in range(1, 7)) + "\n7. 没有引用的洞察"
    model = condenser("下面是浓缩结果：\n" + reply)
    out = condense_insights(pairs, model, max_insights=5)
    assert out == "\n".join(f"{i}. 洞察 {i} [{i}]" for i in range(1, 6))
    listed = "".join(f"{i}. 用户表 user_dims 的问题 {i} [{i}, {i + 1}]\n" for i in range(1, 8))
    assert model.calls == [(DEFAULT_CONDENSE_SYSTEM_PROMPT.format(n=5),
                            DEFAULT_CONDENSE_PROMPT.format(insights=listed))]


def test_an_unreadable_condensed_reply_gives_back_the_first_insights(caplog):
    pairs = [(f"insight {i}", [i]) for i in range(1, 8)]
    with caplog.at_level(logging.INFO, logger="langchain_genmem.reflection.stepwise"):
        out = condense_insights(pairs, condenser("Sorry, I cannot do that."), max_insights=3)
    assert out == "1. insight 1 [1]\n2. insight 2 [2]\n3. insight 3 [3]"
    assert "no_evidence" in caplog.text  # the reply's line without a citation is reported


@pytest.mark.parametrize(("given", "message"), [
    ("", "insight_list: no insight found"),
    ([], "insight_list: empty"),
    ([("text", "7")], r"insight_list\[0\]: expected the evidence as a list of integers"),
    ([("", [1])], r"insight_list\[0\]: expected an \(insight, \[numbers\]\) pair"),
    ([("a", [1], "b")], r"insight_list\[0\]"),
    (b"not a list", "insight_list: expected a list"),
])
def test_condense_insights_refuses_bad_input_before_any_call(given, message):
    model = condenser("1. x [1]")
    with pytest.raises(ValidationError, match=message):
        condense_insights(given, model)
    with pytest.raises(ValidationError, match="max_insights"):
        condense_insights([("a", [1])], model, max_insights=0)
    assert model.calls == []


async def test_acondense_insights_matches_the_sync_call():
    sync_model, async_model = condenser(SEED_CONDENSED_OUTPUT), condenser(SEED_CONDENSED_OUTPUT)
    assert await acondense_insights(SEED_INSIGHT_LIST, async_model) == condense_insights(
        SEED_INSIGHT_LIST, sync_model)
    assert async_model.calls == sync_model.calls


# --- generate_insight -----------------------------------------------------------------------------


def test_generate_insight_follows_seed_004s_steps_with_exact_prompts(stream):
    model = scripted(insights=TWO_INSIGHTS)
    expected = {q: relevant(stream, q) for q in FOCAL_POINTS}
    assert all(2 < len(ids) < 6 for ids in expected.values())  # the filter left some out
    questions, insights_list = generate_insight(stream, model)

    # 1-3: the newest 15 events and thoughts (idle and chats never count), one question call
    shown = [KEYS[i] for i in ("node_2", "node_3", "node_5", "node_6", "node_7", "node_8")]
    focal = DEFAULT_FOCAL_POINTS_PROMPT.format(statements="".join(f"{k}\n" for k in shown), n=3)
    assert model.sent(FOCAL) == [(DEFAULT_QUESTIONS_SYSTEM_PROMPT, focal)]
    assert questions == FOCAL_POINTS
    # 4-5: per question, the memories with relevance > 0.5, numbered from 0
    assert sorted(model.sent(INSIGHTS)) == sorted(
        (DEFAULT_INSIGHTS_SYSTEM_PROMPT, DEFAULT_INSIGHTS_PROMPT.format(
            statements=format_numbered([KEYS[i] for i in expected[q]]), n=5))
        for q in FOCAL_POINTS
    )
    # the cited numbers come back as the memories' numbers in the stream (the design's pointers)
    assert insights_list == [
        [("Maria Lopez loves physics", [node_number(i) for i in expected[q][:2]]),
         ("Maria Lopez works hard", [node_number(expected[q][2])])]
        for q in FOCAL_POINTS
    ]
    # 6: no question had more than five insights, so nothing to condense; nothing written
    assert model.sent(CONDENSE) == [] and len(stream) == len(MEMORIES)
    accessed = {i for ids in expected.values() for i in ids}
    assert {n.node_id for n in stream.nodes() if n.last_accessed == NOW} == accessed


def test_generate_insight_returns_none_when_the_trigger_does_not_fire(stream):
    # the newest 3 non-idle events and thoughts: node_6 (5), node_7 (3), node_8 (4): 1.2 on
    # the Python design's scale
    model = scripted()
    assert generate_insight(stream, model, context_window=3, threshold=1.25) is None
    assert model.calls == []
    assert generate_insight(stream, model, context_window=3, threshold=1.2) is not None
    # the same memories on the stored scale
    assert generate_insight(scripted_stream(), scripted(), context_window=3, threshold=12.5,
                            importance_scale="poignancy") is None
    assert generate_insight(scripted_stream(), scripted(), context_window=3, threshold=12,
                            importance_scale="poignancy") is not None
    # forced, and threshold None: the persona's importance_trigger_max (150) / 10
    assert generate_insight(stream, scripted(), threshold=None) is None
    assert generate_insight(stream, scripted(), threshold=None, force=True) is not None
    assert [n.poignancy for n in stream.nodes()] == [p for *_, p in reversed(MEMORIES)]




def test_generate_insight_condenses_a_question_over_the_maximum(stream):
    condensed = "1. Maria Lopez studies a lot [0, 1]\n2. hallucinated [9]"
    shown = relevant(stream, FOCAL_POINTS[0])
    lines = [f"{i}. insight number {i} [{(i - 1) % len(shown)}]" for i in range(1, 8)]
    model = scripted(focal=FOCAL_POINTS[0], insights="\n".join(lines), condense=condensed)
    questions, insights_list = generate_insight(stream, model, n_questions=1, max_insights=5)
    assert questions == [FOCAL_POINTS[0]]
    assert insights_list == [[("Maria Lopez studies a lot", [node_number(i) for i in shown[:2]])]]
    listed = "".join(f"{line}\n" for line in lines)
    assert model.sent(CONDENSE) == [(DEFAULT_CONDENSE_SYSTEM_PROMPT.format(n=5),
                                     DEFAULT_CONDENSE_PROMPT.format(insights=listed))]


def test_generate_insight_without_usable_questions_or_evidence(stream):
    assert generate_insight(stream, scripted(focal="")) == ([], [])
    found = generate_insight(stream, scripted(insights="nothing cited here"))
    assert found == (FOCAL_POINTS, [[], [], []])


def test_generate_insight_refuses_bad_arguments(stream):
    cases = [
        ({"context_window": 0}, "window"),
        ({"threshold": "high"}, "threshold"),
        ({"relevance_min": float("nan")}, "relevance_min"),
        ({"importance_scale": "percent"}, "importance_scale"),
        ({"n_questions": 0}, "n_focal_points"),
    ]
    for kwargs, field in cases:
        with pytest.raises(ValidationError) as error:
            generate_insight(stream, scripted(), **kwargs)
        assert error.value.field == field
    with pytest.raises(ValidationError, match="model"):
        generate_insight(stream, "gpt-4o")  # type: ignore[arg-type]


# --- generate_reflection --------------------------------------------------------------------------


def test_generate_reflection_merges_repeats_and_takes_a_flat_list(stream):
    model = scripted(triples="1. (Maria Lopez, study, physics)\n2. (Maria Lopez, 喜欢, 咖啡)")
    nodes = generate_reflection(stream, [
        ("Maria Lopez studies physics", [2]),
        ("Maria Lopez 喜欢 Hobbs Cafe 的咖啡", [7]),
        ("maria lopez studies  physics.", [6, 2]),
    ], model)
    assert [n.description for n in nodes] == ["Maria Lopez studies physics",
                                              "Maria Lopez 喜欢 Hobbs Cafe 的咖啡"]
    assert nodes[0].filling == ["node_2", "node_6"] and nodes[0].depth == 2
    assert nodes[1].spo == (PERSONA, "喜欢", "咖啡")
    assert nodes[1].keywords == [PERSONA, "喜欢", "咖啡"]


def test_generate_reflection_falls_back_to_the_question_as_the_graph_does(stream):
    model = scripted(triples="nothing readable")
    [asked, plain] = generate_reflection(
        stream, [[("A insight", [2])], [("B insight", [3])]], model,
        questions=["What does Maria Lopez study?", ""])
    assert asked.spo == (PERSONA, "reflect", "What does Maria Lopez study?")
    assert plain.spo == (PERSONA, "reflect", "reflection")


@pytest.mark.parametrize(("given", "kwargs", "message"), [
    ([[("x", [99])]], {}, r"insights_list\[0\]\[0\]: pointers \[99\] are not memories of "
                          r"'Maria Lopez' \(its memories are numbered 1 to 8\)"),
    ([[("x", [0])]], {}, r"pointers \[0\]"),
    ([[("x", [])]], {}, r"insights_list\[0\]\[0\]: 'x' has no pointer"),
    ([[("x", [1])], [("y", [-1])]], {}, r"insights_list\[1\]\[0\]: expected the evidence"),
    ("x [1]", {}, "insights_list: expected a list of lists"),
    ([[("x", [1])]], {"questions": ["a", "b"]}, "questions: 2 given for 1 lists"),
    ([[("x", [1])]], {"questions": "a"}, "questions: expected a list of texts"),
])
def test_generate_reflection_checks_every_pointer_before_any_call(stream, given, kwargs, message):
    model = scripted()
    with pytest.raises(ValidationError, match=message):
        generate_reflection(stream, given, model, **kwargs)
    assert model.calls == [] and len(stream) == len(MEMORIES)


def test_generate_reflection_uses_the_streams_scorer_without_a_model(clock):
    bare = fill(new_stream(clock), clock)
    with pytest.raises(ValidationError, match="model: generate_reflection needs a chat model"):
        generate_reflection(bare, [[("x", [1])]])
    model = scripted(ratings="1. 9")
    stream = MemoryStream(PERSONA, embeddings=bare.embeddings, clock=clock,
                          importance=ImportanceScorer(model))
    stream.add_event("Maria Lopez is studying physics", poignancy=8)
    [thought] = generate_reflection(stream, [[("Maria Lopez studies", [1])]])
    assert thought.poignancy == 9 and len(model.calls) == 2


def test_empty_insights_write_nothing(stream):
    model = scripted()
    assert generate_reflection(stream, [[], []], model) == []
    assert generate_reflection(stream, [], model) == []
    assert model.calls == [] and len(stream) == len(MEMORIES)


# --- the same thoughts as the graph ---------------------------------------------------------------


def rules() -> ScriptedChatModel:
    condensed = ("1. Maria Lopez loves physics [0, 1]\n2. Maria Lopez works hard [2]\n"
                 "3. 玛丽亚很忙 [1]")
    seven = "\n".join(f"{i}. insight number {i} [{i % 3}]" for i in range(1, 8))
    return scripted(focal=QUESTIONS, insights=[seven, TWO_INSIGHTS, TWO_INSIGHTS],
                    condense=condensed)


@pytest.mark.parametrize("run", ["sync", "async"])
async def test_the_functions_write_what_the_graph_writes(run):
    by_graph, by_functions = scripted_stream(), scripted_stream()
    graph_model, functions_model = rules(), rules()
    graph = create_reflection_graph(graph_model, by_graph, trigger="window", window=15,
                                    threshold=30, relevance_min=0.5)
    out = graph.invoke({}, {"max_concurrency": 1})
    config = {"max_concurrency": 1}
    if run == "sync":
        questions, insights_list = generate_insight(by_functions, functions_model, config=config)
        nodes = generate_reflection(by_functions, insights_list, functions_model,
                                    questions=questions, config=config)
    else:
        questions, insights_list = await agenerate_insight(by_functions, functions_model,
                                                           config=config)
        nodes = await agenerate_reflection(by_functions, insights_list, functions_model,
                                           questions=questions, config=config)

    assert out["status"] == "reflected" and out["trigger"]["value"] == 33
    assert questions == out["focal_points"]
    assert insights_list == [
        [(x["text"], [node_number(i) for i in x["evidence"]]) for x in entry["insights"]]
        for entry in out["insights"]
    ]
    assert any(entry["condensed"] for entry in out["insights"])
    # the thoughts written, field by field
    assert [n.node_id for n in nodes] == out["written"] == ["node_9", "node_10", "node_11"]
    for node in nodes:
        written = by_graph.get(node.node_id)
        for field, value in node.model_dump().items():
            assert getattr(written, field) == value, field
    # the same prompts, and the same access times on every memory
    assert sorted(functions_model.calls) == sorted(graph_model.calls)
    dumps = [[n.model_dump() for n in s.nodes()] for s in (by_functions, by_graph)]
    assert dumps[0] == dumps[1]
    assert by_functions.state.importance_trigger_curr == by_graph.state.importance_trigger_curr


def test_the_graph_filters_evidence_by_relevance(stream):
    model = scripted(insights=TWO_INSIGHTS)
    expected = {q: relevant(stream, q, k=4) for q in FOCAL_POINTS}
    out = create_reflection_graph(model, stream, relevance_min=0.5, k=4).invoke({})
    assert {e["question"]: e["retrieved"] for e in out["insights"]} == expected
    with pytest.raises(ValidationError, match="relevance_min"):
        create_reflection_graph(model, stream, relevance_min="0.5")


def test_generate_insight_forced_on_an_empty_stream_makes_no_call(clock):
    model = scripted()
    assert generate_insight(new_stream(clock), model) is None
    assert generate_insight(new_stream(clock), model, force=True) == ([], [])
    assert model.calls == []


def test_the_step_by_step_functions_take_the_settings(stream):
    from langchain_genmem import ReflectionSettings
    from langchain_genmem.reflection.stepwise import DESIGN_SETTINGS

    # the design's window of 15 and threshold 3 unless settings say otherwise
    assert (DESIGN_SETTINGS.window, DESIGN_SETTINGS.threshold) == (15, 3.0)
    tight = ReflectionSettings(window=3, threshold=1.25)
    assert generate_insight(stream, scripted(), settings=tight) is None  # 1.2 < 1.25
    assert generate_insight(stream, scripted(), settings=tight, threshold=1.2) is not None
    model = condenser("1. 洞察 [1]\n2. 洞察二 [2]\n3. 洞察三 [3]")
    out = condense_insights([("a", [1]), ("b", [2])], model,
                            settings=ReflectionSettings(max_insights=2))
    assert out == "1. 洞察 [1]\n2. 洞察二 [2]"
    assert model.calls[0][0] == DEFAULT_CONDENSE_SYSTEM_PROMPT.format(n=2)
