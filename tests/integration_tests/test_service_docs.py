"""docs/service.md's shell examples against a real `genmem serve` on 127.0.0.1.

The `curl` block is found on the page, not copied here: it runs in `bash` as printed, its
address pointed at the test's server and its key in `GENMEM_API_KEY`, and must add a Chinese
memory and retrieve it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support.genmem_server import GenmemServer

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "service.md"
KEY = "docs-key-0123456789abcdef"
SHOWN_URL = "http://127.0.0.1:8000"
FENCE = re.compile(r"^```bash\n(.*?)^```", re.DOTALL | re.MULTILINE)


def curl_block() -> str:
    blocks = [b for b in FENCE.findall(PAGE.read_text(encoding="utf-8")) if "curl " in b]
    assert len(blocks) == 1, "docs/service.md should show one block of curl examples"
    return blocks[0]


def replies(text: str) -> list[Any]:
    """The JSON documents curl printed one after the other."""
    decoder, out, at = json.JSONDecoder(), [], 0
    while at < len(text):
        if text[at].isspace():
            at += 1
            continue
        value, at = decoder.raw_decode(text, at)
        out.append(value)
    return out


def run(block: str, url: str, key: str) -> list[Any]:
    done = subprocess.run(  # noqa: S603 - the page's own commands
        ["bash", "-e", "-c", block.replace(SHOWN_URL, url)],  # noqa: S607
        env={**os.environ, "GENMEM_API_KEY": key},
        capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return replies(done.stdout)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("curl") is None, reason="the page's example needs curl")
def test_the_curl_examples_add_and_retrieve(tmp_path):
    block = curl_block()
    assert SHOWN_URL in block and "$GENMEM_API_KEY" in block
    with GenmemServer(tmp_path / "store", "--api-key", KEY, "--create") as srv:
        refused = run(block, srv.url, "another-key-0123456789abcdef")
        assert [r["status"] for r in refused] == ["error", "error"]
        assert all("API key" in r["message"] for r in refused)
        added, found = run(block, srv.url, KEY)
    assert added["count"] == 1
    assert added["memories"][0]["description"] == "伊莎贝拉在筹备情人节派对"
    assert found["status"] == "ok"
    assert [n["description"] for n in found["retrieved_nodes"]] == ["伊莎贝拉在筹备情人节派对"]
