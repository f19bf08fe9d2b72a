"""fit_weights: weights learned from labelled examples on streams where the answer is known."""

from __future__ import annotations

import random
from datetime import datetime, timedelta

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from langchain_genmem import GenerativeAgentsRetriever, MemoryStream, SimulationClock
from langchain_genmem.core.errors import ValidationError
from langchain_genmem.evaluation.metrics import Example, evaluate, split_examples
from langchain_genmem.evaluation.tuning import (
    WEIGHT_TOTAL,
    PreparedExamples,
    Setting,
    fit_weights,
)

T0 = datetime(2023, 2, 13, 9, 0)
TOPICS = ["物理", "咖啡", "音乐", "绘画", "足球", "烹饪", "旅行", "电影", "诗歌", "编程",
          "园艺", "摄影", "舞蹈", "书法", "围棋", "钢琴", "滑雪", "游泳"]


def stream_of(name: str, clock: SimulationClock | None = None) -> MemoryStream:
    """An in-memory stream whose cosines are noise (random 16-d vectors per text)."""
    return MemoryStream(name, embeddings=DeterministicFakeEmbedding(size=16),
                        clock=clock or SimulationClock(T0 + timedelta(days=1)))


def important_ones() -> tuple[MemoryStream, list[Example]]:
    """40 mundane memories and 4 poignant ones, all created at once; questions ask for 2-4
    of the poignant ones."""
    rng = random.Random(7)
    stream = stream_of("Maria Lopez")
    items = [{"type": "event", "description": f"Maria does chore {i}", "created": T0,
              "poignancy": rng.choice([1, 2, 3])} for i in range(40)]
    items += [{"type": "event", "description": f"Maria remembers milestone {i}",
               "created": T0, "poignancy": 8 + i % 3} for i in range(4)]
    nodes = stream.add_many(items)
    poignant = [n.node_id for n in nodes[40:]]
    examples = [Example(f"question {q}", rng.sample(poignant, rng.randint(2, 4)))
                for q in range(16)]
    return stream, examples


def recent_ones() -> tuple[MemoryStream, list[Example]]:
    """Memories an hour apart with random poignancy; the answers are the newest three."""
    rng = random.Random(3)
    stream = stream_of("Klaus Mueller", SimulationClock(T0 + timedelta(hours=31)))
    nodes = stream.add_many([
        {"type": "event", "description": f"Klaus notes fact {i}",
         "created": T0 + timedelta(hours=i), "poignancy": rng.randint(1, 10)}
        for i in range(30)
    ])
    newest = [n.node_id for n in nodes[-3:]]
    return stream, [Example(f"what happened lately {q}", newest) for q in range(12)]


def topics_in_chinese() -> tuple[MemoryStream, list[Example]]:
    """Chinese memories, one per topic, equally important; each question names its topic."""
    stream = stream_of("玛丽亚")
    nodes = stream.add_many([
        {"type": "event", "description": f"玛丽亚周末和朋友一起{t}", "created": T0,
         "poignancy": 5} for t in TOPICS
    ])
    examples = [Example(f"玛丽亚上次{t}是和谁？", [n.node_id]) for t, n in zip(TOPICS, nodes,
                                                                              strict=True)]
    return stream, examples


def test_relevant_memories_that_are_the_most_important_raise_importance_w() -> None:
    stream, examples = important_ones()
    result = fit_weights(stream, examples, k=5, relevance="dense", samples=50)
    tuned, start = result.tuned.setting, result.start.setting
    assert (start.recency_w, start.relevance_w, start.importance_w) == (1.0, 1.0, 1.0)
    assert tuned.importance_w > max(tuned.recency_w, tuned.relevance_w, 1.0)
    assert result.tuned.train == 1.0 > result.start.train
    assert result.tuned.held_out == 1.0 > result.start.held_out
    total = tuned.recency_w + tuned.relevance_w + tuned.importance_w
    assert total == pytest.approx(WEIGHT_TOTAL, abs=0.002)


def test_relevant_memories_that_are_the_newest_raise_recency_w() -> None:
    stream, examples = recent_ones()
    result = fit_weights(stream, examples, k=3, metric="ndcg", relevance="dense", samples=30)
    tuned = result.tuned.setting
    assert tuned.recency_w > max(tuned.relevance_w, tuned.importance_w)
    assert result.tuned.train == 1.0 > result.start.train
    assert result.metric == "ndcg" and result.k == 3


def test_chinese_questions_that_share_words_with_their_answer_raise_the_lexical_weight() -> None:
    stream, examples = topics_in_chinese()
    result = fit_weights(stream, examples, k=1, relevance="hybrid", samples=30)
    tuned = result.tuned.setting
    assert tuned.relevance_mode == "hybrid" and tuned.lexical_weight > 0.5
    assert tuned.relevance_w > 0
    assert result.tuned.train == 1.0 and result.tuned.held_out > result.start.held_out
    assert result.start.train < 0.5  # the dense cosines are noise here


def test_the_same_seed_gives_the_same_result_and_the_split_is_evaluations() -> None:
    stream, examples = important_ones()
    first = fit_weights(stream, examples, k=5, seed=11, samples=40)
    assert fit_weights(stream, examples, k=5, seed=11, samples=40) == first
    train, held = split_examples(examples, 0.7, 11)
    assert (first.train_count, first.held_out_count) == (len(train), len(held))


def test_ties_go_to_the_start_when_nothing_can_be_gained() -> None:
    stream, examples = important_ones()
    stream.update_settings(recency_w=0.5, relevance_w=0.5, importance_w=2.0)
    result = fit_weights(stream, examples, k=5, relevance="dense", samples=20)
    assert result.start.train == 1.0
    assert result.tuned.setting == result.start.setting


def test_a_lexical_persona_starts_from_its_lexical_relevance() -> None:
    stream, examples = topics_in_chinese()
    stream.update_settings(relevance_mode="lexical", recency_w=0, importance_w=0)
    result = fit_weights(stream, examples, k=1, samples=10)
    assert result.start.setting.relevance_mode == "lexical"
    assert result.start.train == result.start.held_out == 1.0  # each topic word finds its memory
    assert result.tuned.setting == result.start.setting


WORDS = ["party", "cafe", "coffee", "flowers", "music", "派对", "咖啡", "鲜花", "音乐", "朋友"]


@pytest.mark.parametrize("relevance", ["dense", "hybrid"])
def test_tuned_weights_rank_through_the_real_retriever_exactly_as_the_search_saw(
    relevance: str,
) -> None:
    rng = random.Random(9)
    clock = SimulationClock(T0 + timedelta(hours=40))
    stream = stream_of("Isabella Rodriguez", clock)
    nodes = stream.add_many([
        {"type": rng.choice(["event", "thought"]),
         "description": f"Isabella {' '.join(rng.sample(WORDS, 2))} {i}",
         "created": T0 + timedelta(minutes=37 * i), "poignancy": rng.randint(1, 10)}
        for i in range(60)
    ])
    ids = [n.node_id for n in nodes]
    examples = [
        Example(f"{rng.choice(WORDS)} {q}", rng.sample(ids, 4),
                at=T0 + timedelta(hours=rng.randint(20, 40)) if q % 2 else None)
        for q in range(14)
    ]
    result = fit_weights(stream, examples, k=5, relevance=relevance, samples=40)
    assert result.tuned.setting.relevance_mode == relevance or relevance == "hybrid"
    train, held = split_examples(examples, 0.7, 0)
    prepared = PreparedExamples(stream, examples, _plain(stream), lexical=True)
    for row in result.rows:
        retriever = _retriever_of(stream, row.setting)
        real = evaluate(retriever, examples, ks=(5,))
        assert [list(r.ranked) for r in real.results] == prepared.ranked(row.setting, 5)
        assert evaluate(retriever, train, ks=(5,)).recall[5] == pytest.approx(row.train)
        assert evaluate(retriever, held, ks=(5,)).recall[5] == pytest.approx(row.held_out)
    others = [Setting(0.5, 2.0, 0.5, 0.95, 0.35, "hybrid"), Setting(1.2, 1.3, 0.5, 0.9, 0.7,
              "hybrid"), Setting(0.3, 2.5, 0.2, 0.99, 0.5, "lexical")]
    for s in others:  # the search's pick aside, any setting ranks the same both ways
        real = evaluate(_retriever_of(stream, s), examples, ks=(5,))
        assert [list(r.ranked) for r in real.results] == prepared.ranked(s, 5)
    assert clock.now == T0 + timedelta(hours=40)


def _retriever_of(stream: MemoryStream, s: Setting) -> GenerativeAgentsRetriever:
    return GenerativeAgentsRetriever(
        stream=stream, k=5, update_access=False, recency_w=s.recency_w,
        relevance_w=s.relevance_w, importance_w=s.importance_w, recency_decay=s.recency_decay,
        relevance=s.relevance_mode, lexical_weight=s.lexical_weight,
    )


def test_the_result_is_kept_as_the_persona_settings() -> None:
    stream, examples = topics_in_chinese()
    result = fit_weights(stream, examples, k=1, samples=20)
    stream.update_settings(**result.settings())
    state = stream.state
    s = result.tuned.setting
    assert (state.recency_w, state.relevance_w, state.importance_w, state.recency_decay) == (
        s.recency_w, s.relevance_w, s.importance_w, s.recency_decay)
    assert (state.relevance_mode, state.lexical_weight) == ("hybrid", s.lexical_weight)
    again = fit_weights(stream, examples, k=1, samples=20)
    assert again.start.setting == s  # the persona's settings are the next start


def test_examples_may_be_tuples_with_an_optional_time() -> None:
    stream, examples = recent_ones()
    plain = [(e.query, list(e.relevant)) for e in examples]
    timed = [(e.query, list(e.relevant), T0 + timedelta(hours=31)) for e in examples]
    a = fit_weights(stream, plain, k=3, samples=10)
    b = fit_weights(stream, timed, k=3, samples=10)
    assert a.tuned.train == b.tuned.train == 1.0


@pytest.mark.parametrize(
    ("examples", "message"),
    [
        ([("q", ["node_1"]), ("q2", ["node_1", "node_99"])],
         r"examples\[1\] \('q2'\): relevant: no memory 'node_99' in the stream of persona"),
        ([("q", [])], r"examples\[0\]: relevant: at least one node id is needed"),
        ([("q", "node_1")], r"examples\[0\]: relevant: expected a list of node ids"),
        ([("  ", ["node_1"])], r"examples\[0\]: query"),
        (["just a question"], r"examples\[0\]: expected an Example or \(query"),
        ([("q", ["node_1"], "yesterday")], r"examples\[0\]: at: expected a datetime"),
        ([], r"examples: at least one labelled example"),
    ],
)
def test_bad_examples_are_refused_naming_the_example(examples, message) -> None:
    stream, _ = recent_ones()
    with pytest.raises(ValidationError, match=message):
        fit_weights(stream, examples)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"metric": "mrr"}, "metric: expected one of recall, ndcg"),
        ({"k": 0}, "k: expected a whole number >= 1"),
        ({"relevance": "lexical"}, "relevance: expected 'dense' or 'hybrid'"),
        ({"train_fraction": 0.0}, "train_fraction: 0.0 leaves no training example"),
        ({"train_fraction": 1.5}, r"train_fraction: expected a number in \[0, 1\]"),
        ({"samples": -1}, "samples: expected a whole number >= 0"),
    ],
)
def test_bad_options_are_refused_naming_the_option(options, message) -> None:
    stream, examples = recent_ones()
    with pytest.raises(ValidationError, match=message):
        fit_weights(stream, examples, **options)


def test_all_examples_in_training_leave_no_held_out_score() -> None:
    stream, examples = recent_ones()
    result = fit_weights(stream, examples, k=3, train_fraction=1.0, samples=10)
    assert result.held_out_count == 0 and result.tuned.held_out is None


def test_a_setting_lists_what_update_settings_takes() -> None:
    stream, _ = recent_ones()
    before = stream.state
    stream.update_settings(**Setting().settings())
    assert stream.state.model_dump(exclude={"rev"}) == before.model_dump(exclude={"rev"})


def _plain(stream: MemoryStream) -> GenerativeAgentsRetriever:
    return GenerativeAgentsRetriever(stream=stream, update_access=False)
