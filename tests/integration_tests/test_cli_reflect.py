"""`genmem reflect` says when it is not due and how to force it; a dead server is one line."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from langchain_genmem.cli import app
from tests.support.processes import free_port

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
