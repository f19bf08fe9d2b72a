"""A real chat model on this machine: llama.cpp's server (xllamacpp) on SmolLM2-135M-Instruct.

The launcher starts it on 127.0.0.1, it answers `/health`, a chat and a call whose reply the
server holds to a JSON schema, and it stops leaving no process, from Python and from the
command line. The model's words are near-random: only the shape of the replies is checked.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from langchain_openai import ChatOpenAI
from pydantic import BaseModel, Field

from langchain_genmem.core.errors import ChatModelError
from langchain_genmem.llm.llama_server import LlamaServer, smollm2_gguf
from tests.support.processes import pid_is_running, stop_process

pytestmark = pytest.mark.slow


class Rating(BaseModel):
    """How poignant a memory is."""

    rating: int = Field(ge=1, le=10)


RATE = ("On the scale of 1 to 10, where 1 is purely mundane and 10 is extremely poignant, "
        "rate the likely poignancy of this memory of Maria Lopez: 玛丽亚的祖母今天去世了。")


def health(url: str) -> dict:
    with urllib.request.urlopen(f"{url}/health", timeout=5) as reply:
        return json.loads(reply.read())


def test_the_small_model_chats_and_answers_in_the_schema_asked(small_model: ChatOpenAI) -> None:
    reply = small_model.invoke("Say hello to Maria.", max_tokens=12)
    assert isinstance(reply.content, str) and reply.content.strip()
    assert 0 < reply.usage_metadata["output_tokens"] <= 12
    rated = small_model.with_structured_output(Rating, method="json_schema").invoke(RATE)
    assert isinstance(rated, Rating) and 1 <= rated.rating <= 10


def test_temperature_zero_without_the_prompt_cache_repeats_a_reply(
        small_model: ChatOpenAI) -> None:
    replies = {small_model.invoke("Name a colour.", max_tokens=8).content for _ in range(2)}
    assert len(replies) == 1


def test_the_launcher_stops_its_server_and_leaves_no_process(tmp_path: Path) -> None:
    with LlamaServer(smollm2_gguf(), log=tmp_path / "server.out") as server:
        assert server.base_url.startswith("http://127.0.0.1:")
        assert server.base_url.endswith("/v1")
        assert health(server.url) == {"status": "ok"}
        pid, url = server.pid, server.url
        assert pid_is_running(pid)
    assert not pid_is_running(pid)
    with pytest.raises(OSError):
        health(url)
    assert "n_threads = 1" in (tmp_path / "server.out").read_text("utf-8")


def test_the_command_serves_until_ctrl_c_and_leaves_no_process(tmp_path: Path) -> None:
    command = subprocess.Popen(  # noqa: S603
        [sys.executable, "-m", "langchain_genmem.llm.llama_server", "--port", "0",
         "--log", str(tmp_path / "server.out")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        export = command.stdout.readline()
        said = command.stderr.readline()
        assert export.startswith("export OPENAI_BASE_URL=http://127.0.0.1:"), (export, said)
        base_url = export.strip().split("=", 1)[1]
        assert base_url.endswith("/v1") and "Ctrl-C stops it" in said
        server_pid = int(said.split("(pid ")[1].split(")")[0])
        assert health(base_url.removesuffix("/v1")) == {"status": "ok"}
        command.send_signal(signal.SIGINT)
        assert command.wait(30) == 0
    finally:
        stop_process(command)
    assert not pid_is_running(server_pid)
    assert command.stdout.read() == "" and command.stderr.read() == ""


def test_a_file_that_is_not_a_model_fails_in_one_line_and_keeps_its_log(
        tmp_path: Path) -> None:
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"junk" + os.urandom(4092))
    server = LlamaServer(junk)
    with pytest.raises(ChatModelError) as caught:
        server.start()
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("llama.cpp's server on junk.gguf exited with code ")
    assert f"(log: {server.log})" in message
    assert "before it was ready: " in message and "GGUF" in message  # llama.cpp's reason
    assert server.log.is_file() and "error" in server.log.read_text("utf-8").lower()
    assert not pid_is_running(server.pid)
    server.log.unlink()


def test_a_taken_port_fails_in_one_line_naming_it() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        server = LlamaServer(smollm2_gguf(), port=port)
        with pytest.raises(ChatModelError) as caught:
            server.start()
    message = str(caught.value)
    assert "\n" not in message
    assert f"couldn't bind HTTP server socket, hostname: 127.0.0.1, port: {port}" in message
    assert not pid_is_running(server.pid)
    server.log.unlink()
