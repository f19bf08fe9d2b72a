"""`genmem serve` and `genmem mcp` as commands, without a socket: uvicorn's `run` (and the MCP
stdio loop) are replaced by recorders, so what the commands print, refuse, create and write in
the folder's lock file is checked in process."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from typer.testing import CliRunner

from langchain_genmem.backends.locks import LOCK_FILE, FolderLock
from langchain_genmem.cli import Store, app
from langchain_genmem.cli.store import CHROMA_FILE

KEY = "serve-key-0123456789abcdef"
PERSONA = "伊莎贝拉"


@pytest.fixture
def served(monkeypatch) -> list[dict[str, Any]]:
    """What uvicorn was asked to run: each call's app, host and port (nothing listens)."""
    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(uvicorn, "run", lambda app_, **kw: calls.append({"app": app_, **kw}))
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL"):
        monkeypatch.delenv(name, raising=False)
    return calls


def seeded(tmp_path: Path) -> Path:
    folder = tmp_path / "store"
    stream = Store(folder).open(PERSONA, create=True)
    stream.add_event("伊莎贝拉在霍布斯咖啡馆煮咖啡", poignancy=3)
    stream.close()
    return folder


def genmem(*args: str, key: str | None = None) -> Any:
    return CliRunner().invoke(app, list(args), env={"GENMEM_API_KEY": key})


def owner_record(folder: Path) -> dict[str, Any]:
    return json.loads((folder / LOCK_FILE).read_text(encoding="utf-8"))


def test_the_owned_folder_message_gives_the_public_url(tmp_path, served):
    folder = seeded(tmp_path)
    done = genmem("--path", str(folder), "serve", "--host", "0.0.0.0",
                  "--public-url", "https://memory.example.org/", key=KEY)
    assert done.exit_code == 0, done.output
    record = owner_record(folder)
    assert record["url"] == "https://memory.example.org"
    refused = str(FolderLock(folder, 0).refusal(None, record))
    assert "send it to https://memory.example.org" in refused and "0.0.0.0" not in refused
    schema = served[0]["app"].openapi()
    assert schema["servers"] == [{"url": "https://memory.example.org"}]
    assert served[0]["host"] == "0.0.0.0"  # it listens where asked; it is shown as reachable


@pytest.mark.parametrize(("host", "shown"), [("0.0.0.0", "http://127.0.0.1:8000"),
                                             ("::", "http://[::1]:8000")])
def test_a_wildcard_bind_is_shown_as_a_reachable_address(tmp_path, served, host, shown):
    folder = seeded(tmp_path)
    done = genmem("--path", str(folder), "serve", "--host", host, key=KEY)
    assert done.exit_code == 0, done.output
    assert owner_record(folder)["url"] == shown
    assert served[0]["app"].openapi()["servers"] == [{"url": shown}]
    start = next(line for line in done.output.splitlines() if line.startswith("genmem serve:"))
    assert f"at {shown} " in start and f"docs: {shown}/docs" in start


def test_an_mcp_server_on_every_address_names_a_reachable_url(tmp_path, served):
    folder = seeded(tmp_path)
    done = genmem("--path", str(folder), "mcp", "--transport", "http", "--host", "0.0.0.0",
                  key=KEY)
    assert done.exit_code == 0, done.output
    assert owner_record(folder)["url"] == "http://127.0.0.1:8001/mcp"
    assert "at http://127.0.0.1:8001/mcp" in done.output


def test_client_url():
    from langchain_genmem.cli.serving import client_url

    assert client_url("127.0.0.1", 8000) == "http://127.0.0.1:8000"
    assert client_url("::1", 9000) == "http://[::1]:9000"
    assert client_url("0.0.0.0", 80, "http://genmem:8000/") == "http://genmem:8000"
    assert client_url("genmem.local", 8000) == "http://genmem.local:8000"


def test_the_no_key_refusal_recommends_the_environment_not_the_command_line():
    for command in (["serve"], ["mcp", "--transport", "http"]):
        done = genmem(*command, "--host", "0.0.0.0")
        lines = done.output.strip().splitlines()
        assert done.exit_code == 2 and len(lines) == 1, done.output
        assert "GENMEM_API_KEY" in lines[0] and "--keys-file" in lines[0]
        assert "--api-key" not in lines[0]


@pytest.mark.parametrize("command", [["serve"], ["mcp"], ["mcp", "--transport", "http"]])
def test_a_store_that_does_not_exist_is_refused_in_one_line(tmp_path, served, command):
    missing = tmp_path / "stroe"
    done = genmem("--path", str(missing), *command)
    lines = done.output.strip().splitlines()
    assert done.exit_code == 2 and len(lines) == 1, done.output
    assert lines[0].startswith("error: --path: ") and str(missing) in lines[0]
    assert f"genmem {command[0]} --create" in lines[0]
    assert not missing.exists() and served == []


def test_create_makes_the_store_at_start_and_says_so(tmp_path, served):
    folder = tmp_path / "new"
    done = genmem("--path", str(folder), "serve", "--create")
    assert done.exit_code == 0, done.output
    assert f"the store at {folder} (new, empty) at http://127.0.0.1:8000" in done.output
    assert (folder / CHROMA_FILE).is_file()  # made now: a restart needs no --create
    again = genmem("--path", str(folder), "serve")
    assert again.exit_code == 0, again.output
    assert "(new, empty)" not in again.output and len(served) == 2


def test_the_mcp_server_names_its_reflect_tool_not_an_http_route(tmp_path, served, monkeypatch):
    from langchain_genmem.service import mcp

    ran: list[Any] = []
    monkeypatch.setattr(mcp, "run_stdio", ran.append)
    done = genmem("--path", str(seeded(tmp_path)), "mcp")
    assert done.exit_code == 0, done.output
    assert len(ran) == 1
    assert "the reflect tool is unavailable" in done.output and "/reflect" not in done.output
    served_http = genmem("--path", str(tmp_path / "store"), "serve")
    assert "/reflect is unavailable" in served_http.output
