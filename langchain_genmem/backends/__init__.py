"""Storage backends behind MemoryStream.

The contract (:mod:`langchain_genmem.backends.base`), Chroma, PostgreSQL, and the one
function that opens a store (:func:`~langchain_genmem.backends.opener.open_backend`).
"""

from langchain_genmem.backends.base import (
    CAPABILITIES,
    AccessLog,
    Capability,
    DatabaseRanking,
    Head,
    MemoryBackend,
    ReadViews,
    ScoredRow,
    SnapshotStore,
    StoredNode,
    StoreRanking,
    access_log_of,
    contract_problems,
    ranking_of,
    snapshots_of,
    views_of,
)

__all__ = [
    "CAPABILITIES",
    "AccessLog",
    "Capability",
    "DatabaseRanking",
    "Head",
    "MemoryBackend",
    "ReadViews",
    "ScoredRow",
    "SnapshotStore",
    "StoreRanking",
    "StoredNode",
    "access_log_of",
    "contract_problems",
    "ranking_of",
    "snapshots_of",
    "views_of",
]
