"""A writer killed with SIGKILL at several points of a write leaves nothing a later memory inherits.

One embedded folder goes through a sequence of real processes: some write normally, others are
stopped at an exact point of a write (after the 2nd page of node records, while removing a
crashed write's records, before the state record, after it) and killed with SIGKILL. Every
killed write's items carry values no later memory should have (expired in 2000, poignancy 9,
their own keywords, vectors and fillings). Once the last process exited, the test reads
everything back: every field of every memory written after a crash must be exactly what its
writer asked for, the leftovers must be gone and counted, and the memories must be retrievable.
"""

from __future__ import annotations

import textwrap
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from langchain_genmem import GenerativeAgentsRetriever, MemoryStream
from tests.support.writers import (
    PAUSE_HOOKS,
    as_printed,
    kill_when_paused,
    recounted_strength,
    run_python,
)

pytestmark = pytest.mark.slow

PERSONA = "玛丽亚 Lopez"
DIM = 16
CRASH_ITEMS = 10  # written in pages of 4: the "pages" point dies with 8 records stored
START = datetime(2023, 2, 14, 8, 0)

CRASHING = PAUSE_HOOKS + textwrap.dedent(
    """
    import sys
    from datetime import datetime, timedelta
    from langchain_core.embeddings import DeterministicFakeEmbedding
    from langchain_genmem import MemoryStream

    folder, point, ready, kind = sys.argv[1:5]
    now = datetime(2023, 2, 13, 9, 0)
    s = MemoryStream("玛丽亚 Lopez", path=folder, embeddings=DeterministicFakeEmbedding(size=16),
                     clock=lambda: now)
    s.backend.batch = 4
    pause_at(s.backend, point, ready)
    expires = datetime(2000, 1, 1) if kind == "event" else now + timedelta(days=30)
    s.add_many([
        {"type": kind, "description": f"crashed {kind} {i} 幽灵", "subject": "ghost",
         "predicate": "haunt", "object": "house", "poignancy": 9, "keywords": ["幽灵", "ghost"],
         "expiration": expires, "embedding": [7.0] * 16, "embedding_key": f"ghost key {i}",
         "created": datetime(1999, 1, 1), "filling": ["node_1"] if kind == "thought" else [],
         }
        for i in range(10)
    ])
    raise SystemExit("the write was not paused")
    """
)

CONTINUING = textwrap.dedent(
    """
    import json, sys
    from datetime import datetime, timedelta
    from langchain_core.embeddings import DeterministicFakeEmbedding
    from langchain_genmem import MemoryStream

    folder, step = sys.argv[1], int(sys.argv[2])
    now = datetime(2023, 2, 14, 8, 0) + timedelta(hours=step)
    s = MemoryStream("玛丽亚 Lopez", path=folder, embeddings=DeterministicFakeEmbedding(size=16),
                     clock=lambda: now)
    before = len(s)
    e1 = s.add_event(f"第{step}步 Maria reads a book", subject="Maria", predicate="read",
                     object="book", poignancy=3)
    e2 = s.add_event(f"step {step}: the kettle is boiling", subject="kettle",
                     predicate="is", object="boiling", poignancy=1, keywords=["kettle"])
    c = s.add_chat(f"step {step}: chat with Klaus", subject="Maria", predicate="chat with",
                   object="Klaus", poignancy=4, filling=[["Maria", "你好"], ["Klaus", "hi"]])
    t = s.add_many([{"type": "thought", "description": f"step {step}: Maria likes books",
                     "subject": "Maria", "predicate": "like", "object": "books",
                     "poignancy": 6, "evidence": [e1.node_id, c.node_id]}])[0]
    print(json.dumps({"before": before, "ids": [n.node_id for n in (e1, e2, c, t)],
                      "orphans_removed": getattr(s, "orphans_removed", None)}))
    """
)

def read_back(folder: str) -> dict:
    """Everything the folder holds, read once every writer has exited (killed or done).

    Read in this process: the point checked is what the crashes left on disk; each
    continuing step above is already a fresh process opening the folder after a crash.
    """
    s = MemoryStream(PERSONA, path=folder, embeddings=DeterministicFakeEmbedding(size=DIM),
                     clock=lambda: datetime(2023, 3, 1))
    try:
        nodes = {n.node_id: n.model_dump(mode="json") for n in s.nodes()}
        vectors = {n.node_id: s.vector(n.node_id).tolist() for n in s.nodes()}
        above = s.backend.nodes.get(
            where={"$and": [{"persona": PERSONA}, {"node_count": {"$gt": len(s)}}]},
            include=[])["ids"]
        found = [d.metadata["node_id"]
                 for d in GenerativeAgentsRetriever(stream=s, k=1000).invoke("Maria")]
        out = {"nodes": nodes, "vectors": vectors, "state": s.state.model_dump(),
               "above": above, "retrieved": found,
               "strength": recounted_strength(reversed(s.nodes()))}
    finally:
        s.close()
    return as_printed(out)


# (what the killed process writes, where it is killed); None: a process that writes normally
STEPS: list[tuple[str, str] | None] = [
    None,
    ("event", "pages"),
    ("event", "sweep"),  # dies after removing 4 of the 8 records the previous kill left
    None,
    ("event", "before_state"),
    None,
    ("thought", "pages"),  # a reflection write: thoughts expiring after 30 days
    None,
    ("event", "after_state"),  # committed before the kill: those memories count
    None,
]
# records each continuing step must find and remove: 4 left by "pages" and "sweep", 10 from
# "before_state", 8 thoughts from "pages", none after "after_state"
EXPECTED_ORPHANS = [0, 4, 10, 8, 0]


def expected_nodes(step: int, ids: list[str]) -> dict[str, dict]:
    """Every field the continuing step's four memories must have."""
    now = (START + timedelta(hours=step)).isoformat()
    e1, e2, c, t = ids
    common = {"created": now, "last_accessed": now, "expiration": None}
    specs = {
        e1: {"type": "event", "depth": 0, "description": f"第{step}步 Maria reads a book",
             "subject": "Maria", "predicate": "read", "object": "book", "poignancy": 3.0,
             "keywords": ["Maria", "book"], "filling": []},
        e2: {"type": "event", "depth": 0, "description": f"step {step}: the kettle is boiling",
             "subject": "kettle", "predicate": "is", "object": "boiling", "poignancy": 1.0,
             "keywords": ["kettle"], "filling": []},
        c: {"type": "chat", "depth": 0, "description": f"step {step}: chat with Klaus",
            "subject": "Maria", "predicate": "chat with", "object": "Klaus", "poignancy": 4.0,
            "keywords": ["Maria", "Klaus"], "filling": [["Maria", "你好"], ["Klaus", "hi"]]},
        t: {"type": "thought", "depth": 1, "description": f"step {step}: Maria likes books",
            "subject": "Maria", "predicate": "like", "object": "books", "poignancy": 6.0,
            "keywords": ["Maria", "like", "books"], "filling": [e1, c]},
    }
    for node_id, spec in specs.items():
        spec.update(common, node_id=node_id, node_count=int(node_id.split("_")[1]),
                    embedding_key=spec["description"], conversation=None, speaker=None)
    specs[c]["embedding_key"] = f"step {step}: chat with Klaus\nMaria: 你好\nKlaus: hi"
    return specs


def test_sigkill_at_every_point_of_a_write_leaves_nothing_to_inherit(spawned, tmp_path: Path):
    folder = str(tmp_path / "store")
    ready = tmp_path / "paused"
    written: list[tuple[int, dict]] = []
    crashed_commits = 0
    for step, crash in enumerate(STEPS):
        if crash is None:
            written.append((step, run_python(CONTINUING, folder, str(step))))
            continue
        kind, point = crash
        log = tmp_path / f"crash-{step}.log"
        proc = spawned(CRASHING, folder, point, str(ready), kind, log_path=log)
        kill_when_paused(proc, ready, log)
        crashed_commits += CRASH_ITEMS if point == "after_state" else 0

    dump = read_back(folder)
    nodes, vectors = dump["nodes"], dump["vectors"]
    fake = DeterministicFakeEmbedding(size=DIM)
    expected_count = 0
    for step, out in written:
        # numbered right after what was committed, whatever the crashes left behind
        assert out["ids"] == [f"node_{out['before'] + i}" for i in range(1, 5)]
        for node_id, want in expected_nodes(step, out["ids"]).items():
            got = {k: v for k, v in nodes[node_id].items() if k != "type_count"}
            assert got == want, node_id
            assert np.allclose(vectors[node_id], fake.embed_documents([want["embedding_key"]])[0])
            assert want["type"] == "chat" or node_id in dump["retrieved"], node_id
        expected_count += 4
    # the crashed writes: none visible except the one killed after its state was stored
    assert len(nodes) == expected_count + crashed_commits == dump["state"]["node_count"]
    ghosts = [n for n in nodes.values() if n["subject"] == "ghost"]
    assert len(ghosts) == crashed_commits
    assert all(n["expiration"] == "2000-01-01T00:00:00" for n in ghosts)
    assert not set(dump["retrieved"]) & {n["node_id"] for n in ghosts}
    # type counts and keyword strengths agree with the nodes that exist
    types = [n["type"] for n in sorted(nodes.values(), key=lambda n: n["node_count"])]
    assert dump["state"]["type_count"] == {t: types.count(t) for t in ("event", "thought", "chat")}
    for n in nodes.values():
        assert n["type_count"] == types[: n["node_count"]].count(n["type"])
    assert dump["state"]["kw_strength"] == dump["strength"]
    # leftovers were removed and reported by the next writer, none remain
    assert [out["orphans_removed"] for _, out in written] == EXPECTED_ORPHANS
    assert dump["above"] == []
