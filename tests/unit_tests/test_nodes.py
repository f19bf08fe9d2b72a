"""MemoryNode validation and keyword rules."""

from __future__ import annotations

from datetime import datetime

import pytest
from pydantic import ValidationError as PydanticError

from langchain_genmem import MemoryNode
from langchain_genmem.memory.keywords import KeywordIndex, default_keywords

BASE = dict(node_id="node_1", node_count=1, type_count=1, type="event", depth=0,
            created=datetime(2023, 2, 13), last_accessed=datetime(2023, 2, 13),
            description="Maria is idle", embedding_key="Maria is idle", poignancy=1)


def test_every_concept_node_field_is_kept():
    node = MemoryNode(**BASE)
    # every field of the original, and the two of a conversation memory (None unless set)
    assert set(MemoryNode.model_fields) == {
        "node_id", "node_count", "type_count", "type", "depth", "created", "expiration",
        "last_accessed", "subject", "predicate", "object", "description", "embedding_key",
        "poignancy", "keywords", "filling", "conversation", "speaker",
    }
    assert node.conversation is None and node.speaker is None
    assert node.expiration is None and node.spo == ("", "", "")


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"type": "memo"}, "type"),
        ({"description": ""}, "description"),
        ({"poignancy": float("nan")}, "poignancy"),
        ({"poignancy": "7"}, "poignancy"),
        ({"node_id": "n1"}, "node_id"),
        ({"node_count": 0}, "node_count"),
        ({"depth": -1}, "depth"),
    ],
)
def test_invalid_nodes_are_rejected_naming_the_field(change, field):
    with pytest.raises(PydanticError) as info:
        MemoryNode(**{**BASE, **change})
    assert field in str(info.value)


def test_evidence_only_for_thought_lists():
    thought = MemoryNode(**{**BASE, "type": "thought", "filling": ["node_3", "node_1"]})
    assert thought.evidence == ["node_3", "node_1"]
    assert MemoryNode(**{**BASE, "type": "thought", "filling": None}).evidence == []
    assert MemoryNode(**{**BASE, "filling": ["node_2"]}).evidence == []


def test_default_keywords_follow_the_original():
    assert default_keywords("event", "the Ville:cafe:counter", "is", "the Ville:cafe:busy") == [
        "counter", "busy"]
    assert default_keywords("thought", "Maria", "plan", "study") == ["Maria", "plan", "study"]
    assert default_keywords("chat", "Maria", "chat with", "Maria") == ["Maria"]
    assert default_keywords("event", "", "is", "idle") == ["idle"]


def test_keyword_index_lookup_is_newest_first_and_case_blind():
    idx = KeywordIndex()
    for i, kws in enumerate([["Cafe", "Maria"], ["cafe"], ["MARIA", "咖啡"]], start=1):
        idx.add(MemoryNode(**{**BASE, "node_id": f"node_{i}", "node_count": i, "keywords": kws,
                              "predicate": "is", "object": "busy"}))
    assert idx.lookup("event", ["CAFE"]) == ["node_2", "node_1"]
    assert idx.lookup("event", ["maria", "cafe", "咖啡"]) == ["node_3", "node_2", "node_1"]
    assert idx.strength["event"] == {"cafe": 2, "maria": 2, "咖啡": 1}


def test_indexing_appends_so_opening_a_large_stream_is_linear():
    """Each node is appended to its keyword lists (an insert at the front made opening n
    memories sharing a keyword O(n^2)); the newest-first order is given on the way out."""
    idx = KeywordIndex()
    for i in range(1, 5):
        idx.index_node(MemoryNode(**{**BASE, "node_id": f"node_{i}", "node_count": i,
                                     "keywords": ["玛丽亚"]}))
    assert idx.index["event"]["玛丽亚"] == ["node_1", "node_2", "node_3", "node_4"]
    assert idx.newest_first()["event"]["玛丽亚"] == ["node_4", "node_3", "node_2", "node_1"]
    assert idx.lookup("event", ["玛丽亚"]) == ["node_4", "node_3", "node_2", "node_1"]


def test_strength_changes_are_the_new_nodes_keywords_and_leave_the_maps_alone():
    idx = KeywordIndex()
    idx.add(MemoryNode(**{**BASE, "keywords": ["咖啡", "Maria"]}))
    before = idx.strength
    event, thought = before["event"], before["thought"]
    nodes = [MemoryNode(**{**BASE, "node_id": f"node_{i}", "node_count": i,
                           "keywords": ["咖啡", "咖啡", "Tea"]}) for i in (2, 3)]
    changes = idx.strength_changes(nodes)
    assert changes == {"event": {"咖啡": 3, "tea": 2}}  # once per node, lowercased
    after = idx.strength_after(changes)
    assert after["event"] == {"咖啡": 3, "maria": 1, "tea": 2}
    assert event == {"咖啡": 1, "maria": 1} and idx.strength is before  # nothing changed
    assert after["thought"] is thought  # a map no node changed is shared, not copied
