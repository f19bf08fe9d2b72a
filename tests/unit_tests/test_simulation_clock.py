"""A store imported from a simulation save reopens at the save's time; skipped memories are said.

Maria Lopez's save (scratch.json curr_time 2023-02-13 15:17:40) holds 42 thoughts that expire
30 days after they were made: at today's date every one of them has expired. 140 of her
events are "is idle" and never candidates, as in the original.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from langchain_genmem import (
    GenerativeAgentsRetriever,
    MemoryStream,
    SimulationClock,
    load_associative_memory,
)
from langchain_genmem.dataframe import retrieve_memories

MARIA = (
    Path(__file__).resolve().parents[2] / "data" / "generative_agents"
    / "July1_the_ville_isabella_maria_klaus-step-3-12" / "personas" / "Maria Lopez"
    / "bootstrap_memory" / "associative_memory"
)
SAVED_AT = datetime(2023, 2, 13, 15, 17, 40)
FAKE = DeterministicFakeEmbedding(size=32)
THOUGHTS = 'type == "thought"'


@pytest.fixture(scope="module")
def maria_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("maria") / "store"
    stream = load_associative_memory(MARIA, persona="Maria Lopez", embeddings=FAKE,
                                     reembed=True, progress=False, path=str(path))
    assert isinstance(stream.clock, SimulationClock) and stream.clock() == SAVED_AT
    stream.close()
    return path


def test_reopening_without_a_clock_keeps_the_simulation_time(maria_path: Path) -> None:
    with MemoryStream("Maria Lopez", embeddings=FAKE, path=str(maria_path)) as stream:
        assert isinstance(stream.clock, SimulationClock) and stream.clock() == SAVED_AT
        retriever = GenerativeAgentsRetriever(stream=stream, k=5, update_access=False)
        df = retrieve_memories(retriever, "Klaus Mueller", filter=THOUGHTS)
        assert len(df) == 5 and set(df["type"]) == {"thought"}
        # 267 memories: 3 chats are never candidates, 140 events are "is idle"
        assert df.attrs == {"candidates": 124, "skipped_expired": 0, "skipped_idle": 140,
                            "skipped_filtered": 0}


def test_a_given_clock_wins_and_skipped_memories_are_counted(maria_path: Path) -> None:
    with MemoryStream("Maria Lopez", embeddings=FAKE, path=str(maria_path),
                      clock=datetime.now) as stream:
        retriever = GenerativeAgentsRetriever(stream=stream, k=5, update_access=False)
        report = retriever.retrieve_with_report("Klaus Mueller")
        assert report.skipped_expired == 42 and report.candidate_count == 124 - 42
        assert all(d.metadata["skipped_expired"] == 42 for d in report.documents)
        with pytest.warns(UserWarning, match="42 expired memories were skipped"):
            df = retrieve_memories(retriever, "Klaus Mueller", filter=THOUGHTS)
        assert df.empty and df.attrs["skipped_expired"] == 42
        kept = retriever.model_copy(update={"include_expired": True})
        assert len(retrieve_memories(kept, "Klaus Mueller", filter=THOUGHTS)) == 5


def test_idle_memories_are_counted_too() -> None:
    stream = MemoryStream("伊莎贝拉", embeddings=FAKE, clock=SimulationClock(SAVED_AT))
    stream.add_many([
        {"type": "event", "description": "伊莎贝拉 is idle", "poignancy": 1,
         "embedding_key": "伊莎贝拉 is idle"},
        {"type": "event", "description": "伊莎贝拉在煮咖啡", "poignancy": 3},
    ])
    report = GenerativeAgentsRetriever(stream=stream).retrieve_with_report("咖啡")
    assert report.skipped_idle == 1 and report.candidate_count == 1
    assert report.documents[0].metadata["skipped_idle"] == 1
