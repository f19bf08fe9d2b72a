"""`genmem` as a newcomer meets it: usage errors in one line, explicit options over the
environment, relative days for --since, importing a persona under another name, one wording
of the reflection trigger, help without placeholders."""

from __future__ import annotations

import inspect
import json
import shutil
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner, Result

from langchain_genmem.cli import app
from langchain_genmem.core.state import StreamState
from langchain_genmem.memory.stats import importance_gathered, trigger_text
from langchain_genmem.memory.stream import MemoryStream

DATA = Path(__file__).resolve().parents[2] / "data" / "generative_agents"
SIMULATION = DATA / "July1_the_ville_isabella_maria_klaus-step-3-2"
ISABELLA = SIMULATION / "personas" / "Isabella Rodriguez"
PERSONA = "Isabella Rodriguez"

runner = CliRunner()


def run(store: Path, *args: str, code: int = 0, **kwargs: object) -> Result:
    result = runner.invoke(app, ["--path", str(store), *args], **kwargs)
    assert result.exit_code == code, (result.output, result.exception)
    return result


def one_line_error(result: Result, code: int = 2) -> str:
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output and "╭" not in result.output, result.output
    assert result.output.startswith("error: ") and result.output.count("\n") == 1, result.output
    return result.output.rstrip("\n")


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("usage") / "store"
    run(store, "import", str(SIMULATION), "--no-progress")
    return store


@pytest.fixture
def store(imported: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "store"
    shutil.copytree(imported, copy)
    return copy


# ---------------------------------------------------------------------------- usage errors


@pytest.mark.parametrize(("args", "says"), [
    (["search", "派对", "--recency-wieght", "3"],
     "error: no such option --recency-wieght for genmem search; did you mean '--recency-w'"),
    (["search", "派对", "-k", "-1"], "error: -k: "),
    (["search"], "error: genmem search: missing argument 'query'"),
    (["add", "event", "伊莎贝拉在喝咖啡"], "error: genmem add: missing option '--poignancy'"),
    (["keywords", "a", "b"], "error: genmem keywords: missing argument 'object'"),
    (["serch", "派对"], "error: genmem: no such command 'serch'; did you mean 'search'"),
    (["search", "派对", "--relevance", "cosine"], "error: --relevance: "),
    (["search", "派对", "--path", "elsewhere"],
     "error: --path is a global option: put it before the command: genmem --path PATH search"),
    (["search", "派对", "--persona", "伊莎贝拉"],
     "error: --persona is a global option: put it before the command: genmem --persona PERSONA"),
    (["--pth", "x", "stats"], "error: no such option --pth for genmem; did you mean '--path'?"),
])
def test_a_usage_error_is_one_line(imported: Path, args: list[str], says: str) -> None:
    assert one_line_error(runner.invoke(app, args)).startswith(says)


def test_help_is_still_help() -> None:
    assert runner.invoke(app, []).exit_code in (0, 2)
    assert "Usage" in runner.invoke(app, []).output
    assert "Usage" in runner.invoke(app, ["search", "--help"]).output


# ---------------------------------------------------------------------------- options


def test_an_explicit_path_beats_the_environments_database(store: Path) -> None:
    env = {"GENMEM_DSN": "postgresql://nobody@127.0.0.1:9/nothing"}  # never reached
    out = run(store, "stats", env=env).output
    assert out.startswith(f"{PERSONA}: 14 memories")


def test_options_that_need_another_say_so(store: Path) -> None:
    says = one_line_error(runner.invoke(app, ["--chroma-port", "8030", "stats"]))
    assert says == "error: --chroma-port: it needs --chroma-host (the Chroma server's host)"
    says = one_line_error(run(store, "search", "派对", "--score-in", "database", code=2))
    assert says.startswith("error: --score-in: database ranks in PostgreSQL: give --dsn")


def test_search_scores_in_process_when_asked(store: Path) -> None:
    rows = json.loads(run(store, "search", "派对", "--score-in", "process", "--json",
                          "--peek", "-k", "3").output)
    assert len(rows) == 3


@pytest.mark.parametrize(("since", "until"), [
    ("yesterday", "today"), ("昨天", "今天"), ("1 day ago", "today"), ("前天", "昨天"),
])
def test_since_and_until_read_relative_days_at_the_stores_clock(
    store: Path, since: str, until: str
) -> None:
    # the store's clock is the save's 2023-02-13 00:00:50; Isabella's memories are of 02-13
    every = json.loads(run(store, "search", "派对", "--json", "--peek", "-k", "20").output)
    assert every
    rows = json.loads(run(store, "search", "派对", "--json", "--peek", "-k", "20",
                          "--since", since, "--until", until).output)
    created = {r["created"][:10] for r in rows}
    assert rows == [] or created <= {"2023-02-12"}
    out = run(store, "search", "派对", "--peek", "--since", since, "--until", until).output
    assert f"--since {since} --until {until} left out" in out
    today = json.loads(run(store, "search", "派对", "--json", "--peek", "-k", "20",
                           "--since", "today" if since.isascii() else "今天").output)
    assert [r["node_id"] for r in today] == [r["node_id"] for r in every]


def test_a_day_the_parser_cannot_read_is_one_line(store: Path) -> None:
    says = one_line_error(run(store, "search", "派对", "--since", "某天", code=2))
    assert says.startswith("error: --since: '某天' is not a time like '2023-02-13 18:00:00', "
                           "nor a day like 'yesterday'")


# ---------------------------------------------------------------------------- import


@pytest.mark.parametrize("name", ["Isabella PG", "伊莎贝拉"])
def test_a_persona_is_imported_again_under_another_name(store: Path, name: str) -> None:
    again = one_line_error(run(store, "import", str(SIMULATION), "--no-progress", code=2))
    assert f"persona '{PERSONA}' already has 14 memories in the store at {store}" in again
    assert f"under another name: genmem --persona NAME import '{ISABELLA}'" in again
    out = run(store, "--persona", name, "import", str(ISABELLA), "--no-progress").output
    assert out.startswith(f"Imported {name}: 14 memories (8 events, 6 thoughts, 0 chats)")
    several = json.loads(run(store, "--persona", name, "stats", "--json").output)
    assert several["memories"] == 14 and several["persona"] == name
    assert one_line_error(run(store, "stats", code=2)).startswith(
        "error: the store holds several personas")


def test_a_name_a_simulation_lacks_says_how_to_import_under_it(tmp_path: Path) -> None:
    store = tmp_path / "store"
    says = one_line_error(run(store, "--persona", "伊莎贝拉", "import", str(SIMULATION), code=2))
    assert says == (
        f"error: --persona: no persona '伊莎贝拉' in {SIMULATION} (it holds {PERSONA}); to "
        f"import one of them as '伊莎贝拉', give its folder: genmem --persona '伊莎贝拉' import "
        f"'{ISABELLA}'")
    hinted = ["--persona", "伊莎贝拉", "import", str(ISABELLA), "--no-progress"]
    assert run(store, *hinted).output.startswith("Imported 伊莎贝拉: 14 memories")


# ---------------------------------------------------------------------------- trigger


def test_the_trigger_is_one_wording_and_never_negative() -> None:
    past = StreamState(importance_trigger_max=20, importance_trigger_curr=-17)
    assert importance_gathered(past) == 37
    assert trigger_text(37, 20, due=True) == "importance since the last reflection 37 of 20: due"
    fresh = StreamState(importance_trigger_max=150, importance_trigger_curr=200)
    assert importance_gathered(fresh) == 0
    assert trigger_text(-5, 150, due=False, hint="--force reflects now") == (
        "importance since the last reflection 0 of 150: not due until it reaches 150; "
        "--force reflects now")


def test_stats_says_a_due_trigger_in_the_same_words(store: Path) -> None:
    with MemoryStream(PERSONA, path=store) as stream:
        stream.update_settings(importance_trigger_max=20, importance_trigger_curr=-17)
    out = run(store, "stats").output
    due = "reflection trigger: importance since the last reflection 37 of 20: due (8 events)"
    assert due in out
    data = json.loads(run(store, "stats", "--json").output)["trigger"]
    assert data["explanation"] == "importance since the last reflection 37 of 20: due"


# ---------------------------------------------------------------------------- help and words


def _walk(command: object, path: str = "genmem") -> list[tuple[str, object]]:
    found = [(path, command)]
    for name, sub in getattr(command, "commands", {}).items():
        found += _walk(sub, f"{path} {name}")
    return found


def test_help_shows_no_bool_placeholder_and_no_broken_line() -> None:
    for path, command in _walk(typer.main.get_command(app)):
        out = runner.invoke(app, [*path.split()[1:], "--help"]).output
        assert "<bool>" not in out and "{OBJECT}" not in out, path
        # typer keeps the line breaks of a help paragraph after the first: one line each
        paragraphs = inspect.cleandoc(command.help or "").split("\n\n")[1:]
        assert not [p for p in paragraphs if "\n" in p], path
    search = runner.invoke(app, ["search", "--help"], env={"COLUMNS": "200"}).output
    assert "adds the dense and lexical parts to the table" in search and "--score-in" in search


def test_explain_prints_the_weighted_components_without_a_chart(store: Path) -> None:
    out = run(store, "explain", "派对", "-k", "3").output
    assert "0.5×recency" in out and "3×relevance" in out and "2×importance" in out
    assert "score = 0.5×recency + 3×relevance + 2×importance" in out
    assert not list(Path.cwd().glob("genmem-explain.png"))


def test_counts_are_pluralised(tmp_path: Path) -> None:
    store = tmp_path / "store"
    run(store, "--persona", "玛丽亚", "add", "event", "玛丽亚在喝咖啡", "--poignancy", "3")
    out = run(store, "stats").output
    assert "玛丽亚: 1 memory (1 event, 0 thoughts, 0 chats)" in out
    assert "(1 event)" in out
    out = run(store, "search", "咖啡", "--since", "2099-01-01").output
    assert "left out 1 memory" in out
