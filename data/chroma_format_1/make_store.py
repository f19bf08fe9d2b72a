"""Write a small store, and what its writer reads back, with the code installed.

``store/`` and ``expected.json`` here were written by this script with the code of commit
9edfbed (Chroma record format 1: a metadata key per node field, the description as the
Chroma document), then ``genmem-snapshots/`` and ``genmem-writer.lock`` were removed so an
open reads the records. tests/unit_tests/test_record_format.py checks that later code reads
it identically. Running it with later code writes the later format.

Usage:
    python data/chroma_format_1/make_store.py STORE_FOLDER EXPECTED_JSON
"""

from __future__ import annotations

import json
import sys
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
from langchain_core.embeddings import DeterministicFakeEmbedding

from langchain_genmem import MemoryStream

T0 = datetime(2023, 2, 13, 9, 0)


def write(folder: str) -> MemoryStream:
    """Every kind of node and write: batch, single adds (commit chain), settings, extras."""
    s = MemoryStream("玛丽亚 Lopez", path=folder, embeddings=DeterministicFakeEmbedding(size=8),
                     clock=lambda: T0)
    s.add_many([
        {"type": "event", "description": "玛丽亚 在咖啡馆读物理书", "subject": "玛丽亚 Lopez",
         "predicate": "读", "object": "物理书", "poignancy": 4, "created": T0,
         "expiration": T0 + timedelta(days=2), "keywords": ["物理", "咖啡馆"]},
        {"type": "chat", "description": "conversation with Klaus 关于 research",
         "subject": "玛丽亚 Lopez", "predicate": "chat with", "object": "Klaus", "poignancy": 5,
         "created": T0 + timedelta(minutes=5),
         "filling": [["Klaus", "你好 Maria"], ["玛丽亚 Lopez", "hi!"]]},
    ])
    s.add_event("Klaus 在写论文", subject="Klaus", predicate="写", object="论文", poignancy=3,
                created=T0 + timedelta(minutes=10), embedding_key="Klaus writing",
                filling=["node_2"])
    s.update_settings(recency_w=1.5)
    s.add_thought("玛丽亚 喜欢物理", poignancy=7, evidence=["node_1", "node_3"],
                  created=T0 + timedelta(minutes=20), expiration=T0 + timedelta(days=30))
    for i in range(4):  # single adds: committed by their own records (the chain)
        s.add_event(f"事件 {i} with ünïcode", poignancy=1 + i,
                    created=T0 + timedelta(hours=1, minutes=i), keywords=["事件", f"k{i}"],
                    embedding=np.full(8, 0.5 + i, dtype=np.float32))
    s.set_extra(curr_tile="咖啡馆")
    s.add_event("after extra", poignancy=2, created=T0 + timedelta(hours=2))
    s.add_event("chained again 再", poignancy=6, created=T0 + timedelta(hours=3),
                expiration=T0 + timedelta(days=9))
    s.mark_accessed(["node_1"], when=T0 + timedelta(hours=5))
    s.flush()
    return s


def main() -> None:
    """Write the store and the expected read-back named on the command line."""
    folder, expected = sys.argv[1], sys.argv[2]
    s = write(folder)
    nodes = list(reversed(s.nodes()))
    out = {"state": s.state.model_dump(mode="json"),
           "nodes": [n.model_dump(mode="json") for n in nodes],
           "vectors": [s.vector(n.node_id).tolist() for n in nodes]}
    s.close()
    Path(expected).write_text(json.dumps(out, ensure_ascii=False, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
