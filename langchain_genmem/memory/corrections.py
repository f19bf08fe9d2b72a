"""Corrections: a new memory that supersedes earlier ones.

An add may name the memories the new one corrects (``supersedes=["node_3"]``). Each id must
be a live memory of the persona, committed before the add (an id of the same batch is not
stored yet, and the memory's own id is refused by name). The write commits the pairs
``(old, new)`` in the persona's state with the new memory
(:attr:`~langchain_genmem.core.state.StreamState.superseded`), so other processes and
replicas see the correction with the state they read, snapshots and reopening keep it, and
no node record changes (an export to the original's format stays loadable by the original,
which knows nothing of corrections, and holds both versions).

Retrieval leaves superseded memories out by default
(``GenerativeAgentsRetriever(include_superseded=True)`` scores them; they count as
``skipped_filtered``), in process and in the database; ``recency_mode="reverie"`` keeps the
original's behaviour, which scores every memory, as it ignores expiration. A superseded
memory stays in the stream (``get``, ``nodes()``, exports, keyword retrieval: the record of
what was believed). Forgetting the memory that superseded another brings the other back,
unless another live memory supersedes it too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from langchain_genmem.core.errors import UnknownNodeError, ValidationError
from langchain_genmem.core.nodes import MemoryNode, node_number_or_none
from langchain_genmem.core.state import StreamState

if TYPE_CHECKING:
    from langchain_genmem.memory.inputs import MemoryInput


def supersedes_unknown(batch: Sequence[MemoryInput], known: int) -> bool:
    """Whether an item supersedes a number above ``known`` (another writer's new memory?).

    Args:
        batch: the validated items.
        known: the highest node number this process holds.

    Returns:
        True when the stream should catch up before checking.
    """
    return any((node_number_or_none(i) or 0) > known
               for item in batch for i in item.supersedes or ())


def check_supersedes(
    batch: Sequence[MemoryInput], known: int, state: StreamState, persona: str
) -> None:
    """Refuse a batch superseding a memory that is not a live committed one.

    Args:
        batch: the validated items, in order.
        known: the highest node number committed (the batch is numbered after it).
        state: the committed state (its forgotten numbers).
        persona: the persona, for the error.

    Raises:
        ValidationError: an item names its own id.
        UnknownNodeError: an id never committed before the batch, or forgotten.
    """
    for i, item in enumerate(batch):
        for node_id in item.supersedes or ():
            number = node_number_or_none(node_id)
            field = f"items[{i}].supersedes"
            if number == known + i + 1:
                msg = f"{field}: {node_id!r} is this memory itself; a memory cannot supersede it"
                raise ValidationError(msg, field="supersedes")
            if number is None or number > known or state.is_forgotten(number):
                raise UnknownNodeError(node_id, field=field, persona=persona)


def with_corrections(
    state: StreamState, batch: Sequence[MemoryInput], nodes: Sequence[MemoryNode]
) -> StreamState:
    """``state`` with the corrections of a batch recorded (itself when there are none).

    Args:
        state: the state the batch commits.
        batch: the items.
        nodes: their nodes, numbered, in the same order.

    Returns:
        The state to commit.
    """
    pairs = [(node_number_or_none(old) or 0, node.node_count)
             for item, node in zip(batch, nodes, strict=True) for old in item.supersedes or ()]
    if not pairs:
        return state
    return state.model_copy(update={"superseded": [*state.superseded, *pairs]})


def current(numbers: np.ndarray, state: StreamState) -> np.ndarray:
    """Which of ``numbers`` are not superseded (a mask of the same length).

    Args:
        numbers: node numbers.
        state: the committed state.

    Returns:
        True where the memory is current.
    """
    gone = state.superseded_numbers()
    if not gone:
        return np.ones(numbers.shape[0], dtype=bool)
    return ~np.isin(numbers, np.fromiter(gone, dtype=np.int64, count=len(gone)))


def current_sql(
    where: tuple[str, dict[str, Any]], state: StreamState
) -> tuple[str, dict[str, Any]]:
    """A candidate filter's SQL (over ``memory_nodes m``) leaving superseded memories out.

    Args:
        where: the filter's condition and parameters.
        state: the committed state.

    Returns:
        The condition and parameters, unchanged when nothing is superseded.
    """
    gone = state.superseded_numbers()
    if not gone:
        return where
    return (f"{where[0]} AND m.node_count <> ALL(%(f_superseded)s)",
            {**where[1], "f_superseded": sorted(gone)})
