"""Re-keyed turns across processes: a forget of a turn reaches every reader's later turns.

The seeded persona has a conversation of two turns (Chinese, then English): the second is
embedded with the first. A child process forgets the first turn while this process holds a
stream of a Chroma server or a database; a child killed with SIGKILL inside the forget of an
embedded folder (before its commit point, while deleting records) leaves the turns all there
or the re-keyed text committed, never a reader holding the old text after the forget.
"""

from __future__ import annotations

import json
import textwrap
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from tests.integration_tests.test_forget_processes import (
    FORGET,
    KILLED,
    OPEN,
    child,
    killed_forget,
    open_here,
    shared,  # noqa: F401 - the fixture
)
from tests.support.forgotten import memories
from tests.support.writers import kill_when_paused, spawn_python

pytestmark = pytest.mark.slow

ALONE = "Maria: Maria answers that Shanghai is rainy"  # turn 2 without turn 1

# The embedding_key of every node, and whether each vector is the fake model's of its key.
KEYS = OPEN + textwrap.dedent(
    """
    import numpy as np
    where, = json.loads(sys.argv[1])
    stream = open_stream(where)
    model = DeterministicFakeEmbedding(size=16)
    print(json.dumps({n.node_id: [n.embedding_key, bool(np.allclose(
        stream.vector(n.node_id), model.embed_documents([n.embedding_key])[0], atol=1e-6))]
        for n in stream.nodes()}, ensure_ascii=False))
    """
)


def embedded(text: str) -> np.ndarray:
    return np.asarray(DeterministicFakeEmbedding(size=16).embed_documents([text])[0],
                      dtype=np.float32)


def test_open_streams_of_other_processes_read_the_re_keyed_turn(
    shared: dict[str, Any],  # noqa: F811
) -> None:
    here = open_here(shared)
    seeds = memories(here)
    old = here.get(seeds["turn2"]).embedding_key
    assert seeds.text["turn1"] in old
    report = child(FORGET, shared, [seeds["turn1"]])
    assert report["rekeyed"] == [seeds["turn2"]]
    here.refresh()
    assert here.get(seeds["turn2"]).embedding_key == ALONE
    assert np.allclose(here.vector(seeds["turn2"]), embedded(ALONE))
    seen = child(KEYS, shared)
    assert seen[seeds["turn2"]] == [ALONE, True]
    here.close()


@pytest.mark.parametrize("point", ["before_commit", "deleting"])
def test_a_forget_of_a_turn_killed_on_an_embedded_folder_leaves_no_old_text(
    point: str, tmp_path: Path,
) -> None:
    where, seeds, ids = killed_forget(tmp_path, ["turn1"], point)
    seen = child(KEYS, where)
    assert seen[seeds["turn2"]] == [ALONE, True]  # re-keyed before the commit point
    if point == "before_commit":  # not committed: turn 1 is still there, forgettable
        assert seeds["turn1"] in seen
        report = child(FORGET, where, ids)
        assert report["forgotten"][0] == seeds["turn1"]
        assert report["rekeyed"] == [seeds["turn2"]]  # listed again for other readers
    else:
        assert seeds["turn1"] not in seen
    after = child(KEYS, where)
    assert seeds["turn1"] not in after and after[seeds["turn2"]] == [ALONE, True]


def test_a_forget_of_a_turn_killed_inside_the_database_transaction_keeps_the_old_text(
    postgres_server: Any, tmp_path: Path,
) -> None:
    name = f"t_{uuid.uuid4().hex[:16]}"
    where = {"dsn": postgres_server.create_database(name)}
    try:
        stream = open_here(where)
        seeds = memories(stream)
        old = stream.get(seeds["turn2"]).embedding_key
        ready, log = tmp_path / "ready", tmp_path / "killed.log"
        proc = spawn_python(KILLED, json.dumps([where, [seeds["turn1"]], "in_lock", str(ready)]),
                            log_path=log)
        kill_when_paused(proc, ready, log)
        assert child(KEYS, where)[seeds["turn2"]] == [old, True]
        assert stream.forget([seeds["turn1"]]).rekeyed == (seeds["turn2"],)
        assert child(KEYS, where)[seeds["turn2"]] == [ALONE, True]
        stream.close()
    finally:
        postgres_server.drop_database(name)
