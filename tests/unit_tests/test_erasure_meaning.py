"""The erasure writes Chroma's files only where they mean what it takes them to mean.

Each test builds a real folder (Chroma 1.5; for the index files, more than 1,000
operations, so that Chroma wrote them), tampers with a file while Chroma holds what it read
of it (so only the erasure reads the change; the database from another process), and
forgets. Where the files no longer agree (a slot holding another label than the pickle
gives the record, a count in ``header.bin`` other than the pickle's, an element past that
count, a log row whose operation is none of Chroma's or a delete holding a vector, a
full-text row holding another text than the record's document) the forget only deletes,
says why, and the files keep every byte the erasure would have changed.
"""

from __future__ import annotations

import json
import logging
import pickle
import shutil
import struct
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import chromadb
import numpy as np
import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from langchain_genmem import MemoryStream
from langchain_genmem.backends import chroma_erase
from langchain_genmem.backends.base import Erasure
from langchain_genmem.backends.chroma import ChromaBackend, persistent_client
from langchain_genmem.backends.chroma_erase import HEADER, INDEX_DATA, INDEX_IDS
from tests.support.erasure import holding, needles
from tests.support.forgetting import commit_nodes, random_vectors

P = "玛丽亚"
DIM = 8
NODES = 1_020  # past Chroma's 1,000 operations: the index files hold the elements
GONE = 3


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return tmp_path / "store"


@pytest.fixture
def backend(folder: Path) -> Iterator[ChromaBackend]:
    backend = ChromaBackend(persistent_client(folder))
    yield backend
    backend.close()


@pytest.fixture
def vectors(backend: ChromaBackend) -> np.ndarray:
    vectors = random_vectors(NODES, DIM)
    commit_nodes(backend, P, vectors)
    return vectors


def forget(backend: ChromaBackend, numbers: list[int]) -> Erasure | None:
    """Forget nodes by number in one write, as a stream's write does; what it says."""
    with backend.write_lock(P):
        backend.read_head(P)
        state = backend.read_state(P)
        assert state is not None
        backend.remove_uncommitted(P, state.node_count)
        return backend.forget(P, numbers, state.forgetting(numbers))


def index_of(folder: Path) -> Path:
    """The folder of the nodes' vector index (the one whose elements were written)."""
    (found,) = [p.parent for p in folder.glob(f"*/{INDEX_IDS}")]
    return found


def index_files(index: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(index.iterdir())}


def label_of(index: Path, number: int) -> int:
    meta = pickle.loads((index / INDEX_IDS).read_bytes())  # noqa: S301 - Chroma's own file
    return int(meta["id_to_label"][f"{P}::node_{number}"])


def header_fields(index: Path) -> list[int]:
    return list(HEADER.unpack((index / "header.bin").read_bytes()))


def slot_of(index: Path, label: int) -> int:
    fields = header_fields(index)
    count, size, at = fields[3], fields[4], fields[5]
    data = (index / INDEX_DATA).read_bytes()
    labels = [struct.unpack_from("<Q", data, s * size + at)[0] for s in range(count)]
    return labels.index(label)


def put_label(index: Path, slot: int, label: int) -> None:
    fields = header_fields(index)
    with (index / INDEX_DATA).open("r+b") as f:
        f.seek(slot * fields[4] + fields[5])
        f.write(struct.pack("<Q", label))


def put_count(index: Path, count: int) -> None:
    fields = header_fields(index)
    fields[3] = count
    (index / "header.bin").write_bytes(HEADER.pack(*fields))


def assert_only_deleted(folder: Path, backend: ChromaBackend, vectors: np.ndarray,
                        reason: str) -> None:
    """Forget node GONE: deleted, not erased, with ``reason``; the index files as they were."""
    index = index_of(folder)
    before = index_files(index)
    erasure = forget(backend, [GONE])
    assert erasure is not None and erasure.erased is False
    assert erasure.reason is not None and reason in erasure.reason, erasure.reason
    assert index_files(index) == before
    assert holding(folder, needles(vectors, [GONE]))  # nothing of it was zeroed anywhere
    assert not backend.nodes.get(ids=[f"{P}::node_{GONE}"])["ids"]  # deleted as Chroma does


def test_the_untampered_folder_is_erased(folder: Path, backend: ChromaBackend,
                                         vectors: np.ndarray) -> None:
    index = index_of(folder)
    assert vectors[GONE - 1].tobytes() in (index / INDEX_DATA).read_bytes()
    assert forget(backend, [GONE]) == Erasure(erased=True)
    assert holding(folder, needles(vectors, [GONE])) == []


@pytest.mark.parametrize(("other", "said"), [
    ("another record's", "two element slots"), ("a label never given", "none of the 1020"),
])
def test_a_slot_holding_another_label_than_the_records_is_not_written(
    other: str, said: str, folder: Path, backend: ChromaBackend, vectors: np.ndarray,
) -> None:
    index = index_of(folder)
    label = label_of(index, GONE)
    put_label(index, slot_of(index, label),
              label_of(index, GONE + 1) if other.startswith("another") else 10**9)
    assert_only_deleted(folder, backend, vectors, said)


@pytest.mark.parametrize("step", [-1, 1])
def test_a_header_counting_other_elements_than_the_pickle_is_refused(
    step: int, folder: Path, backend: ChromaBackend, vectors: np.ndarray,
) -> None:
    index = index_of(folder)
    put_count(index, header_fields(index)[3] + step)
    assert_only_deleted(folder, backend, vectors, "header.bin counts")


def test_an_element_past_the_count_is_no_room_to_zero(
    folder: Path, backend: ChromaBackend, vectors: np.ndarray,
) -> None:
    # header and pickle agree on one element fewer: the last element lies past the count,
    # where the erasure zeroes the room Chroma never set
    index = index_of(folder)
    count = header_fields(index)[3]
    meta = pickle.loads((index / INDEX_IDS).read_bytes())  # noqa: S301 - Chroma's own file
    meta["total_elements_added"] = count - 1
    (index / INDEX_IDS).write_bytes(pickle.dumps(meta))
    put_count(index, count - 1)
    assert_only_deleted(folder, backend, vectors, "a record's label is past the 1019 elements")


def test_a_pickle_whose_maps_disagree_is_refused(
    folder: Path, backend: ChromaBackend, vectors: np.ndarray,
) -> None:
    index = index_of(folder)
    meta = pickle.loads((index / INDEX_IDS).read_bytes())  # noqa: S301 - Chroma's own file
    first, second = f"{P}::node_{GONE}", f"{P}::node_{GONE + 1}"
    ids = meta["id_to_label"]
    ids[first], ids[second] = ids[second], ids[first]  # the map back still says otherwise
    (index / INDEX_IDS).write_bytes(pickle.dumps(meta))
    assert_only_deleted(folder, backend, vectors, "its map back disagree")


def test_once_a_check_failed_nothing_more_is_written_to_the_folder(
    folder: Path, backend: ChromaBackend, vectors: np.ndarray,
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:
    index = index_of(folder)
    header = (index / "header.bin").read_bytes()
    put_count(index, header_fields(index)[3] + 1)
    with caplog.at_level(logging.WARNING, logger=chroma_erase.__name__):
        first = forget(backend, [GONE])
        (index / "header.bin").write_bytes(header)  # the files agree again
        asked: list[object] = []
        call = chroma_erase.Eraser.call
        monkeypatch.setattr(chroma_erase.Eraser, "call",
                            lambda self, request, *a, **k: asked.append(request) or call(
                                self, request, *a, **k))
        before = index_files(index)
        second = forget(backend, [GONE + 1])
        assert backend.compact() is None
    assert first is not None and first.erased is False and "header.bin counts" in first.reason
    assert second == first and asked == []
    assert index_files(index) == before
    assert holding(folder, needles(vectors, [GONE, GONE + 1]))
    assert len([r for r in caplog.records if r.name == chroma_erase.__name__]) == 1


def test_compact_leaves_a_folder_whose_index_files_disagree(
    folder: Path, backend: ChromaBackend, vectors: np.ndarray,
) -> None:
    forget(backend, [GONE])
    index = index_of(folder)
    put_count(index, header_fields(index)[3] - 1)
    before = {p: p.read_bytes() for p in sorted(folder.rglob("*"))
              if p.is_file() and not p.relative_to(folder).parts[0].startswith("genmem-")}
    assert backend.compact() is None
    assert {p: p.read_bytes() for p in before} == before


def test_a_slot_that_changed_after_its_check_is_not_written(
    folder: Path, backend: ChromaBackend, vectors: np.ndarray,
) -> None:
    index = index_of(folder)
    caches = chroma_erase.Caches()
    found = chroma_erase._forgotten_slots(  # noqa: SLF001
        folder, index, [f"{P}::node_{GONE}", f"{P}::node_{GONE + 1}"], DIM * 4, caches)
    assert found is not None and len(found.slots) == 2
    put_label(index, found.slots[1], 10**9)
    before = (index / INDEX_DATA).read_bytes()
    with pytest.raises(chroma_erase._LayoutError, match="changed before"):  # noqa: SLF001
        chroma_erase._overwrite_slots(index, found, chroma_erase.neutral(DIM).tobytes())  # noqa: SLF001
    assert (index / INDEX_DATA).read_bytes() == before  # not even the first slot


def sql(folder: Path, query: str, *params: object) -> list[list[object]]:
    """Run one statement on the folder's database from another process; the rows, as JSON.

    This process holds Chroma's database open through Chroma's SQLite: a second SQLite
    library here would break the file locks both rely on.
    """
    code = ("import json, sqlite3, sys; db = sqlite3.connect(sys.argv[1]); "
            "rows = db.execute(sys.argv[2], json.loads(sys.argv[3])).fetchall(); db.commit(); "
            "print(json.dumps([[v.hex() if isinstance(v, bytes) else v for v in r] "
            "for r in rows], ensure_ascii=False))")
    done = subprocess.run([sys.executable, "-c", code, str(folder / "chroma.sqlite3"), query,
                           json.dumps(params)], capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


LOG_ROWS = ("SELECT seq_id, operation, vector, metadata FROM embeddings_queue WHERE id = ? "
            "ORDER BY seq_id")


def test_log_rows_not_meaning_what_they_are_taken_for_are_not_rewritten(
    folder: Path, backend: ChromaBackend,
) -> None:
    # the record's rows coded as deletes (Chroma's code 3) yet holding its vector and fields
    # (an operation none of Chroma's is refused too, but Chroma itself fails on that row)
    vectors = random_vectors(10, DIM)
    commit_nodes(backend, P, vectors)
    record = f"{P}::node_{GONE}"
    sql(folder, "UPDATE embeddings_queue SET operation = 3 WHERE id = ?", record)
    before = sql(folder, LOG_ROWS, record)
    assert before and all(row[2] and row[3] for row in before)
    erasure = forget(backend, [GONE])
    assert erasure is not None and erasure.erased is False
    assert "taken for deletes hold a vector" in str(erasure.reason)
    assert sql(folder, LOG_ROWS, record)[: len(before)] == before
    assert holding(folder, needles(vectors, [GONE]))


def test_a_full_text_row_holding_another_text_is_kept(tmp_path: Path) -> None:
    # a store of format-1 records: each description is the record's document, which Chroma
    # also keeps in its full-text index under the record's row id
    folder = tmp_path / "store"
    legacy = Path(__file__).resolve().parents[2] / "data" / "chroma_format_1" / "store"
    shutil.copytree(legacy, folder)
    persona = "玛丽亚 Lopez"
    sql(folder, "UPDATE embedding_metadata SET string_value = 'another text' "
        "WHERE key = 'chroma:document' AND id = "
        "(SELECT id FROM embeddings WHERE embedding_id = ?)", f"{persona}::node_3")
    stream = MemoryStream(persona, path=str(folder),
                          embeddings=DeterministicFakeEmbedding(size=8),
                          clock=lambda: datetime(2023, 2, 14))
    try:
        text = sql(folder, "SELECT c0 FROM embedding_fulltext_search_content WHERE id = "
                   "(SELECT id FROM embeddings WHERE embedding_id = ?)", f"{persona}::node_3")
        report = stream.forget(["node_3"])
        assert report.erased is False and "full-text index hold another text" in report.erasure
        assert holding(folder, {"text": text[0][0].encode()})  # nothing was zeroed
    finally:
        stream.close()
        chromadb.api.client.SharedSystemClient.clear_system_cache()
