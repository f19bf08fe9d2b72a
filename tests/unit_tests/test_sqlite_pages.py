"""The raw page reader: it finds and zeroes only bytes no structure of the file uses."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from langchain_genmem.backends import sqlite_pages


def database(path: Path) -> None:
    """A table and an index with deleted rows (some overflowing a page), and free pages.

    Many builds of SQLite zero what they free by default; this database is written as
    Chroma's connections write theirs.
    """
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA secure_delete = OFF")  # as Chroma's connections free: not zeroed
    db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, k TEXT, v TEXT)")
    db.execute("CREATE INDEX t_kv ON t (k, v)")
    rows = [(i, "doc" if i % 3 else "other", f"marker-{i:05d}-" + "x" * (9000 if i % 50 == 0
                                                                        else 200))
            for i in range(1, 2_001)]
    db.executemany("INSERT INTO t VALUES (?, ?, ?)", rows)
    db.execute("DELETE FROM t WHERE id % 7 = 0 OR id > 1800")
    db.close()


def test_zeroing_free_space_removes_deleted_rows_and_keeps_the_database_whole(
    tmp_path: Path,
) -> None:
    path = tmp_path / "db.sqlite3"
    database(path)
    assert b"marker-00007-" in path.read_bytes()  # SQLite left the deleted row's bytes
    fd = os.open(path, os.O_RDWR)
    try:
        pages = sqlite_pages.Pages(fd)
        trunks, leaves = pages.freelist()
        assert trunks and leaves
        for number, count in trunks:
            pages.zero(number, [(8 + 4 * count, pages.size)])
        for number in leaves:
            pages.zero(number, [(0, pages.size)])
        db = sqlite3.connect(path)
        roots = dict(db.execute("SELECT name, rootpage FROM sqlite_master"))
        db.close()
        for root in roots.values():
            for page in pages.tree(root):
                spans = sqlite_pages.free_spans(page, pages.usable)
                pages.zero(page.number, spans, page.data)
                for at in page.cell_offsets():
                    tail = pages.overflow_tail(page, at)
                    if tail is not None:
                        pages.zero(tail[0], [(tail[1], tail[2])])
    finally:
        os.close(fd)
    data = path.read_bytes()
    assert b"marker-00007-" not in data and b"marker-01900-" not in data
    assert b"marker-00008-" in data  # live rows stay
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    assert db.execute("SELECT count(*) FROM t").fetchone() == (1543,)
    assert db.execute("SELECT v FROM t WHERE id = 100").fetchone()[0].startswith("marker-00100-")
    db.close()


def test_walks_find_the_leaf_of_a_rowid_and_the_entries_of_a_key(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite3"
    database(path)
    db = sqlite3.connect(path)
    roots = dict(db.execute("SELECT name, rootpage FROM sqlite_master"))
    db.close()
    fd = os.open(path, os.O_RDONLY)
    try:
        pages = sqlite_pages.Pages(fd)
        near = pages.around_rowids(roots["t"], [500])
        assert any(b"marker-00500-" in p.data for p in near.values() if not p.interior)
        assert len(near) < len(list(pages.tree(roots["t"])))
        found = pages.around_keys(roots["t_kv"], [(b"doc", b"marker-00500-")]) or {}
        assert any(b"marker-00500-" in p.data for p in found.values())
        assert pages.around_keys(roots["t_kv"], [(b"doc", b"")], limit=3) is None
    finally:
        os.close(fd)


def test_rewriting_user_version_to_its_value_moves_the_change_counter(tmp_path: Path) -> None:
    # the erasure's raw writes share a transaction that does this, so that every other
    # connection drops the pages it cached (SQLite checks the counter when it reads again)
    path = tmp_path / "db.sqlite3"
    database(path)
    before = path.read_bytes()[24:28]
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("BEGIN EXCLUSIVE")
    version = db.execute("PRAGMA user_version").fetchone()[0]
    db.execute(f"PRAGMA user_version = {version}")
    db.execute("COMMIT")
    db.close()
    after = path.read_bytes()[24:28]
    assert int.from_bytes(after, "big") == int.from_bytes(before, "big") + 1
