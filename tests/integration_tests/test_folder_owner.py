"""An embedded folder has one owner: a running `genmem serve` or `genmem mcp` holds it.

Real processes on 127.0.0.1: the server takes the folder's writer lock before it serves, so
a `genmem add` (or a library writer) in another process is refused at once with one line
naming the server's pid and URL, and the server keeps answering with the memories it had.
`genmem` writers racing on one folder wait for each other (the documented wait) and are
refused by name after it, never with Chroma's internal error.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import httpx
import pytest
from langchain_mcp_adapters.client import MultiServerMCPClient
from langchain_mcp_adapters.tools import load_mcp_tools

from langchain_genmem.cli import Store
from tests.support.genmem_server import GenmemServer
from tests.support.processes import stop_process
from tests.support.warm import shared

pytestmark = pytest.mark.slow

PERSONA = "伊莎贝拉"
FIRST = ["伊莎贝拉在霍布斯咖啡馆煮咖啡", "伊莎贝拉正在筹备情人节派对"]


def genmem(store: Path, *args: str, persona: str | None = PERSONA) -> subprocess.CompletedProcess:
    """Run `genmem --path STORE [--persona P] ARGS...` to the end."""
    who = ["--persona", persona] if persona else []
    return shared().run(
        [sys.executable, "-m", "langchain_genmem.cli", "--path", str(store), *who, *args],
        timeout=300)


def add(store: Path, description: str) -> subprocess.CompletedProcess:
    return genmem(store, "add", "event", description, "--poignancy", "3")


@pytest.fixture(scope="module")
def seeded_once(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder the CLI wrote FIRST into, once per module: each test writes only a copy."""
    store = tmp_path_factory.mktemp("seeded") / "store"
    for text in FIRST:
        done = add(store, text)
        assert done.returncode == 0, done.stderr
    return store


@pytest.fixture
def seeded(seeded_once: Path, tmp_path: Path) -> Path:
    """This test's own copy of the seeded folder (no process holds it)."""
    return Path(shutil.copytree(seeded_once, tmp_path / "store"))


def assert_refused_by(done: subprocess.CompletedProcess, srv: GenmemServer, what: str) -> None:
    """Exit 2, nothing on stdout, one line naming the owner's pid and URL and what to do."""
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Added" not in done.stdout
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert f"pid {srv.pid}" in lines[0] and srv.url in lines[0] and what in lines[0]
    assert "Internal error" not in lines[0] and "stop it" in lines[0]


def retrieve(http: httpx.Client, focal: str = "咖啡") -> dict[str, Any]:
    r = http.post("/retrieve", json={"persona_name": PERSONA, "focal_text": focal, "top_k": 5})
    assert r.status_code == 200, r.text
    return r.json()


def test_a_cli_add_beside_genmem_serve_is_refused_and_the_server_keeps_answering(seeded):
    store = seeded
    with GenmemServer(store) as srv, httpx.Client(base_url=srv.url, timeout=120) as http:
        before = retrieve(http)
        assert before["status"] == "ok" and before["debug"]["total_candidates"] == 2

        assert_refused_by(add(store, "伊莎贝拉给花浇水"), srv, "genmem serve")
        # a read command would flush access times into the folder: refused the same way
        assert_refused_by(genmem(store, "search", "咖啡"), srv, "genmem serve")

        after = retrieve(http)
        assert after["status"] == "ok", after
        assert after["debug"]["total_candidates"] == 2
        assert {n["description"] for n in after["retrieved_nodes"]} == set(FIRST)
        r = http.post("/memories", json={"persona_name": PERSONA, "poignancy": 4,
                                         "description": "伊莎贝拉邀请克劳斯参加派对"})
        assert r.status_code == 200 and r.json()["count"] == 1, r.text
        assert retrieve(http, "派对")["debug"]["total_candidates"] == 3
        assert http.get(f"/personas/{PERSONA}").status_code == 200
    assert srv.returncode in (0, -15) and "Traceback" not in srv.last_output
    # once the owner stopped, the folder takes the next writer, numbered after the server's
    done = add(store, "伊莎贝拉给花浇水")
    assert done.returncode == 0 and "Added node_4" in done.stdout, done.stderr


def test_the_refusal_names_the_public_url_clients_use(seeded):
    store = seeded
    public = "https://memory.example.org"
    with GenmemServer(store, "--public-url", f"{public}/") as srv, \
            httpx.Client(base_url=srv.url, timeout=120) as http:
        assert http.get("/openapi.json").json()["servers"] == [{"url": public}]
        done = add(store, "伊莎贝拉给花浇水")
        assert done.returncode == 2, done.stderr
        line = done.stderr.strip()
        assert f"pid {srv.pid}" in line and f"send it to {public}," in line, line
        assert srv.url not in line and "0.0.0.0" not in line
        assert retrieve(http)["debug"]["total_candidates"] == 2


# A library process beside the owner: it reads (works or is refused clearly), then tries to
# write. Prints what it saw as JSON.
LIBRARY = textwrap.dedent(
    """
    import json, sys
    from langchain_genmem import GenMemError, MemoryStream
    out = {}
    try:
        s = MemoryStream(sys.argv[2], path=sys.argv[1])
        out["len"] = len(s)
        out["descriptions"] = sorted(n.description for n in s.nodes())
        s.add_event("伊莎贝拉关上了咖啡馆", poignancy=2)
        out["added"] = True
    except GenMemError as e:
        out["error"] = {"type": type(e).__name__, "message": str(e)}
    print(json.dumps(out, ensure_ascii=False))
    """
)


def test_a_library_process_beside_the_server_reads_or_is_refused_and_breaks_nothing(seeded):
    store = seeded
    with GenmemServer(store) as srv, httpx.Client(base_url=srv.url, timeout=120) as http:
        r = http.post("/memories", json={"persona_name": PERSONA, "poignancy": 5,
                                         "description": "伊莎贝拉买了玫瑰花"})
        assert r.status_code == 200, r.text
        done = shared().run([sys.executable, "-c", LIBRARY, str(store), PERSONA], timeout=300)
        assert done.returncode == 0, done.stderr
        seen = json.loads(done.stdout.strip().splitlines()[-1])
        assert "added" not in seen and seen["error"]["type"] == "ConcurrentWriterError"
        assert f"pid {srv.pid}" in seen["error"]["message"] and srv.url in seen["error"]["message"]
        if "len" in seen:  # the read worked: it saw what the server had committed
            assert seen["len"] == 3 and "伊莎贝拉买了玫瑰花" in seen["descriptions"]
        after = retrieve(http, "玫瑰")
        assert after["status"] == "ok" and after["debug"]["total_candidates"] == 3
        assert after["retrieved_nodes"][0]["description"] == "伊莎贝拉买了玫瑰花"
        r = http.post("/memories", json={"persona_name": PERSONA, "poignancy": 2,
                                         "description": "伊莎贝拉打扫了柜台"})
        assert r.status_code == 200, r.text
        assert [m["node_id"] for m in r.json()["memories"]] == ["node_4"]
    stream = Store(store).open(PERSONA)
    assert len(stream) == 4
    assert "伊莎贝拉关上了咖啡馆" not in {n.description for n in stream.nodes()}
    stream.close()


def test_racing_cli_adds_wait_then_are_refused_by_name_never_with_chromas_error(
    seeded, tmp_path
):
    store = seeded
    texts = [f"伊莎贝拉招待第{i}位客人" for i in range(3)]
    procs = []
    for i, text in enumerate(texts):
        log = tmp_path / f"add{i}.log"
        argv = [sys.executable, "-m", "langchain_genmem.cli", "--path", str(store),
                "--persona", PERSONA, "add", "event", text, "--poignancy", "3"]
        with log.open("wb") as out:
            procs.append((shared().popen(argv, stdin=subprocess.DEVNULL, stdout=out,
                                         stderr=subprocess.STDOUT), log, text))
    added = []
    for proc, log, text in procs:
        try:
            proc.wait(timeout=300)
        finally:
            stop_process(proc)
        out = log.read_text(encoding="utf-8")
        assert "Internal error" not in out and "Traceback" not in out, out
        if proc.returncode == 0:
            assert out.startswith("Added node_"), out
            added.append(text)
        else:
            assert proc.returncode == 2, out
            lines = out.strip().splitlines()
            assert len(lines) == 1 and "another process" in lines[0] and "pid" in lines[0], out
    assert added  # the first one to take the folder always writes
    stream = Store(store).open(PERSONA)
    descriptions = [n.description for n in stream.nodes()]
    assert len(stream) == len(FIRST) + len(added) == stream.state.node_count
    assert sorted(descriptions) == sorted([*FIRST, *added])
    assert sorted(n.node_id for n in stream.nodes()) == sorted(
        f"node_{i}" for i in range(1, len(FIRST) + len(added) + 1))
    stream.close()


def payload(result: Any) -> Any:
    blocks = result if isinstance(result, list) else [{"type": "text", "text": result}]
    return json.loads("".join(b["text"] for b in blocks if b.get("type") == "text"))


async def test_a_cli_add_beside_genmem_mcp_is_refused_and_mcp_keeps_answering(seeded):
    store = seeded
    with GenmemServer(store, global_args=["--persona", PERSONA],
                      command=("mcp", "--transport", "http")) as srv:
        client = MultiServerMCPClient({"genmem": {"transport": "streamable_http",
                                                  "url": f"{srv.url}/mcp"}})
        async with client.session("genmem") as session:
            tools = {t.name: t for t in await load_mcp_tools(session)}
            found = payload(await tools["recall"].ainvoke({"query": "咖啡"}))
            assert found["status"] == "ok" and len(found["retrieved_nodes"]) == 2

            assert_refused_by(add(store, "伊莎贝拉给花浇水"), srv, "genmem mcp")

            found = payload(await tools["recall"].ainvoke({"query": "咖啡"}))
            assert found["status"] == "ok", found
            assert {n["description"] for n in found["retrieved_nodes"]} == set(FIRST)
            stored = payload(await tools["remember"].ainvoke(
                {"description": "伊莎贝拉邀请克劳斯参加派对", "poignancy": 4}))
            assert stored["node_id"] == "node_3"
    # (the MCP library logs its own traceback when a client's event stream closes)
    assert "Error finding id" not in srv.last_output, srv.last_output
    stream = Store(store).open(PERSONA)
    assert len(stream) == 3
    stream.close()
