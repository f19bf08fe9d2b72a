"""`genmem demo` as `make demo` runs it (a subprocess, the real model, the Maria Lopez fixture),
and the command line against a real Chroma server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from langchain_genmem.cli import app

ROOT = Path(__file__).resolve().parents[2]
PERSONAS = ROOT / "data" / "generative_agents"
MARIA = (PERSONAS / "July1_the_ville_isabella_maria_klaus-step-3-12/personas/Maria Lopez"
         / "bootstrap_memory" / "associative_memory")
ISABELLA = (PERSONAS / "July1_the_ville_isabella_maria_klaus-step-3-2/personas/Isabella Rodriguez"
            / "bootstrap_memory" / "associative_memory")


def genmem() -> list[str]:
    script = Path(sys.executable).parent / "genmem"
    return [str(script)] if script.exists() else [sys.executable, "-m", "langchain_genmem.cli"]


def test_demo_runs_offline_on_maria(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    done = subprocess.run(
        [*genmem(), "demo", str(MARIA)], cwd=tmp_path, env=env, capture_output=True,
        text=True, encoding="utf-8", timeout=120, check=False,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    sections = ["1. Import", "2. Relevance", "3. Importance", "4. Recency", "5. Recall",
                "6. Keywords", "7. Stats", "Done in"]
    positions = [out.index(s) for s in sections]
    assert positions == sorted(positions)
    assert "Maria Lopez: 267 memories re-embedded" in out
    assert "clock = saved curr_time 2023-02-13 15:17:40" in out
    assert "score = 0×recency + 3×relevance + 0×importance" in out
    assert "score = 0.5×recency + 3×relevance + 2×importance" in out
    # the wording a first reader tripped on: gains times weights, sections named, the bar's count
    assert "= gains 0.5/3/2 × weights 6/1/1" in out
    assert "recency weight 6 (times its gain 0.5: 3×recency)" in out
    assert "section 3's top 3 retrieved at 15:17" in out and "of 3. are" not in out
    assert "115 distinct texts embedded: memories with the same embedding_key share" in out
    assert "events indexed under 'Klaus Mueller', 'take', 'break'" in out
    assert "267 memories (222 events, 42 thoughts, 3 chats)" in out
    assert ("reflection trigger: importance since the last reflection 131 of 150: not due until "
            "it reaches 150 (54 events)") in out
    assert "Embedding Maria Lopez" in done.stderr and "115/115" in done.stderr
    assert "Traceback" not in done.stderr
    assert not any(tmp_path.iterdir())  # the store was temporary


def test_command_line_on_a_chroma_server(chroma_server, tmp_path: Path) -> None:
    runner = CliRunner()
    where = ["--chroma-host", chroma_server.host, "--chroma-port", str(chroma_server.port),
             "--collection", f"cli-{os.getpid()}"]
    result = runner.invoke(app, [*where, "import", str(ISABELLA), "--no-progress"])
    assert result.exit_code == 0, result.output
    assert f"into the Chroma server at {chroma_server.host}:{chroma_server.port}" in result.output
    found = runner.invoke(app, [*where, "search", "派对 party", "-k", "2", "--json"])
    rows = json.loads(found.output)
    assert rows[0]["node_id"] == "node_10"
    assert json.loads(runner.invoke(app, [*where, "stats", "--json"]).output)["memories"] == 14
