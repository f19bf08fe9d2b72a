"""The erasure knows its limits: it writes Chroma's files only on the Chroma versions it was
tested with, checked before any file is touched, and every forget says whether it erased."""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path

import chromadb
import pytest
from fastapi.testclient import TestClient
from langchain_core.embeddings import DeterministicFakeEmbedding
from typer.testing import CliRunner

from langchain_genmem import MemoryStream
from langchain_genmem.backends import chroma_erase
from langchain_genmem.backends.chroma_erase import SLOT_MAPS, TESTED_CHROMA, untested
from langchain_genmem.cli import Store, app
from langchain_genmem.service import create_app, create_service

ROOT = Path(__file__).resolve().parents[2]
EMB = DeterministicFakeEmbedding(size=8)
NOW = datetime(2024, 3, 1, 9)
SECRET = "我的身份证号码是一二三四 (id 1234)"


def filled(path: Path) -> MemoryStream:
    stream = MemoryStream("张三", path=str(path), embeddings=EMB, clock=lambda: NOW)
    stream.add_event(SECRET, poignancy=9)
    stream.add_event("我喜欢吃饺子", poignancy=4)
    return stream


def files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


def test_the_tested_versions_are_declared_once_and_match_the_installed_chroma():
    assert untested() is None  # the suite runs on a tested version
    assert chromadb.__version__.rsplit(".", 1)[0] in TESTED_CHROMA
    assert untested("1.5.0") is None and untested("1.5.12") is None
    for other in ("1.4.2", "1.6.0", "2.0.0", "0.6.3"):
        reason = untested(other)
        assert reason.startswith(f"Chroma {other} is not a version the erasure was tested")
        assert "\n" not in reason


def test_the_dependency_says_which_versions_are_erased():
    pyproject = (ROOT / "pyproject.toml").read_text("utf-8")
    said = [line for line in pyproject.splitlines() if "TESTED_CHROMA" in line]
    assert said and all(f"Chroma {series}.x" in pyproject for series in TESTED_CHROMA)
    assert '"chromadb>=1.0",' in pyproject  # every 1.x still installs


def test_the_docs_and_the_older_chroma_of_the_suite_say_the_same():
    # make test runs a forget on an older Chroma (OLD_CHROMA): one the erasure only deletes on
    makefile = (ROOT / "Makefile").read_text("utf-8")
    old = re.search(r"^OLD_CHROMA := chromadb==(\S+)$", makefile, re.MULTILINE).group(1)
    assert untested(old) is not None
    storage = " ".join((ROOT / "docs" / "storage.md").read_text("utf-8").split())
    assert "**Which Chroma versions erase:** " + ", ".join(
        f"{series}.x" for series in TESTED_CHROMA) + " only" in storage
    assert f"Chroma {old}" in storage and old in (ROOT / "pyproject.toml").read_text("utf-8")


def test_a_forget_on_a_tested_version_erases_and_says_so(tmp_path):
    stream = filled(tmp_path / "store")
    report = stream.forget(["node_1"])
    assert (report.erased, report.erasure) == (True, None)
    assert report.to_dict()["erased"] is True
    stream.close()


def test_an_untested_version_only_deletes_touches_no_file_and_says_so(tmp_path,
                                                                        monkeypatch):
    folder = tmp_path / "store"
    stream = filled(folder)
    stream.flush()
    monkeypatch.setattr(chromadb, "__version__", "1.6.0")
    before = files(folder)
    calls: list[object] = []
    monkeypatch.setattr(chroma_erase.Eraser, "call", lambda self, *a, **k: calls.append(a))
    report = stream.forget(["node_1"])
    assert report.forgotten == ("node_1",) and report.erased is False
    assert report.erasure.startswith("Chroma 1.6.0 is not a version the erasure was tested")
    assert calls == []  # the erasing process was never asked to open a file
    assert not (folder / SLOT_MAPS).exists()
    assert SECRET not in [n.description for n in stream.nodes()]  # deleted as Chroma deletes
    after = files(folder)
    assert set(after) >= {k for k in before if not k.endswith(".snapshot")}
    stream.close()


def test_an_untested_version_is_not_compacted_either(tmp_path, monkeypatch):
    # compact rewrites the database and zeroes the index files' room: Chroma's files too
    folder = tmp_path / "store"
    stream = filled(folder)
    stream.forget(["node_1"])
    stream.flush()
    monkeypatch.setattr(chromadb, "__version__", "1.4.2")
    before = files(folder)
    calls: list[object] = []
    monkeypatch.setattr(chroma_erase.Eraser, "call", lambda self, *a, **k: calls.append(a))
    assert stream.compact()["store"] is None
    assert calls == []
    assert {k: v for k, v in files(folder).items() if not k.startswith("genmem-")} == {
        k: v for k, v in before.items() if not k.startswith("genmem-")}
    stream.close()


def test_every_front_end_reports_it(tmp_path, monkeypatch):
    monkeypatch.setattr(chromadb, "__version__", "1.6.0")
    store = Store(tmp_path / "store", now=NOW)
    with TestClient(create_app(create_service(store))) as c:
        c.post("/memories", json={"persona_name": "张三", "description": SECRET,
                                  "poignancy": 9})
        c.post("/memories", json={"persona_name": "张三", "description": "饺子",
                                  "poignancy": 4})
        out = c.post("/forget", json={"persona_name": "张三", "node_ids": "node_1"}).json()
        assert out["erased"] is False and out["erasure"].startswith("Chroma 1.6.0 is not")
        gone = c.delete("/personas/张三").json()
        assert gone["erased"] is False
        schema = c.get("/openapi.json").json()["components"]["schemas"]["ForgetResponse"]
        assert {"erased", "erasure"} <= set(schema["properties"])
    path = str(tmp_path / "cli")
    runner = CliRunner()
    head = ["--path", path, "--persona", "张三"]
    added = runner.invoke(app, [*head, "add", "event", SECRET, "--poignancy", "9"])
    assert added.exit_code == 0, added.output
    text = runner.invoke(app, [*head, "forget", "node_1"])
    assert text.exit_code == 0, text.output
    assert "Not erased from the folder's files: Chroma 1.6.0 is not a version" in text.output
    runner.invoke(app, [*head, "add", "event", "饺子", "--poignancy", "4"])
    data = runner.invoke(app, [*head, "forget", "node_2", "--json"])
    assert json.loads(data.output)["erased"] is False


@pytest.mark.parametrize("kind", ["memory"])
def test_a_store_without_files_of_ours_reports_none(kind):
    stream = MemoryStream("张三", embeddings=EMB, clock=lambda: NOW)
    stream.add_event(SECRET, poignancy=9)
    assert stream.forget(["node_1"]).erased is None
