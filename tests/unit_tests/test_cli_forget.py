"""`genmem forget`: by id, by selectors, --all (asked first), --keep-derived, --dry-run, --json."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from langchain_genmem.cli import app

P = "玛丽亚"
runner = CliRunner()


def run(store: Path, *args: str, code: int = 0, given: str | None = None) -> Result:
    result = runner.invoke(app, ["--path", str(store), "--persona", P, *args], input=given)
    assert result.exit_code == code, (result.output, result.exception)
    if code:
        assert "Traceback" not in result.output
    return result


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Four memories: two events, a thought citing the first, a conversation turn."""
    store = tmp_path_factory.mktemp("forget") / "store"
    run(store, "add", "event", "玛丽亚在图书馆学量子物理", "--poignancy", "4",
        "--created", "2023-02-13 09:00", "--keyword", "量子物理")
    run(store, "add", "event", "Maria eats a blueberry pancake", "--poignancy", "2",
        "--created", "2023-02-14 08:00", "--keyword", "pancake")
    run(store, "add", "thought", "玛丽亚热爱量子力学研究", "--poignancy", "6",
        "--evidence", "node_1", "--created", "2023-02-14 09:00")
    run(store, "add", "chat", "玛丽亚和克劳斯聊上海", "--poignancy", "3",
        "--line", "克劳斯: 我明天去上海", "--created", "2023-02-14 10:00")
    return store


@pytest.fixture
def store(seeded: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "store"
    shutil.copytree(seeded, copy)
    return copy


def stats(store: Path) -> dict:
    return json.loads(run(store, "stats", "--json").output)


def test_forget_by_id_takes_the_citing_thought_and_search_finds_neither(store: Path) -> None:
    out = json.loads(run(store, "forget", "node_1", "--json").output)
    assert out["forgotten"] == ["node_1", "node_3"] and out["derived"] == ["node_3"]
    assert (out["dry_run"], out["live_count"]) == (False, 2)
    found = json.loads(run(store, "search", "量子物理", "--type", "event", "--type", "thought",
                           "--type", "chat", "--relevance", "hybrid", "--json").output)
    assert {r["node_id"] for r in found} == {"node_2", "node_4"}
    counts = stats(store)
    assert counts["memories"] == 2 and counts["types"] == {"event": 1, "thought": 0, "chat": 1}
    assert "量子物理" not in counts["keyword_strength"]["event"]
    assert "Nothing to forget" in run(store, "forget", "--text", "量子").output
    exported = run(store, "export", str(store.parent / "out")).output
    assert "2 memories (1 event, 0 thoughts, 1 chat)" in exported


def test_dry_run_lists_what_would_go_and_forgets_nothing(store: Path) -> None:
    out = run(store, "forget", "--since", "2023-02-14", "--type", "event", "--dry-run").output
    assert out.splitlines() == [
        f"Would forget 1 memory of {P} (3 would be left):",
        "  node_2  event    Maria eats a blueberry pancake",
        "Nothing was forgotten (--dry-run).",
    ]
    assert stats(store)["memories"] == 4


def test_keep_derived_and_selectors(store: Path) -> None:
    out = run(store, "forget", "node_1", "--keep-derived").output
    assert out.splitlines() == [f"Forgot 1 memory of {P} (3 left):", "  node_1",
                                "Kept node_3: their evidence lost the forgotten ids."]
    out = json.loads(run(store, "forget", "--text", "上海", "--type", "chat", "--json").output)
    assert out["forgotten"] == ["node_4"]
    export = store.parent / "export"
    assert "2 memories (1 event, 1 thought, 0 chats)" in run(store, "export", str(export)).output
    nodes = json.loads((export / "nodes.json").read_text(encoding="utf-8"))
    assert sorted(nodes) == ["node_1", "node_2"] and nodes["node_2"]["filling"] == []


def test_all_asks_first_and_refuses_without_an_answer(store: Path) -> None:
    refused = run(store, "forget", "--all", code=2, given="")
    assert refused.output.splitlines()[-1].startswith("error: --all: no answer on stdin")
    assert stats(store)["memories"] == 4
    assert "not confirmed" in run(store, "forget", "--all", code=2, given="n\n").output
    dry = run(store, "forget", "--all", "--dry-run").output
    assert dry.startswith(f"Would forget 4 memories of {P} (0 would be left):")
    assert stats(store)["memories"] == 4
    assert "Forgot 4 memories" in run(store, "forget", "--all", given="y\n").output
    assert stats(store)["memories"] == 0
    run(store, "add", "event", "玛丽亚重新开始", "--poignancy", "3")
    assert "node_5" in run(store, "forget", "--all", "--yes").output


@pytest.mark.parametrize(("args", "words"), [
    ((), "error: forget: nothing selected"),
    (("node_9",), "error: node id: no memory 'node_9'"),
    (("node_1", "--all"), "error: --all: forgets every memory"),
    (("--since", "上个世纪"), "error: --since: '上个世纪' is not a time"),
    (("--type", "dream"), "error: --type: 'dream' is not a memory type"),
    (("--speaker", " "), "error: --speaker: expected a non-empty name"),
])
def test_bad_input_is_one_error_line_and_forgets_nothing(
    store: Path, args: tuple[str, ...], words: str,
) -> None:
    lines = run(store, "forget", *args, code=2).output.splitlines()
    assert len(lines) == 1 and lines[0].startswith(words), lines
    assert stats(store)["memories"] == 4


def test_help_lists_forget() -> None:
    out = runner.invoke(app, ["forget", "--help"]).output
    for option in ("--since", "--until", "--type", "--conversation", "--speaker", "--text",
                   "--all", "--yes", "--keep-derived", "--dry-run", "--json"):
        assert option in out


def test_forgetting_a_turn_names_the_later_turn_embedded_again(tmp_path: Path) -> None:
    store = tmp_path / "store"
    from langchain_genmem.cli import Store as CliStore

    with CliStore(store).open(P, create=True) as stream:
        for text in ("克劳斯: 我明天去上海", "玛丽亚: 一路顺风"):
            speaker, said = text.split(": ")
            stream.add_many([{"type": "event", "description": said, "speaker": speaker,
                              "conversation": "上海", "poignancy": 3}])
    dry = run(store, "forget", "node_1", "--dry-run").output
    assert "Re-keyed node_2: turns that quoted a forgotten turn would be embedded again" in dry
    out = json.loads(run(store, "forget", "node_1", "--json").output)
    assert (out["forgotten"], out["rekeyed"]) == (["node_1"], ["node_2"])
    with CliStore(store).open(P) as stream:
        assert stream.get("node_2").embedding_key == "玛丽亚: 一路顺风"
