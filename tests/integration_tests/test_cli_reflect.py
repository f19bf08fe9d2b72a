"""`genmem reflect` says when it is not due and how to force it; a dead server is one line."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from langchain_genmem.cli import app
from tests.support.processes import free_port
from tests.support.silent_server import silent_server

ISABELLA = (Path(__file__).resolve().parents[2] / "data" / "generative_agents"
            / "July1_the_ville_isabella_maria_klaus-step-3-2/personas/Isabella Rodriguez"
            / "bootstrap_memory" / "associative_memory")
runner = CliRunner()


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("reflect") / "store"
    done = runner.invoke(app, ["--path", str(path), "import", str(ISABELLA), "--no-progress"])
    assert done.exit_code == 0, done.output
    return path


def test_not_due_says_what_the_trigger_means_and_how_to_force(store, scripted_openai):
    srv = scripted_openai([], default="1. 7")
    done = runner.invoke(app, ["--path", str(store), "reflect"], env=srv.env())
    assert done.exit_code == 0, done.output
    lines = done.output.splitlines()
    assert lines[0] == "status: not_due"
    assert lines[1] == (
        "trigger: importance since the last reflection 8 of 150: not due until it reaches 150; "
        "`genmem reflect --force` reflects now"
    )
    assert srv.requests() == []


def test_not_due_needs_no_model_and_a_due_run_says_what_to_set(store, monkeypatch):
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL"):
        monkeypatch.delenv(name, raising=False)
    done = runner.invoke(app, ["--path", str(store), "reflect"])
    assert done.exit_code == 0, done.output
    assert done.output.splitlines()[:2] == [
        "status: not_due",
        "trigger: importance since the last reflection 8 of 150: not due until it reaches 150; "
        "`genmem reflect --force` reflects now",
    ]
    forced = runner.invoke(app, ["--path", str(store), "reflect", "--force"])
    assert forced.exit_code == 2 and forced.output.count("\n") == 1, forced.output
    assert forced.output.startswith("error: no chat model") and "OPENAI_API_KEY" in forced.output


def test_an_unreachable_model_server_is_one_line(store):
    url = f"http://127.0.0.1:{free_port()}/v1"
    env = {"OPENAI_API_KEY": "test-key", "OPENAI_BASE_URL": url}
    done = runner.invoke(app, ["--path", str(store), "reflect", "--force"], env=env)
    assert done.exit_code == 2, done.output
    assert done.output == (
        f"error: cannot reach the chat model at {url} (Connection error.): start that server, "
        "point OPENAI_BASE_URL at one that runs (Ollama: http://localhost:11434/v1, "
        "llama.cpp's llama-server, vLLM), or unset it and set OPENAI_API_KEY for OpenAI\n"
    )


def test_a_missing_collection_on_a_server_is_not_created_by_a_read(chroma_server):
    name = f"typo-{os.getpid()}"
    where = ["--chroma-host", chroma_server.host, "--chroma-port", str(chroma_server.port),
             "--collection", name]
    done = runner.invoke(app, [*where, "stats"])
    assert done.exit_code == 2 and done.output.count("\n") == 1, done.output
    assert f"--collection: collection {name!r} on the Chroma server" in done.output
    assert name not in {c.name for c in chroma_server.client().list_collections()}


@pytest.fixture
def due_store(tmp_path: Path) -> Path:
    path = tmp_path / "store"
    done = runner.invoke(app, ["--path", str(path), "import", str(ISABELLA), "--no-progress"])
    assert done.exit_code == 0, done.output
    return path


NO_EVIDENCE = [
    {"when": "most salient high-level questions", "reply": "Why does Isabella love her cafe?"},
    {"when": "high-level insights can you infer", "reply": "1. Isabella loves Hobbs Cafe."},
]


def test_a_reflection_that_writes_nothing_says_why(due_store, scripted_openai):
    srv = scripted_openai(NO_EVIDENCE)
    done = runner.invoke(app, ["--path", str(due_store), "reflect", "--force", "--output",
                               "text"], env=srv.env())
    assert done.exit_code == 0, done.output
    assert done.output.splitlines() == [
        "status: no_insights",
        "reason: insights: the insight 'Isabella loves Hobbs Cafe.' cited no statement shown; "
        "not written",
        "llm calls: 2",
    ]
    assert [r["rule"] for r in srv.requests(refused=True)] == [0, 1]  # text only: none refused


def test_auto_output_falls_back_to_text_when_the_server_refuses_schemas(due_store,
                                                                       scripted_openai):
    srv = scripted_openai(NO_EVIDENCE)
    done = runner.invoke(app, ["--path", str(due_store), "reflect", "--force"], env=srv.env())
    assert done.exit_code == 0, done.output
    assert done.output.splitlines()[0] == "status: no_insights"
    assert done.output.splitlines()[-1] == "llm calls: 3"  # the refused one counts
    first, *rest = srv.requests(refused=True)
    assert first["rule"] == "refused" and first["body"]["response_format"]["type"] == "json_schema"
    assert "Answer in JSON" in first["messages"][-1]["content"]
    assert [r["rule"] for r in rest] == [0, 1]  # then the text prompts, no schema asked again
    assert all("response_format" not in r["body"] for r in rest)
    assert rest[0]["messages"][-1]["content"].endswith("grounded in the statements?\n1)")
    assert [r["body"]["max_completion_tokens"] for r in rest] == [300, 600]  # their max_tokens


def test_max_calls_bounds_a_reflection_and_says_so(due_store, scripted_openai):
    srv = scripted_openai(NO_EVIDENCE)
    done = runner.invoke(app, ["--path", str(due_store), "reflect", "--force", "--output",
                               "text", "--max-calls", "1"], env=srv.env())
    assert done.exit_code == 0, done.output
    assert done.output.splitlines() == [
        "status: no_insights",
        "reason: insights: the reply for the question 'Why does Isabella love her cafe?' was "
        "empty, cut at its max_tokens or not valid for its schema",
        "reason: insights: 1 call skipped: the budget of 1 model calls was spent "
        "(raise max_calls)",
        "llm calls: 1",
    ]
    assert len(srv.requests()) == 1


@pytest.fixture
def silent_url():
    """A server that accepts connections and never answers."""
    with silent_server() as url:
        yield url


def test_a_server_that_never_answers_is_one_line_in_bounded_time(due_store, silent_url):
    env = {"OPENAI_API_KEY": "test-key", "OPENAI_BASE_URL": silent_url}
    started = time.monotonic()
    done = runner.invoke(app, ["--path", str(due_store), "reflect", "--force", "--timeout",
                               "0.5"], env=env)
    assert time.monotonic() - started < 20  # 2 tries of 0.5 s, and the retry's pause
    assert done.exit_code == 2, done.output
    assert done.output == (
        f"error: the chat model at {silent_url} did not answer in time (timed out after "
        "0.5 s); raise the timeout (CallLimits(timeout=...) in the settings, genmem reflect "
        "--timeout) or use a faster model\n"
    )
