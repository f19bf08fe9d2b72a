"""Forgetting in an embedded Chroma folder leaves no byte of what was forgotten in its files.

Each test looks for the forgotten descriptions (Chinese, UTF-8, as stored) and the float32
bytes of their vectors in every file under the folder: Chroma's database (its write-ahead
log, its free pages) and its vector index files, which Chroma writes every 1,000 operations
(so a persona of 1,500 memories has them written before the forget, and 1,100 more writes
after it make Chroma write them again from memory).
"""

from __future__ import annotations

import logging
import sqlite3
import sys
from pathlib import Path

import numpy as np
import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from langchain_genmem import MemoryStream
from langchain_genmem.backends import chroma_erase
from langchain_genmem.backends.chroma import ChromaBackend, persistent_client
from tests.support.erasure import holding, needles
from tests.support.forgetting import commit_nodes, forget, random_vectors, text_of
from tests.support.forgotten import memories

P = "玛丽亚"
DIM = 8
SYNC = 1_000  # Chroma writes its vector index files every this many operations


def unused_room(folder: Path) -> dict[str, int]:
    """``{file: non-zero bytes}`` past the elements of each index file under ``folder``."""
    found = {}
    for header in folder.glob("*/header.bin"):
        fields = chroma_erase.HEADER.unpack(header.read_bytes())
        count, size = fields[3], fields[4]
        for name, end in (("data_level0.bin", count * size), ("length.bin", count * 4)):
            tail = (header.parent / name).read_bytes()[end:]
            if any(tail):
                found[f"{header.parent.name}/{name}"] = sum(b != 0 for b in tail)
    return found


def open_backend(folder: Path) -> ChromaBackend:
    return ChromaBackend(persistent_client(folder))


@pytest.mark.parametrize("size", [12, 1_500])
def test_a_forget_leaves_no_byte_of_the_forgotten_memories_in_the_folder(
    size: int, tmp_path: Path,
) -> None:
    folder = tmp_path / "store"
    backend = open_backend(folder)
    vectors = random_vectors(size, DIM)
    commit_nodes(backend, P, vectors)
    gone = [3, size - 1]  # one in the index files once Chroma wrote them, one newer
    assert {name for _, name in holding(folder, needles(vectors, gone))} == set(
        needles(vectors, gone))
    if size > SYNC:
        assert ("data_level0.bin", "vector 3") in holding(folder, needles(vectors, gone))
    forget(backend, P, gone)
    assert holding(folder, needles(vectors, gone)) == []
    kept = [n for n in range(1, size + 1) if n not in gone]
    if size > SYNC:  # Chroma writes its index from memory again: the slots stay blank
        commit_nodes(backend, P, random_vectors(SYNC + 100, DIM, seed=1))
        assert holding(folder, needles(vectors, gone)) == []
    assert holding(folder, needles(vectors, [1, 4, size])) != []  # the kept ones are there
    backend.close()
    reopened = open_backend(folder)
    read = {s.node.node_count: s for s in reopened.read_nodes(P, 1, size)}
    assert sorted(read) == kept
    for n in (1, 4, size):
        assert read[n].node.description == text_of(n)
        np.testing.assert_array_equal(np.asarray(read[n].vector, np.float32), vectors[n - 1])
    hit = reopened.nodes.query(query_embeddings=[vectors[3]], n_results=1)  # node 4
    assert hit["ids"] == [[f"{P}::node_4"]]
    state = reopened.read_state(P)
    added = SYNC + 100 if size > SYNC else 0
    assert state is not None and state.live_count == reopened.nodes.count() == size - 2 + added


def test_the_database_is_left_without_the_forgotten_bytes_even_in_free_space(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "store"
    backend = open_backend(folder)
    vectors = random_vectors(40, DIM)
    commit_nodes(backend, P, vectors)
    forget(backend, P, [7])
    db = sqlite3.connect(folder / "chroma.sqlite3")
    rows = db.execute("SELECT operation, vector, metadata FROM embeddings_queue "
                      "WHERE id = ?", (f"{P}::node_7",)).fetchall()
    assert rows, "the log keeps a row per operation until Chroma writes its index"
    assert all(meta in (None, "{}") for _, _, meta in rows)
    assert {bytes(v) for _, v, _ in rows if v is not None} == {
        chroma_erase.neutral(DIM).tobytes()}
    assert db.execute("PRAGMA freelist_count").fetchone()[0] == 0
    assert holding(folder, needles(vectors, [7])) == []


@pytest.mark.parametrize("where", ["log", "index"])
def test_a_folder_laid_out_otherwise_is_only_deleted_from_with_one_warning(
    where: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:
    if where == "log":  # another Chroma version: a column of its log not as expected
        other = "e.QUEUE_COLUMNS = e.QUEUE_COLUMNS | {'payload'}"
    else:  # its index files of another version
        other = "e.HEADER_VERSION = 2"
    # the erasing child expects that layout
    monkeypatch.setattr(chroma_erase, "ERASER", (sys.executable, "-c", (
        f"from langchain_genmem.backends import chroma_erase as e; {other}; e.main()")))
    monkeypatch.setattr(chroma_erase, "_WARNED", set())
    folder = tmp_path / "store"
    backend = open_backend(folder)
    vectors = random_vectors(SYNC + 20 if where == "index" else 10, DIM)
    commit_nodes(backend, P, vectors)
    before = (folder / "chroma.sqlite3").read_bytes()
    with caplog.at_level(logging.WARNING, logger=chroma_erase.__name__):
        forget(backend, P, [2])
        forget(backend, P, [3])
    warnings = [r for r in caplog.records if r.name == chroma_erase.__name__]
    assert len(warnings) == 1 and "not laid out as Chroma 1.5.9" in warnings[0].getMessage()
    assert text_of(2).encode() in before  # nothing of the folder was rewritten
    assert holding(folder, {"text 2": text_of(2).encode()}) != []
    backend.close()
    reopened = open_backend(folder)
    numbers = [s.node.node_count for s in reopened.read_nodes(P, 1, 6)]
    assert numbers == [1, 4, 5, 6]


def test_a_stream_forget_erases_what_went_from_every_file_even_after_close(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "store"
    fake = DeterministicFakeEmbedding(size=16)
    stream = MemoryStream(P, path=str(folder), embeddings=fake)
    seeds = memories(stream)
    report = stream.forget([seeds["library"], seeds["breakfast"]])  # and the thoughts citing
    assert set(report.forgotten) == {seeds[n] for n in ("library", "breakfast", "insight",
                                                        "deeper")}
    texts = [seeds.text[n] for n in ("library", "breakfast", "insight", "deeper")]
    gone = {text: text.encode() for text in texts}
    gone.update({f"vector of {t}": np.float32(fake.embed_query(t)).tobytes() for t in texts})
    for name in ("library", "breakfast", "insight", "deeper"):  # keywords only they had
        gone[f"keyword of {name}"] = seeds.keyword[name].encode()
    assert holding(folder, gone) == []
    assert unused_room(folder) == {}
    stream.close()  # the snapshot is written again, without them
    assert holding(folder, gone) == []
    assert holding(folder, {"kept": seeds.text["cafe"].encode()}) != []
    reopened = MemoryStream(P, path=str(folder), embeddings=fake)
    assert len(reopened) == 4 and seeds["cafe"] in reopened
    reopened.close()


def test_this_process_never_opens_chromas_database_with_a_second_sqlite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Chroma holds the file through its own SQLite; Python's opening it too in this process
    # would break the file locks both rely on (a server saw "disk I/O error"): a child erases
    def refused(*args: object, **kwargs: object) -> None:
        raise AssertionError("sqlite3.connect in the process that holds Chroma open")

    folder = tmp_path / "store"
    backend = open_backend(folder)
    vectors = random_vectors(10, DIM)
    commit_nodes(backend, P, vectors)
    monkeypatch.setattr(sqlite3, "connect", refused)
    forget(backend, P, [2])
    assert holding(folder, needles(vectors, [2])) == []
    backend.close()
