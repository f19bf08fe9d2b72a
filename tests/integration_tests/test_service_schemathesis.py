"""schemathesis over `genmem serve`'s own schema: every check, positive and negative data.

The server runs as users start it (a child process on 127.0.0.1, an API key, an embedded
folder); schemathesis's command line reads ``/openapi.json`` and sends what the schema
allows and what it rules out, with bounded examples and a fixed seed. A failure is allowed
only when it is a rule the schema states in words because JSON Schema cannot say it
(:data:`DOCUMENTED`); anything else (a 500, a status the schema does not list, a request
the schema allows refused for a rule it does not state, or one it rules out accepted) fails
the test with schemathesis's own report of it.
"""

from __future__ import annotations

import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.support.genmem_server import GenmemServer

KEY = "schemathesis-key-0123456789"
ST = Path(sys.executable).with_name("st")

DOCUMENTED: dict[str, str] = {
    # The server has no chat model: reflection is unavailable (503) and a memory needs its
    # poignancy, as the schema's descriptions of /reflect and poignancy say.
    "reflect: no chat model": "ST101",
    "this server has no chat model to rate it": "ST202",
    # Rules between fields or about stored memories, stated in the fields' descriptions.
    "nothing selected; give node ids or a selector": "ST202",
    "is not after created_after": "ST202",
    "give expiration or expires_in, not both": "ST202",
    "only thoughts have evidence": "ST202",
    "not a memory of": "ST202",
    "which was never stored": "ST202",
    "not longer than": "ST202",
    # An optional number or boolean is a plain type for Dify's importer and takes null.
    "Incorrect type": "ST201",
    # /personas/{name} takes a name with '/', so GET also answers .../memories/node_N.
    "Allow header mismatch": "ST205",
}
"""What schemathesis may report: a phrase of the failure, and its check."""


def failures(report: Path) -> list[str]:
    """The failures of a JUnit report, each as schemathesis wrote it."""
    return [f.text or "" for f in ET.parse(report).getroot().iter("failure")]


def undocumented(text: str) -> list[str]:
    """The cases of one failure that no :data:`DOCUMENTED` rule explains."""
    cases = re.split(r"\n(?=\d+\. Test Case ID)", text)
    return [case for case in cases
            if not any(phrase in case and check in case for phrase, check in DOCUMENTED.items())]


@pytest.mark.skipif(not ST.exists(), reason="schemathesis (the test extra) is not installed")
def test_schemathesis_finds_nothing_but_what_the_schema_documents(tmp_path: Path) -> None:
    report = tmp_path / "junit.xml"
    with GenmemServer(tmp_path / "store", "--api-key", KEY, "--create") as server:
        run = subprocess.run(
            [str(ST), "run", f"{server.url}/openapi.json", "--checks", "all", "--mode", "all",
             "--phases", "examples,coverage,fuzzing", "--max-examples", "5", "--seed", "1",
             "--request-timeout", "60", "-H", f"Authorization: Bearer {KEY}",
             "--report", "junit", "--report-junit-path", str(report), "--no-color"],
            capture_output=True, text=True, timeout=600, check=False, cwd=tmp_path)
    assert report.exists(), run.stdout[-3000:] + run.stderr[-3000:]
    found = [case for text in failures(report) for case in undocumented(text)]
    assert found == [], "\n\n".join(found)[:6000]
    assert " 500" not in server.last_output and "Traceback" not in server.last_output
