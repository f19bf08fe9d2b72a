"""Bad input to `genmem` is one line on stderr and exit code 2; reads never create anything."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from langchain_genmem.cli import app

runner = CliRunner()
JPEG_SIGNATURE = b"\xff\xd8\xff"
MEMORIES = [
    ("event", "玛丽亚在霍布斯咖啡馆吃早餐", "2"),
    ("event", "克劳斯邀请玛丽亚参加情人节派对", "8"),
    ("event", "玛丽亚在为物理考试复习量子力学", "6"),
    ("thought", "玛丽亚很期待情人节派对，因为克劳斯也会去", "7"),
    ("event", "玛丽亚在直播打游戏", "3"),
]


def run(store: Path, *args: str, code: int = 0) -> Result:
    result = runner.invoke(app, ["--path", str(store), *args])
    assert result.exit_code == code, (result.output, result.exception)
    return result


def one_line_error(result: Result) -> str:
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and result.exception is not None
    assert result.output.startswith("error: ") and result.output.count("\n") == 1, result.output
    return result.output


@pytest.fixture(scope="module")
def chinese_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("cli-input") / "store"
    for kind, text, poignancy in MEMORIES:
        run(store, "--persona", "玛丽亚", "--now", "2023-02-13 09:00:00", "add", kind, text,
            "--poignancy", poignancy)
    return store


@pytest.fixture
def store(chinese_store: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "store"
    shutil.copytree(chinese_store, copy)
    return copy


def accessed(store: Path) -> list[str]:
    rows = json.loads(run(store, "search", "派对", "--json", "--peek", "-k", "5").output)
    return sorted(str(r["last_accessed"]) for r in rows)


@pytest.mark.parametrize(("args", "says"), [
    (["search", ""], "query: expected a non-empty text"),
    (["search", "   "], "query: expected a non-empty text"),
    (["explain", ""], "query: expected a non-empty text"),
    (["search", "派对", "--decay", "1.5"], "--decay: expected a number in (0, 1]"),
    (["search", "派对", "--decay", "0"], "--decay: expected a number in (0, 1]"),
    (["search", "派对", "--decay", "nan"], "--decay: expected a number in (0, 1]"),
    (["search", "派对", "--recency-w", "nan"], "--recency-w: expected a finite number"),
    (["search", "派对", "--relevance-w", "inf"], "--relevance-w: expected a finite number"),
    (["explain", "派对", "--importance-w", "-1"], "--importance-w: expected a finite number >= 0"),
    (["--persona", "Nobody", "stats"], "no persona 'Nobody'"),
    (["--persona", "Nobody", "search", "派对"], "no persona 'Nobody'"),
    (["add", "event", "玛丽亚在散步", "--poignancy", "11"], "from 1 (mundane) to 10 (poignant)"),
])
def test_bad_input_is_one_line_and_exit_2_and_changes_nothing(
    store: Path, args: list[str], says: str
) -> None:
    before = accessed(store)
    out = one_line_error(runner.invoke(app, ["--path", str(store), *args]))
    assert says in out
    assert accessed(store) == before  # an empty query no longer marks memories accessed
    assert "玛丽亚: 5 memories" in run(store, "stats").output


def test_a_persona_that_does_not_exist_names_the_ones_that_do(store: Path) -> None:
    out = one_line_error(runner.invoke(app, ["--path", str(store), "--persona", "Nobody",
                                             "stats"]))
    assert "it holds 玛丽亚" in out


@pytest.mark.parametrize("command", [
    ["stats"], ["search", "派对"], ["keywords", "a", "b", "c"], ["explain", "派对"],
    ["export", "out"], ["reflect"],
])
def test_a_read_of_a_missing_store_says_so_and_creates_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: list[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    out = one_line_error(runner.invoke(app, ["--path", "typo", *command]))
    assert "the store at typo does not exist" in out and "--path" in out
    assert list(tmp_path.iterdir()) == []


def test_explain_writes_jpeg_for_jpg_and_refuses_unknown_suffixes(
    store: Path, tmp_path: Path
) -> None:
    jpg = tmp_path / "out.jpg"
    run(store, "explain", "谁邀请玛丽亚参加派对？", "-o", str(jpg))
    assert jpg.read_bytes().startswith(JPEG_SIGNATURE)
    out = one_line_error(runner.invoke(app, ["--path", str(store), "explain", "派对", "-o",
                                             str(tmp_path / "out.xyz")]))
    assert ".png" in out and ".jpg" in out and not (tmp_path / "out.xyz").exists()


def test_explain_to_an_unwritable_place_is_one_line(store: Path) -> None:
    out = one_line_error(runner.invoke(app, ["--path", str(store), "explain", "派对", "-o",
                                             "/proc/genmem-x.png"]))
    assert "cannot write /proc/genmem-x.png" in out


def test_search_says_how_many_expired_memories_it_skipped(tmp_path: Path) -> None:
    store = tmp_path / "store"
    run(store, "--persona", "玛丽亚", "--now", "2023-02-13 09:00:00", "add", "thought",
        "玛丽亚觉得克劳斯很聪明", "--poignancy", "5", "--expiration", "2023-03-15 09:00:00")
    later = ["--now", "2023-04-01 00:00:00", "search", "克劳斯"]
    note = "expired memories skipped: 1 (clock 2023-04-01 00:00:00; --now sets it)"
    assert note in run(store, *later).output
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        filtered = run(store, *later, "--filter", 'type == "thought"').output
    assert note in filtered and not [w for w in caught if "no rows" in str(w.message)]
    assert "expired" not in run(store, "--now", "2023-02-14 00:00:00", "search", "克劳斯").output
