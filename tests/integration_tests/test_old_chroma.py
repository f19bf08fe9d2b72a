"""A forget on an older Chroma 1.x (its own environment, ``.venv-chroma-old``) only deletes.

The erasure writes Chroma's files only on the versions it was tested with
(``chroma_erase.TESTED_CHROMA``); ``chromadb>=1.0`` still installs older ones. Here a real
older Chroma runs ``tests/support/old_chroma_forget.py``: a persona of 1,010 memories
(Chinese, the secret first; enough for Chroma to write its vector index files) in an
embedded folder, copied twice; in one copy a :class:`~langchain_genmem.MemoryStream`
forgets the secret, in the other (the control) ``chromadb`` alone makes every write the
stream asked Chroma for, in the same order (the state record's updates and
``collection.delete`` of the record).

How it shows that no file was written beyond Chroma's own writes, in two independent ways:

- **Who wrote.** The erasure writes Chroma's files only from its erasing process, which
  was never started (every process the forget started is noted: none); and Python's audit
  events in the forgetting process show that its Python code wrote, renamed or removed only
  the package's own files (``genmem-*``: locks, and the snapshot the forget deletes and the
  close writes again), never ``genmem-erase/``, and opened no SQLite database.
- **What is there.** Chroma's files are compared with the control's. ``header.bin``,
  ``link_lists.bin``, ``index_metadata.pickle`` and the elements of ``data_level0.bin``
  (up to ``header.bin``'s count) must be the control's byte for byte. The room Chroma's
  index writes from memory it never set (past the elements, and ``length.bin``, which an
  l2 space never sets) holds whatever that memory held, zeros or not, each time Chroma
  writes the index: where Chroma did not write the index again (its ``header.bin``, which
  the erasure never writes, keeps its time), that room must be as the folder held it
  before the forget; where it did, only the first way speaks for it. In
  ``chroma.sqlite3`` every page must be the control's but the pages of the log rows of
  those writes, whose JSON Chroma writes in no fixed key order and whose time stamps
  differ by when they ran: those must be pages of the log table with as many zero bytes
  as the control's (zeroing free space adds zeros; a reordered key or another second does
  not), and the log must hold the same rows (JSON read as data, time stamps aside). So
  every free page, every other log page, the pages of the records' metadata, of the
  full-text index and page 1 (the change counter, ``user_version``) are the control's.
  The control keeps copies of the secret (its text in the database's free space, its
  vector in ``data_level0.bin``, and the vector index of the records is not written again
  by Chroma here), so an erasure would show.

Were the version declared tested, the erasure's own layout checks would still refuse this
folder before changing anything: a third copy is asked to prepare the same delete.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from langchain_genmem.backends.chroma_erase import HEADER, SLOT_MAPS, TESTED_CHROMA
from tests.support.old_chroma import ROOT, old_chroma_python

pytestmark = pytest.mark.slow

SCRIPT = ROOT / "tests" / "support" / "old_chroma_forget.py"
DATABASE = "chroma.sqlite3"
LOG = "embeddings_queue"
OURS = "genmem-"  # the package's own files in the folder


def run_script(folder: Path) -> dict[str, Any]:
    """Run the script in the older Chroma's environment; what it saw."""
    out = folder / "seen.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONDONTWRITEBYTECODE": "1",
           "ANONYMIZED_TELEMETRY": "False"}
    done = subprocess.run([str(old_chroma_python()), str(SCRIPT), str(folder), str(out)],
                          cwd=folder, env=env, capture_output=True, text=True, timeout=180,
                          check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(out.read_text("utf-8"))


def chroma_files(folder: Path) -> dict[str, bytes]:
    """Chroma's files of a folder by relative path: all but the package's own."""
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and not p.relative_to(folder).parts[0].startswith(OURS)}


def held_and_room(files: dict[str, bytes], name: str) -> tuple[bytes, bytes]:
    """An index file's bytes: what its elements hold, and the room Chroma may write unset."""
    data = files[name]
    if name.endswith("/length.bin"):
        return b"", data
    if name.endswith("/data_level0.bin"):
        fields = HEADER.unpack(files[name.rsplit("/", 1)[0] + "/header.bin"])
        end = fields[3] * fields[4]  # cur_element_count * size_data_per_element
        return data[:end], data[end:]
    return data, b""


def page(data: bytes, number: int) -> bytes:
    """Page ``number`` (from 1) of a database file."""
    size = int.from_bytes(data[16:18], "big") or 65_536
    return data[(number - 1) * size : number * size]


def differing_pages(a: bytes, b: bytes) -> list[int]:
    """The numbers of the database pages that differ."""
    assert len(a) == len(b)
    size = len(page(a, 1))
    return [n for n in range(1, len(a) // size + 1) if page(a, n) != page(b, n)]


def read_only(path: Path) -> closing[sqlite3.Connection]:
    return closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True))


def pages_of(path: Path, table: str) -> set[int]:
    """The pages of a table (its b-tree and overflow pages)."""
    with read_only(path) as db:
        return {int(r[0]) for r in db.execute("SELECT pageno FROM dbstat WHERE name = ?",
                                              (table,))}


def log_rows(path: Path) -> list[tuple[Any, ...]]:
    """Chroma's log as data: JSON metadata parsed, time stamps left out."""
    with read_only(path) as db:
        rows = db.execute("SELECT seq_id, operation, topic, id, vector, encoding, metadata "
                          f"FROM {LOG} ORDER BY seq_id").fetchall()  # noqa: S608
    return [(*row[:6], None if row[6] is None else json.loads(row[6])) for row in rows]


def written_again(before: Path, ours: Path) -> set[str]:
    """The index folders whose ``header.bin`` Chroma wrote since ``before`` was copied."""
    return {h.parent.name for h in ours.glob("*/header.bin")
            if h.stat().st_mtime_ns != (before / h.parent.name / h.name).stat().st_mtime_ns}


def check_index_files(before: dict[str, bytes], ours: dict[str, bytes],
                      control: dict[str, bytes], rewritten: set[str]) -> None:
    """Each index file as the control's; its unset room as before unless Chroma wrote it."""
    for name in ours:
        if name == DATABASE:
            continue
        held, room = held_and_room(ours, name)
        assert held == held_and_room(control, name)[0], f"{name} differs from the control"
        assert len(room) == len(held_and_room(control, name)[1]), name
        if name.split("/")[0] not in rewritten:
            assert room == held_and_room(before, name)[1], f"{name}: its room was written"


def check_database(ours: Path, control: Path) -> None:
    """The database as the control's but the log's pages of the forget's own writes."""
    a, b = (ours / DATABASE).read_bytes(), (control / DATABASE).read_bytes()
    log_pages = pages_of(control / DATABASE, LOG)
    for number in differing_pages(a, b):
        assert number in log_pages, f"page {number} of the database is not the control's"
        assert page(a, number).count(0) == page(b, number).count(0), number
    assert log_rows(ours / DATABASE) == log_rows(control / DATABASE)


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """The script's folder and what it saw (it runs once for the module)."""
    folder = tmp_path_factory.mktemp("old-chroma")
    return folder, run_script(folder)


def test_a_forget_on_an_older_chroma_only_deletes_and_says_so(
        ran: tuple[Path, dict[str, Any]]) -> None:
    tmp_path, seen = ran
    version = seen["chroma"]
    assert ".".join(version.split(".")[:2]) not in TESTED_CHROMA, version

    report = seen["report"]  # deleted as Chroma deletes, not erased, and why
    assert report["forgotten"] == ["node_1"] and report["erased"] is False
    assert report["erasure"].startswith(f"Chroma {version} is not a version the erasure was "
                                        "tested with")
    secret = seen["secret"]
    assert seen["before"][0] == secret  # retrievable before; gone after, and once reopened
    assert secret not in seen["after"] and secret not in seen["reopened_top"]
    assert secret not in seen["reopened"] and len(seen["reopened"]) == 1_009
    assert seen["writes"] == ["genmem-state.upsert", "genmem.delete", "genmem-state.update"]

    forgot, control = tmp_path / "forgot", tmp_path / "control"
    assert seen["started"] == []  # no erasing process
    assert seen["changed"]  # the audit saw the package's own files being written
    for event, *names in seen["changed"]:
        assert event != "sqlite3.connect", names
        assert all(n.startswith(OURS) and not n.startswith(SLOT_MAPS) for n in names), names
    assert not (forgot / SLOT_MAPS).exists()

    before, ours = chroma_files(tmp_path / "base"), chroma_files(forgot)
    theirs = chroma_files(control)
    assert sorted(ours) == sorted(theirs) == sorted(before)
    assert any(name.endswith("/index_metadata.pickle") for name in ours)  # elements written
    rewritten = written_again(tmp_path / "base", forgot)
    assert not any(f"{index}/index_metadata.pickle" in ours for index in rewritten)
    check_index_files(before, ours, theirs, rewritten)
    check_database(forgot, control)
    vector = bytes.fromhex(seen["vector"])  # what Chroma's delete leaves stays, as there
    assert any(vector in held_and_room(ours, n)[0] for n in ours if n.endswith("level0.bin"))
    assert secret.encode() in ours[DATABASE] and secret.encode() in theirs[DATABASE]


def test_the_erasures_own_checks_refuse_the_older_layout_before_any_change(
        ran: tuple[Path, dict[str, Any]]) -> None:
    tmp_path, seen = ran
    assert "schema_str" in seen["checked"]["layout_problem"]
    every = {p.relative_to(tmp_path / "checked") for p in (tmp_path / "checked").rglob("*")}
    assert every == {p.relative_to(tmp_path / "base") for p in (tmp_path / "base").rglob("*")}
    assert chroma_files(tmp_path / "checked") == chroma_files(tmp_path / "base")
