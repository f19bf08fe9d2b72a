"""Writing and forgetting nodes straight through a backend, as a stream's write does.

For the backend tests of forgetting and for `benchmarks/bench_forget.py`: nodes with given
(random) vectors are committed in one write, and a forget runs the write sequence of the
`MemoryBackend` contract (`read_head`, `read_state`, `remove_uncommitted`, then `forget`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

import numpy as np

from langchain_genmem.backends.base import MemoryBackend, StoredNode
from langchain_genmem.core.nodes import MemoryNode
from langchain_genmem.core.state import StreamState

__all__ = ["commit_nodes", "forget", "node", "random_vectors", "text_of"]

START = datetime(2024, 5, 1, 9)


def text_of(number: int) -> str:
    """The description of node `number`: Chinese, unique per number."""
    return f"玛丽亚记得第{number}件事：咖啡馆的谈话"


def node(number: int, text: Callable[[int], str] = text_of) -> MemoryNode:
    """An event numbered `number`, a minute after the one before, keyword "玛丽亚"."""
    created = START + timedelta(minutes=number)
    description = text(number)
    return MemoryNode.model_construct(
        node_id=f"node_{number}", node_count=number, type_count=number, type="event", depth=0,
        created=created, expiration=None, last_accessed=created, subject="玛丽亚",
        predicate="记得", object="谈话", description=description, embedding_key=description,
        poignancy=3.0, keywords=["玛丽亚", "谈话"], filling=[], conversation=None, speaker=None,
    )


def random_vectors(n: int, dim: int, seed: int = 0) -> np.ndarray:
    """`n` random float32 vectors of `dim` numbers."""
    return np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)


def commit_nodes(
    backend: MemoryBackend, persona: str, vectors: np.ndarray,
    text: Callable[[int], str] = text_of,
) -> StreamState:
    """Commit one node per vector after the persona's committed ones, in one write.

    Returns:
        The state committed.
    """
    with backend.write_lock(persona):
        backend.read_head(persona)
        state = backend.read_state(persona) or StreamState(dim=int(vectors.shape[1]))
        backend.remove_uncommitted(persona, state.node_count)
        first = state.node_count + 1
        stored = [StoredNode(node(first + i, text), v) for i, v in enumerate(vectors)]
        counts = dict(state.type_count)
        counts["event"] = counts.get("event", 0) + len(stored)
        new = state.model_copy(update={"rev": state.rev + 1, "type_count": counts,
                                       "node_count": state.node_count + len(stored)})
        backend.commit(persona, stored, new)
    return new


def forget(backend: MemoryBackend, persona: str, numbers: Sequence[int]) -> StreamState:
    """Forget nodes by number in one write (counters left as they are).

    Returns:
        The state committed.
    """
    with backend.write_lock(persona):
        backend.read_head(persona)
        state = backend.read_state(persona)
        assert state is not None, f"persona {persona!r} was never written"
        backend.remove_uncommitted(persona, state.node_count)
        new = state.forgetting(numbers)
        backend.forget(persona, numbers, new)
    return new
