"""Forgetting in an embedded Chroma folder leaves no byte of what was forgotten in its files.

Each test looks for the forgotten descriptions (Chinese, UTF-8, as stored) and the float32
bytes of their vectors in every file under the folder: Chroma's database (its write-ahead
log, its free pages) and its vector index files, which Chroma writes every 1,000 operations
(so a persona of 1,500 memories has them written before the forget, and 1,100 more writes
after it make Chroma write them again from memory).
"""

from __future__ import annotations

import logging
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
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


def free_pages(folder: Path) -> list[bytes]:
    """The bytes of every freelist page of the folder's database (trunks past their list)."""
    data = (folder / "chroma.sqlite3").read_bytes()
    size = int.from_bytes(data[16:18], "big")
    out, trunk = [], int.from_bytes(data[32:36], "big")
    while trunk:
        page = data[(trunk - 1) * size : trunk * size]
        count = int.from_bytes(page[4:8], "big")
        out.append(page[8 + 4 * count :])
        for i in range(count):
            leaf = int.from_bytes(page[8 + 4 * i : 12 + 4 * i], "big")
            out.append(data[(leaf - 1) * size : leaf * size])
        trunk = int.from_bytes(page[:4], "big")
    assert len(out) == int.from_bytes(data[36:40], "big")
    return out


def eraser_io(backend: ChromaBackend) -> tuple[int, int]:
    """Bytes the backend's erasing process has read and written so far (Linux)."""
    pid = backend._eraser.pid if backend._eraser is not None else None  # noqa: SLF001
    assert pid is not None
    fields = dict(line.split(": ") for line in Path(f"/proc/{pid}/io").read_text().splitlines())
    return int(fields["rchar"]), int(fields["wchar"])


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


def test_copies_that_page_splits_left_in_the_document_index_go_too(tmp_path: Path) -> None:
    # writes land all over Chroma's index of texts (packed fields sort by node id as text),
    # and each page split leaves copies of the entries it moved in the page they left
    for attempt in range(2):
        folder = tmp_path / f"store-{attempt}"
        backend = open_backend(folder)
        writes = [random_vectors(500, DIM, seed=10 * attempt + i) for i in range(4)]
        for vectors in writes:
            commit_nodes(backend, P, vectors)
        gone = sorted(random.Random(attempt).sample(range(1, 2_001), 40))
        forget(backend, P, gone)
        assert holding(folder, needles(np.vstack(writes), gone)) == [], attempt
        backend.close()


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
    db.close()
    assert free_pages(folder) and not any(any(page) for page in free_pages(folder))
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


def test_a_forget_reads_and_writes_what_it_forgets_not_the_whole_database(
    tmp_path: Path,
) -> None:
    if not Path("/proc/self/io").is_file():
        pytest.skip("counts a process's reads and writes in /proc")
    folder = tmp_path / "store"
    backend = open_backend(folder)
    vectors = random_vectors(3_000, 64)
    for first in range(0, 3_000, 300):  # writes of 300: Chroma's log frees 300 rows at most
        commit_nodes(backend, P, vectors[first : first + 300])
    forget(backend, P, [5])  # starts the erasing process, which reads the index once
    database = folder / "chroma.sqlite3"
    before, inode = database.stat().st_size, database.stat().st_ino
    read, written = eraser_io(backend)
    forget(backend, P, [1_500, 2_999])
    read, written = (now - then for now, then in zip(eraser_io(backend), (read, written),
                                                     strict=True))
    # what it reads: Chroma's log (at most about 1,000 operations), the free pages, the
    # pages around the records and the state, the slots; a VACUUM reads and writes it all
    index_file = max(f.stat().st_size for f in folder.glob("*/data_level0.bin"))
    assert read < (before + index_file) / 2 and written < before / 5
    assert database.stat().st_size == before and database.stat().st_ino == inode  # no VACUUM
    assert free_pages(folder) and not any(any(page) for page in free_pages(folder))
    assert holding(folder, needles(vectors, [5, 1_500, 2_999])) == []
    backend.close()


def test_vectors_larger_than_a_page_leave_nothing_in_overflow_pages(tmp_path: Path) -> None:
    folder = tmp_path / "store"
    backend = open_backend(folder)
    vectors = random_vectors(40, 1_536)  # 6 KB a vector: each log row spills over pages
    commit_nodes(backend, P, vectors)
    forget(backend, P, [2, 39])
    assert holding(folder, needles(vectors, [2, 39])) == []
    assert holding(folder, needles(vectors, [1, 40])) != []
    backend.close()


def test_churn_then_a_second_forget_leaves_nothing_of_either(tmp_path: Path) -> None:
    folder = tmp_path / "store"
    backend = open_backend(folder)
    vectors = random_vectors(1_500, DIM)
    commit_nodes(backend, P, vectors)
    forget(backend, P, [10, 700])
    more = random_vectors(SYNC + 100, DIM, seed=3)  # Chroma purges its log, writes its index
    commit_nodes(backend, P, more)
    forget(backend, P, [20, 1_400, 1_550])
    assert holding(folder, needles(vectors, [10, 700, 20, 1_400])) == []
    assert holding(folder, {"text 1550": text_of(1_550).encode(),
                            "vector 1550": more[49].tobytes()}) == []
    assert holding(folder, needles(vectors, [1, 1_500])) != []
    backend.close()


def test_a_forget_after_a_reopen_erases_with_a_new_process(tmp_path: Path) -> None:
    folder = tmp_path / "store"
    backend = open_backend(folder)
    vectors = random_vectors(1_200, DIM)
    commit_nodes(backend, P, vectors)
    forget(backend, P, [1])
    backend.close()
    reopened = open_backend(folder)
    forget(reopened, P, [2, 1_100])
    assert holding(folder, needles(vectors, [1, 2, 1_100])) == []
    assert [s.node.node_count for s in reopened.read_nodes(P, 1, 4)] == [3, 4]
    reopened.close()


def test_two_personas_in_one_folder_keep_each_others_memories(tmp_path: Path) -> None:
    folder = tmp_path / "store"
    backend = open_backend(folder)
    mine, theirs = random_vectors(1_200, DIM), random_vectors(1_200, DIM, seed=4)
    commit_nodes(backend, P, mine)
    commit_nodes(backend, "Klaus", theirs, text=lambda n: f"Klaus remembers thing #{n}#")
    forget(backend, P, [5, 1_150])
    forget(backend, "Klaus", [6])
    assert holding(folder, needles(mine, [5, 1_150])) == []
    assert holding(folder, {"klaus 6": b"thing #6#",
                            "klaus vector 6": theirs[5].tobytes()}) == []
    assert holding(folder, {"klaus 5": b"thing #5#"}) != []
    read = reopened_numbers(backend, "Klaus", 8)
    assert read == [1, 2, 3, 4, 5, 7, 8]
    backend.close()


def reopened_numbers(backend: ChromaBackend, persona: str, last: int) -> list[int]:
    return [s.node.node_count for s in backend.read_nodes(persona, 1, last)]


def test_a_killed_erasing_process_is_replaced_at_the_next_forget(tmp_path: Path) -> None:
    folder = tmp_path / "store"
    backend = open_backend(folder)
    vectors = random_vectors(30, DIM)
    commit_nodes(backend, P, vectors)
    forget(backend, P, [1])
    assert backend._eraser is not None  # noqa: SLF001
    first = backend._eraser.pid  # noqa: SLF001
    assert first is not None
    os.kill(first, signal.SIGKILL)
    forget(backend, P, [2])
    assert backend._eraser.pid not in (None, first)  # noqa: SLF001
    assert holding(folder, needles(vectors, [1, 2])) == []
    backend.close()
    assert backend._eraser.pid is None  # noqa: SLF001 - it ends with the backend


def test_the_erasing_process_ends_with_the_process_that_started_it(tmp_path: Path) -> None:
    folder = tmp_path / "store"
    code = (
        "import os, sys\n"
        "from langchain_genmem.backends.chroma import ChromaBackend, persistent_client\n"
        "from tests.support.forgetting import commit_nodes, forget, random_vectors\n"
        "b = ChromaBackend(persistent_client(sys.argv[1]))\n"
        "commit_nodes(b, 'p', random_vectors(5, 8))\n"
        "forget(b, 'p', [1])\n"
        "print(b._eraser.pid, flush=True)\n"
        "os._exit(0)\n"
    )
    done = subprocess.run([sys.executable, "-c", code, str(folder)], capture_output=True,
                          text=True, timeout=120, check=True)
    pid = int(done.stdout.split()[-1])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and Path(f"/proc/{pid}").exists():
        status = Path(f"/proc/{pid}/stat").read_text().split()[2] \
            if Path(f"/proc/{pid}/stat").exists() else "Z"
        if status == "Z":
            break
        time.sleep(0.05)
    else:
        assert not Path(f"/proc/{pid}").exists(), "the erasing process outlived its parent"


def test_drop_erases_the_persona_and_its_states_from_the_files(tmp_path: Path) -> None:
    folder = tmp_path / "store"
    stream = MemoryStream(P, path=str(folder), embeddings=DeterministicFakeEmbedding(size=16))
    seeds = memories(stream)
    stream.close()
    backend = open_backend(folder)
    commit_nodes(backend, "Klaus", random_vectors(3, 16), text=lambda n: f"Klaus thing {n}")
    backend.drop(P)
    gone = {name: seeds.text[name].encode() for name in ("library", "cafe")}
    gone.update({f"keyword {name}": seeds.keyword[name].encode() for name in ("library",)})
    assert holding(folder, gone) == []
    assert holding(folder, {"klaus": b"Klaus thing 2"}) != []
    backend.close()


def test_compact_rebuilds_the_database_and_says_what_it_did(tmp_path: Path) -> None:
    folder = tmp_path / "store"
    backend = open_backend(folder)
    vectors = random_vectors(1_500, DIM)
    commit_nodes(backend, P, vectors)
    forget(backend, P, list(range(1, 700)))
    report = backend.compact()
    assert report is not None
    assert report["bytes_after"] < report["bytes_before"]
    assert report["free_pages_after"] == 0 < report["free_pages_before"]
    assert (folder / "chroma.sqlite3").stat().st_size == report["bytes_after"]
    assert [s.node.node_count for s in backend.read_nodes(P, 699, 702)] == [700, 701, 702]
    backend.close()
    empty = open_backend(tmp_path / "other")
    assert empty.compact() is not None
    empty.close()


def test_genmem_compact_says_what_it_did(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from langchain_genmem.cli import app

    folder = tmp_path / "store"
    backend = open_backend(folder)
    commit_nodes(backend, P, random_vectors(1_200, DIM))
    forget(backend, P, list(range(1, 600)))
    backend.close()
    runner = CliRunner()
    done = runner.invoke(app, ["--path", str(folder), "compact"])
    assert done.exit_code == 0, done.output
    assert done.output.startswith("Compacted ") and " MB -> " in done.output
    done = runner.invoke(app, ["--path", str(folder), "compact", "--json"])
    assert done.exit_code == 0 and '"compacted": true' in done.output


def test_a_re_keyed_turn_keeps_no_copy_of_the_forgotten_turn_it_quoted(tmp_path: Path) -> None:
    folder = tmp_path / "store"
    fake = DeterministicFakeEmbedding(size=16)
    stream = MemoryStream(P, path=str(folder), embeddings=fake)
    seeds = memories(stream)
    quoted = seeds.text["turn1"]
    assert quoted in stream.get(seeds["turn2"]).embedding_key  # turn 2 was embedded with it
    report = stream.forget([seeds["turn1"]])
    assert seeds["turn2"] in report.rekeyed and seeds["turn2"] not in report.forgotten
    gone = {"turn 1": quoted.encode(), "vector": np.float32(fake.embed_query(quoted)).tobytes()}
    # (its keyword stays: the kept turn's conversation is named after it)
    assert holding(folder, gone) == []
    assert holding(folder, {"turn 2": seeds.text["turn2"].encode()}) != []
    stream.close()


def test_a_stream_compacts_its_columns_and_its_folder(tmp_path: Path) -> None:
    folder = tmp_path / "store"
    fake = DeterministicFakeEmbedding(size=16)
    stream = MemoryStream(P, path=str(folder), embeddings=fake)
    seeds = memories(stream)
    stream.forget([seeds["cafe"]])
    assert stream.columns.dead == 1
    done = stream.compact()
    assert done["rows_dropped"] == 1 and stream.columns.dead == 0
    assert done["store"] is not None and done["store"]["free_pages_after"] == 0
    assert holding(folder, {"cafe": seeds.text["cafe"].encode()}) == []
    assert seeds["library"] in stream and seeds["cafe"] not in stream
    stream.close()
    memory = MemoryStream(P, embeddings=fake)  # in memory: no store work to do
    memories(memory)
    assert memory.compact() == {"rows_dropped": 0, "store": None}


def test_the_norms_file_an_l2_index_never_sets_is_zeroed_whole(tmp_path: Path) -> None:
    # Chroma's index allocates a float per element for norms and, outside a cosine space,
    # never sets them: length.bin is whatever the process's memory held (seen: descriptions)
    folder = tmp_path / "store"
    backend = open_backend(folder)
    commit_nodes(backend, P, random_vectors(SYNC + 200, DIM))  # the index is written
    lengths = [p / "length.bin" for p in folder.iterdir() if (p / "length.bin").is_file()]
    assert lengths
    forget(backend, P, [5])
    for path in lengths:
        assert not any(path.read_bytes()), path.parent.name
    assert backend.read_nodes(P, 6, 6)[0].node.description == text_of(6)
    backend.close()
    reopened = open_backend(folder)  # Chroma reads the index back as before
    hit = reopened.nodes.query(query_embeddings=[random_vectors(SYNC + 200, DIM)[9]],
                               n_results=1)
    assert hit["ids"] == [[f"{P}::node_10"]]
    reopened.close()
