"""A forget in a folder of an older Chroma, and its control: run in that Chroma's environment.

``python old_chroma_forget.py ROOT OUT`` builds ``ROOT/base`` (a persona of ``MEMORIES``
memories through the package's public API, enough for Chroma to write its vector index
files), copies it to ``ROOT/forgot`` and ``ROOT/control``, forgets the first memory in
``forgot`` through a :class:`~langchain_genmem.MemoryStream`, then makes in ``control``,
through ``chromadb`` alone, every write the stream asked Chroma for (recorded as it made
them: the state record's updates and the records' delete), and writes what it saw to
``OUT`` (JSON) for ``tests/integration_tests/test_old_chroma.py`` to check. Last, in a
third copy, ``ROOT/checked``, the erasure's own checks are asked to prepare that delete,
as if the version were a tested one.

It imports only the package (the bare install), ``chromadb`` and ``langchain_core``, which
is what that environment holds.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import chromadb
from chromadb.api.models.Collection import Collection
from langchain_core.embeddings import DeterministicFakeEmbedding

from langchain_genmem import GenerativeAgentsRetriever, MemoryStream
from langchain_genmem.backends import chroma_erase

PERSONA = "张三"
SECRET = "我的身份证号码是一二三四 (id 1234)"
OTHERS = ("我喜欢吃饺子", "李四住在上海", "周末去了西湖")
MEMORIES = 1_010  # past Chroma's 1,000 operations: its index files hold the elements
WRITES = ("add", "update", "upsert", "delete")
WRITING = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
CHANGING = {"os.remove": 1, "os.rename": 2, "os.truncate": 1, "sqlite3.connect": 1}  # paths
EMB = DeterministicFakeEmbedding(size=8)
NOW = datetime(2024, 3, 1, 9)

Call = tuple[str, str, tuple[Any, ...], dict[str, Any]]


def open_stream(folder: Path) -> MemoryStream:
    """The persona's stream over the embedded folder."""
    return MemoryStream(PERSONA, path=str(folder), embeddings=EMB, clock=lambda: NOW)


def build(folder: Path) -> None:
    """The persona's memories: the secret first (``node_1``), then Chinese everyday ones."""
    stream = open_stream(folder)
    stream.add_event(SECRET, poignancy=9)
    stream.add_many([{"type": "event", "description": f"{OTHERS[i % len(OTHERS)]} ({i})",
                      "poignancy": 3} for i in range(MEMORIES - 1)])
    stream.close()


def top(stream: MemoryStream, query: str) -> list[str]:
    """The descriptions retrieval returns for ``query``, best first."""
    retriever = GenerativeAgentsRetriever(stream=stream, update_access=False, k=3)
    return [d.page_content for d in retriever.invoke(query)]


@contextmanager
def recorded(calls: list[Call]) -> Iterator[None]:
    """Record every write any Chroma collection is asked for, in order."""
    originals = {name: getattr(Collection, name) for name in WRITES}

    def recorder(name: str) -> Callable[..., Any]:
        def record(self: Collection, *args: Any, **kwargs: Any) -> Any:
            calls.append((self.name, name, copy.deepcopy(args), copy.deepcopy(kwargs)))
            return originals[name](self, *args, **kwargs)
        return record

    for name in WRITES:
        setattr(Collection, name, recorder(name))
    try:
        yield
    finally:
        for name, original in originals.items():
            setattr(Collection, name, original)


@contextmanager
def started(argvs: list[list[str]]) -> Iterator[None]:
    """Note the command of every process started meanwhile."""
    original = subprocess.Popen

    class Noted(original):  # type: ignore[valid-type, misc]
        def __init__(self, args: Any, *rest: Any, **kwargs: Any) -> None:
            argvs.append([str(a) for a in ([args] if isinstance(args, str) else args)])
            super().__init__(args, *rest, **kwargs)

    subprocess.Popen = Noted  # type: ignore[misc]
    try:
        yield
    finally:
        subprocess.Popen = original  # type: ignore[misc]


def noted(event: str, args: tuple[Any, ...], inside: Callable[[object], str | None]
          ) -> list[str] | None:
    """What an audit event changes in the folder (``inside`` names its files), or None."""
    if event == "open" and len(args) == 3:
        path, mode, flags = args
        writes = (mode is not None and any(c in str(mode) for c in "wax+")) or (
            isinstance(flags, int) and bool(flags & WRITING))
        name = inside(path) if writes else None
        return None if name is None else ["open", name]
    if event not in CHANGING:
        return None
    paths = args[: CHANGING[event]]
    names = [inside(a) for a in paths]
    if event != "sqlite3.connect" and all(n is None for n in names):
        return None
    return [event, *(n or str(a) for n, a in zip(names, paths, strict=True))]


@contextmanager
def watched(folder: Path, changed: list[list[str]]) -> Iterator[None]:
    """Note what Python code of this process opens to write, renames or removes in ``folder``.

    Also every SQLite database this process's ``sqlite3`` opens. Chroma's own writes (its
    Rust core) are not Python's, and are not noted.
    """
    where = os.path.realpath(folder)
    on = [True]

    def inside(path: object) -> str | None:
        if not isinstance(path, (str, bytes, os.PathLike)):
            return None  # a descriptor
        full = os.path.realpath(os.fsdecode(path))
        return os.path.relpath(full, where) if full.startswith(where + os.sep) else None

    def hook(event: str, args: tuple[Any, ...]) -> None:
        entry = noted(event, args, inside) if on[0] else None
        if entry is not None and entry not in changed:
            changed.append(entry)

    sys.addaudithook(hook)  # for good: it is switched off after
    try:
        yield
    finally:
        on[0] = False


def forget_in(folder: Path, calls: list[Call], argvs: list[list[str]],
              changed: list[list[str]]) -> dict[str, Any]:
    """Forget the secret in ``folder``; what the stream said and retrieved, before and after."""
    seen: dict[str, Any] = {}
    with recorded(calls), started(argvs), watched(folder, changed):
        stream = open_stream(folder)
        seen["vector"] = stream.vector("node_1").astype("<f4").tobytes().hex()
        seen["before"] = top(stream, SECRET)
        report = stream.forget(["node_1"])
        seen["report"] = report.to_dict()
        seen["after"] = top(stream, SECRET)
        stream.close()
        reopened = open_stream(folder)
        seen["reopened"] = [n.description for n in reopened.nodes()]
        seen["reopened_top"] = top(reopened, SECRET)
        reopened.close()
    return seen


def replay(folder: Path, calls: list[Call]) -> None:
    """Make the recorded writes in ``folder`` through ``chromadb`` alone."""
    client = chromadb.PersistentClient(path=str(folder))
    for name, method, args, kwargs in calls:
        collection = client.get_collection(name, embedding_function=None)
        getattr(collection, method)(*args, **kwargs)


def erasure_checks(folder: Path, calls: list[Call]) -> dict[str, Any]:
    """The erasing process's reply to preparing the recorded delete in ``folder``.

    Asked straight, past :func:`~langchain_genmem.backends.chroma_erase.untested`; this
    process's Chroma never opened ``folder``.
    """
    name, ids = next((c[0], c[3]["ids"]) for c in calls if c[1] == "delete")
    uri = f"file:{folder / chroma_erase.DATABASE}?mode=ro"
    with closing(sqlite3.connect(uri, uri=True)) as db:
        collection = db.execute("SELECT id FROM collections WHERE name = ?", (name,)).fetchone()
    request = {"op": "prepare", "folder": str(folder), "collection": str(collection[0]),
               "ids": ids, "dim": EMB.size, "state": None, "rekeyed": []}
    return chroma_erase.answer(request, chroma_erase.Caches())


def main() -> None:
    """Build, copy, forget in one copy, replay its Chroma writes in the other; say what was seen."""
    root, out = Path(sys.argv[1]), Path(sys.argv[2])
    build(root / "base")
    shutil.copytree(root / "base", root / "forgot")
    shutil.copytree(root / "base", root / "control")
    shutil.copytree(root / "base", root / "checked")
    calls: list[Call] = []
    argvs: list[list[str]] = []
    changed: list[list[str]] = []
    seen = forget_in(root / "forgot", calls, argvs, changed)
    replay(root / "control", calls)
    seen["checked"] = erasure_checks(root / "checked", calls)
    seen.update(chroma=chromadb.__version__, secret=SECRET, started=argvs, changed=changed,
                writes=[f"{name}.{method}" for name, method, _, _ in calls])
    out.write_text(json.dumps(seen, ensure_ascii=False), "utf-8")


if __name__ == "__main__":
    main()
