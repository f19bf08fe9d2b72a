"""The `genmem` command line, every command through typer's CliRunner (no sockets)."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner, Result

from langchain_genmem.cli import app
from langchain_genmem.core.state import DEFAULT_LEXICAL_WEIGHT
from langchain_genmem.memory.stream import MemoryStream

DATA = Path(__file__).resolve().parents[2] / "data" / "generative_agents"
ISABELLA = DATA / "July1_the_ville_isabella_maria_klaus-step-3-2/personas/Isabella Rodriguez"
ASSOC = ISABELLA / "bootstrap_memory" / "associative_memory"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

runner = CliRunner()


def run(store: Path, *args: str, code: int = 0) -> Result:
    result = runner.invoke(app, ["--path", str(store), *args])
    assert result.exit_code == code, (result.output, result.exception)
    if code:
        assert "Traceback" not in result.output
    return result


@pytest.fixture(scope="module")
def isabella_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Isabella imported once, with the real default model (re-embedded to 384-d)."""
    store = tmp_path_factory.mktemp("cli") / "store"
    result = run(store, "import", str(ASSOC), "--no-progress")
    expected = "Imported Isabella Rodriguez: 14 memories (8 events, 6 thoughts, 0 chats), 384-d"
    assert expected in result.output
    return store


@pytest.fixture
def store(isabella_store: Path, tmp_path: Path) -> Path:
    """A private copy of the imported store, for tests that write."""
    copy = tmp_path / "store"
    shutil.copytree(isabella_store, copy)
    return copy


# ---------------------------------------------------------------------------- help


def _walk(command: Any, path: str = "genmem") -> list[tuple[str, Any]]:
    found = [(path, command)]
    for name, sub in getattr(command, "commands", {}).items():
        found += _walk(sub, f"{path} {name}")
    return found


def test_every_command_and_option_has_help_text() -> None:
    missing = []
    commands = _walk(typer.main.get_command(app))
    assert {p for p, _ in commands} >= {
        f"genmem {c}" for c in
        ("import", "export", "add", "search", "keywords", "stats", "explain", "reflect", "demo")
    }
    for path, command in commands:
        if not (command.help or "").strip():
            missing.append(path)
        for param in command.params:
            if not (getattr(param, "help", None) or "").strip():
                missing.append(f"{path} {param.name}")
    assert missing == []


def test_help_shows_and_no_args_shows_help() -> None:
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0 and "search" in result.output and "--chroma-host" in result.output
    assert "Usage" in runner.invoke(app, []).output


# ---------------------------------------------------------------------------- import / export


def test_import_a_simulation_folder_and_refuse_a_second_import(tmp_path: Path) -> None:
    sim = tmp_path / "sim"
    shutil.copytree(ISABELLA, sim / "personas" / "Isabella Rodriguez")
    store = tmp_path / "store"
    out = run(store, "import", str(sim), "--no-progress", "--reembed").output
    assert "Imported Isabella Rodriguez: 14 memories" in out
    again = run(store, "import", str(sim), "--no-progress", code=2)
    assert again.output.startswith("error: ") and "already has 14 memories" in again.output
    missing = run(store, "--persona", "Klaus Mueller", "import", str(sim), code=2)
    assert "no persona 'Klaus Mueller'" in missing.output


def test_import_needs_a_persona_when_the_path_does_not_name_one(tmp_path: Path) -> None:
    folder = tmp_path / "memories"
    shutil.copytree(ASSOC, folder)
    result = run(tmp_path / "store", "import", str(folder), code=2)
    assert "give --persona NAME" in result.output
    out = run(tmp_path / "store", "--persona", "伊莎贝拉", "import", str(folder),
              "--no-progress").output
    assert "Imported 伊莎贝拉: 14 memories" in out


def test_import_of_a_malformed_folder_is_a_one_line_hint(tmp_path: Path) -> None:
    folder = tmp_path / "Isabella Rodriguez" / "bootstrap_memory" / "associative_memory"
    shutil.copytree(ASSOC, folder)
    (folder / "nodes.json").write_text("{", "utf-8")
    result = run(tmp_path / "store", "import", str(folder), code=2)
    assert result.output.count("\n") == 1 and "nodes.json: invalid JSON" in result.output


def test_export_writes_the_original_files(store: Path, tmp_path: Path) -> None:
    out = tmp_path / "out" / "associative_memory"
    assert "Exported Isabella Rodriguez: 14 memories" in run(store, "export", str(out)).output
    nodes = json.loads((out / "nodes.json").read_text("utf-8"))
    assert list(nodes)[0] == "node_14" and len(nodes) == 14
    assert json.loads((out.parent / "scratch.json").read_text("utf-8"))["recency_decay"] == 0.995
    assert {p.name for p in out.iterdir()} == {"nodes.json", "embeddings.json", "kw_strength.json"}


# ---------------------------------------------------------------------------- add


def test_add_every_kind_including_chinese(store: Path) -> None:
    out = run(store, "add", "event", "Isabella is decorating the cafe", "--poignancy", "4",
              "--predicate", "decorate", "--object", "cafe", "--created", "2023-02-13 09:00:00")
    assert "Added node_15 (event, depth 0)" in out.output
    thought = json.loads(run(store, "add", "thought", "Isabella is excited about the party",
                             "--poignancy", "7", "--evidence", "node_10", "--evidence", "node_15",
                             "--json").output)
    assert thought["node_id"] == "node_16" and thought["depth"] == 2
    assert thought["filling"] == ["node_10", "node_15"]
    assert thought["created"] == "2023-02-13 00:00:50"  # the saved simulation time
    chat = run(store, "add", "chat", "伊莎贝拉和玛丽亚聊派对", "--poignancy", "5",
               "--line", "伊莎贝拉：你会来派对吗？", "--line", "Maria Lopez: Of course!",
               "--keyword", "派对", "--json").output
    assert "伊莎贝拉和玛丽亚聊派对" in chat  # not \\u-escaped
    data = json.loads(chat)
    assert data["filling"] == [["伊莎贝拉", "你会来派对吗？"], ["Maria Lopez", "Of course!"]]
    assert data["keywords"] == ["派对"]


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["add", "thought", "x", "--poignancy", "3", "--evidence", "node_99"], 2, "node_99"),
        (["add", "chat", "x", "--poignancy", "3", "--line", "no speaker"], 2, "speaker: utterance"),
        (["add", "event", "x", "--poignancy", "3", "--created", "noon"], 2, "--created"),
        (["add", "event", "   ", "--poignancy", "3"], 2, "description"),
        (["add", "dream", "x", "--poignancy", "3"], 2, "dream"),
        (["add", "event", "x"], 2, "--poignancy"),
    ],
)
def test_add_refuses_bad_input_with_a_hint(
    store: Path, args: list[str], code: int, message: str
) -> None:
    result = run(store, *args, code=code)
    assert message in result.output
    assert len(MemoryStream("Isabella Rodriguez", path=store)) == 14


# ---------------------------------------------------------------------------- search


def test_search_prints_components_and_updates_access(store: Path) -> None:
    out = run(store, "search", "Valentine's Day party", "-k", "3").output
    assert "recency" in out and "relevance" in out and "importance" in out
    assert "node_10" in out and "Valentine" in out
    assert "score = 0.5×recency + 3×relevance + 2×importance" in out
    accessed = [n for n in MemoryStream("Isabella Rodriguez", path=store).nodes()
                if n.last_accessed != n.created]
    assert len(accessed) == 3


def test_search_json_and_weights(store: Path) -> None:
    rows = json.loads(run(store, "search", "party", "-k", "4", "--json", "--peek").output)
    assert len(rows) == 4 and rows[0]["rank"] == 0
    assert {"node_id", "description", "score", "recency", "relevance", "importance"} <= set(rows[0])
    assert [r["score"] for r in rows] == sorted((r["score"] for r in rows), reverse=True)
    only_importance = json.loads(run(
        store, "search", "party", "-k", "3", "--json", "--peek",
        "--recency-w", "0", "--relevance-w", "0", "--importance-w", "1",
    ).output)
    for r in only_importance:
        assert r["score"] == pytest.approx(2 * r["importance"])
    assert only_importance[0]["poignancy"] == 8  # the most poignant memory first
    ranked = json.loads(run(store, "search", "party", "--json", "--peek", "--recency-mode", "rank",
                            "--decay", "0.5", "--recency-w", "1").output)
    assert sorted(r["recency"] for r in ranked)[-1] == 1.0
    assert all(n.last_accessed == n.created
               for n in MemoryStream("Isabella Rodriguez", path=store).nodes())  # --peek


def test_search_filter_and_its_errors(store: Path) -> None:
    rows = json.loads(run(store, "search", "party", "--json", "--peek",
                          "--filter", 'type == "event" and poignancy < 2').output)
    assert rows and all(r["type"] == "event" and r["poignancy"] < 2 for r in rows)
    for bad in ("__import__('os')", "relevance.__class__", "nope > 1"):
        result = run(store, "search", "party", "--filter", bad, code=2)
        assert result.output.startswith("error: --filter:") and result.output.count("\n") == 1


def test_search_and_explain_time_and_kind_filters_at_day_boundaries(
    store: Path, tmp_path: Path
) -> None:
    for text, when in [("深夜的派对 the late party", "2023-02-13 23:59:59"),
                       ("午夜的派对 the midnight party", "2023-02-14 00:00:00")]:
        run(store, "add", "event", text, "--poignancy", "6", "--created", when)
    peek = ("search", "派对 party", "--json", "--peek")

    def found(*args: str) -> list[str]:
        return [r["description"] for r in json.loads(run(store, *peek, *args).output)]

    assert found("--since", "2023-02-14") == ["午夜的派对 the midnight party"]
    assert found("--since", "2023-02-13 12:00", "--until", "2023-02-14") == [
        "深夜的派对 the late party"]
    assert set(found("--type", "thought")) == {
        n.description for n in MemoryStream("Isabella Rodriguez", path=store).nodes("thought")}
    assert all(r["poignancy"] >= 6 and r["skipped_filtered"] > 0
               for r in json.loads(run(store, *peek, "--min-poignancy", "6").output))
    [row] = json.loads(run(store, *peek, "--since", "2023-02-14").output)
    left_out = ("skipped_filtered", "skipped_expired", "skipped_idle")
    assert row["candidates"] == 1 and sum(row[k] for k in left_out) == 16 - 1
    text = run(store, "search", "party", "--since", "2023-02-14").output
    assert f"left out by --since 2023-02-14: {row['skipped_filtered']}" in text
    target = tmp_path / "day.png"
    out = run(store, "explain", "party", "-o", str(target), "--since", "2023-02-14").output
    assert "top 1 memory for" in out
    for args, option in [(["--since", "some day"], "--since"),
                         (["--since", "2023-02-14", "--until", "2023-02-13"], "--until"),
                         (["--type", "dream"], "--type")]:
        result = run(store, "search", "party", *args, code=2)
        assert result.output.startswith(f"error: {option}:"), result.output


def test_search_relevance_options_and_the_parts_of_relevance(store: Path) -> None:
    idle = "the idle reactor hums in the physics lab 闲置的反应堆"
    for text in ("玛丽亚在学习量子物理", "玛丽亚在霍布斯咖啡馆喝咖啡", idle):
        run(store, "--persona", "玛丽亚", "add", "event", text, "--poignancy", "5")
    maria = ("--persona", "玛丽亚", "search", "量子物理", "--json", "--peek")

    def rows(*args: str) -> list[dict[str, Any]]:
        return json.loads(run(store, *maria, *args).output)

    lexical = rows("--relevance", "lexical")
    assert lexical[0]["description"] == "玛丽亚在学习量子物理"
    assert all(r["relevance"] == pytest.approx(r["lexical"]) for r in lexical)
    assert all({"dense", "lexical", "cosine", "bm25"} <= set(r) for r in lexical)
    dense = rows("--relevance", "dense")
    assert all(r["relevance"] == pytest.approx(r["dense"]) for r in dense)
    for weight, part in (("1", "lexical"), ("0", "dense")):  # the ends of the hybrid
        hybrid = rows("--relevance", "hybrid", "--lexical-weight", weight)
        assert [r["relevance"] for r in hybrid] == pytest.approx([r[part] for r in hybrid])
    # the idle filter drops the reactor unless --keep-idle
    assert len(rows()) == 2 and rows()[0]["skipped_idle"] == 1
    kept = rows("--keep-idle", "--relevance", "hybrid")
    assert len(kept) == 3 and kept[0]["skipped_idle"] == 0
    assert idle in {r["description"] for r in kept}

    text = run(store, "--persona", "玛丽亚", "search", "量子物理", "--peek",
               "--relevance", "hybrid", "--lexical-weight", "0.25").output
    assert "dense" in text and "lexical" in text
    assert "relevance = 0.75×dense + 0.25×lexical (hybrid of the normalised parts)" in text
    plain = run(store, "--persona", "玛丽亚", "search", "量子物理", "--peek").output
    assert "lexical" not in plain and "relevance =" not in plain
    for args, message in [(["--lexical-weight", "1.5"], "error: --lexical-weight: "),
                          (["--lexical-weight", "nan"], "error: --lexical-weight: "),
                          (["--relevance", "sparse"], "'sparse' is not one of")]:
        result = run(store, "--persona", "玛丽亚", "search", "量子物理", *args, code=2)
        assert message in result.output, result.output


def test_now_moves_the_clock(store: Path) -> None:
    rows = json.loads(run(store, "--now", "2023-02-14 10:00:00", "search", "party", "-k", "1",
                          "--json").output)
    assert rows[0]["last_accessed"] == "2023-02-14 10:00:00"
    assert "--now" in run(store, "--now", "tomorrow", "stats", code=2).output


# ---------------------------------------------------------------------------- keywords, stats


def test_keywords_text_and_json(store: Path) -> None:
    out = run(store, "keywords", "Isabella Rodriguez", "plan", "party").output
    assert "events indexed under 'Isabella Rodriguez', 'plan', 'party': 2" in out
    assert "thoughts indexed under" in out and "node_14" in out
    data = json.loads(run(store, "keywords", "isabella rodriguez", "x", "y", "--json",
                          "--limit", "1").output)
    assert data["events"]["count"] == 2 and len(data["events"]["newest"]) == 1
    assert data["thoughts"]["newest"][0]["node_id"] == "node_14"
    assert data["strength"]["thought"]["isabella rodriguez"] == 5


def test_stats_text_and_json(store: Path) -> None:
    out = run(store, "stats").output
    assert "Isabella Rodriguez: 14 memories (8 events, 6 thoughts, 0 chats)" in out
    assert ("reflection trigger: importance since the last reflection 8 of 150: not due until "
            "it reaches 150 (8 events)") in out
    data = json.loads(run(store, "stats", "--json", "--top", "2").output)
    assert data["types"] == {"event": 8, "thought": 6, "chat": 0}
    assert data["trigger"]["importance_gathered"] == 8
    assert data["trigger"]["explanation"] == (
        "importance since the last reflection 8 of 150: not due until it reaches 150")
    assert data["depths"] == {"0": 8, "1": 6}
    assert data["settings"]["recency_decay"] == 0.995
    assert data["settings"]["relevance_mode"] == "dense"
    assert data["settings"]["lexical_weight"] == DEFAULT_LEXICAL_WEIGHT
    assert len(data["keyword_strength"]["thought"]) == 2
    assert data["clock"] == "2023-02-13 00:00:50"


def test_persona_is_needed_unless_the_store_holds_one(tmp_path: Path, store: Path) -> None:
    assert "does not exist" in run(tmp_path / "empty", "stats", code=2).output
    run(store, "--persona", "玛丽亚", "add", "event", "玛丽亚在学习物理", "--poignancy", "5")
    several = run(store, "stats", code=2).output
    assert "several personas" in several and "玛丽亚" in several
    out = run(store, "--persona", "玛丽亚", "stats").output
    assert "玛丽亚: 1 memory (1 event, 0 thoughts, 0 chats)" in out
    rows = json.loads(run(store, "--persona", "玛丽亚", "search", "物理", "--json").output)
    assert rows[0]["description"] == "玛丽亚在学习物理"


@pytest.mark.filterwarnings("ignore:A test tried to use socket")
def test_unreachable_chroma_server_is_a_hint(tmp_path: Path) -> None:
    result = run(tmp_path, "--chroma-host", "127.0.0.1", "--chroma-port", "9", "stats", code=1)
    assert "cannot open the Chroma server at 127.0.0.1:9" in result.output
    assert "drop --chroma-host" in result.output


# ---------------------------------------------------------------------------- tune

# Questions about Isabella (English, and Chinese asked of the English memories), one of them
# about another persona (skipped), one asked at a time.
QUESTIONS = [
    {"question": "What party is Isabella planning?", "relevant": ["node_7", "node_10"]},
    {"question": "When does the Valentine's Day party start?", "relevant": ["node_10"]},
    {"question": "What time does Isabella open the shop?", "relevant": ["node_7"]},
    {"question": "How long have Isabella and Maria been friends?", "relevant": ["node_11"]},
    {"question": "Does Isabella enjoy her job?", "relevant": ["node_14"],
     "persona": "Isabella Rodriguez"},
    {"question": "Was Isabella asleep?", "relevant": ["node_8", "node_9"],
     "at": "2023-02-13 08:00:00"},
    {"question": "Who is Isabella friends with?", "relevant": ["node_11", "node_12"]},
    {"question": "伊莎贝拉在筹备什么派对？", "relevant": ["node_7", "node_10"]},
    {"question": "伊莎贝拉喜欢她的工作吗？", "relevant": ["node_14"]},
    {"question": "伊莎贝拉和玛丽亚做朋友多久了？", "relevant": ["node_11"]},
    {"question": "Who does Maria have a crush on?", "relevant": ["node_10"],
     "persona": "Maria Lopez"},
]


def questions_file(folder: Path, lines: list[dict[str, Any]]) -> Path:
    path = folder / "questions.jsonl"
    path.write_text("\n".join(json.dumps(x, ensure_ascii=False) for x in lines), "utf-8")
    return path


def test_tune_prints_start_and_tuned_on_both_splits(store: Path, tmp_path: Path) -> None:
    path = questions_file(tmp_path, QUESTIONS)
    out = run(store, "tune", "--examples", str(path), "-k", "3", "--seed", "2").output
    assert "Isabella Rodriguez: recall@3, start vs tuned" in out
    assert "train recall@3" in out and "held-out recall@3" in out
    assert "7 training and 3 held-out questions (seed 2)" in out  # Maria's line skipped
    assert "--save stores the tuned values" in out
    data = json.loads(run(store, "tune", "--examples", str(path), "-k", "3", "--seed", "2",
                          "--metric", "ndcg", "--json").output)
    assert data["metric"] == "ndcg@3" and [r["name"] for r in data["rows"]] == ["start", "tuned"]
    assert data["rows"][1]["train"] >= data["rows"][0]["train"]
    assert data["rows"][0]["settings"]["recency_decay"] == 0.995  # Isabella's own
    assert data["saved"] is False
    settings = json.loads(run(store, "stats", "--json").output)["settings"]
    assert settings == data["rows"][0]["settings"]  # nothing stored without --save


def test_tune_save_stores_the_tuned_settings_for_the_next_open(
    store: Path, tmp_path: Path
) -> None:
    path = questions_file(tmp_path, QUESTIONS)
    data = json.loads(run(store, "tune", "--examples", str(path), "-k", "2",
                          "--train-fraction", "1", "--save", "--json").output)
    assert data["saved"] is True and data["rows"][1]["held_out"] is None
    settings = json.loads(run(store, "stats", "--json").output)["settings"]
    assert settings == data["rows"][1]["settings"]
    again = json.loads(run(store, "tune", "--examples", str(path), "-k", "2",
                           "--train-fraction", "1", "--json").output)
    assert again["rows"][0]["settings"] == settings


def test_tune_refuses_bad_questions_with_a_hint(store: Path, tmp_path: Path) -> None:
    unknown = questions_file(tmp_path, [{"question": "派对？", "relevant": ["node_99"]}])
    out = run(store, "tune", "--examples", str(unknown), code=2).output
    assert "relevant: no memory 'node_99'" in out
    other = questions_file(tmp_path, QUESTIONS[-1:])
    out = run(store, "tune", "--examples", str(other), code=2).output
    assert "no question" in out and "'Maria Lopez'" in out
    assert "cannot read" in run(store, "tune", "--examples", str(tmp_path / "nope"), code=2).output
    empty = questions_file(tmp_path, [{"question": "派对？", "relevant": []}])
    assert "at least one node id" in run(store, "tune", "--examples", str(empty), code=2).output


# ---------------------------------------------------------------------------- explain, reflect


def test_explain_writes_a_png(store: Path, tmp_path: Path) -> None:
    target = tmp_path / "plots" / "explain.png"
    target.parent.mkdir()
    out = run(store, "explain", "Valentine's Day party", "-o", str(target), "-k", "4",
              "--recency-w", "2").output
    assert "top 4 memories" in out
    data = target.read_bytes()
    assert data.startswith(PNG_SIGNATURE) and len(data) > 5000


def test_explain_without_matplotlib_says_what_to_install(
    store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in [m for m in sys.modules if m.split(".")[0] == "matplotlib"] + ["matplotlib"]:
        monkeypatch.setitem(sys.modules, name, None)
    result = run(store, "explain", "party", "-o", str(tmp_path / "x.png"), code=2)
    assert "pip install 'langchain-genmem[plot]'" in result.output
    assert not (tmp_path / "x.png").exists()


def test_reflect_without_api_key_says_what_to_set(
    store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)  # a local server alone is a model
    result = run(store, "reflect", "--force", code=2)  # not due: said without a model
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL"):
        assert name in result.output
    assert result.output.count("\n") == 1


# ---------------------------------------------------------------------------- demo


def test_demo_on_a_small_persona(tmp_path: Path) -> None:
    out = run(tmp_path, "demo", str(ASSOC), "--no-progress", "-k", "3").output
    for section in ("1. Import", "2. Relevance", "3. Importance", "4. Recency", "5. Recall",
                    "6. Keywords", "7. Stats", "Done in"):
        assert section in out
    assert "Isabella Rodriguez: 14 memories re-embedded" in out
    assert not (tmp_path / "chroma.sqlite3").exists()  # the demo store is temporary


def test_demo_without_the_fixture_is_a_hint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from langchain_genmem.cli import demo

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(demo, "__file__", str(tmp_path / "x" / "cli" / "demo.py"))
    assert "pass one" in run(tmp_path, "demo", code=2).output
