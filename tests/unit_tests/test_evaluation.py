"""Metrics, splits, the example loader and evaluate() of langchain_genmem.evaluation.metrics."""

from __future__ import annotations

import json
import math
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from langchain_genmem import GenerativeAgentsRetriever, MemoryStream, SimulationClock
from langchain_genmem.core.errors import GenMemError, ValidationError
from langchain_genmem.evaluation.metrics import (
    Example,
    evaluate,
    load_examples,
    ndcg_at_k,
    recall_at_k,
    split_examples,
    split_stratified,
)

FAKE = DeterministicFakeEmbedding(size=8)


# ---------------------------------------------------------------------------- metrics


def test_recall_counts_the_relevant_ids_in_the_first_k() -> None:
    ranked = ["a", "b", "c", "d"]
    relevant = {"b", "d", "x"}
    assert recall_at_k(ranked, relevant, 1) == 0.0
    assert recall_at_k(ranked, relevant, 2) == pytest.approx(1 / 3)
    assert recall_at_k(ranked, relevant, 4) == pytest.approx(2 / 3)
    assert recall_at_k(ranked, relevant, 30) == pytest.approx(2 / 3)  # k past the list
    assert recall_at_k(["b", "b", "b"], {"b", "d"}, 3) == 0.5  # a repeat counts once


def test_ndcg_on_hand_computed_rankings() -> None:
    ranked = ["a", "b", "c", "d"]
    relevant = ["b", "d"]
    dcg4 = 1 / math.log2(3) + 1 / math.log2(5)  # ranks 2 and 4
    ideal = 1 + 1 / math.log2(3)  # both at the top
    assert ndcg_at_k(ranked, relevant, 4) == pytest.approx(dcg4 / ideal)  # 0.6509
    assert ndcg_at_k(ranked, relevant, 4) == pytest.approx(0.65092, abs=1e-5)
    assert ndcg_at_k(ranked, relevant, 2) == pytest.approx((1 / math.log2(3)) / ideal)
    assert ndcg_at_k(ranked, relevant, 1) == 0.0
    assert ndcg_at_k(["b", "d", "a"], relevant, 3) == pytest.approx(1.0)


def test_ndcg_ideal_holds_at_most_k_relevant_ids() -> None:
    # 3 relevant ids, k=1: the ideal is one hit at rank 1, so a hit at rank 1 is perfect.
    assert ndcg_at_k(["x", "a"], ["x", "y", "z"], 1) == pytest.approx(1.0)
    # A repeated relevant id gains once: [x, x] at k=2 is 1 / (1 + 1/log2(3)).
    assert ndcg_at_k(["x", "x"], ["x", "y"], 2) == pytest.approx(1 / (1 + 1 / math.log2(3)))


@pytest.mark.parametrize("k", [0, -1, 2.5, True])
def test_metrics_refuse_a_bad_k(k: Any) -> None:
    for metric in (recall_at_k, ndcg_at_k):
        with pytest.raises(ValidationError, match="k: expected a whole number"):
            metric(["a"], ["a"], k)


def test_metrics_refuse_an_empty_relevant_set() -> None:
    for metric in (recall_at_k, ndcg_at_k):
        with pytest.raises(ValidationError, match="relevant: at least one"):
            metric(["a"], [], 5)


# ---------------------------------------------------------------------------- examples


def test_example_checks_its_fields() -> None:
    assert Example("玛丽亚暗恋谁？", ["node_10"]).relevant == ("node_10",)
    with pytest.raises(ValidationError, match="query: expected non-empty text"):
        Example("  ", ["node_1"])
    with pytest.raises(ValidationError, match="relevant: at least one"):
        Example("q", [])
    with pytest.raises(ValidationError, match="relevant: expected a list of node ids, got text"):
        Example("q", "node_1")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="'node_1' is listed twice"):
        Example("q", ["node_1", "node_1"])
    with pytest.raises(ValidationError, match="relevant: 3 is not a node id"):
        Example("q", ["node_1", 3])  # type: ignore[list-item]


def examples(n: int) -> list[Example]:
    return [Example(f"问题 {i}", [f"node_{i}"], id=f"q{i}") for i in range(n)]


def test_split_is_deterministic_disjoint_and_complete() -> None:
    items = examples(50)
    train, held = split_examples(items, 0.7, seed=3)
    assert (train, held) == split_examples(items, 0.7, seed=3)
    assert len(train) == 35 and len(held) == 15
    assert not {e.id for e in train} & {e.id for e in held}
    assert sorted([*train, *held], key=lambda e: int(e.id[1:])) == items
    assert train == sorted(train, key=items.index)  # each part keeps the input order
    assert split_examples(items, 0.7, seed=4)[0] != train  # the seed matters
    assert split_examples(items, 0.0, seed=3) == ([], items)
    assert split_examples(items, 1.0, seed=3) == (items, [])


@pytest.mark.parametrize("fraction", [-0.1, 1.5, "half", math.nan])
def test_split_refuses_a_bad_fraction(fraction: Any) -> None:
    with pytest.raises(ValidationError, match="train_fraction"):
        split_examples(examples(3), fraction, seed=0)


def test_stratified_split_shares_every_stratum_and_carries_the_alternation_over() -> None:
    kinds = ["事实"] * 5 + ["时间"] * 3 + ["context"] * 1 + ["multi"] * 1
    items = [Example(f"问题 {n}", [f"node_{n}"], id=f"q{n}", language="zh", group=kind)
             for n, kind in enumerate(kinds)]
    train, held = split_stratified(items, lambda e: e.group)
    assert (train, held) == split_stratified(items, lambda e: e.group)
    assert [e.id for e in train] == ["q0", "q2", "q4", "q6", "q8"]
    assert [e.id for e in held] == ["q1", "q3", "q5", "q7", "q9"]
    # two one-example strata land in different halves: the alternation went on across strata
    assert {e.group for e in train} == {"事实", "时间", "context"}
    assert {e.group for e in held} == {"事实", "时间", "multi"}
    shuffled = items[5:] + items[:5]  # the strata's order and the input order decide
    train2, held2 = split_stratified(shuffled, lambda e: e.group)
    assert [e.id for e in train2] == ["q5", "q7", "q9", "q1", "q3"]
    assert sorted([*train2, *held2], key=items.index) == items
    assert split_stratified([], lambda e: e.group) == ([], [])


# ---------------------------------------------------------------------------- loader


def write_lines(path: Path, *rows: Any) -> Path:
    lines = [r if isinstance(r, str) else json.dumps(r, ensure_ascii=False) for r in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


GOOD = {"id": "zh-1", "persona": "玛丽亚", "language": "zh", "group": "fact",
        "question": "玛丽亚暗恋的人是谁？", "relevant": ["node_10"], "note": "暗恋"}


def test_loader_reads_chinese_lines_and_optional_fields(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "q.jsonl", GOOD, "",
                       {"query": "When?", "relevant": ["node_1", "node_2"],
                        "at": "2023-02-13 09:00:00"})
    first, second = load_examples(path)
    assert first == Example("玛丽亚暗恋的人是谁？", ("node_10",), id="zh-1", persona="玛丽亚",
                            language="zh", group="fact", note="暗恋")
    assert second.relevant == ("node_1", "node_2")
    assert second.at == datetime(2023, 2, 13, 9, 0)


def test_loader_reads_a_json_list(tmp_path: Path) -> None:
    path = tmp_path / "q.json"
    path.write_text(json.dumps([GOOD, {"query": "x", "relevant": "node_1"}]), encoding="utf-8")
    with pytest.raises(ValidationError, match=r"q\.json, item 1: relevant: expected a list"):
        load_examples(path)
    path.write_text(json.dumps([GOOD]), encoding="utf-8")
    assert [e.id for e in load_examples(path)] == ["zh-1"]


@pytest.mark.parametrize(("row", "message"), [
    ("{not json", r"line 2: not JSON"),
    ({"question": "q"}, r"line 2: relevant: missing"),
    ({"question": "q", "relevant": []}, r"line 2: relevant: at least one node id"),
    ({"question": "q", "relevant": 7}, r"line 2: relevant: expected a list of node ids, got 7"),
    ({"question": "", "relevant": ["node_1"]}, r"line 2: query: expected non-empty text"),
    ({"question": "q", "relevant": ["node_1"], "answer": "x"}, r"line 2: unknown field 'answer'"),
    ({"question": "q", "query": "q", "relevant": ["node_1"]}, r"line 2: give 'question' or"),
    ({"question": "q", "relevant": ["node_1"], "at": "tuesday"}, r"line 2: at: 'tuesday' is not"),
    ({"question": "q", "relevant": ["node_1"], "group": 3}, r"line 2: group: expected text"),
    (["q", ["node_1"]], r"line 2: expected an object, got list"),
    ({**GOOD, "question": "again"}, r"id 'zh-1' is used twice"),
])
def test_loader_errors_name_the_line_and_field(tmp_path: Path, row: Any, message: str) -> None:
    path = write_lines(tmp_path / "q.jsonl", GOOD, row)
    with pytest.raises(ValidationError, match=message) as info:
        load_examples(path)
    assert isinstance(info.value, GenMemError)
    assert "q.jsonl" in str(info.value)


def test_loader_refuses_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="cannot read"):
        load_examples(tmp_path / "none.jsonl")


@pytest.fixture
def stream(tmp_path: Path) -> MemoryStream:
    clock = SimulationClock(datetime(2023, 2, 13, 12, 0))
    s = MemoryStream("玛丽亚", embeddings=FAKE, path=str(tmp_path / "store"), clock=clock)
    for text in ("玛丽亚在刷牙", "玛丽亚在吃早饭", "克劳斯在看书"):
        s.add_event(text, created=datetime(2023, 2, 13, 9, 0), poignancy=3)
    yield s
    s.close()


def test_loader_checks_node_ids_against_a_stream(tmp_path: Path, stream: MemoryStream) -> None:
    path = write_lines(tmp_path / "q.jsonl", {**GOOD, "relevant": ["node_1", "node_3"]},
                       {**GOOD, "id": "zh-2", "relevant": ["node_2", "node_9"]})
    with pytest.raises(ValidationError, match="line 2: relevant: no memory 'node_9' in the stream"):
        load_examples(path, known_ids=stream)
    with pytest.raises(ValidationError, match="line 1: persona: '玛丽亚' is not one of other"):
        load_examples(path, known_ids={"other": stream})
    with pytest.raises(ValidationError, match="line 2: .*'node_9'.* of persona '玛丽亚'"):
        load_examples(path, known_ids={"玛丽亚": {"node_1", "node_2", "node_3"}})
    write_lines(path, {**GOOD, "relevant": ["node_1", "node_3"]})
    assert len(load_examples(path, known_ids={"玛丽亚": stream})) == 1


# ---------------------------------------------------------------------------- evaluate


def test_evaluate_averages_and_keeps_every_query() -> None:
    items = [Example("a", ["n1"], id="a", language="en"),
             Example("b", ["n2", "n3"], id="b", language="zh")]
    answers = {"a": ["n1", "x"],
               "b": [Document("", id="x"), Document("", metadata={"node_id": "n3"})]}
    report = evaluate(lambda e: answers[e.id], items, ks=(1, 2))
    assert report.count == 2 and report.ks == (1, 2)
    assert report.results[1].ranked == ("x", "n3")
    assert report.recall == {1: pytest.approx(0.5), 2: pytest.approx(0.75)}
    ndcg_b2 = (1 / math.log2(3)) / (1 + 1 / math.log2(3))
    assert report.ndcg[2] == pytest.approx((1.0 + ndcg_b2) / 2)
    assert all(r.latency_ms >= 0 for r in report.results)
    assert report.latency_ms["max"] >= report.latency_ms["p50"]
    zh = report.subset(lambda e: e.language == "zh")
    assert zh.count == 1 and zh.recall[2] == pytest.approx(0.5)
    assert math.isnan(report.subset(lambda e: False).recall[1])


def test_evaluate_refuses_documents_without_ids_and_empty_ks() -> None:
    items = [Example("a", ["n1"])]
    with pytest.raises(ValidationError, match="no id or metadata"):
        evaluate(lambda e: [Document("text")], items)
    with pytest.raises(ValidationError, match="ks: at least one"):
        evaluate(lambda e: ["n1"], items, ks=())


def test_evaluate_runs_the_retriever_at_the_example_time(stream: MemoryStream) -> None:
    retriever = GenerativeAgentsRetriever(stream=stream, k=2, update_access=True)
    at = datetime(2023, 2, 13, 15, 30)
    report = evaluate(retriever, [Example("刷牙", ["node_1"], at=at)], ks=(1, 3))
    ranked = report.results[0].ranked
    assert len(ranked) == 3  # asked for max(ks) documents, not the retriever's k
    assert {stream.get(i).last_accessed for i in ranked} == {at}  # retrieved at `at`
    assert stream.clock() == datetime(2023, 2, 13, 12, 0)  # and the clock is restored


def test_evaluate_refuses_a_time_the_stream_cannot_take(tmp_path: Path) -> None:
    s = MemoryStream("x", embeddings=FAKE, path=str(tmp_path / "wall"), clock=datetime.now)
    s.add_event("玛丽亚在刷牙", poignancy=3)
    retriever = GenerativeAgentsRetriever(stream=s, update_access=False)
    with pytest.raises(ValidationError, match="at: the stream's clock is not a SimulationClock"):
        evaluate(retriever, [Example("刷牙", ["node_1"], at=datetime(2023, 2, 13))])
    s.close()
