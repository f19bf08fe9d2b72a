"""`genmem mcp --forget-expired-every`: a real server process forgets what expired, over
streamable HTTP and over stdio (the client starts it), as `genmem serve` does."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from langchain_mcp_adapters.client import MultiServerMCPClient

from langchain_genmem.cli import Store
from tests.integration_tests.test_service_mcp import (
    ADMIN,
    PERSONA,
    payload,
    stdio_client,
    tools_of,
)
from tests.support.genmem_server import GenmemServer

PASSWORD = "伊莎贝拉的临时密码是四七一一"
HOME = "伊莎贝拉住在霍布斯咖啡馆楼上"


async def remember_then_wait_for_the_sweep(tools: dict[str, Any]) -> None:
    """Remember a memory that expires in a second and one that never does; wait until the
    server's sweep leaves one."""
    payload(await tools["remember"].ainvoke({"description": PASSWORD, "poignancy": 6,
                                             "expires_in": 1}))
    payload(await tools["remember"].ainvoke({"description": HOME, "poignancy": 5}))
    deadline = time.monotonic() + 60
    while payload(await tools["persona_stats"].ainvoke({}))["memories"] != 1:
        assert time.monotonic() < deadline, "the expired memory was not forgotten"
        await anyio.sleep(0.2)
    dry = payload(await tools["forget"].ainvoke({"expired": True, "dry_run": True}))
    assert dry["forgotten"] == []  # nothing expired is left to forget


def left(store: Path) -> list[str]:
    stream = Store(store).open(PERSONA)
    try:
        return [n.description for n in stream.nodes()]
    finally:
        stream.close()


@pytest.mark.slow
async def test_mcp_over_http_forgets_expired_memories_periodically(tmp_path):
    store = tmp_path / "store"
    with GenmemServer(store, "--api-key", ADMIN, "--create", "--forget-expired-every", "0.2",
                      global_args=["--persona", PERSONA],
                      command=("mcp", "--transport", "http")) as srv:
        client = MultiServerMCPClient({"genmem": {
            "transport": "streamable_http", "url": f"{srv.url}/mcp",
            "headers": {"Authorization": f"Bearer {ADMIN}"}}})
        async with client.session("genmem") as session:
            await remember_then_wait_for_the_sweep(await tools_of(session))
    assert f"persona {PERSONA!r}: forgot 1 expired memories" in srv.last_output
    assert "Traceback" not in srv.last_output
    assert left(store) == [HOME]  # deleted, not hidden


@pytest.mark.slow
async def test_mcp_over_stdio_forgets_expired_memories_periodically(tmp_path):
    store = tmp_path / "store"
    async with stdio_client(store, "--forget-expired-every", "0.2").session("genmem") as session:
        await remember_then_wait_for_the_sweep(await tools_of(session))
    assert left(store) == [HOME]


def test_the_option_is_refused_unless_positive(tmp_path):
    from typer.testing import CliRunner

    from langchain_genmem.cli import app

    done = CliRunner().invoke(app, ["--path", str(tmp_path / "s"), "mcp", "--create",
                                    "--forget-expired-every", "0"])
    assert done.exit_code == 2 and "--forget-expired-every" in done.output
    assert "greater than or equal to 0.001" in done.output  # it exists, and wants more than 0
