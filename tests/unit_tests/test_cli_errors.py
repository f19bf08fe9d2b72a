"""`genmem` on the original simulation's saves: errors name the option in one line (exit 2 for
input, 1 for failures at run time), filters say what they left out, and the parts of a
relevance add up to it wherever they are shown."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from langchain_genmem.cli import Store, Weights, app
from langchain_genmem.cli.chart import explain_figure
from langchain_genmem.cli.options import Relevance
from langchain_genmem.cli.reports import retrieve_rows
from langchain_genmem.core.errors import StorageError
from langchain_genmem.core.nodes import NODE_TYPES, TYPE_CHOICES

DATA = Path(__file__).resolve().parents[2] / "data" / "generative_agents"
MARIA = (DATA / "July1_the_ville_isabella_maria_klaus-step-3-12/personas/Maria Lopez"
         / "bootstrap_memory" / "associative_memory")
NO_WORD_IN_ANY_MEMORY = "玛丽亚喜欢谁？"  # "whom does Maria like?": her memories are English
PARTS = ("dense", "lexical", "cosine", "bm25", "lexical_share")

runner = CliRunner()


def run(store: Path, *args: str, code: int = 0) -> Result:
    result = runner.invoke(app, ["--path", str(store), *args])
    assert result.exit_code == code, (result.output, result.exception)
    return result


def one_line_error(result: Result, code: int = 2) -> str:
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    assert result.output.startswith("error: ") and result.output.count("\n") == 1, result.output
    return result.output


@pytest.fixture(scope="module")
def maria(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Maria Lopez of the step-3-12 save: 222 events, 42 thoughts and 3 chats."""
    store = tmp_path_factory.mktemp("maria") / "store"
    out = run(store, "import", str(MARIA), "--no-progress").output
    assert "Imported Maria Lopez: 267 memories (222 events, 42 thoughts, 3 chats)" in out
    return store


def search(store: Path, query: str, *args: str) -> list[dict[str, Any]]:
    return json.loads(run(store, "search", query, "--json", "--peek", *args).output)


def adds_up(row: dict[str, Any]) -> bool:
    share = row["lexical_share"]
    parts = (1 - share) * row["dense"] + share * row["lexical"]
    return row["relevance"] == pytest.approx(parts, abs=1e-12)


# ------------------------------------------------------------------------ the store's folder


ADD = ["--persona", "玛丽亚", "add", "event", "玛丽亚在喝咖啡", "--poignancy", "3"]
IMPORT = ["--persona", "玛丽亚", "import", str(MARIA), "--no-progress"]


@pytest.mark.parametrize(("where", "command", "says"), [
    ("a file", ADD, "is a file; give a folder"),
    ("a file", IMPORT, "is a file; give a folder"),
    ("a file", ["stats"], "is a file; give a folder"),
    ("under a file", ADD, "cannot create the folder"),
    ("under a file", IMPORT, "cannot create the folder"),
])
def test_a_store_path_that_is_a_file_or_cannot_be_made_is_one_line(
    tmp_path: Path, where: str, command: list[str], says: str
) -> None:
    notes = tmp_path / "笔记.txt"
    notes.write_text("不是文件夹", "utf-8")
    path = notes if where == "a file" else notes / "store"
    out = one_line_error(runner.invoke(app, ["--path", str(path), *command]))
    assert out.startswith("error: --path: ") and str(path) in out and says in out
    assert "os error" not in out and "chroma" not in out.lower().replace("chroma store", "")
    assert notes.read_text("utf-8") == "不是文件夹"


def test_a_failure_at_run_time_is_one_line_and_exit_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def failing(*args: Any, **kwargs: Any) -> None:
        msg = "the store failed: 服务器\n\tIs the server running?"
        raise StorageError(msg)

    monkeypatch.setattr(Store, "open", failing)
    out = one_line_error(runner.invoke(app, ["--path", str(tmp_path), "stats"]), code=1)
    assert "服务器 Is the server running?" in out


# ------------------------------------------------------------------------ exit codes


def test_input_errors_of_every_command_exit_2(maria: Path, tmp_path: Path) -> None:
    broken = tmp_path / "玛丽亚" / "bootstrap_memory" / "associative_memory"
    shutil.copytree(MARIA, broken)
    (broken / "nodes.json").write_text("{", "utf-8")
    a_file = tmp_path / "文件.txt"
    a_file.write_text("", "utf-8")
    empty = tmp_path / "空的"
    empty.mkdir()
    cases = [
        (["import", str(tmp_path / "没有这个文件夹")], "no such folder"),
        (["import", str(broken)], "nodes.json: invalid JSON"),
        (["import", str(empty)], "no personas/<name>/bootstrap_memory"),
        (["export", str(a_file)], "cannot write"),
        (["demo", str(tmp_path / "没有这个文件夹"), "--no-progress"], "no such folder"),
    ]
    for args, says in cases:
        result = runner.invoke(app, ["--path", str(maria), *args])
        assert result.exit_code == 2, (args, result.output)
        assert says in result.output and "Traceback" not in result.output


# ------------------------------------------------------------------------ add


@pytest.mark.parametrize(("args", "says"), [
    (["event", "玛丽亚在散步", "--poignancy", "11"],
     "error: --poignancy: expected a number from 1 (mundane) to 10 (poignant), got 11.0"),
    (["event", "玛丽亚在散步", "--poignancy", "0"], "error: --poignancy: expected a number from 1"),
    (["event", "   ", "--poignancy", "3"], "error: description: must be a non-empty text"),
    (["event", "玛丽亚在散步", "--poignancy", "3", "--evidence", "node_1"],
     "error: --evidence: only thoughts have evidence"),
    (["thought", "玛丽亚喜欢物理", "--poignancy", "3", "--evidence", "node_9999"],
     "error: --evidence: no memory 'node_9999'"),
])
def test_add_names_the_option_that_was_wrong(
    maria: Path, tmp_path: Path, args: list[str], says: str
) -> None:
    out = one_line_error(runner.invoke(app, ["--path", str(maria), "add", *args]))
    assert out.startswith(says) and "items[" not in out
    if "node_9999" not in says:  # a value wrong in itself is refused before a store is made
        fresh = tmp_path / "新的"
        one_line_error(runner.invoke(app, ["--path", str(fresh), "--persona", "玛丽亚", "add",
                                           *args]))
        assert not fresh.exists()


# ------------------------------------------------------------------------ explain


def test_explain_into_a_missing_folder_creates_nothing(maria: Path, tmp_path: Path) -> None:
    target = tmp_path / "没有" / "图" / "x.png"
    out = one_line_error(runner.invoke(app, ["--path", str(maria), "explain", "玛丽亚",
                                             "-o", str(target)]))
    assert f"--output: the folder {target.parent} does not exist" in out
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------------ filters


def test_window_and_filter_errors_name_the_options(maria: Path) -> None:
    window = runner.invoke(app, ["--path", str(maria), "search", "玛丽亚", "--since",
                                 "2023-02-14", "--until", "2023-02-13"])
    assert one_line_error(window).startswith(
        "error: --until: '2023-02-13' is not after --since '2023-02-14'")
    for expression, says in [
        ('created > "昨天"', "created holds times"),
        ('relevance > "很高"', "relevance holds numbers"),
        ("nope > 1", "unknown column 'nope'"),
        ("玛丽亚 == 1", "unexpected '玛'"),
    ]:
        result = runner.invoke(app, ["--path", str(maria), "search", "玛丽亚", "--filter",
                                     expression])
        out = one_line_error(result)
        assert out.startswith("error: --filter: ") and says in out, out
        assert "dtype" not in out


@pytest.mark.parametrize("relevance", ["dense", "lexical", "hybrid"])
@pytest.mark.parametrize("expression", [None, 'type == "event"'])
def test_json_rows_carry_every_part_of_the_relevance(
    maria: Path, relevance: str, expression: str | None
) -> None:
    filtered = () if expression is None else ("--filter", expression)
    rows = search(maria, "Klaus Mueller's research paper", "-k", "5", "--relevance", relevance,
                  *filtered)
    assert len(rows) == 5
    for row in rows:
        assert set(PARTS) <= set(row), sorted(row)
        computed = {"dense": relevance != "lexical", "cosine": relevance != "lexical",
                    "lexical": relevance != "dense", "bm25": relevance != "dense"}
        assert {k: row[k] is not None for k in computed} == computed
        assert row["lexical_share"] == {"dense": 0, "lexical": 1, "hybrid": 0.25}[relevance]
        if relevance == "hybrid":
            assert adds_up(row)
    if expression is not None:  # the same memories score the same with and without it
        unfiltered = {r["node_id"]: r for r in search(
            maria, "Klaus Mueller's research paper", "-k", "267", "--relevance", relevance)}
        for row in rows:
            same = unfiltered[row["node_id"]]
            assert [row[k] for k in PARTS] == [same[k] for k in PARTS]


def test_the_table_shows_the_parts_with_a_filter(maria: Path) -> None:
    out = run(maria, "search", "Klaus Mueller", "-k", "3", "--peek", "--relevance", "hybrid",
              "--filter", 'type == "event"').output
    header = next(line for line in out.splitlines() if line.startswith("#"))
    assert "dense" in header and "lexical" in header
    rows = [line for line in out.splitlines() if line[:1].isdigit()]
    assert len(rows) == 3 and not any(" - " in line for line in rows)


def test_type_chat_finds_the_chats_and_says_what_it_left_out(maria: Path) -> None:
    everything = search(maria, "Klaus Mueller", "-k", "1")[0]["candidates"]
    chats = search(maria, "Klaus Mueller", "-k", "10", "--type", "chat")
    assert len(chats) == 3 and {r["type"] for r in chats} == {"chat"}
    assert chats[0]["candidates"] == 3 and chats[0]["skipped_filtered"] == everything
    text = run(maria, "search", "Klaus Mueller", "--peek", "--type", "chat").output
    assert f"left out by --type chat: {everything}" in text
    both = search(maria, "Klaus Mueller", "-k", "300", "--type", "event", "--type", "chat")
    assert {r["type"] for r in both} == {"event", "chat"}
    reverie = search(maria, "Klaus Mueller", "--type", "chat", "--recency-mode", "reverie")
    assert {r["node_id"] for r in reverie} == {r["node_id"] for r in chats}


def test_a_filter_that_leaves_nothing_says_so_in_one_line(maria: Path) -> None:
    everything = search(maria, "玛丽亚", "-k", "1")[0]["candidates"]
    peek = ("search", "玛丽亚", "--peek")
    late = run(maria, *peek, "--since", "2030-01-01").output
    assert f"nothing to show: --since 2030-01-01 left out {everything} memories\n" in late
    none = run(maria, *peek, "--filter", 'type == "聊天"').output
    assert (f"nothing to show: --filter 'type == \"聊天\"' left out all {everything} "
            "memories scored\n") in none
    for out in (late, none):
        assert sum(line.startswith("nothing") for line in out.splitlines()) == 1


def test_type_help_and_error_list_the_same_types(maria: Path) -> None:
    help_text = " ".join(run(maria, "search", "--help").output.replace("│", " ").split())
    assert f"Only memories of this type: {TYPE_CHOICES}" in help_text
    out = one_line_error(runner.invoke(app, ["--path", str(maria), "search", "玛丽亚",
                                             "--type", "梦"]))
    assert out == f"error: --type: '梦' is not a memory type; types are {TYPE_CHOICES}\n"
    assert all(t in TYPE_CHOICES for t in NODE_TYPES)


# ------------------------------------------------------------------------ relevance parts


def test_hybrid_parts_add_up_when_no_query_word_is_in_any_memory(maria: Path) -> None:
    rows = search(maria, NO_WORD_IN_ANY_MEMORY, "--relevance", "hybrid")
    assert rows and all(r["bm25"] == 0 and r["lexical_share"] == 0 and adds_up(r) for r in rows)
    text = run(maria, "search", NO_WORD_IN_ANY_MEMORY, "--peek", "--relevance", "hybrid").output
    assert "relevance = 1×dense + 0×lexical (hybrid, dense part alone" in text
    assert "0.75×dense" not in text
    usual = run(maria, "search", "Klaus Mueller", "--peek", "--relevance", "hybrid").output
    assert "relevance = 0.75×dense + 0.25×lexical (hybrid of the normalised parts)" in usual


def test_explain_shows_the_relevance_its_bars_use(maria: Path) -> None:
    stream = Store(maria).open()
    retriever = Weights(relevance=Relevance.hybrid).retriever(stream, 5, touch=False)
    for query, shown in [(NO_WORD_IN_ANY_MEMORY, "relevance = 1×dense + 0×lexical"),
                         ("Klaus Mueller", "relevance = 0.75×dense + 0.25×lexical")]:
        rows = retrieve_rows(retriever, query, 5, None)
        label = explain_figure(rows, retriever, query).axes[0].get_xlabel()
        assert shown in label
    stream.close()
