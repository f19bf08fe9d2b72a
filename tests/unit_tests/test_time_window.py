"""The time a question names: reading it (English, Chinese) and what the retriever does with it."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from typer.testing import CliRunner

from langchain_genmem import GenerativeAgentsRetriever, MemoryStream, ValidationError
from langchain_genmem.cli import app
from langchain_genmem.core.timeutil import SimulationClock
from langchain_genmem.retrieval.time_window import find_time_window
from tests.support.embeddings import TableEmbeddings
from tests.support.fixtures import open_store

NOW = datetime(2024, 5, 15, 12, 0)  # a Wednesday


def day(d: str) -> datetime:
    return datetime.fromisoformat(d)


@pytest.mark.parametrize(
    ("question", "phrase", "start", "end"),
    [
        ("What did he say yesterday?", "yesterday", "2024-05-14", "2024-05-15"),
        ("What did he say yesterday evening?", "yesterday evening", "2024-05-14", "2024-05-15"),
        ("How was last weekend?", "last weekend", "2024-05-11", "2024-05-13"),
        ("What did she plan in May 2023?", "in May 2023", "2023-05-01", "2023-06-01"),
        ("Which vet did she see at the end of November?", "at the end of November",
         "2023-11-21", "2023-12-01"),
        ("What happened in March?", "in March", "2024-03-01", "2024-04-01"),
        ("In late January, what hurt?", "late January", "2024-01-15", "2024-02-01"),
        ("What did he say in early April?", "early April", "2024-04-01", "2024-04-15"),
        ("mid-April plans?", "mid-April", "2024-04-11", "2024-04-21"),
        ("What did Ben say two days ago?", "two days ago", "2024-05-13", "2024-05-14"),
        ("Last Sunday, how was the hike?", "Last Sunday", "2024-05-12", "2024-05-13"),
        ("What did Ruth say last week?", "last week", "2024-05-06", "2024-05-13"),
        ("What about this month?", "this month", "2024-05-01", "2024-06-01"),
        ("她3月15日去了哪儿？", "3月15日", "2024-03-15", "2024-03-16"),
        ("上周说了什么？", "上周", "2024-05-06", "2024-05-13"),
        ("上周末钓到了什么？", "上周末", "2024-05-11", "2024-05-13"),
        ("五月下旬得了什么奖？", "五月下旬", "2024-05-21", "2024-06-01"),
        ("上周日陈静说了什么？", "上周日", "2024-05-12", "2024-05-13"),
        ("上星期六他们去看房了吗？", "上星期六", "2024-05-11", "2024-05-12"),
        ("这周一经理提了什么要求？", "这周一", "2024-05-13", "2024-05-14"),
        ("三月份爬山看到红叶了吗？", "三月份", "2024-03-01", "2024-04-01"),
        ("去年11月刚入职时怎么样？", "去年11月", "2023-11-01", "2023-12-01"),
        ("这个月中旬妈为什么哭了？", "这个月中旬", "2024-05-11", "2024-05-21"),
        ("二月初量的血压是多少？", "二月初", "2024-02-01", "2024-02-11"),
        ("三天前他说了什么？", "三天前", "2024-05-12", "2024-05-13"),
        # the first phrase decides: said last Friday, about that Sunday
        ("上周五张昊说他那个周日跑了多少公里？", "上周五", "2024-05-10", "2024-05-11"),
    ],
)
def test_reads_the_period_a_question_names(question, phrase, start, end):
    window = find_time_window(question, NOW)
    assert window is not None
    assert (window.phrase, window.start, window.end) == (phrase, day(start), day(end))


@pytest.mark.parametrize(
    "question",
    [
        "What did she say about the vet?",
        "What did May say about the 10k run?",  # May the person
        "Does she still have 3 cats?",
        "第一周上班感觉怎么样？",
        "How many days a week would she work from home?",
        "Does Marcus miss his car now that he rides an e-bike?",
        "What did Grace notice when she sat in on the lesson?",
        "林晓现在住在哪儿？",
        "",
    ],
)
def test_no_window_when_the_question_names_no_time(question):
    assert find_time_window(question, NOW) is None


def test_an_aware_clock_gives_a_window_in_its_zone():
    shanghai = timezone(timedelta(hours=8))
    window = find_time_window("昨天说了什么？", datetime(2024, 5, 15, 1, 0, tzinfo=shanghai))
    assert window is not None
    assert window.start == datetime(2024, 5, 14, tzinfo=shanghai)  # the clock's day, not UTC's
    assert window.end - window.start == timedelta(days=1)


# ---------------------------------------------------------------------------- the retriever

# Two memories about the vet: the closer match said a month ago, the other last Sunday; and
# one about something else (cosines 0.99, 0.6 and 0: relevance 1, 0.6 and 0).
VET = {"q": [1.0, 0.0], "兽医说年糕很健康": [0.9, 0.1], "年糕去看兽医了": [0.6, 0.8],
       "猫粮又涨价了": [0.0, 1.0]}
QUESTION = "上周日说年糕看兽医怎么样？"


@pytest.fixture(params=["chroma", "postgres-database"])
def vet(request, tmp_path):
    backend, _, where = request.param.partition("-")
    with open_store(request, backend, tmp_path) as store:
        table = {**VET, QUESTION: VET["q"], "What did the vet say in March?": VET["q"]}
        stream = MemoryStream("陈静", embeddings=TableEmbeddings(table),
                              clock=SimulationClock(NOW), **store.kwargs(fresh=True))
        stream.add_event("兽医说年糕很健康", poignancy=5, created=datetime(2024, 4, 14, 10))
        stream.add_event("年糕去看兽医了", poignancy=5, created=datetime(2024, 5, 12, 18))
        stream.add_event("猫粮又涨价了", poignancy=5, created=datetime(2024, 4, 1, 9))
        yield stream, where or "process"


def texts(report) -> list[str]:
    return [d.page_content for d in report.documents]


def test_narrow_keeps_only_memories_of_the_named_period(vet):
    stream, score_in = vet
    off = GenerativeAgentsRetriever(stream=stream, score_in=score_in, update_access=False)
    assert texts(off.retrieve_with_report(QUESTION)) == ["兽医说年糕很健康", "年糕去看兽医了",
                                                         "猫粮又涨价了"]
    narrow = off.model_copy(update={"time_in_query": "narrow"})
    report = narrow.retrieve_with_report(QUESTION)
    assert texts(report) == ["年糕去看兽医了"]
    assert (report.time_window.start, report.time_window.end) == (day("2024-05-12"),
                                                                  day("2024-05-13"))
    assert report.time_window.phrase == "上周日" and report.time_use == "narrowed"
    assert report.skipped_filtered == 2
    assert "'上周日' = 2024-05-12 00:00 to 2024-05-13 00:00" in report.documents[0].metadata[
        "time_window"]


def test_narrow_falls_back_to_every_memory_when_none_is_in_the_period(vet):
    stream, score_in = vet
    narrow = GenerativeAgentsRetriever(stream=stream, score_in=score_in, time_in_query="narrow",
                                       update_access=False)
    report = narrow.retrieve_with_report("What did the vet say in March?")
    assert texts(report) == ["兽医说年糕很健康", "年糕去看兽医了", "猫粮又涨价了"]
    assert report.time_use == "no_memory_in_window"
    assert report.time_window.phrase == "in March"


def test_weight_ranks_memories_of_the_period_higher_and_keeps_the_others(vet):
    stream, score_in = vet
    if score_in == "database":
        with pytest.raises(ValidationError, match="time_in_query: 'weight' is scored in process"):
            GenerativeAgentsRetriever(stream=stream, score_in=score_in, time_in_query="weight")
        return
    weight = GenerativeAgentsRetriever(stream=stream, time_in_query="weight",
                                       recency_w=0, importance_w=0, update_access=False)
    report = weight.retrieve_with_report(QUESTION)
    assert texts(report) == ["年糕去看兽医了", "兽医说年糕很健康", "猫粮又涨价了"]
    assert report.time_use == "weighted"
    inside, outside, _ = (d.metadata for d in report.documents)
    # relevance only (gain 3): the memory of the period gains half the relevance term, 1.5
    assert inside["score"] == pytest.approx(3 * inside["relevance"] + 1.5)
    assert outside["score"] == pytest.approx(3 * outside["relevance"])


def test_reverie_and_off_read_no_time(vet):
    stream, score_in = vet
    if score_in == "database":
        pytest.skip("reverie is ranked in process here")
    for kwargs in ({"time_in_query": "narrow", "recency_mode": "reverie"}, {}):
        report = GenerativeAgentsRetriever(stream=stream, update_access=False,
                                           **kwargs).retrieve_with_report(QUESTION)
        assert report.time_window is None and report.time_use is None
        assert len(report.documents) == 3
        assert "time_window" not in report.documents[0].metadata


def test_an_unknown_time_in_query_is_refused_naming_it(vet):
    with pytest.raises(ValidationError, match="time_in_query: expected one of"):
        GenerativeAgentsRetriever(stream=vet[0], time_in_query="filter")


# ---------------------------------------------------------------------------- genmem explain


def test_explain_prints_the_window_of_a_chinese_question(tmp_path: Path) -> None:
    folder = tmp_path / "store"
    stream = MemoryStream("陈静", path=folder)
    stream.add_event("年糕去看兽医了，医生说恢复得很好", poignancy=4,
                     created=datetime(2024, 5, 12, 18))
    stream.add_event("兽医说年糕很健康", poignancy=4, created=datetime(2024, 4, 14, 10))
    stream.close()
    args = ["--path", str(folder), "--persona", "陈静", "--now", "2024-05-15 12:00:00",
            "explain", QUESTION, "-o", str(tmp_path / "explain.png"), "-k", "5"]
    result = CliRunner().invoke(app, [*args, "--time-in-query", "narrow"])
    assert result.exit_code == 0, result.output
    assert ("time in the query: '上周日' = 2024-05-12 00:00 to 2024-05-13 00:00 (end excluded), "
            "narrowed") in result.output
    assert "top 1 memory for" in result.output
    plain = CliRunner().invoke(app, args)
    assert plain.exit_code == 0 and "time in the query" not in plain.output
